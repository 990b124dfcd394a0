#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# make install, checked: install QEMU (scripts/setup/install-qemu.sh) with
# PREFIX=/opt/usb-ncm-dl and DESTDIR a temporary directory, then run the
# installed binary from DESTDIR/PREFIX (installs are relocatable) with no
# -L: it must find every firmware file in its own share/qemu, and fail
# without them; then boot make run's tour on it (tests/guest/run-guest.sh
# with QEMU= the installed binary).  About 1.5 minutes under TCG.
#
#   tests/guest/run-install-test.sh
#
# QEMU=/path/qemu-system-x86_64 installs and checks that binary instead of
# building build/qemu's (scripts/setup/install-qemu.sh).
set -euo pipefail
. "$(dirname "$0")/../../scripts/setup/common.sh"
. "$NCM_TOP/tests/guest/lib.sh"
runner_begin install

STAGE=$(mktemp -d /tmp/ncm-install.XXXXXX)
trap 'rm -rf "$STAGE"' EXIT
PREFIX=/opt/usb-ncm-dl
ROOT=$STAGE$PREFIX
BIN=$ROOT/bin/qemu-system-x86_64
LOGDIR=$NCM_BUILD/guest-logs
mkdir -p "$LOGDIR"
LOG=$LOGDIR/install.log

step "make install PREFIX=$PREFIX DESTDIR=$STAGE"
if ! PREFIX=$PREFIX DESTDIR=$STAGE \
        bash "$NCM_TOP/scripts/setup/install-qemu.sh" >"$LOG" 2>&1; then
    runner_fail make-install "install-qemu.sh failed: $(tail -n 1 "$LOG"); log $LOG"
    exit 1
fi
# a second run over the first must work too
if PREFIX=$PREFIX DESTDIR=$STAGE \
        bash "$NCM_TOP/scripts/setup/install-qemu.sh" >>"$LOG" 2>&1; then
    runner_pass make-install
else
    runner_fail make-install "a second install over the first failed; log $LOG"
fi

missing=""
for f in bin/qemu-system-x86_64 share/qemu/bios-256k.bin \
         share/qemu/linuxboot_dma.bin share/qemu/kvmvapic.bin \
         share/doc/usb-ncm-dl/ci.md; do
    [ -s "$ROOT/$f" ] || missing="$missing $f"
done
if [ -z "$missing" ]; then
    runner_pass files
else
    runner_fail files "missing in the prefix:$missing"
fi

nf=$(ldd "$BIN" 2>&1 | grep -c 'not found' || true)
if [ "$nf" = 0 ]; then
    runner_pass libraries
else
    runner_fail libraries "$nf libraries not found:" \
        "$(ldd "$BIN" | grep 'not found' | head -n 3 | paste -sd' ')"
fi

if grep -q '^name "usb-ncm-dl"' <<<"$("$BIN" -device help 2>/dev/null)"; then
    runner_pass device
else
    runner_fail device "$BIN -device help does not list usb-ncm-dl"
fi

# The prefix's firmware is what it uses: started with no -L it comes up,
# and with the prefix's SeaBIOS moved away it must refuse to start.
# qemu_up: start it stopped and quit at once through the monitor.
qemu_up() {
    echo quit | timeout 60 "$BIN" -M q35 -nodefaults -display none -S \
        -accel tcg -monitor stdio >"$STAGE/up.out" 2>&1
}
if qemu_up; then
    mv "$ROOT/share/qemu/bios-256k.bin" "$STAGE/bios-256k.bin"
    if qemu_up; then
        runner_fail firmware "it started without bios-256k.bin in its prefix:" \
            "it reads firmware from somewhere else"
    else
        runner_pass firmware
    fi
    mv "$STAGE/bios-256k.bin" "$ROOT/share/qemu/bios-256k.bin"
else
    runner_fail firmware "the installed QEMU does not start with no -L:" \
        "$(grep -a . "$STAGE/up.out" | tail -n 1)"
fi

step "make run's tour on the installed QEMU"
out=$LOGDIR/install-tour.out
rc=0
QEMU=$BIN bash "$NCM_TOP/tests/guest/run-guest.sh" --time 2 >"$out" 2>&1 || rc=$?
sed 's/^/    /' "$out"
if [ "$rc" != 0 ]; then
    runner_fail tour "run-guest.sh with QEMU=$BIN exited $rc: $(grep -a . "$out" | tail -n 1); log $out"
elif ! grep -q 'CDC NCM (SEND ZLP)' "$out"; then
    runner_fail tour "cdc_ncm did not bind as SEND ZLP; log $out"
elif ! grep -Eq '^  Ping +20/20 replies' "$out"; then
    runner_fail tour "not 20 of 20 ping replies: $(grep -a '^  Ping' "$out"); log $out"
elif grep -q -- '-L /usr/share' "$LOGDIR/run.log"; then
    runner_fail tour "the boot was given Debian's firmware directories (-L)"
else
    runner_pass tour
fi
runner_end
