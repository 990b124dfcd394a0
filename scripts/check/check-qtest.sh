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

if ! QEMU_TARGETS="qemu-system-x86_64 $TEST" \
     bash "$NCM_TOP/scripts/setup/build-qemu.sh" >&2; then
    echo "FAIL: qtest/build (QEMU or $TEST did not build; see above)"
    exit 1
fi
[ -x "$BIN" ] || {
    echo "FAIL: qtest/build ($BIN missing after the build)"
    exit 1
}

export QTEST_QEMU_BINARY=$NCM_BUILD/qemu/qemu-system-x86_64
rm -rf "$LOGS"
mkdir -p "$LOGS"

mapfile -t cases < <("$BIN" -l 2>/dev/null | grep '^/' |
                     grep -E -- "${filter:-.}")
if [ "${#cases[@]}" = 0 ]; then
    echo "FAIL: qtest/list (no case of $TEST matched '${filter:-.}';" \
         "is usb-ncm-dl in $QTEST_QEMU_BINARY?)"
    exit 1
fi
step "running ${#cases[@]} qtest case(s), one process each" >&2

failed=0
for path in "${cases[@]}"; do
    log=$LOGS/$(echo "${path#/}" | tr '/' '_').log
    timeout --kill-after=10 "$CASE_TIMEOUT" "$BIN" --tap -k -p "$path" \
        >"$log" 2>&1
    rc=$?
    name="qtest${path}"
    # a sanitizer report (SANITIZE=1; QEMU's or the test's own) fails the
    # case whatever the test said (scripts/setup/sanitize.sh)
    if ! sanitizer_fail "$name" "$log"; then
        failed=1
        continue
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
            failed=1
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
        failed=1
        ;;
    esac
done
exit "$failed"
