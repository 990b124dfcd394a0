#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# One boot of the DisplayLink dropout scenario: usb-ncm-dl with its
# ZLP-required firmware model on qemu-xhci, the guest's tx_max raised to
# dwNtbOutMaxSize (what DisplayLink's udev rule does), a light ping, then
# iperf3 under load each way with per-second intervals.  The console log is
# build/dropout-logs/NAME.log and the device counters NAME.log.stats.json.
#
#   tests/guest/dropout-run.sh NAME [DEVICE-PROPERTIES]
#
#   dropout-run.sh dl                                  DisplayLink ids
#   dropout-run.sh generic ,vendorid=0x46f4,productid=0x0010
#
# Environment: IPERF_TIME (10), GUEST_TIMEOUT (300), KERNEL, QEMU;
# REPLAY=record records the run into build/replay/dropout-NAME.* (the log
# is then build/replay/dropout-NAME.record.log), REPLAY=replay replays it
# (.replay.log, and its own .stats.json), REPLAY_GDB=1 with a gdbstub (see
# tests/guest/replay-lib.sh).
set -euo pipefail
. "$(dirname "$0")/../../scripts/setup/common.sh"
. "$NCM_TOP/tests/guest/lib.sh"
. "$NCM_TOP/tests/guest/replay-lib.sh"

NAME=${1:?usage: dropout-run.sh NAME [DEVICE-PROPERTIES]}
PROPS=${2:-}
IPERF_TIME=${IPERF_TIME:-10}
GUEST_TIMEOUT=${GUEST_TIMEOUT:-300}
LOG=$NCM_BUILD/dropout-logs/$NAME.log

guest_need_qemu
GDIR=$(bash "$NCM_TOP/tests/guest/image.sh" --print-dir) ||
    die "could not build the guest image" "see the messages above"
mkdir -p "$(dirname "$LOG")"
trap guest_iperf_stop EXIT
replay_check
# a replay talks to nobody: its packets come from the recording
[ "$REPLAY" = replay ] || guest_iperf_start "$LOG.iperf3-server.log"

guest_device_args xhci "usb-ncm-dl,id=ncm,zlp=required$PROPS"
guest_qemu_cmd "$GDIR" "ncm.mode=test ncm.driver=cdc_ncm \
ncm.port=$GUEST_IPERF_PORT ncm.time=$IPERF_TIME ncm.intervals=1 \
ncm.ping=10 ncm.carrier_wait=10 ncm.rx_max=max ncm.tx_max=max"
replay_cmd "dropout-$NAME"
if [ -n "$REPLAY" ]; then
    LOG=$REPLAY_BASE.$REPLAY.log
    [ "${REPLAY_GDB:-0}" != 0 ] && [ "$REPLAY" = replay ] &&
        replay_gdb_hint "$(basename "$GDIR")"
fi
step "dropout run '$NAME': usb-ncm-dl$PROPS${REPLAY:+ ($REPLAY)} (log: ${LOG#"$NCM_TOP"/})"
rc=0
t0=$SECONDS
guest_run_with_stats "$LOG" "$GUEST_TIMEOUT" ncm || rc=$?
[ -z "$REPLAY" ] || echo "$((SECONDS - t0))" >"$REPLAY_BASE.$REPLAY.seconds"
guest_iperf_stop
[ -s "$LOG.stats.json" ] ||
    die "no device counters for run '$NAME' (QEMU status $rc)" \
        "see $LOG and $LOG.stats.err"
step "dropout run '$NAME' finished (QEMU status $rc)"
