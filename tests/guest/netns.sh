# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck shell=bash disable=SC2034
#
# The network backends of make bench, make profile and make bench-scaling,
# and the private network of the live-migration test and the soak
# (tests/guest/run-migrate-test.sh, run-soak.sh: netns_relay_up).  Sourced after tests/guest/lib.sh.
#
# tap:   a private network namespace holds tap0..tapN-1 (tapI is
#        10.0.(2+I).2/24; the guest keeps 10.0.2.15 on its first NIC), one
#        iperf3 server per tap and QEMU itself (ip netns exec). Nothing
#        leaves the namespace: it has no other interface but lo.
# slirp: -netdev user, the iperf3 server on the host's 127.0.0.1 (the
#        guest's 10.0.2.2), as before.
#
# netns_up NAME COUNT makes the namespace (removing a stale one of that
# name first, with what still runs in it), netns_down NAME removes it; call
# netns_down from an EXIT trap.

NETNS_PIDS=()
NETNS_PORT=5201

netns_need() {
    command -v ip >/dev/null ||
        die "ip (iproute2) is missing" "run: make deps (or apt-get install iproute2)"
    [ "$(id -u)" = 0 ] ||
        die "the tap backend needs root (a network namespace and tap devices)" \
            "run as root, or use the slirp backend only (BENCH_BACKENDS=slirp)"
}

# netns_down NAME: stop what we started in it, then anything left in it
# (a stale namespace of a killed run), then delete it. Idempotent.
netns_down() {
    local ns=$1 p
    for p in "${NETNS_PIDS[@]}"; do
        kill "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    NETNS_PIDS=()
    grep -qw "^$ns" <<<"$(ip netns list 2>/dev/null)" || return 0
    for p in $(ip netns pids "$ns" 2>/dev/null); do
        kill "$p" 2>/dev/null || true
    done
    sleep 0.3
    for p in $(ip netns pids "$ns" 2>/dev/null); do
        kill -9 "$p" 2>/dev/null || true
    done
    ip netns del "$ns" 2>/dev/null || true
}

# netns_up NAME COUNT LOGDIR: the namespace with COUNT taps and an iperf3
# server on each (port NETNS_PORT, bound to the tap's address).
netns_up() {
    local ns=$1 count=$2 logdir=$3 i addr
    netns_need
    netns_down "$ns"
    ip netns add "$ns" ||
        die "could not create network namespace $ns" "is this a container without CAP_SYS_ADMIN?"
    ip netns exec "$ns" ip link set lo up
    for i in $(seq 0 $((count - 1))); do
        addr=10.0.$((2 + i)).2
        ip netns exec "$ns" ip tuntap add "tap$i" mode tap ||
            die "could not create tap$i in $ns" "is /dev/net/tun there (modprobe tun)?"
        ip netns exec "$ns" ip addr add "$addr/24" dev "tap$i"
        ip netns exec "$ns" ip link set "tap$i" up
        ip netns exec "$ns" iperf3 -s -B "$addr" -p "$NETNS_PORT" \
            >"$logdir/iperf3-server-tap$i.log" 2>&1 &
        NETNS_PIDS+=($!)
    done
    sleep 0.3
    for i in "${NETNS_PIDS[@]}"; do
        kill -0 "$i" 2>/dev/null ||
            die "an iperf3 server in $ns did not start" "see $logdir/iperf3-server-tap*.log"
    done
}

# backend_port BACKEND: the iperf3 port the guest must use on BACKEND
backend_port() {
    case $1 in
    slirp) echo "$GUEST_IPERF_PORT" ;;
    tap) echo "$NETNS_PORT" ;;
    *) die "unknown backend '$1'" "use tap or slirp" ;;
    esac
}

# netns_tap_netdev [I]: the -netdev of netdev nI on tap I of the
# namespace (QEMU run inside it: ip netns exec)
netns_tap_netdev() {
    echo "tap,id=n${1:-0},ifname=tap${1:-0},script=no,downscript=no"
}

# backend_netdev BACKEND: the NETDEV of guest_qemu_cmd for BACKEND
backend_netdev() {
    case $1 in
    slirp) echo user,id=n0 ;;
    tap) netns_tap_netdev 0 ;;
    *) die "unknown backend '$1'" "use tap or slirp" ;;
    esac
}

# backend_apply BACKEND NS [COUNT]: complete GUEST_CMD (made by
# guest_qemu_cmd with backend_netdev BACKEND) for BACKEND: netdevs n1..
# nCOUNT-1 (more -netdev user for slirp, tap1.. for tap), and for tap QEMU
# run inside NS.
backend_apply() {
    local backend=$1 ns=$2 count=${3:-1} i
    for i in $(seq 1 $((count - 1))); do
        case $backend in
        slirp) GUEST_CMD+=(-netdev "user,id=n$i") ;;
        tap) GUEST_CMD+=(-netdev "$(netns_tap_netdev "$i")") ;;
        *) die "unknown backend '$backend'" "use tap or slirp" ;;
        esac
    done
    [ "$backend" = tap ] && GUEST_CMD=(ip netns exec "$ns" "${GUEST_CMD[@]}")
    return 0
}

# netns_relay_up NAME LOGDIR SOCK: the private network of the live
# migration and the soak: netns_up NAME 1 LOGDIR, a second iperf3 server
# on port NETNS_PORT+1 (one for each direction), and
# tests/guest/migrate-relay.py between tap0 and the unix socket SOCK,
# where QEMU's -netdev stream connects (netns_relay_netdev; the relay
# outlives the switch from one QEMU to the other); waits for SOCK.
netns_relay_up() {
    local ns=$1 logdir=$2 sock=$3 port=$((NETNS_PORT + 1))
    netns_up "$ns" 1 "$logdir"
    ip netns exec "$ns" iperf3 -s -B 10.0.2.2 -p "$port" \
        >"$logdir/iperf3-server-$port.log" 2>&1 &
    NETNS_PIDS+=($!)
    ip netns exec "$ns" python3 "$NCM_TOP/tests/guest/migrate-relay.py" tap0 "$sock" \
        2>"$logdir/relay.log" &
    NETNS_PIDS+=($!)
    for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done
    [ -S "$sock" ] || die "the relay did not start" "see $logdir/relay.log"
}

# netns_relay_netdev SOCK: the NETDEV of guest_qemu_cmd for a -netdev
# stream client of SOCK (the relay of netns_relay_up)
netns_relay_netdev() {
    echo "stream,id=n0,server=off,addr.type=unix,addr.path=$1"
}
