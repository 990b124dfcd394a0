# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck shell=dash disable=SC2013,SC3043
# (SC2013: the kernel command line is words; SC3043: busybox ash has local)
#
# The controller set-ups of real machines, in the test guest's test mode
# (tests/guest/init-test.sh sources this from /etc/ncm/init-topology.sh
# after its TCP runs; tests/guest/run-guest-test.sh with the set-ups
# tests/guest/lib.sh names ehci-uhci, ehci-ohci, xhci-dual). Uses the
# helpers of init.sh (netwatch, wait_for, ncm_iface, usb_dev_of, cue).
#
#   ncm.companion=1   the device's EHCI port goes to its companion
#                     controller and back (companion_move)
#   ncm.nics=2 ncm.port2=N   a second NCM interface (MAC ...:01,
#                     10.0.3.15/24, the host 10.0.3.2, its iperf3 server
#                     on port N): pings, then iperf3 on both interfaces at
#                     once (dual_traffic)
#   ncm.companion_replug_ms=1000   the re-plug while on the companion

COMPANION=0
NICS=1
PORT2=
COMPANION_REPLUG_MS=1000
for arg in $(cat /proc/cmdline); do
    case $arg in
    ncm.companion=*) COMPANION=${arg#*=} ;;
    ncm.nics=*) NICS=${arg#*=} ;;
    ncm.port2=*) PORT2=${arg#*=} ;;
    ncm.companion_replug_ms=*) COMPANION_REPLUG_MS=${arg#*=} ;;
    esac
done

# ncm_at SPEED: the cdc_ncm interface is there, on a USB device at SPEED
# Mbit/s, configured (address, carrier)
ncm_at() {
    local n
    n=$(ncm_iface) || return 1
    [ "$(cat "$(usb_dev_of "$n")/speed" 2>/dev/null)" = "$1" ] && iface_configured
}

# companion_step TAG SPEED BINDS: after a port move, wait (30 s) for cdc_ncm
# to have bound more than BINDS times and its interface to be configured at
# SPEED, then 20 pings. Keys TAG_s (seconds from the move), TAG_speed,
# TAG_hc ("PCI-function driver"), TAG_binds, TAG_ping_*.
companion_step() {
    local tag=$1 speed=$2 binds=$3 t0 n
    t0=$(now)
    if wait_for 30 sh -c "[ \$(dmesg | grep -c \" register 'cdc_ncm'\") -gt $binds ]" &&
       wait_for 30 ncm_at "$speed"; then
        t "${tag}_s=$(elapsed "$t0" "$(now)")"
    else
        t "${tag}_s=never"
    fi
    n=$(ncm_iface)
    if [ -n "$n" ]; then
        IFACE=$n
        t "${tag}_speed=$(cat "$(usb_dev_of "$n")/speed")"
        t "${tag}_hc=$(hc_of "$(usb_dev_of "$n")")"
    fi
    t "${tag}_binds=$(dmesg_count " register 'cdc_ncm'")"
    run_ping 56 "${tag}_ping" 20
}

# companion_move: with the interface up, write the device's port number to
# the EHCI's sysfs "companion" file (Linux sets the port's PORT_OWNER: the
# device leaves the EHCI and appears on the companion, at full speed);
# pings there; a re-plug of the device (usb-ncm-fault replug-ms: it comes back
# on the EHCI, whose driver hands the port over again since it is marked
# for the companion); pings; then "-N" takes the port back and the device
# comes back at high speed; pings. Keys companion_* (companion_ehci,
# companion_port, companion_hs_*: before, companion_fs_*: on the companion,
# companion_replug_*: after the re-plug there, companion_back_*: on the
# EHCI again).
companion_move() {
    local udev ehci port b
    udev=$(usb_dev_of "$IFACE")
    ehci=$udev
    while [ -n "$ehci" ] && [ ! -e "$ehci/companion" ]; do ehci=${ehci%/*}; done
    port=$(cat "$udev/devpath")
    t "companion_ehci=${ehci##*/}"
    t "companion_port=$port"
    t "companion_hs_speed=$(cat "$udev/speed")"
    t "companion_hs_hc=$(hc_of "$udev")"
    if [ -z "$ehci" ]; then
        t "companion_error=no companion file above $udev"
        return 1
    fi
    netwatch_start
    t phase=companion-to
    b=$(dmesg_count " register 'cdc_ncm'")
    if echo "$port" > "$ehci/companion" 2>/tmp/comp.err; then
        t "companion_write=ok $(tr "\n" " " < "$ehci/companion")"
    else
        t "companion_write=fail $(cat /tmp/comp.err)"
    fi
    companion_step companion_fs 12 "$b"
    t phase=companion-replug
    b=$(dmesg_count " register 'cdc_ncm'")
    cue replug "$COMPANION_REPLUG_MS"
    companion_step companion_replug 12 "$b"
    t phase=companion-back
    b=$(dmesg_count " register 'cdc_ncm'")
    if echo "-$port" > "$ehci/companion" 2>/tmp/comp.err; then
        t "companion_back_write=ok"
    else
        t "companion_back_write=fail $(cat /tmp/comp.err)"
    fi
    companion_step companion_back 480 "$b"
    netwatch_stop
}

# dual_traffic: the second NCM interface (the cdc_ncm one that is not
# $IFACE) gets 10.0.3.15/24; 10 pings to 10.0.3.2; then iperf3 on both
# interfaces at the same time, up, then down (-R), $TIME s, with a ping
# every 100 ms on each. Keys dual_iface, dual_carrier, dual_speed,
# dual_ping_received, dual_DIR_rc ("first second"), dual_DIR_mbps
# ("first second"), dual_DIR_ping_loss ("first second", percent).
dual_traffic() {
    local d n other="" dir flag i rc mb pl ip p out
    for d in /sys/class/net/*; do
        n=${d##*/}
        [ "$n" = lo ] || [ "$n" = "$IFACE" ] && continue
        [ "$(driver_of "$n")" = "$DRIVER" ] && other=$n
    done
    t phase=dual
    t "dual_iface=${other:-none}"
    [ -n "$other" ] || return 1
    t "dual_mac=$(cat "/sys/class/net/$other/address")"
    t "dual_speed=$(cat "$(usb_dev_of "$other")/speed")"
    ip link set "$other" up
    n=$IFACE
    IFACE=$other
    if wait_carrier >/dev/null; then t dual_carrier=1; else t dual_carrier=0; fi
    IFACE=$n
    ip addr add 10.0.3.15/24 dev "$other"
    out=$(timeout 30 ncm-ping -c 10 -i 200 -W 5 10.0.3.2 2>&1)
    t "dual_ping_received=$(echo "$out" | sed -n 's/.*, \([0-9]*\) packets received.*/\1/p')"
    for dir in up down; do
        flag=
        [ "$dir" = down ] && flag=-R
        t "phase=dual-$dir"
        rm -f /tmp/dual-*
        for i in 0 1; do
            if [ "$i" = 0 ]; then ip=10.0.2.2 p=$PORT; else ip=10.0.3.2 p=$PORT2; fi
            (timeout $((TIME + 40)) iperf3 -c "$ip" -p "$p" -t "$TIME" \
                -f m --connect-timeout 10000 $flag > "/tmp/dual-$i.out" 2>&1
             echo $? > "/tmp/dual-$i.rc") &
            (timeout $((TIME + 40)) ping -q -i 0.1 -c $((TIME * 10)) -W 2 "$ip" \
                > "/tmp/dual-ping-$i.out" 2>&1; echo $? > "/tmp/dual-ping-$i.rc") &
        done
        for i in 0 1; do
            wait_file "/tmp/dual-$i.rc" $((TIME + 50)) || echo hang > "/tmp/dual-$i.rc"
            wait_file "/tmp/dual-ping-$i.rc" 20 || echo hang > "/tmp/dual-ping-$i.rc"
        done
        rc="" mb="" pl=""
        for i in 0 1; do
            rc="$rc $(cat "/tmp/dual-$i.rc")"
            mb="$mb $(awk '/receiver$/ { for (k = 1; k <= NF; k++)
                if ($k == "Mbits/sec") v = $(k - 1) } END { print v + 0 }' "/tmp/dual-$i.out")"
            pl="$pl $(sed -n 's/.* \([0-9.]*\)% packet loss.*/\1/p' "/tmp/dual-ping-$i.out")"
            grep -E 'receiver$|error' "/tmp/dual-$i.out"
        done
        t "dual_${dir}_rc=${rc# }"
        t "dual_${dir}_mbps=${mb# }"
        t "dual_${dir}_ping_loss=${pl# }"
    done
}

topology_run() {
    [ "$COMPANION" = 1 ] && companion_move
    [ "$NICS" -ge 2 ] && dual_traffic
    return 0
}
