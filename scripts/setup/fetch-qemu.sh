#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Obtain QEMU's source from Debian into the cache (outside the work tree)
# and print the unpacked directory.  QEMU_VERSION picks the release line:
#
#   10.0 (default)  qemu/trixie, through the system's trixie deb-src entry
#                   (scripts/setup/install-deps.sh adds it)
#   10.2            qemu=$QEMU_DEB_VERSION (default 1:10.2.2+ds-1) from sid,
#                   through a private apt configuration under
#                   $NCM_CACHE/apt-sid: /etc/apt is never touched, so
#                   nothing on the machine can upgrade to sid.  sid lists
#                   11.x too; the version is pinned so that does not matter.
#
# Idempotent: a tree already unpacked is printed without touching the
# network.  With QEMU_SRC set, check and print that tree instead; it is
# never modified.
set -euo pipefail
. "$(dirname "$0")/common.sh"

QEMU_10_2_DEB=1:10.2.2+ds-1

if [ -n "${QEMU_SRC:-}" ]; then
    [ -f "$QEMU_SRC/hw/usb/core.c" ] && [ -x "$QEMU_SRC/configure" ] ||
        die "QEMU_SRC=$QEMU_SRC does not look like a QEMU source tree" \
            "point QEMU_SRC at a directory holding configure and hw/usb/core.c"
    echo "$QEMU_SRC"
    exit 0
fi

[ -r /etc/debian_version ] || die "not Debian and no QEMU_SRC given" \
    "run: make QEMU_SRC=/path/to/qemu (upstream git works)"

case $QEMU_VERSION in
10.0)
    dir=$NCM_CACHE/debian-src
    want=qemu/trixie
    ;;
10.2)
    dir=$NCM_CACHE/debian-src-10.2
    want=qemu=${QEMU_DEB_VERSION:-$QEMU_10_2_DEB}
    ;;
*)
    die "QEMU_VERSION=$QEMU_VERSION: no Debian source for that line" \
        "use QEMU_VERSION=10.0 (the default) or QEMU_VERSION=10.2" \
        "or any tree: make QEMU_SRC=/path/to/qemu"
    ;;
esac

# The stamp holds the tree and what was asked for (10.0 stamps written
# before 10.2 existed hold only the tree).
stamp=$dir/.unpacked
unpacked() {
    local asked
    [ -f "$stamp" ] && [ -d "$(sed -n 1p "$stamp")" ] || return 1
    asked=$(sed -n 2p "$stamp")
    [ "${asked:-qemu/trixie}" = "$want" ]
}
if unpacked; then
    sed -n 1p "$stamp"
    exit 0
fi

mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
if unpacked; then
    sed -n 1p "$stamp"
    exit 0
fi

apt_opts=()
if [ "$QEMU_VERSION" != 10.0 ]; then
    # A private apt: its own sources.list (sid deb-src only), lists and
    # caches.  apt.conf.d settings such as proxies still apply.
    apt_dir=$NCM_CACHE/apt-sid
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
    printf '%s\n' "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian sid main" \
        >"$apt_dir/sources.list"
    apt_opts=(-o "Dir::Etc::sourcelist=$apt_dir/sources.list"
              -o "Dir::Etc::sourceparts=-"
              -o "Dir::State::Lists=$apt_dir/lists"
              -o "Dir::Cache=$apt_dir/cache"
              -o "APT::Sandbox::User=$(id -un)")
    deb_version=${want#qemu=}
    listed() {
        apt-cache "${apt_opts[@]}" showsrc qemu 2>/dev/null |
            sed -n 's/^Version: //p'
    }
    if ! grep -qxF "$deb_version" <<<"$(listed)"; then
        step "apt-get update of the private sid source list ($apt_dir)" >&2
        apt-get "${apt_opts[@]}" update -q >"$dir/update.log" 2>&1 ||
            die "apt-get update for sid failed (log: $dir/update.log)" \
                "check that deb.debian.org is reachable from this machine"
    fi
    if ! grep -qxF "$deb_version" <<<"$(listed)"; then
        die "sid does not list qemu $deb_version" \
            "versions it lists: $(listed | tr '\n' ' ')" \
            "pick a 10.2 one: QEMU_DEB_VERSION=<version> make ..." \
            "or use a tree you have: make QEMU_SRC=/path/to/qemu"
    fi
fi

step "fetching QEMU source with apt-get source $want (into $dir)" >&2
rm -rf "$dir"/qemu-* "$dir"/qemu_*
(cd "$dir" && apt-get "${apt_opts[@]}" source -q "$want" \
    >"$dir/fetch.log" 2>&1) ||
    die "apt-get source $want failed (log: $dir/fetch.log)" \
        "run scripts/setup/install-deps.sh build (dpkg-dev; the trixie deb-src entry for 10.0)" \
        "or use an existing tree: make QEMU_SRC=/path/to/qemu"
src=$(ls -d "$dir"/qemu-*/ 2>/dev/null | head -n1)
src=${src%/}
[ -f "$src/hw/usb/core.c" ] || die "no QEMU tree found in $dir after unpack" \
    "see $dir/fetch.log"
case $(cat "$src/VERSION") in
"$QEMU_VERSION".*) ;;
*) note "QEMU $(cat "$src/VERSION") (expected $QEMU_VERSION.x); continuing" >&2 ;;
esac
printf '%s\n%s\n' "$src" "$want" >"$stamp"
echo "$src"
