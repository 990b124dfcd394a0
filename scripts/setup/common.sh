# SPDX-License-Identifier: GPL-2.0-or-later
#
# Shared helpers for the usb-ncm-dl scripts: step announcements with elapsed
# time, and failures that tell the reader what to do next.

NCM_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# The QEMU release line to build against (scripts/setup/fetch-qemu.sh): 10.0, the
# default, or 10.2.  Each line has its own build directory, so switching
# never throws away the other's build: build/ for 10.0, build/10.2/ for 10.2.
QEMU_VERSION=${QEMU_VERSION:-10.0}
export QEMU_VERSION
if [ -z "${NCM_BUILD:-}" ]; then
    case $QEMU_VERSION in
    10.0) NCM_BUILD=$NCM_TOP/build ;;
    *) NCM_BUILD=$NCM_TOP/build/$QEMU_VERSION ;;
    esac
    # SANITIZE=1: QEMU with ASan and UBSan in its own directory
    # (build/sanitize/, build/10.2/sanitize/); scripts/setup/sanitize.sh
    [ "${SANITIZE:-0}" = 0 ] || NCM_BUILD=$NCM_BUILD/sanitize
fi
# The other line and its qemu-system-x86_64, for the runs that migrate
# from one version to the other (10.2 beside 10.0, 10.0 beside 10.2)
if [ "$QEMU_VERSION" = 10.0 ]; then
    NCM_OTHER_VERSION=10.2
    NCM_OTHER_QEMU=$NCM_TOP/build/10.2/qemu/qemu-system-x86_64
else
    NCM_OTHER_VERSION=10.0
    NCM_OTHER_QEMU=$NCM_TOP/build/qemu/qemu-system-x86_64
fi
NCM_CACHE=${NCM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/usb-ncm-dl}
NCM_T0=${NCM_T0:-$(date +%s)}
export NCM_T0
# shellcheck source=scripts/setup/sanitize.sh
. "$NCM_TOP/scripts/setup/sanitize.sh"

step() {
    local now
    now=$(date +%s)
    printf '==> [%4ds] %s\n' "$((now - NCM_T0))" "$*"
}

note() {
    printf '    %s\n' "$*"
}

die() {
    printf 'ERROR: %s\n' "$1" >&2
    shift
    for line in "$@"; do
        printf '  -> %s\n' "$line" >&2
    done
    exit 1
}

# libfuzzer_stat LOG NAME: the last "stat::NAME:" value that libFuzzer's
# -print_final_stats=1 wrote into LOG (empty if none)
libfuzzer_stat() {
    sed -n "s/^stat::$2: *//p" "$1" | tail -n 1
}

# ARCH: the guest architecture, x86_64 (the default: q35, KVM where it
# works) or arm64 (-M virt under TCG, Debian's arm64 kernel and userland).
# arm64's QEMU, qemu-system-aarch64, is built in the same build directory
# as the x86 one (configured for both targets, scripts/setup/qemu-tree.sh):
# asking for it builds that binary only, the code both share once.
# NCM_ARCH is the normalised name (not exported: each
# script derives it from ARCH); ARCH is also what a kernel build reads, so
# the spellings of both worlds are taken.
case ${ARCH:-x86_64} in
x86_64|x86|amd64|"") NCM_ARCH=x86_64 ;;
arm64|aarch64) NCM_ARCH=arm64 ;;
*) die "ARCH=$ARCH: unknown guest architecture" "use ARCH=x86_64 (default) or ARCH=arm64" ;;
esac
# the QEMU target (softmmu) of that architecture, and the build directory
case $NCM_ARCH in
arm64) NCM_QEMU_TARGET=aarch64 ;;
*) NCM_QEMU_TARGET=x86_64 ;;
esac
NCM_QEMU_OBJ=$NCM_BUILD/qemu

as_root() {
    if [ "$(id -u)" = 0 ]; then
        "$@"
    elif command -v sudo >/dev/null; then
        sudo "$@"
    else
        die "need root for: $*" "run as root or install sudo"
    fi
}

# setsid bash -c "$SESSION_KEEPS_NICE" bash CMD...: CMD in a session of its
# own (a process group that a stop signals whole) whose scheduler
# autogroup takes the caller's nice value.  With autogroups on (the
# kernel's default) nice counts only inside a session: a fuzz campaign at
# nice 19 in sessions of its own took 70 % of both cores from a build
# started in another shell (2026-12-06).
# shellcheck disable=SC2016
SESSION_KEEPS_NICE='echo "$(nice)" >/proc/self/autogroup 2>/dev/null; exec "$@"'
