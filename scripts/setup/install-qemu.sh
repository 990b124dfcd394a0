#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# `make install PREFIX=/opt/usb-ncm-dl [DESTDIR=/stage]`: build QEMU with
# usb-ncm-dl (scripts/setup/build-qemu.sh) and install what it needs at run
# time, so that DESTDIR/PREFIX/bin/qemu-system-x86_64 runs on a machine
# that has only its runtime libraries (listed in PREFIX/share/qemu/
# usb-ncm-dl-libs.txt: glib, pixman, slirp, libfdt...):
#
#   PREFIX/bin/qemu-system-x86_64
#   PREFIX/share/qemu/           firmware QEMU looks for relative to its
#                                binary (QEMU installs are relocatable: the
#                                data directory is bin/../share/qemu):
#     bios-256k.bin bios.bin vgabios-*.bin   SeaBIOS (package seabios)
#     linuxboot_dma.bin linuxboot.bin multiboot*.bin pvh.bin kvmvapic.bin
#                                option ROMs for -kernel and the APIC
#                                (package qemu-system-data)
#     efi-*.rom pxe-*.rom        NIC boot ROMs, so -device e1000,
#                                virtio-net-pci ... start without romfile=
#                                (package ipxe-qemu)
#   PREFIX/share/doc/usb-ncm-dl/ README, docs/ci.md, the device's manual
#
# The build has no VNC, GTK or SDL, so no keymaps are needed.  Running it
# twice installs the same files again.  PREFIX defaults to /usr/local.
# QEMU=/path/qemu-system-x86_64 installs that binary (one built elsewhere
# from this repo) instead of building build/qemu's.
set -euo pipefail
. "$(dirname "$0")/common.sh"

PREFIX=${PREFIX:-/usr/local}
DESTDIR=${DESTDIR:-}
case $PREFIX in
/*) ;;
*) die "PREFIX=$PREFIX is not an absolute path" "e.g. PREFIX=/opt/usb-ncm-dl" ;;
esac
ROOT=$DESTDIR$PREFIX
QEMU_BIN=${QEMU:-$NCM_BUILD/qemu/qemu-system-x86_64}

bash "$NCM_TOP/scripts/setup/install-deps.sh" build guest
[ -n "${QEMU:-}" ] || bash "$NCM_TOP/scripts/setup/build-qemu.sh"
grep -q '^name "usb-ncm-dl"' <<<"$("$QEMU_BIN" -device help 2>/dev/null)" ||
    die "$QEMU_BIN has no -device usb-ncm-dl" "build it: make qemu"

# the firmware files, each from the first directory that has it
SEABIOS=/usr/share/seabios
QEMUDATA=/usr/share/qemu
IPXE=/usr/lib/ipxe/qemu
FIRMWARE_REQUIRED="$SEABIOS/bios-256k.bin $SEABIOS/bios.bin
 $QEMUDATA/linuxboot_dma.bin $QEMUDATA/linuxboot.bin $QEMUDATA/kvmvapic.bin
 $QEMUDATA/multiboot_dma.bin $QEMUDATA/multiboot.bin $QEMUDATA/pvh.bin"

step "installing into ${DESTDIR:+$DESTDIR}$PREFIX"
install -d "$ROOT/bin" "$ROOT/share/qemu" "$ROOT/share/doc/usb-ncm-dl"
install -m 0755 "$QEMU_BIN" "$ROOT/bin/qemu-system-x86_64"
for f in $FIRMWARE_REQUIRED; do
    [ -f "$f" ] || die "$f is missing" \
        "run: scripts/setup/install-deps.sh guest (seabios, qemu-system-data)"
    install -m 0644 "$f" "$ROOT/share/qemu/"
done
# optional ones: every VGA BIOS and NIC ROM that is there (cp -L: Debian
# ships some as symlinks into other packages)
for f in "$SEABIOS"/vgabios*.bin "$IPXE"/efi-*.rom "$IPXE"/pxe-*.rom; do
    [ -e "$f" ] && cp -L "$f" "$ROOT/share/qemu/" && chmod 0644 "$ROOT/share/qemu/${f##*/}"
done
install -m 0644 "$NCM_TOP/README.md" "$NCM_TOP/docs/ci.md" \
    "$NCM_TOP/docs/system/devices/usb-ncm.rst" "$ROOT/share/doc/usb-ncm-dl/"

# the shared libraries the binary needs, for the machine it will run on
ldd "$QEMU_BIN" | awk '$3 ~ /^\// { print $1 }' | LC_ALL=C sort \
    >"$ROOT/share/qemu/usb-ncm-dl-libs.txt"
# (dpkg knows a library by one of its paths: /lib or /usr/lib, merged /usr)
lib_package() {
    local p=$1 q r
    for q in "$p" "$(realpath "$p")" "/usr${p#/usr}" "${p#/usr}"; do
        r=$(dpkg -S "$q" 2>/dev/null | head -n 1 | cut -d: -f1)
        [ -z "$r" ] || { echo "$r"; return 0; }
    done
    return 0
}
pkgs=$(ldd "$QEMU_BIN" | awk '$3 ~ /^\// { print $3 }' |
       while read -r lib; do lib_package "$lib"; done |
       LC_ALL=C sort -u | paste -sd' ')
[ -z "$pkgs" ] || echo "# Debian packages: $pkgs" \
    >>"$ROOT/share/qemu/usb-ncm-dl-libs.txt"
note "$(find "$ROOT/share/qemu" -type f | wc -l) files in $ROOT/share/qemu"
note "runtime libraries: ${pkgs:-see $ROOT/share/qemu/usb-ncm-dl-libs.txt}"
step "installed: $PREFIX/bin/qemu-system-x86_64 (-device usb-ncm-dl)"
