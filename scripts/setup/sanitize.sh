# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck shell=bash
#
# Sourced by common.sh.  SANITIZE=1 (make check SANITIZE=1, or in front of
# any verb): QEMU and the qtest are built with --enable-asan --enable-ubsan
# in build/sanitize/ (common.sh picks the directory; qemu_configure in
# qemu-tree.sh takes NCM_QEMU_CONFIGURE_EXTRA), and every QEMU the suites
# start runs with
#   ASan, leak check on: at exit LeakSanitizer reports what is no longer
#     reachable; QEMU's own leaks at exit are suppressed in
#     scripts/setup/lsan.supp, by QEMU-internal frames only (never our
#     hw/usb/dev-ncm.c, ncm-function.c, ncm-ntb.c);
#   UBSan stopping at the first report, with its stack.
# A report in any QEMU's output is a FAIL line naming the log:
# sanitizer_fail, called by scripts/check/check-qtest.sh for every case
# and by tests/guest/lib.sh for every guest boot.

if [ "${SANITIZE:-0}" != 0 ]; then
    NCM_QEMU_CONFIGURE_EXTRA="${NCM_QEMU_CONFIGURE_EXTRA:+$NCM_QEMU_CONFIGURE_EXTRA
}--enable-asan
--enable-ubsan"
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:print_summary=1}
    export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$NCM_TOP/scripts/setup/lsan.supp:print_suppressions=0}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
fi

# sanitizer_report LOG: one line for the first ASan, LeakSanitizer or UBSan
# report in LOG (its SUMMARY, the UBSan message, and for a leak the first
# frame that is not an allocator); nothing when there is none
sanitizer_report() {
    [ -f "$1" ] || return 0
    grep -aqE 'ERROR: (Address|Leak)Sanitizer|Sanitizer:DEADLYSIGNAL|:[0-9]+(:[0-9]+)?: runtime error: ' "$1" ||
        return 0
    awk '
        /:[0-9]+(:[0-9]+)?: runtime error: / && ub == "" { ub = $0; sub(/^.*\/qemu-src\//, "", ub) }
        /ERROR: LeakSanitizer/ { leak = 1 }
        leak && fr == "" && /^ *#[0-9]+ 0x[0-9a-f]+ in / &&
            !/(interceptor|__asan|[^_]malloc|calloc|realloc|g_malloc|g_try_|g_realloc|g_slice|g_memdup|g_strdup|g_new)/ {
            fr = $0; sub(/^ *#[0-9]+ 0x[0-9a-f]+ in /, "", fr); sub(/[^ ]*\/qemu-src\//, "", fr)
        }
        /^SUMMARY: [A-Za-z]+Sanitizer/ && sum == "" { sum = $0; sub(/^SUMMARY: /, "", sum); sub(/[^ ]*\/qemu-src\//, "", sum) }
        /ERROR: AddressSanitizer/ && err == "" { err = $0; sub(/^==[0-9]+==ERROR: /, "", err) }
        END {
            if (ub != "") s = "UBSan: " ub
            else if (leak) { sub(/^AddressSanitizer: /, "", sum); s = "LeakSanitizer: " (sum != "" ? sum : "leaks") "; first from " fr }
            else s = sum != "" ? sum : (err != "" ? err : "sanitizer report")
            print s
        }' "$1" | cut -c1-400
}

# sanitizer_fail NAME LOG: "FAIL: NAME (<report>; log: LOG)" and status 1
# when LOG has a sanitizer report
sanitizer_fail() {
    local r
    r=$(sanitizer_report "$2")
    [ -n "$r" ] || return 0
    echo "FAIL: $1 ($r; log: ${2#"$NCM_TOP"/})"
    return 1
}
