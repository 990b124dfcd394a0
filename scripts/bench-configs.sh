# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck shell=bash
#
# The NIC configurations that make bench and make profile boot, one per
# line.  Sourced after tests/guest/lib.sh; config_field NAME FIELD prints
# one field (2: controller, 3: -device argument, 4: extra guest kernel
# parameters), config_guest_cmd prepares a boot of one.
#
# ncm-64k-sync reads bulk OUT in the vCPU thread, as before the bottom half.
# ncm-64k-dN advertise wNtbOutMaxDatagrams N, so that cdc_ncm sends an NTB
# as soon as it holds N datagrams instead of waiting for its TX timer.
# name | controller | device | kernel parameters
CONFIG_TABLE="
ncm-16k|xhci|usb-ncm-dl,id=ncm|ncm.rx_max=16384 ncm.tx_max=16384
ncm-32k|xhci|usb-ncm-dl,id=ncm|ncm.rx_max=32768 ncm.tx_max=32768
ncm-64k|xhci|usb-ncm-dl,id=ncm|ncm.rx_max=65536 ncm.tx_max=65536
ncm-64k-sync|xhci|usb-ncm-dl,id=ncm,x-deferred-out=off|ncm.rx_max=65536 ncm.tx_max=65536
ncm-64k-t20|xhci|usb-ncm-dl,id=ncm|ncm.rx_max=65536 ncm.tx_max=65536 ncm.sysfs=tx_timer_usecs=20
ncm-64k-d2|xhci|usb-ncm-dl,id=ncm,ntb-out-max-datagrams=2|ncm.rx_max=65536 ncm.tx_max=65536
ncm-64k-d4|xhci|usb-ncm-dl,id=ncm,ntb-out-max-datagrams=4|ncm.rx_max=65536 ncm.tx_max=65536
ncm-64k-d8|xhci|usb-ncm-dl,id=ncm,ntb-out-max-datagrams=8|ncm.rx_max=65536 ncm.tx_max=65536
ncm-64k-d16|xhci|usb-ncm-dl,id=ncm,ntb-out-max-datagrams=16|ncm.rx_max=65536 ncm.tx_max=65536
usb-net|xhci|usb-net|
virtio-net|pci|virtio-net-pci|
"

config_field() {
    awk -F'|' -v n="$1" -v f="$2" '$1 == n { print $f }' <<<"$CONFIG_TABLE"
}

# config_guest_cmd NAME GUESTDIR VARNAME APPEND: GUEST_CMD for a bench-mode
# boot of configuration NAME against the host's iperf3 server, with the
# guest kernel parameters APPEND; CONFIG_QOM is the usb-ncm device's id for
# guest_run_with_stats ("-" for other NICs). VARNAME names the variable the
# user set, for the message when NAME is unknown.
# shellcheck disable=SC2034 # CONFIG_QOM is read by the sourcing script
config_guest_cmd() {
    local name=$1 dir=$2 var=$3 append=$4 ctrl dev
    ctrl=$(config_field "$name" 2)
    dev=$(config_field "$name" 3)
    [ -n "$dev" ] || die "unknown configuration '$name'" \
        "$var takes: $(awk -F'|' 'NF > 1 { printf "%s ", $1 }' <<<"$CONFIG_TABLE")"
    guest_device_args "$ctrl" "$dev"
    CONFIG_QOM=-
    case $dev in *id=ncm*) CONFIG_QOM=ncm ;; esac
    guest_qemu_cmd "$dir" "ncm.mode=bench ncm.driver=$GUEST_DRIVER \
ncm.port=$GUEST_IPERF_PORT $append $(config_field "$name" 4)"
}
