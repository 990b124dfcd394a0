#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Suite "vng" of make check (make check-vng): usb-ncm-dl under virtme-ng,
# the kernel developer's own runner (scripts/kernel/vng-ncm.sh), with the
# virtme-ng that make deps-kernel installs (1.41, pinned), under TCG:
#   vng/version              vng is the pinned 1.41
#   vng/opts-build-tree      --print-opts for build/qemu: the dock on
#                            qemu-xhci, Debian's firmware directories (-L)
#   vng/opts-installed       ... for make install's prefix (a temporary
#                            PREFIX here): no -L, it finds its own
#   vng/boot-ping            one vng boot of Debian's current kernel package
#                            on the installed QEMU: cdc_ncm binds, 10.0.2.2
#                            answers every ping (verdict=0)
#   vng/bind-send-zlp        ... and binds it as "CDC NCM (SEND ZLP)" (the
#                            DisplayLink ids of the default profile)
# SKIP (one line, the reason) only when vng cannot be installed.
set -uo pipefail
. "$(dirname "$0")/../../scripts/setup/common.sh"
. "$NCM_TOP/tests/guest/lib.sh"
runner_begin vng

if ! bash "$NCM_TOP/scripts/setup/install-deps.sh" vng >/dev/null 2>&1 ||
   ! command -v vng >/dev/null; then
    runner_skip "virtme-ng could not be installed: run scripts/setup/install-deps.sh vng to see why"
    runner_end
    exit 0
fi
W=$(mktemp -d "${TMPDIR:-/tmp}/ncm-vng-smoke.XXXXXX")
trap 'rm -rf "$W"' EXIT

v=$(vng --version 2>&1)
r=1; [ "$v" = "virtme-ng 1.41" ] && r=0
runner_check version "$r" "vng --version says '$v', virtme-ng 1.41 wanted (make deps-kernel)"

o=$(ACCEL=tcg bash "$NCM_TOP/scripts/kernel/vng-ncm.sh" --print-opts 2>&1 | paste -sd' ')
r=1
[[ " $o " == *" --qemu=$NCM_BUILD/qemu/qemu-system-x86_64 "* ]] &&
    [[ " $o " == *" --qemu-opts=-L --qemu-opts=/usr/share/seabios "* ]] &&
    [[ " $o " == *" --qemu-opts=usb-ncm-dl,bus=ncmxhci.0,netdev=ncmnet "* ]] &&
    [[ " $o " == *" --disable-kvm "* ]] && r=0
runner_check opts-build-tree "$r" "$o"

step "make install PREFIX=$W/prefix (for the vng boot)"
if ! PREFIX=$W/prefix DESTDIR="" bash "$NCM_TOP/scripts/setup/install-qemu.sh" >"$W/install.log" 2>&1; then
    runner_fail opts-installed "make install failed: $(tail -n 3 "$W/install.log" | tr '\n' ' ')"
    runner_end
    exit
fi
QI=$W/prefix/bin/qemu-system-x86_64
o=$(QEMU=$QI ACCEL=tcg bash "$NCM_TOP/scripts/kernel/vng-ncm.sh" --print-opts 2>&1 | paste -sd' ')
r=1
[[ " $o " == *" --qemu=$QI "* ]] && [[ " $o " != *" --qemu-opts=-L "* ]] &&
    [[ " $o " == *" --qemu-opts=usb-ncm-dl,"* ]] && r=0
runner_check opts-installed "$r" "$o"

t0=$SECONDS
out=$(QEMU=$QI ACCEL=tcg VNG_PINGS=3 bash "$NCM_TOP/scripts/kernel/vng-ncm.sh" 2>&1)
rc=$?
printf '%s\n' "$out" | sed 's/^/    /'
line=$(grep '^verdict=' <<<"$out" | tail -n 1)
r=1; [ "$rc" = 0 ] && [[ "$line" == "verdict=0 "*" ping=3/3 "* ]] && r=0
runner_check boot-ping "$r" "status $rc in $((SECONDS - t0))s: ${line:-no verdict line}"
r=1; [[ "$line" == *' bind="CDC NCM (SEND ZLP)" '* ]] && r=0
runner_check bind-send-zlp "$r" "${line:-no verdict line}"
runner_end "(vng boot $((SECONDS - t0))s)"
