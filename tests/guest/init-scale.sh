# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck shell=dash disable=SC2013,SC3043
# (SC2013: the kernel command line is words; SC3043: busybox ash has local)
#
# ncm.mode=scale of the test guest's /init (tests/guest/init.sh sources
# this from /etc/ncm/init-scale.sh and runs scale_main). Uses the helpers
# of init.sh (scale_ifaces, run_iperf's irq_counts).
#
# Scale mode (scripts/bench/bench-scaling.sh): ncm.scale NICs of $DRIVER at
# once. The one whose MAC ends in :0I gets 10.0.(2+I).15/24 and talks to
# the iperf3 server at 10.0.(2+I).2 (its own tap on the host). After an
# idle pause (phase scale-idle: the host samples QEMU's RSS), TCP runs on
# every NIC at the same time, up then down (phases scale-up, scale-down).
# Keys: scale_ifaces, scale_DIR_mbps (the sum of the receivers),
# scale_DIR_each, scale_DIR_rc, irq_scale_DIR.


scale_mode() {
    local list n i mac pairs="" p dir flag sum each rc v
    list=$(wait_ifaces "$SCALE")
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

scale_main() {
    scale_mode
}
