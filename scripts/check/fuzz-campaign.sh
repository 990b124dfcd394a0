#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Usage: scripts/check/fuzz-campaign.sh HOURS [TARGET...]
#        (make fuzz-campaign FUZZ_HOURS=N [FUZZ_TARGET="a b"])
#
# A fuzzing campaign over every usb-ncm-dl fuzz target of the device
# fuzzer (build/fuzz-qemu/qemu/qemu-fuzz-x86_64, built by fuzz-device.sh:
# the structured targets and the generic-fuzz configurations), HOURS
# shared evenly among them, one after the other (FUZZ_JOBS=N: N at a
# time, one core each).  For each target:
#   - fuzz its working corpus build/fuzz-qemu/corpus-<target> (seeded from
#     tests/fuzz/corpus/<target>/) with fuzz-device.sh for its share;
#   - merge and minimize (libFuzzer -merge=1) the committed seeds and the
#     working corpus into tests/fuzz/corpus/<target>/ (fuzz-device.sh
#     --save-seeds), to be committed;
#   - append a row to the campaign table of docs/findings.md: date, target,
#     executions, new coverage (libFuzzer's cov and ft, edges and
#     features, from the loaded corpus to the end of the run), corpus
#     size, findings (new crash/timeout/oom artifacts, kept in
#     build/fuzz-campaign/runs/artifacts-<target>/ beside the run's
#     libFuzzer log), and rewrite its totals, which add up every row of
#     every run.
#
# Resumable: the campaign's state is build/fuzz-campaign/state (the run's
# id, each target's remaining seconds).  A campaign stopped (Ctrl-C in
# the foreground; SIGTERM, kill $(cat build/fuzz-campaign/pid), for one in
# the background, where bash ignores SIGINT) ends the running
# target's libFuzzer gracefully, writes that target's row for what it
# ran, and keeps the rest; running the command again goes on with the
# targets and seconds left, until the campaign is done (then a new one
# starts).  FUZZ_CAMPAIGN_NEW=1 drops an unfinished one.
#
# Exit status: non-zero when a target wrote a reproducer (a finding) or
# failed; the rows are written in either case.

{
set -uo pipefail
# shellcheck source=scripts/setup/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../setup/common.sh"

hours=${1:-}
[ "$#" -gt 0 ] && shift
python3 -c "import sys; h=float(sys.argv[1]); assert h > 0" "$hours" \
    2>/dev/null ||
    die "HOURS must be a positive number, got '$hours'" \
        "usage: make fuzz-campaign FUZZ_HOURS=1 (or 0.1 for a short one)"
wanted=("$@")
if [ "${#wanted[@]}" = 0 ] && [ -n "${FUZZ_TARGET:-}" ]; then
    read -r -a wanted <<<"$FUZZ_TARGET"
fi

FUZZ_DIR=${NCM_BUILD%/sanitize}/fuzz-qemu
STATE_DIR=${NCM_BUILD%/sanitize}/fuzz-campaign
STATE=$STATE_DIR/state
# its runs' libFuzzer logs and artifacts, apart from those of make check
# and make fuzz-device (the working corpora are shared)
RUN_DIR=$STATE_DIR/runs
FINDINGS=$NCM_TOP/docs/findings.md
DEVICE=$NCM_TOP/scripts/check/fuzz-device.sh
mkdir -p "$STATE_DIR"
echo $$ >"$STATE_DIR/pid"

# the binary, built (or brought up to date) by fuzz-device.sh's build
step "bringing the device fuzzer up to date (fuzz-device.sh)"
if ! bash "$DEVICE" --list >"$STATE_DIR/targets" 2>"$STATE_DIR/build.log"; then
    tail -n 20 "$STATE_DIR/build.log" | sed 's/^/    | /'
    die "the device fuzzer could not be built" \
        "log: $STATE_DIR/build.log"
fi
# one binary for the whole campaign, whatever is rebuilt meanwhile
# (a resumed campaign takes the binary as it is then)
if ! cp -f "$FUZZ_DIR/qemu/qemu-fuzz-x86_64" "$STATE_DIR/qemu-fuzz-x86_64.tmp" ||
   ! mv -f "$STATE_DIR/qemu-fuzz-x86_64.tmp" "$STATE_DIR/qemu-fuzz-x86_64"; then
    die "could not copy the device fuzzer into $STATE_DIR"
fi
export FUZZ_BIN=$STATE_DIR/qemu-fuzz-x86_64
mapfile -t all_targets < <(grep -E '^[a-z]' "$STATE_DIR/targets")
if [ "${#wanted[@]}" = 0 ]; then
    targets=("${all_targets[@]}")
else
    targets=("${wanted[@]}")
fi

# A campaign is a run id and every target's remaining seconds; a new one
# starts when there is none, it is done, or FUZZ_CAMPAIGN_NEW=1.
total=$(python3 -c "print(int(float('$hours') * 3600))")
if [ -n "${FUZZ_CAMPAIGN_NEW:-}" ] || [ ! -s "$STATE" ] ||
   ! awk 'NR > 1 && $2 > 0 { left = 1 } END { exit !left }' "$STATE"; then
    per=$((total / ${#targets[@]}))
    [ "$per" -gt 0 ] || per=1
    {
        echo "run $(date -u +%Y%m%dT%H%M%SZ) ${hours}h"
        for t in "${targets[@]}"; do
            echo "$t $per"
        done
    } >"$STATE"
    step "new campaign: ${hours} h, ${per} s for each of ${#targets[@]} targets"
else
    step "resuming campaign $(head -n 1 "$STATE" | cut -d' ' -f2-)" \
         "($(awk 'NR > 1 { s += $2 } END { print s }' "$STATE") s left)"
fi
run_id=$(head -n 1 "$STATE" | cut -d' ' -f2)

# set_left TARGET SECONDS: the state file with TARGET's remaining time
# (under the campaign's lock: with FUZZ_JOBS, runs end side by side)
set_left() {
    (
        flock 9
        awk -v t="$1" -v s="$2" 'NR > 1 && $1 == t { $2 = s } { print }' \
            "$STATE" >"$STATE.tmp" && mv "$STATE.tmp" "$STATE"
    ) 9>"$STATE_DIR/.lock"
}

stop=0
on_signal() {
    stop=1
    touch "$STATE_DIR/stopping"
    # each run is a process group of its own (setsid): libFuzzer in it
    # ends on SIGINT with its final statistics
    local f
    for f in "$STATE_DIR"/pgid-*; do
        [ -e "$f" ] && kill -INT -- "-$(cat "$f")" 2>/dev/null
    done
}
trap on_signal INT TERM

# run_target TARGET SECONDS: fuzz TARGET for SECONDS (a background job
# of the campaign), then merge its seeds and write its row; returns 1 on
# a finding or a failure
run_target() {
    local t=$1 left=$2 log artifacts before start child rc ran run_log
    local execs first last c0 f0 c1 f1 found nseeds
    log=$STATE_DIR/run-$t.log
    artifacts=$RUN_DIR/artifacts-$t
    mkdir -p "$artifacts"
    before=$(ls "$artifacts")
    start=$(date +%s)
    # in its own session, stopped as a process group, at the campaign's
    # nice value (common.sh, SESSION_KEEPS_NICE)
    FUZZ_RUN_DIR=$RUN_DIR setsid bash -c "$SESSION_KEEPS_NICE" bash \
        bash "$DEVICE" "$left" "$t" >"$log" 2>&1 &
    child=$!
    echo "$child" >"$STATE_DIR/pgid-$t"
    # a stop that came before the pgid file was written
    [ -e "$STATE_DIR/stopping" ] && kill -INT -- "-$child" 2>/dev/null
    wait "$child"
    rc=$?
    rm -f "$STATE_DIR/pgid-$t"
    ran=$(($(date +%s) - start))
    run_log=$RUN_DIR/run-$t.log
    execs=$(libfuzzer_stat "$run_log" number_of_executed_units)
    first=$(grep -aoE 'INITED cov: [0-9]+ ft: [0-9]+' "$run_log" | head -n 1)
    last=$(grep -aoE 'cov: [0-9]+ ft: [0-9]+' "$run_log" | tail -n 1)
    c0=$(awk '{ print $3 }' <<<"$first"); f0=$(awk '{ print $5 }' <<<"$first")
    c1=$(awk '{ print $2 }' <<<"$last"); f1=$(awk '{ print $4 }' <<<"$last")
    found=$(comm -13 <(printf '%s\n' "$before") <(ls "$artifacts") |
            grep -E '^(crash|timeout|oom|leak)-' | paste -sd' ' -)
    if [ ! -e "$STATE_DIR/stopping" ] || [ "$ran" -ge "$left" ]; then
        set_left "$t" 0
    else
        set_left "$t" $((left - ran))
    fi
    # merge and minimize into the committed seeds
    bash "$DEVICE" --save-seeds "$t" >>"$log" 2>&1 ||
        note "the merge of $t failed (log: $log)"
    nseeds=$(find "$NCM_TOP/tests/fuzz/corpus/$t" -type f 2>/dev/null | wc -l)
    (
        flock 9
        python3 "$NCM_TOP/scripts/check/fuzz-table.py" "$FINDINGS" \
            "$(date -u +%Y-%m-%d\ %H:%M)" "$run_id" "$t" "${execs:-0}" \
            "$ran" "${c0:-?}" "${c1:-?}" "${f0:-?}" "${f1:-?}" "$nseeds" \
            "${found:-none}"
    ) 9>"$STATE_DIR/.lock" ||
        note "could not write the row of $t into docs/findings.md"
    note "$t: ${execs:-0} executions in ${ran}s, cov ${c0:-?} -> ${c1:-?}," \
         "ft ${f0:-?} -> ${f1:-?}, $nseeds seeds, findings: ${found:-none}"
    if [ -n "$found" ]; then
        return 1
    elif [ "$rc" != 0 ] && [ ! -e "$STATE_DIR/stopping" ]; then
        note "$t: fuzz-device.sh exited $rc (log: $log)"
        return 1
    fi
    return 0
}

# FUZZ_JOBS=N: up to N targets side by side, one libFuzzer process (one
# core) each; every target still gets its own share of the hours
jobs_max=${FUZZ_JOBS:-1}
case "$jobs_max" in
    '' | *[!0-9]* | 0)
        die "FUZZ_JOBS must be a positive whole number, got '$jobs_max'" ;;
esac
rm -f "$STATE_DIR/stopping" "$STATE_DIR"/pgid-*
failed=0
# wait_one: until one running target has ended (a signal interrupts
# wait -n with a status above 128; run_target itself returns 0 or 1)
wait_one() {
    local rc
    while :; do
        wait -n
        rc=$?
        [ "$rc" -ge 128 ] || break
    done
    [ "$rc" = 0 ] || failed=1
}
while read -r t left; do
    [ "$stop" = 0 ] || break
    [ "${left:-0}" -gt 0 ] || continue
    while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do
        wait_one
    done
    [ "$stop" = 0 ] || break
    step "campaign $run_id: $t for ${left}s"
    run_target "$t" "$left" &
done < <(tail -n +2 "$STATE")
while [ "$(jobs -rp | wc -l)" -gt 0 ]; do
    wait_one
done

if [ "$stop" = 1 ]; then
    step "campaign $run_id stopped: $(awk 'NR > 1 { s += $2 } END { print s }' "$STATE") s left;" \
         "run the same command again to go on"
    exit 130
fi
step "campaign $run_id done; rows and totals in docs/findings.md, seeds in tests/fuzz/corpus/ (commit both)"
exit "$failed"
}
