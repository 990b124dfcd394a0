# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck shell=dash disable=SC2013,SC3043
# (SC2013: the kernel command line is words; SC3043: busybox ash has local)
#
# ncm.mode=test|run|bench of the test guest's /init (tests/guest/init.sh
# sources this from /etc/ncm/init-test.sh and runs test_main): the NTB
# sizes, pings, iperf3 each way (ncm.parallel, ncm.dirs), UDP
# (ncm.udp), the set-ups of real machines (init-topology.sh:
# ncm.companion, ncm.nics), the live raise of the NTB sizes
# (ncm.live_raise), the symbols for scripts/bench/profile.sh
# (ncm.symbols). Uses the helpers of init.sh.

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

test_main() {
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
        . /etc/ncm/init-topology.sh
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
}
