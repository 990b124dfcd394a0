#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Run test suites and total their results.  Every suite prints one line per
# case at column 0: "PASS: name", "FAIL: name (...)" or "SKIP: name (...)".
# The last line is "N passed, N failed, N skipped"; exit status is non-zero
# when anything failed.
#
#   scripts/check/check.sh [all|style|unit|tools|fuzz|fuzz-device|device|qtest|guest|dropout|kernel|vng|tuxrun]...
#
# A full run (all suites, what make check runs) writes its results table
# and wall time into docs/testing.md, between the markers
# <!-- check-results:begin --> and <!-- check-results:end -->
# (check-results-10.2 for QEMU_VERSION=10.2, ...-sanitize for SANITIZE=1);
# CHECK_RESULTS=1 writes it after a partial run too, CHECK_RESULTS=0 never.
#
# ARCH=arm64 is for the guest suite: it runs the arm64 legs alone
# (tests/guest/run-all.sh); every other suite is x86_64's whatever ARCH
# says.  Without it the guest suite has an arm64 leg too (GUEST_ARM64), so
# qemu-system-aarch64 is built next to qemu-system-x86_64 for it.
set -uo pipefail
. "$(dirname "$0")/../setup/common.sh"
T_START=$SECONDS
# How warm this run started, for the results table: the compiler cache's
# hits and misses over the run, and whether the downloads (QEMU source,
# guest kernels and image) were already in NCM_CACHE.  A run whose builds
# all missed and whose cache was empty is a cold-cache run.
ccache_counts() {
    ccache --print-stats 2>/dev/null |
        awk '$1 == "direct_cache_hit" || $1 == "preprocessed_cache_hit" { h += $2 }
             $1 == "cache_miss" { m += $2 }
             END { printf "%d %d\n", h, m }'
}
read -r CCACHE_HITS0 CCACHE_MISSES0 < <(ccache_counts)
BUILD_SECONDS=0
caches_line() {
    local h m
    read -r h m < <(ccache_counts)
    echo "Caches: downloads $CACHE_AT_START at the start; ccache" \
         "$((h - CCACHE_HITS0)) hits, $((m - CCACHE_MISSES0)) misses over" \
         "the run; builds (QEMU for the suites, before them) $(duration "$BUILD_SECONDS")."
}
if [ -d "$NCM_CACHE" ] && [ -n "$(ls -A "$NCM_CACHE" 2>/dev/null)" ]; then
    CACHE_AT_START="$(du -sh "$NCM_CACHE" 2>/dev/null | cut -f1) in $NCM_CACHE"
else
    CACHE_AT_START="empty ($NCM_CACHE)"
fi
GUEST_ARCH=$NCM_ARCH
export ARCH=x86_64

CHECK_FUZZ_SECONDS=${CHECK_FUZZ_SECONDS:-20}
# fuzz-device: each usb-ncm-dl fuzz target inside QEMU this long (a smoke;
# make fuzz-device runs them for longer)
CHECK_FUZZ_DEVICE_SECONDS=${CHECK_FUZZ_DEVICE_SECONDS:-5}
LOG_DIR=$NCM_BUILD/check-logs
mkdir -p "$LOG_DIR"

suites=${*:-all}
write_results=${CHECK_RESULTS:-0}
[ "$suites" = all ] && write_results=${CHECK_RESULTS:-1}
# (fuzz-device after the guest suite: its clang build runs beside the
# suites before it, see below)
[ "$suites" = all ] && suites="style unit tools device qtest guest fuzz fuzz-device dropout kernel vng"

needs_qemu=0
needs_arm64=0
for s in $suites; do
    case $s in style|device|qtest|dropout|vng|tuxrun) needs_qemu=1 ;; esac
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
results=()          # "suite passed failed skipped seconds", one per suite run

run_suite() {
    local name=$1; shift
    local log=$LOG_DIR/$name.log rc p f k t0=$SECONDS

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
    results+=("$name $p $f $k $((SECONDS - t0))")
    note "suite '$name': $p passed, $f failed, $k skipped"
}

# 75 -> "1 min 15 s"
duration() {
    if [ "$1" -ge 60 ]; then
        echo "$(($1 / 60)) min $(($1 % 60)) s"
    else
        echo "$1 s"
    fi
}

# The results table of this run, between its markers in docs/testing.md
write_results_table() {
    local doc=$NCM_TOP/docs/testing.md key=check-results qv rev san="" r
    local name p f k t table
    [ "$QEMU_VERSION" = 10.0 ] || key=$key-$QEMU_VERSION
    [ "${SANITIZE:-0}" = 0 ] || key=$key-sanitize
    [ "${SANITIZE:-0}" = 0 ] || san=", SANITIZE=$SANITIZE"
    qv=$(cat "$NCM_BUILD/qemu-src/VERSION" 2>/dev/null || echo "$QEMU_VERSION")
    rev=$(git -C "$NCM_TOP" describe --always --dirty 2>/dev/null || echo unknown)
    table=$(
        echo "Written by \`scripts/check/check.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC')" \
             "at $rev (QEMU $qv$san," \
             "guest ARCH $GUEST_ARCH, $(nproc) CPUs, suites: ${suites// /, }):" \
             "**$passed passed, $failed failed, $skipped skipped** in" \
             "$(duration $((SECONDS - T_START)))."
        echo
        caches_line
        echo
        echo "| suite | passed | failed | skipped | wall time |"
        echo "|---|---|---|---|---|"
        for r in "${results[@]}"; do
            read -r name p f k t <<<"$r"
            echo "| $name | $p | $f | $k | $(duration "$t") |"
        done
    )
    if ! python3 "$NCM_TOP/scripts/lib/doc_block.py" write "$doc" "$key" - \
            <<<"$table"; then
        note "docs/testing.md has no $key markers: results not written"
        return 0
    fi
    note "results written into docs/testing.md ($key)"
}

# Everything the selected suites need, installed first (idempotent).
dep_sets=build
for s in $suites; do
    case $s in
    guest|dropout) dep_sets="$dep_sets guest" ;;
    fuzz|fuzz-device) dep_sets="$dep_sets fuzz" ;;
    vng) dep_sets="$dep_sets guest" ;;
    esac
    [ "$s:$needs_arm64" = guest:1 ] && dep_sets="$dep_sets arm64"
done
step "installing what the suites need ($dep_sets)"
if ! bash "$NCM_TOP/scripts/setup/install-deps.sh" $dep_sets; then
    echo "FAIL: deps (could not install $dep_sets; see the messages above)"
    echo "0 passed, 1 failed"
    exit 1
fi

BUILD_T0=$SECONDS
if [ "$needs_qemu" = 1 ]; then
    step "making sure QEMU with usb-ncm-dl is built"
    if ! bash "$NCM_TOP/scripts/setup/build-qemu.sh"; then
        echo "FAIL: build/qemu (QEMU did not build; see the messages above)"
        echo "0 passed, 1 failed"
        exit 1
    fi
    # SANITIZE=1 (scripts/setup/sanitize.sh): make sure it is the ASan one
    # (ldd's output read whole first: grep -q stops reading at the match,
    # and under pipefail the SIGPIPE ldd may get then fails the pipeline)
    if [ "${SANITIZE:-0}" != 0 ] &&
       ! grep -q libasan <<<"$(ldd "$NCM_BUILD/qemu/qemu-system-x86_64")"; then
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
        echo "FAIL: build/qemu/qemu-system-aarch64 (it did not build; see the messages above)"
        failed=$((failed + 1))
        failures+=("build/qemu/qemu-system-aarch64: see the messages above")
    fi
fi
BUILD_SECONDS=$((SECONDS - BUILD_T0))

# The device fuzzer's clang build (scripts/check/fuzz-device.sh, the
# longest build of a cold run: about 12 minutes of both cores) starts now
# in the background at nice 10, so that it takes the CPU time the suites
# before fuzz-device leave over (the guest runs wait on their guests'
# timers most of the time); the fuzz and fuzz-device suites wait for it,
# and their build step then finds the binary up to date (a build that
# failed is run again there, under the same lock, and reported).
# CHECK_FUZZ_EARLY=0 builds it in the suite instead.
fuzz_build_pid=""
# wait_fuzz_build: the background build done, before a suite that runs
# the device fuzzer (fuzz, the codec's targets, and fuzz-device)
wait_fuzz_build() {
    if [ -n "$fuzz_build_pid" ]; then
        step "waiting for the device fuzzer's build (log: $LOG_DIR/fuzz-device-build.log)"
        wait "$fuzz_build_pid" ||
            note "its build failed: the suite builds it again and says why"
        fuzz_build_pid=""
    fi
}
case " $suites " in
*" fuzz "* | *" fuzz-device "*)
    if [ "${CHECK_FUZZ_EARLY:-1}" != 0 ]; then
        step "building the device fuzzer in the background (log: $LOG_DIR/fuzz-device-build.log)"
        nice -n 10 bash "$NCM_TOP/scripts/check/fuzz-device.sh" --list \
            >"$LOG_DIR/fuzz-device-build.log" 2>&1 &
        fuzz_build_pid=$!
    fi
    ;;
esac

for s in $suites; do
    case $s in
    style) run_suite style bash "$NCM_TOP/scripts/check/checkpatch.sh" ;;
    unit) run_suite unit bash "$NCM_TOP/scripts/check/check-unit.sh" ;;
    tools) run_suite tools python3 "$NCM_TOP/tests/tools/run.py" ;;
    fuzz)
        wait_fuzz_build
        run_suite fuzz bash "$NCM_TOP/scripts/check/fuzz.sh" "$CHECK_FUZZ_SECONDS" ;;
    fuzz-device)
        wait_fuzz_build
        run_suite fuzz-device bash "$NCM_TOP/scripts/check/fuzz-device.sh" \
            "$CHECK_FUZZ_DEVICE_SECONDS" ;;
    device) run_suite device bash "$NCM_TOP/tests/device/check-properties.sh" ;;
    qtest) run_suite qtest bash "$NCM_TOP/scripts/check/check-qtest.sh" ;;
    guest) run_suite guest env ARCH="$GUEST_ARCH" bash "$NCM_TOP/tests/guest/run-all.sh" ;;
    dropout) run_suite dropout bash "$NCM_TOP/tests/guest/run-dropout-test.sh" ;;
    # the kernel loop's smoke: bisect driver on a made-up history, the
    # config fragments against a Linux tree (tests/kernel/smoke.sh)
    kernel) run_suite kernel bash "$NCM_TOP/tests/kernel/smoke.sh" ;;
    # usb-ncm-dl under virtme-ng (scripts/kernel/vng-ncm.sh): one vng boot
    # under TCG on make install's QEMU (its own dependency set: a vng that
    # cannot be installed is a SKIP line, not a failure of the whole run)
    vng) run_suite vng bash "$NCM_TOP/tests/kernel/vng-smoke.sh" ;;
    # the same device in a tuxrun job (make check-tuxrun, not in all: a SKIP
    # line where tuxrun is not installed, which is every machine here)
    tuxrun) run_suite tuxrun bash "$NCM_TOP/scripts/kernel/tuxrun-ncm.sh" ;;
    *) die "unknown suite '$s'" "use style, unit, tools, fuzz, fuzz-device, device, qtest, guest, dropout, kernel, vng, tuxrun or all" ;;
    esac
done

if [ "${#failures[@]}" -gt 0 ]; then
    echo
    echo "Failures (logs in $LOG_DIR):"
    printf '  %s\n' "${failures[@]}"
fi
[ "$write_results" != 1 ] || write_results_table
echo "    $(caches_line)"
echo
if [ "$skipped" -gt 0 ]; then
    echo "$passed passed, $failed failed, $skipped skipped"
else
    echo "$passed passed, $failed failed"
fi
[ "$failed" = 0 ]
