#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Record/replay of usb-ncm-dl under a Linux guest: each scenario is
# recorded (-icount shift=auto,rr=record, filter-replay on the netdev, see
# tests/guest/replay-lib.sh), then replayed, and the replay must show what
# the recording showed:
#   console   the guest's console output, line for line
#   stats     the device's x-stats when the guest powered off
#   trace     the device's trace events (NTBs both ways, merges, drops,
#             faults, re-enumeration) in the same order with the same
#             arguments
#   faults    applied in the replay as in the recording: at the same IN
#             NTB, which the trace check places among the other events
# Scenarios:
#   xhci      qemu-xhci: ping, iperf3 up and down (TCP both ways); a link
#             flap (usb-ncm-fault link-down-ms) as the upload starts and a
#             re-enumeration (replug-ms) as the download starts
#   ehci      usb-ehci: the same, shorter
#   uhci      piix3-usb-uhci, full speed: the same as ehci
#   ohci      pci-ohci, full speed: the same as ehci (these two only when
#             named: make check runs the default set)
#   dropout   the ZLP dropout (tests/guest/dropout-run.sh generic32:
#             generic ids, so Linux sends no ZLP; zlp=required,
#             dwNtbOutMaxSize 32768, tx_max raised to it): the same
#             transfers merge and the same datagrams are lost, at the same
#             points
# The faults wait for an IN NTB a few after the guest prints the phase
# (the usb-ncm-fault object's at-in-ntb): the recording sets them when it
# sees the phase, the replay queues them for the same NTBs before the
# first instruction (tests/guest/replay-qmp.py); neither stops the VM,
# and a qom-set at another moment would not replay.
#
# Every recording carries an rrsnapshot (reverse debugging starts from it);
# the replay's trace is compared from where it loads the snapshot, as the
# recording's is from where it saved it (replay_device_trace).
#
#   tests/guest/run-replay-test.sh [xhci] [ehci] [uhci] [ohci] [dropout]
#                                        default: xhci ehci dropout
#
# Environment: REPLAY_TEST_TIME (iperf3 seconds, 2), GUEST_TIMEOUT (600),
# REPLAY_TEST_SNAPSHOT (1; 0 records without the rrsnapshot), KERNEL,
# QEMU. Files: build/replay/test-*.{bin,cmd,record.log,...}
set -uo pipefail
. "$(dirname "$0")/../../scripts/setup/common.sh"
. "$NCM_TOP/tests/guest/lib.sh"
. "$NCM_TOP/tests/guest/replay-lib.sh"

SCENARIOS=${*:-xhci ehci dropout}
TIME=${REPLAY_TEST_TIME:-2}
GUEST_TIMEOUT=${GUEST_TIMEOUT:-600}
export REPLAY_TRACE="usb_ncm_out_ntb usb_ncm_in_ntb usb_ncm_out_merged
 usb_ncm_out_parse_error usb_ncm_rx_drop usb_ncm_replug usb_ncm_fault
 usb_ncm_notify usb_ncm_data_alt usb_ncm_reset usb_ncm_link
 usb_ncm_in_coalesce_timeout"
runner_begin replay

json() {    # json FILE [KEY.KEY...]: a value of a JSON file
    python3 - "$1" "${2:-}" <<'PY' 2>/dev/null
import json, sys
v = json.load(open(sys.argv[1]))
for k in filter(None, sys.argv[2].split(".")):
    v = v[k]
print(json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v)
PY
}

# device_stats FILE: the device's counters in a .stats.json, one a line
# (replay-qmp.py's under "stats", qmp-stats.py's at the top level without
# QEMU's CPU time)
device_stats() {
    python3 - "$1" <<'PY' 2>/dev/null
import json, sys
v = json.load(open(sys.argv[1]))
if "actions" in v:
    v = v["stats"]
for k in ("qemu_cpu_seconds", "vm_status"):
    v.pop(k, None)
print(json.dumps(v, sort_keys=True, indent=0))
PY
}

# same NAME RECORD-FILE REPLAY-FILE WHAT: the two files hold the same
same() {
    local d
    if [ ! -s "$2" ]; then
        runner_check "$1" 1 "the recording wrote no $4 (${2#"$NCM_TOP"/})"
    elif d=$(cmp "$2" "$3" 2>&1); then
        runner_check "$1" 0
    else
        runner_check "$1" 1 "$4 differs: $d"
        # where they part, for a failure seen only in CI's log
        diff "$2" "$3" | head -n 12 | sed 's/^/#   /'
        return 1
    fi
}

# trace_divergence BASE: where the device traces of BASE.record.trace and
# BASE.replay.trace part, with the run states and port events around it
# in each, and how far each run got (its icount when the guest was done)
trace_divergence() {
    local b=$1 first mode
    first=$(cmp "$b.record.device-trace" "$b.replay.device-trace" 2>&1 |
            sed -n 's/.* line \([0-9]*\).*/\1/p')
    first=${first:-1}
    for mode in record replay; do
        echo "#   $mode trace around device event $first" \
             "(icount at the end: $(json "$b.$mode.log.stats.json" icount)," \
             "VM $(json "$b.$mode.log.stats.json" vm_status)):"
        replay_trace_context "$b.$mode.trace" "$first" | sed 's/^/#     /'
    done
}

# compare NAME: the checks common to every scenario, on build/replay/NAME.*
compare() {
    local n=$1 b=$REPLAY_DIR/$1 diff_line
    if diff_line=$(replay_compare "$b.record.log" "$b.replay.log") &&
       grep -aq 'NCMTEST phase=done' "$b.replay.log"; then
        runner_check "$n/console" 0
    else
        runner_check "$n/console" 1 "${diff_line:-the replay did not reach phase=done}; ${b#"$NCM_TOP"/}.replay.log"
    fi
    device_stats "$b.record.log.stats.json" >"$b.record.stats"
    device_stats "$b.replay.log.stats.json" >"$b.replay.stats"
    same "$n/stats" "$b.record.stats" "$b.replay.stats" "x-stats"
    replay_device_trace "$b.record.trace" >"$b.record.device-trace"
    replay_device_trace "$b.replay.trace" >"$b.replay.device-trace"
    if ! same "$n/trace" "$b.record.device-trace" "$b.replay.device-trace" \
         "trace"; then
        trace_divergence "$b"
    fi
    echo "# $n: $(wc -l <"$b.record.device-trace" 2>/dev/null || echo 0) trace events;" \
         "recorded in $(cat "$b.record.seconds" 2>/dev/null) s, replayed in" \
         "$(cat "$b.replay.seconds" 2>/dev/null) s;" \
         "log $(du -h "$b.bin" 2>/dev/null | cut -f1)"
}

GDIR=$(bash "$NCM_TOP/tests/guest/image.sh" --print-dir) ||
    die "could not build the guest image" "see the messages above"
guest_need_qemu
trap guest_iperf_stop EXIT

# faults CONTROLLER: the --cue options of replay-qmp.py into CUES
faults() {
    local flap=1500 replug=500
    [ "$1" = xhci ] || flap=500 replug=200
    CUES=(--cue "NCMTEST phase=iperf-up=link-down-ms=$flap"
          --cue "NCMTEST phase=iperf-down=replug-ms=$replug")
}

# tour CONTROLLER: record, then replay, the faulted tour on CONTROLLER
tour() {
    local ctrl=$1 name=test-$1 mode sock qpid rc t0 time=$TIME
    [ "$ctrl" = xhci ] || time=1
    for mode in record replay; do
        REPLAY=$mode
        REPLAY_SNAPSHOT=${REPLAY_TEST_SNAPSHOT:-1}
        # the replay's port comes from the recorded command line
        GUEST_IPERF_PORT=5201
        mkdir -p "$REPLAY_DIR"
        [ "$mode" = record ] &&
            guest_iperf_start "$REPLAY_DIR/$name-iperf3-server.log"
        guest_device_args "$ctrl" "usb-ncm-dl,id=ncm"
        guest_qemu_cmd "$GDIR" "ncm.mode=run ncm.driver=cdc_ncm \
ncm.port=$GUEST_IPERF_PORT ncm.time=$time ncm.ping=5 ncm.carrier_wait=10"
        replay_cmd "$name"
        LOG=$REPLAY_BASE.$mode.log
        sock=$(mktemp -u /tmp/ncm-rr-qmp.XXXXXX)
        GUEST_CMD+=(-S -no-shutdown -qmp "unix:$sock,server=on,wait=off")
        faults "$ctrl"
        python3 "$NCM_TOP/tests/guest/replay-qmp.py" --qmp "$sock" \
            --mode "$mode" --actions "$REPLAY_BASE.actions.json" \
            --log "$LOG" --device /machine/peripheral/ncm \
            --stats "$LOG.stats.json" --timeout "$GUEST_TIMEOUT" \
            "${CUES[@]}" 2>"$LOG.qmp.err" &
        qpid=$!
        step "replay/$name: $mode"
        t0=$SECONDS
        rc=0
        GUEST_STALL=0 guest_run_logged "$LOG" "$GUEST_TIMEOUT" || rc=$?
        echo "$((SECONDS - t0))" >"$REPLAY_BASE.$mode.seconds"
        wait "$qpid" 2>/dev/null
        rm -f "$sock"
        guest_iperf_stop
        if [ "$mode" = replay ]; then
            # a replay that stalls is killed at GUEST_TIMEOUT: say where
            runner_check "$name/replay-ends" "$([ "$rc" = 0 ] && echo 0 || echo 1)" \
                "the replay of $ctrl ended with QEMU status $rc$([ "$rc" = 124 ] &&
                echo " (killed at ${GUEST_TIMEOUT}s)") after $((SECONDS - t0))s;" \
                "last console line: '$(replay_console "$LOG" | grep -av '^$' |
                tail -n 1 | cut -c1-120)'; ${LOG#"$NCM_TOP"/}"
        fi
        if [ "$mode" = record ]; then
            if ! grep -aq 'NCMTEST phase=done' "$LOG" || [ ! -s "$LOG.stats.json" ]; then
                runner_check "$name/recorded" 1 "the recorded run did not finish (QEMU status $rc; $(guest_qemu_error "$LOG")); ${LOG#"$NCM_TOP"/}"
                return
            fi
            local acts replugs flaps
            acts=$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))))' \
                   "$REPLAY_BASE.actions.json" 2>/dev/null)
            replugs=$(json "$LOG.stats.json" stats.replugs)
            flaps=$(grep -ac 'usb_ncm_fault .*: link-down-ms=' "$REPLAY_BASE.record.trace")
            runner_check "$name/recorded" "$([ "${acts:-0}" = 2 ] && [ "${replugs:-0}" -ge 1 ] &&
                                      [ "${flaps:-0}" -ge 1 ] && echo 0 || echo 1)" \
                "faults set: $acts of 2, replugs $replugs, link flaps $flaps"
        fi
    done
    compare "$name"
    # each cue's fault, as the trace shows it applied, in both runs
    local m applied
    for m in record replay; do
        applied=$(python3 - "$REPLAY_DIR/$name.record.log.stats.json" \
                  "$REPLAY_DIR/$name.$m.trace" <<'PY' 2>/dev/null
import json, sys
acts = json.load(open(sys.argv[1]))["actions"]
trace = open(sys.argv[2], errors="replace").read()
print(sum(f": {a['prop']}={a['value']}\n" in trace for a in acts), len(acts))
PY
)
        runner_check "$name/faults-applied-$m" \
            "$([ -n "$applied" ] && [ "${applied%% *}" = "${applied##* }" ] &&
               [ "${applied##* }" -gt 0 ] && echo 0 || echo 1)" \
            "cue faults applied/set in the $m: ${applied:-none}"
    done
}

# dropout: the ZLP dropout scenario through tests/guest/dropout-run.sh
dropout() {
    local n=dropout-generic32 b=$REPLAY_DIR/dropout-generic32 mode lost
    for mode in record replay; do
        if ! REPLAY=$mode IPERF_TIME=$TIME GUEST_TIMEOUT=$GUEST_TIMEOUT \
             bash "$NCM_TOP/tests/guest/dropout-run.sh" generic32 \
                 ",vendorid=0x46f4,productid=0x0010,ntb-out-max-size=32768"; then
            runner_check "$n/$mode" 1 "dropout-run.sh failed; ${b#"$NCM_TOP"/}.$mode.log"
            return
        fi
    done
    lost=$(json "$b.record.log.stats.json" out_merge_lost_datagrams)
    runner_check "$n/recorded-a-dropout" "$([ "${lost:-0}" -gt 0 ] && echo 0 || echo 1)" \
        "datagrams lost to merged transfers in the recording: ${lost:-none}"
    compare "$n"
    # the stats here are qmp-stats.py's: the counters at the top level
    json "$b.record.log.stats.json" out_merge_lost_datagrams >"$b.record.lost"
    json "$b.replay.log.stats.json" out_merge_lost_datagrams >"$b.replay.lost"
    same "$n/same-datagrams-lost" "$b.record.lost" "$b.replay.lost" \
        "merge-lost count"
    grep -a usb_ncm_out_merged "$b.record.trace" >"$b.record.merges"
    grep -a usb_ncm_out_merged "$b.replay.trace" >"$b.replay.merges"
    same "$n/same-merges" "$b.record.merges" "$b.replay.merges" \
        "merged transfers (trace)"
}

for s in $SCENARIOS; do
    case $s in
    xhci|ehci|uhci|ohci) tour "$s" ;;
    dropout) dropout ;;
    *) die "unknown scenario '$s'" "use xhci, ehci, uhci, ohci or dropout" ;;
    esac
done
runner_end
