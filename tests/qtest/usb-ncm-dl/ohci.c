/*
 * usb-ncm-dl qtests: OHCI transfers QEMU's OHCI must survive
 *
 * iso-td-setup-direction: an isochronous ED's direction is the guest's:
 * with D 00b, which QEMU reads as SETUP, ohci_service_iso_td() handed
 * SETUP for endpoint 1 to usb_ep_get(), which asserts IN or OUT there,
 * and QEMU aborted (finding F18, found by usb-ncm-dl-ohci-fuzz).
 * patches/0024 skips such a TD as one with a bad direction.  The libqos
 * OHCI driver starts the controller and resets the port; one iso ED in
 * every slot of the HCCA's interrupt table, one iso TD due two frames on.
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

#define OHCI_CTL_IE         (1u << 3)
#define OHCI_CTL_HCFS(c)    (((c) >> 6) & 3)
#define OHCI_ED_F           (1u << 15)
#define OHCI_INTR_UE        (1u << 4)
/* the function's bulk OUT endpoint (NCM_EP_BULK_OUT of hw/usb/dev-ncm.h) */
#define NCM_EP_OUT          6

/* usb-ncm-dl on OHCI port 1 behind the libqos OHCI driver, started */
static void ohci_start(NcmHcMachine *m, QHcd *h)
{
    ncm_hc_machine_start(m, "pci-ohci,id=ohci", "bus=ohci.0,port=1");
    ncm_hc_driver(m, h, QHCD_OHCI);
}

static void test_ohci_iso_setup(void)
{
    NcmHcMachine m;
    QHcd h;
    uint64_t ed, td, tail, buf;
    uint32_t frame;
    int i;

    ohci_start(&m, &h);
    /* the isochronous list too */
    qohci_write(&h, QOHCI_CONTROL,
                qohci_read(&h, QOHCI_CONTROL) | OHCI_CTL_IE);
    td = qhcd_zalloc(&h, 32);
    tail = qhcd_zalloc(&h, 32);
    buf = qhcd_zalloc(&h, 4096);

    /* an isochronous TD for address 0, endpoint 1, direction 00b */
    frame = qohci_read(&h, QOHCI_FMNUMBER) & 0xffff;
    qtest_writel(m.qts, td + 0, 0xfu << 28 | ((frame + 2) & 0xffff));
    qtest_writel(m.qts, td + 4, (uint32_t)buf & ~0xfffu);
    qtest_writel(m.qts, td + 8, (uint32_t)tail);
    qtest_writel(m.qts, td + 12, (uint32_t)buf + 63);
    qtest_writel(m.qts, td + 16, 0xe000);
    /* in every slot of the HCCA's interrupt table */
    ed = qohci_ed(&h, 1u << 7 | OHCI_ED_F | 64u << 16, td, tail);
    for (i = 0; i < 32; i++) {
        qtest_writel(m.qts, h.sched + 4 * i, (uint32_t)ed);
    }
    qhcd_frames(&h, 10);

    /* QEMU is alive and the schedule went on */
    g_assert_cmpuint(qohci_read(&h, QOHCI_FMNUMBER) & 0xffff, !=, frame);

    ncm_hc_machine_stop(&m);
}

/* Run @c to its end, a frame at a time, 10 at most: the frames it took */
static int ohci_run_chain(QHcd *h, QHcdChain *c)
{
    int i;

    for (i = 0; i < 10 && !qhcd_chain_poll(h, c, NULL, NULL); i++) {
        qhcd_frames(h, 1);
        /* never an Unrecoverable Error (ohci_die()) on the way */
        g_assert_cmphex(qohci_read(h, QOHCI_INTRSTATUS) & OHCI_INTR_UE, ==,
                        0);
    }
    g_assert(c->ended);
    g_assert_false(c->error);
    g_assert_cmpuint(c->next, ==, c->n);
    return i;
}

/* A standard request without a data stage on the control list */
static void ohci_no_data_request(QHcd *h, uint8_t type, uint8_t req,
                                 uint16_t value, uint16_t index)
{
    uint8_t setup[8] = {
        type, req, value & 0xff, value >> 8, index & 0xff, index >> 8, 0, 0
    };
    QHcdChain c;

    qhcd_control(h, 0, setup, qhcd_zalloc(h, sizeof(setup)), &c);
    ohci_run_chain(h, &c);
}

static void test_ohci_bulk_out_4k_td(void)
{
    NcmHcMachine m;
    QHcd h;
    QHcdTd td;
    QHcdChain c;

    ohci_start(&m, &h);

    /* SET_CONFIGURATION 1, then the data interface's alternate setting 1 */
    ohci_no_data_request(&h, 0x00, QXHCI_REQ_SET_CONFIGURATION, 1, 0);
    ohci_no_data_request(&h, 0x01, QXHCI_REQ_SET_INTERFACE, 1, NCM_IF_DATA);

    /* one 4 KiB OUT TD: 64 full-speed packets, no short one to end it */
    td = (QHcdTd){ QHCD_PID_OUT, 0, NCM_EP_OUT, false, 4096,
                   qhcd_zalloc(&h, 4096) };
    qhcd_queue(&h, QHCD_LIST_BULK, &td, 1, NULL, &c);

    /* the TD went out whole, over more than one frame, and the HC runs */
    g_assert_cmpint(ohci_run_chain(&h, &c), >, 1);
    g_assert_cmpuint(OHCI_CTL_HCFS(qohci_read(&h, QOHCI_CONTROL)), ==, 2);

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
