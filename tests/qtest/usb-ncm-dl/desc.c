/*
 * usb-ncm-dl qtest: descriptor strings at their limits
 *
 * A string descriptor is UTF-16LE text behind a one-byte bLength: at most
 * 126 code units.  QEMU's desc.c computed bLength in a uint8_t as
 * strlen() * 2 + 2, so a 127-byte string read back with bLength 0, and it
 * copied each byte of a UTF-8 string into a code unit of its own
 * (patches/0027 encodes UTF-16 and stops at 126 units).
 *
 * desc/usb-tablet-serial-*: the core, through a device of QEMU's own (the
 * "serial" property every USB device has), 0..255 characters and UTF-8.
 * desc/PROP-*: each string property of the adapter (manufacturer,
 * product, serial) at 0, 1 and 126 UTF-16 units and in non-ASCII UTF-8
 * reads back with bLength 2 + 2 * units and the same text; longer ones
 * and text that is not UTF-8 are refused at realize
 * (tests/device/check-properties.sh).  desc/mac-*: the MAC address
 * string from the other forms the mac property takes.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "fixture.h"

#define DESC_DT_DEVICE      1
#define DESC_DT_STRING      3
#define DESC_UNITS_MAX      126

/*
 * GET_DESCRIPTOR(STRING @index) read back from @b (@actual bytes, asked
 * for 255): whole, bLength 2 + 2 * the UTF-16 units of @want, and @want.
 */
static void desc_check_string(const uint8_t *b, uint32_t actual,
                              const char *want)
{
    glong units = 0;
    g_autofree gunichar2 *w = g_utf8_to_utf16(want, -1, NULL, &units, NULL);
    g_autofree gunichar2 *got = g_new0(gunichar2, 128);
    g_autofree char *text = NULL;
    uint32_t i;

    g_assert(w);
    g_assert_cmpint(units, <=, DESC_UNITS_MAX);
    g_assert_cmpuint(b[0], ==, 2 + 2 * units);
    g_assert_cmpuint(actual, ==, 2 + 2 * units);
    g_assert_cmpuint(b[1], ==, DESC_DT_STRING);
    for (i = 0; i < units; i++) {
        got[i] = lduw_le_p(b + 2 + 2 * i);
    }
    text = g_utf16_to_utf8(got, units, NULL, NULL, NULL);
    g_assert(text);
    g_assert_cmpstr(text, ==, want);
}

/* @n characters: the decimal digits over and over */
static char *desc_digits(int n)
{
    GString *s = g_string_new("");
    int i;

    for (i = 0; i < n; i++) {
        g_string_append_c(s, '0' + i % 10);
    }
    return g_string_free(s, false);
}

/* @n times the UTF-8 text @unit */
static char *desc_repeat(const char *unit, int n)
{
    GString *s = g_string_new("");
    int i;

    for (i = 0; i < n; i++) {
        g_string_append(s, unit);
    }
    return g_string_free(s, false);
}

/* The core: usb-tablet with serial=@serial, read back as string iSerial */

typedef struct DescSerialCase {
    const char *name;
    char *serial;               /* what the command line gives */
    char *want;                 /* what must read back */
} DescSerialCase;

static void test_desc_tablet_serial(const void *data)
{
    const DescSerialCase *dc = data;
    g_autofree char *fw = ncm_firmware_args();
    QOSState *qs;
    QPCIDevice *pdev;
    QXhci *xhci;
    QXhciDevice *dev;
    uint8_t b[255];
    uint32_t actual = 0;
    int port;

    qs = qtest_pc_boot("-nodefaults%s -device qemu-xhci,id=xhci,addr=04.0 "
                       "-device usb-tablet,bus=xhci.0,serial=%s", fw,
                       dc->serial);
    pdev = qpci_device_find(qs->pcibus, NCM_XHCI_DEVFN);
    g_assert(pdev);
    xhci = qxhci_new(qs->qts, pdev, &qs->alloc, NULL);
    port = qxhci_find_connected_port(xhci);
    g_assert_cmpint(port, >, 0);
    dev = qxhci_device_enumerate(xhci, port);
    g_assert(dev);

    g_assert_cmpint(qxhci_get_descriptor(dev, DESC_DT_DEVICE, 0, 0, b, 18,
                                         &actual), ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(actual, ==, 18);
    g_assert_cmpuint(b[16], !=, 0);             /* iSerialNumber */
    g_assert_cmpint(qxhci_get_descriptor(dev, DESC_DT_STRING, b[16], 0x0409,
                                         b, sizeof(b), &actual),
                    ==, QXHCI_CC_SUCCESS);
    desc_check_string(b, actual, dc->want);

    qxhci_free(xhci);
    g_free(pdev);
    qtest_shutdown(qs);
}

static void desc_add_tablet(const char *name, char *serial, char *want)
{
    DescSerialCase *dc = g_new0(DescSerialCase, 1);
    g_autofree char *path = g_strdup_printf("/usb-ncm-dl/desc/"
                                            "usb-tablet-serial-%s", name);

    dc->name = name;
    dc->serial = serial;
    dc->want = want;
    qtest_add_data_func(path, dc, test_desc_tablet_serial);
}

/* The adapter: each string property read back from its own string */

typedef struct DescPropCase {
    uint8_t index;              /* 0: the iMACAddress string */
    char *want;
} DescPropCase;

static void test_desc_prop(NcmEnv *e, const NcmCase *c)
{
    const DescPropCase *dc = c->data;
    uint8_t b[255];
    uint32_t actual = 0;
    uint8_t index = dc->index;

    if (!index) {
        const uint8_t *eth = ncm_find_cs_desc(e, CDC_DESC_ETHERNET);

        g_assert(eth);
        index = eth[3];
    }
    g_assert_cmpint(ncm_get_descriptor(e, DESC_DT_STRING, index, 0x0409, b,
                                       sizeof(b), &actual),
                    ==, QXHCI_CC_SUCCESS);
    desc_check_string(b, actual, dc->want);
}

/* @prop=@value (NULL: @want) must read back as @want */
static void desc_add_prop(const char *prop, uint8_t index, const char *name,
                          const char *value, char *want)
{
    DescPropCase *dc = g_new0(DescPropCase, 1);
    g_autofree char *path = g_strdup_printf("desc/%s-%s", prop, name);

    dc->index = index;
    dc->want = want;
    ncm_add_case(true, NCM_DL, path, test_desc_prop, dc,
                 g_strdup_printf("%s=%s", prop, value ?: want));
}

void ncm_add_desc_cases(void)
{
    static const struct {
        const char *prop;
        uint8_t index;
    } props[] = {
        { "manufacturer", 1 },
        { "product", 2 },
        { "serial", 3 },
    };
    static const int lengths[] = { 0, 1, 126, 127, 128, 255 };
    bool tablet;
    size_t i;

    if (!qtest_has_device("qemu-xhci")) {
        return;
    }
    tablet = qtest_has_device("usb-tablet");
    for (i = 0; tablet && i < ARRAY_SIZE(lengths); i++) {
        int n = lengths[i];

        desc_add_tablet(g_strdup_printf("%d", n), desc_digits(n),
                        desc_digits(MIN(n, DESC_UNITS_MAX)));
    }
    /* 2 bytes of UTF-8, 1 unit; 3 bytes, 1 unit; 4 bytes, 2 units */
    if (tablet) {
        g_autofree char *digits = desc_digits(125);

        desc_add_tablet("utf8", g_strdup("Grüße✓𝄞"),
                        g_strdup("Grüße✓𝄞"));
        desc_add_tablet("utf8-126", desc_repeat("é", 126),
                        desc_repeat("é", 126));
        desc_add_tablet("utf8-127", desc_repeat("é", 127),
                        desc_repeat("é", 126));
        /* a surrogate pair that does not fit is left out whole */
        desc_add_tablet("pair-at-126", g_strconcat(digits, "𝄞", NULL),
                        desc_digits(125));
    }
    if (!qtest_has_device("usb-ncm-dl")) {
        return;
    }
    for (i = 0; i < ARRAY_SIZE(props); i++) {
        const char *p = props[i].prop;
        uint8_t index = props[i].index;

        desc_add_prop(p, index, "0", NULL, g_strdup(""));
        desc_add_prop(p, index, "1", NULL, g_strdup("x"));
        desc_add_prop(p, index, "126", NULL, desc_digits(126));
        desc_add_prop(p, index, "utf8", NULL, g_strdup("Grüße✓𝄞"));
        desc_add_prop(p, index, "utf8-126", NULL,
                      desc_repeat("é", 126));
        desc_add_prop(p, index, "pairs-126", NULL,
                      desc_repeat("𝄞", 63));
    }
    desc_add_prop("mac", 0, "dashes-upper", "52-54-00-AB-CD-EF",
                  g_strdup("525400abcdef"));
}
