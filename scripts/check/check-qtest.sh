#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Build QEMU with usb-ncm-dl and tests/qtest/usb-ncm-dl-test (through
# scripts/setup/build-qemu.sh, which installs what is missing and fetches QEMU),
# then run every case of the qtest in its own process, so that an abort in
# one case cannot hide the results of the others.
#
#   scripts/check/check-qtest.sh [REGEX]      only the cases whose path matches
#
# CHECK_QTEST_JOBS cases at once (the cores); then a share of the fixture's
# cases again in migrate-each mode (CHECK_QTEST_MIGRATE_SHARE percent, 10;
# CHECK_QTEST_MIGRATE_SEED picks which, printed), as "qtest-migrate-each/...".
#
# Output contract, relied on by scripts/check/check.sh: one line per case at
# column 0,
#   PASS: qtest/<g_test path>
#   FAIL: qtest/<g_test path> (<why>)
#   SKIP: qtest/<g_test path> (<reason>)
# A build failure is "FAIL: qtest/build (...)"; an ASan/UBSan report in a
# case's output (SANITIZE=1) is a FAIL of that case.  Exit status is non-zero
# if anything failed.  Logs of failed cases: build/check-logs/qtest/.
set -uo pipefail
# shellcheck source=scripts/setup/common.sh
. "$(dirname "$0")/../setup/common.sh"

filter=${1:-}
TEST=tests/qtest/usb-ncm-dl-test
BIN=$NCM_BUILD/qemu/$TEST
LOGS=$NCM_BUILD/check-logs/qtest
CASE_TIMEOUT=${CHECK_QTEST_CASE_TIMEOUT:-300}

if [ "$filter" != --one ] &&
   ! QEMU_TARGETS="qemu-system-x86_64 $TEST tests/qtest/usb-core-test tests/qtest/usb-core-migration-test tests/qtest/migration-query-test \
tests/qtest/netdev-zero-length-test" \
     bash "$NCM_TOP/scripts/setup/build-qemu.sh" >&2; then
    echo "FAIL: qtest/build (QEMU or $TEST did not build; see above)"
    exit 1
fi
[ -x "$BIN" ] || {
    echo "FAIL: qtest/build ($BIN missing after the build)"
    exit 1
}

# (NCM_QTEST_SRC_QEMU: the source of a cross-version run, below)
export QTEST_QEMU_BINARY=${NCM_QTEST_SRC_QEMU:-$NCM_BUILD/qemu/qemu-system-x86_64}

# run_one BIN PATH [each|cross]: one case of BIN in its own process;
# its verdict line.  cross: migrate-each with the destinations on the
# other QEMU (NCM_QTEST_QEMU_OTHER) and the older machine type both know
run_one() {
    local bin=$1 path=$2 mode=${3:-} log rc result why note name prefix=qtest
    [ "$mode" = each ] && prefix=qtest-migrate-each
    [ "$mode" = cross ] && prefix=qtest-migrate-$CROSS_NAME && mode=each
    log=$LOGS/$prefix$(echo "$path" | tr '/' '_').log
    NCM_QTEST_MIGRATE=$mode timeout --kill-after=10 "$CASE_TIMEOUT" \
        "$bin" --tap -k -p "$path" >"$log" 2>&1
    rc=$?
    name="$prefix${path}"
    # a sanitizer report (SANITIZE=1; QEMU's or the test's own) fails the
    # case whatever the test said (scripts/setup/sanitize.sh)
    if ! sanitizer_fail "$name" "$log"; then
        return 1
    fi
    result=$(grep -E "^(not )?ok [0-9]+ " "$log" | head -n 1)
    case $result in
    "ok "*"# SKIP"*)
        echo "SKIP: $name (${result##*# SKIP })"
        rm -f "$log"
        ;;
    "ok "*)
        if [ "$rc" = 0 ]; then
            echo "PASS: $name"
            rm -f "$log"
        else
            echo "FAIL: $name (exit status $rc after ok; log: $log)"
            return 1
        fi
        ;;
    *)
        if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
            why="timed out after ${CASE_TIMEOUT}s"
        else
            why=$(grep -E '^(ERROR|\*\*|Bail out|.*assertion)' "$log" |
                  grep -v '^\*\*$' | head -n 1 | cut -c1-200)
            [ -n "$why" ] || why=$(grep -v '^#' "$log" | tail -n 1 |
                                   cut -c1-200)
            why="${why:-exit status $rc}"
            note=$(grep '^# ' "$log" |
                   grep -vE '^# (starting QEMU|Start of|End of|random seed)' |
                   tail -n 1 | cut -c3-120)
            [ -z "$note" ] || why="$why; $note"
        fi
        echo "FAIL: $name ($why; log: $log)"
        return 1
        ;;
    esac
}

# (xargs runs this script again for each case)
if [ "$filter" = --one ]; then
    run_one "$2" "$3" "${4:-}"
    exit
fi

rm -rf "$LOGS"
mkdir -p "$LOGS"

mapfile -t cases < <("$BIN" -l 2>/dev/null | grep '^/' |
                     grep -E -- "${filter:-.}")
if [ "${#cases[@]}" = 0 ]; then
    echo "FAIL: qtest/list (no case of $TEST matched '${filter:-.}';" \
         "is usb-ncm-dl in $QTEST_QEMU_BINARY?)"
    exit 1
fi
# Each case is a process of its own (qtest accel: QEMU and the test
# each busy in turn), so as many run at once as there are cores.
JOBS=${CHECK_QTEST_JOBS:-$(nproc)}
step "running ${#cases[@]} qtest case(s), one process each, $JOBS at a time" >&2
failed=0
if [ "${CHECK_QTEST_PLAIN:-1}" != 0 ]; then
    printf '%s\n' "${cases[@]}" |
        xargs -d '\n' -P "$JOBS" -I{} bash "$0" --one "$BIN" {} || failed=1
fi

# QEMU's own tests that come with the series' core patches, in QEMU's
# style: the USB core's reset that unconfigures, the configuration and a
# detached device restored on load (patches/0025, 0026), query-migrate's
# error-desc on a destination that migrated on (patches/0035), a frame of
# no bytes that stopped -netdev socket and stream reading (patches/0039)
for core in usb-core-test usb-core-migration-test migration-query-test \
            netdev-zero-length-test; do
    cbin=$NCM_BUILD/qemu/tests/qtest/$core
    [ -x "$cbin" ] || continue
    # (a filter may match none of them: that is no failure)
    mapfile -t core_cases < <("$cbin" -l 2>/dev/null | grep '^/' |
                              grep -E -- "${filter:-.}")
    [ "${#core_cases[@]}" -gt 0 ] || continue
    printf '%s\n' "${core_cases[@]}" |
        xargs -d '\n' -P "$JOBS" -I{} bash "$0" --one "$cbin" {} ||
        failed=1
done

# Migrate-each (tests/qtest/usb-ncm-dl/migrate.c): a share of the cases
# that drive the adapter through the fixture again, the machine saved and
# loaded into a new QEMU at every step; which ones a seed decides, printed
# so that a failure can be run again (CHECK_QTEST_MIGRATE_SEED=...).
# make check-migrate-each runs them all (CHECK_QTEST_MIGRATE_SHARE=100).
share=${CHECK_QTEST_MIGRATE_SHARE:-10}
# (a fixed seed by default, so that make check runs the same cases every
# time: a case that fails only sometimes is a CI job its users turn off)
seed=${CHECK_QTEST_MIGRATE_SEED:-20261204}
if [ "$share" != 0 ]; then
    mapfile -t each < <(printf '%s\n' "${cases[@]}" |
        grep -E '^/x86_64/usb-ncm-dl/(super|high)/' |
        awk -v seed="$seed" -v share="$share" \
            'BEGIN { srand(seed) } rand() * 100 < share')
    step "migrate-each: ${#each[@]} case(s) (share $share %, seed $seed:" \
         "CHECK_QTEST_MIGRATE_SEED=$seed CHECK_QTEST_MIGRATE_SHARE=$share" \
         "picks them again)" >&2
    if [ "${#each[@]}" -gt 0 ]; then
        printf '%s\n' "${each[@]}" |
            xargs -d '\n' -P "$JOBS" -I{} bash "$0" --one "$BIN" {} each ||
            failed=1
    fi
fi
# Across QEMU versions: with both builds there (QEMU_VERSION=10.2 make
# qemu builds the other), a few cases whose machine goes from this
# QEMU to the other one at every step, on the 10.0 machine type, and
# back (CHECK_QTEST_CROSS=0: none; =all: every case migrate-each takes,
# make check-migrate-cross).  A stream of one version that the other
# refuses fails the case with the field named.
other=$NCM_OTHER_QEMU
cross_cases=(super/migrate/mid-transfer super/migrate/queued-in-tds
             super/rx/frames super/tx/64k-ntb super/notify/set-link
             high/migrate/mid-transfer)
if [ "${CHECK_QTEST_CROSS:-1}" = all ]; then
    mapfile -t cross_cases < <(printf '%s\n' "${cases[@]}" |
        sed -nE 's,^/x86_64/usb-ncm-dl/((super|high)/.*),\1,p')
fi
# (the 10.0 build's test binary drives both: 10.2's libqtest starts QEMU
# with -run-with exit-with-parent=on, which 10.0 does not know)
crossbin=$NCM_TOP/build/qemu/$TEST
if [ "${CHECK_QTEST_CROSS:-1}" != 0 ] && [ -x "$other" ] &&
   [ -x "$crossbin" ] && [ "$other" != "$QTEST_QEMU_BINARY" ]; then
    this_v=$(cat "$NCM_BUILD/qemu-src/VERSION")
    other_v=$("$other" --version | sed -n 's/.*version \([0-9.]*\).*/\1/p')
    step "migrate-each across versions: $this_v <-> $other_v," \
         "machine pc-i440fx-10.0, ${#cross_cases[@]} case(s) each way" >&2
    export NCM_QTEST_MACHINE=pc-i440fx-10.0 NCM_QTEST_QEMU_OTHER=$other
    export NCM_QTEST_QEMU_THIS=$QTEST_QEMU_BINARY
    printf '/x86_64/usb-ncm-dl/%s\n' "${cross_cases[@]}" |
        CROSS_NAME=$this_v-to-$other_v NCM_QTEST_MIGRATE_DST=NCM_QTEST_QEMU_OTHER \
        xargs -d '\n' -P "$JOBS" -I{} bash "$0" --one "$crossbin" {} cross ||
        failed=1
    printf '/x86_64/usb-ncm-dl/%s\n' "${cross_cases[@]}" |
        CROSS_NAME=$other_v-to-$this_v NCM_QTEST_SRC_QEMU=$other \
        NCM_QTEST_MIGRATE_DST=NCM_QTEST_QEMU_THIS \
        xargs -d '\n' -P "$JOBS" -I{} bash "$0" --one "$crossbin" {} cross ||
        failed=1
elif [ "${CHECK_QTEST_CROSS:-1}" != 0 ]; then
    # not silently absent: the summary counts what was not run, and why
    why="$other not built: QEMU_VERSION=$NCM_OTHER_VERSION make qemu builds it"
    [ -x "$crossbin" ] || why="$crossbin not built"
    for c in "${cross_cases[@]}"; do
        echo "SKIP: qtest-migrate-cross/x86_64/usb-ncm-dl/$c ($why)"
    done
fi
exit "$failed"
