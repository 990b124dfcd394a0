#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The check-guest suite: boot the test guest with usb-ncm-dl behind every
# host controller QEMU has for it (one after the other: TCG wants both
# cores) and check what Linux's cdc_ncm made of it (see
# tests/guest/run-guest-test.sh), then the usbfs stress of the function
# (tests/guest/run-stress-test.sh) on xHCI and EHCI, a live migration
# under traffic (tests/guest/run-migrate-test.sh), then re-enumeration,
# USB autosuspend and suspend to RAM (tests/guest/run-pm-test.sh).
#
#   tests/guest/run-all.sh [DEVICE[,PROPS]]      default usb-ncm-dl
#
# Environment as for run-guest-test.sh (KERNEL, QEMU, GUEST_TIMEOUT, ...);
# GUEST_CONTROLLERS="xhci xhci-hs ehci uhci ohci" picks the controllers,
# GUEST_TOPOLOGIES="ehci-uhci ehci-ohci xhci-hub xhci-dual" the set-ups of
# real machines (EHCI with UHCI or OHCI companions and the port moved
# between them, a usb-hub, two devices under traffic at once; one boot
# each, run-guest-test.sh; "" for none), GUEST_SOAK=50 the seconds of the
# soak smoke (tests/guest/run-soak.sh: faults, a live migration, RSS;
# root; "" or 0 for none),
# GUEST_STRESS="xhci ehci" those of the stress runs ("" for none),
# GUEST_MIGRATE="xhci" those of the migration runs ("" for none).
# GUEST_PM="replug:xhci suspend:xhci suspend-nowake:xhci-hs" the
# re-enumeration and suspend runs, MODE:CONTROLLER ("" for none).
# GUEST_PROFILES="xhci uhci" the controllers of the profile= run (every
# preset in one boot, tests/guest/run-profile-test.sh), GUEST_JUMBO="xhci
# ehci" those of the jumbo-frame run (MTU 8178, tests/guest/run-jumbo-test.sh;
# root: a network namespace with a tap) ("" for none).
# GUEST_INSTALL=0 skips make install's check (tests/guest/run-install-test.sh:
# install into a temporary prefix, boot the tour from there).
# GUEST_ARM64="xhci" the controllers of the arm64 legs after the x86
# controllers (run-guest-test.sh under ARCH=arm64: qemu-system-aarch64 -M
# virt, TCG; "" for none; build it first: ARCH=arm64 make qemu, which
# make check does).  ARCH=arm64 runs the arm64 legs alone, GUEST_ARM64
# defaulting to "xhci ehci" then (ARCH=arm64 make check-guest): the other
# runs need q35 (S3, ICH9 companions) or the x86 guest's tools.
# ACCEL=auto|kvm|tcg as for make run (tests/guest/accel.sh).
set -euo pipefail
. "$(dirname "$0")/../../scripts/setup/common.sh"

DEVICE=${1:-${NCM_DEVICE:-usb-ncm-dl}}
CONTROLLERS=${GUEST_CONTROLLERS-xhci xhci-hs ehci uhci ohci}
STRESS=${GUEST_STRESS-xhci ehci}
MIGRATE=${GUEST_MIGRATE-xhci}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

status=0
timing=()
# arm64_legs CONTROLLER...: run-guest-test.sh on the arm64 guest (QEMU
# names the x86 one, unless ARCH=arm64 made the whole run arm64's)
QEMU_ARM64=$NCM_BUILD/qemu-aarch64/qemu-system-aarch64
[ "$NCM_ARCH" = arm64 ] && QEMU_ARM64=${QEMU:-$QEMU_ARM64}
arm64_legs() {
    local c t0 qemu=$QEMU_ARM64
    for c in "$@"; do
        t0=$SECONDS
        if [ ! -x "$qemu" ]; then
            echo "FAIL: guest/arm64-$c/qemu ($qemu is not built: ARCH=arm64 make qemu)" |
                tee -a "$out"
            status=1
            continue
        fi
        ARCH=arm64 QEMU=$qemu bash "$NCM_TOP/tests/guest/run-guest-test.sh" "$c" "$DEVICE" 2>&1 |
            tee -a "$out" || status=1
        timing+=("arm64-$c $((SECONDS - t0))s")
    done
}
if [ "$NCM_ARCH" = arm64 ]; then
    # shellcheck disable=SC2086 # one controller a word
    arm64_legs ${GUEST_ARM64-xhci ehci}
    npass=$(grep -c '^PASS: ' "$out" || true)
    nfail=$(grep -c '^FAIL: ' "$out" || true)
    [ "$nfail" = 0 ] && [ "$npass" -gt 0 ] || status=1
    echo "check-guest (arm64): $npass passed, $nfail failed (time per run: ${timing[*]})"
    exit "$status"
fi
for c in $CONTROLLERS; do
    t0=$SECONDS
    bash "$NCM_TOP/tests/guest/run-guest-test.sh" "$c" "$DEVICE" 2>&1 |
        tee -a "$out" || status=1
    timing+=("$c $((SECONDS - t0))s")
done
# the same checks on an arm64 guest (about 2.5 minutes)
case $DEVICE in
usb-ncm*)
    # shellcheck disable=SC2086 # one controller a word
    arm64_legs ${GUEST_ARM64-xhci}
    ;;
esac
# the controller set-ups of real machines, one boot each (about 1 minute)
case $DEVICE in
usb-ncm*)
    for c in ${GUEST_TOPOLOGIES-ehci-uhci ehci-ohci xhci-hub xhci-dual}; do
        t0=$SECONDS
        bash "$NCM_TOP/tests/guest/run-guest-test.sh" "$c" "$DEVICE" 2>&1 |
            tee -a "$out" || status=1
        timing+=("$c $((SECONDS - t0))s")
    done
    ;;
esac
case $DEVICE in
usb-ncm*)
    for c in $STRESS; do
        t0=$SECONDS
        bash "$NCM_TOP/tests/guest/run-stress-test.sh" "$c" "$DEVICE" 2>&1 |
            tee -a "$out" || status=1
        timing+=("stress-$c $((SECONDS - t0))s")
    done
    for c in $MIGRATE; do
        t0=$SECONDS
        bash "$NCM_TOP/tests/guest/run-migrate-test.sh" "$c" "$DEVICE" 2>&1 |
            tee -a "$out" || status=1
        timing+=("migrate-$c $((SECONDS - t0))s")
    done
    ;;
esac
# re-enumeration and suspend (tests/guest/run-pm-test.sh MODE CONTROLLER):
# autosuspend and S3 at super speed (function remote wake), remote-wakeup=off
# at high speed (DEVICE_REMOTE_WAKEUP never enabled). About 4 minutes.
case $DEVICE in
usb-ncm*)
    for p in ${GUEST_PM-replug:xhci suspend:xhci suspend-nowake:xhci-hs}; do
        t0=$SECONDS
        bash "$NCM_TOP/tests/guest/run-pm-test.sh" "${p%%:*}" "${p#*:}" "$DEVICE" 2>&1 |
            tee -a "$out" || status=1
        timing+=("${p%%:*}-${p#*:} $((SECONDS - t0))s")
    done
    ;;
esac
# the profile= presets, one boot per controller for all five, and jumbo
# frames at cdc_ncm's limit. About 5 minutes.
case $DEVICE in
usb-ncm*)
    for c in ${GUEST_PROFILES-xhci uhci}; do
        t0=$SECONDS
        bash "$NCM_TOP/tests/guest/run-profile-test.sh" "$c" 2>&1 |
            tee -a "$out" || status=1
        timing+=("profiles-$c $((SECONDS - t0))s")
    done
    for c in ${GUEST_JUMBO-xhci ehci}; do
        t0=$SECONDS
        bash "$NCM_TOP/tests/guest/run-jumbo-test.sh" "$c" 2>&1 |
            tee -a "$out" || status=1
        timing+=("jumbo-$c $((SECONDS - t0))s")
    done
    ;;
esac
# the soak's smoke: every fault kind, a live migration, QEMU's RSS (about
# 2 minutes; make soak runs it for 10)
case $DEVICE in
usb-ncm-dl)
    soak=${GUEST_SOAK-50}
    if [ -n "$soak" ] && [ "$soak" != 0 ]; then
        t0=$SECONDS
        SOAK_FAULT_EVERY=${SOAK_FAULT_EVERY:-4} \
            bash "$NCM_TOP/tests/guest/run-soak.sh" "$soak" 2>&1 |
            tee -a "$out" || status=1
        timing+=("soak-$soak $((SECONDS - t0))s")
    fi
    ;;
esac
# record/replay: TCP both ways with a link flap and a re-enumeration on
# qemu-xhci and usb-ehci, and the ZLP dropout, each recorded and replayed
# (the same console output, counters and trace; run-replay-test.sh);
# GUEST_REPLAY="xhci ehci dropout" picks them ("" for none).  Then the
# whole-NTB capture decoded by tshark (run-pcap-test.sh, GUEST_PCAP="xhci").
case $DEVICE in
usb-ncm-dl)
    replay=${GUEST_REPLAY-xhci ehci dropout}
    if [ -n "$replay" ]; then
        t0=$SECONDS
        # shellcheck disable=SC2086 # one scenario a word
        bash "$NCM_TOP/tests/guest/run-replay-test.sh" $replay 2>&1 |
            tee -a "$out" || status=1
        timing+=("replay $((SECONDS - t0))s")
    fi
    for c in ${GUEST_PCAP-xhci}; do
        t0=$SECONDS
        bash "$NCM_TOP/tests/guest/run-pcap-test.sh" "$c" 2>&1 |
            tee -a "$out" || status=1
        timing+=("pcap-$c $((SECONDS - t0))s")
    done
    ;;
esac
# make install into a temporary prefix, and the tour from there (1.5 min)
if [ "${GUEST_INSTALL:-1}" != 0 ] && [ "$DEVICE" = usb-ncm-dl ]; then
    t0=$SECONDS
    bash "$NCM_TOP/tests/guest/run-install-test.sh" 2>&1 |
        tee -a "$out" || status=1
    timing+=("install $((SECONDS - t0))s")
fi
npass=$(grep -c '^PASS: ' "$out" || true)
nfail=$(grep -c '^FAIL: ' "$out" || true)
[ "$nfail" = 0 ] || status=1
# A run that produced no verdict at all is a failure too.
[ "$npass" -gt 0 ] || status=1
echo "check-guest: $npass passed, $nfail failed (time per run: ${timing[*]})"
exit "$status"
