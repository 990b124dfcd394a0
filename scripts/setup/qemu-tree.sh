# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck shell=bash
#
# Sourced by build-qemu.sh and make-series.sh (after common.sh): which
# patches/ variant fits a QEMU tree, how it is applied, and how the tree is
# configured.
#
# patches/NNNN-*.patch are the hunks to files QEMU owns, applied in NNNN
# order.  A hunk whose context differs between QEMU releases has one
# variant per release line instead, patches/<line>/NNNN-*.patch (line =
# major.minor: 10.0, 10.2).  For a tree of line L, each NNNN is taken from
# patches/L/, else patches/, else the other lines' directories, newest
# first: the first of those that applies cleanly (exact context, then with
# patch's default fuzz) wins.  So 10.0.x and 10.2.x use their own variants
# and another tree (10.1, upstream git) gets whichever fits.  A variant
# without hunks (no "+++ " line; its text says why) applies as nothing:
# a fix an older line needs and a newer one has already, e.g.
# patches/10.0/0019 and patches/10.2/0019.

NCM_PATCHES=$NCM_TOP/patches

# Our files, at their upstream paths; build-qemu.sh copies these directories
# over the tree.  NCM_OVERLAY_ONLY are not submitted upstream (make series):
# the compat header.
NCM_OVERLAY_DIRS="hw/usb include/hw/usb tests/qtest tests/unit tests/bench docs/system"
NCM_OVERLAY_ONLY="include/hw/usb/ncm-compat.h"

# overlay_files: every file of the overlay, relative to the repo, sorted
overlay_files() {
    local d
    for d in $NCM_OVERLAY_DIRS; do
        [ -d "$NCM_TOP/$d" ] && (cd "$NCM_TOP" && find "$d" -type f)
    done | LC_ALL=C sort -u
}

# qemu_line TREE: the release line of TREE ("10.2" for 10.2.2 or 10.2.50)
qemu_line() {
    local v
    v=$(cat "$1/VERSION")
    echo "${v%.*}"
}

# qemu_version_ge TREE MAJOR MINOR: true if TREE is MAJOR.MINOR or later
qemu_version_ge() {
    local major minor
    IFS=. read -r major minor _ <"$1/VERSION"
    [ "$major" -gt "$2" ] || { [ "$major" = "$2" ] && [ "$minor" -ge "$3" ]; }
}

# patch_names: every patch name (NNNN-*.patch), in application order
patch_names() {
    (cd "$NCM_PATCHES" && ls -- *.patch [0-9]*.[0-9]*/*.patch 2>/dev/null) |
        sed 's@.*/@@' | sort -u
}

# patch_candidates LINE NAME: the variants of NAME, preferred first
patch_candidates() {
    local line=$1 name=$2 d
    [ -f "$NCM_PATCHES/$line/$name" ] && echo "$NCM_PATCHES/$line/$name"
    [ -f "$NCM_PATCHES/$name" ] && echo "$NCM_PATCHES/$name"
    for d in $(cd "$NCM_PATCHES" && ls -d -- [0-9]*.[0-9]*/ 2>/dev/null | tr -d / |
               sort -t. -k1,1nr -k2,2nr); do
        [ "$d" = "$line" ] && continue
        [ -f "$NCM_PATCHES/$d/$name" ] && echo "$NCM_PATCHES/$d/$name"
    done
    return 0
}

# patch_touched: every file of the QEMU tree that some variant patches
patch_touched() {
    cat /dev/null "$NCM_PATCHES"/*.patch "$NCM_PATCHES"/[0-9]*.[0-9]*/*.patch \
        2>/dev/null |
        sed -n 's@^+++ b/\([^[:space:]]*\).*@\1@p' | sort -u
}

# patch_set_hash: changes whenever any variant changes
patch_set_hash() {
    (cd "$NCM_PATCHES" && ls -- *.patch [0-9]*.[0-9]*/*.patch 2>/dev/null |
        xargs cat /dev/null) | sha256sum | cut -c1-16
}

# apply_patch TREE NAME: apply the variant of NAME that fits TREE and print
# its path relative to the repo; on failure print why and return 1
apply_patch() {
    local tree=$1 name=$2 line p fuzz out first=
    line=$(qemu_line "$tree")
    local cands
    mapfile -t cands < <(patch_candidates "$line" "$name")
    [ "${#cands[@]}" -gt 0 ] || { echo "no patch named $name" >&2; return 1; }
    for fuzz in 0 2; do
        for p in "${cands[@]}"; do
            if ! grep -q '^+++ ' "$p"; then
                echo "${p#"$NCM_TOP"/} (nothing to apply)"
                return 0
            fi
            if patch -d "$tree" -p1 --forward --dry-run --fuzz=$fuzz -s \
                    <"$p" >/dev/null 2>&1; then
                patch -d "$tree" -p1 --forward --no-backup-if-mismatch \
                    --fuzz=$fuzz -r - -s <"$p" >/dev/null
                echo "${p#"$NCM_TOP"/}"
                return 0
            fi
        done
    done
    first=${cands[0]}
    out=$(patch -d "$tree" -p1 --forward --dry-run <"$first" 2>&1)
    echo "$out" >&2
    echo "none of these applies to QEMU $(cat "$tree/VERSION"):" \
         "${cands[*]#"$NCM_TOP"/} (the first one's hunks are shown above)" >&2
    return 1
}

# The softmmu targets one build directory is configured for: x86_64 and
# aarch64 together, so that everything they share (qapi, trace, util,
# block, migration, most of hw/; two thirds of qemu-system-aarch64's
# objects) is compiled once.  build-qemu.sh builds the binary of the ARCH
# asked for (common.sh's NCM_QEMU_TARGET).  The fuzzers' builds
# (scripts/check/fuzz-device.sh) set NCM_QEMU_TARGETS=x86_64.
NCM_QEMU_TARGETS=${NCM_QEMU_TARGETS:-x86_64 aarch64}

# The accelerators every build has: TCG everywhere, and KVM for the machines
# where it works (tests/guest/accel.sh decides, per boot, whether it does;
# qemu-system-aarch64 runs under TCG: KVM needs an arm64 host, which
# configure knows).  Part of qemu_configure_key, so a build directory
# configured before KVM was added is configured afresh once.
NCM_QEMU_ACCELS="--enable-tcg --enable-kvm"
case " $NCM_QEMU_TARGETS " in
*" $(uname -m | sed 's/^arm64$/aarch64/') "*) ;;
*) NCM_QEMU_ACCELS="--enable-tcg" ;;   # no target can use KVM here
esac

# virtio-9p (virtfs): virtme-ng (scripts/kernel/vng-ncm.sh) shares the
# host's root filesystem with its guest over it.  Builds with the default
# compiler only (the fuzzers' clang builds boot no guest); glibc has the
# xattr calls, so no package is needed.  Part of qemu_configure_key: a
# build directory configured before is configured afresh once.
NCM_QEMU_VIRTFS=""
if [ -z "${NCM_QEMU_CC:-}" ]; then
    NCM_QEMU_VIRTFS="--enable-virtfs --enable-attr"
fi

# The devices: QEMU's default set for each target, but for the targets
# that NCM_QEMU_DEVICES names a file of scripts/setup/devices/ for
# (TARGET-*.mak, space-separated; build-qemu.sh copies each into the tree
# as configs/devices/TARGET-softmmu/ncm-devices.mak): default
# aarch64-guest.mak, the virt board and the USB and network devices of the
# arm64 legs instead of every Arm board.  NCM_QEMU_DEFAULT_DEVICES=0
# (the fuzzers' x86_64-fuzz.mak) leaves out every device no file asks for.
NCM_QEMU_DEVICES=${NCM_QEMU_DEVICES-$NCM_TOP/scripts/setup/devices/aarch64-guest.mak}

# ncm_devices_target MAK: the target a devices file is for (its name's
# first word)
ncm_devices_target() {
    local base=${1##*/}
    echo "${base%%-*}"
}

# qemu_configure SRC OBJ LOG: configure NCM_QEMU_TARGETS in OBJ, as small
# as the device and its tests need.  Other builds of the same tree (the
# fuzzers, scripts/check/fuzz-device.sh) set, in the environment:
#   NCM_QEMU_CC, NCM_QEMU_CXX   compilers (default gcc, g++; ccache in front)
#   NCM_QEMU_CONFIGURE_EXTRA    more configure arguments, one per line
#   NCM_QEMU_TARGETS, NCM_QEMU_DEVICES, NCM_QEMU_DEFAULT_DEVICES (above)
qemu_configure() {
    local src=$1 obj=$2 log=$3
    local cc=${NCM_QEMU_CC:-gcc} cxx=${NCM_QEMU_CXX:-g++}
    local cc_args=() extra=() t targets="" mak
    if [ -n "${NCM_QEMU_CC:-}" ]; then
        cc_args=(--cc="$cc" --cxx="$cxx" --host-cc="$cc")
    fi
    if command -v ccache >/dev/null; then
        cc_args=(--cc="ccache $cc" --cxx="ccache $cxx" --host-cc="$cc")
    fi
    if [ -n "${NCM_QEMU_CONFIGURE_EXTRA:-}" ]; then
        mapfile -t extra <<<"$NCM_QEMU_CONFIGURE_EXTRA"
    fi
    for t in $NCM_QEMU_TARGETS; do
        targets+=${targets:+,}$t-softmmu
    done
    for mak in $NCM_QEMU_DEVICES; do
        extra+=("--with-devices-$(ncm_devices_target "$mak")=ncm-devices")
    done
    [ "${NCM_QEMU_DEFAULT_DEVICES:-1}" != 0 ] ||
        extra+=(--without-default-devices)
    mkdir -p "$obj"
    (cd "$obj" && "$src/configure" --python=/usr/bin/python3 \
        "${cc_args[@]}" --target-list="$targets" \
        --without-default-features --enable-slirp --enable-fdt=system \
        $NCM_QEMU_ACCELS $NCM_QEMU_VIRTFS --disable-docs --disable-install-blobs \
        --enable-trace-backends=log "${extra[@]}") >"$log" 2>&1
}

# qemu_obj_forget_moved OBJ: a build directory configured under another
# path (a removed git worktree whose build/ was a link to this one) names
# a meson that is gone, so ninja cannot regenerate it; remove it, to be
# configured afresh (ccache keeps the rebuild short)
qemu_obj_forget_moved() {
    local obj=$1 regen
    [ -f "$obj/build.ninja" ] || return 0
    regen=$(sed -n 's|^ *command = \([^ ]*/pyvenv/bin/meson\) --internal regenerate .*|\1|p' \
            "$obj/build.ninja" | head -n 1)
    if [ -n "$regen" ] && [ ! -x "$regen" ]; then
        note "$obj was configured as ${regen%/pyvenv/bin/meson}, which is gone: configuring it afresh"
        rm -rf "$obj"
    fi
}

# qemu_obj_ready SRC OBJ LOG: OBJ configured from SRC as qemu_configure
# does now; configured afresh when it was configured another way (its
# qemu_configure_key differs) or under a path that is gone.  Non-zero,
# with no build.ninja left, when configure failed (LOG says why).
qemu_obj_ready() {
    local src=$1 obj=$2 log=$3 key
    key=$(qemu_configure_key)
    if [ -f "$obj/build.ninja" ] &&
       [ "$(cat "$obj/.ncm-configure-key" 2>/dev/null)" != "$key" ]; then
        note "$obj was configured differently: configuring it afresh"
        rm -rf "$obj"
    fi
    qemu_obj_forget_moved "$obj"
    [ ! -f "$obj/build.ninja" ] || return 0
    step "configuring ${NCM_QEMU_TARGETS// /-softmmu, }-softmmu in $obj (about 30 s)"
    if ! qemu_configure "$src" "$obj" "$log"; then
        rm -f "$obj/build.ninja"
        return 1
    fi
    echo "$key" >"$obj/.ncm-configure-key"
}

# qemu_configure_key: what, besides the tree, decides how qemu_configure
# configures; build-qemu.sh configures again when it changes
qemu_configure_key() {
    local mak devices=()
    for mak in $NCM_QEMU_DEVICES; do
        devices+=("$(ncm_devices_target "$mak") $(sha256sum <"$mak" | cut -c1-16)")
    done
    printf '%s\n' "$NCM_QEMU_ACCELS" "${NCM_QEMU_CC:-}" "${NCM_QEMU_CXX:-}" \
        "${NCM_QEMU_CONFIGURE_EXTRA:-}" "$NCM_QEMU_TARGETS" \
        "$NCM_QEMU_VIRTFS" "${devices[@]}" \
        "default devices ${NCM_QEMU_DEFAULT_DEVICES:-1}" |
        sha256sum | cut -c1-16
}
