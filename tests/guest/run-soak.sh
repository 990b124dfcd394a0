#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# make soak: the guest on usb-ncm-dl for SOAK_SECONDS under everything at
# once, QEMU's memory watched.
#
#   tests/guest/run-soak.sh [SECONDS]        (default $SOAK_SECONDS or 600)
#
# The guest (tests/guest/init-soak.sh) runs TCP both ways (iperf3, rate
# limited: SOAK_RATE, 20M), echoes the host's numbered UDP datagrams, changes
# cdc_ncm's rx_max/tx_max on the running interface every 23 s and takes the
# interface down and up every 61 s (a quarter and half of a run shorter
# than that). The host (tests/guest/soak.py) sends the
# datagrams (100 a second) and pings the guest every 50 ms, rotates the
# device's faults (usb-ncm-fault) every SOAK_FAULT_EVERY s (8: link down 1.5 s,
# busy 0.8 s, every 25th IN NTB dropped for 3 s, one corrupted IN NTB of
# each corrupt-in kind in turn, a re-plug of 1 s) and live-migrates
# the VM to a new QEMU every SOAK_MIGRATE_EVERY s (180; at least once in a
# shorter run). The network is the live-migration test's: a private
# network namespace (created here, removed at the end) with tap0 =
# 10.0.2.2/24, iperf3 servers on 5201/5202 and tests/guest/migrate-relay.py
# between the tap and the QEMUs' -netdev stream. Nothing leaves the
# namespace.
#
# It prints QEMU's RSS every 30 s and per QEMU process at the end, every
# lost datagram or ping (as runs) against the event that explains it (the
# fault, migration or guest event whose window holds its send time, with
# the device counters that moved: link_down_drops, fault_dropped_in_ntbs,
# fault_corrupted_in_ntbs, replugs...), and PASS:/FAIL: lines
# soak/{boot,qemu,migrations,guest,results,tcp,udp-echoed,
# losses-explained,rss}. Exit status 1 on a QEMU error (abort, a failed
# migration), a guest error (kernel warning/oops/lockup, host controller
# error, a sysfs write that hangs), a loss no event explains, or RSS growth
# over SOAK_RSS_LIMIT_MB (48) after a QEMU's warm-up.
#
# Environment: SOAK_SECONDS, SOAK_CONTROLLER (xhci), SOAK_FAULTS
# ("link-down,busy,drop-in,corrupt,replug"), SOAK_CORRUPTIONS (the
# usb-ncm-fault corrupt-in kinds), SOAK_FAULT_EVERY, SOAK_MIGRATE_EVERY (0: none),
# SOAK_RATE, SOAK_UDP_RATE (100), SOAK_RSS_LIMIT_MB, KERNEL, QEMU,
# NCM_APPEND. QEMU runs with -accel tcg,tb-size=64 (a bounded code cache:
# its RSS is then the device's and the guest's, not TCG's cache filling).
# Needs root. Logs in build/guest-logs/soak/ (consoles per QEMU,
# soak.log, losses.tsv, hostping.log, migrate-N.log, relay.log).
set -euo pipefail
. "$(dirname "$0")/../../scripts/setup/common.sh"
. "$NCM_TOP/tests/guest/lib.sh"
. "$NCM_TOP/tests/guest/netns.sh"

case ${1:-} in -h|--help) sed -n '3,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
SECS=${1:-${SOAK_SECONDS:-600}}
CTRL=${SOAK_CONTROLLER:-xhci}
LOGDIR=$NCM_BUILD/guest-logs/soak
SERVER=10.0.2.2
PORT=$NETNS_PORT

step "soak: ${SECS}s on $CTRL with usb-ncm-dl"
guest_need_qemu
# (tests/guest/soak.py prints the checks of the run itself)
runner_begin soak
if [ "$(id -u)" != 0 ]; then
    runner_skip "needs root: a network namespace with a tap device"
    exit 0
fi
if ! GDIR=$(bash "$NCM_TOP/tests/guest/image.sh" --print-dir); then
    runner_fail image "tests/guest/image.sh failed"
    exit 1
fi
guest_device_args "$CTRL" "usb-ncm-dl,id=ncm0"

NS=ncm-soak-$$
RUN=$(mktemp -d /tmp/ncm-soak.XXXXXX)
# shellcheck disable=SC2317 # called from the EXIT trap
cleanup() {
    netns_down "$NS"
    rm -rf "$RUN"
}
trap cleanup EXIT
rm -rf "$LOGDIR"
mkdir -p "$LOGDIR"

step "network namespace $NS: tap0 $SERVER/24, iperf3 :$PORT :$((PORT + 1)), relay"
netns_relay_up "$NS" "$LOGDIR" "$RUN/net.sock"

# a short run (the smoke in make check) still changes the NTB sizes a few
# times and takes the interface down once
ntb_every=23 if_every=61
[ "$SECS" -lt 92 ] && ntb_every=$((SECS / 4))
[ "$SECS" -lt 122 ] && if_every=$((SECS / 2))
guest_qemu_cmd "$GDIR" "ncm.mode=soak ncm.driver=cdc_ncm ncm.server=$SERVER \
ncm.port=$PORT ncm.soak_time=$SECS ncm.soak_rate=${SOAK_RATE:-20M} \
ncm.soak_ntb_every=$ntb_every ncm.soak_ifdown_every=$if_every ${NCM_APPEND:-}" \
    "$(netns_relay_netdev "$RUN/net.sock")"
: > "$RUN/cmd"
for arg in "${GUEST_CMD[@]}"; do
    [ "$arg" = tcg ] && arg=tcg,tb-size=64
    printf '%s\0' "$arg" >> "$RUN/cmd"
done

# SANITIZE=1: ASan keeps what QEMU frees in a quarantine (256 MiB by
# default) before it reuses it, which the RSS check counts as growth; a
# small one keeps the check meaningful (leaks are LeakSanitizer's, at exit)
[ "${SANITIZE:-0}" = 0 ] ||
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16"

rc=0
ip netns exec "$NS" python3 "$NCM_TOP/tests/guest/soak.py" --cmd "$RUN/cmd" \
    --run "$RUN" --log "$LOGDIR" --seconds "$SECS" \
    --migrate-every "${SOAK_MIGRATE_EVERY:-180}" --fault-every "${SOAK_FAULT_EVERY:-8}" \
    --rate "${SOAK_UDP_RATE:-100}" --rss-limit-mb "${SOAK_RSS_LIMIT_MB:-48}" \
    ${SOAK_FAULTS:+--faults "$SOAK_FAULTS"} \
    ${SOAK_CORRUPTIONS:+--corruptions "$SOAK_CORRUPTIONS"} || rc=$?
note "logs: ${LOGDIR#"$NCM_TOP"/}/ (console-N.log per QEMU, soak.log, losses.tsv)"
exit "$rc"
