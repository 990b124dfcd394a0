/*
 * usb-ncm-dl qtest: an OHCI isochronous TD QEMU's OHCI must not abort on
 *
 * An isochronous ED's direction is the guest's: with D 00b, which QEMU
 * reads as SETUP, ohci_service_iso_td() handed SETUP for endpoint 1 to
 * usb_ep_get(), which asserts IN or OUT there, and QEMU aborted (finding
 * F18, found by usb-ncm-dl-ohci-fuzz).  patches/0024 skips such a TD as
 * one with a bad direction.  A minimal driver: port reset, one iso ED in
 * every slot of the HCCA's interrupt table, one iso TD due two frames on.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "fixture.h"

#define OHCI_CONTROL        0x04
#define OHCI_HCCA           0x18
#define OHCI_FMNUMBER       0x3c
#define OHCI_RHPORT1        0x54
#define OHCI_CTL_PLE        (1u << 2)
#define OHCI_CTL_IE         (1u << 3)
#define OHCI_CTL_OPER       (2u << 6)
#define OHCI_PORT_PES       (1u << 1)
#define OHCI_PORT_PRS       (1u << 4)
#define OHCI_PORT_PPS       (1u << 8)
#define OHCI_ED_F           (1u << 15)

static void test_ohci_iso_setup(void)
{
    NcmHcMachine m;
    uint64_t hcca, ed, td, tail, buf;
    uint32_t frame;
    int i;

    ncm_hc_machine_start(&m, "pci-ohci,id=ohci", "bus=ohci.0,port=1");

    hcca = guest_alloc(&m.alloc, 512);
    ed = guest_alloc(&m.alloc, 16);
    td = guest_alloc(&m.alloc, 32);
    tail = guest_alloc(&m.alloc, 32);
    buf = guest_alloc(&m.alloc, 4096);
    hcca = ROUND_UP(hcca, 256);
    qtest_memset(m.qts, hcca, 0, 256);
    qtest_memset(m.qts, td, 0, 32);
    qtest_memset(m.qts, tail, 0, 32);
    qpci_io_writel(m.pdev, m.bar, OHCI_HCCA, (uint32_t)hcca);
    qpci_io_writel(m.pdev, m.bar, OHCI_CONTROL,
                   OHCI_CTL_OPER | OHCI_CTL_PLE | OHCI_CTL_IE);
    qpci_io_writel(m.pdev, m.bar, OHCI_RHPORT1, OHCI_PORT_PPS);
    qpci_io_writel(m.pdev, m.bar, OHCI_RHPORT1, OHCI_PORT_PRS);
    qtest_clock_step(m.qts, 20 * 1000 * 1000);
    g_assert(qpci_io_readl(m.pdev, m.bar, OHCI_RHPORT1) & OHCI_PORT_PES);

    /* an isochronous TD for address 0, endpoint 1, direction 00b */
    frame = qpci_io_readl(m.pdev, m.bar, OHCI_FMNUMBER) & 0xffff;
    qtest_writel(m.qts, td + 0, 0xfu << 28 | ((frame + 2) & 0xffff));
    qtest_writel(m.qts, td + 4, (uint32_t)buf & ~0xfffu);
    qtest_writel(m.qts, td + 8, (uint32_t)tail);
    qtest_writel(m.qts, td + 12, (uint32_t)buf + 63);
    qtest_writel(m.qts, td + 16, 0xe000);
    qtest_writel(m.qts, ed + 0, 1u << 7 | OHCI_ED_F | 64u << 16);
    qtest_writel(m.qts, ed + 4, (uint32_t)tail);
    qtest_writel(m.qts, ed + 8, (uint32_t)td);
    qtest_writel(m.qts, ed + 12, 0);
    for (i = 0; i < 32; i++) {
        qtest_writel(m.qts, hcca + 4 * i, (uint32_t)ed);
    }
    for (i = 0; i < 10; i++) {
        qtest_clock_step(m.qts, 1000 * 1000);
    }

    /* QEMU is alive and the schedule went on */
    g_assert_cmpuint(qpci_io_readl(m.pdev, m.bar, OHCI_FMNUMBER) & 0xffff, !=,
                     frame);

    ncm_hc_machine_stop(&m);
}

void ncm_add_ohci_cases(void)
{
    if (!qtest_has_device("pci-ohci")) {
        return;
    }
    qtest_add_func("/usb-ncm-dl/ohci/iso-td-setup-direction",
                   test_ohci_iso_setup);
}
