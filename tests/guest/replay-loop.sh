#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# make replay-loop: record and replay one record/replay scenario of
# tests/guest/run-replay-test.sh again and again, to show that it stays
# in step (a replay that stalls now and then is one CI turns off).
#
#   tests/guest/replay-loop.sh [SCENARIO] [N]     default: ehci 10
#
# Every round records anew and replays; a round passes when every check of
# run-replay-test.sh passed.  Prints one line per round and, last,
# "N passed, N failed"; exits non-zero when a round failed.  Each round's
# output is in build/replay-loop/round-K.log, its recording in
# build/replay-loop/round-K/.
set -uo pipefail
. "$(dirname "$0")/../../scripts/setup/common.sh"

scenario=${1:-${SCENARIO:-ehci}}
rounds=${2:-${REPLAY_LOOP:-10}}
dir=$NCM_BUILD/replay-loop
rm -rf "$dir"
mkdir -p "$dir"
pass=0
fail=0
for ((k = 1; k <= rounds; k++)); do
    step "replay-loop: $scenario, round $k of $rounds"
    log=$dir/round-$k.log
    t0=$SECONDS
    REPLAY_DIR=$dir/round-$k bash "$NCM_TOP/tests/guest/run-replay-test.sh" \
        "$scenario" >"$log" 2>&1
    rc=$?
    np=$(grep -c '^PASS: ' "$log")
    nf=$(grep -c '^FAIL: ' "$log")
    if [ "$rc" = 0 ] && [ "$nf" = 0 ] && [ "$np" -gt 0 ]; then
        echo "PASS: replay-loop/$scenario/round-$k ($np checks," \
             "$((SECONDS - t0)) s)"
        pass=$((pass + 1))
    else
        echo "FAIL: replay-loop/$scenario/round-$k (status $rc, $np passed," \
             "$nf failed: $(grep -m1 '^FAIL: ' "$log" | cut -c1-200);" \
             "${log#"$NCM_TOP"/})"
        fail=$((fail + 1))
    fi
done
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
