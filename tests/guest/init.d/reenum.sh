# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck shell=dash disable=SC2034
#
# Sourced by /init (tests/guest/init.sh).
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
