#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Usage: scripts/check/fuzz.sh [SECONDS]        (make fuzz; default 60)
#
# Fuzz the NTB codec alone: the two qemu-fuzz targets of
# tests/qtest/fuzz/ that need no device,
#   usb-ncm-dl-ntb-parse      usb_ncm_dl_ntb_parse_fuzz.c      OUT transfer parser
#   usb-ncm-dl-ntb-roundtrip  usb_ncm_dl_ntb_roundtrip_fuzz.c  IN builder -> parser
# for SECONDS each, through scripts/check/fuzz-device.sh: the same
# qemu-fuzz-x86_64 (clang, libFuzzer, ASan, UBSan) as the device's
# targets, the working corpora build/fuzz-qemu/corpus-<target> seeded from
# tests/fuzz/corpus/<target>/, artifacts in build/fuzz-qemu/artifacts-<target>/.
#
# Output: fuzz-device.sh's, its result lines as PASS:/FAIL:/SKIP:
# fuzz/<target> (make check's "fuzz" suite); exit status non-zero if a
# target failed.

set -euo pipefail
# shellcheck source=scripts/setup/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../setup/common.sh"

fuzz_secs=${1:-60}
[[ $fuzz_secs =~ ^[1-9][0-9]*$ ]] ||
    die "SECONDS must be a positive integer, got '$fuzz_secs'" \
        "usage: scripts/check/fuzz.sh [SECONDS]"
bash "$NCM_TOP/scripts/check/fuzz-device.sh" "$fuzz_secs" \
    usb-ncm-dl-ntb-parse usb-ncm-dl-ntb-roundtrip 2>&1 |
    sed -E 's#^(PASS|FAIL|SKIP): fuzz-device/#\1: fuzz/#'
