#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Boot the test guest (Linux + busybox, TCG) on one USB controller with the
# network device under test, and check what the Linux driver made of it.
#
#   tests/guest/run-guest-test.sh [CONTROLLER] [DEVICE[,PROPS]]
#
#   CONTROLLER  xhci (-device qemu-xhci, super speed), xhci-hs (qemu-xhci
#               with USB 2 ports only: high speed), ehci (usb-ehci), uhci
#               (piix3-usb-uhci, full speed) or ohci (pci-ohci, full speed);
#               default xhci; properties may follow: xhci,p3=0
#   DEVICE      usb-ncm-dl (default, or $NCM_DEVICE); properties are passed
#               through: usb-ncm-dl,pcap=/tmp/ncm.pcap. usb-net and
#               virtio-net-pci work too, for comparison (NCM-only checks are
#               then left out).
#
# The guest boots with cdc_ncm's own NTB sizes, pings the gateway 20 times
# with 56 and with 1400 bytes (no loss allowed), runs iperf3 each way, then
# raises rx_max and tx_max to 64 KiB with the interface up and traffic
# running (a write that hangs is a FAIL with the writer's kernel stack; a
# guest kernel lockup report is a FAIL with its backtrace, and QEMU is
# stopped a minute after it) and pings again.
#
# Environment: KERNEL / KERNEL_IMAGE (see tests/guest/image.sh),
#   QEMU (default build/qemu/qemu-system-x86_64), GUEST_TIMEOUT (300 s),
#   IPERF_TIME (5 s per direction; 2 s at full speed), NCM_APPEND (extra
#   kernel parameters, e.g. "ncm.mtu=4000"), QEMU_EXTRA (extra QEMU
#   arguments), LOG_NAME (log file name, default CONTROLLER-DEVICE),
#   GUEST_LOCKUP_GRACE (60 s; see tests/guest/lib.sh).
#
# Prints "PASS: guest/<controller>/<check>" or
# "FAIL: guest/<controller>/<check> (<what was seen>)" per check; when QEMU
# died, the FAIL lines say how (its assertion message). The full console
# log is in build/guest-logs/. Exits 1 when any check failed.
set -euo pipefail
. "$(dirname "$0")/../../scripts/setup/common.sh"
. "$NCM_TOP/tests/guest/lib.sh"

case ${1:-} in -h|--help) sed -n '3,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
CTRL=${1:-xhci}
DEVICE=${2:-${NCM_DEVICE:-usb-ncm-dl}}
GUEST_TIMEOUT=${GUEST_TIMEOUT:-300}
CNAME=${CTRL//,/-}
guest_device_args "$CTRL" "$DEVICE"
# Full speed (12 Mbit/s) under TCG: short TCP runs keep the suite in budget
case $CNAME in
uhci*|ohci*|*-uhci*|*-ohci*) IPERF_TIME=${IPERF_TIME:-2} LIVE_TIME=6 ;;
*) IPERF_TIME=${IPERF_TIME:-5} LIVE_TIME=8 ;;
esac
[ "$GUEST_IS_USB" = 1 ] || CNAME=pci
LOG_NAME=${LOG_NAME:-$CNAME-$GUEST_DEV_NAME}
LOG=$NCM_BUILD/guest-logs/$LOG_NAME.log
REL_LOG=${LOG#"$NCM_TOP"/}

npass=0
nfail=0
pass() { echo "PASS: guest/$CNAME/$1"; npass=$((npass + 1)); }
QEMU_DIED=""
fail() {
    local why=$2
    [ "${rc:-0}" = 124 ] && [ "$1" != poweroff ] && why="$why; QEMU killed after ${GUEST_TIMEOUT}s"
    [ -n "$QEMU_DIED" ] && why="$why; $QEMU_DIED"
    echo "FAIL: guest/$CNAME/$1 ($why)"
    nfail=$((nfail + 1))
}
# check NAME CONDITION-RESULT(0/1) SEEN
check() { if [ "$2" = 0 ]; then pass "$1"; else fail "$1" "$3"; fi; }

step "guest test: $CNAME with $DEVICE"
guest_need_qemu
if ! guest_has_device "$GUEST_DEV_NAME"; then
    fail device "$GUEST_QEMU has no -device $GUEST_DEV_NAME"
    exit 1
fi

step "guest image"
if ! GDIR=$(bash "$NCM_TOP/tests/guest/image.sh" --print-dir); then
    fail image "tests/guest/image.sh failed, see the messages above"
    exit 1
fi

mkdir -p "$NCM_BUILD/guest-logs"
trap guest_iperf_stop EXIT
guest_iperf_start "$NCM_BUILD/guest-logs/$LOG_NAME.iperf3-server.log"
note "iperf3 server on 127.0.0.1:$GUEST_IPERF_PORT"

LIVE=""
[ "$GUEST_DRIVER" = cdc_ncm ] && LIVE="ncm.live_raise=1 ncm.live_time=$LIVE_TIME"
guest_qemu_cmd "$GDIR" "ncm.mode=test ncm.driver=$GUEST_DRIVER \
ncm.port=$GUEST_IPERF_PORT ncm.time=$IPERF_TIME ncm.ping_sizes=56,1400 \
$LIVE ${NCM_APPEND:-}"
step "booting the guest (TCG, timeout ${GUEST_TIMEOUT}s); log: $REL_LOG"
rc=0
t0=$SECONDS
guest_run_logged "$LOG" "$GUEST_TIMEOUT" || rc=$?
boot_s=$((SECONDS - t0))
guest_iperf_stop
step "guest finished (QEMU exit status $rc) after ${boot_s}s"

v() { guest_val "$LOG" "$1"; }

# How QEMU or the guest kernel died, for every FAIL line
qerr=$(guest_qemu_error "$LOG")
lockup=$(guest_lockup "$LOG")
hcerr=$(guest_hc_error "$LOG")
if [ -n "$qerr" ]; then
    QEMU_DIED="QEMU aborted (status $rc) during '$(grep -a 'NCMTEST phase=' "$LOG" | tail -n1 | sed 's/.*phase=//')': $qerr"
elif [ -n "$lockup" ]; then
    QEMU_DIED="guest kernel: $lockup"
fi
[ -n "$hcerr" ] && QEMU_DIED="${QEMU_DIED:+$QEMU_DIED; }guest: $hcerr"

if ! grep -q 'NCMTEST phase=boot' "$LOG"; then
    if [ "$rc" = 124 ]; then
        seen="no output from /init within ${GUEST_TIMEOUT}s"
    else
        seen="QEMU status $rc: $(grep -v '^#' "$LOG" | grep -a . | tail -n 1 | cut -c1-200)"
    fi
    fail boot "$seen"
    note "full console log: $REL_LOG"
    exit 1
fi
pass boot

is() { if [ "$(v "$1")" = "$2" ]; then echo 0; else echo 1; fi; }

driver=$(v driver)
err=$(v error)
check driver "$(is driver "$GUEST_DRIVER")" \
    "driver=${driver:-none}, expected $GUEST_DRIVER${err:+; guest: $err}"

if [ "$GUEST_DRIVER" = cdc_ncm ]; then
    # usb-ncm-dl matches cdc_ncm_zlp_info (DisplayLink vendor id); any other
    # NCM device gets "CDC NCM (NO ZLP)".
    want="CDC NCM (SEND ZLP)"
    [ "$GUEST_DEV_NAME" = usb-ncm-dl ] || want="CDC NCM"
    dline=$(v dmesg)
    case $dline in *"$want"*) r=0 ;; *) r=1 ;; esac
    check zlp-info "$r" "dmesg: ${dline:-nothing}"
    if [ "$GUEST_DEV_NAME" = usb-ncm-dl ]; then
        check ntb-in-max "$(is cdc_ncm.dwNtbInMaxSize 65536)" \
            "dwNtbInMaxSize=$(v cdc_ncm.dwNtbInMaxSize)"
        check ntb-out-max "$(is cdc_ncm.dwNtbOutMaxSize 65536)" \
            "dwNtbOutMaxSize=$(v cdc_ncm.dwNtbOutMaxSize)"
    fi
    # What /init wrote (65536 unless NCM_APPEND says ncm.rx_max=...) must
    # stick, capped by what the device advertises. cdc_ncm adds 1 to a
    # tx_max below dwNtbOutMaxSize that is a multiple of wMaxPacketSize.
    for m in rx_max:dwNtbInMaxSize tx_max:dwNtbOutMaxSize; do
        dev=$(v "cdc_ncm.${m#*:}")
        m=${m%:*}
        req=$(v "$m.requested")
        [ -n "$req" ] || continue           # ncm.$m=none: not written
        exp=$req
        [ -n "$dev" ] && [ "$dev" -lt "$exp" ] 2>/dev/null && exp=$dev
        got=$(v "$m.readback")
        r=1
        if [ "$(v "$m.write")" = ok ]; then
            [ "$got" = "$exp" ] && r=0
            [ "$m" = tx_max ] && [ "$exp" != "$dev" ] && [ "$got" = $((exp + 1)) ] && r=0
        fi
        check "${m/_/-}" "$r" "write $req: $(v "$m.write"), read back ${got:-nothing}, expected $exp"
    done
fi

check carrier "$(is carrier 1)" "carrier=$(v carrier) after $(v carrier_wait_s)s"

# check_ping NAME KEY: 20 of 20 replies
check_ping() {
    local loss r=1
    loss=$(v "$2_loss_pct")
    [ "$loss" = 0 ] && [ "$(v "$2_received")" = 20 ] && r=0
    check "$1" "$r" "loss ${loss:-?}%, $(v "$2_received") of 20 replies"
}
check_ping ping ping
check_ping ping-1400 ping1400

for d in up down; do
    mbps=$(v iperf_${d}_receiver_mbps)
    r=1
    [ "$(v iperf_${d}_rc)" = 0 ] && [ -n "$mbps" ] &&
        awk -v m="$mbps" 'BEGIN { exit !(m > 0) }' && r=0
    check "iperf-$d" "$r" "rc=$(v iperf_${d}_rc), ${mbps:-no} Mbit/s"
done

if [ -n "$LIVE" ]; then
    # rx_max, then tx_max raised to 64 KiB under traffic: the writes come
    # back, the traffic goes on, and the link works afterwards
    lr=$(v live_raise)
    r=1
    [ "$lr" = ok ] && r=0
    case $lr in
    hang*)
        stack=$(guest_stuck_stack "$LOG")
        seen="$lr: the write to sysfs did not return within 30s${stack:+; its kernel stack: $stack}" ;;
    fail) seen="a write failed: rx_max $(v rx_max.write), tx_max $(v tx_max.write)" ;;
    "") seen="the guest never finished the raise (last phase: $(grep -a 'NCMTEST phase=' "$LOG" | tail -n1 | sed 's/.*phase=//'))" ;;
    *) seen=$lr ;;
    esac
    check live-raise "$r" "$seen"
    r=1
    [ "$(v live_iperf_rc)" = 0 ] && r=0
    check live-raise-traffic "$r" "iperf3 -R during the raise: rc=$(v live_iperf_rc), ping loss $(v live_ping_loss_pct)%"
    check_ping ping-after-raise ping_after
fi

r=1
[ "$rc" = 0 ] && grep -q 'NCMTEST phase=done' "$LOG" && r=0
if [ "$rc" = 124 ]; then seen="timed out after ${GUEST_TIMEOUT}s"
else seen="QEMU status $rc, guest $(grep -q 'NCMTEST phase=done' "$LOG" && echo finished || echo 'did not finish')"; fi
check poweroff "$r" "$seen"

usb=$(v usb_speed_mbps)
note "$CNAME/$GUEST_DEV_NAME:${usb:+ USB bus $usb Mbit/s,}" \
    "up $(v iperf_up_receiver_mbps) Mbit/s, down $(v iperf_down_receiver_mbps) Mbit/s," \
    "ping $(v ping_rtt_ms) ms, guest uptime $(v uptime)s, boot ${boot_s}s"

if [ "$nfail" -gt 0 ]; then
    note "full console log: $REL_LOG"
    if [ "$GUEST_IS_USB" = 1 ]; then
        note "guest dmesg (USB/network lines):"
        guest_dmesg "$LOG" | grep -iE 'usb [0-9]|cdc|usbnet|xhci|ehci|error|fail|warn' |
            tail -n 25 | sed 's/^/      /' || true
    fi
fi
note "guest/$CNAME: $npass checks passed, $nfail failed"
[ "$nfail" = 0 ]
