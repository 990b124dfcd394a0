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
# (QEMU 10.2.2's hw/acpi/cxl.c, which the PC machines build, calls
# cxl_fmws_get_all_sorted(), which only CXL's own code has: no link
# without it; CXL depends on the PCI expander bridge, its mailbox code on
# the type 3 memory device, its root port on PCIe's)
CONFIG_PXB=y
CONFIG_CXL=y
CONFIG_CXL_MEM_DEVICE=y
CONFIG_PCIE_PORT=y

CONFIG_USB_XHCI_PCI=y
CONFIG_USB_EHCI_PCI=y
CONFIG_USB_UHCI=y
CONFIG_USB_OHCI_PCI=y
CONFIG_USB_HUB=y

CONFIG_USB_NCM=y
CONFIG_USB_NCM_FAULT=y
