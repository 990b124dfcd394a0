#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The check-guest suite: boot the test guest with usb-ncm-dl behind every
# host controller QEMU has for it (GUEST_JOBS boots at a time, see
# run_legs) and check what Linux's cdc_ncm made of it (see
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
QEMU_ARM64=$NCM_BUILD/qemu/qemu-system-aarch64
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
# leg only queues the runs; run_legs runs them.
queue_names=()
queue_cmds=()
leg() {
    local label=$1 devices=$2 runner=$3 dev=$4 items=$5 item args cmd
    # shellcheck disable=SC2254 # DEVICES is a pattern
    case $DEVICE in $devices) ;; *) return 0 ;; esac
    for item in $items; do
        args=()
        [ "$item" = . ] || IFS=: read -ra args <<<"$item"
        [ "$dev" = dev ] && args+=("$DEVICE")
        if [ "$runner" = arm64_leg ] && [ ! -x "$QEMU_ARM64" ]; then
            echo "FAIL: guest/arm64-$item/qemu ($QEMU_ARM64 is not built: ARCH=arm64 make qemu)" |
                tee -a "$out"
            status=1
            continue
        fi
        if declare -F "$runner" >/dev/null; then
            cmd=("$runner")
        else
            cmd=(bash "$NCM_TOP/tests/guest/$runner")
        fi
        queue_names+=("${label//%/${item//:/-}}")
        # one string a run, its words joined by the unit separator (no
        # argument holds one), for run_legs to split again
        queue_cmds+=("$(IFS=$'\x1f'; echo "${cmd[*]}${args[*]+$'\x1f'}${args[*]}")")
    done
}

# run_legs: the queued runs, GUEST_JOBS at a time (default 2).  A guest
# under TCG keeps about 0.6 of a core busy (it waits on the guest's own
# timers and on iperf3), so two boots side by side take little longer than
# one.  Each run writes into a file of its own (build/guest-logs/run-all/N.out,
# kept), which is printed whole when the run ends, so that the lines of two runs never interleave; the
# runs have nothing else in common (free ports, network namespaces named
# by PID, logs named by run; image.sh locks the image it builds).
run_legs() {
    local jobs=${GUEST_JOBS:-2} next=0 running=0 pid i rc before cmd
    local -A pid_leg=()
    local -a t0=() took=()
    local dir=$NCM_BUILD/guest-logs/run-all
    rm -rf "$dir"
    mkdir -p "$dir"
    [[ $jobs =~ ^[1-9][0-9]*$ ]] ||
        die "GUEST_JOBS must be a positive number, got '$jobs'"
    while [ "$next" -lt "${#queue_cmds[@]}" ] || [ "$running" -gt 0 ]; do
        if [ "$next" -lt "${#queue_cmds[@]}" ] && [ "$running" -lt "$jobs" ]; then
            i=$next
            next=$((next + 1))
            t0[i]=$SECONDS
            note "guest run ${queue_names[i]} started ($((i + 1)) of" \
                 "${#queue_cmds[@]}, $((running + 1)) running)"
            IFS=$'\x1f' read -ra cmd <<<"${queue_cmds[i]}"
            ("${cmd[@]}" >"$dir/$i.out" 2>&1) &
            pid_leg[$!]=$i
            running=$((running + 1))
            continue
        fi
        rc=0
        wait -n -p pid "${!pid_leg[@]}" || rc=$?
        i=${pid_leg[$pid]}
        unset "pid_leg[$pid]"
        running=$((running - 1))
        took[i]=$((SECONDS - t0[i]))
        before=$(wc -l <"$out")
        tee -a "$out" <"$dir/$i.out"
        # A run that failed (killed, timed out, a script error) without a
        # FAIL line of its own still counts, with what it printed last
        if [ "$rc" != 0 ]; then
            status=1
            if ! grep -q '^FAIL: ' <<<"$(tail -n +"$((before + 1))" "$out")"; then
                echo "FAIL: guest/${queue_names[i]}/exit (${queue_cmds[i]//$'\x1f'/ }" \
                     "exited with status $rc and no FAIL line; its last line:" \
                     "$(tail -n +"$((before + 1))" "$out" | grep -av '^$' |
                        tail -n 1 | cut -c1-160))" | tee -a "$out"
            fi
        fi
    done
    for i in "${!queue_names[@]}"; do
        timing+=("${queue_names[i]} ${took[i]}s")
    done
    queue_names=()
    queue_cmds=()
}

if [ "$NCM_ARCH" = arm64 ]; then
    leg 'arm64-%' '*' arm64_leg dev "${GUEST_ARM64-xhci ehci}"
    run_legs
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
# record/replay first, the longest run (about 6 minutes), so that the
# others run beside it: TCP both ways with a link flap and a
# re-enumeration on qemu-xhci and usb-ehci, and the ZLP dropout, each
# recorded and replayed (the same console output, counters and trace;
# run-replay-test.sh, one run for all the scenarios of GUEST_REPLAY)
leg 'replay'     'usb-ncm-dl' run-replay-test.sh   -    "$replay"
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
# the whole-NTB capture decoded by tshark (run-pcap-test.sh)
leg 'pcap-%'     'usb-ncm-dl' run-pcap-test.sh     -    "${GUEST_PCAP-xhci}"
# make install into a temporary prefix, and the tour from there (1.5 min)
leg 'install'    'usb-ncm-dl' run-install-test.sh  -    "$install"
run_legs

npass=$(grep -c '^PASS: ' "$out" || true)
nfail=$(grep -c '^FAIL: ' "$out" || true)
[ "$nfail" = 0 ] || status=1
# A run that produced no verdict at all is a failure too.
[ "$npass" -gt 0 ] || status=1
echo "check-guest: $npass passed, $nfail failed (time per run: ${timing[*]})"
exit "$status"
