#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Copy a QEMU tree to build/qemu-src, lay our files over it at their upstream
# paths, apply patches/ (the variants that fit the tree's release, see
# scripts/setup/qemu-tree.sh), configure x86_64-softmmu once and build
# build/qemu/qemu-system-x86_64.  Re-running only copies files whose content
# changed, so ninja rebuilds incrementally.  QEMU_VERSION=10.2 builds in
# build/10.2/ instead (scripts/setup/common.sh).  The build directory is
# configured for x86_64 and aarch64 at once (qemu-tree.sh's
# NCM_QEMU_TARGETS); ARCH=arm64 builds qemu-system-aarch64 in it.
set -euo pipefail
. "$(dirname "$0")/common.sh"
. "$NCM_TOP/scripts/setup/qemu-tree.sh"

SRC_COPY=$NCM_BUILD/qemu-src
OBJ=$NCM_QEMU_OBJ

# One build at a time in this tree: helpers, make check and make run share it.
mkdir -p "$NCM_BUILD"
if [ -z "${NCM_BUILD_LOCKED:-}" ]; then
    export NCM_BUILD_LOCKED=1
    exec flock "$NCM_BUILD/.build-lock" bash "$0" "$@"
fi

bash "$NCM_TOP/scripts/setup/install-deps.sh" build
pristine=$(bash "$NCM_TOP/scripts/setup/fetch-qemu.sh")
note "QEMU source: $pristine ($(cat "$pristine/VERSION"))"

mkdir -p "$NCM_BUILD"
if [ ! -f "$SRC_COPY/.copied-from" ] ||
   [ "$(cat "$SRC_COPY/.copied-from")" != "$pristine" ]; then
    step "copying QEMU source to $SRC_COPY"
    # (both architectures' build directories: they are built from this copy)
    rm -rf "$SRC_COPY" "$NCM_BUILD/qemu"
    cp -a "$pristine" "$SRC_COPY.tmp"
    rm -rf "$SRC_COPY.tmp/.git"
    mv "$SRC_COPY.tmp" "$SRC_COPY"
    echo "$pristine" >"$SRC_COPY/.copied-from"
fi

# Patches: restore every file they touch from the pristine tree whenever the
# patch set or the tree changes, then apply them all; a hunk that fails is
# named.
patch_hash=$(patch_set_hash)
if [ "$(cat "$SRC_COPY/.patches" 2>/dev/null)" != "$patch_hash" ]; then
    step "applying patches/ for QEMU $(qemu_line "$pristine")"
    # what the previous patch set touched too, in case a patch went away
    for f in $(cat "$SRC_COPY/.patched-files" 2>/dev/null; patch_touched); do
        if [ -f "$pristine/$f" ]; then
            # not -p: a file a patch left must look new to ninja
            cp "$pristine/$f" "$SRC_COPY/$f"
        else
            rm -f "$SRC_COPY/$f"
        fi
    done
    rm -f "$SRC_COPY/.patches"
    patch_touched >"$SRC_COPY/.patched-files"
    for name in $(patch_names); do
        used=$(apply_patch "$SRC_COPY" "$name") ||
            die "patch $name does not apply to $(cat "$pristine/VERSION")" \
                "the failing hunk is shown above; refresh it against this tree" \
                "(a variant for this release goes in patches/$(qemu_line "$pristine")/)" \
                "or try a tested tree: QEMU_VERSION=10.0 or 10.2 without QEMU_SRC"
        note "applied $used"
    done
    echo "$patch_hash" >"$SRC_COPY/.patches"
fi

step "laying the overlay over the tree"
changed=0
for d in $NCM_OVERLAY_DIRS; do
    [ -d "$NCM_TOP/$d" ] || continue
    while IFS= read -r -d '' f; do
        rel=${f#"$NCM_TOP"/}
        dst=$SRC_COPY/$rel
        if ! cmp -s "$f" "$dst"; then
            mkdir -p "$(dirname "$dst")"
            cp "$f" "$dst"
            changed=$((changed + 1))
        fi
    done < <(find "$NCM_TOP/$d" -type f -print0)
done
note "$changed overlay file(s) updated"

# NCM_QEMU_DEVICES (files of scripts/setup/devices/): the device sets that
# replace QEMU's default ones (qemu_configure)
for mak in $NCM_QEMU_DEVICES; do
    [ -f "$mak" ] ||
        die "NCM_QEMU_DEVICES names $mak, which is not a file" \
            "name files of scripts/setup/devices/, or set it empty"
    dst=$SRC_COPY/configs/devices/$(ncm_devices_target "$mak")-softmmu/ncm-devices.mak
    cmp -s "$mak" "$dst" || cp "$mak" "$dst"
done

# A build directory configured another way (NCM_QEMU_CC and friends, see
# qemu_configure) or under a path that is gone is configured afresh.
CONF_LOG=$NCM_BUILD/configure.log
qemu_obj_ready "$SRC_COPY" "$OBJ" "$CONF_LOG" || {
    tail -n 30 "$CONF_LOG" >&2
    die "configure failed (full log: $CONF_LOG)" \
        "missing packages: run scripts/setup/install-deps.sh build"
}

# Let ccache hit across clones and build directories.
export CCACHE_BASEDIR=$NCM_BUILD CCACHE_NOHASHDIR=1

targets=${QEMU_TARGETS:-qemu-system-$NCM_QEMU_TARGET}
step "building $targets (cold: ~8 min; incremental: seconds)"
ninja -C "$OBJ" $targets 2>&1 | awk '
    /^\[[0-9]+\/[0-9]+\]/ { n++; if (n % 100 == 0) { print "    " $1; fflush() } next }
    { print; fflush() }' ||
    die "build of $targets failed (first error above)" \
        "re-run 'ninja -C $OBJ $targets' to see it again"
step "built $targets in $OBJ"
