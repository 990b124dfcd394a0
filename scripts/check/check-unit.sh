#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The unit tests of the NTB codec (tests/unit/test-ncm-ntb.c) and the NCM
# function (tests/unit/test-ncm-function.c) are QEMU unit tests: patches
# 0009 and 0036 list them in QEMU's tests/unit/meson.build, so they build
# in QEMU's tree, against its headers and libqemuutil, as QEMU's own
# `make check-unit` builds them.  Two builds, both cases of both tests:
#   unit       in $NCM_BUILD/qemu (scripts/setup/build-qemu.sh's tree;
#              under SANITIZE=1 that build has ASan and UBSan)
#   unit-asan  in $NCM_BUILD/unit-asan: the same tree configured with
#              --enable-asan --enable-ubsan, building only the two tests
#              (not under SANITIZE=1, where "unit" is that build already)
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
# shellcheck source=scripts/setup/qemu-tree.sh
source "$NCM_TOP/scripts/setup/qemu-tree.sh"

export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}

TEST_BINS="tests/unit/test-ncm-ntb tests/unit/test-ncm-function"
failed=0

# build SUITE DIR: 0 when DIR has both unit tests built
build() {
    local suite=$1 dir=$2 log
    log="$dir-unit.log"
    step "building $suite in ${dir#"$NCM_TOP"/}"
    # shellcheck disable=SC2086  # TEST_BINS: one word per target
    if ! ninja -C "$dir" $TEST_BINS >"$log" 2>&1; then
        echo "FAIL: $suite/build"
        grep -E 'error|FAILED' "$log" | head -n 20 | sed 's/^/    | /'
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

# QEMU's tree with our files and patches, configured and built
# (incrementally: the suites after this one need the same build)
if ! bash "$NCM_TOP/scripts/setup/build-qemu.sh" >"$NCM_BUILD/unit-qemu.log" 2>&1; then
    echo "FAIL: unit/build"
    tail -n 20 "$NCM_BUILD/unit-qemu.log" | sed 's/^/    | /'
    die "QEMU's tree did not build (log: $NCM_BUILD/unit-qemu.log)" \
        "fix it, then rerun: bash scripts/check/check-unit.sh"
fi
if build unit "$NCM_QEMU_OBJ"; then
    for t in $TEST_BINS; do
        run_suite unit "$NCM_QEMU_OBJ" "$t"
    done
fi

# The ASan + UBSan build of the two tests: QEMU's configure with
# --enable-asan --enable-ubsan on the same tree; ninja builds what the
# tests link (libqemuutil and QOM), nothing of a machine.
if [ "${SANITIZE:-0}" = 0 ]; then
    asan=$NCM_BUILD/unit-asan
    if ! NCM_QEMU_CONFIGURE_EXTRA=$'--enable-asan\n--enable-ubsan' \
         qemu_obj_ready "$NCM_BUILD/qemu-src" "$asan" "$asan-configure.log"; then
        echo "FAIL: unit-asan/build"
        tail -n 20 "$asan-configure.log" | sed 's/^/    | /'
        note "configure failed (log: $asan-configure.log)"
        failed=1
    elif build unit-asan "$asan"; then
        for t in $TEST_BINS; do
            run_suite unit-asan "$asan" "$t"
        done
    fi
fi

if [ "$failed" != 0 ]; then
    die "unit tests failed" \
        "each FAIL above shows the assertion and the command to rerun it" \
        "the codec is hw/usb/ncm-ntb.c (tests/unit/test-ncm-ntb.c), the" \
        "function hw/usb/ncm-function.c (tests/unit/test-ncm-function.c)"
fi
step "unit tests passed"
