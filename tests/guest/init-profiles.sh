# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck shell=sh
#
# Sourced by tests/guest/init.sh (as /etc/ncm/init-profiles.sh; it runs
# profiles_main) for
# ncm.mode=profiles: several NCM functions in one guest, one per profile=
# (tests/guest/run-profile-test.sh puts them there), each checked on its
# own interface.  Interface I is the function whose MAC ends in :0I; its
# slirp netdev is 10.0.(2+I).0/24, the host 10.0.(2+I).2.
#
# ncm.profiles=N   how many interfaces to wait for
# ncm.profile_rx=8192   rx_max written to every interface whose
#                  dwNtbInMaxSize is larger (cdc_ncm then sends
#                  SET_NTB_INPUT_SIZE; "none" skips)
#
# Keys, per interface I (prefix pI_): iface, usb_id, usb_speed_mbps,
# dmesg (cdc_ncm's "register" line), cdc_ncm.* (the sysfs files), mtu1504
# and mtu1505 (ok/refused: cdc_ncm's max MTU is wMaxSegmentSize - 14),
# rx_max.write/readback, carrier, ping_received (10 x 56 bytes),
# ping1400_received (5 x 1400), iperf_up_rc/mbps, iperf_down_rc/mbps.
# Before and after the traffic: cue=stats pI-... for the host's x-stats.

profiles_mode() {
    local want=${PROFILES:-5} rx=${PROFILE_RX:-8192} list n i mac
    local pairs="" p k gw dev v out rc dir flag f
    list=$(wait_ifaces "$want")
    t "profile_ifaces=$(echo "$list" | tr "\n" " ")"
    for n in $list; do
        mac=$(cat "/sys/class/net/$n/address")
        i=$((0x${mac##*:}))
        pairs="$pairs $n:$i"
        k=p$i
        dev=/sys/class/net/$n
        v=$(readlink -f "$dev/device/..")
        t "${k}_iface=$n"
        t "${k}_mac=$mac"
        t "${k}_usb_id=$(cat "$v/idVendor"):$(cat "$v/idProduct")"
        t "${k}_usb_speed_mbps=$(cat "$v/speed")"
        t "${k}_dmesg=$(dmesg | grep "register 'cdc_ncm'" | grep -i "$mac" | tail -n1)"
        for f in "$dev"/cdc_ncm/*; do
            [ -r "$f" ] && t "${k}_cdc_ncm.${f##*/}=$(cat "$f" 2>/dev/null)"
        done
        # cdc_ncm's max MTU is wMaxSegmentSize - 14 (busybox ip does not
        # show maxmtu): probe it
        for v in 1504 1505; do
            if ip link set "$n" mtu "$v" 2>/dev/null; then
                t "${k}_mtu$v=ok"
            else
                t "${k}_mtu$v=refused"
            fi
        done
        ip link set "$n" mtu 1500
        if [ "$rx" != none ] &&
           [ "$(cat "$dev/cdc_ncm/dwNtbInMaxSize")" -gt "$rx" ]; then
            if echo "$rx" > "$dev/cdc_ncm/rx_max" 2>/dev/null; then
                t "${k}_rx_max.write=ok"
            else
                t "${k}_rx_max.write=fail"
            fi
            t "${k}_rx_max.readback=$(cat "$dev/cdc_ncm/rx_max")"
        fi
        ip link set "$n" up
    done
    t phase=carrier
    for p in $pairs; do
        IFACE=${p%%:*}
        i=${p#*:}
        if wait_carrier >/dev/null; then t "p${i}_carrier=1"; else t "p${i}_carrier=0"; fi
        ip addr add "10.0.$((2 + i)).15/24" dev "$IFACE"
    done
    for p in $pairs; do
        i=${p#*:}
        t "cue=stats p$i-before /machine/peripheral/ncm$i"
    done
    for p in $pairs; do
        IFACE=${p%%:*}
        i=${p#*:}
        k=p$i
        gw=10.0.$((2 + i)).2
        t "phase=profile-$i"
        out=$(timeout 30 ncm-ping -c 10 -i 200 -W 5 "$gw" 2>&1)
        t "${k}_ping_received=$(echo "$out" | sed -n 's/.*, \([0-9]*\) packets received.*/\1/p')"
        out=$(timeout 30 ncm-ping -c 5 -i 200 -W 5 -s 1400 "$gw" 2>&1)
        t "${k}_ping1400_received=$(echo "$out" | sed -n 's/.*, \([0-9]*\) packets received.*/\1/p')"
        for dir in up down; do
            flag=
            [ "$dir" = down ] && flag=-R
            for v in 1 2 3; do
                timeout $((TIME + 40)) iperf3 -c "$gw" -p "$PORT" -t "$TIME" \
                    -f m --connect-timeout 10000 $flag > /tmp/iperf.out 2>&1
                rc=$?
                # the server may still be closing the last test
                grep -q "server is busy" /tmp/iperf.out || break
                sleep 2
            done
            t "${k}_iperf_${dir}_rc=$rc"
            t "${k}_iperf_${dir}_mbps=$(awk '/receiver$/ { for (j = 1; j <= NF; j++)
                if ($j == "Mbits/sec") v = $(j - 1) } END { print v + 0 }' /tmp/iperf.out)"
            [ "$rc" = 0 ] || grep -i error /tmp/iperf.out | head -n 2
        done
    done
    for p in $pairs; do
        i=${p#*:}
        t "cue=stats p$i-after /machine/peripheral/ncm$i"
    done
    # the host answers cues as it reads the log: give it a moment
    sleep 2
}

profiles_main() {
    profiles_mode
}
