#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Install what building QEMU with usb-ncm-dl and running its tests needs.
# Idempotent: every step checks first and does nothing when already done.
#
#   scripts/setup/install-deps.sh [build|guest|arm64|kernel|vng|fuzz|bench|replay|all]...
set -euo pipefail
. "$(dirname "$0")/common.sh"

BUILD_PKGS="build-essential ninja-build python3-venv pkg-config libglib2.0-dev
 libpixman-1-dev libslirp-dev libfdt-dev flex bison ccache dpkg-dev
 seabios qemu-system-data ipxe-qemu"
BPO_PKGS="meson python3-pycotap"
GUEST_PKGS="cpio xz-utils zstd kmod iperf3 iputils-ping gcc libc6-dev"
FUZZ_PKGS="clang clang-14 libclang-rt-14-dev llvm-14"
BENCH_PKGS="gnuplot-nox linux-perf iproute2"
# record/replay and captures (the guest tests use them too): qemu-img for
# the snapshot image, tshark to decode the NTBs, gdb for the replay's gdbstub
REPLAY_PKGS="qemu-utils tshark gdb"
# the arm64 guest (ARCH=arm64): its static helper programs
# (ncm-usbfs-stress, ncm-ping) cross-built; amd64 packages of bookworm, no
# foreign architecture is added (its kernel and userland come through
# tests/guest/image.sh's private apt configuration)
ARM64_PKGS="gcc-aarch64-linux-gnu libc6-dev-arm64-cross"
# the kernel developer's loop (scripts/kernel/, docs/kernel-developers.md):
# what a Linux build needs, git for make bisect, Debian's 6.1 source
# (/usr/src/linux-source-6.1.tar.xz, unpacked by scripts/kernel/
# fetch-source.sh) and the arm64 cross compiler for ARCH=arm64 kernels
KERNEL_PKGS="build-essential flex bison bc libelf-dev libssl-dev ccache git
 xz-utils cpio kmod linux-source-6.1 gcc-aarch64-linux-gnu"
# virtme-ng (vng, scripts/kernel/vng-ncm.sh): sid's, this version and no
# other (Architecture all; its dependencies are all in bookworm).  Fetched
# through a private apt configuration ($NCM_CACHE/apt-vng: its own
# sources.list, lists and cache; /etc/apt is not touched, so nothing on the
# machine can upgrade to sid) and installed from the .deb without its
# recommends (which would pull bookworm's qemu-system-x86 and a GUI stack).
# udev: vng's guest runs the host's udev to find its virtio-serial ports;
# without it vng prints nothing and exits 255.  Set "vng" is these alone
# (what make check's vng leg needs); "kernel" includes it.
VNG_VERSION=1.41-1
VNG_PKGS="udev kmod iproute2 iputils-ping"

[ -r /etc/debian_version ] || die "this is not a Debian machine" \
    "install QEMU's build dependencies by hand and run: make QEMU_SRC=/path/to/qemu"

codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
[ "$codename" = bookworm ] || note "tested on bookworm; this is '$codename'"

sources_changed=0
add_source() {
    local file=$1 content=$2
    if [ ! -f "$file" ] || ! cmp -s "$file" <(printf '%s\n' "$content"); then
        printf '%s\n' "$content" | as_root tee "$file" >/dev/null
        sources_changed=1
    fi
}

ensure_sources() {
    add_source /etc/apt/sources.list.d/usb-ncm-dl-backports.sources \
"Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg"
    # QEMU 10.0 sources only: no trixie binaries are ever installed.
    add_source /etc/apt/sources.list.d/usb-ncm-dl-trixie-src.sources \
"Types: deb-src
URIs: http://deb.debian.org/debian
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg"
    if [ "$sources_changed" = 1 ] || [ ! -d /var/lib/apt/lists ] ||
       ! ls /var/lib/apt/lists/*trixie*Sources* >/dev/null 2>&1; then
        step "apt-get update (new apt sources)"
        as_root apt-get update -q >/dev/null ||
            die "apt-get update failed" \
                "check that deb.debian.org is reachable from this machine"
    fi
}

missing() {
    local p out=""
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
            grep -q 'install ok installed' || out="$out $p"
    done
    echo "$out"
}

install_pkgs() {
    local what=$1; shift
    local need
    need=$(missing "$@")
    if [ -z "$need" ]; then
        note "$what packages: all present"
        return
    fi
    step "installing $what packages:$need"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
        --no-install-recommends $need >/dev/null ||
        die "apt-get install of$need failed" \
            "check that deb.debian.org is reachable, then re-run make"
}

# install_vng: virtme-ng $VNG_VERSION, unless it is installed already
install_vng() {
    local have A opts deb
    have=$(dpkg-query -W -f='${Status} ${Version}' virtme-ng 2>/dev/null || true)
    if [ "$have" = "install ok installed $VNG_VERSION" ]; then
        note "virtme-ng $VNG_VERSION: present"
        return
    fi
    [ -z "$have" ] || note "virtme-ng: '$have' found, $VNG_VERSION wanted"
    A=$NCM_CACHE/apt-vng
    mkdir -p "$A/lists/partial" "$A/cache/archives/partial" "$A/debs"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian sid main" \
        >"$A/sources.list"
    opts=(-o "Dir::Etc::sourcelist=$A/sources.list" -o Dir::Etc::sourceparts=-
          -o "Dir::State::Lists=$A/lists" -o "Dir::Cache=$A/cache")
    [ "$(id -u)" != 0 ] || opts+=(-o APT::Sandbox::User=root)
    deb=$A/debs/virtme-ng_${VNG_VERSION}_all.deb
    if [ ! -s "$deb" ]; then
        step "downloading virtme-ng $VNG_VERSION (sid, private apt lists in $A)"
        apt-get -q "${opts[@]}" update >"$A/update.log" 2>&1 ||
            die "apt-get update of $A failed (log: $A/update.log)" \
                "check that deb.debian.org is reachable from this machine"
        (cd "$A/debs" && apt-get -q "${opts[@]}" download "virtme-ng=$VNG_VERSION" \
            >"$A/download.log" 2>&1) ||
            die "sid no longer serves virtme-ng $VNG_VERSION (log: $A/download.log)" \
                "put virtme-ng_${VNG_VERSION}_all.deb into $A/debs by hand," \
                "or raise VNG_VERSION in scripts/setup/install-deps.sh and check vng-ncm.sh with it"
    fi
    step "installing virtme-ng $VNG_VERSION (no recommends)"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
        --no-install-recommends --allow-downgrades "$deb" >/dev/null ||
        die "apt-get install of $deb failed" \
            "its dependencies come from bookworm: check that deb.debian.org is reachable"
}

meson_ok() {
    local v
    v=$(/usr/bin/python3 -c 'import mesonbuild.coredata as c; print(c.version)' \
        2>/dev/null) || return 1
    dpkg --compare-versions "$v" ge 1.5
}

want=${*:-all}
step "checking dependencies ($want)"
ensure_sources
for w in $want; do
    case $w in
    build|all)
        install_pkgs build $BUILD_PKGS
        if ! meson_ok || [ -n "$(missing python3-pycotap)" ]; then
            step "installing meson and pycotap from bookworm-backports"
            as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
                --no-install-recommends -t bookworm-backports $BPO_PKGS \
                >/dev/null ||
                die "could not install $BPO_PKGS from bookworm-backports" \
                    "check /etc/apt/sources.list.d/usb-ncm-dl-backports.sources"
        fi
        ;;&
    guest|all) install_pkgs guest $GUEST_PKGS ;;&
    arm64|all) install_pkgs arm64 $ARM64_PKGS ;;&
    kernel|all) install_pkgs kernel $KERNEL_PKGS ;;&
    kernel|vng|all)
        install_pkgs vng $VNG_PKGS
        install_vng
        ;;&
    fuzz|all) install_pkgs fuzz $FUZZ_PKGS ;;&
    bench|all) install_pkgs bench $BENCH_PKGS ;;&
    guest|replay|all)
        # wireshark-common asks whether non-root users may capture: no
        if [ -n "$(missing tshark)" ]; then
            echo "wireshark-common wireshark-common/install-setuid boolean false" |
                as_root debconf-set-selections
        fi
        install_pkgs replay $REPLAY_PKGS
        ;;&
    build|guest|arm64|kernel|vng|fuzz|bench|replay|all) ;;
    *) die "unknown dependency set '$w'" "use build, guest, arm64, kernel, vng, fuzz, bench, replay or all" ;;
    esac
done
step "dependencies ready"
