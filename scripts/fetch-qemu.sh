#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Obtain QEMU 10.0.x from Debian's source package into the cache (outside the
# work tree) and print the unpacked directory.  With QEMU_SRC set, check and
# print that tree instead; it is never modified.
set -euo pipefail
. "$(dirname "$0")/common.sh"

if [ -n "${QEMU_SRC:-}" ]; then
    [ -f "$QEMU_SRC/hw/usb/core.c" ] && [ -x "$QEMU_SRC/configure" ] ||
        die "QEMU_SRC=$QEMU_SRC does not look like a QEMU source tree" \
            "point QEMU_SRC at a directory holding configure and hw/usb/core.c"
    echo "$QEMU_SRC"
    exit 0
fi

[ -r /etc/debian_version ] || die "not Debian and no QEMU_SRC given" \
    "run: make QEMU_SRC=/path/to/qemu (upstream git works)"

dir=$NCM_CACHE/debian-src
stamp=$dir/.unpacked
if [ -f "$stamp" ] && [ -d "$(cat "$stamp")" ]; then
    cat "$stamp"
    exit 0
fi

mkdir -p "$dir"
step "fetching QEMU source with apt-get source qemu/trixie (into $dir)" >&2
rm -rf "$dir"/qemu-* "$dir"/qemu_*
(cd "$dir" && apt-get source -q qemu/trixie >"$dir/fetch.log" 2>&1) ||
    die "apt-get source qemu/trixie failed (log: $dir/fetch.log)" \
        "run scripts/install-deps.sh build (adds the trixie deb-src entry)" \
        "or use an existing tree: make QEMU_SRC=/path/to/qemu"
src=$(ls -d "$dir"/qemu-*/ 2>/dev/null | head -n1)
src=${src%/}
[ -f "$src/hw/usb/core.c" ] || die "no QEMU tree found in $dir after unpack" \
    "see $dir/fetch.log"
case $(cat "$src/VERSION") in
10.0.*) ;;
*) note "QEMU $(cat "$src/VERSION") (expected 10.0.x); continuing" >&2 ;;
esac
echo "$src" >"$stamp"
echo "$src"
