/*
 * QTest testcase for the USB core (hw/usb/core.c, desc.c): a bus reset
 * leaves a device unconfigured (USB 2.0 9.1.1.3), whatever configuration
 * and alternate settings it had.  Seen through a qemu-xhci driven by
 * libqos/xhci-driver.c, on usb-net (two interfaces, the data one with
 * alternate settings).
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "libqtest.h"
#include "libqos/libqos-pc.h"
#include "libqos/pci-pc.h"
#include "libqos/xhci-driver.h"

/* The BIOS and option ROMs, for a QEMU built without its blobs */
#define FIRMWARE_ENV            "USB_CORE_QTEST_FIRMWARE"

/*
 * USB 2.0 9.1.1.3: a device that is reset goes to the Default state,
 * unconfigured, whatever configuration and alternate settings it had.
 * The host enumerates it again (port reset, Address Device) and must
 * find GET_CONFIGURATION 0 and no interfaces.
 */
static void test_reset_unconfigures(void)
{
    QXhciMachine *e = qxhci_machine_start(FIRMWARE_ENV,
                                          "-netdev hubport,id=n0,hubid=0 "
                                          "-device usb-net,netdev=n0,"
                                          "bus=xhci.0");

    qxhci_set_configuration(e->dev, 1);
    g_assert_cmpint(qxhci_control(e->dev, 0x01, QXHCI_REQ_SET_INTERFACE, 1, 1,
                                  NULL, 0, NULL), ==, QXHCI_CC_SUCCESS);
    g_assert_cmpint(qxhci_get_configuration(e->dev), ==, 1);
    g_assert_cmpint(qxhci_get_interface(e->dev, 1), ==, 1);

    qxhci_device_free(e->dev);
    e->dev = qxhci_device_enumerate(e->xhci, e->port);
    g_assert(e->dev);
    g_assert_cmpint(qxhci_get_configuration(e->dev), ==, 0);
    /* unconfigured: no interface to ask about */
    g_assert_cmpint(qxhci_get_interface(e->dev, 1), ==, -1);

    /* configured again, the data interface starts at alternate setting 0 */
    qxhci_set_configuration(e->dev, 1);
    g_assert_cmpint(qxhci_get_configuration(e->dev), ==, 1);
    g_assert_cmpint(qxhci_get_interface(e->dev, 1), ==, 0);
    qxhci_machine_stop(e);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    if (!qtest_has_device("qemu-xhci") || !qtest_has_device("usb-net")) {
        g_test_message("qemu-xhci or usb-net not available");
        return g_test_run();
    }
    qtest_add_func("/usb-core/reset/unconfigures", test_reset_unconfigures);
    return g_test_run();
}
