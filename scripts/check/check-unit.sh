#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Build the standalone project (meson.build at the top, no QEMU: the NTB
# codec and the NCM function) twice and run both unit tests in both:
#   build/standalone       plain                  -> suite "unit"
#   build/standalone-asan  ASan + UBSan, halting  -> suite "unit-asan"
#
# Output contract, relied on by scripts that aggregate results: one line
# per test case at column 0,
#   PASS: <suite>/<g_test path>
#   FAIL: <suite>/<g_test path>
#   SKIP: <suite>/<g_test path> (<reason>)
# and nothing else at column 0 starts with those words.  A build failure is
# reported as FAIL: <suite>/build.  Exit status is non-zero if anything
# failed.
#
# Each case runs in its own process (-p PATH) so that an abort or a
# sanitizer report in one case cannot hide the results of the others.

set -euo pipefail
# shellcheck source=scripts/setup/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../setup/common.sh"

export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}

TEST_BINS="test-ncm-ntb test-ncm-function"
failed=0

command -v meson >/dev/null ||
    die "meson not found" \
        "install it: bash scripts/setup/install-deps.sh (or apt-get install meson)"
command -v ninja >/dev/null ||
    die "ninja not found" "install it: apt-get install ninja-build"

# configure DIR LOG [meson options...]: set up or reconfigure DIR
configure() {
    local dir=$1 log=$2
    shift 2
    if [ -f "$dir/build.ninja" ]; then
        meson setup --reconfigure "$dir" "$NCM_TOP" "$@" >"$log" 2>&1
    else
        meson setup "$dir" "$NCM_TOP" "$@" >"$log" 2>&1
    fi
}

# build SUITE DIR [meson options...]: 0 when the unit test binary is built
build() {
    local suite=$1 dir=$2 log
    shift 2
    log="$dir.log"
    mkdir -p "$(dirname "$dir")"
    step "building $suite in ${dir#"$NCM_TOP"/}"
    if ! configure "$dir" "$log" "$@" ||
        ! ninja -C "$dir" $TEST_BINS >>"$log" 2>&1; then
        echo "FAIL: $suite/build"
        tail -n 30 "$log" | sed 's/^/    | /'
        note "full log: $log"
        note "fix the build error above, then rerun: bash scripts/check/check-unit.sh"
        failed=1
        return 1
    fi
}

# run_suite SUITE DIR BIN: run every g_test case of one unit test binary
run_suite() {
    local suite=$1 dir=$2 bin path out rc reason
    local pass=0 fail=0 skip=0
    bin="$dir/$3"

    step "running $suite"
    if ! out=$("$bin" -l 2>&1); then
        echo "FAIL: $suite/list"
        printf '%s\n' "$out" | tail -n 20 | sed 's/^/    | /'
        note "$bin -l failed: the binary does not start; run it by hand"
        failed=1
        return
    fi
    while read -r path; do
        # -l also prints TAP comments and the plan
        [[ $path == /* ]] || continue
        rc=0
        out=$("$bin" --tap -p "$path" 2>&1) || rc=$?
        if [ "$rc" = 0 ] && grep -qE "^ok [0-9]+ $path # SKIP" <<<"$out"; then
            reason=$(sed -nE "s|^ok [0-9]+ $path # SKIP *(.*)|\1|p" \
                     <<<"$out" | head -n 1)
            echo "SKIP: $suite$path (${reason:-skipped})"
            skip=$((skip + 1))
        elif [ "$rc" = 0 ] && grep -qE "^ok [0-9]+ $path\$" <<<"$out"; then
            echo "PASS: $suite$path"
            pass=$((pass + 1))
        else
            echo "FAIL: $suite$path"
            printf '%s\n' "$out" | grep -vE '^# (Start|End) of' |
                tail -n 25 | sed 's/^/    | /'
            note "exit status $rc; reproduce with:"
            note "  UBSAN_OPTIONS=$UBSAN_OPTIONS $bin -p $path"
            fail=$((fail + 1))
        fi
    done <<<"$out"
    note "$suite: $pass passed, $fail failed, $skip skipped"
    if [ "$fail" != 0 ] || [ "$pass" = 0 ]; then
        failed=1
    fi
}

plain=$NCM_BUILD/standalone
asan=$NCM_BUILD/standalone-asan

if build unit "$plain" -Dbuildtype=debug; then
    for t in $TEST_BINS; do
        run_suite unit "$plain" "$t"
    done
fi
if build unit-asan "$asan" -Dbuildtype=debug \
        -Db_sanitize=address,undefined -Db_lundef=false; then
    for t in $TEST_BINS; do
        run_suite unit-asan "$asan" "$t"
    done
fi

if [ "$failed" != 0 ]; then
    die "unit tests failed" \
        "each FAIL above shows the assertion and the command to rerun it" \
        "the codec is hw/usb/ncm-ntb.c (tests/unit/test-ncm-ntb.c), the" \
        "function hw/usb/ncm-function.c (tests/unit/test-ncm-function.c)"
fi
step "unit tests passed"
