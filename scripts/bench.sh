#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# make bench: usb-ncm-dl against usb-net and virtio-net-pci in one run.
#
# The same guest (kernel, -m 512, -smp 1, TCG, -netdev user, iperf3 server
# on the host's loopback) boots once per configuration and repetition,
# configurations interleaved so that machine noise spreads over all of
# them.  Each boot measures ping latency, TCP up/down with 1 and 4 streams
# and a 64-byte UDP packet rate each way; QEMU's CPU time is read before it
# exits.  Medians, ratios against usb-net and virtio-net, a JSON file and a
# PNG chart land in build/bench/.
#
# Environment: BENCH_REPS (3), BENCH_TIME (5 s per iperf3 run),
#   BENCH_UDP_MBPS (20, offered UDP load), BENCH_CONFIGS (names below).
set -euo pipefail
. "$(dirname "$0")/common.sh"
. "$NCM_TOP/tests/guest/lib.sh"
. "$NCM_TOP/scripts/bench-configs.sh"

OUT=$NCM_BUILD/bench
REPS=${BENCH_REPS:-3}
TIME=${BENCH_TIME:-5}
UDP_MBPS=${BENCH_UDP_MBPS:-20}

CONFIGS=${BENCH_CONFIGS:-ncm-16k ncm-32k ncm-64k ncm-64k-t20 usb-net virtio-net}

bash "$NCM_TOP/scripts/install-deps.sh" build guest bench
bash "$NCM_TOP/scripts/build-qemu.sh"
GDIR=$(bash "$NCM_TOP/scripts/guest-image.sh" --print-dir)
# A previous run's logs would be read as more repetitions.
rm -rf "$OUT"
mkdir -p "$OUT/logs"
trap guest_iperf_stop EXIT
guest_iperf_start "$OUT/logs/iperf3-server.log"

total=$((REPS * $(wc -w <<<"$CONFIGS")))
n=0
for rep in $(seq 1 "$REPS"); do
    for c in $CONFIGS; do
        n=$((n + 1))
        config_guest_cmd "$c" "$GDIR" BENCH_CONFIGS \
            "ncm.time=$TIME ncm.parallel=1,4 ncm.ping=20 ncm.udp=$UDP_MBPS"
        log=$OUT/logs/$c-$rep.log
        step "boot $n/$total: $c (repetition $rep)"
        guest_run_with_stats "$log" 600 "$CONFIG_QOM" || true
        grep -q 'NCMTEST phase=done' "$log" ||
            note "boot $c-$rep did not finish: see ${log#"$NCM_TOP"/}"
    done
done
guest_iperf_stop

step "summarising"
python3 "$NCM_TOP/scripts/bench-report.py" "$OUT" "$TIME" $CONFIGS
