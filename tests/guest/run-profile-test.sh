#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Every profile= preset under Linux's cdc_ncm in ONE boot: five NCM
# functions on one controller, each on its own slirp netdev
# (10.0.(2+I).0/24), checked from the guest side by
# tests/guest/init-profiles.sh.
#
#   tests/guest/run-profile-test.sh [CONTROLLER]
#
#   I  device                            profile
#   0  usb-ncm-dl                        displaylink (its default)
#   1  usb-ncm                           generic (its default)
#   2  usb-ncm-dl,profile=rtl8156
#   3  usb-ncm-dl,profile=f_ncm
#   4  usb-ncm-dl,profile=minimal
#
# Per profile: cdc_ncm binds, at the controller's speed (super speed on
# xhci, full speed on uhci/ohci) and with the "SEND ZLP" info only for
# the DisplayLink vendor id; the sysfs NTB parameters and usb ids are the
# profile's, 10 pings of 56 and 5 of 1400 bytes all answered, iperf3 each
# way; and which driver path it took, from the device's x-stats read over
# QMP when the guest asks (tests/guest/qmp-cues.py): the 4-byte
# SET_NTB_INPUT_SIZE that rx_max=8192 triggers (Linux 6.1 sends the 4-byte
# form even to the rtl8156 profile, which offers the 8-byte one),
# SET_CRC_MODE(0) for f_ncm (CRC mode offered, Linux turns it off: no CRC
# NDP either way), no multicast filter or statistic request (Linux asks
# for all multicast instead), no stalled request at all, and one datagram
# per NTB both ways for minimal.
#
# CONTROLLER: xhci (default), xhci-hs, ehci, uhci, ohci as for
# run-guest-test.sh. Environment: KERNEL, QEMU, GUEST_TIMEOUT (420 s),
# IPERF_TIME (2 s per direction), LOG_NAME. Prints PASS:/FAIL: lines
# "guest/profiles-CONTROLLER/pI-PROFILE/CHECK"; console log in
# build/guest-logs/profiles-CONTROLLER.log, counters in .cues.json.
set -euo pipefail
. "$(dirname "$0")/../../scripts/setup/common.sh"
. "$NCM_TOP/tests/guest/lib.sh"

case ${1:-} in -h|--help) sed -n '3,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
CTRL=${1:-xhci}
GUEST_TIMEOUT=${GUEST_TIMEOUT:-420}
IPERF_TIME=${IPERF_TIME:-2}
CNAME=profiles-${CTRL//,/-}
LOG_NAME=${LOG_NAME:-$CNAME}
LOG=$NCM_BUILD/guest-logs/$LOG_NAME.log
REL_LOG=${LOG#"$NCM_TOP"/}

NAMES=(displaylink generic rtl8156 f_ncm minimal)
DEVS=("usb-ncm-dl" "usb-ncm" "usb-ncm-dl,profile=rtl8156"
      "usb-ncm-dl,profile=f_ncm" "usb-ncm-dl,profile=minimal")

runner_begin "guest/$CNAME" "$REL_LOG"

step "guest profiles test: ${#DEVS[@]} NCM functions on $CTRL"
guest_need_qemu
# the controller as run-guest-test.sh names it (qemu-xhci with 8 ports, so
# that no function ends up behind QEMU's automatic full-speed hub); then
# one function per profile
case $CTRL in
xhci) guest_device_args "xhci,p2=8,p3=8" usb-ncm-dl ;;
*) guest_device_args "$CTRL" usb-ncm-dl ;;
esac
case ${CTRL%%,*} in
xhci|qemu-xhci|nec-usb-xhci) want_speed=5000 ;;
uhci*|ohci*|piix3-usb-uhci|pci-ohci) want_speed=12 ;;
*) want_speed=480 ;;
esac
GUEST_DEV_ARGS=("${GUEST_CTL_ARGS[@]}")
for i in "${!DEVS[@]}"; do
    [ "$i" = 0 ] || GUEST_DEV_ARGS+=(-netdev "user,id=n$i,net=10.0.$((2 + i)).0/24")
    GUEST_DEV_ARGS+=(-device "${DEVS[$i]},id=ncm$i,netdev=n$i,bus=usbctl.0,mac=52:54:00:12:36:0$i")
done
if ! GDIR=$(bash "$NCM_TOP/tests/guest/image.sh" --print-dir); then
    runner_fail image "tests/guest/image.sh failed, see the messages above"
    exit 1
fi
mkdir -p "$NCM_BUILD/guest-logs"
rm -f "$LOG" "$LOG".*
CUES_PID=""
cleanup() {
    guest_iperf_stop
    [ -n "$CUES_PID" ] && kill "$CUES_PID" 2>/dev/null
    rm -f "${QMP_SOCK:-}"
}
trap cleanup EXIT
guest_iperf_start "$LOG.iperf3-server.log"
guest_qemu_cmd "$GDIR" "ncm.mode=profiles ncm.profiles=${#DEVS[@]} \
ncm.driver=cdc_ncm ncm.port=$GUEST_IPERF_PORT ncm.time=$IPERF_TIME ${NCM_APPEND:-}"
guest_cues_start "$LOG" /machine/peripheral/ncm0

step "booting the guest (TCG, timeout ${GUEST_TIMEOUT}s); log: $REL_LOG"
rc=0
t0=$SECONDS
guest_run_logged "$LOG" "$GUEST_TIMEOUT" || rc=$?
boot_s=$((SECONDS - t0))
guest_cues_wait
guest_iperf_stop
step "guest finished (QEMU exit status $rc) after ${boot_s}s"

v() { guest_val "$LOG" "$1"; }
# The device counters read when the guest asked (cue=stats pI-after ...),
# in CUE_STAT["pI_COUNTER"], from one python run (it is slow to start on
# a loaded machine)
declare -A CUE_STAT=()
while read -r key val; do
    CUE_STAT[$key]=$val
done < <(python3 - "$LOG.cues.json" <<'PY' 2>/dev/null || true
import json, re, sys
for tag, st in json.load(open(sys.argv[1]))["stats"].items():
    m = re.match(r"(p[0-9]+)-after$", tag)
    if not m:
        continue
    for k, val in st.items():
        if isinstance(val, int):
            print(f"{m.group(1)}_{k} {val}")
PY
)
stat() { echo "${CUE_STAT[${1%-after}_$2]:-}"; }

qerr=$(guest_qemu_error "$LOG")
lockup=$(guest_lockup "$LOG")
if [ -n "$qerr" ]; then
    QEMU_DIED="QEMU aborted (status $rc): $qerr"
elif [ -n "$lockup" ]; then
    QEMU_DIED="guest kernel: $lockup"
elif [ "$rc" = 124 ]; then
    QEMU_DIED="QEMU killed after ${GUEST_TIMEOUT}s in '$(grep -a 'NCMTEST phase=' "$LOG" | tail -n1 | sed 's/.*phase=//')'"
fi
if ! grep -q 'NCMTEST phase=boot' "$LOG"; then
    runner_fail boot "no output from /init (QEMU status $rc)"
    exit 1
fi
runner_pass boot

# expected, per profile: usb id, dwNtbInMaxSize, bmNtbFormatsSupported,
# wNtbOutMaxDatagrams, whether MTU 1504 is taken (max MTU is
# wMaxSegmentSize - 14: 1504 for rtl8156's 1518, 1500 for the others)
declare -A want_id=([0]=17e9:6000 [1]=46f4:0010 [2]=0bda:8156 [3]=0525:a4a1 [4]=17e9:6000)
declare -A want_in=([0]=65536 [1]=65536 [2]=16384 [3]=16384 [4]=4096)
declare -A want_fmt=([0]=0x0003 [1]=0x0003 [2]=0x0001 [3]=0x0003 [4]=0x0001)
declare -A want_outdg=([0]=64 [1]=64 [2]=40 [3]=0 [4]=1)
declare -A want_mtu=([0]=refused [1]=refused [2]=ok [3]=refused [4]=refused)

# checks p0-displaylink/bind ... p4-minimal/bind, then for each preset
# P/driver-info, P/descriptors, P/usb-speed, P/carrier, P/ping,
# P/iperf-up, P/iperf-down, P/no-stalled-request, ...
for i in "${!DEVS[@]}"; do
    k=p$i
    n="$k-${NAMES[$i]}"
    after=$k-after
    if [ -z "$(v "${k}_iface")" ]; then
        runner_fail "$n/bind" "no cdc_ncm interface with MAC 52:54:00:12:36:0$i (interfaces: $(v profile_ifaces))"
        continue
    fi
    runner_pass "$n/bind"
    dline=$(v "${k}_dmesg")
    want_info="CDC NCM (NO ZLP)"
    # DisplayLink's vendor id: the profiles that keep usb-ncm-dl's
    [ "${want_id[$i]%%:*}" = 17e9 ] && want_info="CDC NCM (SEND ZLP)"
    r=1; [[ $dline == *"$want_info"* ]] && r=0
    runner_check "$n/driver-info" "$r" "dmesg: ${dline:-nothing}, expected $want_info"
    got="$(v "${k}_usb_id") in=$(v "${k}_cdc_ncm.dwNtbInMaxSize") fmt=$(v "${k}_cdc_ncm.bmNtbFormatsSupported") outdg=$(v "${k}_cdc_ncm.wNtbOutMaxDatagrams") mtu1504=$(v "${k}_mtu1504") mtu1505=$(v "${k}_mtu1505")"
    exp="${want_id[$i]} in=${want_in[$i]} fmt=${want_fmt[$i]} outdg=${want_outdg[$i]} mtu1504=${want_mtu[$i]} mtu1505=refused"
    r=1; [ "$got" = "$exp" ] && r=0
    runner_check "$n/descriptors" "$r" "guest sees $got, expected $exp"
    r=1; [ "$(v "${k}_usb_speed_mbps")" = "$want_speed" ] && r=0
    runner_check "$n/usb-speed" "$r" \
        "the guest sees $(v "${k}_usb_speed_mbps") Mbit/s, expected $want_speed"
    r=1; [ "$(v "${k}_carrier")" = 1 ] && r=0
    runner_check "$n/carrier" "$r" "carrier=$(v "${k}_carrier")"
    r=1; [ "$(v "${k}_ping_received")" = 10 ] && [ "$(v "${k}_ping1400_received")" = 5 ] && r=0
    runner_check "$n/ping" "$r" \
        "$(v "${k}_ping_received")/10 of 56 bytes, $(v "${k}_ping1400_received")/5 of 1400"
    for d in up down; do
        mbps=$(v "${k}_iperf_${d}_mbps")
        r=1; [ "$(v "${k}_iperf_${d}_rc")" = 0 ] && awk -v m="$mbps" "BEGIN { exit !(m > 0) }" && r=0
        runner_check "$n/iperf-$d" "$r" \
            "rc=$(v "${k}_iperf_${d}_rc"), ${mbps:-no} Mbit/s"
    done
    # the driver path, from the device's counters
    in4=$(stat "$after" input_size_requests_4)
    in8=$(stat "$after" input_size_requests_8)
    crc=$(stat "$after" crc_mode_requests)
    mc=$(stat "$after" mc_filter_requests)
    st=$(stat "$after" statistic_requests)
    bad=$(stat "$after" bad_requests)
    crcin=$(stat "$after" in_crc_ntbs)
    crcout=$(stat "$after" out_crc_datagrams)
    note "$n: input size requests 4-byte ${in4:-?} 8-byte ${in8:-?}, CRC mode ${crc:-?}, multicast filter ${mc:-?}, statistic ${st:-?}, stalled ${bad:-?}, CRC NTBs in ${crcin:-?} / datagrams out ${crcout:-?}; rx_max $(v "${k}_rx_max.readback")"
    r=1; [ "$bad" = 0 ] && r=0
    runner_check "$n/no-stalled-request" "$r" "bad_requests=${bad:-none}"
    if [ "${want_in[$i]}" -gt 8192 ]; then
        r=1; [ "${in4:-0}" -ge 1 ] && [ "$in8" = 0 ] && [ "$(v "${k}_rx_max.readback")" = 8192 ] && r=0
        runner_check "$n/input-size-4-byte" "$r" \
            "after rx_max=8192: 4-byte requests ${in4:-?}, 8-byte ${in8:-?}, rx_max $(v "${k}_rx_max.readback")"
    fi
    if [ "$i" = 3 ]; then
        r=1; [ "${crc:-0}" -ge 1 ] && [ "$crcin" = 0 ] && [ "$crcout" = 0 ] && r=0
        runner_check "$n/crc-mode-off" "$r" \
            "SET_CRC_MODE accepted ${crc:-?}, CRC NTBs in ${crcin:-?}, CRC datagrams out ${crcout:-?}"
    else
        r=1; [ "$crc" = 0 ] && r=0
        runner_check "$n/no-crc-request" "$r" "crc_mode_requests=${crc:-?}"
    fi
    r=1; [ "$mc" = 0 ] && [ "$st" = 0 ] && r=0
    runner_check "$n/no-multicast-list" "$r" \
        "mc_filter_requests=${mc:-?}, statistic_requests=${st:-?} (Linux sets all multicast instead)"
    if [ "$i" = 4 ]; then
        ia=$(stat "$after" in_ntbs) da=$(stat "$after" in_datagrams)
        oa=$(stat "$after" out_ntbs) dd=$(stat "$after" out_datagrams)
        r=1; [ -n "$ia" ] && [ "$ia" -gt 100 ] && [ "$ia" = "$da" ] && [ "$oa" = "$dd" ] && r=0
        runner_check "$n/one-datagram-per-ntb" "$r" \
            "IN $ia NTBs / $da datagrams, OUT $oa NTBs / $dd datagrams"
    fi
done

r=1
[ "$rc" = 0 ] && grep -q 'NCMTEST phase=done' "$LOG" && r=0
runner_check poweroff "$r" "QEMU status $rc"
runner_end "(boot ${boot_s}s)"
