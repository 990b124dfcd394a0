/*
 * QTest testcase for the USB core's part of migration (hw/usb/bus.c,
 * desc.c), through a qemu-xhci driven by libqos/xhci-driver.c and the
 * migratable usb-kbd:
 *
 * - a configured device is configured on the destination, with its
 *   endpoints; an unconfigured one stays so;
 * - a stream with a configuration or alternate setting the device does
 *   not have is refused, naming the field;
 * - a device that was off the bus when the source stopped leaves its
 *   port empty on the destination.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "libqtest.h"
#include "qobject/qdict.h"
#include "libqos/libqos-pc.h"
#include "libqos/pci-pc.h"
#include "libqos/xhci-driver.h"

/* The BIOS and option ROMs, for a QEMU built without its blobs */
#define FIRMWARE_ENV            "USB_CORE_QTEST_FIRMWARE"

/* Migration through a file, so that the test can edit the stream */

static bool migrate_wait(QTestState *qts)
{
    gint64 deadline = g_get_monotonic_time() + 60 * G_USEC_PER_SEC;

    for (;;) {
        QDict *rsp = qtest_qmp(qts, "{'execute': 'query-migrate'}");
        QDict *ret = qdict_get_qdict(rsp, "return");
        const char *status = ret ? qdict_get_try_str(ret, "status") : NULL;
        bool done = status && !strcmp(status, "completed");
        bool failed = status && !strcmp(status, "failed");

        qobject_unref(rsp);
        if (done || failed) {
            return done;
        }
        g_assert(g_get_monotonic_time() < deadline);
        g_usleep(10 * 1000);
    }
}

static char *migrate_save(QXhciMachine *e)
{
    char *file = g_strdup_printf("%s/usb-core-test-%d.mig", g_get_tmp_dir(),
                                 getpid());
    g_autofree char *uri = g_strdup_printf("exec:cat > %s", file);

    qtest_qmp_assert_success(e->qts, "{'execute': 'migrate', 'arguments': "
                             "{'uri': %s}}", uri);
    g_assert(migrate_wait(e->qts));
    return file;
}

/*
 * Load @file into a new QEMU with @devices; true if it took the state.
 * The test then drives the destination with the same driver state.
 */
static bool migrate_load(QXhciMachine *e, const char *file, const char *devices)
{
    g_autofree char *fw = qxhci_firmware_args(FIRMWARE_ENV);
    g_autofree char *in = g_strdup_printf("exec:cat %s", file);
    QTestState *dst;

    dst = qtest_initf("-nodefaults%s -device qemu-xhci,id=xhci,addr=04.0 "
                      "%s -incoming defer", fw, devices);
    qtest_qmp_assert_success(dst, "{'execute': 'migrate-incoming', "
                             "'arguments': {'uri': %s, "
                             "'exit-on-error': false}}", in);
    if (!migrate_wait(dst)) {
        qtest_quit(dst);
        return false;
    }
    qxhci_machine_migrated(e, dst);
    qtest_qmp_assert_success(dst, "{'execute': 'cont'}");
    return true;
}

/*
 * Offset of @what in the stream in @buf, past its first occurrence (the
 * stream ends with a JSON description that may name it again).
 */
static size_t stream_find(const uint8_t *buf, size_t len, const void *what,
                          size_t n)
{
    const uint8_t *at = memmem(buf, len, what, n);

    g_assert(at);
    return at - buf + n;
}

#define KBD_DEVICES "-device usb-kbd,bus=xhci.0"

/*
 * The configuration decides the endpoints' types and packet sizes: a
 * configured device is configured on the destination, as on the source.
 */
static void test_migrate_configuration(void)
{
    QXhciMachine *e = qxhci_machine_start(FIRMWARE_ENV, KBD_DEVICES);
    g_autofree char *file = NULL;

    qxhci_set_configuration(e->dev, 1);
    g_assert_cmpint(qxhci_get_configuration(e->dev), ==, 1);
    file = migrate_save(e);
    g_assert(migrate_load(e, file, KBD_DEVICES));
    unlink(file);
    g_assert_cmpint(qxhci_get_configuration(e->dev), ==, 1);
    g_assert_cmpint(qxhci_get_interface(e->dev, 0), ==, 0);
    qxhci_machine_stop(e);
}

/* An unconfigured device stays so (the subsection is not sent). */
static void test_migrate_unconfigured(void)
{
    QXhciMachine *e = qxhci_machine_start(FIRMWARE_ENV, KBD_DEVICES);
    g_autofree char *file = NULL;
    g_autofree char *buf = NULL;
    gsize len;

    file = migrate_save(e);
    g_assert(g_file_get_contents(file, &buf, &len, NULL));
    g_assert(!memmem(buf, len, "USBDevice/configuration",
                     strlen("USBDevice/configuration")));
    g_assert(migrate_load(e, file, KBD_DEVICES));
    unlink(file);
    g_assert_cmpint(qxhci_get_configuration(e->dev), ==, 0);
    qxhci_machine_stop(e);
}

/*
 * The subsection is input like any other: a configuration or alternate
 * setting the device's descriptors do not have fails the load (naming
 * the field) instead of reaching an assertion.
 */
static void test_migrate_refused(gconstpointer data)
{
    int which = GPOINTER_TO_INT(data);
    QXhciMachine *e = qxhci_machine_start(FIRMWARE_ENV, KBD_DEVICES);
    static const char name[] = "USBDevice/configuration";
    g_autofree char *file = NULL;
    g_autofree char *buf = NULL;
    uint8_t *b;
    gsize len;
    size_t at;

    qxhci_set_configuration(e->dev, 1);
    file = migrate_save(e);
    g_assert(g_file_get_contents(file, &buf, &len, NULL));
    b = (uint8_t *)buf;
    /* the name, its version (1), configuration, altsetting[16] */
    at = stream_find(b, len, name, strlen(name));
    g_assert_cmpuint(at + 4 + 4 + 64, <=, len);
    g_assert_cmpuint(ldl_be_p(b + at), ==, 1);
    g_assert_cmpuint(ldl_be_p(b + at + 4), ==, 1);
    switch (which) {
    case 0:
        stl_be_p(b + at + 4, 7);            /* no configuration 7 */
        break;
    case 1:
        stl_be_p(b + at + 8, 3);            /* interface 0, alt 3 */
        break;
    case 2:
        stl_be_p(b + at + 8 + 4 * 15, 1);   /* interface 15: none */
        break;
    default:
        g_assert_not_reached();
    }
    g_assert(g_file_set_contents(file, buf, len, NULL));
    g_assert(!migrate_load(e, file, KBD_DEVICES));
    unlink(file);
    qxhci_machine_stop(e);
}

/*
 * A stream whose USBDevice.state says the device was off the bus
 * ('notattached') while the controller's port still has it: the device
 * loads detached, and its port must show no device, so that the guest
 * sees the disconnect instead of transfers that never complete.
 */
static void test_migrate_detached(void)
{
    static const char tail[] = "/usb-kbd\0\0\0\0\0\0\0\1";
    QXhciMachine *e = qxhci_machine_start(FIRMWARE_ENV, KBD_DEVICES);
    g_autofree char *file = NULL;
    g_autofree char *buf = NULL;
    uint8_t *b;
    gsize len;
    size_t at;

    qxhci_set_configuration(e->dev, 1);
    g_assert(qxhci_portsc(e->xhci, e->port) & 1);
    file = migrate_save(e);
    g_assert(g_file_get_contents(file, &buf, &len, NULL));
    b = (uint8_t *)buf;
    /* the usb-kbd section: instance 0, version 1, then USBDevice */
    at = stream_find(b, len, tail, sizeof(tail) - 1);
    g_assert_cmpuint(ldl_be_p(b + at + 1), ==, 3);     /* default */
    stl_be_p(b + at + 1, 0);                            /* notattached */
    g_assert(g_file_set_contents(file, buf, len, NULL));
    g_assert(migrate_load(e, file, KBD_DEVICES));
    unlink(file);
    qxhci_step(e->xhci);
    g_assert(!(qxhci_portsc(e->xhci, e->port) & 1));    /* CCS clear */
    g_assert_cmpint(qxhci_take_port_events(e->xhci, e->port), >, 0);
    qxhci_machine_stop(e);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    if (!qtest_has_device("qemu-xhci") || !qtest_has_device("usb-kbd")) {
        g_test_message("qemu-xhci or usb-kbd not available");
        return g_test_run();
    }
    qtest_add_func("/usb-core/migrate/configuration",
                   test_migrate_configuration);
    qtest_add_func("/usb-core/migrate/unconfigured",
                   test_migrate_unconfigured);
    qtest_add_data_func("/usb-core/migrate/refused/configuration",
                        GINT_TO_POINTER(0), test_migrate_refused);
    qtest_add_data_func("/usb-core/migrate/refused/altsetting",
                        GINT_TO_POINTER(1), test_migrate_refused);
    qtest_add_data_func("/usb-core/migrate/refused/no-interface",
                        GINT_TO_POINTER(2), test_migrate_refused);
    qtest_add_func("/usb-core/migrate/detached", test_migrate_detached);
    return g_test_run();
}
