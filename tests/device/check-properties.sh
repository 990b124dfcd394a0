#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Command-line contract of -device usb-ncm-dl: the properties are listed,
# good values realize, bad ones fail realize with a message that says why.
set -uo pipefail
. "$(dirname "$0")/../../scripts/setup/common.sh"

QEMU=${QEMU:-$NCM_BUILD/qemu/qemu-system-x86_64}
[ -x "$QEMU" ] || die "$QEMU not built" "run: make qemu"

# Every QEMU's output also goes to QLOG, for the sanitizer check at the end
QLOG=$NCM_BUILD/check-logs/device-qemu.log
mkdir -p "$(dirname "$QLOG")"
: >"$QLOG"
qemu_try() {
    local out rc
    out=$(timeout 60 "$QEMU" -M q35 -display none -nodefaults -S \
        -L /usr/share/seabios -L /usr/share/qemu \
        -netdev user,id=n0 -device qemu-xhci,id=xhci "$@" \
        -qmp stdio 2>&1 <<<'{"execute":"qmp_capabilities"}
{"execute":"quit"}')
    rc=$?
    printf '# %s (status %s)\n%s\n' "$*" "$rc" "$out" >>"$QLOG"
    printf '%s\n' "$out"
    return "$rc"
}

help=$("$QEMU" -device usb-ncm-dl,help 2>&1)
# The command-line ABI: properties users' command lines and libvirt XML
# name.  A second list on purpose, not taken from the device's property
# table: a property renamed or dropped there must fail here.
for prop in netdev mac ntb-in-max-size ntb-out-max-size ntb-in-divisor \
            ntb-out-max-datagrams max-segment-size ntb32 zlp vendorid \
            productid x-deferred-out profile network-capabilities \
            multicast-filters ethernet-statistics bcd-cdc \
            in-datagrams-per-ntb in-coalesce-us; do
    if grep -q "^  $prop=" <<<"$help"; then
        echo "PASS: device/help-lists/$prop"
    else
        echo "FAIL: device/help-lists/$prop (not in -device usb-ncm-dl,help)"
    fi
done

# Every property the device adds says what it is: those a USB device
# gets from QEMU itself (usb-kbd's, and bootindex, which
# device_add_bootindex_property() leaves undescribed) apart
core=$("$QEMU" -device usb-kbd,help 2>&1 | sed -n 's/^  \([a-z0-9_-]*\)=.*/\1/p')
for dev in usb-ncm-dl usb-ncm; do
    undescribed=$("$QEMU" -device "$dev,help" 2>&1 |
        sed -n 's/^  \([a-z0-9_-]*\)=[^ ]*$/\1/p' |
        grep -vxF -e bootindex $(printf -- '-e %s ' $core))
    nprops=$("$QEMU" -device "$dev,help" 2>&1 | grep -c '^  [a-z]')
    if [ -z "$undescribed" ] && [ "$nprops" -gt 30 ]; then
        echo "PASS: device/help-describes/$dev ($nprops properties)"
    else
        echo "FAIL: device/help-describes/$dev (no description:" \
             "$(echo $undescribed); $nprops properties listed)"
    fi
done

for dev in usb-ncm-dl usb-ncm; do
    out=$(qemu_try -device "$dev,netdev=n0,bus=xhci.0")
    if grep -q '"return"' <<<"$out" && ! grep -qi 'error' <<<"$out"; then
        echo "PASS: device/realize/$dev"
    else
        echo "FAIL: device/realize/$dev ($(head -n 3 <<<"$out" | tr '\n' ' '))"
    fi
done

# The profiles, as the device names them in its help (its table in
# hw/usb/dev-ncm-desc.c is their one list): "...function: a, b, c (default"
profiles=$(sed -n 's/^  profile=.* function: \([a-z0-9_, ]*\) (default.*/\1/p' <<<"$help")
if grep -qw displaylink <<<"$profiles" && [ "$(wc -w <<<"${profiles//,/ }")" -ge 2 ]; then
    echo "PASS: device/help-lists-profiles ($profiles)"
else
    echo "FAIL: device/help-lists-profiles (no profile list, or no displaylink," \
         "in the help of profile=: '$profiles')"
fi

# every profile realizes on both variants, and a property given with it
for dev in usb-ncm-dl usb-ncm; do
    for profile in ${profiles//,/ }; do
        out=$(qemu_try -device "$dev,netdev=n0,bus=xhci.0,profile=$profile")
        if grep -q '"return"' <<<"$out" && ! grep -qi 'error' <<<"$out"; then
            echo "PASS: device/realize/$dev-profile-$profile"
        else
            echo "FAIL: device/realize/$dev-profile-$profile" \
                 "($(head -n 3 <<<"$out" | tr '\n' ' '))"
        fi
    done
done

# property=value | text the error must contain
bad_cases=(
    "ntb-in-max-size=1024|ntb-in-max-size 1024 is outside 2048..65536"
    "ntb-out-max-size=131072|ntb-out-max-size 131072 is outside 2048..65536"
    "ntb-in-divisor=3|must be powers of two"
    "ntb-out-remainder=8|smaller than their divisors"
    "ntb-in-alignment=2|must be powers of two"
    "ntb-out-max-datagrams=1025|ntb-out-max-datagrams must be in 0..1024"
    "max-segment-size=1000|max-segment-size 1000 must be at least 1514"
    "power-on-filter=0x20|bits beyond the five CDC packet filter bits"
    "zlp=sometimes|zlp: unknown value 'sometimes'; use one of auto, required, profile"
    "profile=rtl8157|profile: unknown value 'rtl8157'; use one of $profiles"
    "profile=minimal,max-segment-size=4096|max-segment-size 4096 must be at least 1514 and fit an NTB of 4096 bytes"
    "profile=f_ncm,ntb-in-max-size=1024|ntb-in-max-size 1024 is outside"
    "network-capabilities=0x04|the model offers bits 0, 1, 3, 4 and 5 only"
    "network-capabilities=0x40|the model offers bits 0, 1, 3, 4 and 5 only"
    "multicast-filters=257|at most 256 filters"
    "multicast-filters=0x8101|at most 256 filters"
    "ethernet-statistics=0x20000|feature selectors 1..17 only"
    "bcd-cdc=0x0100|use 0x0110 or 0x0120"
    "in-datagrams-per-ntb=1025|in-datagrams-per-ntb must be in 0..1024"
    "in-coalesce-us=100001|in-coalesce-us 100001 is above 100000"
)
for c in "${bad_cases[@]}"; do
    prop=${c%%|*}
    want=${c#*|}
    out=$(qemu_try -device "usb-ncm-dl,netdev=n0,bus=xhci.0,$prop")
    rc=$?
    if [ "$rc" != 0 ] && grep -qF "$want" <<<"$out"; then
        echo "PASS: device/rejects/$prop"
    else
        echo "FAIL: device/rejects/$prop (rc $rc, wanted '$want', got:" \
             "$(head -n 2 <<<"$out" | tr '\n' ' '))"
    fi
done

# String properties that end up in string descriptors: UTF-8 of at most
# 126 UTF-16 code units (bLength is a byte: 2 + 2 * 126 = 254); what fits
# reads back in the qtests (tests/qtest/usb-ncm-dl/desc.c).  Counted in
# units, not bytes or characters: 126 two-byte characters fit, a
# character beyond the BMP takes two units.
digits() { local s=""; while [ "${#s}" -lt "$1" ]; do s+=0123456789; done
           printf '%s' "${s:0:$1}"; }
repeat() { local s="" i; for ((i = 0; i < $2; i++)); do s+=$1; done
           printf '%s' "$s"; }
for prop in manufacturer product serial; do
    for n in 0 1 126; do
        out=$(qemu_try -device "usb-ncm-dl,netdev=n0,bus=xhci.0,$prop=$(digits "$n")")
        if [ $? = 0 ] && ! grep -qi 'error' <<<"$out"; then
            echo "PASS: device/realize/$prop-$n"
        else
            echo "FAIL: device/realize/$prop-$n ($(head -n 2 <<<"$out" | tr '\n' ' '))"
        fi
    done
    long="UTF-16 code units long: a USB string descriptor holds at most 126"
    for c in "127|$(digits 127)|$prop is 127 $long" \
             "128|$(digits 128)|$prop is 128 $long" \
             "255|$(digits 255)|$prop is 255 $long" \
             "utf8-127|$(repeat é 127)|$prop is 127 $long" \
             "pairs-127|$(repeat 𝄞 63)x|$prop is 127 $long" \
             "not-utf8|$(printf 'caf\xe9')|$prop is not valid UTF-8: a USB string descriptor holds UTF-16 text, at most 126 code units"; do
        name=${c%%|*}
        rest=${c#*|}
        value=${rest%%|*}
        want=${rest#*|}
        out=$(qemu_try -device "usb-ncm-dl,netdev=n0,bus=xhci.0,$prop=$value")
        rc=$?
        if [ "$rc" != 0 ] && grep -qF "$want" <<<"$out"; then
            echo "PASS: device/rejects/$prop-$name"
        else
            echo "FAIL: device/rejects/$prop-$name (rc $rc, wanted '$want'," \
                 "got: $(head -n 2 <<<"$out" | tr '\n' ' ' | cut -c1-200))"
        fi
    done
done
# mac takes six hex pairs joined by ':' or '-', nothing else
for n in 0 1 126 127 128 255; do
    out=$(qemu_try -device "usb-ncm-dl,netdev=n0,bus=xhci.0,mac=$(digits "$n")")
    rc=$?
    if [ "$rc" != 0 ] && grep -qF "Property 'usb-ncm-dl.mac' doesn't take value" <<<"$out"; then
        echo "PASS: device/rejects/mac-$n"
    else
        echo "FAIL: device/rejects/mac-$n (rc $rc: $(head -n 2 <<<"$out" | tr '\n' ' ' | cut -c1-200))"
    fi
done
out=$(qemu_try -device "usb-ncm-dl,netdev=n0,bus=xhci.0,mac=52:54:00:12:34:5é")
if [ $? != 0 ] && grep -qF "doesn't take value" <<<"$out"; then
    echo "PASS: device/rejects/mac-utf8"
else
    echo "FAIL: device/rejects/mac-utf8 ($(head -n 2 <<<"$out" | tr '\n' ' '))"
fi

# The migration ABI: -dump-vmstate against the golden file, no debug
# counter in it (tests/device/check-vmstate.py)
python3 "$NCM_TOP/tests/device/check-vmstate.py" "$QEMU"

# SANITIZE=1: an ASan/UBSan report from any of these QEMUs (the rejected
# ones exit through realize's error path) is a FAIL naming the log
sanitizer_fail device/sanitizer "$QLOG" || true
