# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck shell=dash disable=SC2013,SC3043
# (SC2013: the kernel command line is words; SC3043: busybox ash has local)
#
# Re-enumeration, suspend and multicast modes of the test guest's /init
# (tests/guest/init.sh sources this from /etc/ncm/init-pm.sh and runs
# pm_main; it uses its helpers: t, now, secs, wait_file, wait_carrier,
# configure_ip, run_ping, run_iperf, driver_of, report_counters,
# lockup_watch, and the ones the modes share: cue, ncm_iface, netwatch,
# wait_for, elapsed, usb_dev_of, dmesg_count, iface_gone/back/configured).
#
#   ncm.mode=replug   the host re-plugs the device (replug-ms) under
#                     a ping every 100 ms and iperf3 -R: see replug_mode
#   ncm.mode=suspend  USB selective suspend woken by a frame from the host,
#                     then suspend to RAM woken by the host: suspend_mode
#   ncm.mode=ntbsweep iperf3 each way with rx_max = tx_max = each of
#                     ncm.ntb_sizes (16384,32768,65536): ntbsweep_mode
#   ncm.mode=mcast    IPv6 link-local ping, neighbour discovery, router
#                     advertisements (multicast) through cdc_ncm, then the
#                     function driven without SET_ETHERNET_PACKET_FILTER:
#                     mcast_mode
#
# The host acts on "NCMTEST cue=WHAT ARGS" lines (tests/guest/qmp-cues.py):
#   cue=replug MS    usb-ncm-fault replug-ms MS
#   cue=udp PORT     a UDP datagram to 127.0.0.1:PORT (slirp hostfwd: a
#                    frame from the netdev, the guest cannot send it itself)
#   cue=wakeup       once QEMU says the guest is suspended, system_wakeup
#   cue=stats TAG    the device's x-stats saved under TAG
#
# Parameters: ncm.replug_ms=2000, ncm.replug_time=14 (traffic seconds),
# ncm.wake_port=5555 (guest UDP port of the wake frame; the host forwards
# its own to it), ncm.pm=auto,s3 (the parts of suspend mode, in order),
# ncm.autosuspend_ms=500, ncm.power_on_filter=0x0c (what the usbfs filter
# step expects before SET_ETHERNET_PACKET_FILTER).

REPLUG_MS=2000
REPLUG_TIME=14
WAKE_PORT=5555
PM_PARTS=auto,s3
AUTOSUSPEND_MS=500
POWER_ON_FILTER=0x0c
NTB_SIZES=16384,32768,65536
for arg in $(cat /proc/cmdline); do
    case $arg in
    ncm.replug_ms=*) REPLUG_MS=${arg#*=} ;;
    ncm.replug_time=*) REPLUG_TIME=${arg#*=} ;;
    ncm.wake_port=*) WAKE_PORT=${arg#*=} ;;
    ncm.pm=*) PM_PARTS=${arg#*=} ;;
    ncm.autosuspend_ms=*) AUTOSUSPEND_MS=${arg#*=} ;;
    ncm.power_on_filter=*) POWER_ON_FILTER=${arg#*=} ;;
    ncm.ntb_sizes=*) NTB_SIZES=${arg#*=} ;;
    esac
done
export NCM_POWER_ON_FILTER=$POWER_ON_FILTER


# iperf_summary FILE TAG: receiver Mbit/s, per-second intervals and how
# many of the last three carried data (TCP came back)
iperf_summary() {
    awk -v tag="$2" '
        /Mbits\/sec|Kbits\/sec|bits\/sec/ {
            for (i = 1; i <= NF; i++)
                if ($i ~ /bits\/sec$/) {
                    v = $(i - 1)
                    if ($i == "Kbits/sec") v = v / 1000
                    if ($i == "bits/sec") v = v / 1e6
                }
            if (/receiver$/) { rx = v; next }
            if (/sender$/) next
            for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+-[0-9.]+$/) {
                split($i, r, "-"); iv = iv sprintf(" %d:%s", r[2] + 0.5, v)
                n++; val[n] = v
            }
        }
        END {
            printf "NCMTEST %s_mbps=%s\n", tag, rx
            printf "NCMTEST %s_intervals=%s\n", tag, substr(iv, 2)
            z = 0
            for (i = 1; i <= n; i++) if (val[i] + 0 == 0) z++
            printf "NCMTEST %s_zero_intervals=%d\n", tag, z
            live = 0
            for (i = n - 2; i <= n; i++) if (i > 0 && val[i] + 0 > 0) live++
            printf "NCMTEST %s_last3_live=%d\n", tag, live
        }' "$1"
}

# ping_summary FILE TAG T0: ncm-ping's results, and the time from T0 (the
# fault) to the first reply after the longest gap
ping_summary() {
    local line
    line=$(grep '^PING sent=' "$1")
    grep '^PING gap' "$1"
    for kv in $line; do
        case $kv in *=*) t "$2_${kv%%=*}=${kv#*=}" ;; esac
    done
    t "$2_recover_s=$(echo "$line" | sed -n 's/.*gap_end=\([0-9.]*\).*/\1/p' |
        awk -v a="$3" '{ printf "%.2f", $1 - a }')"
}

# Re-enumeration under traffic: ping every 100 ms and iperf3 -R running,
# the host makes the device drop off the bus for $REPLUG_MS ms. Keys:
# replug_t0 (uptime of the cue), replug_gone_s / replug_back_s /
# replug_configured_s (seconds after t0: cdc_ncm's interface gone, back,
# configured with carrier), replug_unregister / replug_register (cdc_ncm's
# messages, boot included), replug_ping_* (ncm-ping: sent, received,
# lost, longest_gap_ms, recover_s), replug_iperf_* (rc, mbps, intervals,
# zero_intervals, last3_live), then ping_after_*.
replug_mode() {
    local t0 tg tb tc ipid ppid n
    ip link set "$IFACE" up
    wait_carrier || t "warning=no carrier after ${CARRIER_WAIT}s, trying anyway"
    configure_ip
    run_ping 56 ping 5
    lockup_watch
    netwatch_start
    t phase=replug-traffic
    rm -f /tmp/rp-iperf.rc
    (timeout $((REPLUG_TIME + 60)) iperf3 -c "$SERVER" -p "$PORT" -t "$REPLUG_TIME" \
        -R -i 1 -f m --connect-timeout 10000 > /tmp/rp-iperf.out 2>&1
     echo $? > /tmp/rp-iperf.rc) &
    ipid=$!
    ncm-ping -i 100 -w $((REPLUG_TIME + 2)) "$GW" > /tmp/rp-ping.out 2>&1 &
    ppid=$!
    sleep 3
    t0=$(now)
    t "replug_t0=$t0"
    t "replug_requested_ms=$REPLUG_MS"
    cue replug "$REPLUG_MS"
    if wait_for 15 iface_gone; then
        tg=$(now)
        t "replug_gone_s=$(elapsed "$t0" "$tg")"
        if wait_for 30 iface_back; then
            tb=$(now)
            n=$(ncm_iface)
            t "replug_back_s=$(elapsed "$t0" "$tb")"
            t "replug_back_iface=$n"
            if wait_for 20 iface_configured; then
                tc=$(now)
                t "replug_configured_s=$(elapsed "$t0" "$tc")"
                t "replug_addr=$(ip -4 addr show dev "$n" | sed -n 's/.*inet \([^ ]*\).*/\1/p')"
            else
                t "replug_configured_s=never"
            fi
        else
            t "replug_back_s=never"
        fi
    else
        t "replug_gone_s=never"
    fi
    wait_file /tmp/rp-iperf.rc $((REPLUG_TIME + 70)) || {
        t "replug_iperf_rc=hang"; kill "$ipid" 2>/dev/null; }
    # (not a bare wait: netwatch runs in the background until stopped)
    wait "$ppid"
    t phase=replug-results
    [ -e /tmp/rp-iperf.rc ] && t "replug_iperf_rc=$(cat /tmp/rp-iperf.rc)"
    grep -E 'receiver$|error' /tmp/rp-iperf.out
    t "replug_iperf_error=$(grep -m1 -i 'error' /tmp/rp-iperf.out)"
    iperf_summary /tmp/rp-iperf.out replug_iperf
    ping_summary /tmp/rp-ping.out replug_ping "$t0"
    t "replug_unregister=$(dmesg_count "unregister 'cdc_ncm'")"
    t "replug_register=$(dmesg_count "register 'cdc_ncm'")"
    t "replug_disconnect=$(dmesg_count 'USB disconnect')"
    dmesg | grep -E "USB disconnect|new .*USB device|register 'cdc_ncm'|cdc_ncm.*(unregister|error)" |
        sed 's/^/NCMTEST replug_dmesg=/'
    IFACE=$(ncm_iface) || IFACE=none
    run_ping 56 ping_after 10
    netwatch_stop
    [ "$IFACE" != none ] && report_counters
    cue_final
}

# runtime_status DEV
rt_status() { cat "$1/power/runtime_status" 2>/dev/null; }
is_suspended() { [ "$(rt_status "$USBDEV")" = suspended ]; }

# USB selective suspend of the device with the interface up and idle
# (IPv6 off on it so that nothing is sent by itself); a frame from the
# host (cue=udp: a datagram through slirp's hostfwd) must wake it. Keys
# auto_*: the device's power attributes, auto_suspended (yes after
# auto_suspend_s seconds | no), auto_wake_rx (the datagram reached the
# guest: yes after auto_wake_s | no), auto_status_after, auto_wake_ping.
# With remote-wakeup off Linux does not autosuspend a device whose
# interface is up (usbnet asks for remote wakeup): auto_suspended=no and
# auto_blocked says why; then with the interface down it does suspend
# (auto_down_suspended) and the frame is not delivered (auto_down_wake_rx).
pm_autosuspend() {
    local t0 t1 f lpid mark
    t phase=autosuspend
    USBDEV=$(usb_dev_of "$IFACE")
    for f in bmAttributes power/wakeup power/control power/autosuspend_delay_ms \
             power/runtime_status speed; do
        t "auto_${f##*/}=$(cat "$USBDEV/$f" 2>/dev/null || echo absent)"
    done
    rm -f /tmp/wake.out
    ncm-ping -l "$WAKE_PORT" -w 60 > /tmp/wake.out 2>&1 &
    lpid=$!
    sleep 0.5
    # usbcore's reasons (remote wakeup refused, won't remote wakeup...)
    # into dmesg, printed as auto_dmesg= lines at the end
    mkdir -p /sys/kernel/debug
    mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
    for f in hub.c driver.c port.c; do
        echo "file drivers/usb/core/$f +p" > /sys/kernel/debug/dynamic_debug/control 2>/dev/null
    done
    mark=$(dmesg | tail -n1 | sed -n 's/^\[ *\([0-9.]*\)\].*/\1/p')
    echo "$AUTOSUSPEND_MS" > "$USBDEV/power/autosuspend_delay_ms"
    echo auto > "$USBDEV/power/control"
    t0=$(now)
    if wait_for 10 is_suspended; then
        t "auto_suspended=yes"
        t "auto_suspend_s=$(elapsed "$t0" "$(now)")"
        sleep 1
        t "auto_status_before=$(rt_status "$USBDEV")"
        cue stats suspended
        t1=$(now)
        cue udp "$WAKE_PORT"
        if wait_for 10 grep -q '^UDP got' /tmp/wake.out; then
            t "auto_wake_rx=yes"
            t "auto_wake_s=$(elapsed "$t1" "$(sed -n 's/^UDP got.* at //p' /tmp/wake.out)")"
        else
            t "auto_wake_rx=no"
        fi
        t "auto_status_after=$(rt_status "$USBDEV")"
        cue stats after-wake
    else
        t "auto_suspended=no"
        t "auto_status=$(rt_status "$USBDEV")"
        t "auto_blocked=power/wakeup $(cat "$USBDEV/power/wakeup" 2>/dev/null || echo absent), bmAttributes $(cat "$USBDEV/bmAttributes"): usbnet needs remote wakeup to autosuspend an interface that is up"
        # the datagram still gets through an awake device
        cue udp "$WAKE_PORT"
        if wait_for 10 grep -q '^UDP got' /tmp/wake.out; then
            t "auto_wake_rx=yes (never suspended)"
        else
            t "auto_wake_rx=no"
        fi
        # interface down: usbnet does not need remote wakeup any more
        kill "$lpid" 2>/dev/null
        wait "$lpid" 2>/dev/null
        rm -f /tmp/wake.out
        ip link set "$IFACE" down
        ncm-ping -l "$WAKE_PORT" -w 60 > /tmp/wake.out 2>&1 &
        lpid=$!
        if wait_for 10 is_suspended; then
            t "auto_down_suspended=yes"
            cue stats down-suspended
            cue udp "$WAKE_PORT"
            sleep 5
            t "auto_down_status_after=$(rt_status "$USBDEV")"
            cue stats down-after-frame
        else
            t "auto_down_suspended=no"
        fi
        ip link set "$IFACE" up
        wait_carrier >/dev/null
        ip route add default via "$GW" dev "$IFACE" 2>/dev/null
        # a frame the device held while suspended arrives now, late
        if wait_for 3 grep -q '^UDP got' /tmp/wake.out; then
            t "auto_down_late_rx=yes"
        else
            t "auto_down_late_rx=no"
        fi
    fi
    kill "$lpid" 2>/dev/null
    wait "$lpid" 2>/dev/null
    echo on > "$USBDEV/power/control"
    for f in hub.c driver.c port.c; do
        echo "file drivers/usb/core/$f -p" > /sys/kernel/debug/dynamic_debug/control 2>/dev/null
    done
    dmesg | awk -v m="${mark:-0}" '{ t = $0; sub(/^\[ */, "", t); sub(/\].*/, "", t) }
        t + 0 > m + 0' | grep -iE 'wakeup|suspend|resum|usb [0-9]' | head -n 30 |
        sed 's/^/NCMTEST auto_dmesg=/'
    t "auto_runtime_suspended_ms=$(cat "$USBDEV/power/runtime_suspended_time" 2>/dev/null)"
    wait_carrier >/dev/null
    run_ping 56 auto_wake_ping 5
}

# Suspend to RAM: the host wakes the guest with system_wakeup (cue=wakeup:
# it waits until QEMU reports the guest suspended). QEMU resets the machine
# on wakeup, the xHCI included: the device comes back through a
# re-enumeration, netwatch configures it. Keys s3_*: mem_sleep,
# s3_rc (of the write to /sys/power/state), s3_slept_s, s3_back_s (the
# interface configured again after resume), s3_ping (after), iperf
# before/after (iperf_s3_before_*, iperf_s3_after_*).
pm_s3() {
    local t0 t1 rc f
    t phase=s3
    t "s3_states=$(cat /sys/power/state)"
    t "s3_mem_sleep=$(cat /sys/power/mem_sleep 2>/dev/null)"
    echo deep > /sys/power/mem_sleep 2>/dev/null ||
        t "s3_mem_sleep_deep=failed"
    t "s3_mem_sleep_now=$(cat /sys/power/mem_sleep 2>/dev/null)"
    run_iperf down s3_before
    cue stats s3-before
    netwatch_start
    cue wakeup
    t0=$(now)
    echo mem > /sys/power/state 2>/tmp/s3.err
    # shellcheck disable=SC2320 # the status of the write is the one wanted
    rc=$?
    t1=$(now)
    t "s3_rc=$rc $(cat /tmp/s3.err)"
    t "s3_slept_s=$(elapsed "$t0" "$t1")"
    t phase=s3-resumed
    if wait_for 40 iface_configured; then
        t "s3_back_s=$(elapsed "$t1" "$(now)")"
    else
        t "s3_back_s=never"
    fi
    IFACE=$(ncm_iface) || IFACE=none
    t "s3_iface=$IFACE"
    dmesg | grep -E 'PM: suspend (entry|exit)|ACPI: PM: (Preparing|Waking|Low-level)|xhci.*(resume|Reinit|error)|USB disconnect|new .*USB device|reset .*USB device|register .cdc_ncm' |
        tail -n 20 | sed 's/^/NCMTEST s3_dmesg=/'
    netwatch_stop
    cue stats s3-resumed
    run_ping 56 s3_ping 10
    run_iperf down s3_after
    cue stats s3-after
    # does programming the NTB input size again (SET_NTB_INPUT_SIZE: a
    # different rx_max) change anything? cdc_ncm's reset_resume does not
    f=/sys/class/net/$IFACE/cdc_ncm/rx_max
    if [ -w "$f" ]; then
        t "s3_rx_max=$(cat "$f")"
        echo $(($(cat "$f") * 2)) > "$f"
        t "s3_rx_max_rewritten=$(cat "$f")"
        run_iperf down s3_after_rx_max
    fi
}

suspend_mode() {
    local p
    # nothing on the interface but what the test sends
    echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6
    echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6
    echo 1 > "/proc/sys/net/ipv6/conf/$IFACE/disable_ipv6" 2>/dev/null
    NETWATCH_NO_V6=1
    ip link set "$IFACE" up
    wait_carrier || t "warning=no carrier after ${CARRIER_WAIT}s, trying anyway"
    configure_ip
    run_ping 56 ping 5
    lockup_watch
    for p in $(echo "$PM_PARTS" | tr ',' ' '); do
        case $p in
        auto) pm_autosuspend ;;
        s3) pm_s3 ;;
        esac
        [ "$IFACE" = none ] && break
    done
    [ "$IFACE" != none ] && report_counters
    cue_final
}

# ll_ready IFACE: a link-local address that finished duplicate detection
ll_ready() {
    ip -6 addr show dev "$1" scope link 2>/dev/null | grep -q inet6 &&
        ! ip -6 addr show dev "$1" 2>/dev/null | grep -q tentative
}
has_ra() { ip -6 route show default 2>/dev/null | grep -q 'via fe80::2'; }

# IPv6 through cdc_ncm, which sets the packet filter (all-multicast when
# the interface joined groups): link-local ping to slirp's router fe80::2
# (neighbour discovery: our NS goes out to a solicited-node group, the NA
# comes back directed), a router advertisement (multicast to ff02::1,
# the answer to our router solicitation) giving a default route via
# fe80::2. Then the usbfs step "filter": the function without
# SET_ETHERNET_PACKET_FILTER. Keys mcast_*.
mcast_mode() {
    local out
    t phase=mcast
    echo 0 > "/proc/sys/net/ipv6/conf/$IFACE/disable_ipv6" 2>/dev/null
    ip link set "$IFACE" up
    wait_carrier || t "warning=no carrier after ${CARRIER_WAIT}s, trying anyway"
    configure_ip
    if wait_for 10 ll_ready "$IFACE"; then
        t "mcast_ll=$(ip -6 addr show dev "$IFACE" scope link | sed -n 's/.*inet6 \([^ ]*\).*/\1/p')"
    else
        t "mcast_ll=none"
    fi
    out=$(timeout 20 ping6 -c 5 -i 0.3 -W 2 -I "$IFACE" fe80::2 2>&1)
    t "mcast_ll_ping=$(echo "$out" | sed -n 's/.*, \([0-9]*\) packets received.*/\1/p') of 5"
    t "mcast_neigh=$(ip -6 neigh show dev "$IFACE" | grep -m1 'fe80::2 ' | tr ' ' '_')"
    # the advertisement gives a default route via fe80::2 (and a fec0::
    # prefix, which Linux may or may not autoconfigure)
    if wait_for 12 has_ra; then
        t "mcast_ra=yes"
        t "mcast_global=$(ip -6 addr show dev "$IFACE" scope global | sed -n 's/.*inet6 \([^ ]*\).*/\1/p' | head -n1)"
    else
        t "mcast_ra=no"
    fi
    t "mcast_route6=$(ip -6 route show default 2>/dev/null | head -n1 | tr ' ' '_')"
    t "mcast_allmulti=$(ip link show "$IFACE" | grep -o ALLMULTI || echo no)"
    cue stats mcast-cdc_ncm
    report_counters
    # the function without SET_ETHERNET_PACKET_FILTER (a USB reset brings
    # the power-on filter back), then with it
    t phase=mcast-usbfs
    t "stress_step=filter"
    timeout 120 ncm-usbfs-stress filter
    t "mcast_usbfs_rc=$?"
    cue stats mcast-usbfs
    wait_for 20 iface_back
    IFACE=$(ncm_iface) || IFACE=none
    if [ "$IFACE" != none ]; then
        ip link set "$IFACE" up
        wait_carrier >/dev/null
        ip addr add "$IPADDR" dev "$IFACE" 2>/dev/null
        ip route add default via "$GW" dev "$IFACE" 2>/dev/null
        run_ping 56 ping_after 5
    fi
    cue_final
}

# Throughput per NTB size: rx_max and tx_max set to each of $NTB_SIZES
# (with the interface up: cdc_ncm re-programs the function), then iperf3
# up and down for $TIME s. Keys iperf_up_N_*, iperf_down_N_*, and
# ntb_N_rx_max / ntb_N_tx_max (what cdc_ncm took).
ntbsweep_mode() {
    local n
    ip link set "$IFACE" up
    wait_carrier || t "warning=no carrier after ${CARRIER_WAIT}s, trying anyway"
    configure_ip
    run_ping 56 ping 5
    for n in $(echo "$NTB_SIZES" | tr ',' ' '); do
        t "phase=ntb-$n"
        set_ntb_size rx_max "$n" >/dev/null
        set_ntb_size tx_max "$n" >/dev/null
        t "ntb_${n}_rx_max=$(cat "/sys/class/net/$IFACE/cdc_ncm/rx_max")"
        t "ntb_${n}_tx_max=$(cat "/sys/class/net/$IFACE/cdc_ncm/tx_max")"
        wait_carrier >/dev/null
        run_iperf up "up_$n"
        run_iperf down "down_$n"
    done
    report_counters
    cue_final
}

pm_main() {
    report_device
    "${MODE}_mode"
}
