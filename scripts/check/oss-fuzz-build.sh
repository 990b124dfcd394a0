#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The fuzz targets as OSS-Fuzz builds them: QEMU's own
# scripts/oss-fuzz/build.sh (with patches/0034, which links the
# usb-ncm-dl structured targets as well as the generic-fuzz
# configurations) run in a copy of the patched tree with clang-14 and
# OSS-Fuzz's AddressSanitizer flags, OUT=build/oss-fuzz/out; then every
# usb-ncm-dl executable it left there runs OSS_FUZZ_RUNS inputs (500)
# from the committed seeds, started as OSS-Fuzz starts it (by its name,
# no arguments but the corpus).
#
#   scripts/check/oss-fuzz-build.sh          (make fuzz-oss)
#
# One PASS/FAIL line per executable; the build log is
# build/oss-fuzz/build.log.  The Debian source has no firmware blobs, so
# the machines' BIOS comes from the seabios package here (the fuzz
# targets add -L for it); upstream's tree installs its own into $OUT.
set -uo pipefail
# shellcheck source=scripts/setup/common.sh
. "$(dirname "$0")/../setup/common.sh"

DIR=$NCM_BUILD/oss-fuzz
RUNS=${OSS_FUZZ_RUNS:-500}
mkdir -p "$DIR"
rc=0

bash "$NCM_TOP/scripts/setup/install-deps.sh" fuzz >&2 ||
    die "the fuzzer toolchain is missing" "bash scripts/setup/install-deps.sh fuzz"
# the patched tree of this checkout (build-qemu.sh lays the overlay and
# applies patches/; qemu-system-x86_64 is up to date after it)
bash "$NCM_TOP/scripts/setup/build-qemu.sh" >"$DIR/tree.log" 2>&1 ||
    die "the patched QEMU tree did not build" "see $DIR/tree.log"
step "copying the patched tree to ${DIR#"$NCM_TOP"/}/src"
rm -rf "$DIR/src"
cp -a "$NCM_BUILD/qemu-src" "$DIR/src"
rm -rf "$DIR/src/build-oss-fuzz"
# build.sh installs the firmware blobs, which the Debian source strips:
# the ones Debian packages (seabios, qemu-system-data, ipxe-qemu) are
# linked in, the others (other targets' firmware) are left empty
blobs=$(sed -n "/^blobs = \[/,/^\]/p" "$DIR/src/pc-bios/meson.build" |
        grep -o "'[^' ]*'" | tr -d "'"
        grep -o "'[A-Za-z0-9_,.-]*\.dts'" "$DIR/src/pc-bios/meson.build" |
        tr -d "'" | sed 's/\.dts$/.dtb/')
for b in $blobs; do
    [ -e "$DIR/src/pc-bios/$b" ] && continue
    for d in /usr/share/seabios /usr/share/qemu /usr/lib/ipxe/qemu; do
        if [ -e "$d/$b" ]; then
            ln -s "$d/$b" "$DIR/src/pc-bios/$b"
            break
        fi
    done
    [ -e "$DIR/src/pc-bios/$b" ] || : >"$DIR/src/pc-bios/$b"
done

step "QEMU's scripts/oss-fuzz/build.sh (cold: 20-40 min on 2 cores; log: ${DIR#"$NCM_TOP"/}/build.log)"
rm -rf "$DIR/out"
mkdir -p "$DIR/out"
t0=$SECONDS
# (configure takes python3 from PATH: the system's, which has meson)
if (cd "$DIR/src" && export PATH="/usr/bin:$PATH" &&
    CC="ccache clang-14" CXX="ccache clang++-14" \
    CFLAGS="-fsanitize=address -fsanitize-address-use-after-scope" \
    CXXFLAGS="-fsanitize=address -fsanitize-address-use-after-scope" \
    OUT=$DIR/out bash scripts/oss-fuzz/build.sh) >"$DIR/build.log" 2>&1; then
    echo "PASS: oss-fuzz/build ($((SECONDS - t0)) s)"
else
    echo "FAIL: oss-fuzz/build (scripts/oss-fuzz/build.sh failed; log: $DIR/build.log)"
    tail -n 15 "$DIR/build.log" | sed 's/^/    | /'
    exit 1
fi

mapfile -t exes < <(find "$DIR/out" -maxdepth 1 -name 'qemu-fuzz-i386-target-*usb-ncm-dl*' | sort)
note "${#exes[@]} usb-ncm-dl executables in ${DIR#"$NCM_TOP"/}/out"
expected=(usb-ncm-dl-fuzz usb-ncm-dl-migration-fuzz usb-ncm-dl-ehci-fuzz
          usb-ncm-dl-ohci-fuzz usb-ncm-dl-uhci-fuzz
          generic-fuzz-usb-ncm-dl-uhci generic-fuzz-usb-ncm-dl-ohci
          generic-fuzz-usb-ncm-dl-ehci generic-fuzz-usb-ncm-dl-xhci)
for t in "${expected[@]}"; do
    exe=$DIR/out/qemu-fuzz-i386-target-$t
    if [ ! -x "$exe" ]; then
        echo "FAIL: oss-fuzz/$t (build.sh made no $exe)"
        rc=1
        continue
    fi
    corpus=$DIR/corpus-$t
    rm -rf "$corpus"
    mkdir -p "$corpus"
    [ -d "$NCM_TOP/tests/fuzz/corpus/$t" ] &&
        cp "$NCM_TOP/tests/fuzz/corpus/$t"/* "$corpus/" 2>/dev/null
    log=$DIR/run-$t.log
    if (cd "$DIR/out" && ASAN_OPTIONS=detect_leaks=0 \
            timeout --kill-after=10 600 "$exe" -runs="$RUNS" "$corpus") \
            >"$log" 2>&1; then
        echo "PASS: oss-fuzz/$t ($(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -n 1) runs from $(find "$corpus" -type f | wc -l) seeds)"
    else
        echo "FAIL: oss-fuzz/$t (log: $log)"
        grep -m3 -E 'ERROR|Assertion|runtime error' "$log" | sed 's/^/    | /'
        rc=1
    fi
done
exit "$rc"
