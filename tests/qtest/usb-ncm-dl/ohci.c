/*
 * usb-ncm-dl qtests: OHCI transfers QEMU's OHCI must survive
 *
 * iso-td-setup-direction: an isochronous ED's direction is the guest's:
 * with D 00b, which QEMU reads as SETUP, ohci_service_iso_td() handed
 * SETUP for endpoint 1 to usb_ep_get(), which asserts IN or OUT there,
 * and QEMU aborted (finding F18, found by usb-ncm-dl-ohci-fuzz).
 * patches/0024 skips such a TD as one with a bad direction.  A minimal
 * driver: port reset, one iso ED in every slot of the HCCA's interrupt
 * table, one iso TD due two frames on.
 *
 * bulk-out-4k-td: a full-speed bulk OUT TD of 4 KiB, as Linux's ohci-hcd
 * queues for cdc_ncm's NTBs, is sent one 64-byte packet per pass of
 * ohci_service_ed_list()'s TD loop, 64 passes.  The per-ED bound of that
 * loop (ED_LINK_LIMIT, from QEMU's stable fixes) must leave the rest for
 * the next frame, not call ohci_die(): with ohci_die() the controller
 * stopped with Unrecoverable Error during the guest suite's iperf upload
 * under QEMU 10.2.2 (patches/0007 on 10.0, patches/10.2/0033 on 10.2).
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
#define OHCI_CMDSTATUS      0x08
#define OHCI_INTRSTATUS     0x0c
#define OHCI_CTRL_HEAD      0x20
#define OHCI_BULK_HEAD      0x28
#define OHCI_CTL_CLE        (1u << 4)
#define OHCI_CTL_BLE        (1u << 5)
#define OHCI_CTL_HCFS(c)    (((c) >> 6) & 3)
#define OHCI_CMD_CLF        (1u << 1)
#define OHCI_CMD_BLF        (1u << 2)
#define OHCI_INTR_UE        (1u << 4)
#define OHCI_ED_DIR_OUT     (1u << 11)
#define OHCI_TD_DP_SETUP    (0u << 19)
#define OHCI_TD_DP_OUT      (1u << 19)
#define OHCI_TD_DP_IN       (2u << 19)
#define OHCI_TD_DATA0       (2u << 24)
#define OHCI_TD_DATA1       (3u << 24)
#define OHCI_TD_CC(f)       ((f) >> 28)
#define OHCI_TD_NOT_ACCESSED (0xfu << 28)
#define OHCI_FULL_SPEED_MPS 64
/* the function's bulk OUT endpoint (NCM_EP_BULK_OUT of hw/usb/dev-ncm.h) */
#define NCM_EP_OUT          6

/*
 * The machine with usb-ncm-dl on OHCI port 1, the HC operational with
 * the lists of @ctl on, the port reset; returns the HCCA
 */
static uint64_t ohci_start(NcmHcMachine *m, uint32_t ctl)
{
    uint64_t hcca;

    ncm_hc_machine_start(m, "pci-ohci,id=ohci", "bus=ohci.0,port=1");
    hcca = ROUND_UP(guest_alloc(&m->alloc, 512), 256);
    qtest_memset(m->qts, hcca, 0, 256);
    qpci_io_writel(m->pdev, m->bar, OHCI_HCCA, (uint32_t)hcca);
    qpci_io_writel(m->pdev, m->bar, OHCI_CONTROL, OHCI_CTL_OPER | ctl);
    qpci_io_writel(m->pdev, m->bar, OHCI_RHPORT1, OHCI_PORT_PPS);
    qpci_io_writel(m->pdev, m->bar, OHCI_RHPORT1, OHCI_PORT_PRS);
    qtest_clock_step(m->qts, 20 * 1000 * 1000);
    g_assert(qpci_io_readl(m->pdev, m->bar, OHCI_RHPORT1) & OHCI_PORT_PES);
    return hcca;
}

/* An ED (@flags: address, endpoint, direction, MPS) from @head to @tail */
static uint64_t ohci_ed(NcmHcMachine *m, uint32_t flags, uint64_t head,
                        uint64_t tail)
{
    uint64_t ed = guest_alloc(&m->alloc, 16);

    qtest_writel(m->qts, ed + 0, flags);
    qtest_writel(m->qts, ed + 4, (uint32_t)tail);
    qtest_writel(m->qts, ed + 8, (uint32_t)head);
    qtest_writel(m->qts, ed + 12, 0);
    return ed;
}

static void test_ohci_iso_setup(void)
{
    NcmHcMachine m;
    uint64_t hcca, ed, td, tail, buf;
    uint32_t frame;
    int i;

    hcca = ohci_start(&m, OHCI_CTL_PLE | OHCI_CTL_IE);
    td = guest_alloc(&m.alloc, 32);
    tail = guest_alloc(&m.alloc, 32);
    buf = guest_alloc(&m.alloc, 4096);
    qtest_memset(m.qts, td, 0, 32);
    qtest_memset(m.qts, tail, 0, 32);

    /* an isochronous TD for address 0, endpoint 1, direction 00b */
    frame = qpci_io_readl(m.pdev, m.bar, OHCI_FMNUMBER) & 0xffff;
    qtest_writel(m.qts, td + 0, 0xfu << 28 | ((frame + 2) & 0xffff));
    qtest_writel(m.qts, td + 4, (uint32_t)buf & ~0xfffu);
    qtest_writel(m.qts, td + 8, (uint32_t)tail);
    qtest_writel(m.qts, td + 12, (uint32_t)buf + 63);
    qtest_writel(m.qts, td + 16, 0xe000);
    ed = ohci_ed(&m, 1u << 7 | OHCI_ED_F | 64u << 16, td, tail);
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

static uint64_t ohci_td(NcmHcMachine *m, uint32_t flags, uint64_t cbp,
                        uint64_t next, uint64_t be)
{
    uint64_t td = guest_alloc(&m->alloc, 16);

    qtest_writel(m->qts, td + 0, OHCI_TD_NOT_ACCESSED | flags);
    qtest_writel(m->qts, td + 4, (uint32_t)cbp);
    qtest_writel(m->qts, td + 8, (uint32_t)next);
    qtest_writel(m->qts, td + 12, (uint32_t)be);
    return td;
}

/* The head of @ed once the controller has retired what it could */
static uint64_t ohci_ed_head(NcmHcMachine *m, uint64_t ed)
{
    return qtest_readl(m->qts, ed + 8) & ~0xfu;
}

/* A standard request without a data stage on the control list */
static void ohci_no_data_request(NcmHcMachine *m, uint8_t type, uint8_t req,
                                 uint16_t value, uint16_t index)
{
    uint8_t setup[8] = {
        type, req, value & 0xff, value >> 8, index & 0xff, index >> 8, 0, 0
    };
    uint64_t buf = guest_alloc(&m->alloc, sizeof(setup));
    uint64_t tail = ohci_td(m, 0, 0, 0, 0);
    uint64_t status = ohci_td(m, OHCI_TD_DP_IN | OHCI_TD_DATA1, 0, tail, 0);
    uint64_t td = ohci_td(m, OHCI_TD_DP_SETUP | OHCI_TD_DATA0, buf, status,
                          buf + sizeof(setup) - 1);
    uint64_t ed = ohci_ed(m, 8u << 16, td, tail);
    int i;

    qtest_memwrite(m->qts, buf, setup, sizeof(setup));
    qpci_io_writel(m->pdev, m->bar, OHCI_CTRL_HEAD, (uint32_t)ed);
    qpci_io_writel(m->pdev, m->bar, OHCI_CMDSTATUS, OHCI_CMD_CLF);
    for (i = 0; i < 10 && ohci_ed_head(m, ed) != tail; i++) {
        qtest_clock_step(m->qts, 1000 * 1000);
    }
    g_assert_cmphex(ohci_ed_head(m, ed), ==, tail);
    g_assert_cmpuint(OHCI_TD_CC(qtest_readl(m->qts, status)), ==, 0);
}

static void test_ohci_bulk_out_4k_td(void)
{
    NcmHcMachine m;
    uint64_t buf, tail, td, ed;
    uint32_t ctl;
    int i;

    ohci_start(&m, OHCI_CTL_CLE | OHCI_CTL_BLE);

    /* SET_CONFIGURATION 1, then the data interface's alternate setting 1 */
    ohci_no_data_request(&m, 0x00, QXHCI_REQ_SET_CONFIGURATION, 1, 0);
    ohci_no_data_request(&m, 0x01, QXHCI_REQ_SET_INTERFACE, 1, NCM_IF_DATA);

    /* one 4 KiB OUT TD: 64 full-speed packets, no short one to end it */
    buf = guest_alloc(&m.alloc, 4096);
    qtest_memset(m.qts, buf, 0, 4096);
    tail = ohci_td(&m, 0, 0, 0, 0);
    td = ohci_td(&m, OHCI_TD_DP_OUT, buf, tail, buf + 4095);
    ed = ohci_ed(&m, OHCI_FULL_SPEED_MPS << 16 | NCM_EP_OUT << 7 |
                 OHCI_ED_DIR_OUT, td, tail);
    qpci_io_writel(m.pdev, m.bar, OHCI_BULK_HEAD, (uint32_t)ed);
    qpci_io_writel(m.pdev, m.bar, OHCI_CMDSTATUS, OHCI_CMD_BLF);
    for (i = 0; i < 10 && ohci_ed_head(&m, ed) != tail; i++) {
        qtest_clock_step(m.qts, 1000 * 1000);
        g_assert_cmphex(qpci_io_readl(m.pdev, m.bar, OHCI_INTRSTATUS) &
                        OHCI_INTR_UE, ==, 0);
    }

    /* the TD went out whole, over more than one frame, and the HC runs */
    g_assert_cmphex(ohci_ed_head(&m, ed), ==, tail);
    g_assert_cmpuint(OHCI_TD_CC(qtest_readl(m.qts, td)), ==, 0);
    g_assert_cmpint(i, >, 1);
    ctl = qpci_io_readl(m.pdev, m.bar, OHCI_CONTROL);
    g_assert_cmpuint(OHCI_CTL_HCFS(ctl), ==, 2);

    ncm_hc_machine_stop(&m);
}

void ncm_add_ohci_cases(void)
{
    if (!qtest_has_device("pci-ohci")) {
        return;
    }
    qtest_add_func("/usb-ncm-dl/ohci/iso-td-setup-direction",
                   test_ohci_iso_setup);
    qtest_add_func("/usb-ncm-dl/ohci/bulk-out-4k-td", test_ohci_bulk_out_4k_td);
}
