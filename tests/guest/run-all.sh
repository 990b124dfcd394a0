#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The check-guest suite: boot the test guest with usb-ncm-dl behind qemu-xhci
# and behind usb-ehci (one after the other: TCG wants both cores) and check
# what Linux's cdc_ncm made of it. See tests/guest/run-guest-test.sh.
#
#   tests/guest/run-all.sh [DEVICE[,PROPS]]      default usb-ncm-dl
#
# Environment as for run-guest-test.sh (KERNEL, QEMU, GUEST_TIMEOUT, ...);
# GUEST_CONTROLLERS="xhci ehci" picks the controllers.
set -euo pipefail
. "$(dirname "$0")/../../scripts/common.sh"

DEVICE=${1:-${NCM_DEVICE:-usb-ncm-dl}}
CONTROLLERS=${GUEST_CONTROLLERS:-xhci ehci}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

status=0
for c in $CONTROLLERS; do
    bash "$NCM_TOP/tests/guest/run-guest-test.sh" "$c" "$DEVICE" 2>&1 |
        tee -a "$out" || status=1
done
npass=$(grep -c '^PASS: ' "$out" || true)
nfail=$(grep -c '^FAIL: ' "$out" || true)
[ "$nfail" = 0 ] || status=1
# A run that produced no verdict at all is a failure too.
[ "$npass" -gt 0 ] || status=1
echo "check-guest: $npass passed, $nfail failed"
exit "$status"
