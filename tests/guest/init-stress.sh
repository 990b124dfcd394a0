# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck shell=dash disable=SC2013,SC3043
# (SC2013: the kernel command line is words; SC3043: busybox ash has local)
#
# ncm.mode=stress of the test guest's /init (tests/guest/init.sh sources
# this from /etc/ncm/init-stress.sh and runs stress_main;
# tests/guest/run-stress-test.sh): the ncm-usbfs-stress steps of
# ncm.stress. Uses the helpers of init.sh.

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
    out=$(timeout 30 ncm-ping -c 5 -i 200 -W 5 "$GW" 2>&1)
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
        # shellcheck disable=SC2086 # STRESS_V: empty or -v
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

stress_main() {
    report_device
    set_ntb_size rx_max "$RX_MAX"
    set_ntb_size tx_max "$TX_MAX"
    stress_mode
}
