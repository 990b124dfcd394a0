#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Live migration under traffic: boot the test guest with usb-ncm-dl (64 KiB
# NTBs), run iperf3 up and down at the same time plus a ping every 100 ms,
# and move the guest to a second QEMU process in the middle of it.
#
#   tests/guest/run-migrate-test.sh [CONTROLLER] [DEVICE[,PROPS]]
#
#   CONTROLLER  xhci (default), xhci-hs, ehci, uhci, ohci (as for
#               run-guest-test.sh)
#   DEVICE      usb-ncm-dl (default)
#
# The network: a private network namespace (removed at the end) with tap0
# = 10.0.2.2/24 and iperf3 servers on 5201 and 5202. Both QEMUs get the
# same command line with -netdev stream to tests/guest/migrate-relay.py,
# which holds tap0 and passes the host's frames to whichever QEMU sent the
# last frame (why not a tap in each QEMU, or slirp: see that file). The
# destination adds -incoming unix:SOCKET and waits from the start; MIGRATE_AT
# seconds after the guest's traffic starts, QMP migrate on the source
# (tests/guest/migrate-qmp.py), and once it completed and the destination
# runs, the source quits. A host-side ping (10 per second, from the
# namespace) times the outage on the wall clock: the guest's clock stands
# still while QEMU is stopped, so its own ping sees only the packets lost
# at the switch.
#
# Checks (guest/migrate-CONTROLLER/...): boot, driver, ntb-64k, traffic,
# migrate, dest-runs, iperf-up, iperf-down, ping-gap (host-side longest
# gap under MIGRATE_MAX_GAP_MS), ping-after (20 of 20 after the run),
# device-kept (no USB disconnect, no second cdc_ncm bind, no host
# controller error in the guest), poweroff. A "RESULT" note has the
# numbers.
#
# Environment: MIGRATE_TIME (iperf3 seconds, 30), MIGRATE_AT (seconds of
#   traffic before the migrate command, 10), MIGRATE_MAX_GAP_MS (10000),
#   MIGRATE_PARAMS ("max-bandwidth=...,downtime-limit=..." for
#   migrate-set-parameters), MIGRATE_TRACE ("usb_xhci_*,usb_ncm_*": QEMU
#   trace events, in the destination from its start and in the source from
#   the migrate command on, into build/guest-logs/CNAME/trace-{src,dst}.log),
#   GUEST_TIMEOUT (300 s per QEMU), KERNEL, QEMU, NCM_APPEND, QEMU_EXTRA.
#   MIGRATE_DST_QEMU: the destination's qemu-system-x86_64 when it is
#   another build (another QEMU version: build/10.2/qemu/...), with
#   MIGRATE_MACHINE (pc-q35-10.0: the older version's machine type, which
#   both know) on both sides; the checks are named
#   guest/migrate-CONTROLLER-<source version>-to-<destination version>/...
# Needs root (network namespace, tap). Logs: build/guest-logs/CNAME.log
# (both consoles, source then destination) and build/guest-logs/CNAME/.
set -euo pipefail
. "$(dirname "$0")/../../scripts/setup/common.sh"
. "$NCM_TOP/tests/guest/lib.sh"
# netns_up / netns_down: the namespace with tap0 and an iperf3 server
. "$NCM_TOP/tests/guest/netns.sh"

case ${1:-} in -h|--help) sed -n '3,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
CTRL=${1:-xhci}
DEVICE=${2:-${NCM_DEVICE:-usb-ncm-dl}}
GUEST_TIMEOUT=${GUEST_TIMEOUT:-300}
MIG_TIME=${MIGRATE_TIME:-30}
MIG_AT=${MIGRATE_AT:-10}
MAX_GAP=${MIGRATE_MAX_GAP_MS:-10000}
CNAME=migrate-${CTRL//,/-}
DST_QEMU=${MIGRATE_DST_QEMU:-}
guest_device_args "$CTRL" "$DEVICE"
qemu_version() { "$1" --version | sed -n 's/.*version \([0-9.]*\).*/\1/p'; }
if [ -n "$DST_QEMU" ]; then
    [ -x "$DST_QEMU" ] || die "MIGRATE_DST_QEMU=$DST_QEMU is not built" \
        "build it first: QEMU_VERSION=10.2 make qemu (build/10.2/qemu/)"
    guest_need_qemu
    CNAME=$CNAME-$(qemu_version "$GUEST_QEMU")-to-$(qemu_version "$DST_QEMU")
fi
LOGDIR=$NCM_BUILD/guest-logs/$CNAME
LOG=$NCM_BUILD/guest-logs/$CNAME.log
REL_LOG=${LOG#"$NCM_TOP"/}
SERVER=10.0.2.2
PORT=$NETNS_PORT                # up; down on PORT+1
GUEST_IP=10.0.2.15

runner_begin "guest/$CNAME"

step "migration test: $CNAME with $DEVICE"
guest_need_qemu
if ! guest_has_device "$GUEST_DEV_NAME"; then
    runner_fail device "$GUEST_QEMU has no -device $GUEST_DEV_NAME"
    exit 1
fi
if [ "$(id -u)" != 0 ]; then
    runner_skip "needs root: a network namespace with a tap device"
    exit 0
fi
step "guest image"
if ! GDIR=$(bash "$NCM_TOP/tests/guest/image.sh" --print-dir); then
    runner_fail image "tests/guest/image.sh failed, see the messages above"
    exit 1
fi

NS=ncm-mig-$$
RUN=$(mktemp -d /tmp/ncm-mig.XXXXXX)
HOSTPING_PID=""
cleanup() {
    [ -z "$HOSTPING_PID" ] || kill "$HOSTPING_PID" 2>/dev/null || true
    # the relay, both QEMUs and the iperf3 servers all run in $NS
    netns_down "$NS"
    rm -rf "$RUN"
}
trap cleanup EXIT
rm -rf "$LOGDIR"
mkdir -p "$LOGDIR"

step "network namespace $NS: tap0 $SERVER/24, iperf3 servers :$PORT :$((PORT + 1))"
netns_relay_up "$NS" "$LOGDIR" "$RUN/net.sock"

guest_qemu_cmd "$GDIR" "ncm.mode=migrate ncm.driver=$GUEST_DRIVER \
ncm.server=$SERVER ncm.port=$PORT ncm.time=$MIG_TIME ${NCM_APPEND:-}" \
    "$(netns_relay_netdev "$RUN/net.sock")"
base=("${GUEST_CMD[@]}")
if [ -n "${MIGRATE_MACHINE:-}" ]; then
    for i in "${!base[@]}"; do
        [ "${base[i]}" = q35 ] && [ "${base[i - 1]}" = -M ] &&
            base[i]=$MIGRATE_MACHINE
    done
fi

declare -A QPID QRC
# start_qemu NAME EXTRA...: QEMU in the namespace, console into
# LOGDIR/console-NAME.log, QMP on RUN/NAME.qmp
start_qemu() {
    local name=$1 clog=$LOGDIR/console-$1.log
    shift
    local cmd=("${base[@]/trace-@/trace-$name}" -qmp "unix:$RUN/$name.qmp,server=on,wait=off"
        -pidfile "$RUN/$name.pid" "$@")
    {
        printf '# %s %s QEMU\n# ' "$(date -u '+%Y-%m-%dT%H:%M:%SZ')" "$name"
        printf ' %q' "${cmd[@]}"
        printf '\n'
    } > "$clog"
    ip netns exec "$NS" timeout -k 10 "$GUEST_TIMEOUT" "${cmd[@]}" \
        </dev/null >>"$clog" 2>&1 &
    NETNS_PIDS+=($!)
    QPID[$name]=$!
}

# wait_for FILE PATTERN SECONDS PID: until FILE has PATTERN (0), PID
# ended (1) or the time is up (2)
wait_for() {
    local end=$((SECONDS + $3))
    while ! grep -aq "$2" "$1" 2>/dev/null; do
        kill -0 "$4" 2>/dev/null || { grep -aq "$2" "$1" 2>/dev/null && return 0; return 1; }
        [ "$SECONDS" -ge "$end" ] && return 2
        sleep 0.2
    done
    return 0
}

# sysrq NAME: a stuck guest's tasks and CPUs on its console, then QEMU
# is stopped
sysrq_and_stop() {
    timeout 30 python3 "$NCM_TOP/tests/guest/qmp-sysrq.py" "$RUN/$1.qmp" 8 w l t \
        >> "$LOGDIR/console-$1.log" 2>&1 || true
    if [ -s "$RUN/$1.pid" ]; then kill -9 "$(cat "$RUN/$1.pid")" 2>/dev/null || true; fi
}

t0=$SECONDS
if [ -n "${MIGRATE_TRACE:-}" ]; then
    # debugging: QEMU trace events into LOGDIR/trace-*.log, in the
    # destination from the start, in the source from the migrate command on
    base+=(-D "$LOGDIR/trace-@.log")
fi
step "source QEMU: booting the guest (TCG); console: ${LOGDIR#"$NCM_TOP"/}/console-src.log"
start_qemu src
step "destination QEMU: waiting with -incoming unix:$RUN/mig.sock"
dst_trace=()
for ev in $(echo "${MIGRATE_TRACE:-}" | tr , " "); do dst_trace+=(-trace "$ev"); done
if [ -n "$DST_QEMU" ]; then
    step "destination is another build: $DST_QEMU ($(qemu_version "$DST_QEMU")), machine ${MIGRATE_MACHINE:-q35}"
    base[0]=$DST_QEMU
fi
start_qemu dst "${dst_trace[@]}" -incoming "unix:$RUN/mig.sock"

migrated=0
traffic=0
r=0
wait_for "$LOGDIR/console-src.log" 'NCMTEST phase=migrate-traffic' 240 "${QPID[src]}" || r=$?
[ "$r" = 0 ] && traffic=1
if [ "$r" = 2 ]; then
    step "guest: no traffic phase within 240s; SysRq w/l/t, then QEMU is stopped"
    printf '# guest stalled; sending SysRq 8 w l t\n' >> "$LOGDIR/console-src.log"
    sysrq_and_stop src
fi
if [ "$traffic" = 1 ]; then
    w_traffic=$EPOCHREALTIME
    step "guest: iperf3 up and down (${MIG_TIME}s) and ping -i 0.1 running; migrating in ${MIG_AT}s"
    ip netns exec "$NS" ping -D -i 0.1 -W 1 "$GUEST_IP" > "$LOGDIR/hostping.log" 2>&1 &
    HOSTPING_PID=$!
    sleep "$MIG_AT"
    step "QMP migrate (source -> destination)"
    if MIGRATE_PARAMS=${MIGRATE_PARAMS:-} MIGRATE_TRACE=${MIGRATE_TRACE:-} python3 "$NCM_TOP/tests/guest/migrate-qmp.py" \
        "$RUN/src.qmp" "$RUN/dst.qmp" "unix:$RUN/mig.sock" 120 \
        > "$LOGDIR/qmp.log" 2>&1; then
        migrated=1
    fi
    sed 's/^/    /' "$LOGDIR/qmp.log"
    guest=dst
    [ "$migrated" = 1 ] || guest=src
    step "waiting for the guest's results (${guest} QEMU)"
    r=0
    wait_for "$LOGDIR/console-$guest.log" 'NCMTEST phase=migrate-results' $((MIG_TIME + 90)) \
        "${QPID[$guest]}" || r=$?
    [ -z "$HOSTPING_PID" ] || kill -INT "$HOSTPING_PID" 2>/dev/null || true
    if [ "$r" = 0 ]; then
        wait_for "$LOGDIR/console-$guest.log" 'NCMTEST dmesg-end' 90 "${QPID[$guest]}" || r=$?
    fi
    if [ "$r" = 2 ]; then
        step "guest: no result in time; SysRq w/l/t, then QEMU is stopped"
        printf '# guest stalled; sending SysRq 8 w l t\n' >> "$LOGDIR/console-$guest.log"
        sysrq_and_stop "$guest"
    fi
fi
for q in src dst; do
    p=${QPID[$q]}
    # the destination powers off after the dmesg dump; the source quits
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
    if kill -0 "$p" 2>/dev/null; then
        [ -s "$RUN/$q.pid" ] && kill "$(cat "$RUN/$q.pid")" 2>/dev/null
        printf '# stopped by the test\n' >> "$LOGDIR/console-$q.log"
    fi
    rc=0
    wait "$p" 2>/dev/null || rc=$?
    QRC[$q]=$rc
done
wait "$HOSTPING_PID" 2>/dev/null || true
HOSTPING_PID=""
cat "$LOGDIR/console-src.log" "$LOGDIR/console-dst.log" | tr -d '\r' > "$LOG"
run_s=$((SECONDS - t0))
step "done after ${run_s}s (source QEMU status ${QRC[src]}, destination ${QRC[dst]})"

v() { guest_val "$LOG" "$1"; }
q() { sed -n "s/^$1=//p" "$LOGDIR/qmp.log" | head -n1; }
is() { if [ "$(v "$1")" = "$2" ]; then echo 0; else echo 1; fi; }

for f in src dst; do
    e=$(guest_qemu_error "$LOGDIR/console-$f.log")
    [ -n "$e" ] && QEMU_DIED="${QEMU_DIED:+$QEMU_DIED; }$f QEMU: $e"
    # SANITIZE=1: an ASan/UBSan report is a FAIL naming its console log
    sanitizer_fail "guest/$CNAME/sanitizer-$f" "$LOGDIR/console-$f.log" ||
        RUNNER_NFAIL=$((RUNNER_NFAIL + 1))
done
lockup=$(guest_lockup "$LOG")
hcerr=$(guest_hc_error "$LOG")
[ -n "$lockup" ] && QEMU_DIED="${QEMU_DIED:+$QEMU_DIED; }guest kernel: $lockup"

if ! grep -q 'NCMTEST phase=boot' "$LOG"; then
    runner_fail boot "no output from /init (source QEMU status ${QRC[src]}: $(grep -av '^#' "$LOGDIR/console-src.log" | grep -a . | tail -n1 | cut -c1-200))"
    exit 1
fi
runner_pass boot
err=$(v error)
runner_check driver "$(is driver "$GUEST_DRIVER")" "driver=$(v driver), expected $GUEST_DRIVER${err:+; guest: $err}"
r=1
[ "$(v rx_max.readback)" = 65536 ] && [ "$(v tx_max.readback)" = 65536 ] && r=0
runner_check ntb-64k "$r" "rx_max $(v rx_max.write) -> $(v rx_max.readback), tx_max $(v tx_max.write) -> $(v tx_max.readback)"
r=1
[ "$traffic" = 1 ] && [ "$(v ping_received)" = 10 ] && r=0
runner_check traffic "$r" "$([ "$traffic" = 1 ] || echo 'the guest never started its traffic; ')10 pings first: $(v ping_received) answered"
[ "$traffic" = 1 ] || { note "full console log: $REL_LOG"; exit 1; }

mst=$(q mig_status)
runner_check migrate "$([ "$mst" = completed ] && echo 0 || echo 1)" \
    "status ${mst:-none} ($(q mig_statuses))${mst:+; $(q mig_error)}; see ${LOGDIR#"$NCM_TOP"/}/qmp.log"
r=1
[ "$migrated" = 1 ] && grep -aq 'NCMTEST phase=migrate-results' "$LOGDIR/console-dst.log" && r=0
runner_check dest-runs "$r" "destination $(q dst_status); guest output after the switch: $(grep -av '^#' "$LOGDIR/console-dst.log" | grep -ac NCMTEST) lines"

# when the traffic stopped: the end of the last second with data
last_data() {
    v "mig_$1_intervals" | tr ' ' '\n' | awk -F: '$2 + 0 > 0 { e = $1 } END { print e + 0 }'
}
m0=$(awk -v a="$(q mig_start)" -v w="$w_traffic" 'BEGIN { printf "%.1f", a - w }')
m1=$(awk -v a="$(q mig_end)" -v w="$w_traffic" -v d="$(q mig_downtime_ms)" \
    'BEGIN { printf "%.1f", a - w - d / 1000 }')
# checks iperf-up, iperf-down
for d in up down; do
    r=1
    err=$(v "mig_${d}_error")
    [ "$(v "mig_${d}_rc")" = 0 ] && [ -z "$err" ] && r=0
    runner_check "iperf-$d" "$r" "iperf3 rc=$(v "mig_${d}_rc")${err:+: $err}; data until ${MIG_TIME}s expected, last at $(last_data "$d")s, the migration ran at ${m0}-${m1}s"
done

# The host-side ping: replies "[epoch] 64 bytes from ...: icmp_seq=N ...";
# it was stopped with SIGINT, its last echo request may still have been on
# its way: that one does not count as sent
read -r hp_sent hp_got hp_gap hp_gap_at hp_swgap < <(awk -v end="$(q mig_end)" '
    /icmp_seq=/ {
        ts = substr($1, 2, length($1) - 2) + 0
        if (last && ts - last > gap) { gap = ts - last; at = last }
        if (last && last < end && ts >= end) sw = ts - last
        last = ts
        s = $0; sub(/.*icmp_seq=/, "", s); seq[s + 0] = 1
    }
    / packets transmitted/ { sent = $1 }
    END {
        if (sent && !(sent in seq)) sent--
        for (i = 1; i <= sent; i++) got += (i in seq)
        printf "%d %d %d %d %d\n", sent, got, gap * 1000,
            (end ? (at - end) * 1000 : 0), sw * 1000
    }
' "$LOGDIR/hostping.log")
r=1
[ "$hp_got" -gt 0 ] && [ "$hp_gap" -lt "$MAX_GAP" ] && r=0
runner_check ping-gap "$r" "host-side ping: longest gap ${hp_gap} ms (limit $MAX_GAP), $((hp_sent - hp_got)) of $hp_sent lost"
r=1
[ "$(v ping_after_received)" = 20 ] && r=0
runner_check ping-after "$r" "$(v ping_after_received) of 20 answered after the run"

disc=$(guest_dmesg "$LOG" | grep -ac 'USB disconnect' || true)
binds=$(guest_dmesg "$LOG" | grep -ac 'register .cdc_ncm' || true)
r=1
[ "$disc" = 0 ] && [ "$binds" -le 1 ] && [ -z "$hcerr" ] && r=0
runner_check device-kept "$r" "guest dmesg: $disc USB disconnects, cdc_ncm bound $binds times${hcerr:+, $hcerr}"
r=1
[ "${QRC[dst]}" = 0 ] && grep -aq 'NCMTEST phase=done' "$LOGDIR/console-dst.log" && r=0
runner_check poweroff "$r" "destination QEMU status ${QRC[dst]}"

# iperf3 rates before and after: the guest's interval ends (its seconds
# since the traffic started) against the wall clock of the migration
# (the guest runs in step with it but for the downtime)
rates() {
    awk -v iv="$(v "mig_$1_intervals")" -v m0="$2" -v m1="$3" 'BEGIN {
        n = split(iv, a, " ")
        for (i = 1; i <= n; i++) {
            split(a[i], p, ":"); e = p[1] + 0
            if (e >= 3 && e <= m0) { b += p[2]; nb++ }
            if (e - 1 >= m1 + 1) { f += p[2]; nf++ }
            if (e > m0 && e - 1 < m1 + 1 && (min == "" || p[2] + 0 < min)) min = p[2] + 0
        }
        printf "%s -> %s (lowest second around the switch: %s)",
            nb ? sprintf("%.0f", b / nb) : "?", nf ? sprintf("%.0f", f / nf) : "?",
            min == "" ? "?" : min
    }'
}
# the relay's switch to the destination: "[epoch +rel] switch: ..."
switch=$(awk -v t="$(q mig_start)" '/switch:/ && substr($1, 2) + 0 >= t + 0 {
    sub(/.*switch: host frames now go to /, ""); print; exit }' "$LOGDIR/relay.log")
note "RESULT $CNAME: migration $(q mig_total_ms) ms (${m0}s into the traffic), downtime" \
    "$(q mig_downtime_ms) ms, $(q mig_ram_mb) MB at $(q mig_mbps) Mbit/s;" \
    "host ping: $((hp_sent - hp_got)) of $hp_sent lost, longest gap $hp_gap ms" \
    "(starting ${hp_gap_at} ms from the end of the migration), across the" \
    "switch-over $hp_swgap ms;" \
    "guest ping: $(v mig_ping_lost) of $(v mig_ping_sent) lost, longest gap $(v mig_ping_gap_ms) ms" \
    "(guest time), max RTT $(v mig_ping_max_ms) ms;" \
    "iperf3 Mbit/s before -> after: up $(rates up "$m0" "$m1"), down $(rates down "$m0" "$m1");" \
    "whole run up $(v mig_up_mbps), down $(v mig_down_mbps); ${run_s}s"
note "relay: host frames to ${switch:-(no switch after the migrate command)}"
if [ "$RUNNER_NFAIL" -gt 0 ]; then
    note "full console log: $REL_LOG (source, then destination); QMP: ${LOGDIR#"$NCM_TOP"/}/qmp.log"
    note "guest dmesg (USB/network lines):"
    guest_dmesg "$LOG" | grep -iE 'usb [0-9]|cdc|usbnet|xhci|ehci|error|fail|warn' |
        tail -n 25 | sed 's/^/      /' || true
fi
runner_end
