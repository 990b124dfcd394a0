#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Jumbo frames as far as Linux's cdc_ncm goes: it caps the datagram at
# 8192 bytes (CDC_NCM_MAX_DATAGRAM_SIZE), an MTU of 8178.  The device gets
# max-segment-size=8192; the guest sets MTU 8178 (cdc_ncm then sends
# SET_MAX_DATAGRAM_SIZE(8192)), pings the host with 8000-byte payloads,
# runs iperf3 each way, while the host pings the guest with 8000-byte
# payloads and fragmentation forbidden (ping -M do) over a tap whose MTU
# is 8178, in a private network namespace (root needed), so that every
# echo and reply is one 8042-byte frame through the device.
#
#   tests/guest/run-jumbo-test.sh [CONTROLLER] [DEVICE[,PROPS]]
#
# CONTROLLER: xhci (default), ehci, ... as for run-guest-test.sh; DEVICE:
# usb-ncm-dl (default).  Environment: KERNEL, QEMU, GUEST_TIMEOUT (300 s),
# IPERF_TIME (3 s), LOG_NAME.  Prints "PASS:/FAIL: guest/jumbo-CTRL/CHECK";
# console log build/guest-logs/jumbo-CTRL.log.
set -euo pipefail
. "$(dirname "$0")/../../scripts/setup/common.sh"
. "$NCM_TOP/tests/guest/lib.sh"
. "$NCM_TOP/tests/guest/netns.sh"

case ${1:-} in -h|--help) sed -n '3,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
CTRL=${1:-xhci}
DEVICE=${2:-usb-ncm-dl}
GUEST_TIMEOUT=${GUEST_TIMEOUT:-300}
MTU=8178
CNAME=jumbo-${CTRL//,/-}
LOG_NAME=${LOG_NAME:-$CNAME}
LOG=$NCM_BUILD/guest-logs/$LOG_NAME.log
REL_LOG=${LOG#"$NCM_TOP"/}
NS=ncm-jumbo-$$
GUEST_IP=10.0.2.15
GUEST_MAC=52:54:00:12:34:56

runner_begin "guest/$CNAME" "$REL_LOG"

step "guest jumbo test: $CTRL with $DEVICE,max-segment-size=8192, MTU $MTU"
guest_need_qemu
netns_need
guest_device_args "$CTRL" "$DEVICE,max-segment-size=8192,id=ncm0,mac=$GUEST_MAC"
if ! GDIR=$(bash "$NCM_TOP/tests/guest/image.sh" --print-dir); then
    runner_fail image "tests/guest/image.sh failed, see the messages above"
    exit 1
fi
mkdir -p "$NCM_BUILD/guest-logs"
rm -f "$LOG" "$LOG".*
PING_PID=""
cleanup() {
    [ -n "$PING_PID" ] && kill "$PING_PID" 2>/dev/null
    netns_down "$NS"
}
trap cleanup EXIT
netns_up "$NS" 1 "$NCM_BUILD/guest-logs"
ip netns exec "$NS" ip link set tap0 mtu "$MTU"
# The host pings the guest from before it boots.  With a neighbour entry
# to learn, the host's unresolved queue fills with 8 KB echoes (ping:
# "No buffer space available") and the reply to one of the guest's first
# pings was dropped from it: 19 of 20, a loss in the host's ARP, not in
# the device.  The guest's MAC is ours to set, so the host knows it.
ip netns exec "$NS" ip neigh replace "$GUEST_IP" lladdr "$GUEST_MAC" \
    dev tap0 nud permanent

guest_qemu_cmd "$GDIR" "ncm.mode=test ncm.driver=$GUEST_DRIVER \
ncm.server=10.0.2.2 ncm.port=$NETNS_PORT ncm.time=${IPERF_TIME:-3} \
ncm.mtu=$MTU ncm.ping_sizes=56,8000 ${NCM_APPEND:-}" "$(netns_tap_netdev 0)"
GUEST_CMD=(ip netns exec "$NS" "${GUEST_CMD[@]}")

# the host's pings, all the time the guest runs; answered once its
# interface is up with MTU 8178
ip netns exec "$NS" ping -i 0.5 -W 1 -s 8000 -M "do" "$GUEST_IP" \
    > "$LOG.hostping" 2>&1 &
PING_PID=$!

step "booting the guest (TCG, timeout ${GUEST_TIMEOUT}s); log: $REL_LOG"
rc=0
t0=$SECONDS
guest_run_logged "$LOG" "$GUEST_TIMEOUT" || rc=$?
boot_s=$((SECONDS - t0))
kill -INT "$PING_PID" 2>/dev/null || true
wait "$PING_PID" 2>/dev/null || true
PING_PID=""
step "guest finished (QEMU exit status $rc) after ${boot_s}s"

v() { guest_val "$LOG" "$1"; }
if ! grep -q 'NCMTEST phase=boot' "$LOG"; then
    runner_fail boot "no output from /init (QEMU status $rc)"
    exit 1
fi
qerr=$(guest_qemu_error "$LOG")
[ -z "$qerr" ] || runner_fail qemu "QEMU aborted: $qerr"
r=1; [ "$(v driver)" = cdc_ncm ] && r=0
runner_check driver "$r" "driver=$(v driver)"
r=1; [ "$(v mtu)" = 1500 ] && ! grep -q "NCMTEST mtu.set=fail" "$LOG" && r=0
runner_check mtu "$r" \
    "interface MTU $(v mtu) before, set to $MTU: $(grep -c 'NCMTEST mtu.set=fail' "$LOG") failures"
r=1; [ "$(v ping_received)" = 20 ] && r=0
runner_check ping-56 "$r" "$(v ping_received) of 20"
r=1; [ "$(v ping8000_received)" = 20 ] && r=0
runner_check ping-8000-guest-to-host "$r" \
    "$(v ping8000_received) of 20 replies to 8000-byte pings"
replies=$(grep -c 'bytes from' "$LOG.hostping" || true)
big=$(grep -c '^8008 bytes from' "$LOG.hostping" || true)
r=1; [ "$big" -ge 10 ] && [ "$big" = "$replies" ] && r=0
runner_check ping-8000-host-to-guest "$r" \
    "$big replies of 8008 bytes ($replies in all) to ping -s 8000 -M do over a tap with MTU $MTU"
# tcp_ok DIR: iperf3 finished with some throughput
tcp_ok() {
    [ "$(v "iperf_$1_rc")" = 0 ] &&
        awk -v m="$(v "iperf_$1_receiver_mbps")" 'BEGIN { exit !(m > 0) }'
}
r=1; tcp_ok up && r=0
runner_check tcp-up "$r" \
    "rc=$(v iperf_up_rc), $(v iperf_up_receiver_mbps | grep . || echo no) Mbit/s"
r=1; tcp_ok down && r=0
runner_check tcp-down "$r" \
    "rc=$(v iperf_down_rc), $(v iperf_down_receiver_mbps | grep . || echo no) Mbit/s"
r=1; [ "$rc" = 0 ] && grep -q "NCMTEST phase=done" "$LOG" && r=0
runner_check poweroff "$r" "QEMU status $rc"
note "$CNAME: up $(v iperf_up_receiver_mbps) down $(v iperf_down_receiver_mbps) Mbit/s at MTU $MTU, 8000-byte ping $(v ping8000_rtt_ms) ms, host pings answered $big; boot ${boot_s}s"
runner_end
