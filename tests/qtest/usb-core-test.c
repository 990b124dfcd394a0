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

#define XHCI_DEVFN              QPCI_DEVFN(4, 0)
#define REQ_GET_CONFIGURATION   8
#define REQ_SET_CONFIGURATION   9
#define REQ_GET_INTERFACE       10
#define REQ_SET_INTERFACE       11

typedef struct CoreEnv {
    QOSState *qs;
    QTestState *qts;
    QPCIDevice *pdev;
    QXhci *xhci;
    QXhciDevice *dev;
    int port;
} CoreEnv;

/*
 * Where the BIOS and option ROMs are, when QEMU was built without its
 * blobs (USB_CORE_QTEST_FIRMWARE: directories separated by ':').
 */
static char *firmware_args(void)
{
    const char *dirs = g_getenv("USB_CORE_QTEST_FIRMWARE");
    g_auto(GStrv) v = g_strsplit(dirs ? dirs :
                                 "/usr/share/seabios:/usr/share/qemu",
                                 ":", -1);
    GString *s = g_string_new("");
    int i;

    for (i = 0; v[i]; i++) {
        if (*v[i] && g_file_test(v[i], G_FILE_TEST_IS_DIR)) {
            g_string_append_printf(s, " -L %s", v[i]);
        }
    }
    return g_string_free(s, false);
}

static void core_attach(CoreEnv *e)
{
    e->pdev = qpci_device_find(e->qs->pcibus, XHCI_DEVFN);
    g_assert(e->pdev);
}

static CoreEnv *core_start(const char *devices)
{
    CoreEnv *e = g_new0(CoreEnv, 1);
    g_autofree char *fw = firmware_args();

    e->qs = qtest_pc_boot("-nodefaults%s -device qemu-xhci,id=xhci,addr=04.0 "
                          "%s", fw, devices);
    e->qts = e->qs->qts;
    core_attach(e);
    e->xhci = qxhci_new(e->qts, e->pdev, &e->qs->alloc, NULL);
    e->port = qxhci_find_connected_port(e->xhci);
    g_assert_cmpint(e->port, >, 0);
    e->dev = qxhci_device_enumerate(e->xhci, e->port);
    g_assert(e->dev);
    return e;
}

static void core_stop(CoreEnv *e)
{
    qxhci_free(e->xhci);
    g_free(e->pdev);
    qtest_shutdown(e->qs);
    g_free(e);
}

/* GET_CONFIGURATION's answer */
static int get_configuration(CoreEnv *e)
{
    uint8_t v = 0xff;
    uint32_t actual = 0;

    g_assert_cmpint(qxhci_control(e->dev, 0x80, REQ_GET_CONFIGURATION, 0, 0,
                                  &v, 1, &actual), ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(actual, ==, 1);
    return v;
}

/* GET_INTERFACE's answer, or -1 when the device stalls it */
static int get_interface(CoreEnv *e, int iface)
{
    uint8_t v = 0xff;
    uint32_t actual = 0;
    int cc;

    cc = qxhci_control(e->dev, 0x81, REQ_GET_INTERFACE, 0, iface, &v, 1,
                       &actual);
    if (cc == QXHCI_CC_STALL) {
        return -1;
    }
    g_assert_cmpint(cc, ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(actual, ==, 1);
    return v;
}

static void set_configuration(CoreEnv *e, int value)
{
    g_assert_cmpint(qxhci_control(e->dev, 0x00, REQ_SET_CONFIGURATION, value,
                                  0, NULL, 0, NULL), ==, QXHCI_CC_SUCCESS);
}

/*
 * USB 2.0 9.1.1.3: a device that is reset goes to the Default state,
 * unconfigured, whatever configuration and alternate settings it had.
 * The host enumerates it again (port reset, Address Device) and must
 * find GET_CONFIGURATION 0 and no interfaces.
 */
static void test_reset_unconfigures(void)
{
    CoreEnv *e = core_start("-netdev hubport,id=n0,hubid=0 "
                            "-device usb-net,netdev=n0,bus=xhci.0");

    set_configuration(e, 1);
    g_assert_cmpint(qxhci_control(e->dev, 0x01, REQ_SET_INTERFACE, 1, 1,
                                  NULL, 0, NULL), ==, QXHCI_CC_SUCCESS);
    g_assert_cmpint(get_configuration(e), ==, 1);
    g_assert_cmpint(get_interface(e, 1), ==, 1);

    qxhci_device_free(e->dev);
    e->dev = qxhci_device_enumerate(e->xhci, e->port);
    g_assert(e->dev);
    g_assert_cmpint(get_configuration(e), ==, 0);
    /* unconfigured: no interface to ask about */
    g_assert_cmpint(get_interface(e, 1), ==, -1);

    /* configured again, the data interface starts at alternate setting 0 */
    set_configuration(e, 1);
    g_assert_cmpint(get_configuration(e), ==, 1);
    g_assert_cmpint(get_interface(e, 1), ==, 0);
    core_stop(e);
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
