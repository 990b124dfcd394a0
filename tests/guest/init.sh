#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck shell=dash disable=SC2034
# (SC2034: the parameters are for the mode files, init-*.sh)
#
# /init of the usb-ncm-dl test guest (busybox ash). tests/guest/image.sh
# copies this file into the initramfs, and every tests/guest/init-*.sh
# into its /etc/ncm/.  This file has the parameters and the helpers the
# modes share; each mode is in a file of its own, which it sources
# (mode_file, at the end): init-MODE.sh defines MODE_main.
#
# Kernel command line parameters (all optional):
#   ncm.mode=test|run|bench   see tests/guest/init-test.sh
#   ncm.mode=stress        see tests/guest/init-stress.sh
#   ncm.mode=scale         see tests/guest/init-scale.sh
#   ncm.mode=shell         (the default) see tests/guest/init-shell.sh
#   ncm.mode=replug|suspend|mcast|ntbsweep   see tests/guest/init-pm.sh
#   ncm.mode=profiles      see tests/guest/init-profiles.sh
#   ncm.mode=soak          see tests/guest/init-soak.sh (make soak)
#   ncm.mode=migrate       see tests/guest/init-migrate.sh
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

# hc_of USBDEV: the PCI function of the host controller a USB device is on
# ("0000:00:1d.0") and its driver ("uhci_hcd")
hc_of() {
    local p=$1
    while [ -n "$p" ] && [ ! -e "$p/companion" ] && [ ! -e "$p/vendor" ]; do
        p=${p%/*}
    done
    echo "${p##*/} $(basename "$(readlink "$p/driver" 2>/dev/null)")"
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
        # where it is: "1" on a root port, "1.1" behind a hub
        t "usb_devpath=$(cat "$usbdev/devpath")"
        t "usb_hc=$(hc_of "$usbdev")"
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

# scale_ifaces: every interface of $DRIVER, one a line (the scale and
# profiles modes)
scale_ifaces() {
    local d n
    for d in /sys/class/net/*; do
        n=${d##*/}
        [ "$n" = lo ] && continue
        [ "$(driver_of "$n")" = "$DRIVER" ] && echo "$n"
    done
}

# wait_ifaces COUNT: scale_ifaces once COUNT of them are there, or what
# there is when WAIT seconds have gone
wait_ifaces() {
    local end list
    end=$(($(secs) + WAIT))
    while :; do
        list=$(scale_ifaces)
        [ "$(echo "$list" | wc -w)" -ge "$1" ] && break
        [ "$(secs)" -ge "$end" ] && break
        sleep 0.25
    done
    echo "$list"
}

# Shared by the modes that follow the interface through re-enumerations
# (init-pm.sh, init-soak.sh, init-topology.sh): the host's cues, the
# interface of $DRIVER now, and netwatch, the one interface watcher.
cue() { t "cue=$*"; }
# cue_final: the host reads the device's counters (cue=stats final); the
# cue has no answer, so wait long enough for the host to act before /init
# powers the guest off (it polls the console log every 0.1 s)
cue_final() { cue stats final; sleep 3; }

# elapsed A B: B - A in seconds, two decimals
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

# ncm_iface: the interface $DRIVER has now (empty when none)
ncm_iface() {
    local d n
    for d in /sys/class/net/*; do
        n=${d##*/}
        [ "$n" = lo ] && continue
        [ "$(driver_of "$n" 2>/dev/null)" = "$DRIVER" ] && { echo "$n"; return 0; }
    done
    return 1
}

# netwatch: in the background, give the interface its address again
# whenever it comes back (after a re-enumeration it is a new netdev with
# nothing configured). Prints netwatch=gone T / netwatch=configured IF T.
# Stopped by touching /tmp/netwatch.stop.
netwatch_start() {
    rm -f /tmp/netwatch.stop
    (
        state=up
        while [ ! -e /tmp/netwatch.stop ]; do
            n=$(ncm_iface)
            if [ -z "$n" ]; then
                [ "$state" = gone ] || { t "netwatch=gone $(now)"; state=gone; }
            elif ! ip -4 addr show dev "$n" 2>/dev/null | grep -q 'inet '; then
                [ -n "$NETWATCH_NO_V6" ] &&
                    echo 1 > "/proc/sys/net/ipv6/conf/$n/disable_ipv6" 2>/dev/null
                ip link set "$n" up
                ip addr add "$IPADDR" dev "$n" 2>/dev/null
                ip route add default via "$GW" dev "$n" 2>/dev/null
                t "netwatch=configured $n $(now)"
                state=up
            fi
            sleep 0.2
        done
    ) &
}
netwatch_stop() { touch /tmp/netwatch.stop; sleep 0.5; }

# usb_dev_of IFACE: the USB device directory of a network interface
usb_dev_of() { readlink -f "/sys/class/net/$1/device/.."; }

# dmesg_count PATTERN
dmesg_count() { dmesg | grep -c "$1"; }

# wait_for SECONDS COMMAND...: until COMMAND succeeds (0) or time is up
wait_for() {
    local end=$(($(secs) + $1))
    shift
    until "$@"; do
        [ "$(secs)" -ge "$end" ] && return 1
        sleep 0.1
    done
    return 0
}

iface_gone() { ! ncm_iface >/dev/null; }
iface_back() { ncm_iface >/dev/null; }
iface_configured() {
    local n
    n=$(ncm_iface) && ip -4 addr show dev "$n" | grep -q 'inet ' &&
        [ "$(cat "/sys/class/net/$n/carrier" 2>/dev/null)" = 1 ]
}

# mode_file MODE: which /etc/ncm/init-FILE.sh (tests/guest/init-FILE.sh)
# carries MODE; it defines FILE_main, which runs the mode
mode_file() {
    case $1 in
    test|run|bench) echo test ;;
    replug|suspend|mcast|ntbsweep) echo pm ;;
    profiles|migrate|soak|scale|stress|shell) echo "$1" ;;
    *) return 1 ;;
    esac
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
    if [ "$MODE" = shell ]; then
        . /etc/ncm/init-shell.sh
        shell_mode
    fi
    finish
fi

# the mode: its file, then its FILE_main
if ! MODE_FILE=$(mode_file "$MODE"); then
    t "error=unknown ncm.mode=$MODE"
    finish
fi
# shellcheck source=/dev/null # (the initramfs' copy of tests/guest/init-*.sh)
. "/etc/ncm/init-$MODE_FILE.sh"
"${MODE_FILE}_main"
finish
