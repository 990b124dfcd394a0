#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# usbfs stress of usb-ncm-dl under a Linux guest: tests/guest/ncm-usbfs-stress
# (in the guest image) takes the NCM function from cdc_ncm and runs one
# step at a time (several bulk IN URBs of mixed sizes in flight, OUT NTBs of
# exact wMaxPacketSize multiples with and without ZLP, DISCARDURB in the
# middle of a queue, SET_INTERFACE / SET_CONFIGURATION / USBDEVFS_RESET
# with URBs in flight); after each step the guest gives the function back
# to cdc_ncm and pings the gateway.
#
#   tests/guest/run-stress-test.sh [CONTROLLER] [DEVICE[,PROPS]]
#
#   CONTROLLER  xhci (default), xhci-hs, ehci, uhci, ohci (see
#               tests/guest/run-guest-test.sh)
#   DEVICE      usb-ncm-dl (default) or usb-ncm, properties passed through
#
# Per step three checks: "guest/stress-<ctrl>/<step>" (the program's own
# verdict: every URB back within its time limit with a status a host
# controller gives, the function passing traffic on fresh URBs after it),
# ".../<step>/rebind" (cdc_ncm has the function again) and
# ".../<step>/ping" (5 of 5 replies from 10.0.2.2 through cdc_ncm, so QEMU
# is alive too). When QEMU dies in a step, that step FAILs with QEMU's last
# words (an assertion) and the guest boots again for the steps after it
# (at most STRESS_MAX_BOOTS, 12, boots; a boot that gets to no step at all
# ends the run).
#
# Environment: STRESS_STEPS (comma-separated subset), STRESS_VERBOSE=1
#   (every URB completion in the log), GUEST_TIMEOUT (600 s per boot),
#   KERNEL, QEMU, QEMU_EXTRA as for run-guest-test.sh.
set -euo pipefail
. "$(dirname "$0")/../../scripts/setup/common.sh"
. "$NCM_TOP/tests/guest/lib.sh"

case ${1:-} in -h|--help) sed -n '3,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
CTRL=${1:-xhci}
DEVICE=${2:-${NCM_DEVICE:-usb-ncm-dl}}
GUEST_TIMEOUT=${GUEST_TIMEOUT:-600}
MAX_BOOTS=${STRESS_MAX_BOOTS:-12}
CNAME=stress-${CTRL//,/-}
guest_device_args "$CTRL" "$DEVICE"
[ "$GUEST_IS_USB" = 1 ] || die "the stress test needs a USB device, not $DEVICE"
LOGBASE=$NCM_BUILD/guest-logs/$CNAME-$GUEST_DEV_NAME
# what the step "filter" expects before SET_ETHERNET_PACKET_FILTER
POF=$(sed -n 's/.*power-on-filter=\([^,]*\).*/\1/p' <<<"$DEVICE")
[ -z "$POF" ] && [ "$GUEST_DEV_NAME" = usb-ncm ] && POF=0x0e

runner_begin "guest/$CNAME"

step "usbfs stress: $CTRL with $DEVICE"
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
rm -f "$LOGBASE".*log

remaining=${STRESS_STEPS:-}
all=""
boot=0
while :; do
    boot=$((boot + 1))
    LOG=$LOGBASE.$boot.log
    REL_LOG=${LOG#"$NCM_TOP"/}
    guest_qemu_cmd "$GDIR" "ncm.mode=stress ncm.driver=cdc_ncm \
${remaining:+ncm.stress=$remaining} ${STRESS_VERBOSE:+ncm.stress_v=1} \
${POF:+ncm.power_on_filter=$POF}"
    step "boot $boot: ${remaining:-every step} (timeout ${GUEST_TIMEOUT}s); log: $REL_LOG"
    rc=0
    t0=$SECONDS
    guest_run_logged "$LOG" "$GUEST_TIMEOUT" || rc=$?
    note "boot $boot: QEMU status $rc after $((SECONDS - t0))s"

    v() { guest_val "$LOG" "$1"; }
    if [ -z "$all" ]; then
        all=$(v stress_steps | tr ',' ' ')
        if [ -z "$all" ]; then
            runner_fail "boot$boot" "the guest never listed its steps (QEMU status $rc: $(
                grep -a -v '^#' "$LOG" | grep -a . | tail -n 1 | cut -c1-200)); log $REL_LOG"
            exit 1
        fi
        base=$(v stress_ping.baseline)
        r=1
        [ "$base" = "5 of 5" ] && r=0
        if [ "$r" = 0 ]; then runner_pass baseline-ping
        else runner_fail baseline-ping "before any step: ${base:-no} replies of 5; log $REL_LOG"; fi
    fi

    # How the boot ended, for the step it ended in
    qerr=$(guest_qemu_error "$LOG")
    lockup=$(guest_lockup "$LOG")
    if [ -n "$qerr" ]; then died="QEMU aborted (status $rc): $qerr"
    elif [ -n "$lockup" ]; then died="guest kernel: $lockup"
    elif [ "$rc" = 124 ]; then died="no end within ${GUEST_TIMEOUT}s, QEMU killed"
    else died="QEMU exited, status $rc"; fi
    hcerr=$(guest_hc_error "$LOG")
    [ -n "$hcerr" ] && died="$died; guest: $hcerr"

    # shellcheck disable=SC2086 # unquoted: the blanks collapse
    todo=${remaining:-$(echo $all | tr ' ' ',')}
    next=""
    stop=""
    for s in $(echo "$todo" | tr ',' ' '); do
        if [ -n "$stop" ]; then
            next="$next${next:+,}$s"
            continue
        fi
        if ! grep -aq "NCMTEST stress_step=$s\$" "$LOG"; then
            # never started: the boot ended before it
            stop=1
            next="$s"
            continue
        fi
        line=$(grep -a -m1 "^STRESS $s \(ok\|FAIL\)" "$LOG" || true)
        case $line in
        "STRESS $s ok"*) runner_pass "$s" ;;
        "STRESS $s FAIL"*) runner_fail "$s" "${line#"STRESS $s FAIL "}; log $REL_LOG" ;;
        *) runner_fail "$s" "the step never ended: $died; log $REL_LOG"
           stop=1
           continue ;;
        esac
        if grep -aq "NCMTEST stress_abandoned=$s" "$LOG"; then
            # /init gave up on a program stuck in the kernel
            st=$(guest_stuck_stack "$LOG")
            runner_fail "$s/rebind" "not tried: ncm-usbfs-stress stuck${st:+ in $st}; log $REL_LOG"
            stop=1
            continue
        fi
        rb=$(v "stress_rebind.$s")
        rr=$(v "stress_rebind_after_reset.$s")
        if [ "${rb%% *}" = ok ]; then
            runner_pass "$s/rebind"
        elif [ -n "$rb" ]; then
            runner_fail "$s/rebind" "cdc_ncm did not get the function back after the step: $rb; after USBDEVFS_RESET: ${rr:-not tried}; log $REL_LOG"
        else
            runner_fail "$s/rebind" "not seen: $died; log $REL_LOG"
            stop=1
            continue
        fi
        p=$(v "stress_ping.$s")
        if [ "$p" = "5 of 5" ]; then
            runner_pass "$s/ping"
        elif [ -n "$p" ]; then
            runner_fail "$s/ping" "${p:-0} replies from 10.0.2.2 after the step; log $REL_LOG"
        else
            runner_fail "$s/ping" "no ping result: $died; log $REL_LOG"
            stop=1
        fi
    done
    [ -n "$next" ] || break
    first=${todo%%,*}
    if [ "$boot" -ge "$MAX_BOOTS" ] || [ "${next%%,*}" = "$first" ]; then
        # out of boots, or this boot did not even start its first step
        why="$MAX_BOOTS boots used up"
        [ "${next%%,*}" = "$first" ] && why="boot $boot never got to '$first': $died; log $REL_LOG"
        for s in $(echo "$next" | tr ',' ' '); do
            runner_fail "$s" "not run: $why"
        done
        break
    fi
    remaining=$next
    note "the boot ended before: $next; booting again for them"
done
runner_end "($boot boot(s))"
