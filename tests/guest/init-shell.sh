# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck shell=dash disable=SC2013,SC3043
# (SC2013: the kernel command line is words; SC3043: busybox ash has local)
#
# ncm.mode=shell, the default, of the test guest's /init (make shell;
# tests/guest/init.sh sources this from /etc/ncm/init-shell.sh and runs
# shell_main, or shell_mode alone when no interface came up).

shell_mode() {
    echo
    echo "usb-ncm-dl guest shell (busybox). Kernel $(uname -r)."
    if [ -n "$IFACE" ]; then
        echo "Network: $IFACE (driver $(driver_of "$IFACE")), $IPADDR, gateway $GW."
    else
        echo "No network interface was found: see 'dmesg | grep -i usb'."
    fi
    local i=${IFACE:-eth0}
    cat <<EOF
Try:  ip link; ip addr              interfaces and addresses
      grep . /sys/class/net/$i/cdc_ncm/*    negotiated NTB parameters
      echo 65536 > /sys/class/net/$i/cdc_ncm/rx_max   (also tx_max)
      ethtool -S $i                 cdc_ncm counters (tx_reason_*, ntbs)
      ping -c 5 $GW                 slirp's gateway (the host)
      iperf3 -c $SERVER -p $PORT -t 5 [-R]   to the host's iperf3 server
      dmesg | grep -i -e usb -e cdc    kernel messages (dmesg -n 7: live)
      ncm-usbfs-stress list         usbfs stress steps; "ncm-usbfs-stress -v
                                    in-4" runs one (takes $i from cdc_ncm)
Leave with 'exit' (powers off) or Ctrl-A X (quits QEMU).
EOF
    # The serial line has no size: take the host terminal's.
    [ -n "$COLS" ] && [ -n "$ROWS" ] && stty cols "$COLS" rows "$ROWS" 2>/dev/null
    setsid cttyhack sh -l
    poweroff -f
}

shell_main() {
    ip link set "$IFACE" up
    wait_carrier >/dev/null
    configure_ip
    shell_mode
}
