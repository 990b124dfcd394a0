#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck shell=dash
#
# /init of the usb-ncm-dl test guest (busybox ash). tests/guest/image.sh
# copies this file into the initramfs.
#
# Kernel command line parameters (all optional):
#   ncm.mode=test|run|bench|stress|scale|shell   default shell
#   ncm.mode=replug|suspend|mcast|ntbsweep   see tests/guest/init-pm.sh
#   ncm.mode=profiles      see tests/guest/init-profiles.sh
#   ncm.mode=soak          see tests/guest/init-soak.sh (make soak)
#   ncm.driver=cdc_ncm     driver whose interface to use (cdc_ether for
#                          usb-net, virtio_net for virtio-net-pci, any = first)
#   ncm.wait=60            seconds to wait for that interface, then any non-lo
#   ncm.mac=MAC            of several such interfaces, the one with this MAC
#   ncm.server=10.0.2.2    iperf3 server (slirp's host address)
#   ncm.port=5201          iperf3 port
#   ncm.time=5             iperf3 seconds per direction
#   ncm.parallel=1         iperf3 -P; a list (1,4) runs each, keys get _pN
#   ncm.dirs=up,down       iperf3 directions (up: guest->host, down: -R)
#   ncm.rx_max=65536 ncm.tx_max=65536   written to cdc_ncm sysfs; "none"
#                          skips (bench mode default: none); "max" writes
#                          dwNtbInMaxSize / dwNtbOutMaxSize
#   ncm.mtu=N              set the interface MTU
#   ncm.ip=10.0.2.15/24 ncm.gw=10.0.2.2
#   ncm.ping=20            ping count (0 skips)
#   ncm.ping_sizes=56      ping payload sizes, each a run of ncm.ping pings;
#                          keys ping_* for 56, ping<size>_* for the others
#   ncm.live_raise=0       1: boot with the driver's NTB sizes (rx_max and
#                          tx_max default to "none"), and after the TCP runs
#                          write ncm.live_value to rx_max, then tx_max, with
#                          the interface up and traffic running (iperf3 -R
#                          and a fast ping), ncm.live_rounds times (odd; back
#                          to the first sizes in between); a write that does
#                          not return within ncm.raise_timeout s is a hang,
#                          reported with the writer's kernel stack and sysrq
#                          w/l/t; then ping again (keys ping_after_*)
#   ncm.live_value=65536 ncm.live_rounds=3 ncm.live_time=8
#   ncm.raise_timeout=30
#   ncm.stress=STEP,...    stress mode: the ncm-usbfs-stress steps to run
#                          (default: every one, see "ncm-usbfs-stress list");
#                          after each, cdc_ncm must bind again and 5 pings
#                          to the gateway must come back
#   ncm.stress_v=1         ncm-usbfs-stress -v (every URB completion)
#   ncm.carrier_wait=20    seconds to wait for carrier
#   ncm.sysfs=a=1,b=2      more cdc_ncm sysfs writes after rx_max/tx_max
#                          (e.g. tx_timer_usecs=5, min_tx_pkt=0)
#   ncm.intervals=1        print iperf3's per-second lines as
#                          "NCMTEST iperf_<dir>_interval=<end-s> <Mbit/s> <retr>"
#   ncm.udp=0              iperf3 UDP runs of 64-byte datagrams (0: none;
#                          N: offered rate N Mbit/s, each direction in DIRS)
#   ncm.cols=N ncm.rows=N  terminal size for the shell
#   ncm.scale=N            scale mode (ncm.mode=scale): N NICs at once,
#                          see scale_mode
#   ncm.mode=migrate       the host live-migrates QEMU under traffic, see
#                          migrate_mode (ncm.time: iperf3 seconds)
#   ncm.symbols=PORT       at the end, send the text symbols of
#                          /proc/kallsyms (modules included) and /proc/stat
#                          before/after each TCP run as a tar.gz to
#                          SERVER:PORT: scripts/bench/profile.sh listens there and
#                          maps the guest RIPs it samples to functions
#
# test/run/bench print machine-readable "NCMTEST key=value" lines, then dump
# dmesg between "NCMTEST dmesg-begin" / "NCMTEST dmesg-end" and power off.
# "NCMTEST phase=X" lines mark progress for the host scripts.

export PATH=/bin:/sbin:/usr/bin:/usr/sbin
export HOME=/root

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
# The initramfs has no /dev/console node: take it from devtmpfs now.
exec 0</dev/console 1>/dev/console 2>&1
# Only emergencies on the console from here on: our lines stay whole.
dmesg -n 1
# Every SysRq function, from /proc/sysrq-trigger and from the keyboard
# (tests/guest/lib.sh presses Alt-SysRq-8/w/l/t over QMP when we hang).
echo 1 > /proc/sys/kernel/sysrq
hostname ncm-guest
ip link set lo up

MODE=shell
DRIVER=cdc_ncm
WAIT=60
SERVER=10.0.2.2
PORT=5201
TIME=5
PARALLEL=1
PARALLEL_LIST=1
DIRS=up,down
RX_MAX=default
TX_MAX=default
MTU=
IPADDR=10.0.2.15/24
GW=10.0.2.2
PING=20
CARRIER_WAIT=20
SYSFS=
INTERVALS=0
UDP=0
COLS=
ROWS=
SYMBOLS=
PING_SIZES=56
LIVE_RAISE=0
LIVE_VALUE=65536
LIVE_TIME=8
LIVE_ROUNDS=3
RAISE_TIMEOUT=30
STRESS=
STRESS_V=
SCALE=1
MAC=

for arg in $(cat /proc/cmdline); do
    case $arg in
    ncm.mode=*) MODE=${arg#*=} ;;
    ncm.driver=*) DRIVER=${arg#*=} ;;
    ncm.wait=*) WAIT=${arg#*=} ;;
    ncm.server=*) SERVER=${arg#*=} ;;
    ncm.port=*) PORT=${arg#*=} ;;
    ncm.time=*) TIME=${arg#*=} ;;
    ncm.parallel=*) PARALLEL_LIST=${arg#*=} ;;
    ncm.dirs=*) DIRS=${arg#*=} ;;
    ncm.rx_max=*) RX_MAX=${arg#*=} ;;
    ncm.tx_max=*) TX_MAX=${arg#*=} ;;
    ncm.mtu=*) MTU=${arg#*=} ;;
    ncm.ip=*) IPADDR=${arg#*=} ;;
    ncm.gw=*) GW=${arg#*=} ;;
    ncm.ping=*) PING=${arg#*=} ;;
    ncm.carrier_wait=*) CARRIER_WAIT=${arg#*=} ;;
    ncm.sysfs=*) SYSFS=${arg#*=} ;;
    ncm.intervals=*) INTERVALS=${arg#*=} ;;
    ncm.udp=*) UDP=${arg#*=} ;;
    ncm.cols=*) COLS=${arg#*=} ;;
    ncm.rows=*) ROWS=${arg#*=} ;;
    ncm.symbols=*) SYMBOLS=${arg#*=} ;;
    ncm.ping_sizes=*) PING_SIZES=${arg#*=} ;;
    ncm.live_raise=*) LIVE_RAISE=${arg#*=} ;;
    ncm.live_value=*) LIVE_VALUE=${arg#*=} ;;
    ncm.live_time=*) LIVE_TIME=${arg#*=} ;;
    ncm.raise_timeout=*) RAISE_TIMEOUT=${arg#*=} ;;
    ncm.live_rounds=*) LIVE_ROUNDS=${arg#*=} ;;
    ncm.stress=*) STRESS=${arg#*=} ;;
    ncm.stress_v=1) STRESS_V=-v ;;
    ncm.scale=*) SCALE=${arg#*=} ;;
    ncm.mac=*) MAC=${arg#*=} ;;
    ncm.profiles=*) PROFILES=${arg#*=} ;;
    ncm.profile_rx=*) PROFILE_RX=${arg#*=} ;;
    esac
done
# bench and live_raise start from the driver's own NTB sizes
if [ "$RX_MAX" = default ]; then
    if [ "$MODE" = bench ] || [ "$LIVE_RAISE" = 1 ]; then RX_MAX=none; else RX_MAX=65536; fi
fi
if [ "$TX_MAX" = default ]; then
    if [ "$MODE" = bench ] || [ "$LIVE_RAISE" = 1 ]; then TX_MAX=none; else TX_MAX=65536; fi
fi

t() { echo "NCMTEST $*"; }

# Seconds since boot with two decimals.
now() { cut -d' ' -f1 /proc/uptime; }

finish() {
    t phase=done
    t "uptime=$(now)"
    t dmesg-begin
    dmesg
    t dmesg-end
    sync
    poweroff -f
    sleep 5
}

load_modules() {
    local m
    for m in $(cat /etc/ncm/modules 2>/dev/null); do
        modprobe "$m" 2>/tmp/modprobe.err ||
            t "modprobe_failed=$m $(head -n1 /tmp/modprobe.err)"
    done
}

driver_of() {
    local l
    l=$(readlink "/sys/class/net/$1/device/driver" 2>/dev/null) || return 1
    basename "$l"
}

# Find the interface: the one bound to $DRIVER, else (after $WAIT s) any
# non-lo interface. Sets IFACE (empty when none).
find_iface() {
    local end d n drv
    IFACE=
    end=$(($(cut -d. -f1 /proc/uptime) + WAIT))
    while :; do
        for d in /sys/class/net/*; do
            n=${d##*/}
            [ "$n" = lo ] && continue
            drv=$(driver_of "$n") || drv=none
            [ -z "$MAC" ] || [ "$(cat "$d/address")" = "$MAC" ] || continue
            if [ "$DRIVER" = any ] || [ "$drv" = "$DRIVER" ]; then
                IFACE=$n
                return 0
            fi
        done
        [ "$(cut -d. -f1 /proc/uptime)" -ge "$end" ] && break
        sleep 0.25
    done
    for d in /sys/class/net/*; do
        n=${d##*/}
        [ "$n" = lo ] && continue
        IFACE=$n
        return 0
    done
    return 1
}

report_device() {
    local dev usbdev drv line f
    dev=/sys/class/net/$IFACE
    drv=$(driver_of "$IFACE") || drv=none
    t "iface=$IFACE"
    t "driver=$drv"
    t "mac=$(cat "$dev/address")"
    t "mtu=$(cat "$dev/mtu")"
    # The USB device is the parent of the interface's device (an interface).
    usbdev=$(readlink -f "$dev/device/..")
    if [ -r "$usbdev/speed" ]; then
        t "usb_speed_mbps=$(cat "$usbdev/speed")"
        t "usb_id=$(cat "$usbdev/idVendor"):$(cat "$usbdev/idProduct")"
        t "usb_version=$(cat "$usbdev/version" | tr -d ' ')"
        t "usb_product=$(cat "$usbdev/product" 2>/dev/null)"
    fi
    line=$(dmesg | grep -m1 'CDC NCM')
    [ -n "$line" ] || line=$(dmesg | grep -m1 "register '$drv'")
    [ -n "$line" ] || line=$(dmesg | grep -m1 "$IFACE:")
    t "dmesg=$line"
    if [ -d "$dev/cdc_ncm" ]; then
        for f in "$dev"/cdc_ncm/*; do
            [ -r "$f" ] && t "cdc_ncm.${f##*/}=$(cat "$f" 2>/dev/null)"
        done
    fi
}

set_ntb_size() {
    # set_ntb_size rx_max|tx_max VALUE
    local f=/sys/class/net/$IFACE/cdc_ncm/$1 v=$2
    [ "$v" = none ] && return 0
    # "max": what the device advertises, as DisplayLink's udev rule does
    if [ "$v" = max ]; then
        case $1 in
        rx_max) v=$(cat "/sys/class/net/$IFACE/cdc_ncm/dwNtbInMaxSize") ;;
        tx_max) v=$(cat "/sys/class/net/$IFACE/cdc_ncm/dwNtbOutMaxSize") ;;
        esac
    fi
    set -- "$1" "$v"
    t "$1.requested=$2"
    if [ ! -w "$f" ]; then
        t "$1.write=absent"
        return 0
    fi
    if echo "$2" > "$f" 2>/tmp/set.err; then
        t "$1.write=ok"
    else
        t "$1.write=fail $(cat /tmp/set.err)"
    fi
    t "$1.readback=$(cat "$f")"
}

wait_carrier() {
    local start end c
    start=$(now)
    end=$(($(cut -d. -f1 /proc/uptime) + CARRIER_WAIT))
    while :; do
        c=$(cat "/sys/class/net/$IFACE/carrier" 2>/dev/null)
        [ "$c" = 1 ] && break
        [ "$(cut -d. -f1 /proc/uptime)" -ge "$end" ] && break
        sleep 0.1
    done
    t "carrier=${c:-0}"
    t "carrier_wait_s=$(awk -v a="$start" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }')"
    [ "$c" = 1 ]
}

configure_ip() {
    [ -n "$MTU" ] && { ip link set "$IFACE" mtu "$MTU" || t "mtu.set=fail"; }
    ip addr add "$IPADDR" dev "$IFACE"
    ip route add default via "$GW" dev "$IFACE"
}

# run_ping [SIZE [TAG [COUNT]]]: COUNT pings of SIZE bytes to the gateway;
# keys TAG_loss_pct, TAG_received, TAG_rtt_ms (TAG: ping)
run_ping() {
    local size=${1:-56} tag=${2:-ping} count=${3:-$PING} out
    [ "$count" = 0 ] && return 0
    t "phase=$tag"
    out=$(timeout $((count + 20)) ping -c "$count" -i 0.2 -W 2 -s "$size" "$GW" 2>&1)
    echo "$out" | tail -n 3
    t "${tag}_loss_pct=$(echo "$out" | sed -n 's/.* \([0-9.]*\)% packet loss.*/\1/p')"
    t "${tag}_received=$(echo "$out" | sed -n 's/.*, \([0-9]*\) packets received.*/\1/p')"
    t "${tag}_rtt_ms=$(echo "$out" | sed -n 's|.*min/avg/max = \([0-9./]*\).*|\1|p')"
}

# run_pings: one run per size in ncm.ping_sizes
run_pings() {
    local sz
    for sz in $(echo "$PING_SIZES" | tr ',' ' '); do
        if [ "$sz" = 56 ]; then run_ping 56 ping; else run_ping "$sz" "ping$sz"; fi
    done
}

secs() { cut -d. -f1 /proc/uptime; }

# wait_file FILE SECONDS: until FILE exists (0) or the time is up (1).
# Background jobs write their exit status to a file when they end: a
# finished job the shell has not reaped yet would still pass kill -0.
wait_file() {
    local end=$(($(secs) + $2))
    while [ ! -e "$1" ]; do
        [ "$(secs)" -ge "$end" ] && return 1
        sleep 0.2
    done
    return 0
}

# dump_stuck PID: what a process (and its children) stuck in the kernel is
# doing, then every blocked task, CPU and task (sysrq w, l, t) on the
# console
dump_stuck() {
    local p pids=$1
    dmesg -n 8
    for p in /proc/[0-9]*; do
        [ "$(cut -d' ' -f4 "$p/stat" 2>/dev/null)" = "$1" ] && pids="$pids ${p#/proc/}"
    done
    for p in $pids; do
        t "stuck.pid=$p $(cat "/proc/$p/comm" 2>/dev/null)"
        t "stuck.wchan=$(cat "/proc/$p/wchan" 2>/dev/null)"
        t "stuck.state=$(sed -n 's/^State:[[:space:]]*//p' "/proc/$p/status" 2>/dev/null)"
        t stuck-stack-begin
        cat "/proc/$p/stack" 2>&1
        t stuck-stack-end
    done
    echo w > /proc/sysrq-trigger
    echo l > /proc/sysrq-trigger
    echo t > /proc/sysrq-trigger
    sleep 2
}

# The kernel's lockup detectors, quicker than their defaults, so that a
# hang comes with a backtrace on the console (soft lockup after 10 s,
# hung task after 20 s).
lockup_watch() {
    echo 5 > /proc/sys/kernel/watchdog_thresh 2>/dev/null
    echo 20 > /proc/sys/kernel/hung_task_timeout_secs 2>/dev/null
    echo 0 > /proc/sys/kernel/softlockup_panic 2>/dev/null
    echo 1 > /proc/sys/kernel/softlockup_all_cpu_backtrace 2>/dev/null
}

# live_write ATTR VALUE TAG: write VALUE to cdc_ncm's ATTR, at most
# $RAISE_TIMEOUT s; keys TAG.write=ok|fail ...|hang ..., TAG.readback.
# Returns 2 after a hang (with dump_stuck), 1 after a failed write.
live_write() {
    local f=/sys/class/net/$IFACE/cdc_ncm/$1 pid
    if [ ! -w "$f" ]; then
        t "$3.write=absent"
        return 1
    fi
    rm -f /tmp/raise.rc
    # shellcheck disable=SC2320 # the status of the write is the one wanted
    (echo "$2" > "$f" 2>/tmp/raise.err; echo $? > /tmp/raise.rc) &
    pid=$!
    if ! wait_file /tmp/raise.rc "$RAISE_TIMEOUT"; then
        t "$3.write=hang (no return within ${RAISE_TIMEOUT}s)"
        t "live_raise=hang writing $2 to $1"
        dump_stuck "$pid"
        return 2
    fi
    if [ "$(cat /tmp/raise.rc 2>/dev/null)" = 0 ]; then
        t "$3.write=ok"
    else
        t "$3.write=fail $(cat /tmp/raise.err 2>/dev/null)"
        return 1
    fi
    t "$3.readback=$(cat "$f")"
    return 0
}

# live_raise: with the interface up and traffic running (iperf3 -R and a
# ping every 50 ms) write $LIVE_VALUE to rx_max, then tx_max; repeated
# $LIVE_ROUNDS times with a return to the driver's first sizes in between
# (each change makes usbnet unlink its URBs under traffic), ending at
# $LIVE_VALUE. Keys: live_raise=ok|hang ...|fail; the last writes as
# set_ntb_size does (rx_max.requested/.write/.readback); live_iperf_rc,
# live_ping_loss_pct. Returns 1 after a hang.
live_raise() {
    local attr ipid rc=0 r v low_rx low_tx out
    t phase=live-raise
    lockup_watch
    low_rx=$(cat "/sys/class/net/$IFACE/cdc_ncm/rx_max" 2>/dev/null)
    low_tx=$(cat "/sys/class/net/$IFACE/cdc_ncm/tx_max" 2>/dev/null)
    t "live_raise.before.rx_max=$low_rx"
    t "live_raise.before.tx_max=$low_tx"
    [ $((LIVE_ROUNDS % 2)) = 1 ] || LIVE_ROUNDS=$((LIVE_ROUNDS + 1))
    rm -f /tmp/live-iperf.rc /tmp/live-ping.rc
    (timeout $((LIVE_TIME + 40)) iperf3 -c "$SERVER" -p "$PORT" -t "$LIVE_TIME" \
        -R -f m --connect-timeout 10000 > /tmp/live-iperf.out 2>&1
     echo $? > /tmp/live-iperf.rc) &
    ipid=$!
    (timeout $((LIVE_TIME + 40)) ping -q -i 0.05 -c $((LIVE_TIME * 20)) -W 2 \
        "$GW" > /tmp/live-ping.out 2>&1
     echo $? > /tmp/live-ping.rc) &
    sleep 2
    # from here a lockup's backtrace goes straight to the console
    dmesg -n 8
    r=1
    while [ "$r" -le "$LIVE_ROUNDS" ]; do
        for attr in rx_max tx_max; do
            if [ "$r" = "$LIVE_ROUNDS" ]; then
                t "$attr.requested=$LIVE_VALUE"
                live_write "$attr" "$LIVE_VALUE" "$attr"
            else
                v=$LIVE_VALUE
                if [ $((r % 2)) = 0 ]; then
                    if [ "$attr" = rx_max ]; then v=$low_rx; else v=$low_tx; fi
                fi
                live_write "$attr" "$v" "live_raise.round$r.$attr"
            fi
            case $? in
            2) return 1 ;;
            1) rc=1 ;;
            esac
            sleep 0.5
        done
        r=$((r + 1))
    done
    dmesg -n 1
    if ! wait_file /tmp/live-iperf.rc $((LIVE_TIME + 45)) ||
       ! wait_file /tmp/live-ping.rc 10; then
        t "live_raise=hang traffic (iperf3/ping did not end)"
        dump_stuck "$ipid"
        return 1
    fi
    t "live_iperf_rc=$(cat /tmp/live-iperf.rc)"
    grep -E 'receiver$|error' /tmp/live-iperf.out
    out=$(cat /tmp/live-ping.out)
    t "live_ping_loss_pct=$(echo "$out" | sed -n 's/.* \([0-9.]*\)% packet loss.*/\1/p')"
    if [ "$rc" = 0 ]; then t live_raise=ok; else t live_raise=fail; fi
    return 0
}

# Stress mode (ncm-usbfs-stress): one step at a time; after each, cdc_ncm
# must have the function again and pings must come back.
STRESS_TIMEOUT=150

# up_again: wait for the interface cdc_ncm makes again, configure it.
up_again() {
    local w=$WAIT
    WAIT=20
    if ! find_iface || [ "$(driver_of "$IFACE")" != "$DRIVER" ]; then
        WAIT=$w
        return 1
    fi
    WAIT=$w
    ip link set "$IFACE" up
    wait_carrier >/dev/null
    ip addr add "$IPADDR" dev "$IFACE" 2>/dev/null
    ip route add default via "$GW" dev "$IFACE" 2>/dev/null
    return 0
}

stress_ping() {
    local out
    out=$(timeout 30 ping -c 5 -i 0.2 -W 2 "$GW" 2>&1)
    t "stress_ping.$1=$(echo "$out" | sed -n 's/.*, \([0-9]*\) packets received.*/\1/p') of 5"
}

stress_mode() {
    local steps s pid rc
    steps=$STRESS
    [ -n "$steps" ] || steps=$(ncm-usbfs-stress list | cut -f1 | tr '\n' ',')
    t "stress_steps=$steps"
    ip link set "$IFACE" up
    wait_carrier || t "warning=no carrier after ${CARRIER_WAIT}s, trying anyway"
    configure_ip
    stress_ping baseline
    lockup_watch
    for s in $(echo "$steps" | tr ',' ' '); do
        t "phase=stress-$s"
        t "stress_step=$s"
        rm -f /tmp/stress.rc
        (ncm-usbfs-stress $STRESS_V "$s"; echo $? > /tmp/stress.rc) &
        pid=$!
        if ! wait_file /tmp/stress.rc "$STRESS_TIMEOUT"; then
            echo "STRESS $s FAIL hang: ncm-usbfs-stress did not end within ${STRESS_TIMEOUT}s"
            dump_stuck "$pid"
            t "stress_abandoned=$s"
            return 1
        fi
        t "stress_rc.$s=$(cat /tmp/stress.rc)"
        if up_again; then
            t "stress_rebind.$s=ok $IFACE"
        else
            # the program's own hand-back did not do it: reset and retry
            t "stress_rebind.$s=fail (no $DRIVER interface within 20s)"
            timeout 60 ncm-usbfs-stress reset-handback
            if up_again; then
                t "stress_rebind_after_reset.$s=ok"
            else
                t "stress_rebind_after_reset.$s=fail"
                return 1
            fi
        fi
        stress_ping "$s"
    done
    t stress_done=1
}

# run_iperf up|down [TAG]: TCP with $PARALLEL streams; results are keyed
# iperf_TAG_* (TAG defaults to the direction).
run_iperf() {
    local dir=$1 flag='' rc
    local tag=${2:-$1}
    [ "$dir" = down ] && flag=-R
    t "phase=iperf-$dir"
    cpu_stat_start
    timeout $((TIME + 40)) iperf3 -c "$SERVER" -p "$PORT" -t "$TIME" \
        -P "$PARALLEL" -f m --connect-timeout 10000 $flag > /tmp/iperf.out 2>&1
    rc=$?
    cpu_stat_stop "$tag"
    grep -E 'sender$|receiver$|error' /tmp/iperf.out
    t "iperf_${tag}_rc=$rc"
    if [ "$INTERVALS" = 1 ]; then
        # "[  5]   1.00-2.00   sec  27.5 MBytes   231 Mbits/sec   12   ..."
        awk -v d="$tag" -v p="$PARALLEL" '
            /sec/ && !/sender|receiver/ {
                if (p > 1 && $0 !~ /SUM/) next
                for (i = 1; i <= NF; i++) if ($i == "Mbits/sec") {
                    split($(p > 1 ? 2 : 3), t, "-")
                    r = ($(i + 1) ~ /^[0-9]+$/) ? $(i + 1) : "-"
                    printf "NCMTEST iperf_%s_interval=%s %s %s\n", d, t[2], $(i - 1), r
                }
            }' /tmp/iperf.out
    fi
    # With -P N only the [SUM] lines count; else the single stream's.
    awk -v d="$tag" -v p="$PARALLEL" '
        /sender$|receiver$/ {
            if (p > 1 && $0 !~ /SUM/) next
            for (i = 1; i <= NF; i++) if ($i == "Mbits/sec") v = $(i - 1)
            role = ($NF == "sender") ? "sender" : "receiver"
            printf "NCMTEST iperf_%s_%s_mbps=%s\n", d, role, v
        }' /tmp/iperf.out
    awk -v d="$tag" '
        /sender$/ { for (i = 1; i <= NF; i++) if ($i == "Mbits/sec" && $(i + 1) ~ /^[0-9]+$/)
            printf "NCMTEST iperf_%s_retr=%s\n", d, $(i + 1) }' /tmp/iperf.out
}

# rx_drop_counters: where received datagrams can be dropped on their way to
# a socket, one line: the NIC's rx_packets and rx_dropped, the backlog's
# drops (/proc/net/softnet_stat, column 2), UDP InDatagrams, RcvbufErrors
# and InErrors (/proc/net/snmp).
rx_drop_counters() {
    local backlog=0 v
    for v in $(awk '{ print $2 }' /proc/net/softnet_stat); do
        backlog=$((backlog + 0x$v))
    done
    echo "$(cat "/sys/class/net/$IFACE/statistics/rx_packets") \
$(cat "/sys/class/net/$IFACE/statistics/rx_dropped") $backlog \
$(awk '$1 == "Udp:" && $2 ~ /^[0-9]/ { print $2, $6, $4 }' /proc/net/snmp)"
}

# run_udp up|down: small-datagram packet rate at an offered load of $UDP
# Mbit/s. After a download, udp_down_drops says where datagrams were lost
# in the guest: NIC frames received, NIC drops, backlog drops, UDP
# datagrams delivered, socket buffer overflows, UDP errors (deltas).
run_udp() {
    local dir=$1 flag= rc before
    [ "$dir" = down ] && flag=-R
    t "phase=udp-$dir"
    before=$(rx_drop_counters)
    timeout $((TIME + 40)) iperf3 -c "$SERVER" -p "$PORT" -t "$TIME" -u \
        -l 64 -b "${UDP}M" -f m --connect-timeout 10000 $flag \
        > /tmp/udp.out 2>&1
    rc=$?
    grep -E 'receiver$|error' /tmp/udp.out
    t "udp_${dir}_rc=$rc"
    echo "$before $(rx_drop_counters)" | awk -v d="$dir" '{
        printf "NCMTEST udp_%s_drops=nic_rx %d nic_dropped %d backlog %d ",
            d, $7 - $1, $8 - $2, $9 - $3
        printf "udp_in %d rcvbuf %d udp_errors %d\n",
            $10 - $4, $11 - $5, $12 - $6 }'
    # receiver line: ... Mbits/sec  jitter ms  lost/total (pct%)  receiver
    awk -v d="$dir" -v t="$TIME" '/receiver$/ {
        for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\/[0-9]+$/) {
            split($i, a, "/")
            printf "NCMTEST udp_%s_pps=%d\n", d, (a[2] - a[1]) / t
            printf "NCMTEST udp_%s_lost=%s\n", d, a[1]
        }
    }' /tmp/udp.out
}

# set_sysfs_list a=1,b=2: extra cdc_ncm attributes, read back
set_sysfs_list() {
    local kv
    for kv in $(echo "$1" | tr ',' ' '); do
        set_ntb_size "${kv%%=*}" "${kv#*=}"
    done
}

report_counters() {
    local f
    for f in rx_packets tx_packets rx_errors tx_errors rx_dropped tx_dropped \
             rx_length_errors rx_over_errors rx_crc_errors rx_frame_errors \
             rx_fifo_errors rx_missed_errors; do
        [ -r "/sys/class/net/$IFACE/statistics/$f" ] &&
            t "stat.$f=$(cat "/sys/class/net/$IFACE/statistics/$f")"
    done
    ethtool -S "$IFACE" 2>/dev/null | awk -F': *' 'NR > 1 {
        gsub(/^ +/, "", $1); printf "NCMTEST ethtool.%s=%s\n", $1, $2 }'
}

# irq_counts: interrupts taken so far by the NIC's host controller or
# virtio queues, local timer interrupts, uptime (one CPU's column)
irq_counts() {
    awk -v up="$(now)" '
        /_hcd|virtio[0-9]+-(input|output)/ { nic += $2 }
        /^ *LOC:/ { loc = $2 }
        END { printf "%d %d %s", nic, loc, up }' /proc/interrupts
}

# Around each TCP run: the interrupts the guest took (NCMTEST
# irq_TAG=NIC-interrupts local-timer-interrupts seconds) for
# scripts/bench/bench-report.py and profile-report.py; for scripts/bench/profile.sh
# (ncm.symbols) also the guest's own CPU accounting, and the symbols that
# its RIP samples resolve to.
cpu_stat_start() {
    IRQ_START=$(irq_counts)
    [ -n "$SYMBOLS" ] || return 0
    mkdir -p /tmp/prof
    head -n1 /proc/stat > /tmp/prof/stat.start
}

cpu_stat_stop() {
    t "irq_$1=$(echo "$IRQ_START $(irq_counts)" |
        awk '{ printf "%d %d %.2f", $4 - $1, $5 - $2, $6 - $3 }')"
    [ -n "$SYMBOLS" ] || return 0
    { cat /tmp/prof/stat.start; head -n1 /proc/stat; } > "/tmp/prof/$1.stat"
}

send_symbols() {
    [ -n "$SYMBOLS" ] || return 0
    t phase=send-symbols
    mkdir -p /tmp/prof
    grep -i ' t ' /proc/kallsyms > /tmp/prof/kallsyms
    tar -czf /tmp/prof.tgz -C /tmp prof
    if nc "$SERVER" "$SYMBOLS" < /tmp/prof.tgz; then
        t "symbols_sent_bytes=$(wc -c < /tmp/prof.tgz)"
    else
        t "symbols_sent_bytes=0"
    fi
}

# Scale mode (scripts/bench/bench-scaling.sh): ncm.scale NICs of $DRIVER at
# once. The one whose MAC ends in :0I gets 10.0.(2+I).15/24 and talks to
# the iperf3 server at 10.0.(2+I).2 (its own tap on the host). After an
# idle pause (phase scale-idle: the host samples QEMU's RSS), TCP runs on
# every NIC at the same time, up then down (phases scale-up, scale-down).
# Keys: scale_ifaces, scale_DIR_mbps (the sum of the receivers),
# scale_DIR_each, scale_DIR_rc, irq_scale_DIR.
scale_ifaces() {
    local d n
    for d in /sys/class/net/*; do
        n=${d##*/}
        [ "$n" = lo ] && continue
        [ "$(driver_of "$n")" = "$DRIVER" ] && echo "$n"
    done
}

scale_mode() {
    local end list n i mac pairs="" p dir flag sum each rc v
    end=$(($(secs) + WAIT))
    while :; do
        list=$(scale_ifaces)
        [ "$(echo "$list" | wc -w)" -ge "$SCALE" ] && break
        [ "$(secs)" -ge "$end" ] && break
        sleep 0.25
    done
    t "scale_ifaces=$(echo "$list" | tr "\n" " ")"
    for n in $list; do
        mac=$(cat "/sys/class/net/$n/address")
        i=$((0x${mac##*:}))
        pairs="$pairs $n:$i"
        IFACE=$n
        set_ntb_size rx_max "$RX_MAX"
        set_ntb_size tx_max "$TX_MAX"
        ip link set "$n" up
    done
    t phase=carrier
    for p in $pairs; do
        IFACE=${p%%:*}
        wait_carrier >/dev/null || t "warning=no carrier on $IFACE"
        ip addr add "10.0.$((2 + ${p#*:})).15/24" dev "$IFACE"
    done
    t phase=ping
    for p in $pairs; do
        ping -c 3 -i 0.2 -W 2 "10.0.$((2 + ${p#*:})).2" >/dev/null 2>&1 ||
            t "warning=no ping reply on ${p%%:*}"
    done
    t phase=scale-idle
    sleep 3
    for dir in up down; do
        flag=
        [ "$dir" = down ] && flag=-R
        t "phase=scale-$dir"
        cpu_stat_start
        for p in $pairs; do
            i=${p#*:}
            rm -f "/tmp/scale-$i.rc"
            (timeout $((TIME + 40)) iperf3 -c "10.0.$((2 + i)).2" -p "$PORT" \
                -t "$TIME" -f m --connect-timeout 10000 $flag \
                > "/tmp/scale-$i.out" 2>&1
             echo $? > "/tmp/scale-$i.rc") &
        done
        wait
        cpu_stat_stop "scale_$dir"
        sum=0 each="" rc=""
        for p in $pairs; do
            i=${p#*:}
            v=$(awk '/receiver$/ { for (k = 1; k <= NF; k++)
                if ($k == "Mbits/sec") v = $(k - 1) } END { print v + 0 }' \
                "/tmp/scale-$i.out")
            sum=$(awk -v a="$sum" -v b="$v" 'BEGIN { print a + b }')
            each="$each $v"
            rc="$rc $(cat "/tmp/scale-$i.rc" 2>/dev/null)"
        done
        t "scale_${dir}_mbps=$sum"
        t "scale_${dir}_each=${each# }"
        t "scale_${dir}_rc=${rc# }"
    done
}

# Migrate mode (tests/guest/run-migrate-test.sh live-migrates QEMU while
# this runs). With the interface up, rx_max/tx_max go to $RX_MAX/$TX_MAX
# (64 KiB) and 10 pings pass; then, from phase migrate-traffic on, iperf3
# up to $PORT and down (-R) from $PORT+1 for $TIME s at the same time, and
# a ping every 100 ms; then 20 pings (keys ping_after_*). Keys: mig_t0
# (uptime when the traffic starts), mig_DIR_rc (hang: no end), mig_DIR_mbps
# (receiver), mig_DIR_intervals ("end-s:Mbit/s ...", iperf3's seconds),
# mig_DIR_error, mig_ping_sent/received/lost, mig_ping_gap_ms (the longest
# time between two answered pings; 100 when none is lost), mig_ping_max_ms
# (highest RTT). Guest time stands still while QEMU is stopped for the
# switch-over: the host measures the wall-clock outage itself.
migrate_mode() {
    local d port flag f
    ip link set "$IFACE" up
    wait_carrier || t "warning=no carrier after ${CARRIER_WAIT}s, trying anyway"
    configure_ip
    set_ntb_size rx_max "$RX_MAX"
    set_ntb_size tx_max "$TX_MAX"
    wait_carrier >/dev/null
    run_ping 56 ping 10
    lockup_watch
    rm -f /tmp/mig-*.rc
    t phase=migrate-traffic
    t "mig_t0=$(now)"
    for d in up down; do
        port=$PORT flag=
        [ "$d" = down ] && port=$((PORT + 1)) flag=-R
        (timeout $((TIME + 60)) iperf3 -c "$SERVER" -p "$port" -t "$TIME" \
            -i 1 -f m --connect-timeout 10000 $flag > "/tmp/mig-$d.out" 2>&1
         echo $? > "/tmp/mig-$d.rc") &
    done
    (timeout $((TIME + 60)) ping -i 0.1 -c $((TIME * 10)) -W 2 "$GW" \
        > /tmp/mig-ping.out 2>&1
     echo $? > /tmp/mig-ping.rc) &
    for f in up down ping; do
        wait_file "/tmp/mig-$f.rc" $((TIME + 70)) || echo hang > "/tmp/mig-$f.rc"
    done
    t phase=migrate-results
    for d in up down; do
        t "mig_${d}_rc=$(cat "/tmp/mig-$d.rc")"
        grep -E 'receiver$|error|interrupt' "/tmp/mig-$d.out"
        t "mig_${d}_error=$(grep -m1 -E 'error|interrupt' "/tmp/mig-$d.out")"
        # "[  5]   3.00-4.00   sec  25.2 MBytes   211 Mbits/sec ..."
        awk -v d="$d" '
            /Mbits\/sec/ {
                for (i = 1; i <= NF; i++) if ($i == "Mbits/sec") v = $(i - 1)
                if (/receiver$/) { rx = v; next }
                if (/sender$/) next
                for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+-[0-9.]+$/) {
                    split($i, r, "-"); iv = iv " " r[2] + 0 ":" v
                }
            }
            END {
                printf "NCMTEST mig_%s_mbps=%s\n", d, rx
                printf "NCMTEST mig_%s_intervals=%s\n", d, substr(iv, 2)
            }' "/tmp/mig-$d.out"
    done
    t "mig_ping_rc=$(cat /tmp/mig-ping.rc)"
    # busybox: "64 bytes from 10.0.2.2: seq=12 ttl=64 time=1.234 ms"
    awk '
        BEGIN { prev = -1; gap = 0 }
        /seq=/ {
            s = $0; sub(/.*seq=/, "", s); s += 0
            if (s - prev > gap) gap = s - prev
            prev = s; got++
            r = $0; sub(/.*time=/, "", r); r += 0; if (r > max) max = r
        }
        / packets transmitted/ { sent = $1 }
        END {
            if (sent - prev > gap) gap = sent - prev
            printf "NCMTEST mig_ping_sent=%d\nNCMTEST mig_ping_received=%d\n", sent, got
            printf "NCMTEST mig_ping_lost=%d\nNCMTEST mig_ping_gap_ms=%d\n", sent - got, gap * 100
            printf "NCMTEST mig_ping_max_ms=%s\n", max
        }' /tmp/mig-ping.out
    run_ping 56 ping_after 20
    report_counters
}

shell_mode() {
    echo
    echo "usb-ncm-dl guest shell (busybox). Kernel $(uname -r)."
    if [ -n "$IFACE" ]; then
        echo "Network: $IFACE (driver $(driver_of "$IFACE")), $IPADDR, gateway $GW."
    else
        echo "No network interface was found: see 'dmesg | grep -i usb'."
    fi
    local i=${IFACE:-eth0}
    cat <<EOF
Try:  ip link; ip addr              interfaces and addresses
      grep . /sys/class/net/$i/cdc_ncm/*    negotiated NTB parameters
      echo 65536 > /sys/class/net/$i/cdc_ncm/rx_max   (also tx_max)
      ethtool -S $i                 cdc_ncm counters (tx_reason_*, ntbs)
      ping -c 5 $GW                 slirp's gateway (the host)
      iperf3 -c $SERVER -p $PORT -t 5 [-R]   to the host's iperf3 server
      dmesg | grep -i -e usb -e cdc    kernel messages (dmesg -n 7: live)
      ncm-usbfs-stress list         usbfs stress steps; "ncm-usbfs-stress -v
                                    in-4" runs one (takes $i from cdc_ncm)
Leave with 'exit' (powers off) or Ctrl-A X (quits QEMU).
EOF
    # The serial line has no size: take the host terminal's.
    [ -n "$COLS" ] && [ -n "$ROWS" ] && stty cols "$COLS" rows "$ROWS" 2>/dev/null
    setsid cttyhack sh -l
    poweroff -f
}

t phase=boot
t "kernel=$(uname -r)"
t "mode=$MODE"
t phase=modules
load_modules
t phase=iface
if ! find_iface; then
    t iface=none
    t "error=no network interface appeared (driver $DRIVER) within ${WAIT}s"
    [ "$MODE" = shell ] && shell_mode
    finish
fi

case $MODE in
replug|suspend|mcast|ntbsweep)
    # tests/guest/init-pm.sh: re-enumeration, suspend, multicast, NTB sizes
    . /etc/ncm/pm-modes.sh
    report_device
    "${MODE}_mode"
    finish
    ;;
profiles)
    # tests/guest/init-profiles.sh: one interface per profile= preset
    . /etc/ncm/profile-modes.sh
    profiles_mode
    finish
    ;;
migrate)
    report_device
    migrate_mode
    finish
    ;;
soak)
    # tests/guest/init-soak.sh: traffic for make soak
    . /etc/ncm/pm-modes.sh
    . /etc/ncm/soak-mode.sh
    report_device
    soak_mode
    finish
    ;;
scale)
    scale_mode
    finish
    ;;
stress)
    report_device
    set_ntb_size rx_max "$RX_MAX"
    set_ntb_size tx_max "$TX_MAX"
    stress_mode
    finish
    ;;
shell)
    ip link set "$IFACE" up
    wait_carrier >/dev/null
    configure_ip
    shell_mode
    ;;
test|run|bench)
    report_device
    set_ntb_size rx_max "$RX_MAX"
    set_ntb_size tx_max "$TX_MAX"
    set_sysfs_list "$SYSFS"
    if [ -d "/sys/class/net/$IFACE/cdc_ncm" ]; then
        for f in min_tx_pkt tx_timer_usecs rx_max tx_max; do
            t "after.cdc_ncm.$f=$(cat "/sys/class/net/$IFACE/cdc_ncm/$f")"
        done
    fi
    t phase=carrier
    ip link set "$IFACE" up
    wait_carrier || t "warning=no carrier after ${CARRIER_WAIT}s, trying anyway"
    configure_ip
    run_pings
    # ncm.parallel=1,4: one run per stream count, keys tagged _p1/_p4
    for p in $(echo "$PARALLEL_LIST" | tr ',' ' '); do
        PARALLEL=$p
        for d in $(echo "$DIRS" | tr ',' ' '); do
            case $PARALLEL_LIST in
            *,*) run_iperf "$d" "${d}_p$p" ;;
            *) run_iperf "$d" ;;
            esac
        done
    done
    if [ "$UDP" != 0 ]; then
        for d in $(echo "$DIRS" | tr ',' ' '); do
            run_udp "$d"
        done
    fi
    # tests/guest/init-topology.sh: a port moved to the EHCI's companion
    # and back (ncm.companion=1), a second interface (ncm.nics=2)
    if grep -qE 'ncm\.(companion|nics)=' /proc/cmdline; then
        . /etc/ncm/pm-modes.sh
        . /etc/ncm/topology-modes.sh
        topology_run
    fi
    if [ "$LIVE_RAISE" = 1 ]; then
        if ! live_raise; then
            finish
        fi
        run_ping 56 ping_after
    fi
    report_counters
    send_symbols
    finish
    ;;
*)
    t "error=unknown ncm.mode=$MODE"
    finish
    ;;
esac
