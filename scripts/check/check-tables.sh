#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# One source of truth per table (part of the style suite):
#  - class request codes live in include/hw/usb/cdc-ncm.h only: no C file
#    under tests/ defines one of its request names again, nor any other
#    name of that header;
#  - NTHs and NDPs of the Python tools are built by scripts/lib/ncm_ntb.py
#    only: no other Python file packs an NTH/NDP struct or spells an NTH
#    signature.
# One PASS/FAIL line per rule; the offending lines are shown.
set -uo pipefail
. "$(dirname "$0")/../setup/common.sh"
cd "$NCM_TOP"
rc=0

hdr=include/hw/usb/cdc-ncm.h
# SET_/GET_ request names whose value is a class request code (0x40-0x8a)
mapfile -t reqs < <(sed -nE \
    's/^#define (CDC|NCM)_((SET|GET)_[A-Z_]+)[[:space:]]+0x(4[0-4]|8[0-9a])\b.*/\2/p' \
    "$hdr")
if [ "${#reqs[@]}" -lt 10 ]; then
    echo "FAIL: tables/request-codes (found ${#reqs[@]} request codes in $hdr; the pattern is stale)"
    rc=1
else
    pat="^[[:space:]]*#[[:space:]]*define[[:space:]]+[A-Za-z0-9_]*($(IFS='|'; echo "${reqs[*]}"))\b"
    hits=$(git ls-files 'tests/*.c' 'tests/*.h' | xargs grep -nE "$pat" 2>/dev/null)
    # a bare request value defined under another name ("#define X 0x86")
    hits2=$(git ls-files 'tests/*.c' 'tests/*.h' | xargs grep -nE \
        '^[[:space:]]*#[[:space:]]*define[[:space:]]+[A-Za-z0-9_]*REQ_[A-Za-z0-9_]*[[:space:]]+0x(4[0-4]|8[0-9a])\b' 2>/dev/null)
    if [ -n "$hits$hits2" ]; then
        echo "FAIL: tables/request-codes (class request codes defined outside $hdr; include it)"
        printf '%s\n%s\n' "$hits" "$hits2" | sed '/^$/d; s/^/    | /'
        rc=1
    else
        echo "PASS: tables/request-codes (${#reqs[@]} codes, only in $hdr)"
    fi
fi

# any other name of the header defined again in a test (filter bits,
# descriptor subtypes, capabilities, signatures)
mapfile -t names < <(sed -nE 's/^#define ([A-Z][A-Z0-9_]+)[[:space:]].*/\1/p' "$hdr" |
                     grep -vx HW_USB_CDC_NCM_H)
pat="^[[:space:]]*#[[:space:]]*define[[:space:]]+($(IFS='|'; echo "${names[*]}"))\b"
hits=$(git ls-files 'tests/*.c' 'tests/*.h' | xargs grep -nE "$pat" 2>/dev/null)
if [ -n "$hits" ]; then
    echo "FAIL: tables/cdc-ncm-names (names of $hdr defined again; include it)"
    sed 's/^/    | /' <<<"$hits"
    rc=1
else
    echo "PASS: tables/cdc-ncm-names (${#names[@]} names, defined only in $hdr)"
fi

lib=scripts/lib/ncm_ntb.py
hits=$(git ls-files '*.py' | grep -vxF "$lib" | xargs grep -nE \
    "b'(NCMH|ncmh)|b\"(NCMH|ncmh)|'<4sHH|\"<4sHH" 2>/dev/null)
if [ -n "$hits" ]; then
    echo "FAIL: tables/ntb-builder (NTB built outside $lib; use it)"
    sed 's/^/    | /' <<<"$hits"
    rc=1
else
    echo "PASS: tables/ntb-builder (NTHs and NDPs only in $lib)"
fi
exit $rc
