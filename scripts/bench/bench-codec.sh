#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Build the standalone NTB codec project optimised (buildtype=release at
# -O2) in build/standalone-release and run tests/bench/bench-ncm-ntb.c:
# parse and build throughput of 64 KiB NTB16s next to memcpy.  Prints
# numbers only; nothing here passes or fails on speed.

set -euo pipefail
# shellcheck source=scripts/setup/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../setup/common.sh"

command -v meson >/dev/null ||
    die "meson not found" \
        "install it: bash scripts/setup/install-deps.sh (or apt-get install meson)"

dir=$NCM_BUILD/standalone-release
log=$dir.log
opts=(-Dbuildtype=release -Doptimization=2)
mkdir -p "$NCM_BUILD"

step "building bench-ncm-ntb in ${dir#"$NCM_TOP"/}"
if [ -f "$dir/build.ninja" ]; then
    setup=(meson setup --reconfigure "$dir" "$NCM_TOP" "${opts[@]}")
else
    setup=(meson setup "$dir" "$NCM_TOP" "${opts[@]}")
fi
if ! "${setup[@]}" >"$log" 2>&1 ||
    ! ninja -C "$dir" bench-ncm-ntb >>"$log" 2>&1; then
    tail -n 30 "$log" | sed 's/^/    | /'
    die "benchmark build failed (full log: $log)" \
        "fix the error above and rerun: bash scripts/bench/bench-codec.sh"
fi

step "running bench-ncm-ntb (about 3 s)"
"$dir/bench-ncm-ntb" ||
    die "bench-ncm-ntb failed" \
        "it checks its own NTBs: run $dir/bench-ncm-ntb and read its message"
step "benchmark done"
