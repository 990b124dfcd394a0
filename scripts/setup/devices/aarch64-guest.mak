# SPDX-License-Identifier: GPL-2.0-or-later
#
# The devices of qemu-system-aarch64 as this project builds it
# (build/qemu, ARCH=arm64 make qemu): the virt board and what the arm64
# guest legs and ARCH=arm64 make run put on it, in place of QEMU's default
# aarch64 set, which builds every 32- and 64-bit Arm board (QEMU's other
# default devices stay, as for x86_64; scripts/setup/build-qemu.sh copies
# this file into the tree as configs/devices/aarch64-softmmu/ncm-devices.mak).

CONFIG_ARM_VIRT=y

# the host controllers, on virt's PCIe root bus, and a hub
CONFIG_USB_XHCI_PCI=y
CONFIG_USB_EHCI_PCI=y
CONFIG_USB_UHCI=y
CONFIG_USB_OHCI_PCI=y
CONFIG_USB_HUB=y

# the device, its fault injection, and the NICs it is compared with
CONFIG_USB_NCM=y
CONFIG_USB_NCM_FAULT=y
CONFIG_USB_NETWORK=y
CONFIG_VIRTIO_PCI=y
CONFIG_VIRTIO_NET=y
