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
# GUEST_MIGRATE="xhci" those of the migration runs ("" for none),
# GUEST_MIGRATE_CROSS="xhci" those of the migration to the other QEMU
# version's build (10.0 -> 10.2; a SKIP line without that build).
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
out=$(mktemp)
trap 'rm -f "$out"' EXIT

status=0
timing=()
# arm64_leg CONTROLLER DEVICE: run-guest-test.sh on the arm64 guest (QEMU
# names the x86 one, unless ARCH=arm64 made the whole run arm64's)
QEMU_ARM64=$NCM_BUILD/qemu-aarch64/qemu-system-aarch64
[ "$NCM_ARCH" = arm64 ] && QEMU_ARM64=${QEMU:-$QEMU_ARM64}
# shellcheck disable=SC2317 # (called by leg)
arm64_leg() {
    ARCH=arm64 QEMU=$QEMU_ARM64 bash "$NCM_TOP/tests/guest/run-guest-test.sh" "$@"
}
# migrate_cross_leg CONTROLLER DEVICE: the live migration from this
# build to the other QEMU version's (build/10.2 beside 10.0, or back), on
# the older version's machine type; a SKIP line when that build is not
# there (QEMU_VERSION=10.2 make qemu, or make check-migrate-cross)
# shellcheck disable=SC2317 # (called by leg)
migrate_cross_leg() {
    if [ ! -x "$NCM_OTHER_QEMU" ]; then
        echo "SKIP: guest/migrate-$1-cross-version ($NCM_OTHER_QEMU not built: QEMU_VERSION=$NCM_OTHER_VERSION make qemu, or make check-migrate-cross)"
        return 0
    fi
    MIGRATE_DST_QEMU=$NCM_OTHER_QEMU MIGRATE_MACHINE=pc-q35-10.0 \
        bash "$NCM_TOP/tests/guest/run-migrate-test.sh" "$@"
}
# soak_leg SECONDS: the soak's smoke, a fault every 4 s unless told
# shellcheck disable=SC2317 # (called by leg)
soak_leg() {
    SOAK_FAULT_EVERY=${SOAK_FAULT_EVERY:-4} bash "$NCM_TOP/tests/guest/run-soak.sh" "$@"
}

# leg LABEL DEVICES RUNNER DEV ITEMS: one run of RUNNER (a script in
# tests/guest/ or a function above) per word of ITEMS, when DEVICE matches
# the pattern DEVICES; an item a:b:c is the arguments a b c, "." none;
# DEV "dev": DEVICE is the last argument.  LABEL names the run in the
# times of the summary, % standing for the item (its colons as dashes).
leg() {
    local label=$1 devices=$2 runner=$3 dev=$4 items=$5 item t0 args rc
    local before name
    # shellcheck disable=SC2254 # DEVICES is a pattern
    case $DEVICE in $devices) ;; *) return 0 ;; esac
    for item in $items; do
        t0=$SECONDS
        args=()
        [ "$item" = . ] || IFS=: read -ra args <<<"$item"
        [ "$dev" = dev ] && args+=("$DEVICE")
        if [ "$runner" = arm64_leg ] && [ ! -x "$QEMU_ARM64" ]; then
            echo "FAIL: guest/arm64-$item/qemu ($QEMU_ARM64 is not built: ARCH=arm64 make qemu)" |
                tee -a "$out"
            status=1
            continue
        fi
        name=${label//%/${item//:/-}}
        before=$(wc -l <"$out")
        rc=0
        if declare -F "$runner" >/dev/null; then
            "$runner" "${args[@]}" 2>&1 | tee -a "$out" || rc=$?
        else
            bash "$NCM_TOP/tests/guest/$runner" "${args[@]}" 2>&1 |
                tee -a "$out" || rc=$?
        fi
        # A run that failed (killed, timed out, a script error) without a
        # FAIL line of its own still counts, with what it printed last
        if [ "$rc" != 0 ]; then
            status=1
            if ! tail -n +"$((before + 1))" "$out" | grep -q '^FAIL: '; then
                echo "FAIL: guest/$name/exit ($runner $item exited" \
                     "with status $rc and no FAIL line; its last line:" \
                     "$(tail -n +"$((before + 1))" "$out" | grep -av '^$' |
                        tail -n 1 | cut -c1-160))" | tee -a "$out"
            fi
        fi
        timing+=("$name $((SECONDS - t0))s")
    done
}

if [ "$NCM_ARCH" = arm64 ]; then
    leg 'arm64-%' '*' arm64_leg dev "${GUEST_ARM64-xhci ehci}"
    npass=$(grep -c '^PASS: ' "$out" || true)
    nfail=$(grep -c '^FAIL: ' "$out" || true)
    [ "$nfail" = 0 ] && [ "$npass" -gt 0 ] || status=1
    echo "check-guest (arm64): $npass passed, $nfail failed (time per run: ${timing[*]})"
    exit "$status"
fi

soak=${GUEST_SOAK-50}
[ "$soak" != 0 ] || soak=""
# shellcheck disable=SC2086 # one scenario a word, joined by colons
replay=$(echo ${GUEST_REPLAY-xhci ehci dropout} | tr ' ' ':')
install=.
[ "${GUEST_INSTALL:-1}" != 0 ] || install=""

# The legs, in order (each ITEMS word one run):
#   LABEL        DEVICES      RUNNER               DEV  ITEMS
# the checks of run-guest-test.sh under every controller; the same on
# an arm64 guest (about 2.5 minutes); the controller set-ups of real
# machines, one boot each (about 1 minute); the usbfs stress; a live
# migration
leg '%'          '*'          run-guest-test.sh    dev  "$CONTROLLERS"
leg 'arm64-%'    'usb-ncm*'   arm64_leg            dev  "${GUEST_ARM64-xhci}"
leg '%'          'usb-ncm*'   run-guest-test.sh    dev  "${GUEST_TOPOLOGIES-ehci-uhci ehci-ohci ehci-uhci-hub xhci-hub xhci-dual}"
leg 'stress-%'   'usb-ncm*'   run-stress-test.sh   dev  "${GUEST_STRESS-xhci ehci}"
leg 'migrate-%'  'usb-ncm*'   run-migrate-test.sh  dev  "${GUEST_MIGRATE-xhci}"
leg 'migrate-%-cross' 'usb-ncm*' migrate_cross_leg dev  "${GUEST_MIGRATE_CROSS-xhci}"
# re-enumeration and suspend (run-pm-test.sh MODE CONTROLLER): autosuspend
# and S3 at super speed (function remote wake), remote-wakeup=off at high
# speed (DEVICE_REMOTE_WAKEUP never enabled). About 4 minutes.
leg '%'          'usb-ncm*'   run-pm-test.sh       dev  "${GUEST_PM-replug:xhci suspend:xhci suspend-nowake:xhci-hs}"
# the profile= presets, one boot per controller for all five, and jumbo
# frames at cdc_ncm's limit. About 5 minutes.
leg 'profiles-%' 'usb-ncm*'   run-profile-test.sh  -    "${GUEST_PROFILES-xhci uhci}"
leg 'jumbo-%'    'usb-ncm*'   run-jumbo-test.sh    -    "${GUEST_JUMBO-xhci ehci}"
# the soak's smoke: every fault kind, a live migration, QEMU's RSS (about
# 2 minutes; make soak runs it for 10)
leg 'soak-%'     'usb-ncm-dl' soak_leg             -    "$soak"
# record/replay: TCP both ways with a link flap and a re-enumeration on
# qemu-xhci and usb-ehci, and the ZLP dropout, each recorded and replayed
# (the same console output, counters and trace; run-replay-test.sh, one
# run for all the scenarios of GUEST_REPLAY).  Then the whole-NTB capture
# decoded by tshark (run-pcap-test.sh).
leg 'replay'     'usb-ncm-dl' run-replay-test.sh   -    "$replay"
leg 'pcap-%'     'usb-ncm-dl' run-pcap-test.sh     -    "${GUEST_PCAP-xhci}"
# make install into a temporary prefix, and the tour from there (1.5 min)
leg 'install'    'usb-ncm-dl' run-install-test.sh  -    "$install"

npass=$(grep -c '^PASS: ' "$out" || true)
nfail=$(grep -c '^FAIL: ' "$out" || true)
[ "$nfail" = 0 ] || status=1
# A run that produced no verdict at all is a failure too.
[ "$npass" -gt 0 ] || status=1
echo "check-guest: $npass passed, $nfail failed (time per run: ${timing[*]})"
exit "$status"
