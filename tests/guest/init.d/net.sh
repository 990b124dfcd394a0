# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck shell=dash disable=SC2034
#
# Sourced by /init (tests/guest/init.sh): finding the interface, the
# device report, NTB sizes, carrier, addresses, ping, iperf3, counters,
# interrupts and CPU accounting, and the interfaces of several NICs.

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
# keys TAG_loss_pct, TAG_received, TAG_rtt_ms (TAG: ping).  ncm-ping -c,
# not busybox ping: after its last request busybox waits one second, and a
# reply a loaded host delays longer counts as lost (ncm-ping.c says more).
run_ping() {
    local size=${1:-56} tag=${2:-ping} count=${3:-$PING} out
    [ "$count" = 0 ] && return 0
    t "phase=$tag"
    out=$(timeout $((count + 20)) ncm-ping -c "$count" -i 200 -W 5 -s "$size" "$GW" 2>&1)
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
