# SPDX-License-Identifier: GPL-2.0-or-later
#
# The devices of the device fuzzer's qemu-fuzz-x86_64 (build/fuzz-qemu and
# build/fuzz-cov, scripts/check/fuzz-device.sh): the two PC machines and the
# four host controllers its targets put usb-ncm-dl behind, nothing else.
# Configured with --without-default-devices, so the clang build compiles a
# fraction of the default device set (scripts/setup/build-qemu.sh copies
# this file into the tree as configs/devices/x86_64-softmmu/ncm-devices.mak).
# QEMU's other generic-fuzz configurations name devices that are not here;
# make fuzz-oss builds the full set as OSS-Fuzz does.

CONFIG_I440FX=y
CONFIG_Q35=y

CONFIG_USB_XHCI_PCI=y
CONFIG_USB_EHCI_PCI=y
CONFIG_USB_UHCI=y
CONFIG_USB_OHCI_PCI=y
CONFIG_USB_HUB=y

CONFIG_USB_NCM=y
CONFIG_USB_NCM_FAULT=y
