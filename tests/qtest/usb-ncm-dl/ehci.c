/*
 * usb-ncm-dl qtest: EHCI qTDs a guest can write that QEMU's EHCI must
 * not abort on
 *
 * The PID of a qTD is the guest's: SETUP on an endpoint other than 0,
 * or the reserved code 3, reached usb_ep_get() from ehci_execute(),
 * which asserts that a non-control endpoint is asked for IN or OUT, and
 * QEMU aborted (finding F17, found by usb-ncm-dl-ehci-fuzz).
 * patches/0023 refuses such a qTD as the other qTDs it cannot run: the
 * schedule stops with a processing error and the controller halts.  A
 * minimal driver here: one high-speed port reset, one queue head on the
 * asynchronous schedule addressed to the device's default address.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "fixture.h"

#define EHCI_USBCMD         0x00
#define EHCI_USBSTS         0x04
#define EHCI_ASYNCLISTADDR  0x18
#define EHCI_CONFIGFLAG     0x40
#define EHCI_PORTSC0        0x44
#define EHCI_CMD_RUN        (1u << 0)
#define EHCI_CMD_ASYNC      (1u << 5)
#define EHCI_PORT_PED       (1u << 2)
#define EHCI_PORT_RESET     (1u << 8)
#define EHCI_PORT_POWER     (1u << 12)
#define EHCI_T              1u
#define EHCI_QH_TYPE        (1u << 1)
#define EHCI_STS_HALTED     (1u << 12)
#define QTD_ACTIVE          (1u << 7)

typedef struct EhciPid {
    unsigned pid;               /* qTD PID code: 2 SETUP, 3 reserved */
    unsigned endpoint;
} EhciPid;

static void test_ehci_qtd_pid(const void *data)
{
    NcmHcMachine m;
    const EhciPid *c = data;
    uint64_t qh, qtd, buf;
    uint32_t op, sts;
    int i;

    ncm_hc_machine_start(&m, "usb-ehci,id=ehci", "bus=ehci.0");
    op = qpci_io_readb(m.pdev, m.bar, 0);

    /* the port to EHCI, reset: the device at address 0, high speed */
    qpci_io_writel(m.pdev, m.bar, op + EHCI_CONFIGFLAG, 1);
    qpci_io_writel(m.pdev, m.bar, op + EHCI_PORTSC0,
                   EHCI_PORT_POWER | EHCI_PORT_RESET);
    qtest_clock_step(m.qts, 50 * 1000 * 1000);
    qpci_io_writel(m.pdev, m.bar, op + EHCI_PORTSC0, EHCI_PORT_POWER);
    qtest_clock_step(m.qts, 10 * 1000 * 1000);
    g_assert(qpci_io_readl(m.pdev, m.bar, op + EHCI_PORTSC0) & EHCI_PORT_PED);

    /* a queue head for the endpoint, looping to itself, and one qTD */
    buf = guest_alloc(&m.alloc, 4096);
    qtd = guest_alloc(&m.alloc, 64);
    qh = guest_alloc(&m.alloc, 64);
    qtest_memset(m.qts, buf, 0, 4096);
    qtest_memset(m.qts, qtd, 0, 64);
    qtest_memset(m.qts, qh, 0, 64);
    qtest_writel(m.qts, qtd + 0, EHCI_T);
    qtest_writel(m.qts, qtd + 4, EHCI_T);
    qtest_writel(m.qts, qtd + 8, QTD_ACTIVE | c->pid << 8 | 3u << 10 |
                 8u << 16);
    qtest_writel(m.qts, qtd + 12, (uint32_t)buf);
    qtest_writel(m.qts, qh + 0, (uint32_t)qh | EHCI_QH_TYPE);
    /* address 0, the endpoint, high speed, head of the list, 512 bytes */
    qtest_writel(m.qts, qh + 4, c->endpoint << 8 | 2u << 12 | 1u << 15 |
                 512u << 16);
    qtest_writel(m.qts, qh + 8, 1u << 30);
    qtest_writel(m.qts, qh + 16, (uint32_t)qtd);
    qtest_writel(m.qts, qh + 20, EHCI_T);
    qpci_io_writel(m.pdev, m.bar, op + EHCI_ASYNCLISTADDR, (uint32_t)qh);
    qpci_io_writel(m.pdev, m.bar, op + EHCI_USBCMD,
                   EHCI_CMD_RUN | EHCI_CMD_ASYNC | 8u << 16);
    for (i = 0; i < 20; i++) {
        qtest_clock_step(m.qts, 1000 * 1000);
    }

    /* QEMU is alive; the controller stopped on the qTD and halted */
    sts = qpci_io_readl(m.pdev, m.bar, op + EHCI_USBSTS);
    g_test_message("USBSTS after the qTD: 0x%08x", sts);
    g_assert(sts & EHCI_STS_HALTED);

    ncm_hc_machine_stop(&m);
}

void ncm_add_ehci_cases(void)
{
    static const EhciPid setup_ep1 = { 2, 1 }, reserved_ep1 = { 3, 1 };

    if (!qtest_has_device("usb-ehci")) {
        return;
    }
    qtest_add_data_func("/usb-ncm-dl/ehci/qtd-setup-pid-on-ep1",
                        &setup_ep1, test_ehci_qtd_pid);
    qtest_add_data_func("/usb-ncm-dl/ehci/qtd-reserved-pid-on-ep1",
                        &reserved_ep1, test_ehci_qtd_pid);
}
