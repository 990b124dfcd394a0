#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# A Linux source tree from Debian, unpacked once (idempotent):
#
#   scripts/kernel/fetch-source.sh [6.1|5.10|7.2]     prints the tree's path
#
#   6.1   bookworm's linux-source-6.1 (apt-get install linux-source-6.1,
#         which leaves /usr/src/linux-source-6.1.tar.xz)
#   5.10  bullseye's linux-source-5.10 (7.2: sid's linux-source-7.2),
#         fetched with apt-get download
#         through a private apt configuration ($NCM_CACHE/apt-source-<v>:
#         its own sources.list, lists and cache; nothing in /etc/apt
#         changes, nothing is installed) and unpacked from the .deb
#
# The tree: $NCM_CACHE/kernel-src/linux-source-<v> (left pristine: build it
# with KERNEL_SRC=<that path> make run, which builds out of tree).
set -euo pipefail
. "$(dirname "$0")/../setup/common.sh"
exec 3>&1 1>&2

V=${1:-6.1}
DEST=$NCM_CACHE/kernel-src
TREE=$DEST/linux-source-$V
mkdir -p "$DEST"
if [ -f "$TREE/Makefile" ] && [ -f "$DEST/.linux-source-$V.unpacked" ]; then
    step "Linux $V source: $TREE (already unpacked)"
    echo "$TREE" >&3
    exit 0
fi
apt_opts=()
[ "$(id -u)" = 0 ] && apt_opts=(-o APT::Sandbox::User=root)
case $V in
6.1)
    TAR=/usr/src/linux-source-6.1.tar.xz
    if [ ! -f "$TAR" ]; then
        step "installing linux-source-6.1 (bookworm)"
        if [ "$(id -u)" = 0 ]; then
            apt-get install -y -q linux-source-6.1 >/dev/null
        else
            sudo apt-get install -y -q linux-source-6.1 >/dev/null
        fi
    fi ;;
5.10|7.2)
    A=$NCM_CACHE/apt-source-$V
    k=/usr/share/keyrings/debian-archive-keyring.gpg
    mkdir -p "$A/lists/partial" "$A/cache/archives/partial" "$A/debs"
    : >> "$A/status"
    if [ "$V" = 5.10 ]; then
        {
            echo "deb [signed-by=$k] http://deb.debian.org/debian bullseye main"
            echo "deb [signed-by=$k] http://deb.debian.org/debian-security bullseye-security main"
        } > "$A/sources.list"
    else
        echo "deb [signed-by=$k] http://deb.debian.org/debian sid main" \
            > "$A/sources.list"
    fi
    opts=(-o "Dir::Etc::sourcelist=$A/sources.list" -o Dir::Etc::sourceparts=-
          -o "Dir::State::Lists=$A/lists" -o "Dir::Cache=$A/cache"
          -o "Dir::State::status=$A/status" "${apt_opts[@]}")
    if [ -z "$(find "$A/lists" -maxdepth 1 -name '*Packages*' -mmin -1440 | head -n1)" ]; then
        step "apt-get update of the private apt lists for $V ($A)"
        apt-get -q "${opts[@]}" update >/dev/null
    fi
    deb=$(ls "$A"/debs/linux-source-"$V"_*.deb 2>/dev/null | head -n1 || true)
    if [ -z "$deb" ]; then
        step "downloading linux-source-$V"
        (cd "$A/debs" && apt-get -q "${opts[@]}" download "linux-source-$V" >/dev/null)
        deb=$(ls "$A"/debs/linux-source-"$V"_*.deb | head -n1)
    fi
    rm -rf "$A/x"
    dpkg-deb -x "$deb" "$A/x"
    TAR=$(ls "$A"/x/usr/src/linux-source-"$V".tar.xz) ;;
*) die "unknown version '$V'" "use 6.1 (bookworm), 5.10 (bullseye) or 7.2 (sid)" ;;
esac
step "unpacking $TAR into $DEST"
rm -rf "$TREE.partial"
mkdir -p "$TREE.partial"
tar -xf "$TAR" -C "$TREE.partial" --strip-components=1
rm -rf "$TREE" "${A:-/nonexistent}/x"
mv "$TREE.partial" "$TREE"
touch "$DEST/.linux-source-$V.unpacked"
step "Linux $V source: $TREE"
echo "$TREE" >&3
