#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The guest kernel's symbols for gdb on a replay (tests/guest/replay-lib.sh,
# REPLAY_GDB=1): Debian's linux-image-VERSION-dbg (about 860 MB for 6.1)
# is downloaded once with apt-get download (nothing is installed) and only
# vmlinux and the debug files of the USB network modules (usbnet, cdc_ncm,
# cdc_ether) are kept, in ~/.cache/usb-ncm-dl/kernel-dbg/VERSION/ (about
# 450 MB).  Prints the vmlinux path.
#
#   tests/guest/kernel-dbg.sh [VERSION]     default: the guest image's
#
# VERSION is a kernel release (6.1.0-57-amd64).  APT_CONFIG=... picks
# another apt configuration (the private ones of tests/guest/image.sh for
# other Debian releases).
set -euo pipefail
. "$(dirname "$0")/../../scripts/setup/common.sh"

VER=${1:-}
if [ -z "$VER" ]; then
    gdir=$(bash "$NCM_TOP/tests/guest/image.sh" --print-dir) ||
        die "no guest image" "run: make guest-image"
    VER=$(basename "$gdir")
fi
DIR=$NCM_CACHE/kernel-dbg
OUT=$DIR/$VER
VMLINUX=$OUT/usr/lib/debug/boot/vmlinux-$VER
if [ -f "$VMLINUX" ]; then
    echo "$VMLINUX"
    exit 0
fi
PKG=linux-image-$VER-dbg
mkdir -p "$DIR/debs"
deb=$(ls "$DIR/debs/${PKG}_"*.deb 2>/dev/null | head -n1 || true)
if [ -z "$deb" ]; then
    size=$(apt-cache show "$PKG" 2>/dev/null | sed -n 's/^Size: //p' | head -n1)
    [ -n "$size" ] ||
        die "apt knows no $PKG" \
            "apt-get update, or APT_CONFIG= the private configuration of its release"
    step "downloading $PKG ($((size / 1000000)) MB, once)" >&2
    (cd "$DIR/debs" && apt-get download -q "$PKG" >&2) ||
        die "apt-get download $PKG failed"
    deb=$(ls "$DIR/debs/${PKG}_"*.deb | head -n1)
fi
step "extracting vmlinux and the usbnet/cdc_ncm debug files" >&2
rm -rf "$OUT.tmp"
mkdir -p "$OUT.tmp"
dpkg-deb --fsys-tarfile "$deb" |
    tar -x -C "$OUT.tmp" --wildcards "./usr/lib/debug/boot/vmlinux-$VER" \
        "./usr/lib/debug/lib/modules/$VER/kernel/drivers/net/usb/*"
rm -rf "$OUT"
mv "$OUT.tmp" "$OUT"
# the .deb is not needed any more
rm -f "$deb"
echo "$VMLINUX"
