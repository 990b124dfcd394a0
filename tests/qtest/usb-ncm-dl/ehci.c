/*
 * usb-ncm-dl qtest: EHCI qTDs a guest can write that QEMU's EHCI must
 * not abort on
 *
 * The PID of a qTD is the guest's: SETUP on an endpoint other than 0,
 * or the reserved code 3, reached usb_ep_get() from ehci_execute(),
 * which asserts that a non-control endpoint is asked for IN or OUT, and
 * QEMU aborted (finding F17, found by usb-ncm-dl-ehci-fuzz).
 * patches/0023 refuses such a qTD as the other qTDs it cannot run: the
 * schedule stops with a processing error and the controller halts.  The
 * libqos EHCI driver starts the controller and resets the port; one
 * queue head on the asynchronous schedule, addressed to the device's
 * default address, carries the qTD.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "fixture.h"

#define QTD_ACTIVE          (1u << 7)

typedef struct EhciPid {
    unsigned pid;               /* qTD PID code: 2 SETUP, 3 reserved */
    unsigned endpoint;
} EhciPid;

static void test_ehci_qtd_pid(const void *data)
{
    const EhciPid *c = data;
    NcmHcMachine m;
    QHcd h;
    QHcdTd td;
    uint32_t raw[3], sts;

    ncm_hc_machine_start(&m, "usb-ehci,id=ehci", "bus=ehci.0");
    ncm_hc_driver(&m, &h, QHCD_EHCI);
    /* the device on port 0, reset by qhcd_start(): address 0, high speed */
    g_assert(qehci_read(&h, QEHCI_PORTSC(0)) & QEHCI_PORT_PED);

    /* one qTD with the PID code of @c, for its endpoint */
    td = (QHcdTd){ .ep = c->endpoint, .len = 8,
                   .buf = qhcd_zalloc(&h, 4096) };
    raw[0] = QTD_ACTIVE | c->pid << 8 | 3u << 10 | 8u << 16;
    raw[1] = c->endpoint << 8 | 2u << 12 | 512u << 16;
    raw[2] = 1u << 30;
    qhcd_queue(&h, QHCD_LIST_BULK, &td, 1, raw, NULL);
    qhcd_frames(&h, 20);

    /* QEMU is alive; the controller stopped on the qTD and halted */
    sts = qehci_read(&h, QEHCI_USBSTS);
    g_test_message("USBSTS after the qTD: 0x%08x", sts);
    g_assert(sts & QEHCI_STS_HALTED);

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
