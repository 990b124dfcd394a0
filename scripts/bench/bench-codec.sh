#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Build tests/bench/bench-ncm-ntb.c in QEMU's tree (patches/0037 lists it
# in tests/bench/meson.build, built on demand like atomic_add-bench; QEMU's
# build is -O2) and run it: parse and build throughput of 64 KiB NTB16s
# next to memcpy.  Prints numbers only; nothing here passes or fails on
# speed.

set -euo pipefail
# shellcheck source=scripts/setup/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../setup/common.sh"

bash "$NCM_TOP/scripts/setup/build-qemu.sh" ||
    die "QEMU's tree did not build" "fix it, then rerun: bash scripts/bench/bench-codec.sh"
dir=$NCM_QEMU_OBJ/tests/bench
log=$NCM_BUILD/bench-codec.log
step "building bench-ncm-ntb in ${dir#"$NCM_TOP"/}"
if ! ninja -C "$NCM_QEMU_OBJ" tests/bench/bench-ncm-ntb >"$log" 2>&1; then
    tail -n 30 "$log" | sed 's/^/    | /'
    die "benchmark build failed (full log: $log)" \
        "fix the error above and rerun: bash scripts/bench/bench-codec.sh"
fi

step "running bench-ncm-ntb (about 3 s)"
"$dir/bench-ncm-ntb" ||
    die "bench-ncm-ntb failed" \
        "it checks its own NTBs: run $dir/bench-ncm-ntb and read its message"
step "benchmark done"
