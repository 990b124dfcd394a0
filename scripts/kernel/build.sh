#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Build a guest kernel from a Linux source tree for the test guest: out of
# tree (O=build/kernel/<name>-<hash>-<arch>[-builtin]), the source tree
# left as it was, with a small configuration made for the harness
# (`make allnoconfig` + scripts/kernel/config/*.config), through ccache.
#
#   scripts/kernel/build.sh [--print-env | --config-only]
#
# Environment:
#   KERNEL_SRC=/path/to/linux    the tree (any kernel from 5.10 on)
#   KERNEL_BUILTIN=1             usbnet, cdc_ether and cdc_ncm built in (=y)
#                                and no module support; default: modules
#                                (=m), installed into the guest's initramfs
#   ARCH=arm64                   an arm64 Image (cross-compiled with
#                                aarch64-linux-gnu- on other hosts)
#   KERNEL_CONFIG_EXTRA=FILE     one more fragment (yours), applied last
#   KERNEL_JOBS=N                make -j (default: the number of CPUs)
#
# --config-only: make the configuration in a scratch directory, report
#   what the tree lacks, build nothing (exit 3 when an option was not
#   taken; the smoke check in make check).
# --print-env: progress on stderr, and on stdout only the lines
#   KERNEL_IMAGE=...  KERNEL_MODULES=...  KERNEL_BUILD_DIR=...
# which the harness takes (tests/guest/image.sh; scripts/kernel/with-kernel.sh).
#
# The configuration is made again only when the fragments, the tree or
# the mode change; then every option of the fragments that .config does not
# carry is reported as a warning ("config: CONFIG_X=y wanted, tree has
# ..."), not an error: old and new trees lack different ones.  Timestamp,
# user, host and build number are fixed (KBUILD_BUILD_*), so that a rebuild
# of the same source hits ccache and an unchanged tree relinks nothing.
# Exit status: 0 built; 2 the build failed (the log's tail is printed).
set -euo pipefail
shopt -s inherit_errexit
. "$(dirname "$0")/../setup/common.sh"

PRINT_ENV=0
CONFIG_ONLY=0
case ${1:-} in
--print-env) PRINT_ENV=1 ;;
--config-only) CONFIG_ONLY=1 ;;
"") ;;
-h|--help) sed -n '3,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
*) die "unknown argument '$1'" "usage: scripts/kernel/build.sh [--print-env]" ;;
esac
[ "$PRINT_ENV" = 0 ] || exec 3>&1 1>&2

SRC=${KERNEL_SRC:?KERNEL_SRC=/path/to/linux is required}
[ -f "$SRC/Makefile" ] && [ -d "$SRC/drivers/net/usb" ] ||
    die "KERNEL_SRC=$SRC is not a Linux source tree" \
        "unpack one: scripts/kernel/fetch-source.sh (Debian's linux-source-6.1)"
SRC=$(cd "$SRC" && pwd -P)
[ ! -f "$SRC/.config" ] && [ ! -d "$SRC/include/config" ] ||
    die "$SRC has been configured in place (.config or include/config)" \
        "kbuild refuses O= builds then: run 'make mrproper' in it"
BUILTIN=${KERNEL_BUILTIN:-0}
JOBS=${KERNEL_JOBS:-$(nproc)}
CFG=$NCM_TOP/scripts/kernel/config

case $NCM_ARCH in
arm64) KARCH=arm64 TARGET=Image IMAGE=arch/arm64/boot/Image
       [ "$(uname -m)" = aarch64 ] || CROSS=aarch64-linux-gnu- ;;
*) KARCH=x86_64 TARGET=bzImage IMAGE=arch/x86/boot/bzImage ;;
esac
CROSS=${CROSS:-}
command -v "${CROSS}gcc" >/dev/null ||
    die "${CROSS}gcc is missing" "run: make deps (scripts/setup/install-deps.sh guest${CROSS:+ arm64})"
for t in flex bison bc make; do
    command -v "$t" >/dev/null || die "'$t' is missing (kernel build)" \
        "apt-get install flex bison bc libelf-dev libssl-dev"
done
CC="${CROSS}gcc"
command -v ccache >/dev/null && CC="ccache ${CROSS}gcc"
HOSTCC=gcc
command -v ccache >/dev/null && HOSTCC="ccache gcc"

# the build directory: the tree's name, a hash of its path, the arch, the mode
mode=mod
[ "$BUILTIN" = 1 ] && mode=builtin
O=$NCM_BUILD/kernel/$(basename "$SRC")-$(printf '%s' "$SRC" | sha256sum | cut -c1-6)-$KARCH-$mode
if [ "$CONFIG_ONLY" = 1 ]; then
    mkdir -p "$NCM_BUILD/kernel"
    O=$(mktemp -d "$NCM_BUILD/kernel/.config-check.XXXXXX")
    trap 'rm -rf "$O"' EXIT
fi
mkdir -p "$O"
LOG=$O/build.log

export KBUILD_BUILD_TIMESTAMP="2024-01-01 00:00:00 UTC"
export KBUILD_BUILD_USER=ncm KBUILD_BUILD_HOST=usb-ncm-dl KBUILD_BUILD_VERSION=1
# an empty LOCALVERSION also keeps setlocalversion from adding its "+"
LOCALVERSION=-ncm
[ "$BUILTIN" = 1 ] && LOCALVERSION=-ncm-builtin
kmake() {
    nice -n 19 make -C "$SRC" O="$O" ARCH="$KARCH" ${CROSS:+CROSS_COMPILE="$CROSS"} \
        CC="$CC" HOSTCC="$HOSTCC" LOCALVERSION="$LOCALVERSION" "$@"
}

# the fragments, in order
frags=("$CFG/common.config" "$CFG/$KARCH.config")
[ "$BUILTIN" = 1 ] || frags+=("$CFG/modules.config")
[ -n "${KERNEL_CONFIG_EXTRA:-}" ] && frags+=("$KERNEL_CONFIG_EXTRA")
want=$O/fragment.config
cfgkey=$( { cat "${frags[@]}"; echo "$SRC $KARCH $mode"; sha256sum < "$SRC/Makefile"; } |
    sha256sum | cut -c1-16)

if [ ! -f "$O/.config" ] || [ "$(cat "$O/.config-key" 2>/dev/null)" != "$cfgkey" ]; then
    step "configuring $(basename "$SRC") for $KARCH ($mode): allnoconfig + ${frags[*]##*/}"
    # later fragments win: keep the last line of each option
    cat "${frags[@]}" | grep -E '^(CONFIG_[A-Za-z0-9_]+=|# CONFIG_[A-Za-z0-9_]+ is not set)' |
        tac | awk '{ k = $1 ~ /^#/ ? $2 : $1; sub(/=.*/, "", k) } !seen[k]++' | tac > "$want"
    kmake KCONFIG_ALLCONFIG="$want" allnoconfig > "$LOG" 2>&1 ||
        { tail -n 30 "$LOG"; die "allnoconfig failed" "see $LOG"; }
    # a second pass for options that only became visible in the first
    cat "$want" >> "$O/.config"
    kmake olddefconfig >> "$LOG" 2>&1 ||
        { tail -n 30 "$LOG"; die "olddefconfig failed" "see $LOG"; }
    # what the tree did not take
    missing=0
    while IFS= read -r line; do
        case $line in
        "# CONFIG_"*) opt=${line#"# "}; opt=${opt%% *}; val=n ;;
        *) opt=${line%%=*}; val=${line#*=} ;;
        esac
        have=$(grep -E "^$opt=" "$O/.config" | cut -d= -f2- || true)
        [ -n "$have" ] || have=n
        [ "$have" = "$val" ] && continue
        if grep -rqsx --include='Kconfig*' "config ${opt#CONFIG_}" "$SRC"; then
            why="has $have (a dependency is not met)"
        else
            why="has no such option"
        fi
        note "warning: config: $opt=$val wanted, the tree $why"
        missing=$((missing + 1))
    done < "$want"
    note "config: $(wc -l < "$want") options asked, $missing not taken (warnings above)"
    echo "$cfgkey" > "$O/.config-key"
fi
if [ "$CONFIG_ONLY" = 1 ]; then
    [ "$missing" = 0 ] || exit 3
    exit 0
fi

targets=("$TARGET")
[ "$BUILTIN" = 1 ] || targets+=(modules)
step "building $(basename "$SRC") $TARGET${BUILTIN:+} ($mode, $JOBS jobs, log: ${LOG#"$NCM_TOP"/})"
t0=$(date +%s)
if ! kmake -j"$JOBS" "${targets[@]}" >> "$LOG" 2>&1; then
    grep -a -E 'error|Error' "$LOG" | tail -n 15 >&2
    printf 'ERROR: the kernel build failed (see %s)\n' "$LOG" >&2
    exit 2
fi
t1=$(date +%s)
kver=$(cat "$O/include/config/kernel.release")
echo "$((t1 - t0))" > "$O/.build-seconds"
MODDIR=""
if [ "$BUILTIN" != 1 ]; then
    rm -rf "$O/modroot"
    kmake INSTALL_MOD_PATH="$O/modroot" INSTALL_MOD_STRIP=1 DEPMOD=true \
        modules_install >> "$LOG" 2>&1 ||
        { tail -n 20 "$LOG" >&2; printf 'ERROR: modules_install failed\n' >&2; exit 2; }
    MODDIR=$O/modroot/lib/modules/$kver
    rm -f "$MODDIR/build" "$MODDIR/source"
fi
step "built $kver in $((t1 - t0))s: ${O#"$NCM_TOP"/}/$IMAGE"
if [ "$PRINT_ENV" = 1 ]; then
    printf 'KERNEL_IMAGE=%s\nKERNEL_MODULES=%s\nKERNEL_BUILD_DIR=%s\nKERNEL_BUILD_SECONDS=%s\n' \
        "$O/$IMAGE" "$MODDIR" "$O" "$((t1 - t0))" >&3
fi
