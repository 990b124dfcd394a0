#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# One source of truth per table (part of the style suite):
#  - class request codes live in include/hw/usb/cdc-ncm.h only: no C file
#    under tests/ defines one of its request names again, nor any other
#    name of that header; standard request codes in QEMU's hw/usb.h
#    (fuzz targets) and tests/qtest/libqos/xhci-driver.h (qtests) only;
#    no request is a bare number where a control transfer is made or
#    compared;
#  - NTHs and NDPs of the Python tools are built by scripts/lib/ncm_ntb.py
#    only: no other Python file packs an NTH/NDP struct or spells an NTH
#    signature;
#  - the Ethernet statistics are listed only in NCM_ETH_STAT_COUNTERS
#    (include/hw/usb/ncm-eth-stats.h);
#  - the device's properties are one table (usb_ncm_property_defs[] in
#    hw/usb/dev-ncm.c, name, field, default and help together): no
#    Property array of its own beside it, device_class_set_props once;
#  - every usb-ncm-fault property a test or script sets or reads is one of
#    usb_ncm_fault_names[] (hw/usb/ncm-fault.c) or corrupt-in, and the
#    fuzz targets take the names from include/hw/usb/ncm-fault.h.
# One PASS/FAIL line per rule; the offending lines are shown.
set -uo pipefail
. "$(dirname "$0")/../setup/common.sh"
cd "$NCM_TOP"
rc=0

# verdict RULE WHY NOTE HITS...: the rule's line, FAIL (WHY) with the
# offending lines when HITS holds any (empty ones left out), else PASS
# (NOTE)
verdict() {
    local rule=$1 why=$2 note=$3 hits
    shift 3
    hits=$(printf '%s\n' "$@" | sed '/^$/d')
    if [ -n "$hits" ]; then
        echo "FAIL: tables/$rule ($why)"
        sed 's/^/    | /' <<<"$hits"
        rc=1
    else
        echo "PASS: tables/$rule ($note)"
    fi
}

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
    verdict request-codes "class request codes defined outside $hdr; include it" \
        "${#reqs[@]} codes, only in $hdr" "$hits" "$hits2"
fi

# Standard requests: defined in libqos's xHCI driver (and QEMU's
# hw/usb.h) only; and no control transfer or comparison with a bare
# request number, class or standard
std='GET_STATUS|CLEAR_FEATURE|SET_FEATURE|SET_ADDRESS|GET_DESCRIPTOR|SET_DESCRIPTOR|GET_CONFIGURATION|SET_CONFIGURATION|GET_INTERFACE|SET_INTERFACE|SYNCH_FRAME'
hits=$(git ls-files 'tests/*.c' 'tests/*.h' | grep -vx tests/qtest/libqos/xhci-driver.h |
    xargs grep -nE "^[[:space:]]*#[[:space:]]*define[[:space:]]+[A-Za-z0-9_]*REQ_($std)\b" 2>/dev/null)
num='(0x[0-9a-fA-F]+|[0-9]+)'
hits2=$(git ls-files 'tests/qtest/*.c' 'tests/qtest/*.h' 'tests/unit/*.c' | xargs grep -nE \
    "\\b((qxhci_control(_submit)?|control)\\([^,()]+, *[^,()]+, *$num *,|(ncm_class_in|ncm_class_out|class_request)\\([^,()]+, *$num *,|\\breq(uest)? *[!=]= *$num\\b)" 2>/dev/null)
# (the corpus generators: control(TYPE, REQ, ...))
hits2+=$(git ls-files 'tests/fuzz/*.py' | xargs grep -nE \
    "\\bcontrol\\(0x[0-9a-fA-F]+, *$num *," 2>/dev/null)
verdict standard-requests "a standard request defined again, or a request as a bare number; use QXHCI_REQ_*, USB_REQ_* or cdc-ncm.h's" \
    "defined only in libqos/xhci-driver.h; no bare request numbers" \
    "$hits" "$hits2"

# any other name of the header defined again in a test (filter bits,
# descriptor subtypes, capabilities, signatures)
mapfile -t names < <(sed -nE 's/^#define ([A-Z][A-Z0-9_]+)[[:space:]].*/\1/p' "$hdr" |
                     grep -vx HW_USB_CDC_NCM_H)
pat="^[[:space:]]*#[[:space:]]*define[[:space:]]+($(IFS='|'; echo "${names[*]}"))\b"
hits=$(git ls-files 'tests/*.c' 'tests/*.h' | xargs grep -nE "$pat" 2>/dev/null)
verdict cdc-ncm-names "names of $hdr defined again; include it" \
    "${#names[@]} names, defined only in $hdr" "$hits"

lib=scripts/lib/ncm_ntb.py
hits=$(git ls-files '*.py' | grep -vxF "$lib" | xargs grep -nE \
    "b'(NCMH|ncmh)|b\"(NCMH|ncmh)|'<4sHH|\"<4sHH" 2>/dev/null)
verdict ntb-builder "NTB built outside $lib; use it" \
    "NTHs and NDPs only in $lib" "$hits"
# The Ethernet statistics: NCM_ETH_STAT_COUNTERS in ncm-eth-stats.h is
# their one list.  A second one is a file (tests and scripts included)
# that names four of its counters as strings within four lines, a
# VMSTATE field of one (the stream carries them as one array made from
# the list), or a "case CDC_STAT_" in the device (ncm_statistic() is
# generated, RCV_OK apart).
fhdr=include/hw/usb/ncm-eth-stats.h
mapfile -t stats < <(sed -nE 's/^[[:space:]]*X\([A-Z_]+, ([a-z_]+)\).*/\1/p' "$fhdr")
if [ "${#stats[@]}" -lt 16 ]; then
    echo "FAIL: tables/eth-stats (found ${#stats[@]} counters in NCM_ETH_STAT_COUNTERS of $fhdr; the pattern is stale)"
    rc=1
else
    alt=$(IFS='|'; echo "${stats[*]}")
    hits=$(git ls-files '*.c' '*.h' '*.py' '*.sh' | grep -vxF "$fhdr" |
        xargs awk -v alt="^($alt)\$" '
            FNR == 1 { delete at }
            {
                n = 0
                delete near
                at[FNR] = ""
                s = $0
                while (match(s, /["\047][a-z_]+["\047]/)) {
                    w = substr(s, RSTART + 1, RLENGTH - 2)
                    s = substr(s, RSTART + RLENGTH)
                    if (w ~ alt) at[FNR] = at[FNR] " " w
                }
                for (k = FNR - 3; k <= FNR; k++) {
                    m = split(at[k], ws, " ")
                    for (j = 1; j <= m; j++) near[ws[j]] = 1
                }
                for (w in near) n++
                if (n >= 4 && !shown[FILENAME]++) print FILENAME ":" FNR ": " n " counter names listed"
            }' 2>/dev/null)
    hits2=$(git ls-files 'hw/*.c' 'tests/*.c' |
        xargs grep -nE "VMSTATE_UINT64\\(($alt)," 2>/dev/null)
    hits3=$(git ls-files 'hw/*.c' | xargs grep -nE 'case CDC_STAT_[A-Z]' 2>/dev/null)
    verdict eth-stats "a second list of the Ethernet statistics; generate it from NCM_ETH_STAT_COUNTERS in $fhdr" \
        "${#stats[@]} counters, listed only in $fhdr" \
        "$hits" "$hits2" "$hits3"
fi
# The properties: usb_ncm_property_defs[] is their one table
dev=hw/usb/dev-ncm.c
arrays=$(git ls-files 'hw/usb/*ncm*.c' | xargs grep -nE \
    '^[[:space:]]*(static[[:space:]]+)?(const[[:space:]]+)?Property[[:space:]]+[A-Za-z0-9_]+\[' 2>/dev/null |
    grep -v 'static Property props\[ARRAY_SIZE(usb_ncm_property_defs)\]')
calls=$(git ls-files 'hw/usb/*ncm*.c' | xargs grep -nE 'device_class_set_props(_n)?\(' 2>/dev/null)
ncalls=$(printf '%s' "$calls" | grep -c .)
ndefs=$(grep -c 'usb_ncm_property_defs\[\] = {' "$dev")
counts=()
[ "$ncalls" = 1 ] ||
    counts=("device_class_set_props called $ncalls times:" "$calls")
[ "$ndefs" = 1 ] ||
    counts+=("usb_ncm_property_defs[] defined $ndefs times in $dev")
verdict properties "a Property array beside usb_ncm_property_defs[], or device_class_set_props called $ncalls times; one table in $dev, one call" \
    "one table, usb_ncm_property_defs[]; device_class_set_props once" \
    "$arrays" "${counts[@]}"
# The fault names: those the tests and scripts use are the object's
out=$(python3 - <<'PY'
import re, subprocess
src = open('hw/usb/ncm-fault.c').read()
m = re.search(r'usb_ncm_fault_names\[NCM_FAULT__MAX\] = \{(.*?)\};', src, re.S)
names = set(re.findall(r'"([a-z0-9-]+)"', m.group(1))) if m else set()
hdr = open('include/hw/usb/ncm-fault.h').read()
names |= set(re.findall(r'NCM_FAULT_CORRUPT_IN_NAME "([a-z-]+)"', hdr))
if len(names) < 8:
    print(f'STALE the names list: found {sorted(names)}')
files = subprocess.run(['git', 'ls-files', 'tests/*.c', 'tests/*.h',
                        'tests/*.py', 'tests/*.sh', 'scripts/*.py',
                        'scripts/*.sh'], capture_output=True,
                       text=True).stdout.split()
call = re.compile(r'\b(?:fault_set|ncm_fault_set|ncm_fault_get_int|qset|'
                  r'wait_zero)\([^,()]*, *["\']([a-z][a-z0-9-]*)["\']|'
                  r'\bfault_get\([^,()]*, *"[^"]*", *"([a-z][a-z0-9-]*)"|'
                  r'--cue "[^"]*=([a-z][a-z0-9-]*)=[^"=]*"|'
                  r'--start "?([a-z][a-z0-9-]*)=')
used = 0
for f in files:
    try:
        text = open(f, errors='replace').read()
    except OSError:
        continue
    for no, line in enumerate(text.split('\n'), 1):
        for m in call.finditer(line):
            name = next(g for g in m.groups() if g)
            used += 1
            if name not in names and name.upper() != name:
                print(f'{f}:{no}: {name}')
print(f'USED {used} {len(names)}')
PY
)
bad=$(grep -v '^USED ' <<<"$out")
read -r _ nused nnames <<<"$(grep '^USED ' <<<"$out")"
fuzz_copies=$(git ls-files 'tests/qtest/fuzz/*.c' | xargs grep -nE \
    '"(link-down-ms|busy-ms|drop-in-every|corrupt-count|corrupt-in|replug-ms|replug-every-ms|replug-seed)"' 2>/dev/null)
few=
[ "${nused:-0}" -ge 20 ] ||
    few="only ${nused:-0} fault names used in tests and scripts: the pattern is stale"
verdict fault-names "a fault name usb-ncm-fault does not have, or spelled out in a fuzz target; ${nused:-0} uses found" \
    "$nused uses in tests and scripts, each one of the object's $nnames" \
    "$bad" "$fuzz_copies" "$few"
exit $rc
