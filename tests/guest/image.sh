#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Build (once, then reuse) the test guest: a Debian kernel plus a busybox
# initramfs with iperf3, ethtool, the USB/virtio network modules and our
# own usbfs stress program (tests/guest/ncm-usbfs-stress.c, built static
# here with the host's gcc).  ARCH=arm64: the same for an arm64 guest
# (-M virt), from Debian's arm64 packages, with the programs built by
# aarch64-linux-gnu-gcc.
#
#   tests/guest/image.sh [--print-dir]
#
# Output: $NCM_CACHE/guest/<kernel-version>/{vmlinuz,initrd.img}
#   (ARCH=arm64: $NCM_CACHE/guest/arm64/<kernel-version>/)
# With --print-dir all progress goes to stderr and the only thing on stdout
# is that directory (for other scripts: dir=$(guest-image.sh --print-dir)).
#
# Inputs (environment):
#   KERNEL=linux-image-amd64         default: bookworm's current 6.1 kernel
#   KERNEL=linux-image-amd64/bookworm-backports   any apt package spec
#   KERNEL=linux-image-6.1.0-57-amd64=6.1.192-3   ... with a version
#   KERNEL=/path/to/linux-image-*.deb             a .deb you built or fetched
#   KERNEL=bullseye|bookworm|trixie|sid           that Debian release's
#       kernel (5.10, 6.1, 6.12, 7.2 when written); KERNEL=5.10|6.1|6.12|7.2
#       say the same by version. Releases other than the host's come
#       through a private apt configuration in $NCM_CACHE/apt-kernels
#       (Dir::Etc::sourcelist, Dir::State::Lists, Dir::Cache of its own):
#       nothing in /etc/apt changes, nothing on the machine is upgraded.
#       KERNEL=linux-image-amd64/sid (any package/release of those) too.
#   Kernels split into linux-binary-* (the image) and linux-modules-*
#   (sid's 7.x) are followed through the linux-image-* metapackage; for a
#   .deb path, a linux-modules-*.deb of the same version next to it (or
#   KERNEL_MODULES_DEB=...) is taken along.
#   ARCH=arm64                       an arm64 guest: linux-image-arm64 and
#       the userland of the host's Debian release for arm64, through a
#       private apt configuration in $NCM_CACHE/apt-arm64
#       (APT::Architecture=arm64 and lists, cache and dpkg status of its
#       own: no dpkg --add-architecture, nothing in /etc/apt changes);
#       KERNEL names arm64 packages then (linux-image-arm64, 6.12, sid...)
#   KERNEL_IMAGE=/path/to/bzImage    your own kernel; drivers must be built in
#       (=y) unless KERNEL_MODULES=/path/lib/modules/<version> is given too
#       (what `make modules_install INSTALL_MOD_PATH=DIR` leaves in DIR).
#       ARCH=arm64: arch/arm64/boot/Image (or Image.gz).
#
# Idempotent: nothing is rebuilt while the .debs, tests/guest/init.sh, the
# init.d/*.sh it sources (copied to /etc/ncm/init.d/), the init-*.sh of its
# modes (each copied to /etc/ncm/), ncm-usbfs-stress.c,
# ncm-ping.c, gcc and this script are unchanged.
# Downloads go to $NCM_CACHE/debs.
set -euo pipefail
shopt -s inherit_errexit
. "$(dirname "$0")/../../scripts/setup/common.sh"

PRINT_DIR=0
case ${1:-} in
--print-dir) PRINT_DIR=1 ;;
"") ;;
-h|--help) sed -n '3,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
*) die "unknown argument '$1'" "usage: tests/guest/image.sh [--print-dir]" ;;
esac
if [ "$PRINT_DIR" = 1 ]; then
    exec 3>&1 1>&2
fi

# Debian's name for the guest architecture, its multiarch triplet and the
# compiler of the static helper programs
case $NCM_ARCH in
arm64) DARCH=arm64 TRIPLET=aarch64-linux-gnu GUEST_CC=aarch64-linux-gnu-gcc ;;
*) DARCH=amd64 TRIPLET=x86_64-linux-gnu GUEST_CC=gcc ;;
esac
KERNEL=${KERNEL:-linux-image-$DARCH}
KERNEL_IMAGE=${KERNEL_IMAGE:-}
KERNEL_MODULES=${KERNEL_MODULES:-}
INIT_SRC=$NCM_TOP/tests/guest/init.sh
STRESS_SRC=$NCM_TOP/tests/guest/ncm-usbfs-stress.c
PING_SRC=$NCM_TOP/tests/guest/ncm-ping.c
# the modes of /init, one file each (init.sh sources them from /etc/ncm/)
MODE_SRCS=("$NCM_TOP"/tests/guest/init-*.sh)
# what init.sh sources before the mode: parameters and shared helpers
INITD_SRCS=("$NCM_TOP"/tests/guest/init.d/*.sh)
DEBS=$NCM_CACHE/debs
GUESTS=$NCM_CACHE/guest

# Userland: busybox for everything, iperf3 (+ its libraries) and ethtool for
# the cdc_ncm counters. Shared libraries are resolved from these .debs.
USER_PKGS="busybox-static iperf3 libiperf0 libsctp1 libssl3 libc6 ethtool libmnl0"
# Modules to load at boot (their dependencies are worked out by depmod).
# Names that are built into a given kernel are skipped.
MODULES="usb-common usbcore xhci-pci xhci-hcd ehci-pci ehci-hcd uhci-hcd
 ohci-pci ohci-hcd mii usbnet cdc_ether cdc_ncm failover net_failover
 virtio_pci virtio_net"
# Extra modules copied in but not loaded (handy in the shell).
EXTRA_MODULES="usbmon"

# Idempotent and quiet when everything is there; stdout is for the paths.
deps=guest
[ "$NCM_ARCH" = x86_64 ] || deps="guest $NCM_ARCH"
bash "$NCM_TOP/scripts/setup/install-deps.sh" $deps >&2

for t in apt-get dpkg-deb depmod modprobe cpio gzip readelf flock sha256sum "$GUEST_CC"; do
    command -v "$t" >/dev/null ||
        die "'$t' is missing" "run: make deps (or scripts/setup/install-deps.sh $deps)"
done

mkdir -p "$DEBS" "$GUESTS"
exec 9>"$GUESTS/.lock"
flock 9

apt_opts=()
[ "$(id -u)" = 0 ] && apt_opts=(-o APT::Sandbox::User=root)

# private_apt_opts DIR: the options of a private apt configuration in DIR
# (its own sources.list, lists and cache); for an arm64 guest also
# APT::Architecture=arm64 and an empty dpkg status of its own, so that
# apt neither needs the machine to know arm64 nor weighs the packages
# installed here
private_apt_opts() {
    PRIVATE_OPTS=(-o "Dir::Etc::sourcelist=$1/sources.list"
        -o Dir::Etc::sourceparts=- -o "Dir::State::Lists=$1/lists"
        -o "Dir::Cache=$1/cache")
    if [ "$DARCH" != amd64 ]; then
        PRIVATE_OPTS+=(-o "APT::Architecture=$DARCH" -o "APT::Architectures=$DARCH"
            -o "Dir::State::status=$1/status")
    fi
}
# private_apt_update DIR WHAT: apt-get update of the configuration in DIR
# (its sources.list written by the caller)
private_apt_update() {
    local dir=$1 opts
    private_apt_opts "$dir"
    opts=("${PRIVATE_OPTS[@]}")
    mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
    : >>"$dir/status"
    note "apt-get update of the private $2 lists ($dir)" >&2
    apt-get -q "${opts[@]}" "${apt_opts[@]}" update >/dev/null ||
        die "apt-get update of $dir failed" \
            "check that deb.debian.org is reachable"
}

# The private apt configuration for kernels of other Debian releases
# (one per guest architecture).
KAPT_DIR=$NCM_CACHE/apt-kernels
[ "$DARCH" = amd64 ] || KAPT_DIR=$NCM_CACHE/apt-kernels-$DARCH
private_apt_opts "$KAPT_DIR"
KAPT_OPTS=("${PRIVATE_OPTS[@]}")
kapt_update() {
    mkdir -p "$KAPT_DIR"
    local r k=/usr/share/keyrings/debian-archive-keyring.gpg
    {
        for r in bullseye trixie sid; do
            echo "deb [signed-by=$k] http://deb.debian.org/debian $r main"
        done
        for r in bullseye-security trixie-security; do
            echo "deb [signed-by=$k] http://deb.debian.org/debian-security $r main"
        done
    } > "$KAPT_DIR/sources.list"
    private_apt_update "$KAPT_DIR" kernel
}
# lists_fresh DIR: the private lists in DIR exist and are less than a day old
lists_fresh() {
    [ -n "$(find "$1/lists" -maxdepth 1 -name '*Packages*' -mmin -1440 2>/dev/null | head -n1)" ]
}
kapt_fresh() { lists_fresh "$KAPT_DIR"; }

# An arm64 guest's packages of the host's release (its userland and
# kernel, what the machine's own lists give an amd64 guest): the same
# suites as this machine's Debian release, for arm64, in a private
# configuration.  SYS_OPTS: the apt options of "the host's release" for the
# guest's architecture (none for amd64: the machine's own configuration).
SYS_OPTS=()
SYS_LISTS=/var/lib/apt/lists
if [ "$DARCH" != amd64 ]; then
    AAPT_DIR=$NCM_CACHE/apt-$DARCH
    private_apt_opts "$AAPT_DIR"
    SYS_OPTS=("${PRIVATE_OPTS[@]}")
    SYS_LISTS=$AAPT_DIR/lists
    aapt_update() {
        local rel k=/usr/share/keyrings/debian-archive-keyring.gpg
        rel=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
        [ -n "$rel" ] || die "/etc/os-release names no Debian release" \
            "the $DARCH guest takes the packages of the host's release"
        mkdir -p "$AAPT_DIR"
        {
            echo "deb [signed-by=$k] http://deb.debian.org/debian $rel main"
            echo "deb [signed-by=$k] http://deb.debian.org/debian $rel-updates main"
            echo "deb [signed-by=$k] http://deb.debian.org/debian-security $rel-security main"
        } > "$AAPT_DIR/sources.list"
        private_apt_update "$AAPT_DIR" "$DARCH"
    }
    lists_fresh "$AAPT_DIR" || aapt_update
fi

# deb_file SPEC: the cache path of the .deb apt would fetch for SPEC
# (downloading it if missing). SPEC is name, name=version or name/release.
# Resolutions are remembered until the apt lists change (apt is slow).
# With APT_PRIVATE=1, through the private kernel configuration.
APT_PRIVATE=0
lists_id() {
    local d=$SYS_LISTS
    [ "$APT_PRIVATE" = 1 ] && d=$KAPT_DIR/lists
    stat -c '%n %Y %s' "$d"/*Packages* 2>/dev/null | sha256sum | cut -c1-16
}
deb_file() {
    local spec=$1 uri name="" resolved tries=0 x=("${SYS_OPTS[@]}")
    [ "$APT_PRIVATE" = 1 ] && x=("${KAPT_OPTS[@]}")
    local kind=sys
    [ "$APT_PRIVATE" = 1 ] && kind=kapt
    # (arm64's apart; "_": no kind is another's prefix before the "-")
    [ "$DARCH" = amd64 ] || kind=${kind}_$DARCH
    resolved=$DEBS/.resolved-$kind-$(lists_id)
    [ -f "$resolved" ] && name=$(awk -v s="$spec" '$1 == s { print $2 }' "$resolved")
    if [ -n "$name" ] && [ -s "$DEBS/$name" ]; then
        printf '%s\n' "$DEBS/$name"
        return
    fi
    while :; do
        uri=$(apt-get download --print-uris "${x[@]}" "${apt_opts[@]}" "$spec" 2>/dev/null |
            awk 'NR == 1') || true
        name=$(printf '%s' "$uri" | awk '{print $2}')
        if [ -n "$uri" ] && [ ! -s "$DEBS/$name" ]; then
            note "downloading $spec" >&2
            (cd "$DEBS" && apt-get download -q "${x[@]}" "${apt_opts[@]}" "$spec" >/dev/null) || true
        fi
        [ -n "$uri" ] && [ -s "$DEBS/$name" ] && break
        # stale private lists (sid drops old versions): refresh once
        if { [ "$APT_PRIVATE" = 1 ] || [ "$DARCH" != amd64 ]; } && [ $tries = 0 ]; then
            tries=1
            if [ "$APT_PRIVATE" = 1 ]; then kapt_update; else aapt_update; fi
            resolved=$DEBS/.resolved-$kind-$(lists_id)
            continue
        fi
        [ -n "$uri" ] ||
            die "apt does not know the package '$spec'" \
                "run 'apt-get update' (as root) so the package lists exist" \
                "or check the name with: apt-cache policy '${spec%%[=/]*}'"
        die "apt-get download $spec failed" \
            "check that deb.debian.org is reachable; maybe run 'apt-get update'"
    done
    local r
    for r in "$DEBS"/.resolved-"$kind"-* "$DEBS"/.resolved-[0-9a-f]*; do
        [ "$r" = "$resolved" ] || rm -f "$r"
    done
    printf '%s %s\n' "$spec" "$name" >> "$resolved"
    printf '%s\n' "$DEBS/$name"
}

# deb_kver DEB: the kernel version a linux-image .deb installs (empty for
# a metapackage). Cached next to the .deb: listing a kernel .deb takes a while.
deb_kver() {
    local deb=$1 cache
    cache=$DEBS/.$(basename "$deb").kver
    case $deb in "$DEBS"/*) ;; *) cache="" ;; esac
    if [ -n "$cache" ] && [ -f "$cache" ]; then
        cat "$cache"
        return
    fi
    local v
    v=$(dpkg-deb -c "$deb" |
        awk '!v && match($NF, /^\.\/boot\/vmlinuz-/) { v = substr($NF, RLENGTH + 1) }
             !v && $NF ~ /^\.\/(usr\/)?lib\/modules\/[^\/]+\/vmlinuz$/ {
                 n = split($NF, p, "/"); v = p[n - 1] }
             END { print v }')
    [ -n "$cache" ] && printf '%s\n' "$v" > "$cache"
    printf '%s\n' "$v"
}
has_kernel() { [ -n "$(deb_kver "$1")" ]; }

# resolve_kernel_deb SPEC: follow metapackages (linux-image-amd64 ->
# linux-image-6.1.0-NN-amd64) to the .deb that holds a vmlinuz. A kernel
# split in two (linux-image-V -> linux-binary-V + linux-modules-V) sets
# MODULES_DEB to the second.
MODULES_DEB=""
dep_spec() {
    # dep_spec DEB REGEX: the first dependency of DEB matching REGEX, as an
    # apt spec (name=version when the dependency is exact)
    local dep
    dep=$(dpkg-deb -f "$1" Depends | tr ',' '\n' |
        grep -m1 -oE "$2"'[^ |]*( \(= [^)]+\))?' || true)
    case $dep in
    "") return 1 ;;
    *"(= "*) printf '%s=%s\n' "${dep%% *}" "$(printf '%s' "$dep" | sed 's/.*(= \(.*\))/\1/')" ;;
    *) printf '%s\n' "$dep" ;;
    esac
}
resolve_kernel_deb() {
    local spec=$1 deb dep depth=0 mods
    while :; do
        deb=$(deb_file "$spec")
        has_kernel "$deb" && { printf '%s\n' "$deb"; return; }
        depth=$((depth + 1))
        [ $depth -le 3 ] || die "could not resolve '$KERNEL' to a kernel image"
        if dep=$(dep_spec "$deb" 'linux-binary-'); then
            mods=$(dep_spec "$deb" 'linux-modules-') ||
                die "$(basename "$deb") depends on linux-binary but no linux-modules"
            MODULES_DEB=$(deb_file "$mods")
            spec=$dep
            continue
        fi
        dep=$(dep_spec "$deb" 'linux-image-') ||
            die "'$spec' is neither a kernel nor a kernel metapackage" \
                "use KERNEL=linux-image-amd64 or KERNEL=/path/to/linux-image-*.deb"
        spec=$dep
    done
}

# bzimage_version FILE: the version string in a bzImage's setup header.
bzimage_version() {
    local f=$1 off
    off=$(od -An -t u2 -j $((0x20e)) -N 2 "$f" | tr -d ' ')
    [ -n "$off" ] && [ "$off" -gt 0 ] || return 1
    dd if="$f" bs=1 skip=$((off + 0x200)) count=200 2>/dev/null |
        tr '\0' '\n' | head -n1 | awk '{print $1}'
}

# arm64_image_version FILE: the version in an arm64 Image's (or Image.gz's)
# banner, "Linux version V (...)": the arm64 header has no version field
arm64_image_version() {
    local v
    v=$({ gzip -dc "$1" 2>/dev/null || cat "$1"; } |
        grep -a -m1 -o 'Linux version [^ ]*' | awk '{print $3}')
    [ -n "$v" ] && printf '%s\n' "$v"
}

# KERNEL=<release> or <version>: that Debian release's kernel
KERNEL_WANT=""
case $KERNEL in
5.10|bullseye) KERNEL=linux-image-$DARCH/bullseye-security KERNEL_WANT=5.10 ;;
6.1|bookworm) KERNEL=linux-image-$DARCH KERNEL_WANT=6.1 ;;
6.12|trixie) KERNEL=linux-image-$DARCH/trixie KERNEL_WANT=6.12 ;;
7.2|sid) KERNEL=linux-image-$DARCH/sid KERNEL_WANT=7.2 ;;
esac
case $KERNEL in
*.deb) ;;
*/bullseye*|*/trixie*|*/sid|*/forky*|*/unstable|*/testing)
    APT_PRIVATE=1
    kapt_fresh || kapt_update
    ;;
esac
# after the kernel: the userland always comes from the host's release
step "resolving guest inputs"
# (an arm64 guest's come through its private configuration: any host)
[ "$DARCH" != amd64 ] || [ "$(dpkg --print-architecture)" = amd64 ] ||
    die "the guest packages are fetched for this machine's architecture" \
        "run on an amd64 Debian host"
user_debs=()
kprivate=$APT_PRIVATE
APT_PRIVATE=0
for p in $USER_PKGS; do
    d=$(deb_file "$p")
    user_debs+=("$d")
done
APT_PRIVATE=$kprivate

kernel_deb=""
if [ -n "$KERNEL_IMAGE" ]; then
    [ -r "$KERNEL_IMAGE" ] || die "KERNEL_IMAGE=$KERNEL_IMAGE is not readable" \
        "point it at arch/x86/boot/bzImage (arm64: arch/arm64/boot/Image) of your kernel build"
    if [ "$DARCH" = arm64 ]; then
        kver=$(arm64_image_version "$KERNEL_IMAGE") ||
            die "$KERNEL_IMAGE has no 'Linux version' banner" \
                "use arch/arm64/boot/Image or Image.gz"
    else
        kver=$(bzimage_version "$KERNEL_IMAGE") ||
            die "$KERNEL_IMAGE does not look like a bzImage" \
                "use arch/x86/boot/bzImage, not vmlinux"
    fi
    if [ -n "$KERNEL_MODULES" ]; then
        [ -d "$KERNEL_MODULES/kernel" ] ||
            die "KERNEL_MODULES=$KERNEL_MODULES has no kernel/ directory" \
                "give lib/modules/<version> from 'make modules_install INSTALL_MOD_PATH=DIR'"
        [ "$(basename "$KERNEL_MODULES")" = "$kver" ] ||
            note "warning: modules dir $(basename "$KERNEL_MODULES") != kernel $kver"
    fi
    kinput="image $(sha256sum < "$KERNEL_IMAGE") modules ${KERNEL_MODULES:+$(
        find "$KERNEL_MODULES" -type f -printf '%P %s %T@\n' | sort | sha256sum)}"
    note "kernel: $KERNEL_IMAGE ($kver)"
else
    case $KERNEL in
    *.deb)
        [ -r "$KERNEL" ] || die "KERNEL=$KERNEL is not a readable file" \
            "give a path to a linux-image-*.deb or a package name"
        has_kernel "$KERNEL" || die "$KERNEL holds no /boot/vmlinuz-*" \
            "give the linux-image-<version> .deb, not the metapackage or headers"
        kernel_deb=$(realpath "$KERNEL")
        MODULES_DEB=${KERNEL_MODULES_DEB:-}
        if [ -z "$MODULES_DEB" ]; then
            case $(basename "$kernel_deb") in
            linux-binary-*)
                MODULES_DEB=$(ls "$(dirname "$kernel_deb")/$(basename "$kernel_deb" |
                    sed 's/^linux-binary-/linux-modules-/')" 2>/dev/null || true) ;;
            esac
        fi
        kinput="deb $(sha256sum < "$kernel_deb") ${MODULES_DEB:+$(sha256sum < "$MODULES_DEB")}"
        ;;
    *)
        # (a subshell cannot hand MODULES_DEB back: a file does)
        kernel_deb=$(resolve_kernel_deb "$KERNEL" && echo "$MODULES_DEB" > "$DEBS/.modules-deb")
        MODULES_DEB=$(cat "$DEBS/.modules-deb")
        rm -f "$DEBS/.modules-deb"
        kinput="deb $(basename "$kernel_deb") ${MODULES_DEB:+$(basename "$MODULES_DEB")}"
        ;;
    esac
    kver=$(deb_kver "$kernel_deb")
    [ -n "$kver" ] || die "could not find the kernel version in $kernel_deb"
    note "kernel: $(basename "$kernel_deb")${MODULES_DEB:+ + $(basename "$MODULES_DEB")} ($kver)"
    case $kver in
    "$KERNEL_WANT"|"$KERNEL_WANT".*) ;;
    *) [ -z "$KERNEL_WANT" ] ||
           note "warning: asked for Linux $KERNEL_WANT, that release now carries $kver" ;;
    esac
fi

out=$GUESTS/$kver
[ "$DARCH" = amd64 ] || out=$GUESTS/$DARCH/$kver
key=$( {
    echo "$kinput"
    for d in "${user_debs[@]}"; do basename "$d"; done
    echo "$MODULES / $EXTRA_MODULES"
    sha256sum < "$INIT_SRC"
    sha256sum < "$STRESS_SRC"
    sha256sum < "$NCM_TOP/include/hw/usb/cdc-ncm.h"
    sha256sum < "$PING_SRC"
    for m in "${MODE_SRCS[@]}"; do
        echo "${m##*/} $(sha256sum < "$m")"
    done
    for m in "${INITD_SRCS[@]}"; do
        echo "init.d/${m##*/} $(sha256sum < "$m")"
    done
    "$GUEST_CC" --version | head -n1
    sha256sum < "$0"
} | sha256sum | awk '{print $1}')

# busybox_applets BUSYBOX: the applets it has, one a line.  The host runs
# "busybox --list" of its own architecture; an arm64 busybox cannot run
# here, so its list is read from the binary: the applet names are one
# sorted, NUL-separated table ("[", "[[", "acpid", ..., then an empty
# name) that the --list applet prints.
busybox_applets() {
    if [ "$DARCH" = amd64 ]; then
        "$1" --list
        return
    fi
    python3 - "$1" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
i = data.find(b"\0[\0[[\0")
if i < 0:
    sys.exit("no applet table in " + sys.argv[1])
names = data[i + 1:data.index(b"\0\0", i + 1)].split(b"\0")
if len(names) < 100 or not {b"sh", b"ip", b"ping", b"mount"} <= set(names):
    sys.exit("the applet table of %s does not look right (%d names)"
             % (sys.argv[1], len(names)))
print("\n".join(n.decode() for n in names))
PY
}

if [ -s "$out/vmlinuz" ] && [ -s "$out/initrd.img" ] &&
   [ "$(cat "$out/inputs.sha256" 2>/dev/null)" = "$key" ]; then
    step "guest image up to date"
else
    work=$(mktemp -d "$GUESTS/.build.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    ext=$work/ext root=$work/root
    mkdir -p "$ext" "$root"

    step "extracting packages"
    for d in "${user_debs[@]}"; do
        dpkg-deb -x "$d" "$ext"
    done
    kroot=$work/kernel
    mkdir -p "$kroot"
    if [ -n "$kernel_deb" ]; then
        note "unpacking $(basename "$kernel_deb")"
        dpkg-deb -x "$kernel_deb" "$kroot"
        [ -n "$MODULES_DEB" ] && dpkg-deb -x "$MODULES_DEB" "$kroot"
        # merged /usr (trixie on): modules in /usr/lib/modules, where
        # this machine's depmod does not look under -b
        if [ -d "$kroot/usr/lib/modules/$kver" ] && [ ! -d "$kroot/lib/modules/$kver" ]; then
            mkdir -p "$kroot/lib/modules"
            mv "$kroot/usr/lib/modules/$kver" "$kroot/lib/modules/$kver"
        fi
        if [ -f "$kroot/boot/vmlinuz-$kver" ]; then
            cp "$kroot/boot/vmlinuz-$kver" "$work/vmlinuz"
        else
            cp "$kroot/lib/modules/$kver/vmlinuz" "$work/vmlinuz"
        fi
        moddir=$kroot/lib/modules/$kver
    else
        cp "$KERNEL_IMAGE" "$work/vmlinuz"
        moddir=""
        if [ -n "$KERNEL_MODULES" ]; then
            mkdir -p "$kroot/lib/modules"
            cp -a "$KERNEL_MODULES" "$kroot/lib/modules/$kver"
            moddir=$kroot/lib/modules/$kver
        fi
    fi

    step "laying out the initramfs"
    mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,lib64,etc/ncm,proc,sys,dev,tmp,run,root}
    mkdir -p "$root/lib/$TRIPLET" "$root/usr/lib/$TRIPLET"
    cp "$ext/bin/busybox" "$root/bin/busybox"
    applets=$(busybox_applets "$root/bin/busybox") ||
        die "could not list the applets of busybox-static"
    for a in $applets; do
        [ "$a" = busybox ] || [ "$a" = init ] || [ "$a" = linuxrc ] ||
            ln -sf busybox "$root/bin/$a"
    done
    cp "$ext/usr/bin/iperf3" "$root/usr/bin/iperf3"
    cp "$ext/sbin/ethtool" "$root/usr/sbin/ethtool"
    install -m 0755 "$INIT_SRC" "$root/init"
    for m in "${MODE_SRCS[@]}"; do
        install -m 0644 "$m" "$root/etc/ncm/${m##*/}"
    done
    mkdir -p "$root/etc/ncm/init.d"
    for m in "${INITD_SRCS[@]}"; do
        install -m 0644 "$m" "$root/etc/ncm/init.d/${m##*/}"
    done
    # Static: the initramfs has only the libraries iperf3 and ethtool need.
    # (-Wno-format-truncation: its messages are cut to their buffers on
    # purpose; aarch64-linux-gnu-gcc inlines far enough to say so)
    "$GUEST_CC" -static -O2 -Wall -Wextra -Wno-unused-parameter -Wno-format-truncation \
        -I "$NCM_TOP/include" -o "$root/usr/bin/ncm-usbfs-stress" "$STRESS_SRC" ||
        die "could not build $STRESS_SRC with $GUEST_CC -static" \
            "install it and its libc: make deps (or scripts/setup/install-deps.sh $deps)"
    "$GUEST_CC" -static -O2 -Wall -Wextra -o "$root/usr/bin/ncm-ping" "$PING_SRC" ||
        die "could not build $PING_SRC with $GUEST_CC -static"
    printf 'root:x:0:0:root:/root:/bin/sh\n' > "$root/etc/passwd"
    printf 'root:x:0:\n' > "$root/etc/group"
    printf '127.0.0.1 localhost\n' > "$root/etc/hosts"

    # Shared libraries: follow DT_NEEDED through the extracted packages.
    libdirs="lib/$TRIPLET usr/lib/$TRIPLET lib64 lib usr/lib"
    # ext_path REL: REL inside $ext with symlinks resolved inside $ext
    # (libc6 ships absolute links such as /lib64/ld-linux-x86-64.so.2).
    ext_path() {
        local p=$1 t n=0
        while [ -L "$ext/$p" ] && [ $n -lt 20 ]; do
            t=$(readlink "$ext/$p")
            case $t in
            /*) p=${t#/} ;;
            *) p=$(dirname "$p")/$t ;;
            esac
            n=$((n + 1))
        done
        printf '%s\n' "$ext/$p"
    }
    find_lib() {
        local d
        for d in $libdirs; do
            if [ -e "$ext/$d/$1" ] || [ -L "$ext/$d/$1" ]; then
                echo "$d/$1"; return 0
            fi
        done
        return 1
    }
    queue="usr/bin/iperf3 sbin/ethtool"
    seen=" "
    while [ -n "$queue" ]; do
        set -- $queue
        f=$1; shift; queue="$*"
        src=$ext/$f
        [ -e "$src" ] || src=$root/$f
        interp=$(readelf -l "$src" 2>/dev/null |
            sed -n 's/.*Requesting program interpreter: \(.*\)\]/\1/p')
        if [ -n "$interp" ] && [ ! -e "$root$interp" ]; then
            mkdir -p "$root$(dirname "$interp")"
            cp "$(ext_path "${interp#/}")" "$root$interp" ||
                die "the program interpreter $interp is not in libc6"
        fi
        for lib in $(readelf -d "$src" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
            case $seen in *" $lib "*) continue ;; esac
            seen="$seen$lib "
            rel=$(find_lib "$lib") ||
                die "$f needs $lib, which none of $USER_PKGS provides" \
                    "add the package that ships $lib to USER_PKGS in $0"
            mkdir -p "$root/$(dirname "$rel")"
            cp "$(ext_path "$rel")" "$root/$rel"
            queue="$queue $rel"
        done
    done
    note "libraries:$(echo "$seen" | tr -s ' ' ' ')"

    : > "$root/etc/ncm/modules"
    if [ -n "$moddir" ]; then
        step "collecting kernel modules"
        # depmod over the whole kernel first so modprobe can list the deps.
        depmod -b "$kroot" "$kver"
        want=""
        for m in $MODULES $EXTRA_MODULES; do
            deps=$(modprobe -d "$kroot" -S "$kver" --show-depends "$m" 2>/dev/null) || {
                note "module $m: not in this kernel, skipped"; continue; }
            if ! grep -q '^insmod ' <<<"$deps"; then
                continue            # built in
            fi
            case " $EXTRA_MODULES " in *" $m "*) ;; *) echo "$m" >> "$root/etc/ncm/modules" ;; esac
            want="$want $(printf '%s\n' "$deps" | awk '$1 == "insmod" {print $2}')"
        done
        mroot=$root/lib/modules/$kver
        mkdir -p "$mroot"
        count=0
        for path in $(printf '%s\n' $want | sort -u); do
            rel=${path#"$moddir"/}
            mkdir -p "$mroot/$(dirname "$rel")"
            case $rel in
            *.ko.xz)  xz -dc "$path" > "$mroot/${rel%.xz}" ;;
            *.ko.zst) zstd -qdc "$path" > "$mroot/${rel%.zst}" ;;
            *.ko.gz)  gzip -dc "$path" > "$mroot/${rel%.gz}" ;;
            *)        cp "$path" "$mroot/$rel" ;;
            esac
            count=$((count + 1))
        done
        for f in modules.builtin modules.builtin.modinfo; do
            [ -e "$moddir/$f" ] && cp "$moddir/$f" "$mroot/$f"
        done
        [ -e "$moddir/modules.order" ] &&
            sed -E 's/\.ko\.(xz|zst|gz)$/.ko/' "$moddir/modules.order" > "$mroot/modules.order"
        depmod -b "$root" "$kver"
        note "$count module files; load list: $(tr '\n' ' ' < "$root/etc/ncm/modules")"
    else
        note "no modules: the kernel must have USB, xHCI/EHCI, usbnet, cdc_ncm built in"
    fi
    echo "$kver" > "$root/etc/ncm/kernel-version"

    step "packing initrd.img"
    (cd "$root" && find . -mindepth 1 | LC_ALL=C sort |
        cpio -o -H newc -R 0:0 --quiet) | gzip -6 > "$work/initrd.img"

    mkdir -p "$out"
    mv -f "$work/vmlinuz" "$out/vmlinuz"
    mv -f "$work/initrd.img" "$out/initrd.img"
    echo "$key" > "$out/inputs.sha256"
    rm -rf "$work"
    trap - EXIT
    step "guest image built ($(du -h "$out/initrd.img" | cut -f1) initrd)"
fi

note "kernel: $out/vmlinuz"
note "initrd: $out/initrd.img"
if [ "$PRINT_DIR" = 1 ]; then
    printf '%s\n' "$out" >&3
fi
