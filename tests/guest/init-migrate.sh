# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck shell=dash disable=SC2013,SC2153,SC3043
# (SC2013: the kernel command line is words; SC2153: PORT and the other
#  parameters are init.sh's; SC3043: busybox ash has local)
#
# ncm.mode=migrate of the test guest's /init (tests/guest/init.sh sources
# this from /etc/ncm/init-migrate.sh and runs migrate_main). Uses the
# helpers of init.sh.

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

migrate_main() {
    report_device
    migrate_mode
}
