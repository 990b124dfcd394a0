#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# make bench-scaling: several NICs in one guest, all moving TCP at once.
# 1, 2 and 4 usb-ncm-dl on one qemu-xhci, then one usb-ncm-dl per
# controller with 2 and 4 qemu-xhci, and usb-net (1 and 4 on one
# qemu-xhci) for comparison. Tap backend only: a private network namespace
# (tests/guest/netns.sh) holds tap0..tap3 (10.0.2.2 .. 10.0.5.2), an
# iperf3 server on each and QEMU; the guest's NIC I is 10.0.(2+I).15 (its
# MAC ends in :0I; tests/guest/init.sh scale mode).
#
# Per boot: the guest idles 3 s (QEMU's RSS idle), then runs TCP up on every
# NIC at once, then down (QEMU's RSS under load: the largest sample; CPU
# seconds per GB over these two runs, from /proc/PID/stat). Medians of the
# repetitions, one table: scripts/bench/bench-report.py scaling;
# build/bench-scaling/scaling.json.
#
# Environment: SCALING_REPS (3), SCALING_TIME (8 s per direction),
#   SCALING_CONFIGS (names below), SCALING_OUT (build/bench-scaling),
#   QEMU (another qemu-system-x86_64).
set -euo pipefail
. "$(dirname "$0")/../setup/common.sh"
. "$NCM_TOP/tests/guest/lib.sh"
. "$NCM_TOP/scripts/bench/bench-configs.sh"

OUT=${SCALING_OUT:-$NCM_BUILD/bench-scaling}
REPS=${SCALING_REPS:-3}
TIME=${SCALING_TIME:-8}
NS=ncm-scaling
# name | NICs | controllers | device
SCALING_TABLE="
ncm-1|1|1|usb-ncm-dl
ncm-2|2|1|usb-ncm-dl
ncm-4|4|1|usb-ncm-dl
ncm-2x2ctl|2|2|usb-ncm-dl
ncm-4x4ctl|4|4|usb-ncm-dl
usb-net-1|1|1|usb-net
usb-net-4|4|1|usb-net
"
CONFIGS=${SCALING_CONFIGS:-$(awk -F'|' 'NF > 1 { printf "%s ", $1 }' <<<"$SCALING_TABLE")}

field() {
    awk -F'|' -v n="$1" -v f="$2" '$1 == n { print $f }' <<<"$SCALING_TABLE"
}

# scaling_cmd NAME: GUEST_CMD for one boot of configuration NAME
scaling_cmd() {
    local name=$1 nics ctls dev i drv=cdc_ncm ntb=""
    nics=$(field "$name" 2)
    ctls=$(field "$name" 3)
    dev=$(field "$name" 4)
    [ -n "$dev" ] || die "unknown configuration '$name'" \
        "SCALING_CONFIGS takes: $(awk -F'|' 'NF > 1 { printf "%s ", $1 }' <<<"$SCALING_TABLE")"
    GUEST_DEV_ARGS=()
    for i in $(seq 0 $((ctls - 1))); do
        GUEST_DEV_ARGS+=(-device "qemu-xhci,id=usbctl$i")
    done
    for i in $(seq 0 $((nics - 1))); do
        GUEST_DEV_ARGS+=(-device "$dev,netdev=n$i,bus=usbctl$((i % ctls)).0,mac=52:54:00:12:35:0$i")
    done
    case $dev in
    usb-ncm*) ntb="ncm.rx_max=65536 ncm.tx_max=65536" ;;
    usb-net) drv=cdc_ether ;;
    esac
    guest_qemu_cmd "$GDIR" "ncm.mode=scale ncm.scale=$nics ncm.driver=$drv \
ncm.port=$(backend_port tap) ncm.time=$TIME $ntb" "$(netns_tap_netdev 0)"
    backend_apply tap "$NS" "$nics"
}

bash "$NCM_TOP/scripts/setup/install-deps.sh" build guest bench
bash "$NCM_TOP/scripts/setup/build-qemu.sh"
GDIR=$(bash "$NCM_TOP/tests/guest/image.sh" --print-dir)
guest_accel "$GDIR"
rm -rf "$OUT"
mkdir -p "$OUT/tap/logs"
bench_snapshot_qemu "$OUT"
trap 'netns_down "$NS"' EXIT
trap 'exit 130' INT TERM
netns_up "$NS" 4 "$OUT/tap"

{
    printf '{"seconds": %s, "reps": %s, "backend": "tap", "started": "%s",\n' \
        "$TIME" "$REPS" "$(date -u '+%Y-%m-%dT%H:%M:%SZ')"
    printf ' "commit": "%s",\n' "$(git -C "$NCM_TOP" describe --always --dirty 2>/dev/null || echo unknown)"
    printf ' "accel": "%s", "accel_why": "%s",\n' "$GUEST_ACCEL" \
        "${GUEST_ACCEL_WHY//\"/\'}"
    printf ' "qemu": "%s", "configs": [\n' "$("$GUEST_QEMU" --version | head -n1)"
    sep=
    for c in $CONFIGS; do
        printf '%s  {"name": "%s", "devices": %s, "controllers": %s, "device": "%s"}' \
            "$sep" "$c" "$(field "$c" 2)" "$(field "$c" 3)" "$(field "$c" 4)"
        sep=$',\n'
    done
    printf '\n]}\n'
} > "$OUT/run.json"

total=$((REPS * $(wc -w <<<"$CONFIGS")))
n=0
for rep in $(seq 1 "$REPS"); do
    for c in $CONFIGS; do
        n=$((n + 1))
        scaling_cmd "$c"
        log=$OUT/tap/logs/$c-$rep.log
        step "boot $n/$total: $c ($(field "$c" 2) x $(field "$c" 4) on $(field "$c" 3) qemu-xhci; repetition $rep of $REPS)"
        cut -d' ' -f1-3 /proc/loadavg > "$log.loadavg"
        bench_boot "$log" 600 - || true
        if grep -q 'NCMTEST phase=done' "$log"; then
            note "up $(guest_val "$log" scale_up_mbps) ($(guest_val "$log" scale_up_each)), down $(guest_val "$log" scale_down_mbps) ($(guest_val "$log" scale_down_each)) Mbit/s"
        else
            note "boot $c-$rep did not finish: see ${log#"$NCM_TOP"/}"
        fi
    done
done
netns_down "$NS"

step "summarising"
python3 "$NCM_TOP/scripts/bench/bench-report.py" scaling "$OUT" | tee "$OUT/report.txt"
note "for docs/performance.md: copy report.txt and scaling.json into" \
     "docs/performance/ (its README.md says which names), then make perf-doc"
