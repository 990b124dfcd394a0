#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# make profile: where the time goes while a guest moves TCP data, on both
# sides of the emulation, for usb-ncm-dl and the NICs it is compared with.
#
# Each configuration (names from scripts/bench/bench-configs.sh) boots the bench
# guest once per backend (tests/guest/netns.sh: tap, the default, in a
# private network namespace made and removed here, or slirp) and runs one
# TCP upload and one download. Meanwhile:
#  - perf samples the whole QEMU process on the host (cpu-clock, 999 Hz,
#    every thread): how busy each thread is, and in what: TCG-generated
#    guest code, the TCG runtime, the usb-ncm device, xHCI, the USB core,
#    slirp, memcpy, the host kernel...;
#  - scripts/bench/guest-sampler.py samples the guest's RIP over QMP (~200 Hz):
#    idle (HLT), user space, or which kernel function; the guest sends its
#    /proc/kallsyms at the end so that module functions resolve too;
#  - the guest counts its NIC's interrupts per run (/proc/interrupts).
# scripts/bench/profile-report.py prints the tables (build/profile/report.txt);
# build/profile/<backend>/<config>/ keeps the raw data.
#
# With PROFILE_TRACE=1, QEMU also logs (with host timestamps) the trace
# events that count the data path's round trips: xHCI doorbell writes per
# endpoint (DCI = 2 x endpoint number, + 1 for IN), NAKs, transfers parked
# (USB_RET_ASYNC), usb-ncm IN/OUT NTBs with their datagrams, virtio kicks
# and notifies. The report gives them per second and per MB (xHCI
# interrupts: the guest's count). Logging costs some CPU, so take CPU
# shares from a run without it.
#
# Environment: PROFILE_CONFIGS (ncm-64k ncm-64k-t20 usb-net
#   virtio-net-nooff), PROFILE_BACKENDS (tap; "tap slirp" for both),
#   PROFILE_TIME (8 s per direction), PROFILE_TRACE (0), PROFILE_OUT
#   (build/profile), QEMU (another qemu-system-x86_64).
set -euo pipefail
. "$(dirname "$0")/../setup/common.sh"
. "$NCM_TOP/tests/guest/lib.sh"
. "$NCM_TOP/scripts/bench/bench-configs.sh"

OUT=${PROFILE_OUT:-$NCM_BUILD/profile}
TIME=${PROFILE_TIME:-8}
CONFIGS=${PROFILE_CONFIGS:-ncm-64k ncm-64k-t20 usb-net virtio-net-nooff}
BACKENDS=${PROFILE_BACKENDS:-tap}
TRACE=${PROFILE_TRACE:-0}
TRACE_EVENTS="usb_xhci_doorbell_write usb_xhci_ep_kick usb_xhci_xfer_start
 usb_xhci_xfer_nak usb_xhci_xfer_async usb_ncm_park usb_ncm_in_ntb
 usb_ncm_out_ntb usb_ncm_in_flush virtio_queue_notify virtio_notify"
NS=ncm-profile

bash "$NCM_TOP/scripts/setup/install-deps.sh" build guest bench
command -v perf >/dev/null ||
    die "perf is missing" "run: apt-get install linux-perf"
bash "$NCM_TOP/scripts/setup/build-qemu.sh"
GDIR=$(bash "$NCM_TOP/tests/guest/image.sh" --print-dir)
guest_accel "$GDIR"
rm -rf "$OUT"
mkdir -p "$OUT"
bench_snapshot_qemu "$OUT"
# what made the figures, the report's first line (scripts/bench/perf-doc.py
# quotes it into docs/performance.md up to its first ". ")
PROVENANCE="# make profile, started $(date -u '+%Y-%m-%dT%H:%M:%SZ'), commit \
$(git -C "$NCM_TOP" describe --always --dirty 2>/dev/null || echo unknown), \
accelerator $GUEST_ACCEL. $("$GUEST_QEMU" --version | head -n1); \
PROFILE_CONFIGS=\"$CONFIGS\" PROFILE_BACKENDS=\"$BACKENDS\", $TIME s per \
direction, PROFILE_TRACE=$TRACE."
cleanup() {
    guest_iperf_stop
    netns_down "$NS"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
for b in $BACKENDS; do
    mkdir -p "$OUT/$b"
    case $b in
    tap) netns_up "$NS" 1 "$OUT/tap" ;;
    slirp) guest_iperf_start "$OUT/slirp/iperf3-server.log" ;;
    *) die "unknown backend '$b' in PROFILE_BACKENDS" "use tap and/or slirp" ;;
    esac
done

# perf_attach PIDFILE PERFDATA: once QEMU's pid is known, record it
# until it exits.
perf_attach() {
    local pidfile=$1 data=$2
    for _ in $(seq 1 100); do
        [ -s "$pidfile" ] && break
        sleep 0.1
    done
    [ -s "$pidfile" ] || { note "QEMU's pid never came: no host profile"; return 0; }
    exec perf record -q -e cpu-clock -F 999 -k CLOCK_REALTIME \
        -p "$(cat "$pidfile")" -o "$data" >/dev/null 2>"$data.err"
}

n=0
total=$(($(wc -w <<<"$CONFIGS") * $(wc -w <<<"$BACKENDS")))
for b in $BACKENDS; do
  for c in $CONFIGS; do
    n=$((n + 1))
    dir=$OUT/$b/$c
    mkdir -p "$dir"
    step "profile $n/$total: $b $c ($TIME s up, $TIME s down)"
    case $b in
    tap) ip netns exec "$NS" python3 "$NCM_TOP/scripts/bench/recv-file.py" \
            "$dir/port" "$dir/guest.tgz" 600 10.0.2.2 2>"$dir/recv.err" & ;;
    *) python3 "$NCM_TOP/scripts/bench/recv-file.py" "$dir/port" "$dir/guest.tgz" 600 \
            2>"$dir/recv.err" & ;;
    esac
    recv=$!
    for _ in $(seq 1 50); do [ -s "$dir/port" ] && break; sleep 0.1; done
    [ -s "$dir/port" ] || die "the symbol receiver did not start" "see $dir/recv.err"

    config_guest_cmd "$c" "$GDIR" PROFILE_CONFIGS \
        "ncm.time=$TIME ncm.parallel=1 ncm.ping=5 ncm.symbols=$(cat "$dir/port")" \
        "$b" "$NS"
    sampler_sock=$(mktemp -u /tmp/ncm-sampler.XXXXXX)
    # debug-threads: the vCPU thread is called "CPU 0/TCG" in perf
    GUEST_CMD+=(-name "profile-$c,debug-threads=on"
        -qmp "unix:$sampler_sock,server=on,wait=off")
    if [ "$TRACE" = 1 ]; then
        GUEST_CMD+=(-msg timestamp=on -D "$dir/trace.log")
        for e in $TRACE_EVENTS; do GUEST_CMD+=(-trace "enable=$e"); done
    fi
    python3 "$NCM_TOP/scripts/bench/guest-sampler.py" "$sampler_sock" \
        "$dir/guest-rip.txt" 600 2>"$dir/sampler.err" &
    sampler=$!
    rm -f "$dir/qemu.pid"
    perf_attach "$dir/qemu.pid" "$dir/perf.data" &
    perf=$!

    bench_boot "$dir/console.log" 600 "$CONFIG_QOM" "$dir/qemu.pid" || true
    mv "$dir/console.log.phases" "$dir/phases.txt"
    wait "$sampler" "$perf" || true
    wait "$recv" || note "$c: the guest sent no symbols (see $dir/recv.err)"
    rm -f "$sampler_sock"
    grep -q 'NCMTEST phase=done' "$dir/console.log" ||
        note "$c did not finish: see ${dir#"$NCM_TOP"/}/console.log"
    if [ -s "$dir/perf.data" ]; then
        perf script -i "$dir/perf.data" -F comm,tid,time,ip,sym,dso \
            > "$dir/perf.txt" 2>/dev/null || true
    else
        note "$c: perf recorded nothing, so no host profile" \
            "see ${dir#"$NCM_TOP"/}/perf.data.err (kernel.perf_event_paranoid?)"
    fi
  done
done
cleanup

step "summarising"
{
echo "$PROVENANCE"
echo "accelerator: $GUEST_ACCEL ($GUEST_ACCEL_WHY)"
for b in $BACKENDS; do
    echo "##### backend: $b"
    # shellcheck disable=SC2086 # CONFIGS is a list of names
    python3 "$NCM_TOP/scripts/bench/profile-report.py" "$OUT/$b" $CONFIGS
done
} | tee "$OUT/report.txt"
note "for docs/performance.md: copy report.txt into docs/performance/" \
     "(its README.md says which names), then make perf-doc"
