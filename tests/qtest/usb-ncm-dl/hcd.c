/*
 * usb-ncm-dl qtests: the adapter behind UHCI, OHCI and EHCI through the
 * libqos drivers (libqos/usb-hcd.c)
 *
 * hcd/<controller>/enumerate: the controller started and the device's
 * port reset by the driver, the device answers GET_DESCRIPTOR(device)
 * at address 0 with a descriptor the NCM oracle accepts (a USB 2.x one,
 * not SuperSpeed's), takes an address with SET_ADDRESS and answers there.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "fixture.h"

#define HCD_DEV_ADDR        5

typedef struct HcdCase {
    const char *name;
    const char *hc;             /* -device arguments of the controller */
    const char *dev_opts;       /* and of the adapter */
    QHcdType type;
} HcdCase;

/*
 * A control transfer to @addr with a device-to-host data stage of @len
 * bytes (0: none, the status stage IN) through @h, run to its end;
 * returns the bytes of the data stage, @len at most
 */
static uint32_t hcd_control(QHcd *h, uint8_t addr, uint8_t type,
                            uint8_t req, uint16_t value, uint8_t *data,
                            uint16_t len)
{
    uint8_t setup[8] = {
        type, req, value & 0xff, value >> 8, 0, 0, len & 0xff, len >> 8
    };
    uint64_t buf = qhcd_zalloc(h, 8 + MAX(len, 1));
    QHcdChain c;
    uint32_t got = 0;
    unsigned i;

    qhcd_control(h, addr, setup, buf, &c);
    for (i = 0; i < 20 && !qhcd_chain_poll(h, &c, NULL, NULL); i++) {
        qhcd_frames(h, 1);
    }
    g_assert(c.ended);
    g_assert_false(c.error);
    /* the data stage's TDs, up to the first short one */
    for (i = 1; len && i + 1 < c.n; i++) {
        uint32_t actual = 0;

        g_assert_cmpint(qhcd_td_state(h, &c, &c.r[i], &actual), ==,
                        QHCD_TD_DONE);
        got += actual;
        if (actual < 64) {
            break;
        }
    }
    got = MIN(got, len);
    if (got) {
        qtest_memread(h->qts, buf + 8, data, got);
    }
    return got;
}

static void check_device_descriptor(QHcd *h, uint8_t addr)
{
    uint8_t d[18];
    char why[256] = "";
    uint32_t got;

    got = hcd_control(h, addr, 0x80, QXHCI_REQ_GET_DESCRIPTOR, 0x100, d,
                      sizeof(d));
    g_assert_cmpuint(got, ==, sizeof(d));
    if (!ncm_oracle_descriptor(1, 0, sizeof(d), d, got, why, sizeof(why))) {
        g_test_message("device descriptor: %s", why);
        g_assert_not_reached();
    }
    g_assert_cmphex(lduw_le_p(d + 8), ==, 0x17e9);
    /* a USB 2.x descriptor with a 64-byte EP0: not SuperSpeed's */
    g_assert_cmphex(lduw_le_p(d + 2), <, 0x0300);
    g_assert_cmpuint(d[7], ==, 64);
}

static void test_hcd_enumerate(const void *data)
{
    const HcdCase *c = data;
    NcmHcMachine m;
    QHcd h;

    ncm_hc_machine_start(&m, c->hc, c->dev_opts);
    ncm_hc_driver(&m, &h, c->type);

    check_device_descriptor(&h, 0);
    hcd_control(&h, 0, 0x00, QXHCI_REQ_SET_ADDRESS, HCD_DEV_ADDR, NULL, 0);
    qhcd_frames(&h, 2);
    check_device_descriptor(&h, HCD_DEV_ADDR);

    ncm_hc_machine_stop(&m);
}

void ncm_add_hcd_cases(void)
{
    static const HcdCase cases[] = {
        { "uhci", "piix3-usb-uhci,id=uhci", "bus=uhci.0,port=1", QHCD_UHCI },
        { "ohci", "pci-ohci,id=ohci", "bus=ohci.0,port=1", QHCD_OHCI },
        { "ehci", "usb-ehci,id=ehci", "bus=ehci.0,port=1", QHCD_EHCI },
    };
    unsigned i;

    for (i = 0; i < ARRAY_SIZE(cases); i++) {
        g_autofree char *path = NULL;
        g_autofree char *model = g_strndup(cases[i].hc,
                                           strcspn(cases[i].hc, ","));

        if (!qtest_has_device(model)) {
            continue;
        }
        path = g_strdup_printf("/usb-ncm-dl/hcd/%s/enumerate",
                               cases[i].name);
        qtest_add_data_func(path, &cases[i], test_hcd_enumerate);
    }
}
