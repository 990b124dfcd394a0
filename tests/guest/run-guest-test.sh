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
#               default xhci; properties may follow: xhci,p3=0. The
#               set-ups of real machines (tests/guest/lib.sh has them):
#               ehci-uhci (ICH9 EHCI + UHCI companions, as libvirt on q35)
#               and ehci-ohci (ich9-usb-ehci2 + pci-ohci,masterbus=): after the
#               TCP runs the port goes to the companion (the EHCI's sysfs
#               "companion" file), the device must come back there at
#               full speed and answer pings, again after a re-plug
#               (usb-ncm-fault replug-ms), then at high speed on the
#               EHCI when the port is given back; xhci-hub (behind a
#               usb-hub, full speed) and ehci-uhci-hub (the hub on the
#               ICH9 EHCI goes to its UHCI companion); xhci-dual (two
#               usb-ncm-dl, iperf3 on both at once, each way). These skip
#               the live raise.
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
# ARCH=arm64: the same checks on an arm64 guest (qemu-system-aarch64 -M
# virt, TCG; the controller on virt's PCIe host), reported as
# guest/arm64-<controller>/<check>, log build/guest-logs/arm64-*.log.
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
# the companion set-ups re-plug the device over QMP: it needs an id
case $CTRL:$DEVICE in
ehci-uhci*:*,id=*|ehci-ohci*:*,id=*) ;;
ehci-uhci*|ehci-ohci*) DEVICE="$DEVICE,id=ncm0" ;;
esac
guest_device_args "$CTRL" "$DEVICE"
# Full speed (12 Mbit/s) under TCG: short TCP runs keep the suite in budget
if [ "${GUEST_USB_SPEED:-}" = 12 ]; then
    IPERF_TIME=${IPERF_TIME:-2} LIVE_TIME=6
else
    IPERF_TIME=${IPERF_TIME:-5} LIVE_TIME=8
fi
# the set-ups of real machines: one boot each, kept short
TOPO=""
case ${CTRL%%,*} in ehci-uhci|ehci-ohci|*-hub|xhci-dual) TOPO=1 ;; esac
[ "$GUEST_IS_USB" = 1 ] || CNAME=pci
# another guest architecture: its own names, beside the x86 legs'
[ "$NCM_ARCH" = x86_64 ] || CNAME=$NCM_ARCH-$CNAME
LOG_NAME=${LOG_NAME:-$CNAME-$GUEST_DEV_NAME}
LOG=$NCM_BUILD/guest-logs/$LOG_NAME.log
REL_LOG=${LOG#"$NCM_TOP"/}

runner_begin "guest/$CNAME"
# a FAIL of a run QEMU did not finish says so (but for poweroff's own)
runner_why() {
    [ "${rc:-0}" = 124 ] && [ "$1" != poweroff ] && echo "; QEMU killed after ${GUEST_TIMEOUT}s"
    return 0
}

step "guest test: $CNAME with $DEVICE"
guest_need_qemu
if ! guest_has_device "$GUEST_DEV_NAME"; then
    runner_fail device "$GUEST_QEMU has no -device $GUEST_DEV_NAME"
    exit 1
fi

step "guest image"
if ! GDIR=$(bash "$NCM_TOP/tests/guest/image.sh" --print-dir); then
    runner_fail image "tests/guest/image.sh failed, see the messages above"
    exit 1
fi

mkdir -p "$NCM_BUILD/guest-logs"
rm -f "$LOG" "$LOG".*
IPERF2_PID=""
CUES_PID=""
cleanup() {
    guest_iperf_stop
    if [ -n "$IPERF2_PID" ]; then
        kill "$IPERF2_PID" 2>/dev/null || true
        wait "$IPERF2_PID" 2>/dev/null || true
    fi
    if [ -n "$CUES_PID" ]; then kill "$CUES_PID" 2>/dev/null || true; fi
    rm -f "${QMP_SOCK:-}"
}
trap cleanup EXIT
EXTRA=""
if [ "$GUEST_NICS" -ge 2 ]; then
    # the second NIC's own server (slirp n1 maps 10.0.3.2 to 127.0.0.1)
    guest_iperf_start "$LOG.iperf3-server-2.log"
    IPERF2_PID=$GUEST_IPERF_PID IPERF2_PORT=$GUEST_IPERF_PORT
    GUEST_IPERF_PID=""
    EXTRA="ncm.nics=$GUEST_NICS ncm.port2=$IPERF2_PORT ncm.mac=52:54:00:12:36:00"
fi
guest_iperf_start "$LOG.iperf3-server.log"
note "iperf3 server on 127.0.0.1:$GUEST_IPERF_PORT${IPERF2_PID:+ and :$IPERF2_PORT}"
[ -n "$GUEST_COMPANION" ] && EXTRA="$EXTRA ncm.companion=1"

LIVE=""
[ "$GUEST_DRIVER" = cdc_ncm ] && [ -z "$TOPO" ] && LIVE="ncm.live_raise=1 ncm.live_time=$LIVE_TIME"
guest_qemu_cmd "$GDIR" "ncm.mode=test ncm.driver=$GUEST_DRIVER \
ncm.port=$GUEST_IPERF_PORT ncm.time=$IPERF_TIME ncm.ping_sizes=56,1400 \
$LIVE $EXTRA ${NCM_APPEND:-}"
if [ -n "$GUEST_COMPANION" ]; then
    # the guest's "cue=replug MS": usb-ncm-fault replug-ms on the device
    guest_cues_start "$LOG" "/machine/peripheral/$(sed -n 's/.*,id=\([^,]*\).*/\1/p' <<<"$DEVICE")"
fi
step "booting the guest (${GUEST_ACCEL^^}, timeout ${GUEST_TIMEOUT}s); log: $REL_LOG"
rc=0
t0=$SECONDS
guest_run_logged "$LOG" "$GUEST_TIMEOUT" || rc=$?
boot_s=$((SECONDS - t0))
[ -z "$CUES_PID" ] || guest_cues_wait
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
    runner_fail boot "$seen"
    note "full console log: $REL_LOG"
    exit 1
fi
runner_pass boot

is() { if [ "$(v "$1")" = "$2" ]; then echo 0; else echo 1; fi; }

driver=$(v driver)
err=$(v error)
runner_check driver "$(is driver "$GUEST_DRIVER")" \
    "driver=${driver:-none}, expected $GUEST_DRIVER${err:+; guest: $err}"

if [ "$GUEST_DRIVER" = cdc_ncm ]; then
    # usb-ncm-dl matches cdc_ncm_zlp_info (DisplayLink vendor id); any other
    # NCM device gets "CDC NCM (NO ZLP)".
    want="CDC NCM (SEND ZLP)"
    [ "$GUEST_DEV_NAME" = usb-ncm-dl ] || want="CDC NCM"
    dline=$(v dmesg)
    case $dline in *"$want"*) r=0 ;; *) r=1 ;; esac
    runner_check zlp-info "$r" "dmesg: ${dline:-nothing}"
    if [ "$GUEST_DEV_NAME" = usb-ncm-dl ]; then
        runner_check ntb-in-max "$(is cdc_ncm.dwNtbInMaxSize 65536)" \
            "dwNtbInMaxSize=$(v cdc_ncm.dwNtbInMaxSize)"
        runner_check ntb-out-max "$(is cdc_ncm.dwNtbOutMaxSize 65536)" \
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
        # checks rx-max, tx-max
        runner_check "${m/_/-}" "$r" "write $req: $(v "$m.write"), read back ${got:-nothing}, expected $exp"
    done
fi

runner_check carrier "$(is carrier 1)" "carrier=$(v carrier) after $(v carrier_wait_s)s"
if [ "$GUEST_IS_USB" = 1 ] && [ -n "$GUEST_USB_SPEED" ]; then
    runner_check usb-speed "$(is usb_speed_mbps "$GUEST_USB_SPEED")" \
        "the guest sees the device at $(v usb_speed_mbps) Mbit/s, expected $GUEST_USB_SPEED"
fi

# check_ping NAME KEY: 20 of 20 replies
check_ping() {
    local loss r=1
    loss=$(v "$2_loss_pct")
    [ "$loss" = 0 ] && [ "$(v "$2_received")" = 20 ] && r=0
    runner_check "$1" "$r" "loss ${loss:-?}%, $(v "$2_received") of 20 replies"
}
check_ping ping ping
check_ping ping-1400 ping1400

# checks iperf-up, iperf-down
for d in up down; do
    mbps=$(v iperf_${d}_receiver_mbps)
    r=1
    [ "$(v iperf_${d}_rc)" = 0 ] && [ -n "$mbps" ] &&
        awk -v m="$mbps" 'BEGIN { exit !(m > 0) }' && r=0
    runner_check "iperf-$d" "$r" "rc=$(v iperf_${d}_rc), ${mbps:-no} Mbit/s"
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
    runner_check live-raise "$r" "$seen"
    r=1
    [ "$(v live_iperf_rc)" = 0 ] && r=0
    runner_check live-raise-traffic "$r" "iperf3 -R during the raise: rc=$(v live_iperf_rc), ping loss $(v live_ping_loss_pct)%"
    check_ping ping-after-raise ping_after
fi

# behind a usb-hub: the device's path has the hub's port in it, and the
# controller is the one the hub is on (ehci-uhci-hub: the UHCI companion
# the guest's EHCI driver gave the full-speed hub to)
want_hc=""
case ${CTRL%%,*} in
xhci-hub) want_hc=xhci ;;
ehci-uhci-hub) want_hc=uhci ;;
esac
if [ -n "$want_hc" ]; then
    r=1; [ "$(v usb_devpath)" = 1.1 ] && [[ "$(v usb_hc)" == *"$want_hc"* ]] && r=0
    runner_check behind-hub "$r" \
        "the device at USB path $(v usb_devpath) (expected 1.1) on $(v usb_hc) (expected a $want_hc driver)"
fi

# the port handed to the EHCI's companion and back (init-topology.sh)
if [ -n "$GUEST_COMPANION" ]; then
    chc=$(v companion_hs_hc)
    note "companion: EHCI $(v companion_ehci), port $(v companion_port); on the EHCI: $chc"
    r=1; [[ "$(v companion_write)" == ok* ]] && r=0
    runner_check companion-write "$r" \
        "echo $(v companion_port) > .../$(v companion_ehci)/companion: $(v companion_write)$(v companion_error)"
    for st in fs:12:"on the ${GUEST_COMPANION^^} companion" \
              replug:12:"on the companion again after replug-ms" \
              back:480:"on the EHCI again (-$(v companion_port))"; do
        tag=${st%%:*} rest=${st#*:}
        sp=${rest%%:*} where=${rest#*:}
        hc=$(v "companion_${tag}_hc")
        # on the companion: another PCI function, the uhci/ohci driver
        want_drv=ehci
        [ "$sp" = 12 ] && want_drv=$GUEST_COMPANION
        # checks companion-fs, companion-replug, companion-back and
        # companion-fs-ping, companion-replug-ping, companion-back-ping
        r=1; [ "$(v "companion_${tag}_s")" != never ] && [ -n "$(v "companion_${tag}_s")" ] && [ "$(v "companion_${tag}_speed")" = "$sp" ] && [[ "${hc#* }" == *"$want_drv"* ]] && r=0
        runner_check "companion-$tag" "$r" \
            "$where: cdc_ncm back after $(v "companion_${tag}_s") s, at $(v "companion_${tag}_speed") Mbit/s (expected $sp) on ${hc:-?} (expected a $want_drv driver); cdc_ncm bound $(v "companion_${tag}_binds") times"
        r=1; [ "$(v "companion_${tag}_ping_received")" = 20 ] && r=0
        runner_check "companion-$tag-ping" "$r" \
            "$where: $(v "companion_${tag}_ping_received") of 20 pings answered"
        note "companion $tag: back after $(v "companion_${tag}_s") s at $(v "companion_${tag}_speed") Mbit/s on $hc, ping $(v "companion_${tag}_ping_rtt_ms") ms"
    done
    [ -r "$LOG.cues.json" ] && note "cues: $(python3 -c 'import json,sys; print("; ".join(a["cue"] + ": " + a["result"] for a in json.load(open(sys.argv[1]))["actions"]))' "$LOG.cues.json" 2>/dev/null)"
fi
# two NCM functions with traffic at once (init-topology.sh)
if [ "$GUEST_NICS" -ge 2 ]; then
    r=1; [ "$(v dual_iface)" != none ] && [ -n "$(v dual_iface)" ] && [ "$(v dual_carrier)" = 1 ] && [ "$(v dual_speed)" = "$GUEST_USB_SPEED" ] && r=0
    runner_check second-nic "$r" \
        "second cdc_ncm interface: $(v dual_iface) ($(v dual_mac)), carrier $(v dual_carrier), $(v dual_speed) Mbit/s"
    r=1; [ "$(v dual_ping_received)" = 10 ] && r=0
    runner_check second-nic-ping "$r" \
        "$(v dual_ping_received) of 10 pings to 10.0.3.2 answered"
    # checks dual-iperf-up, dual-ping-up, dual-iperf-down, dual-ping-down
    for d in up down; do
        r=1; [ "$(v "dual_${d}_rc")" = "0 0" ] && awk -v m="$(v "dual_${d}_mbps")" "BEGIN { split(m, a, \" \"); exit !(a[1] > 0 && a[2] > 0) }" && r=0
        runner_check "dual-iperf-$d" "$r" \
            "iperf3 on both at once: rc $(v "dual_${d}_rc"), $(v "dual_${d}_mbps") Mbit/s"
        r=1; [ "$(v "dual_${d}_ping_loss")" = "0 0" ] && r=0
        runner_check "dual-ping-$d" "$r" \
            "ping every 100 ms on each during it: loss $(v "dual_${d}_ping_loss") %"
        note "both at once, $d: $(v "dual_${d}_mbps") Mbit/s; ping loss $(v "dual_${d}_ping_loss") %"
    done
fi

r=1
[ "$rc" = 0 ] && grep -q 'NCMTEST phase=done' "$LOG" && r=0
if [ "$rc" = 124 ]; then seen="timed out after ${GUEST_TIMEOUT}s"
else seen="QEMU status $rc, guest $(grep -q 'NCMTEST phase=done' "$LOG" && echo finished || echo 'did not finish')"; fi
runner_check poweroff "$r" "$seen"

usb=$(v usb_speed_mbps)
note "$CNAME/$GUEST_DEV_NAME:${usb:+ USB bus $usb Mbit/s,}" \
    "up $(v iperf_up_receiver_mbps) Mbit/s, down $(v iperf_down_receiver_mbps) Mbit/s," \
    "ping $(v ping_rtt_ms) ms, guest uptime $(v uptime)s, boot ${boot_s}s"

if [ "$RUNNER_NFAIL" -gt 0 ]; then
    note "full console log: $REL_LOG"
    if [ "$GUEST_IS_USB" = 1 ]; then
        note "guest dmesg (USB/network lines):"
        guest_dmesg "$LOG" | grep -iE 'usb [0-9]|cdc|usbnet|xhci|ehci|error|fail|warn' |
            tail -n 25 | sed 's/^/      /' || true
    fi
fi
runner_end
