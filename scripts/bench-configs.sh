# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck shell=bash
#
# The NIC configurations that make bench and make profile boot, one per
# line.  Sourced; config_field NAME FIELD prints one field (2: controller,
# 3: -device argument, 4: extra guest kernel parameters).
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
