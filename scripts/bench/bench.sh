#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# make bench: usb-ncm-dl against usb-net and virtio-net-pci (with and
# without offloads) in one run, on two network backends:
#  - tap (first): a private network namespace holding a tap device
#    (10.0.2.2/24), the iperf3 server and QEMU; the guest keeps 10.0.2.15.
#    Nothing leaves the machine; the namespace is made and removed here
#    (tests/guest/netns.sh). This is where the device is the bottleneck.
#  - slirp: -netdev user, the iperf3 server on the host's loopback.
#
# The same guest (kernel, -m 512, -smp 1, TCG) boots once per backend,
# configuration and repetition, all interleaved so that machine noise
# spreads over all of them. Each boot measures ping latency, TCP up/down
# with 1 and 4 streams and a 64-byte UDP packet rate each way; QEMU's CPU
# time and RSS are sampled throughout (CPU seconds per GB count the TCP
# runs only). Medians, ratios, the targets, a JSON file and a chart per
# backend land in build/bench/ (scripts/bench/bench-report.py).
#
# Environment: BENCH_REPS (3), BENCH_TIME (5 s per iperf3 run),
#   BENCH_UDP_MBPS (20, offered UDP load), BENCH_BACKENDS ("tap slirp"),
#   BENCH_CONFIGS (names from scripts/bench/bench-configs.sh, for every backend;
#   default BENCH_CONFIGS_TAP / BENCH_CONFIGS_SLIRP below), BENCH_OUT
#   (build/bench), QEMU (another qemu-system-x86_64, for an A/B).
set -euo pipefail
. "$(dirname "$0")/../setup/common.sh"
. "$NCM_TOP/tests/guest/lib.sh"
. "$NCM_TOP/scripts/bench/bench-configs.sh"

OUT=${BENCH_OUT:-$NCM_BUILD/bench}
REPS=${BENCH_REPS:-3}
TIME=${BENCH_TIME:-5}
UDP_MBPS=${BENCH_UDP_MBPS:-20}
BACKENDS=${BENCH_BACKENDS:-tap slirp}
CONFIGS_TAP=${BENCH_CONFIGS:-${BENCH_CONFIGS_TAP:-ncm-64k usb-net virtio-net-nooff virtio-net}}
CONFIGS_SLIRP=${BENCH_CONFIGS:-${BENCH_CONFIGS_SLIRP:-ncm-64k usb-net virtio-net}}
NS=ncm-bench

configs_of() {
    case $1 in
    tap) echo "$CONFIGS_TAP" ;;
    slirp) echo "$CONFIGS_SLIRP" ;;
    *) die "unknown backend '$1' in BENCH_BACKENDS" "use tap and/or slirp" ;;
    esac
}

bash "$NCM_TOP/scripts/setup/install-deps.sh" build guest bench
bash "$NCM_TOP/scripts/setup/build-qemu.sh"
GDIR=$(bash "$NCM_TOP/tests/guest/image.sh" --print-dir)
guest_accel "$GDIR"
# A previous run's logs would be read as more repetitions.
rm -rf "$OUT"
mkdir -p "$OUT"
bench_snapshot_qemu "$OUT"

cleanup() {
    guest_iperf_stop
    netns_down "$NS"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

total=0
for b in $BACKENDS; do
    mkdir -p "$OUT/$b/logs"
    total=$((total + REPS * $(wc -w <<<"$(configs_of "$b")")))
    case $b in
    tap) netns_up "$NS" 1 "$OUT/tap" ;;
    slirp) guest_iperf_start "$OUT/slirp/iperf3-server.log" ;;
    esac
done
{
    printf '{"seconds": %s, "reps": %s, "udp_mbps": %s, "started": "%s",\n' \
        "$TIME" "$REPS" "$UDP_MBPS" "$(date -u '+%Y-%m-%dT%H:%M:%SZ')"
    printf ' "commit": "%s",\n' "$(git -C "$NCM_TOP" describe --always --dirty 2>/dev/null || echo unknown)"
    printf ' "host": "%s, %s CPUs", "qemu": "%s",\n' "$(uname -r)" "$(nproc)" \
        "$("$GUEST_QEMU" --version | head -n1)"
    printf ' "accel": "%s", "accel_why": "%s",\n' "$GUEST_ACCEL" \
        "${GUEST_ACCEL_WHY//\"/\'}"
    printf ' "backends": {'
    sep=
    for b in $BACKENDS; do
        printf '%s"%s": [%s]' "$sep" "$b" \
            "$(configs_of "$b" | xargs -n1 printf '"%s"\n' | paste -sd,)"
        sep=", "
    done
    printf '}}\n'
} > "$OUT/run.json"

step "$total boots: $REPS repetitions of [$(for b in $BACKENDS; do
    printf '%s: %s; ' "$b" "$(configs_of "$b")"; done | sed 's/; $//')]"
n=0
for rep in $(seq 1 "$REPS"); do
    for b in $BACKENDS; do
        for c in $(configs_of "$b"); do
            n=$((n + 1))
            config_guest_cmd "$c" "$GDIR" BENCH_CONFIGS \
                "ncm.time=$TIME ncm.parallel=1,4 ncm.ping=20 ncm.udp=$UDP_MBPS" \
                "$b" "$NS"
            log=$OUT/$b/logs/$c-$rep.log
            step "boot $n/$total: $b $c (repetition $rep of $REPS)"
            printf '%s\n' "$(cut -d' ' -f1-3 /proc/loadavg)" > "$log.loadavg"
            bench_boot "$log" 600 "$CONFIG_QOM" || true
            if grep -q 'NCMTEST phase=done' "$log"; then
                note "$(python3 "$NCM_TOP/scripts/bench/bench-report.py" one "$log" "$TIME")"
            else
                note "boot $b $c-$rep did not finish: see ${log#"$NCM_TOP"/}"
            fi
        done
    done
done
cleanup

step "summarising"
python3 "$NCM_TOP/scripts/bench/bench-report.py" bench "$OUT" | tee "$OUT/report.txt"
note "for docs/performance.md: copy report.txt and results-*.json into" \
     "docs/performance/ (its README.md says which names), then make perf-doc"
