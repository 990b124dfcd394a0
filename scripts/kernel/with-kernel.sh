#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Run a harness command (make run, shell, repro-dropout, check-guest, the
# guest image) on the kernel the user names:
#
#   scripts/kernel/with-kernel.sh COMMAND [ARGS...]
#
#   KERNEL_SRC=/path/to/linux   build it first (scripts/kernel/build.sh:
#                               out of tree under build/kernel/, small
#                               config, ccache; KERNEL_BUILTIN=1 for =y
#                               drivers) and hand the result to the harness
#                               as KERNEL_IMAGE (+ KERNEL_MODULES)
#   KERNEL_PACKAGE=SPEC         a Debian kernel package (a linux-image .deb
#                               path or anything tests/guest/image.sh's
#                               KERNEL takes): the same as KERNEL=SPEC
#   neither                     COMMAND runs as it is (KERNEL, KERNEL_IMAGE)
#
# KERNEL is set to a label of the kernel built (make repro-dropout names
# its one column after it). A failed build exits 2 before COMMAND runs.
set -euo pipefail
. "$(dirname "$0")/../setup/common.sh"

[ $# -ge 1 ] || die "usage: scripts/kernel/with-kernel.sh COMMAND [ARGS...]"
if [ -n "${KERNEL_SRC:-}" ]; then
    envf=$(mktemp)
    trap 'rm -f "$envf"' EXIT
    bash "$NCM_TOP/scripts/kernel/build.sh" --print-env > "$envf" || exit 2
    KERNEL_IMAGE=$(sed -n 's/^KERNEL_IMAGE=//p' "$envf")
    KERNEL_MODULES=$(sed -n 's/^KERNEL_MODULES=//p' "$envf")
    d=$(sed -n 's/^KERNEL_BUILD_DIR=//p' "$envf")
    KERNEL=src-$(basename "$d")
    rm -f "$envf"
    trap - EXIT
    export KERNEL_IMAGE KERNEL_MODULES KERNEL
elif [ -n "${KERNEL_PACKAGE:-}" ]; then
    KERNEL=$KERNEL_PACKAGE
    export KERNEL
fi
exec "$@"
