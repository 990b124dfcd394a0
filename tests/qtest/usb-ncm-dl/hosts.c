/*
 * QTest cases for usb-ncm-dl: the NCM host drivers other than Linux
 *
 * Each case drives the device the way one host driver does, as read from
 * its public source: its descriptor reads and the checks it makes on them,
 * its string requests, the order and form of its class requests, its
 * alternate setting changes and endpoint halts, and the NTBs it sends and
 * accepts.  The fixture's qemu-xhci stands in for every host's xHCI at
 * super and high speed.
 *
 * windows  NCM-Driver-for-Windows host/device.cpp (UsbNcm): NTB32 when
 *          offered, no SET_NTB_INPUT_SIZE up to 64 KiB, 3 IN reads of
 *          dwNtbInMaxSize, MAC string with language 0x0409
 * freebsd  sys/dev/usb/net/if_cdce.c, if_cdcereg.h: class requests at
 *          alternate setting 0, errors ignored; 8-byte
 *          SET_NTB_INPUT_SIZE (16 KiB, 31 datagrams) when the NCM
 *          descriptor has bit D3; CLEAR_FEATURE(ENDPOINT_HALT) on bulk
 *          OUT; reads 16 KiB and at most 32 datagrams per IN NTB; OUT
 *          NTBs end in a short packet (512 * n + 1 bytes)
 * ipxe     src/drivers/bus/usb.c, src/drivers/net/ncm.c, ecm.c: 8-byte
 *          then whole device descriptor, MAC string with language 0,
 *          SET_NTB_INPUT_SIZE (4 bytes) must work, SET_NET_ADDRESS,
 *          one datagram per OUT NTB and never a ZLP
 * macos    no public source: as reported by device stacks, the data
 *          interface toggled 1 -> 0 -> 1 at attach and
 *          SET_ETHERNET_PACKET_FILTER (bmNetworkCapabilities D0) used
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "fixture.h"

#define DT_DEVICE           1
#define DT_CONFIG           2
#define DT_STRING           3
#define DT_INTERFACE        4
#define DT_BOS              15
#define DT_IAD              11
#define LANG_EN_US          0x0409

/* A string descriptor as ASCII; returns the completion code. */
static int host_string(NcmEnv *e, uint8_t index, uint16_t lang,
                       uint16_t wlen, char *out, size_t max)
{
    uint8_t b[255];
    uint32_t actual = 0, i, n = 0;
    int cc;

    g_assert_cmpuint(wlen, <=, sizeof(b));
    cc = ncm_get_descriptor(e, DT_STRING, index, lang, b, wlen,
                            &actual);
    if (cc == QXHCI_CC_SUCCESS) {
        g_assert_cmpuint(actual, >=, 2);
        g_assert_cmpuint(b[1], ==, DT_STRING);
        for (i = 2; i + 1 < MIN(actual, b[0]) && n + 1 < max; i += 2) {
            out[n++] = b[i];
        }
    }
    if (max) {
        out[n] = 0;
    }
    return cc;
}

/* The device descriptor read in two steps: @first bytes, then 18. */
static void host_device_descriptor(NcmEnv *e, uint16_t first, uint8_t *d)
{
    uint8_t b[64];
    uint32_t actual = 0;

    g_assert_cmpuint(first, <=, sizeof(b));
    g_assert_cmpint(ncm_get_descriptor(e, DT_DEVICE, 0, 0, b, first,
                                       &actual), ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(actual, ==, MIN(first, 18));
    g_assert_cmpint(ncm_get_descriptor(e, DT_DEVICE, 0, 0, d, 18,
                                       &actual), ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(actual, ==, 18);
    g_assert_cmpuint(d[0], ==, 18);
}

/* The configuration read as @first bytes, then wTotalLength. */
static void host_config(NcmEnv *e, uint16_t first)
{
    uint8_t b[512];
    uint32_t actual = 0, total;

    g_assert_cmpint(ncm_get_descriptor(e, DT_CONFIG, 0, 0, b, first,
                                       &actual), ==, QXHCI_CC_SUCCESS);
    total = lduw_le_p(b + 2);
    g_assert_cmpuint(actual, ==, MIN(first, total));
    g_assert_cmpint(ncm_get_descriptor(e, DT_CONFIG, 0, 0, b, total,
                                       &actual), ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(actual, ==, total);
    /* iPXE: both reads must say the same length */
    g_assert_cmpuint(lduw_le_p(b + 2), ==, total);
    g_assert_cmpmem(b, total, e->config, e->config_len);
}

/* The MAC address string, parsed as the host does (hex, either case). */
static void host_check_mac(NcmEnv *e, uint16_t lang, uint16_t wlen)
{
    const uint8_t *eth = ncm_find_cs_desc(e, CDC_DESC_ETHERNET);
    char mac[64];

    g_assert(eth);
    g_assert_cmpint(host_string(e, eth[3], lang, wlen, mac, sizeof(mac)),
                    ==, QXHCI_CC_SUCCESS);
    /* iPXE and Windows take exactly 12 hex digits */
    g_assert_cmpuint(strlen(mac), ==, 12);
    g_assert_cmpint(g_ascii_strcasecmp(mac, NCM_MAC_HEX), ==, 0);
}

/*
 * Every descriptor check of NCM-Driver-for-Windows RetrieveConfiguration
 * and SelectConfiguration, and the IAD its composite driver needs to hand
 * both interfaces to UsbNcm.
 */
static void windows_check_descriptors(NcmEnv *e, const uint8_t *dev)
{
    const uint8_t *ncm = NULL, *ecm = NULL;
    bool ctrl = false, data = false, iad = false;
    uint32_t pos = 0;

    while (pos + 2 <= e->config_len && e->config[pos] >= 2) {
        const uint8_t *d = e->config + pos;

        if (d[1] == DT_INTERFACE) {
            g_assert_cmpuint(d[0], ==, 9);
            if (d[5] == 0x02 && d[6] == 0x0d) {
                g_assert_cmpuint(d[4], ==, 1);
                ctrl = true;
            } else if (d[5] == 0x0a && d[7] == 0x01 && d[3] == 1) {
                g_assert_cmpuint(d[4], ==, 2);
                data = true;
            }
        } else if (d[1] == CDC_CS_INTERFACE) {
            g_assert_cmpuint(d[0], >=, 3);
            if (d[2] == CDC_DESC_NCM) {
                g_assert_cmpuint(d[0], ==, 6);
                ncm = d;
            } else if (d[2] == CDC_DESC_ETHERNET) {
                g_assert_cmpuint(d[0], ==, 13);
                ecm = d;
            }
        } else if (d[1] == DT_IAD) {
            g_assert_cmpuint(d[0], ==, 8);
            iad = d[2] == 0 && d[3] == 2 && d[4] == 0x02 && d[5] == 0x0d;
        }
        pos += d[0];
    }
    g_assert(ctrl && data && ncm && ecm);
    /* composite (class 0 or 0xef): usbccgp needs the IAD */
    if (dev[4] == 0x00 || dev[4] == 0xef) {
        g_assert(iad);
    }
}

/*
 * Windows' hub driver: 64-byte device read, 255-byte configuration read,
 * the language list (language 0), strings, MS OS string 0xEE, BOS.
 */
static void windows_enumerate(NcmEnv *e, uint8_t *dev)
{
    uint8_t b[255];
    uint32_t actual = 0;
    char s[128];
    int cc;

    host_device_descriptor(e, 64, dev);
    host_config(e, 255);
    g_assert_cmpint(ncm_get_descriptor(e, DT_STRING, 0, 0, b, 255,
                                       &actual), ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(actual, >=, 4);
    g_assert_cmpuint(lduw_le_p(b + 2), ==, LANG_EN_US);
    if (dev[15]) {
        g_assert_cmpint(host_string(e, dev[15], LANG_EN_US, 255, s,
                                    sizeof(s)), ==, QXHCI_CC_SUCCESS);
    }
    if (dev[16]) {
        g_assert_cmpint(host_string(e, dev[16], LANG_EN_US, 255, s,
                                    sizeof(s)), ==, QXHCI_CC_SUCCESS);
    }
    /*
     * MS OS 1.0 descriptor probe: the device has no string 0xEE, so the
     * request stalls (USB 2.0 9.4.3).  QEMU's hw/usb/desc.c used to
     * answer with an empty data stage, which the oracle refuses
     * (docs/findings.md F13, patches/0021).
     */
    cc = ncm_get_descriptor(e, DT_STRING, 0xee, 0, b, 0x12, &actual);
    g_assert_cmpint(cc, ==, QXHCI_CC_STALL);
    if (lduw_le_p(dev + 2) >= 0x0201) {
        g_assert_cmpint(ncm_get_descriptor(e, DT_BOS, 0, 0, b, 5,
                                           &actual), ==, QXHCI_CC_SUCCESS);
        g_assert_cmpuint(actual, ==, 5);
        g_assert_cmpint(ncm_get_descriptor(e, DT_BOS, 0, 0, b,
                                           lduw_le_p(b + 2), &actual),
                        ==, QXHCI_CC_SUCCESS);
    }
}

/* The frames an IN NTB holds, parsed by the fixture's strict checker. */
static unsigned host_receive_ntb(NcmEnv *e, uint32_t td_len, GPtrArray *got)
{
    QXhciTransfer *t = qxhci_submit(e->dev, e->ep_in.address, NULL, td_len);
    g_autofree uint8_t *buf = g_malloc(td_len);
    unsigned before = got->len;

    g_assert(qxhci_wait(t, NCM_RX_TIMEOUT_NS));
    g_assert(t->cc == QXHCI_CC_SUCCESS || t->cc == QXHCI_CC_SHORT_PACKET);
    g_assert_cmpuint(t->actual, <=, td_len);
    qxhci_transfer_read(t, buf);
    ncm_oracle_in(e, buf, t->actual, td_len);
    ncm_ntb_parse_in(e, buf, t->actual, td_len, got);
    qxhci_transfer_free(t);
    return got->len - before;
}

/*
 * @n frames of @len bytes from the network, read in @td_len transfers;
 * returns the most datagrams one NTB held.
 */
static unsigned host_rx(NcmEnv *e, unsigned n, size_t len, uint32_t td_len,
                        uint32_t tag)
{
    g_autoptr(GPtrArray) want = ncm_frames_new();
    g_autoptr(GPtrArray) got = ncm_frames_new();
    unsigned i, most = 0;

    for (i = 0; i < n; i++) {
        ncm_frames_add(want, ncm_mac, tag + i, len);
    }
    ncm_sock_send_frames(e, want);
    while (got->len < n) {
        most = MAX(most, host_receive_ntb(e, td_len, got));
    }
    ncm_frames_assert_equal(got, want);
    return most;
}

static void test_windows(NcmEnv *e, const NcmCase *c)
{
    uint8_t dev[18];
    const uint8_t *eth;
    g_autoptr(GPtrArray) tx = ncm_frames_new();
    uint16_t mtu;
    unsigned i;

    windows_enumerate(e, dev);
    windows_check_descriptors(e, dev);
    /* SelectConfig with both interfaces at setting 0 */
    g_assert_cmpint(qxhci_control(e->dev, 0x00, QXHCI_REQ_SET_CONFIGURATION,
                                  e->config[5], 0, NULL, 0, NULL),
                    ==, QXHCI_CC_SUCCESS);
    ncm_function_reset(e, true);
    eth = ncm_find_cs_desc(e, CDC_DESC_ETHERNET);
    mtu = MIN(lduw_le_p(eth + 8), 9014);
    host_check_mac(e, LANG_EN_US, 255);
    ncm_read_ntb_parameters(e, &e->p, NULL);
    g_assert(e->p.formats & 1);
    if (e->p.formats & 2) {
        g_assert_cmpint(ncm_class_out(e, NCM_SET_NTB_FORMAT, 1, NULL, 0),
                        ==, QXHCI_CC_SUCCESS);
    }
    /* no SET_NTB_INPUT_SIZE at or under 64 KiB */
    g_assert_cmpuint(e->p.in_max, <=, 65536);
    ncm_set_alt(e, 1);
    e->ntb32 = e->p.formats & 2;
    e->in_size = e->p.in_max;

    /* wNtbOutMaxDatagrams per OUT NTB (16 when the device names none) */
    for (i = 0; i < MIN(e->p.out_max_datagrams ?: 16, 16); i++) {
        ncm_frames_add(tx, ncm_peer_mac, 0x5700 + i, i % 2 ? mtu : 60);
    }
    ncm_send_frames(e, tx);
    ncm_sock_expect_frames(e, tx);
    /* the driver asserts no IN transfer exceeds its input size */
    host_rx(e, 24, 1514, MIN(e->p.in_max, 65536), 0x5800);
}

/*
 * The device refused FreeBSD's SET_NTB_INPUT_SIZE, which if_cdce ignores:
 * see what its 16 KiB reads get.  An NTB longer than the read is what
 * cdce_ncm_bulk_read_callback rejects ("unsupported block length") with a
 * stall, and the rest of it arrives as the next read.  The device takes
 * the request (ncm_set_ntb_input_size()): this fails with the numbers.
 */
static void freebsd_refused(NcmEnv *e, bool eight, uint32_t rx_max)
{
    g_autoptr(GPtrArray) rx = ncm_frames_new();
    g_autofree uint8_t *buf = g_malloc(rx_max);
    g_autofree char *why = NULL;
    QXhciTransfer *t;
    uint32_t block;
    unsigned i;

    for (i = 0; i < 12; i++) {
        ncm_frames_add(rx, ncm_mac, 0x5b00 + i, 1514);
    }
    ncm_sock_send_frames(e, rx);
    t = qxhci_submit(e->dev, e->ep_in.address, NULL, rx_max);
    g_assert(qxhci_wait(t, NCM_RX_TIMEOUT_NS));
    qxhci_transfer_read(t, buf);
    ncm_oracle_in(e, buf, t->actual, rx_max);
    g_assert_cmpuint(t->actual, >=, 12);
    g_assert_cmpmem(buf, 4, "NCMH", 4);
    block = lduw_le_p(buf + 8) ?: t->actual;
    qxhci_transfer_free(t);
    /* a device that bounds its NTBs by the read anyway would do */
    g_assert_cmpuint(block, >, rx_max);
    why = g_strdup_printf("FreeBSD if_cdce cannot receive: its %u-byte "
                          "SET_NTB_INPUT_SIZE (%u) was refused (sent in "
                          "that form because bmNetworkCapabilities has "
                          "D3; the device takes 8 bytes only with D5), "
                          "so an IN NTB of %u bytes came into its "
                          "%u-byte read", eight ? 8 : 4, rx_max, block,
                          rx_max);
    g_test_message("%s", why);
    g_assert_not_reached();
}

static void test_freebsd(NcmEnv *e, const NcmCase *c)
{
    uint8_t dev[18], req[8], lang[255];
    const uint8_t *ncm = ncm_find_cs_desc(e, CDC_DESC_NCM);
    const uint8_t *eth = ncm_find_cs_desc(e, CDC_DESC_ETHERNET);
    uint32_t actual = 0, rx_max, off, ntb_len, i;
    unsigned most;
    bool eight;
    uint64_t taken;
    g_autoptr(GPtrArray) tx = ncm_frames_new();
    g_autofree uint8_t *ntb = NULL;
    GByteArray *f;

    host_device_descriptor(e, 8, dev);
    host_config(e, 9);
    /* usbd_req_get_string_any: the language list first, then its first */
    g_assert_cmpint(ncm_get_descriptor(e, DT_STRING, 0, 0, lang, 255,
                                       &actual), ==, QXHCI_CC_SUCCESS);
    g_assert(ncm && ncm[0] >= 6);
    g_assert(eth && eth[0] >= 13);

    /* cdce_attach: alternate index 0 first, and cdce_ncm_init there */
    g_assert_cmpint(qxhci_control(e->dev, 0x01, QXHCI_REQ_SET_INTERFACE, 0,
                                  NCM_IF_DATA, NULL, 0, NULL),
                    ==, QXHCI_CC_SUCCESS);
    ncm_function_reset(e, true);
    ncm_read_ntb_parameters(e, &e->p, NULL);
    rx_max = e->p.in_max < 32 || e->p.in_max > 16384 ? 16384 : e->p.in_max;
    eight = ncm[5] & NCM_CAP_MAX_DATAGRAM_SIZE;
    stl_le_p(req, rx_max);
    stw_le_p(req + 4, 31);
    stw_le_p(req + 6, 0);
    ncm_mark(e);
    /* each of these may fail: FreeBSD goes on regardless */
    ncm_class_out(e, NCM_SET_NTB_INPUT_SIZE, 0, req, eight ? 8 : 4);
    ncm_class_out(e, NCM_SET_CRC_MODE, 0, NULL, 0);
    ncm_class_out(e, NCM_SET_NTB_FORMAT, 0, NULL, 0);
    /* what FreeBSD relies on: the device took its input size */
    taken = ncm_delta(e, eight ? "input_size_requests_8" :
                      "input_size_requests_4");
    ncm_set_alt(e, 1);
    host_check_mac(e, lduw_le_p(lang + 2), 255);

    /* cdce_init: clear a stall on bulk OUT, which must be taken */
    g_assert_cmpint(qxhci_control(e->dev, 0x02, QXHCI_REQ_CLEAR_FEATURE, 0,
                                  e->ep_out.address, NULL, 0, NULL),
                    ==, QXHCI_CC_SUCCESS);

    /*
     * An OUT NTB as cdce_ncm_fill_tx_frames builds it: the NDP right after
     * the NTH with room for 32 entries, payloads (after the Ethernet
     * header) aligned to wNdpOutDivisor, the block padded to 512 * n + 1
     * bytes so that it always ends in a short packet.
     */
    ntb = g_malloc0(16384 + 4);
    ncm_frames_add(tx, ncm_peer_mac, 0x5900, 60);
    ncm_frames_add(tx, ncm_peer_mac, 0x5901, 1514);
    ncm_frames_add(tx, ncm_peer_mac, 0x5902, 342);
    off = 12 + 8 + 32 * 4;
    memcpy(ntb, "NCMH", 4);
    stw_le_p(ntb + 4, 12);              /* wHeaderLength */
    stw_le_p(ntb + 10, 12);             /* wNdpIndex */
    memcpy(ntb + 12, "NCM0", 4);
    stw_le_p(ntb + 16, 8 + 4 * tx->len + 4);
    for (i = 0; i < tx->len; i++) {
        uint32_t mod = e->p.out_divisor >= 4 ? e->p.out_divisor : 4;
        uint32_t rem = (e->p.out_remainder - 14) & (mod - 1);

        off += (rem - off) & (mod - 1);
        f = g_ptr_array_index(tx, i);
        memcpy(ntb + off, f->data, f->len);
        stw_le_p(ntb + 20 + 4 * i, off);
        stw_le_p(ntb + 22 + 4 * i, f->len);
        off += f->len;
    }
    ntb_len = ROUND_UP(off, 512) + 1;
    stw_le_p(ntb + 8, ntb_len);         /* wBlockLength */
    ncm_out_td(e, ntb, ntb_len);
    ncm_sock_expect_frames(e, tx);

    if (!taken) {
        freebsd_refused(e, eight, rx_max);
        return;
    }
    /*
     * IN: one 16 KiB read at a time (cdce_ncm_bulk_read_callback), which
     * keeps at most 32 datagrams of an NTB and drops the rest.
     */
    most = host_rx(e, 48, 60, rx_max, 0x5a00);
    most = MAX(most, host_rx(e, 12, 1514, rx_max, 0x5b00));
    g_assert_cmpuint(most, <=, 32);
}

/* iPXE's OUT NTB: 12 + 8 + 2 * 4 header bytes and padding, one datagram */
static GByteArray *ipxe_ntb(NcmEnv *e, GByteArray *frame, uint16_t seq)
{
    uint32_t div = e->p.out_divisor ?: 1;
    uint32_t pad = (e->p.out_remainder - 28 - 14) & (div - 1);
    uint32_t hdr = 28 + pad;
    GByteArray *n = g_byte_array_sized_new(hdr + frame->len);
    uint8_t h[64] = { 0 };

    memcpy(h, "NCMH", 4);
    stw_le_p(h + 4, 12);
    stw_le_p(h + 6, seq);
    stw_le_p(h + 8, hdr + frame->len);
    stw_le_p(h + 10, 12);
    memcpy(h + 12, "NCM0", 4);
    stw_le_p(h + 16, 16);
    stw_le_p(h + 20, hdr);
    stw_le_p(h + 22, frame->len);
    g_byte_array_append(n, h, hdr);
    g_byte_array_append(n, frame->data, frame->len);
    return n;
}

static void test_ipxe(NcmEnv *e, const NcmCase *c)
{
    uint8_t dev[18], req[4], mac[6];
    uint32_t in_len, tail;
    unsigned i;
    g_autoptr(GPtrArray) tx = ncm_frames_new();
    g_autoptr(GPtrArray) rest = ncm_frames_new();
    bool zlp_needed = !strcmp(c->model, NCM_DL);

    /* usb_get_mtu (8 bytes), the whole descriptor, 9 then all */
    host_device_descriptor(e, 8, dev);
    host_config(e, 9);
    g_assert_cmpint(qxhci_control(e->dev, 0x00, QXHCI_REQ_SET_CONFIGURATION,
                                  e->config[5], 0, NULL, 0, NULL),
                    ==, QXHCI_CC_SUCCESS);
    ncm_function_reset(e, true);
    /* ecm_fetch_mac: language 0, a 26-byte buffer */
    host_check_mac(e, 0, 26);
    ncm_read_ntb_parameters(e, &e->p, NULL);

    /* ncm_in_prefill: 3+ buffers, at most 128 KiB in all */
    for (in_len = MIN(e->p.in_max, 65536);
         MAX(16384 / in_len, 3) * in_len > 131072; in_len >>= 1) {
        /* halve */
    }
    stl_le_p(req, in_len);
    g_assert_cmpint(ncm_class_out(e, NCM_SET_NTB_INPUT_SIZE, 0, req, 4),
                    ==, QXHCI_CC_SUCCESS);
    e->in_size = in_len;
    memcpy(mac, ncm_mac, 6);
    /* its error is ignored */
    ncm_class_out(e, NCM_SET_NET_ADDRESS, 0, mac, 6);
    ncm_set_alt(e, 1);

    /* one datagram per NTB, and never a ZLP */
    for (i = 0; i < 3; i++) {
        ncm_frames_add(tx, ncm_peer_mac, 0x5c00 + i,
                       i == 1 ? 1514 : 60 + 100 * i);
    }
    for (i = 0; i < tx->len; i++) {
        g_autoptr(GByteArray) n = ipxe_ntb(e, g_ptr_array_index(tx, i), i);

        g_assert(n->len % e->mps);
        ncm_out_td(e, n->data, n->len);
    }
    ncm_sock_expect_frames(e, tx);

    /*
     * An NTB that fills whole packets, then another: iPXE sends no ZLP.
     * A generic NCM function delimits by wBlockLength; DisplayLink
     * firmware (usb-ncm-dl) waits for the short packet, so both arrive as
     * one transfer and the second NTB is lost, as on a real dock.
     */
    tail = e->mps - (28 + ((e->p.out_remainder - 42) &
                           ((e->p.out_divisor ?: 1) - 1)));
    ncm_frames_add(rest, ncm_peer_mac, 0x5d00, tail);
    ncm_frames_add(rest, ncm_peer_mac, 0x5d01, 60);
    ncm_mark(e);
    for (i = 0; i < rest->len; i++) {
        g_autoptr(GByteArray) n = ipxe_ntb(e, g_ptr_array_index(rest, i),
                                           10 + i);

        if (i == 0) {
            g_assert_cmpuint(n->len % e->mps, ==, 0);
        }
        ncm_out_td(e, n->data, n->len);
    }
    if (zlp_needed) {
        g_ptr_array_remove_index(rest, 1);
        ncm_sock_expect_frames(e, rest);
        ncm_assert_deltas(e, { "out_merged_transfers", 1 },
                          { "out_merge_lost_datagrams", 1 });
    } else {
        ncm_sock_expect_frames(e, rest);
    }

    /* IN: buffers of the size it set */
    host_rx(e, 20, 1514, in_len, 0x5e00);
}

static void test_macos(NcmEnv *e, const NcmCase *c)
{
    const uint8_t *ncm = ncm_find_cs_desc(e, CDC_DESC_NCM);
    g_autoptr(GPtrArray) tx = ncm_frames_new();

    g_assert(ncm);
    /* promiscuous mode and Internet Sharing need the packet filter */
    g_assert(ncm[5] & 0x01);
    ncm_read_ntb_parameters(e, &e->p, NULL);
    ncm_set_alt(e, 1);
    ncm_set_alt(e, 0);
    ncm_set_alt(e, 1);
    g_assert_cmpint(ncm_class_out(e, CDC_SET_ETHERNET_PACKET_FILTER, 0x000f,
                                  NULL, 0), ==, QXHCI_CC_SUCCESS);
    ncm_frames_add(tx, ncm_peer_mac, 0x5f00, 1514);
    ncm_frames_add(tx, ncm_peer_mac, 0x5f01, 60);
    ncm_send_frames(e, tx);
    ncm_sock_expect_frames(e, tx);
    host_rx(e, 8, 1514, e->p.in_max, 0x6000);
}

void ncm_add_host_cases(bool ss)
{
    ncm_add_case(ss, NCM_DL, "hosts/windows", test_windows, NULL, NULL);
    ncm_add_case(ss, NCM_DL, "hosts/freebsd", test_freebsd, NULL, NULL);
    /* a profile with D5, whose 8-byte SET_NTB_INPUT_SIZE is taken */
    ncm_add_case(ss, NCM_DL, "hosts/freebsd-rtl8156", test_freebsd, NULL,
                 "profile=rtl8156");
    ncm_add_case(ss, NCM_DL, "hosts/ipxe", test_ipxe, NULL, NULL);
    ncm_add_case(ss, NCM_GENERIC, "hosts/ipxe", test_ipxe, NULL, NULL);
    ncm_add_case(ss, NCM_DL, "hosts/macos", test_macos, NULL, NULL);
}
