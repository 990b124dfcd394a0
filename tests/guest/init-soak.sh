# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck shell=dash disable=SC2013,SC3043
# (SC2013: the kernel command line is words; SC3043: busybox ash has local)
#
# The guest side of make soak (tests/guest/run-soak.sh, tests/guest/soak.py):
# ncm.mode=soak. tests/guest/init.sh sources this from /etc/ncm/init-soak.sh
# and runs soak_main; it uses init.sh's helpers (netwatch, ncm_iface,
# live_write, lockup_watch).
#
# With the interface up (10.0.2.15/24, the host 10.0.2.2 in the soak's
# network namespace), for ncm.soak_time seconds:
#   - iperf3 up to port ncm.port (5201) and down (-R) from ncm.port+1, in
#     runs of at most 20 s one after the other, each at ncm.soak_rate
#     (iperf3 -b, 20M);
#   - a UDP echo on port 7777 (ncm-ping -e): the host sends numbered
#     datagrams and counts what comes back;
#   - netwatch: the interface gets its address again after a re-plug;
#   - every ncm.soak_ntb_every seconds (23) rx_max and tx_max change on the
#     running interface (16384, 65536, 32768, 8192, ... in turn), every
#     ncm.soak_ifdown_every seconds (61) the interface goes down for 1 s and
#     up again.
# The host's faults and migrations happen meanwhile. Every guest event is a
# line "NCMTEST soak_ev=NAME begin|end ..." that the host stamps with its
# own clock when it reads it. A write to sysfs that does not return in
# ncm.raise_timeout s is "NCMTEST soak_error=..." with the writer's stack.
# At the end (phase soak-results): soak_tcp_DIR=runs failed mean-Mbit/s,
# soak_echo (ncm-ping's ECHO line), soak_ntb_changes, soak_ifdowns, the
# interface counters; then /init dumps dmesg and powers off.

SOAK_TIME=120
SOAK_RATE=20M
SOAK_NTB_EVERY=23
SOAK_IFDOWN_EVERY=61
SOAK_ECHO_PORT=7777
for arg in $(cat /proc/cmdline); do
    case $arg in
    ncm.soak_time=*) SOAK_TIME=${arg#*=} ;;
    ncm.soak_rate=*) SOAK_RATE=${arg#*=} ;;
    ncm.soak_ntb_every=*) SOAK_NTB_EVERY=${arg#*=} ;;
    ncm.soak_ifdown_every=*) SOAK_IFDOWN_EVERY=${arg#*=} ;;
    esac
done

# soak_tcp DIR PORT END: iperf3 runs until END (uptime seconds)
soak_tcp() {
    local dir=$1 port=$2 end=$3 flag='' n=0 f=0 rem d rc mb sum=0
    [ "$dir" = down ] && flag=-R
    while [ ! -e /tmp/soak.stop ]; do
        rem=$((end - $(secs)))
        [ "$rem" -lt 4 ] && break
        d=20
        [ "$rem" -lt 23 ] && d=$((rem - 3))
        timeout $((d + 40)) iperf3 -c "$SERVER" -p "$port" -t "$d" -b "$SOAK_RATE" \
            -f m --connect-timeout 5000 $flag > "/tmp/soak-$dir.out" 2>&1
        rc=$?
        n=$((n + 1))
        if [ "$rc" = 0 ]; then
            mb=$(awk '/receiver$/ { for (k = 1; k <= NF; k++)
                if ($k == "Mbits/sec") v = $(k - 1) } END { print v + 0 }' "/tmp/soak-$dir.out")
            sum=$(awk -v a="$sum" -v b="$mb" 'BEGIN { print a + b }')
            t "soak_tcp_run=$dir ok ${d}s $mb"
        else
            f=$((f + 1))
            t "soak_tcp_run=$dir fail rc=$rc $(grep -m1 -iE 'error|busy|refused|reset' "/tmp/soak-$dir.out")"
            sleep 1
        fi
    done
    echo "$n $f $(awk -v s="$sum" -v n="$((n - f))" 'BEGIN { if (n) printf "%.1f", s / n; else print 0 }')" \
        > "/tmp/soak-$dir.done"
}

# soak_write ATTR VALUE: write to the current interface's cdc_ncm ATTR
soak_write() {
    local n
    n=$(ncm_iface) || { t "soak_ev=ntb note no interface"; return 0; }
    IFACE=$n
    live_write "$1" "$2" "soak_ntb.$1"
    case $? in
    2) t "soak_error=the write of $2 to $1 did not return within ${RAISE_TIMEOUT}s"; return 2 ;;
    esac
    return 0
}

soak_mode() {
    local end now next_ntb next_if ntbn=0 ifn=0 v n
    ip link set "$IFACE" up
    wait_carrier || t "warning=no carrier after ${CARRIER_WAIT}s, trying anyway"
    configure_ip
    run_ping 56 ping 5
    lockup_watch
    netwatch_start
    rm -f /tmp/soak.stop /tmp/soak-*.done
    end=$(($(secs) + SOAK_TIME))
    t phase=soak-traffic
    t "soak_t0=$(now)"
    ncm-ping -e "$SOAK_ECHO_PORT" -w $((SOAK_TIME + 120)) -f /tmp/soak.stop \
        > /tmp/soak-echo.out 2>&1 &
    soak_tcp up "$PORT" "$end" &
    soak_tcp down $((PORT + 1)) "$end" &
    next_ntb=$(($(secs) + SOAK_NTB_EVERY))
    next_if=$(($(secs) + SOAK_IFDOWN_EVERY))
    while [ "$(secs)" -lt "$end" ]; do
        sleep 1
        now=$(secs)
        if [ "$now" -ge "$next_ntb" ] && [ "$SOAK_NTB_EVERY" != 0 ]; then
            case $((ntbn % 4)) in
            0) v=16384 ;; 1) v=65536 ;; 2) v=32768 ;; *) v=8192 ;;
            esac
            ntbn=$((ntbn + 1))
            t "soak_ev=ntb begin $v"
            soak_write rx_max "$v" && soak_write tx_max "$v"
            [ $? = 2 ] && break
            n=$(ncm_iface) &&
                t "soak_ev=ntb end rx_max=$(cat "/sys/class/net/$n/cdc_ncm/rx_max") tx_max=$(cat "/sys/class/net/$n/cdc_ncm/tx_max")"
            next_ntb=$(($(secs) + SOAK_NTB_EVERY))
        fi
        if [ "$now" -ge "$next_if" ] && [ "$SOAK_IFDOWN_EVERY" != 0 ]; then
            ifn=$((ifn + 1))
            if n=$(ncm_iface); then
                t "soak_ev=ifdown begin $n"
                ip link set "$n" down
                sleep 1
                ip link set "$n" up
                IFACE=$n
                wait_carrier >/dev/null || t "warning=no carrier 20 s after ifup"
                ip route add default via "$GW" dev "$n" 2>/dev/null
                t "soak_ev=ifdown end carrier $(cat "/sys/class/net/$n/carrier" 2>/dev/null)"
            fi
            next_if=$(($(secs) + SOAK_IFDOWN_EVERY))
        fi
    done
    t phase=soak-stopping
    wait_file /tmp/soak-up.done 90 || t "soak_error=iperf3 up did not end"
    wait_file /tmp/soak-down.done 60 || t "soak_error=iperf3 down did not end"
    touch /tmp/soak.stop
    sleep 1
    netwatch_stop
    t phase=soak-results
    t "soak_tcp_up=$(cat /tmp/soak-up.done 2>/dev/null)"
    t "soak_tcp_down=$(cat /tmp/soak-down.done 2>/dev/null)"
    t "soak_echo=$(grep '^ECHO received' /tmp/soak-echo.out)"
    t "soak_ntb_changes=$ntbn"
    t "soak_ifdowns=$ifn"
    IFACE=$(ncm_iface) && report_counters
    # the host stops its datagrams when it sees this
    t "soak_done=1"
}

soak_main() {
    report_device
    soak_mode
}
