#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Run test suites and total their results.  Every suite prints one line per
# case at column 0: "PASS: name", "FAIL: name (...)" or "SKIP: name (...)".
# The last line is "N passed, N failed, N skipped"; exit status is non-zero
# when anything failed.
#
#   scripts/check/check.sh [all|style|unit|tools|fuzz|fuzz-device|device|qtest|guest|dropout|kernel]...
#
# ARCH=arm64 is for the guest suite: it runs the arm64 legs alone
# (tests/guest/run-all.sh); every other suite is x86_64's whatever ARCH
# says.  Without it the guest suite has an arm64 leg too (GUEST_ARM64), so
# qemu-system-aarch64 is built next to qemu-system-x86_64 for it.
set -uo pipefail
. "$(dirname "$0")/../setup/common.sh"
GUEST_ARCH=$NCM_ARCH
export ARCH=x86_64

CHECK_FUZZ_SECONDS=${CHECK_FUZZ_SECONDS:-20}
# fuzz-device: each usb-ncm-dl fuzz target inside QEMU this long (a smoke;
# make fuzz-device runs them for longer)
CHECK_FUZZ_DEVICE_SECONDS=${CHECK_FUZZ_DEVICE_SECONDS:-5}
LOG_DIR=$NCM_BUILD/check-logs
mkdir -p "$LOG_DIR"

suites=${*:-all}
[ "$suites" = all ] && suites="style unit tools fuzz fuzz-device device qtest guest dropout kernel"

needs_qemu=0
needs_arm64=0
for s in $suites; do
    case $s in style|device|qtest|dropout) needs_qemu=1 ;; esac
    if [ "$s" = guest ]; then
        if [ "$GUEST_ARCH" = arm64 ]; then
            needs_arm64=1
        else
            needs_qemu=1
            [ -z "${GUEST_ARM64-xhci}" ] || needs_arm64=1
        fi
    fi
done

passed=0
failed=0
skipped=0
failures=()

run_suite() {
    local name=$1; shift
    local log=$LOG_DIR/$name.log rc p f k

    step "suite '$name': $*"
    "$@" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    p=$(grep -c '^PASS: ' "$log")
    f=$(grep -c '^FAIL: ' "$log")
    k=$(grep -c '^SKIP: ' "$log")
    if [ "$rc" != 0 ] && [ "$f" = 0 ]; then
        echo "FAIL: $name (suite exited with status $rc; log: $log)"
        f=1
        failures+=("$name: exited $rc without a FAIL line, see $log")
    fi
    while IFS= read -r line; do
        failures+=("$line")
    done < <(grep '^FAIL: ' "$log")
    passed=$((passed + p))
    failed=$((failed + f))
    skipped=$((skipped + k))
    note "suite '$name': $p passed, $f failed, $k skipped"
}

# Everything the selected suites need, installed first (idempotent).
dep_sets=build
for s in $suites; do
    case $s in
    guest|dropout) dep_sets="$dep_sets guest" ;;
    fuzz|fuzz-device) dep_sets="$dep_sets fuzz" ;;
    esac
    [ "$s:$needs_arm64" = guest:1 ] && dep_sets="$dep_sets arm64"
done
step "installing what the suites need ($dep_sets)"
if ! bash "$NCM_TOP/scripts/setup/install-deps.sh" $dep_sets; then
    echo "FAIL: deps (could not install $dep_sets; see the messages above)"
    echo "0 passed, 1 failed"
    exit 1
fi

if [ "$needs_qemu" = 1 ]; then
    step "making sure QEMU with usb-ncm-dl is built"
    if ! bash "$NCM_TOP/scripts/setup/build-qemu.sh"; then
        echo "FAIL: build/qemu (QEMU did not build; see the messages above)"
        echo "0 passed, 1 failed"
        exit 1
    fi
    # SANITIZE=1 (scripts/setup/sanitize.sh): make sure it is the ASan one
    if [ "${SANITIZE:-0}" != 0 ] &&
       ! ldd "$NCM_BUILD/qemu/qemu-system-x86_64" | grep -q libasan; then
        echo "FAIL: build/sanitize ($NCM_BUILD/qemu/qemu-system-x86_64 has no" \
             "ASan: was $NCM_BUILD/qemu configured without --enable-asan?)"
        echo "0 passed, 1 failed"
        exit 1
    fi
fi

# qemu-system-aarch64 for the arm64 guest legs: a build that fails is one
# FAIL (the legs then say that QEMU is missing), not the end of the run
if [ "$needs_arm64" = 1 ]; then
    step "making sure qemu-system-aarch64 with usb-ncm-dl is built (arm64 guest legs)"
    if ! ARCH=arm64 bash "$NCM_TOP/scripts/setup/build-qemu.sh"; then
        echo "FAIL: build/qemu-aarch64 (qemu-system-aarch64 did not build; see the messages above)"
        failed=$((failed + 1))
        failures+=("build/qemu-aarch64: see the messages above")
    fi
fi

for s in $suites; do
    case $s in
    style) run_suite style bash "$NCM_TOP/scripts/check/checkpatch.sh" ;;
    unit) run_suite unit bash "$NCM_TOP/scripts/check/check-unit.sh" ;;
    tools) run_suite tools python3 "$NCM_TOP/tests/tools/run.py" ;;
    fuzz) run_suite fuzz bash "$NCM_TOP/scripts/check/fuzz.sh" "$CHECK_FUZZ_SECONDS" ;;
    fuzz-device)
        run_suite fuzz-device bash "$NCM_TOP/scripts/check/fuzz-device.sh" \
            "$CHECK_FUZZ_DEVICE_SECONDS" ;;
    device) run_suite device bash "$NCM_TOP/tests/device/check-properties.sh" ;;
    qtest) run_suite qtest bash "$NCM_TOP/scripts/check/check-qtest.sh" ;;
    guest) run_suite guest env ARCH="$GUEST_ARCH" bash "$NCM_TOP/tests/guest/run-all.sh" ;;
    dropout) run_suite dropout bash "$NCM_TOP/tests/guest/run-dropout-test.sh" ;;
    # the kernel loop's smoke: bisect driver on a made-up history, the
    # config fragments against a Linux tree (tests/kernel/smoke.sh)
    kernel) run_suite kernel bash "$NCM_TOP/tests/kernel/smoke.sh" ;;
    *) die "unknown suite '$s'" "use style, unit, tools, fuzz, fuzz-device, device, qtest, guest, dropout, kernel or all" ;;
    esac
done

if [ "${#failures[@]}" -gt 0 ]; then
    echo
    echo "Failures (logs in $LOG_DIR):"
    printf '  %s\n' "${failures[@]}"
fi
echo
if [ "$skipped" -gt 0 ]; then
    echo "$passed passed, $failed failed, $skipped skipped"
else
    echo "$passed passed, $failed failed"
fi
[ "$failed" = 0 ]
