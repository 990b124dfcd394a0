#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Re-enumeration, suspend and multicast under a Linux guest (the guest side
# is tests/guest/init-pm.sh; the host acts on its cues over QMP with
# tests/guest/qmp-cues.py).
#
#   tests/guest/run-pm-test.sh replug|suspend|suspend-nowake|mcast|ntbsweep
#                              [CONTROLLER] [DEVICE[,PROPS]]
#
#   replug   a ping every 100 ms and iperf3 -R running, the device drops off
#            the bus for 2 s (usb-ncm-fault replug-ms=2000, as a firmware
#            reset does): cdc_ncm must unbind and bind again, the interface
#            come back with its address (the guest's watcher configures it)
#            and ping and TCP recover. Prints the time to recover and the
#            pings lost.
#   suspend  USB selective suspend with the interface up and idle: the
#            device must autosuspend and a frame from the host (a UDP
#            datagram through slirp's hostfwd) must wake it; then suspend
#            to RAM (q35, ICH9-LPC.disable_s3=0; echo mem >
#            /sys/power/state) and system_wakeup from the host, traffic
#            before and after.
#   suspend-nowake   the same device with remote-wakeup=off: Linux must not
#            autosuspend it while the interface is up (usbnet needs remote
#            wakeup); with the interface down it suspends, and a frame from
#            the host does not wake it.
#   mcast    IPv6 through cdc_ncm (link-local ping to slirp's fe80::2,
#            neighbour discovery, a router advertisement to ff02::1 giving
#            a default route), then the usbfs step "filter": the function
#            without SET_ETHERNET_PACKET_FILTER passes directed and
#            broadcast frames but not multicast (x-stats rx_filtered grows).
#   ntbsweep iperf3 each way with cdc_ncm's rx_max = tx_max = 16, 32 and
#            64 KiB (IPERF_TIME s each, 5), nothing lost in the device.
#
# CONTROLLER: xhci (default) ... as for run-guest-test.sh. Environment:
# KERNEL, QEMU, GUEST_TIMEOUT (300 s), REPLUG_MS (2000), LOG_NAME.
# Prints PASS:/FAIL: lines "guest/MODE-CONTROLLER/CHECK"; the console log
# is build/guest-logs/MODE-CONTROLLER.log (cues and device counters in
# .cues.json and .stats.json next to it).
set -euo pipefail
. "$(dirname "$0")/../../scripts/setup/common.sh"
. "$NCM_TOP/tests/guest/lib.sh"

case ${1:-} in -h|--help|"") sed -n '3,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
MODE=$1
CTRL=${2:-xhci}
DEVICE=${3:-${NCM_DEVICE:-usb-ncm-dl}}
GUEST_TIMEOUT=${GUEST_TIMEOUT:-300}
REPLUG_MS=${REPLUG_MS:-2000}
case $MODE in
replug|suspend|suspend-nowake|mcast|ntbsweep) ;;
*) die "unknown mode '$MODE'" "use replug, suspend, suspend-nowake, mcast or ntbsweep" ;;
esac
GMODE=${MODE%-nowake}
[ "$MODE" = suspend-nowake ] && DEVICE="$DEVICE,remote-wakeup=off"
case $DEVICE in *,id=*) ;; *) DEVICE="$DEVICE,id=ncm0" ;; esac
QOM=/machine/peripheral/$(sed -n 's/.*,id=\([^,]*\).*/\1/p' <<<"$DEVICE")
guest_device_args "$CTRL" "$DEVICE"
CNAME=$MODE-${CTRL//,/-}
LOG_NAME=${LOG_NAME:-$CNAME}
LOG=$NCM_BUILD/guest-logs/$LOG_NAME.log
REL_LOG=${LOG#"$NCM_TOP"/}

runner_begin "guest/$CNAME" "$REL_LOG"

step "guest $MODE test: $CTRL with $DEVICE"
guest_need_qemu
if ! guest_has_device "$GUEST_DEV_NAME"; then
    runner_fail device "$GUEST_QEMU has no -device $GUEST_DEV_NAME"
    exit 1
fi
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

# a free UDP port on the host for the wake frame (slirp's hostfwd)
UDP_FWD=$(python3 -c 'import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
WAKE_PORT=5555
APPEND="ncm.mode=$GMODE ncm.driver=cdc_ncm ncm.port=$GUEST_IPERF_PORT ncm.time=${IPERF_TIME:-3} \
ncm.replug_ms=$REPLUG_MS ncm.wake_port=$WAKE_PORT"
[ "$MODE" = suspend-nowake ] && APPEND="$APPEND ncm.pm=auto"
pof=$(sed -n 's/.*power-on-filter=\([^,]*\).*/\1/p' <<<"$DEVICE")
[ -z "$pof" ] && [ "$GUEST_DEV_NAME" = usb-ncm ] && pof=0x0e
[ -n "$pof" ] && APPEND="$APPEND ncm.power_on_filter=$pof"
guest_qemu_cmd "$GDIR" "$APPEND ${NCM_APPEND:-}" \
    "user,id=n0,hostfwd=udp:127.0.0.1:$UDP_FWD-10.0.2.15:$WAKE_PORT"
[ "$GMODE" = suspend ] && GUEST_CMD+=(-global ICH9-LPC.disable_s3=0)
guest_cues_start "$LOG" "$QOM" --udp-fwd "$UDP_FWD"

step "booting the guest (TCG, timeout ${GUEST_TIMEOUT}s); log: $REL_LOG"
rc=0
t0=$SECONDS
# (the counters come through the cues: "cue=stats final"; no -no-shutdown
# and qmp-stats.py, whose QMP connection QEMU has been seen to drop some
# seconds after a system_wakeup)
guest_run_logged "$LOG" "$GUEST_TIMEOUT" || rc=$?
boot_s=$((SECONDS - t0))
guest_cues_wait
guest_iperf_stop
step "guest finished (QEMU exit status $rc) after ${boot_s}s"

v() { guest_val "$LOG" "$1"; }
# cue_stat TAG KEY: a counter the host read when the guest asked (cue=stats)
cue_stat() {
    python3 - "$LOG.cues.json" "$1" "$2" <<'PY' 2>/dev/null
import json, sys
print(json.load(open(sys.argv[1]))["stats"][sys.argv[2]][sys.argv[3]])
PY
}
cue_result() {
    python3 - "$LOG.cues.json" "$1" <<'PY' 2>/dev/null
import json, sys
for a in json.load(open(sys.argv[1]))["actions"]:
    if a["cue"].split()[0] == sys.argv[2]:
        print(a["result"]); break
PY
}

qerr=$(guest_qemu_error "$LOG")
lockup=$(guest_lockup "$LOG")
if [ -n "$qerr" ]; then
    QEMU_DIED="QEMU aborted (status $rc) in '$(grep -a 'NCMTEST phase=' "$LOG" | tail -n1 | sed 's/.*phase=//')': $qerr"
elif [ -n "$lockup" ]; then
    QEMU_DIED="guest kernel: $lockup"
elif [ "$rc" = 124 ]; then
    QEMU_DIED="QEMU killed after ${GUEST_TIMEOUT}s in '$(grep -a 'NCMTEST phase=' "$LOG" | tail -n1 | sed 's/.*phase=//')'"
fi
if ! grep -q 'NCMTEST phase=boot' "$LOG"; then
    runner_fail boot "no output from /init (QEMU status $rc)"
    exit 1
fi
r=1; [ "$(v driver)" = cdc_ncm ] && r=0
runner_check driver "$r" "driver=$(v driver)"

case $MODE in
replug)
    r=1; [ "$(v replug_gone_s)" != never ] && [ -n "$(v replug_gone_s)" ] && r=0
    runner_check unbind "$r" \
        "the interface did not go within 15 s of usb-ncm-fault replug-ms=$REPLUG_MS ($(cue_result replug))"
    r=1; [ "$(v replug_back_s)" != never ] && [ -n "$(v replug_back_s)" ] && [ "$(v replug_register)" -ge 2 ] && r=0
    runner_check rebind "$r" \
        "cdc_ncm interface back: $(v replug_back_s); cdc_ncm registered $(v replug_register) times, unregistered $(v replug_unregister)"
    r=1; [ "$(v replug_addr)" = 10.0.2.15/24 ] && r=0
    runner_check address "$r" \
        "configured again: $(v replug_configured_s), address $(v replug_addr)"
    r=1; [ -n "$(v replug_ping_recover_s)" ] && [ "$(v ping_after_loss_pct)" = 0 ] && r=0
    runner_check ping-recovers "$r" \
        "ncm-ping received $(v replug_ping_received) of $(v replug_ping_sent), recover $(v replug_ping_recover_s) s; 10 pings after: loss $(v ping_after_loss_pct)%"
    r=1; [ "$(v replug_iperf_rc)" = 0 ] && [ "$(v replug_iperf_last3_live)" -ge 1 ] && r=0
    runner_check tcp-recovers "$r" \
        "iperf3 -R rc $(v replug_iperf_rc) $(v replug_iperf_error); per second: $(v replug_iperf_intervals)"
    r=1; [ "$(cue_stat final replugs)" = 1 ] && r=0
    runner_check device-counted "$r" \
        "x-stats replugs=$(cue_stat final replugs)"
    note "re-enumeration: interface gone after $(v replug_gone_s) s, back after" \
         "$(v replug_back_s) s, configured after $(v replug_configured_s) s" \
         "(replug ${REPLUG_MS} ms)"
    note "ping every 100 ms: $(v replug_ping_lost) of $(v replug_ping_sent) lost," \
         "longest gap $(v replug_ping_longest_gap_ms) ms, time to recover" \
         "(fault to first reply) $(v replug_ping_recover_s) s"
    note "iperf3 -R: $(v replug_iperf_mbps) Mbit/s; per second $(v replug_iperf_intervals)"
    ;;
suspend)
    # NCM_APPEND="ncm.pm=auto" or "ncm.pm=s3": only that part
    parts=$(sed -n 's/.*ncm\.pm=\([^ ]*\).*/\1/p' <<<"${NCM_APPEND:-}")
    parts=${parts:-auto,s3}
    [[ ,$parts, == *,auto,* ]] || SKIP_AUTO=1
    [[ ,$parts, == *,s3,* ]] || SKIP_S3=1
    ;;&
suspend)
    [ -n "${SKIP_AUTO:-}" ] || {
    r=1; [ "$(v auto_suspended)" = yes ] && r=0
    runner_check autosuspend "$r" \
        "runtime_status $(v auto_status) with the interface up and idle; bmAttributes $(v auto_bmAttributes), power/wakeup $(v auto_wakeup); ${lockup:-}"
    r=1; [ "$(v auto_wake_rx)" = yes ] && [ "$(v auto_status_after)" = active ] && r=0
    runner_check wake-on-frame "$r" \
        "datagram received: $(v auto_wake_rx), runtime_status after $(v auto_status_after)"
    r=1; [ "$(v auto_wake_ping_loss_pct)" = 0 ] && r=0
    runner_check ping-after-autosuspend "$r" \
        "loss $(v auto_wake_ping_loss_pct)%"
    note "autosuspend: suspended $(v auto_suspend_s) s after power/control=auto" \
         "(delay 500 ms); the frame woke it and arrived $(v auto_wake_s) s after the host was asked"
    }
    [ -n "${SKIP_S3:-}" ] || {
    r=1; [[ "$(cue_result wakeup)" == suspended* ]] && [ "$(v s3_rc | cut -d" " -f1)" = 0 ] && r=0
    runner_check s3-suspended "$r" \
        "host: $(cue_result wakeup); guest: echo mem > /sys/power/state rc $(v s3_rc), mem_sleep $(v s3_mem_sleep_now)"
    r=1; [ "$(v iperf_s3_before_rc)" = 0 ] && r=0
    runner_check s3-traffic-before "$r" "iperf3 rc $(v iperf_s3_before_rc)"
    r=1; [ "$(v s3_back_s)" != never ] && [ -n "$(v s3_back_s)" ] && r=0
    runner_check s3-interface-back "$r" \
        "after resume the interface was configured again: $(v s3_back_s)"
    r=1; [ "$(v s3_ping_loss_pct)" = 0 ] && [ "$(v iperf_s3_after_rc)" = 0 ] && r=0
    runner_check s3-traffic-after "$r" \
        "ping loss $(v s3_ping_loss_pct)%, iperf3 rc $(v iperf_s3_after_rc)"
    note "S3: slept $(v s3_slept_s) s (guest clock), interface configured" \
         "$(v s3_back_s) s after resume; iperf3 -R before $(v iperf_s3_before_receiver_mbps)," \
         "after $(v iperf_s3_after_receiver_mbps) Mbit/s, after rx_max written again" \
         "$(v iperf_s3_after_rx_max_receiver_mbps) Mbit/s"
    }
    ;;
suspend-nowake)
    r=1; [ "$(v auto_suspended)" = no ] && r=0
    runner_check no-autosuspend-while-up "$r" \
        "auto_suspended=$(v auto_suspended): Linux suspended a device that cannot wake it"
    r=1; [ "$(v auto_down_suspended)" = yes ] && r=0
    runner_check suspends-when-down "$r" \
        "interface down: runtime_status never became suspended"
    r=1; [ "$(v auto_down_status_after)" = suspended ] && r=0
    runner_check frame-does-not-wake "$r" \
        "after the frame from the host runtime_status is $(v auto_down_status_after)"
    note "remote-wakeup=off: bmAttributes $(v auto_bmAttributes), power/wakeup $(v auto_wakeup);" \
         "with the interface up: $(v auto_blocked)"
    note "interface down: suspended; the frame from the host left it $(v auto_down_status_after);" \
         "delivered once the interface came up again: $(v auto_down_late_rx)"
    ;;
mcast)
    r=1; [ "$(v mcast_ll_ping)" = "5 of 5" ] && r=0
    runner_check ll-ping "$r" "ping6 fe80::2%usb0: $(v mcast_ll_ping)"
    r=1; [[ "$(v mcast_neigh)" == *lladdr* ]] && r=0
    runner_check neighbour "$r" "ip -6 neigh: $(v mcast_neigh)"
    r=1; [ "$(v mcast_ra)" = yes ] && r=0
    runner_check router-advert "$r" "no default route via fe80::2: no router advertisement (multicast to ff02::1) came in"
    line=$(grep -a -m1 '^STRESS filter \(ok\|FAIL\)' "$LOG" || true)
    r=1; [[ "$line" == "STRESS filter ok"* ]] && r=0
    runner_check usbfs-power-on-filter "$r" "${line:-ncm-usbfs-stress filter did not finish}"
    f0=$(cue_stat mcast-cdc_ncm rx_filtered)
    f1=$(cue_stat mcast-usbfs rx_filtered)
    r=1; [ "${f1:-0}" -gt "${f0:-0}" ] && r=0
    runner_check rx-filtered-counted "$r" \
        "x-stats rx_filtered ${f0:-?} after cdc_ncm, ${f1:-?} after the usbfs step"
    note "cdc_ncm: ll ping $(v mcast_ll_ping), neighbour $(v mcast_neigh), RA $(v mcast_ra) $(v mcast_global);" \
         "rx_filtered ${f0:-?} -> ${f1:-?} over the usbfs step"
    ;;
ntbsweep)
    # checks iperf-up-16384, iperf-down-16384, ... iperf-down-65536
    for n in 16384 32768 65536; do
        for d in up down; do
            r=1; [ "$(v "iperf_${d}_${n}_rc")" = 0 ] && r=0
            runner_check "iperf-$d-$n" "$r" \
                "rc $(v "iperf_${d}_${n}_rc")"
        done
        note "NTB $n (rx_max $(v "ntb_${n}_rx_max"), tx_max $(v "ntb_${n}_tx_max")):" \
             "up $(v "iperf_up_${n}_receiver_mbps"), down $(v "iperf_down_${n}_receiver_mbps") Mbit/s"
    done
    r=1; [ "$(cue_stat final out_merge_lost_datagrams)" = 0 ] && r=0
    runner_check nothing-lost "$r" \
        "x-stats out_merge_lost_datagrams=$(cue_stat final out_merge_lost_datagrams)"
    ;;
esac
p=$(cue_result "(poweroff)")
[ -n "$p" ] && note "$p"
r=1; [ "$rc" = 0 ] && grep -q "NCMTEST phase=done" "$LOG" && r=0
runner_check poweroff "$r" \
    "QEMU status $rc, guest $(grep -q 'NCMTEST phase=done' "$LOG" && echo finished || echo 'did not finish')"
runner_end "(boot ${boot_s}s)"
