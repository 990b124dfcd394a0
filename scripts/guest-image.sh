#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Build (once, then reuse) the test guest: a Debian kernel plus a busybox
# initramfs with iperf3, ethtool, the USB/virtio network modules and our
# own usbfs stress program (tests/guest/ncm-usbfs-stress.c, built static
# here with the host's gcc).
#
#   scripts/guest-image.sh [--print-dir]
#
# Output: $NCM_CACHE/guest/<kernel-version>/{vmlinuz,initrd.img}
# With --print-dir all progress goes to stderr and the only thing on stdout
# is that directory (for other scripts: dir=$(guest-image.sh --print-dir)).
#
# Inputs (environment):
#   KERNEL=linux-image-amd64         default: bookworm's current 6.1 kernel
#   KERNEL=linux-image-amd64/bookworm-backports   any apt package spec
#   KERNEL=linux-image-6.1.0-57-amd64=6.1.192-3   ... with a version
#   KERNEL=/path/to/linux-image-*.deb             a .deb you built or fetched
#   KERNEL_IMAGE=/path/to/bzImage    your own kernel; drivers must be built in
#       (=y) unless KERNEL_MODULES=/path/lib/modules/<version> is given too
#       (what `make modules_install INSTALL_MOD_PATH=DIR` leaves in DIR).
#
# Idempotent: nothing is rebuilt while the .debs, tests/guest/init.sh,
# tests/guest/ncm-usbfs-stress.c, gcc and this script are unchanged.
# Downloads go to $NCM_CACHE/debs.
set -euo pipefail
shopt -s inherit_errexit
. "$(dirname "$0")/common.sh"

PRINT_DIR=0
case ${1:-} in
--print-dir) PRINT_DIR=1 ;;
"") ;;
-h|--help) sed -n '3,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
*) die "unknown argument '$1'" "usage: scripts/guest-image.sh [--print-dir]" ;;
esac
if [ "$PRINT_DIR" = 1 ]; then
    exec 3>&1 1>&2
fi

KERNEL=${KERNEL:-linux-image-amd64}
KERNEL_IMAGE=${KERNEL_IMAGE:-}
KERNEL_MODULES=${KERNEL_MODULES:-}
INIT_SRC=$NCM_TOP/tests/guest/init.sh
STRESS_SRC=$NCM_TOP/tests/guest/ncm-usbfs-stress.c
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
bash "$NCM_TOP/scripts/install-deps.sh" guest >&2

for t in apt-get dpkg-deb depmod modprobe cpio gzip readelf flock sha256sum gcc; do
    command -v "$t" >/dev/null ||
        die "'$t' is missing" "run: make deps (or scripts/install-deps.sh guest)"
done

mkdir -p "$DEBS" "$GUESTS"
exec 9>"$GUESTS/.lock"
flock 9

apt_opts=()
[ "$(id -u)" = 0 ] && apt_opts=(-o APT::Sandbox::User=root)

# deb_file SPEC: the cache path of the .deb apt would fetch for SPEC
# (downloading it if missing). SPEC is name, name=version or name/release.
# Resolutions are remembered until the apt lists change (apt is slow).
LISTS_ID=$(stat -c '%n %Y %s' /var/lib/apt/lists/*Packages* 2>/dev/null |
    sha256sum | cut -c1-16)
RESOLVED=$DEBS/.resolved-$LISTS_ID
deb_file() {
    local spec=$1 uri name=""
    [ -f "$RESOLVED" ] && name=$(awk -v s="$spec" '$1 == s { print $2 }' "$RESOLVED")
    if [ -n "$name" ] && [ -s "$DEBS/$name" ]; then
        printf '%s\n' "$DEBS/$name"
        return
    fi
    uri=$(apt-get download --print-uris "${apt_opts[@]}" "$spec" 2>/dev/null |
        awk 'NR == 1') || true
    [ -n "$uri" ] ||
        die "apt does not know the package '$spec'" \
            "run 'apt-get update' (as root) so the package lists exist" \
            "or check the name with: apt-cache policy '${spec%%[=/]*}'"
    name=$(printf '%s' "$uri" | awk '{print $2}')
    if [ ! -s "$DEBS/$name" ]; then
        note "downloading $spec" >&2
        (cd "$DEBS" && apt-get download -q "${apt_opts[@]}" "$spec" >/dev/null) ||
            die "apt-get download $spec failed" \
                "check that deb.debian.org is reachable; maybe run 'apt-get update'"
    fi
    [ -s "$DEBS/$name" ] || die "apt-get download did not leave $DEBS/$name" \
        "remove $DEBS and retry"
    local r
    for r in "$DEBS"/.resolved-*; do
        [ "$r" = "$RESOLVED" ] || rm -f "$r"
    done
    printf '%s %s\n' "$spec" "$name" >> "$RESOLVED"
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
             END { print v }')
    [ -n "$cache" ] && printf '%s\n' "$v" > "$cache"
    printf '%s\n' "$v"
}
has_kernel() { [ -n "$(deb_kver "$1")" ]; }

# resolve_kernel_deb SPEC: follow metapackages (linux-image-amd64 ->
# linux-image-6.1.0-NN-amd64) to the .deb that holds a vmlinuz.
resolve_kernel_deb() {
    local spec=$1 deb dep depth=0
    while :; do
        deb=$(deb_file "$spec")
        has_kernel "$deb" && { printf '%s\n' "$deb"; return; }
        depth=$((depth + 1))
        [ $depth -le 3 ] || die "could not resolve '$KERNEL' to a kernel image"
        dep=$(dpkg-deb -f "$deb" Depends | tr ',' '\n' |
            grep -m1 -oE 'linux-image-[^ |]+( \(= [^)]+\))?' || true)
        [ -n "$dep" ] || die "'$spec' is neither a kernel nor a kernel metapackage" \
            "use KERNEL=linux-image-amd64 or KERNEL=/path/to/linux-image-*.deb"
        case $dep in
        *"(= "*) spec="${dep%% *}=$(printf '%s' "$dep" | sed 's/.*(= \(.*\))/\1/')" ;;
        *) spec=$dep ;;
        esac
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

step "resolving guest inputs"
[ "$(dpkg --print-architecture)" = amd64 ] ||
    die "the guest packages are fetched for this machine's architecture" \
        "run on an amd64 Debian host"
user_debs=()
for p in $USER_PKGS; do
    d=$(deb_file "$p")
    user_debs+=("$d")
done

kernel_deb=""
if [ -n "$KERNEL_IMAGE" ]; then
    [ -r "$KERNEL_IMAGE" ] || die "KERNEL_IMAGE=$KERNEL_IMAGE is not readable" \
        "point it at arch/x86/boot/bzImage of your kernel build"
    kver=$(bzimage_version "$KERNEL_IMAGE") ||
        die "$KERNEL_IMAGE does not look like a bzImage" \
            "use arch/x86/boot/bzImage, not vmlinux"
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
        kinput="deb $(sha256sum < "$kernel_deb")"
        ;;
    *)
        kernel_deb=$(resolve_kernel_deb "$KERNEL")
        kinput="deb $(basename "$kernel_deb")"
        ;;
    esac
    kver=$(deb_kver "$kernel_deb")
    [ -n "$kver" ] || die "could not find the kernel version in $kernel_deb"
    note "kernel: $(basename "$kernel_deb") ($kver)"
fi

out=$GUESTS/$kver
key=$( {
    echo "$kinput"
    for d in "${user_debs[@]}"; do basename "$d"; done
    echo "$MODULES / $EXTRA_MODULES"
    sha256sum < "$INIT_SRC"
    sha256sum < "$STRESS_SRC"
    gcc --version | head -n1
    sha256sum < "$0"
} | sha256sum | awk '{print $1}')

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
        cp "$kroot/boot/vmlinuz-$kver" "$work/vmlinuz"
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
    mkdir -p "$root/lib/x86_64-linux-gnu" "$root/usr/lib/x86_64-linux-gnu"
    cp "$ext/bin/busybox" "$root/bin/busybox"
    for a in $("$root/bin/busybox" --list); do
        [ "$a" = busybox ] || [ "$a" = init ] || [ "$a" = linuxrc ] ||
            ln -sf busybox "$root/bin/$a"
    done
    cp "$ext/usr/bin/iperf3" "$root/usr/bin/iperf3"
    cp "$ext/sbin/ethtool" "$root/usr/sbin/ethtool"
    install -m 0755 "$INIT_SRC" "$root/init"
    # Static: the initramfs has only the libraries iperf3 and ethtool need.
    gcc -static -O2 -Wall -Wextra -Wno-unused-parameter \
        -o "$root/usr/bin/ncm-usbfs-stress" "$STRESS_SRC" ||
        die "could not build $STRESS_SRC with gcc -static" \
            "install gcc and libc6-dev: make deps (or scripts/install-deps.sh guest)"
    printf 'root:x:0:0:root:/root:/bin/sh\n' > "$root/etc/passwd"
    printf 'root:x:0:\n' > "$root/etc/group"
    printf '127.0.0.1 localhost\n' > "$root/etc/hosts"

    # Shared libraries: follow DT_NEEDED through the extracted packages.
    libdirs="lib/x86_64-linux-gnu usr/lib/x86_64-linux-gnu lib64 lib usr/lib"
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
            if ! printf '%s\n' "$deps" | grep -q '^insmod '; then
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
