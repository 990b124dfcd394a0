#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Usage: scripts/check/fuzz.sh [SECONDS]        (default 60)
#
# Build the libFuzzer harnesses of the NTB codec with clang, ASan and UBSan
# in build/fuzz and run each of them for SECONDS, one after the other (so
# the whole run takes about 2 x SECONDS plus the build):
#   ncm-parse      tests/fuzz/fuzz-ncm-parse.c      OUT transfer parser
#   ncm-roundtrip  tests/fuzz/fuzz-ncm-roundtrip.c  builder -> parser
#
# The committed seeds in tests/fuzz/corpus/<name>/ are copied into the
# working corpus build/fuzz/corpus-<name> (kept between runs, not in git).
# Crash, leak, timeout and OOM inputs land in build/fuzz/artifacts-<name>/
# and are kept.
#
# Output contract (column 0, one line per fuzzer):
#   PASS: fuzz/<name> | FAIL: fuzz/<name> | SKIP: fuzz/<name> (<reason>)
# Exit status is non-zero if a fuzzer failed; missing clang/libFuzzer is a
# SKIP with exit status 0.

set -euo pipefail
# shellcheck source=scripts/setup/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../setup/common.sh"

FUZZERS=(ncm-parse ncm-roundtrip)
fuzz_secs=${1:-60}
[[ $fuzz_secs =~ ^[1-9][0-9]*$ ]] ||
    die "SECONDS must be a positive integer, got '$fuzz_secs'" \
        "usage: scripts/check/fuzz.sh [SECONDS]"

skip_all() {
    local name
    for name in "${FUZZERS[@]}"; do
        echo "SKIP: fuzz/$name ($1)"
    done
    exit 0
}

command -v clang >/dev/null || skip_all "clang not installed"
command -v meson >/dev/null || skip_all "meson not installed"
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
    'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)' \
    '{ (void)d; (void)n; return 0; }' >"$probe/probe.c"
clang -fsanitize=fuzzer,address,undefined "$probe/probe.c" \
    -o "$probe/probe" >/dev/null 2>&1 ||
    skip_all "libFuzzer not installed: apt-get install libclang-rt-14-dev"

dir=$NCM_BUILD/fuzz
log=$dir.log
mkdir -p "$NCM_BUILD"
step "building fuzzers in ${dir#"$NCM_TOP"/}"
# shellcheck disable=SC2054 # "address,undefined" is one meson value
opts=(-Dfuzzing=true -Dbuildtype=debugoptimized
      -Db_sanitize=address,undefined -Db_lundef=false)
# a build dir configured with another compiler cannot be switched to clang
if [ -f "$dir/build.ninja" ] &&
    ! grep -q '"id": "clang"' "$dir/meson-info/intro-compilers.json" \
        2>/dev/null; then
    note "build/fuzz was not configured with clang: starting it afresh"
    rm -rf "$dir"
fi
if [ -f "$dir/build.ninja" ]; then
    setup=(meson setup --reconfigure "$dir" "$NCM_TOP" "${opts[@]}")
else
    setup=(env CC=clang meson setup "$dir" "$NCM_TOP" "${opts[@]}")
fi
if ! "${setup[@]}" >"$log" 2>&1 ||
    ! ninja -C "$dir" "${FUZZERS[@]/#/fuzz-}" >>"$log" 2>&1; then
    for name in "${FUZZERS[@]}"; do
        echo "FAIL: fuzz/$name"
    done
    tail -n 30 "$log" | sed 's/^/    | /'
    die "fuzzer build failed (full log: $log)" \
        "fix the error above and rerun: bash scripts/check/fuzz.sh $fuzz_secs" \
        "if build/fuzz was configured with another compiler: rm -rf $dir"
fi

export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
failed=0
summary=()

for name in "${FUZZERS[@]}"; do
    bin=$dir/fuzz-$name
    corpus=$dir/corpus-$name
    artifacts=$dir/artifacts-$name
    run_log=$dir/fuzz-$name.log
    mkdir -p "$corpus" "$artifacts"
    cp -f "$NCM_TOP/tests/fuzz/corpus/$name/"* "$corpus/"
    before=$(find "$artifacts" -type f | sort)

    step "fuzzing $name for ${fuzz_secs}s (log: ${run_log#"$NCM_TOP"/})"
    rc=0
    "$bin" -max_len=70000 -max_total_time="$fuzz_secs" -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$artifacts/" "$corpus" >"$run_log" 2>&1 || rc=$?

    new=$(comm -13 <(printf '%s\n' "$before") \
                   <(find "$artifacts" -type f | sort) | sed '/^$/d')
    execs=$(libfuzzer_stat "$run_log" average_exec_per_sec)
    runs=$(libfuzzer_stat "$run_log" number_of_executed_units)
    files=$(find "$corpus" -type f | wc -l)
    kib=$(( ($(du -sb "$corpus" | cut -f1) + 1023) / 1024 ))
    summary+=("$name: ${execs:-?} execs/s, ${runs:-?} runs in ${fuzz_secs}s,\
 corpus $files files / $kib KiB")
    note "${summary[-1]}"

    if [ "$rc" = 0 ] && [ -z "$new" ]; then
        echo "PASS: fuzz/$name"
        continue
    fi
    echo "FAIL: fuzz/$name"
    failed=1
    grep -E 'ERROR|SUMMARY|fuzz-ncm|runtime error|#[0-9]+ 0x' "$run_log" |
        grep -vE 'fuzzer::|libc|sanitizer_print|_start|raise|abort ' |
        head -n 25 | sed 's/^/    | /'
    note "libFuzzer exit status $rc; full log: $run_log"
    while read -r f; do
        [ -n "$f" ] || continue
        note "kept: $f"
        note "reproduce: UBSAN_OPTIONS=$UBSAN_OPTIONS $bin $f"
    done <<<"$new"
    [ -n "$new" ] ||
        note "no crash file was written; read the log for the reason"
done

step "summary"
for line in "${summary[@]}"; do
    note "$line"
done
if [ "$failed" != 0 ]; then
    die "a fuzzer failed" \
        "rerun the crash file as shown above, fix hw/usb/ncm-ntb.c (or the" \
        "harness), then add the file to tests/fuzz/corpus/<name>/ so it stays"
fi
step "fuzzing done"
