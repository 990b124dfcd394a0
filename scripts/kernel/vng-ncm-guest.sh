#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Runs INSIDE a virtme-ng guest (scripts/kernel/vng-ncm.sh passes it to
# `vng --exec`; the guest sees the host's files, so this is the repo's own
# copy): load xhci_pci and cdc_ncm, wait for the usb-ncm-dl interface,
# give it 10.0.2.15/24 (QEMU's -netdev user network), ping 10.0.2.2 and
# print one line the host reads (last):
#
#   vng-ncm-guest: kernel=6.1.0-57-amd64 iface=enx525400123456 bind="CDC NCM (SEND ZLP)" carrier=1 ping=5/5 rc=0
#
# Exit status: 0 bound and every ping answered, 1 bound but pings were
# lost (or no carrier), 2 cdc_ncm did not bind.  POSIX sh: the guest runs
# the host's userland, but nothing here needs bash.
#
#   sh vng-ncm-guest.sh ping [PINGS]            (default 5)
#   sh vng-ncm-guest.sh zlp PORT SECONDS        the ZLP merge scenario's
#       guest half: the pings, then tx_max raised to the device's
#       dwNtbOutMaxSize (what DisplayLink's udev rule does) and iperf3 up to
#       the host's server on 10.0.2.2:PORT; the line gets tx_max=,
#       up_mbps= and up_rc= (the device's counters are read on the host)

SCN=${1:-ping}
case $SCN in
zlp) PINGS=3 PORT=${2:?port} SECS=${3:-8} ;;
*) PINGS=${2:-5} ;;
esac

say() { echo "vng-ncm-guest: $*"; }

for m in xhci_pci cdc_ncm; do
    modprobe "$m" 2>/dev/null || say "modprobe $m failed (built in?)"
done

# the interface cdc_ncm drives, once udev has renamed it (enx<mac>)
iface=""
i=0
while [ "$i" -lt 30 ]; do
    command -v udevadm >/dev/null 2>&1 && udevadm settle -t 5 2>/dev/null
    for n in /sys/class/net/*; do
        d=$(readlink -f "$n/device/driver" 2>/dev/null)
        case $d in */cdc_ncm) iface=${n##*/} ;; esac
    done
    [ -n "$iface" ] && break
    sleep 1
    i=$((i + 1))
done
bind=$(dmesg | grep "register 'cdc_ncm'" | grep -o 'CDC NCM[^,]*' | head -n 1)
dmesg | grep -E "cdc_ncm|usb 2-1: New USB device|usb 2-1: Product" | sed 's/^/    /'
if [ -z "$iface" ]; then
    say "kernel=$(uname -r) iface=none bind=\"$bind\" carrier=0 ping=0/$PINGS rc=2"
    exit 2
fi

ip link set "$iface" up
ip addr add 10.0.2.15/24 dev "$iface" 2>/dev/null
carrier=0
i=0
while [ "$i" -lt 20 ]; do
    carrier=$(cat "/sys/class/net/$iface/carrier" 2>/dev/null || echo 0)
    [ "$carrier" = 1 ] && break
    sleep 0.5
    i=$((i + 1))
done
out=$(ping -c "$PINGS" -i 0.5 -W 2 -I "$iface" 10.0.2.2 2>&1)
echo "$out" | tail -n 2 | sed 's/^/    /'
got=$(echo "$out" | sed -n 's/.* \([0-9][0-9]*\) \(packets \)\{0,1\}received.*/\1/p')
got=${got:-0}
rc=1
[ "$carrier" = 1 ] && [ "$got" = "$PINGS" ] && rc=0
extra=""
if [ "$SCN" = zlp ]; then
    d=/sys/class/net/$iface/cdc_ncm
    max=$(cat "$d/dwNtbOutMaxSize" 2>/dev/null)
    [ -z "$max" ] || echo "$max" > "$d/tx_max" 2>/dev/null
    tx=$(cat "$d/tx_max" 2>/dev/null)
    up=$(iperf3 -c 10.0.2.2 -p "$PORT" -t "$SECS" 2>&1)
    urc=$?
    echo "$up" | tail -n 4 | sed 's/^/    /'
    # the receiver's rate, in Mbit/s whatever unit iperf3 chose
    mbps=$(echo "$up" | awk '/receiver/ {
        for (i = 1; i < NF; i++) if ($(i + 1) ~ /bits\/sec$/) { v = $i; u = $(i + 1) } }
        END { if (u == "") exit
              if (u ~ /^K/) v /= 1000; else if (u ~ /^G/) v *= 1000
              else if (u ~ /^bits/) v /= 1000000
              printf "%.3g\n", v }')
    extra=" dwNtbOutMaxSize=${max:-?} tx_max=${tx:-?} up_mbps=${mbps:-?} up_rc=$urc"
    [ "$urc" = 0 ] || rc=1
fi
say "kernel=$(uname -r) iface=$iface bind=\"$bind\" carrier=$carrier ping=$got/$PINGS$extra rc=$rc"
exit "$rc"
