/*
 * qtest cases for the NCM 1.0 requests beyond the base set and for the
 * profile= presets: the 8-byte NTB input size, multicast filters,
 * Ethernet statistics, CRC mode (NCM1 NDPs both ways, malformed ones),
 * profiles and their overrides, and the largest max-segment-size.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "fixture.h"

static const uint8_t mc_listed[6] = { 0x01, 0x00, 0x5e, 0x00, 0x00, 0x01 };
static const uint8_t mc_listed2[6] = { 0x33, 0x33, 0x00, 0x00, 0x00, 0xfb };
static const uint8_t mc_unlisted[6] = { 0x01, 0x00, 0x5e, 0x00, 0x00, 0x02 };

static uint64_t stat_now(NcmEnv *e, const char *name)
{
    g_autoptr(QDict) s = ncm_stats(e);

    g_assert(qdict_haskey(s, name));
    return qdict_get_int(s, name);
}

/* The NTB16 datagrams of one IN transfer; @crc: NCM1 */
static unsigned spec_parse_in16(const uint8_t *b, uint32_t len, bool crc,
                                GPtrArray *out)
{
    NcmHostLayout l = { .crc = crc };
    unsigned before = out->len;
    char why[256];

    if (!ncm_ntb_parse(&l, b, len, out, why, sizeof(why))) {
        g_test_message("IN NTB16 of %u bytes: %s", len, why);
        g_assert_not_reached();
    }
    return out->len - before;
}

/*
 * Read IN NTBs until @n datagrams came; each NTB must hold at most
 * @per_ntb (0: any).  Returns the datagrams.
 */
static GPtrArray *spec_receive(NcmEnv *e, unsigned n, unsigned per_ntb,
                               bool crc)
{
    GPtrArray *got = ncm_frames_new();
    g_autofree uint8_t *buf = g_malloc(e->p.in_max);

    while (got->len < n) {
        QXhciTransfer *t = qxhci_submit(e->dev, e->ep_in.address, NULL,
                                        e->p.in_max);
        unsigned k;

        g_assert(qxhci_wait(t, NCM_RX_TIMEOUT_NS));
        g_assert(t->cc == QXHCI_CC_SUCCESS ||
                 t->cc == QXHCI_CC_SHORT_PACKET);
        qxhci_transfer_read(t, buf);
        ncm_oracle_in(e, buf, t->actual, e->p.in_max);
        k = spec_parse_in16(buf, t->actual, crc, got);
        if (per_ntb) {
            g_assert_cmpuint(k, <=, per_ntb);
        }
        qxhci_transfer_free(t);
    }
    return got;
}

/*
 * An OUT NTB16 with an NCM1 NDP (@sig: another signature), a CRC after
 * every frame, the one of frame @bad wrong
 */
static GByteArray *spec_ntb_crc(GPtrArray *frames, int bad, const char *sig)
{
    NcmHostLayout l = { .crc = true, .divisor = 4 };
    g_autoptr(GPtrArray) with_crc = ncm_frames_new();
    GByteArray *ntb;
    unsigned i;

    for (i = 0; i < frames->len; i++) {
        GByteArray *f = g_ptr_array_index(frames, i);
        GByteArray *c = g_byte_array_sized_new(f->len + 4);

        g_byte_array_append(c, f->data, f->len);
        ncm_frame_append_crc(c, (int)i == bad);
        g_ptr_array_add(with_crc, c);
    }
    ntb = ncm_ntb_build(&l, with_crc, 0);
    if (sig) {
        memcpy(ntb->data + ncm_get_field(ntb->data + 10, false), sig, 4);
    }
    return ntb;
}

/* 8-byte SET/GET_NTB_INPUT_SIZE (bmNetworkCapabilities D5) */
static void test_spec_input_size_8(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) tx = ncm_frames_new();
    g_autoptr(GPtrArray) got = NULL;
    const uint8_t *ncm = ncm_find_cs_desc(e, 0x1a);
    uint8_t b[8];
    uint32_t actual = 0;
    int i;

    ncm_mark(e);
    g_assert(ncm);
    g_assert_cmphex(ncm[5], ==, 0x2b);
    stl_le_p(b, 8192);
    stw_le_p(b + 4, 2);
    stw_le_p(b + 6, 0);
    g_assert_cmpint(ncm_class_out(e, NCM_SET_NTB_INPUT_SIZE, 0, b, 8),
                    ==, QXHCI_CC_SUCCESS);
    memset(b, 0, sizeof(b));
    g_assert_cmpint(ncm_class_in(e, NCM_GET_NTB_INPUT_SIZE, 0, b, 8,
                                 &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(actual, ==, 8);
    g_assert_cmpuint(ldl_le_p(b), ==, 8192);
    g_assert_cmpuint(lduw_le_p(b + 4), ==, 2);
    /* malformed lengths stall; the 8-byte setting stays */
    for (i = 5; i <= 7; i++) {
        g_assert_cmpint(ncm_class_out(e, NCM_SET_NTB_INPUT_SIZE, 0, b, i),
                        ==, QXHCI_CC_STALL);
    }
    ncm_set_alt(e, 1);
    e->in_size = 8192;
    for (i = 0; i < 7; i++) {
        ncm_frames_add(tx, ncm_mac, 100 + i, 300);
    }
    ncm_sock_send_frames(e, tx);
    got = spec_receive(e, tx->len, 2, false);
    ncm_frames_assert_equal(got, tx);
    ncm_assert_deltas(e, { "input_size_requests_8", 1 },
                      { "input_size_requests_4", 0 },
                      { "bad_requests", 3 });
    g_assert_cmpuint(ncm_delta(e, "in_ntbs"), >=, 4);

    /* the 4-byte form still works and lifts the limit */
    stl_le_p(b, 16384);
    g_assert_cmpint(ncm_class_out(e, NCM_SET_NTB_INPUT_SIZE, 0, b, 4),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpint(ncm_class_in(e, NCM_GET_NTB_INPUT_SIZE, 0, b, 8,
                                 &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(actual, ==, 8);
    g_assert_cmpuint(ldl_le_p(b), ==, 16384);
    g_assert_cmpuint(lduw_le_p(b + 4), ==, 0);
    g_assert_cmpuint(stat_now(e, "input_size_requests_4"), ==, 1);
}

static int set_mc(NcmEnv *e, uint16_t n, const uint8_t *list, uint16_t len)
{
    return ncm_class_out(e, CDC_SET_ETHERNET_MULTICAST_FILTERS, n, list,
                         len);
}

/*
 * Perfect multicast filters: wNumberMCFilters advertised, the list taken
 * and applied under PACKET_TYPE_MULTICAST; bad lists stall and count.
 */
static void test_spec_mc_perfect(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) tx = ncm_frames_new();
    g_autoptr(GPtrArray) want = ncm_frames_new();
    const uint8_t *eth = ncm_find_cs_desc(e, 0x0f);
    uint8_t list[18];

    ncm_mark(e);
    g_assert(eth);
    g_assert_cmpuint(lduw_le_p(eth + 10), ==, 2);
    memcpy(list, mc_listed, 6);
    memcpy(list + 6, mc_listed2, 6);
    memcpy(list + 12, mc_unlisted, 6);
    /* three is one too many; 7 bytes is not a list of one */
    g_assert_cmpint(set_mc(e, 3, list, 18), ==, QXHCI_CC_STALL);
    g_assert_cmpint(set_mc(e, 1, list, 7), ==, QXHCI_CC_STALL);
    g_assert_cmpint(set_mc(e, 2, list, 6), ==, QXHCI_CC_STALL);
    g_assert_cmpint(set_mc(e, 2, list, 12), ==, QXHCI_CC_SUCCESS);
    g_assert_cmpint(ncm_class_out(e, CDC_SET_ETHERNET_PACKET_FILTER,
                                  CDC_FILTER_DIRECTED | CDC_FILTER_MULTICAST,
                                  NULL, 0), ==, QXHCI_CC_SUCCESS);
    ncm_set_alt(e, 1);
    ncm_frames_add(tx, mc_unlisted, 1, 100);
    ncm_frames_add(tx, mc_listed, 2, 100);
    ncm_frames_add(tx, ncm_bcast_mac, 3, 100);
    ncm_frames_add(tx, mc_listed2, 4, 100);
    ncm_frames_add(tx, ncm_mac, 5, 100);
    ncm_frames_add(want, mc_listed, 2, 100);
    ncm_frames_add(want, mc_listed2, 4, 100);
    ncm_frames_add(want, ncm_mac, 5, 100);
    ncm_sock_send_frames(e, tx);
    ncm_expect_rx(e, want);
    ncm_assert_deltas(e, { "mc_filter_requests", 1 },
                      { "mc_filter_rejects", 3 },
                      { "rx_filtered", 2 },
                      { "in_multicast_frames", 2 });

    /* ALL_MULTICAST takes every one */
    g_ptr_array_set_size(tx, 0);
    ncm_frames_add(tx, mc_unlisted, 6, 100);
    g_assert_cmpint(ncm_class_out(e, CDC_SET_ETHERNET_PACKET_FILTER,
                                  CDC_FILTER_DIRECTED |
                                  CDC_FILTER_ALL_MULTICAST, NULL, 0),
                    ==, QXHCI_CC_SUCCESS);
    ncm_sock_send_frames(e, tx);
    ncm_expect_rx(e, tx);
}

/*
 * wNumberMCFilters D15: imperfect (hash) filtering.  An unlisted
 * address in a listed one's hash bin passes, one in another bin not.
 */
static unsigned spec_hash_bin(const uint8_t *mac)
{
    return ncm_host_crc32(mac, 6) >> 26;
}

static void test_spec_mc_imperfect(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) tx = ncm_frames_new();
    g_autoptr(GPtrArray) want = ncm_frames_new();
    uint8_t same[6], other[6];
    bool have_same = false, have_other = false;
    unsigned i;

    for (i = 0; i < 65536 && !(have_same && have_other); i++) {
        uint8_t m[6] = { 0x01, 0x00, 0x5e, 0x02, i >> 8, i };

        if (spec_hash_bin(m) == spec_hash_bin(mc_listed)) {
            memcpy(same, m, 6);
            have_same = true;
        } else {
            memcpy(other, m, 6);
            have_other = true;
        }
    }
    g_assert(have_same && have_other);
    g_assert_cmphex(lduw_le_p(ncm_find_cs_desc(e, 0x0f) + 10), ==, 0x8004);
    g_assert_cmpint(set_mc(e, 1, mc_listed, 6), ==, QXHCI_CC_SUCCESS);
    g_assert_cmpint(ncm_class_out(e, CDC_SET_ETHERNET_PACKET_FILTER,
                                  CDC_FILTER_MULTICAST, NULL, 0),
                    ==, QXHCI_CC_SUCCESS);
    ncm_set_alt(e, 1);
    ncm_frames_add(tx, other, 1, 80);
    ncm_frames_add(tx, same, 2, 80);
    ncm_frames_add(tx, mc_listed, 3, 80);
    ncm_frames_add(want, same, 2, 80);
    ncm_frames_add(want, mc_listed, 3, 80);
    ncm_sock_send_frames(e, tx);
    ncm_expect_rx(e, want);
    g_assert_cmpuint(stat_now(e, "rx_filtered"), ==, 1);
}

static uint32_t spec_statistic(NcmEnv *e, uint16_t selector)
{
    uint8_t b[4];
    uint32_t actual = 0;

    g_assert_cmpint(ncm_class_in(e, CDC_GET_ETHERNET_STATISTIC, selector, b,
                                 4,
                                 &actual), ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(actual, ==, 4);
    return ldl_le_p(b);
}

/* GET_ETHERNET_STATISTIC (CDC ECM 1.2 6.2.5) for what is advertised */
static void test_spec_statistics(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) out = ncm_frames_new();
    g_autoptr(GPtrArray) in = ncm_frames_new();
    uint8_t b[4];
    uint32_t actual = 0;

    g_assert_cmphex((uint32_t)ldl_le_p(ncm_find_cs_desc(e, 0x0f) + 4), ==,
                    0x0001fffd);
    ncm_set_alt(e, 1);
    ncm_frames_add(out, ncm_bcast_mac, 1, 200);
    ncm_frames_add(out, ncm_peer_mac, 2, 300);
    ncm_frames_add(out, ncm_peer_mac, 3, 400);
    ncm_frames_add(out, mc_listed, 4, 500);
    ncm_send_frames(e, out);
    ncm_sock_expect_frames(e, out);
    ncm_frames_add(in, ncm_mac, 5, 1000);
    ncm_frames_add(in, ncm_bcast_mac, 6, 100);
    ncm_sock_send_frames(e, in);
    ncm_expect_rx(e, in);

    g_assert_cmpuint(spec_statistic(e, 1), ==, 4);         /* XMIT_OK */
    g_assert_cmpuint(spec_statistic(e, 6), ==, 700);       /* directed B */
    g_assert_cmpuint(spec_statistic(e, 7), ==, 2);         /* directed F */
    g_assert_cmpuint(spec_statistic(e, 9), ==, 1);         /* multicast F */
    g_assert_cmpuint(spec_statistic(e, 10), ==, 200);      /* broadcast B */
    g_assert_cmpuint(spec_statistic(e, 12), ==, 1000);     /* directed RCV */
    g_assert_cmpuint(spec_statistic(e, 17), ==, 1);        /* bcast RCV F */
    /* RCV_OK is not advertised here (0x1fffd); 18 is beyond the model */
    g_assert_cmpint(ncm_class_in(e, CDC_GET_ETHERNET_STATISTIC, 2, b, 4,
                                 &actual), ==, QXHCI_CC_STALL);
    g_assert_cmpint(ncm_class_in(e, CDC_GET_ETHERNET_STATISTIC, 18, b, 4,
                                 &actual), ==, QXHCI_CC_STALL);
    g_assert_cmpint(ncm_class_in(e, CDC_GET_ETHERNET_STATISTIC, 0, b, 4,
                                 &actual), ==, QXHCI_CC_STALL);
    g_assert_cmpuint(stat_now(e, "statistic_requests"), ==, 7);
}

/*
 * CRC mode both ways: SET_CRC_MODE(1) in alt 0; OUT NCM1 datagrams come
 * out without their CRC, a bad CRC drops its datagram only; IN NTBs carry
 * NCM1 NDPs with a CRC after every datagram.
 */
static void test_spec_crc(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) out = ncm_frames_new();
    g_autoptr(GPtrArray) want = ncm_frames_new();
    g_autoptr(GPtrArray) in = ncm_frames_new();
    g_autoptr(GPtrArray) got = NULL;
    g_autoptr(GByteArray) ntb = NULL;
    uint8_t b[2];
    uint32_t actual = 0;

    g_assert_cmphex(ncm_find_cs_desc(e, 0x1a)[5], ==, 0x1b);
    g_assert_cmpint(ncm_class_in(e, NCM_GET_CRC_MODE, 0, b, 2, &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(lduw_le_p(b), ==, 0);
    g_assert_cmpint(ncm_class_out(e, NCM_SET_CRC_MODE, 2, NULL, 0),
                    ==, QXHCI_CC_STALL);
    g_assert_cmpint(ncm_class_out(e, NCM_SET_CRC_MODE, 1, NULL, 0),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpint(ncm_class_in(e, NCM_GET_CRC_MODE, 0, b, 2, &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(lduw_le_p(b), ==, 1);
    ncm_set_alt(e, 1);
    /* not while the data interface is up */
    g_assert_cmpint(ncm_class_out(e, NCM_SET_CRC_MODE, 0, NULL, 0),
                    ==, QXHCI_CC_STALL);

    ncm_mark(e);
    ncm_frames_add(out, ncm_bcast_mac, 1, 60);
    ncm_frames_add(out, ncm_peer_mac, 2, 1514);
    ncm_frames_add(out, ncm_peer_mac, 3, 700);
    ncm_frames_add(want, ncm_bcast_mac, 1, 60);
    ncm_frames_add(want, ncm_peer_mac, 3, 700);
    ntb = spec_ntb_crc(out, 1, NULL);
    ncm_send(e, ntb->data, ntb->len);
    ncm_sock_expect_frames(e, want);
    ncm_sock_expect_silence(e, 20);

    ncm_frames_add(in, ncm_mac, 4, 1514);
    ncm_frames_add(in, ncm_bcast_mac, 5, 64);
    ncm_sock_send_frames(e, in);
    got = spec_receive(e, in->len, 0, true);
    ncm_frames_assert_equal(got, in);
    ncm_assert_deltas(e, { "out_crc_errors", 1 },
                      { "out_crc_datagrams", 2 },
                      { "out_datagrams", 2 });
    g_assert_cmpuint(ncm_delta(e, "in_crc_ntbs"), >=, 1);
    ncm_assert_parse_errors(e, NULL, 0);
    ncm_assert_alive(e);

    /* alt 0 ends CRC mode */
    ncm_set_alt(e, 0);
    g_assert_cmpint(ncm_class_in(e, NCM_GET_CRC_MODE, 0, b, 2, &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(lduw_le_p(b), ==, 0);
}

/*
 * Malformed CRC NDPs: a datagram shorter than its CRC, one shorter than
 * a header plus CRC, NCM0 in CRC mode, NCM1 without it.  Each NTB is
 * rejected whole and counted; the function keeps working.
 */
static void test_spec_crc_malformed(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) one = ncm_frames_new();
    g_autoptr(GByteArray) ntb = NULL;
    static const uint16_t short_lens[] = { 3, 4, 17 };
    unsigned i;

    ncm_frames_add(one, ncm_peer_mac, 1, 100);
    g_assert_cmpint(ncm_class_out(e, NCM_SET_CRC_MODE, 1, NULL, 0),
                    ==, QXHCI_CC_SUCCESS);
    ncm_set_alt(e, 1);
    for (i = 0; i < ARRAY_SIZE(short_lens); i++) {
        g_autoptr(GByteArray) bad = spec_ntb_crc(one, -1, NULL);

        ncm_mark(e);
        stw_le_p(bad->data + 12 + 10, short_lens[i]);
        ncm_send(e, bad->data, bad->len);
        ncm_sock_expect_silence(e, 20);
        ncm_assert_parse_errors(e, "datagram-too-short", 1);
    }
    /* NCM0 in CRC mode */
    ncm_mark(e);
    ntb = spec_ntb_crc(one, -1, "NCM0");
    ncm_send(e, ntb->data, ntb->len);
    ncm_sock_expect_silence(e, 20);
    ncm_assert_parse_errors(e, "ndp-signature", 1);
    /* a good one still passes */
    g_byte_array_unref(ntb);
    ntb = spec_ntb_crc(one, -1, NULL);
    ncm_send(e, ntb->data, ntb->len);
    ncm_sock_expect_frames(e, one);

    /* CRC mode off (alt 0): NCM1 is a signature error */
    ncm_set_alt(e, 0);
    ncm_set_alt(e, 1);
    ncm_mark(e);
    ncm_send(e, ntb->data, ntb->len);
    ncm_sock_expect_silence(e, 20);
    ncm_assert_parse_errors(e, "ndp-signature", 1);
    ncm_assert_deltas(e, { "out_crc_errors", 0 });
    ncm_check_marker(e, 50);
}

/* Without bmNetworkCapabilities D4 neither CRC request exists */
static void test_spec_crc_not_offered(NcmEnv *e, const NcmCase *c)
{
    uint8_t b[2];
    uint32_t actual = 0;

    g_assert_cmpint(ncm_class_in(e, NCM_GET_CRC_MODE, 0, b, 2, &actual),
                    ==, QXHCI_CC_STALL);
    g_assert_cmpint(ncm_class_out(e, NCM_SET_CRC_MODE, 1, NULL, 0),
                    ==, QXHCI_CC_STALL);
    g_assert_cmpint(set_mc(e, 1, mc_listed, 6), ==, QXHCI_CC_STALL);
    g_assert_cmpuint(stat_now(e, "bad_requests"), ==, 3);
    g_assert_cmpuint(stat_now(e, "mc_filter_rejects"), ==, 1);
    ncm_set_alt(e, 1);
    ncm_check_marker(e, 10);
}

/* What a profile puts in the descriptors and GET_NTB_PARAMETERS */
typedef struct SpecProfile {
    const char *name;
    const char *props;
    uint16_t vid, pid;
    uint16_t bcd_cdc;
    uint8_t caps;
    uint16_t mss, mc_filters;
    uint32_t eth_stats;
    uint16_t formats;
    uint32_t in_max, out_max;
    uint16_t out_max_datagrams;
    unsigned in_per_ntb;
} SpecProfile;

static const SpecProfile spec_profiles[] = {
    { "displaylink", "profile=displaylink", 0x17e9, 0x6000, 0x0120, 0x0b,
      1514, 0, 0, 3, 65536, 65536, 64, 0 },
    { "generic", "profile=generic", 0x17e9, 0x6000, 0x0120, 0x0b,
      1514, 0, 0, 3, 65536, 65536, 64, 0 },
    { "rtl8156", "profile=rtl8156", 0x0bda, 0x8156, 0x0110, 0x2b,
      1518, 0x8000, 0x1ffff, 1, 16384, 16384, 40, 0 },
    { "f_ncm", "profile=f_ncm", 0x0525, 0xa4a1, 0x0110, 0x11,
      1514, 0, 0, 3, 16384, 16384, 0, 32 },
    { "minimal", "profile=minimal", 0x17e9, 0x6000, 0x0110, 0x00,
      1514, 0, 0, 1, 4096, 4096, 1, 1 },
    /* given properties win; the rest still comes from the profile */
    { "rtl8156-overridden", "profile=rtl8156,network-capabilities=0x0b,"
      "max-segment-size=1514,multicast-filters=16,vendorid=0x1234",
      0x1234, 0x8156, 0x0110, 0x0b, 1514, 16, 0x1ffff, 1, 16384, 16384,
      40, 0 },
    { "minimal-overridden", "profile=minimal,ntb-in-max-size=8192,"
      "in-datagrams-per-ntb=0,ntb32=on,bcd-cdc=0x0120",
      0x17e9, 0x6000, 0x0120, 0x00, 1514, 0, 0, 3, 8192, 4096, 1, 0 },
};

static void test_spec_profile(NcmEnv *e, const NcmCase *c)
{
    const SpecProfile *p = c->data;
    const uint8_t *hdr = ncm_find_cs_desc(e, 0x00);
    const uint8_t *eth = ncm_find_cs_desc(e, 0x0f);
    const uint8_t *ncm = ncm_find_cs_desc(e, 0x1a);
    g_autoptr(GPtrArray) tx = ncm_frames_new();
    g_autoptr(GPtrArray) got = NULL;
    g_autoptr(QDict) stats = NULL;
    uint8_t dev[18];
    uint32_t actual = 0;
    unsigned i;

    g_assert(hdr && eth && ncm);
    g_assert_cmpint(ncm_get_descriptor(e, 1, 0, 0, dev, sizeof(dev),
                                       &actual), ==, QXHCI_CC_SUCCESS);
    g_assert_cmphex(lduw_le_p(dev + 8), ==, p->vid);
    g_assert_cmphex(lduw_le_p(dev + 10), ==, p->pid);
    g_assert_cmphex(lduw_le_p(hdr + 3), ==, p->bcd_cdc);
    g_assert_cmphex((uint32_t)ldl_le_p(eth + 4), ==, p->eth_stats);
    g_assert_cmpuint(lduw_le_p(eth + 8), ==, p->mss);
    g_assert_cmphex(lduw_le_p(eth + 10), ==, p->mc_filters);
    g_assert_cmphex(ncm[5], ==, p->caps);
    g_assert_cmphex(e->p.formats, ==, p->formats);
    g_assert_cmpuint(e->p.in_max, ==, p->in_max);
    g_assert_cmpuint(e->p.out_max, ==, p->out_max);
    g_assert_cmpuint(e->p.out_max_datagrams, ==, p->out_max_datagrams);

    /* traffic both ways under the profile's limits */
    ncm_set_alt(e, 1);
    if (p->caps & 0x01) {
        g_assert_cmpint(ncm_class_out(e, CDC_SET_ETHERNET_PACKET_FILTER,
                                      CDC_FILTER_DIRECTED |
                                      CDC_FILTER_BROADCAST, NULL, 0),
                        ==, QXHCI_CC_SUCCESS);
    }
    for (i = 0; i < 6; i++) {
        ncm_frames_add(tx, i % 2 ? ncm_bcast_mac : ncm_mac, 10 + i,
                       200 + i * 250);
    }
    ncm_sock_send_frames(e, tx);
    got = spec_receive(e, tx->len, p->in_per_ntb, false);
    ncm_frames_assert_equal(got, tx);
    if (p->in_per_ntb == 1) {
        g_assert_cmpuint(stat_now(e, "in_ntbs"), ==, tx->len);
    }
    /* OUT: NTBs of up to wNtbOutMaxDatagrams frames */
    for (i = 0; i < 3; i++) {
        g_autoptr(GPtrArray) out = ncm_frames_new();

        ncm_frames_add(out, ncm_peer_mac, 100 + i, 60 + i * 700);
        if (p->out_max_datagrams != 1) {
            ncm_frames_add(out, ncm_bcast_mac, 200 + i, 1514);
        }
        ncm_send_frames(e, out);
        ncm_sock_expect_frames(e, out);
    }
    stats = ncm_stats(e);
    g_assert_cmpuint(qdict_get_int(qdict_get_qdict(stats, "out_parse_errors"),
                                   "total"), ==, 0);
    g_assert_cmpuint(qdict_get_int(stats, "out_datagrams"), ==,
                     p->out_max_datagrams == 1 ? 3 : 6);
}

/* max-segment-size at its limit (an NTB of 65536 with its headers) */
static void test_spec_max_segment(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) out = ncm_frames_new();
    g_autoptr(GPtrArray) in = ncm_frames_new();
    g_autoptr(GPtrArray) got = NULL;
    uint8_t b[2];
    uint32_t actual = 0;

    g_assert_cmpuint(lduw_le_p(ncm_find_cs_desc(e, 0x0f) + 8), ==, 65472);
    g_assert_cmpint(ncm_class_in(e, NCM_GET_MAX_DATAGRAM_SIZE, 0, b, 2,
                                 &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(lduw_le_p(b), ==, 65472);
    stw_le_p(b, 65473);
    g_assert_cmpint(ncm_class_out(e, NCM_SET_MAX_DATAGRAM_SIZE, 0, b, 2),
                    ==, QXHCI_CC_STALL);
    stw_le_p(b, 60000);
    g_assert_cmpint(ncm_class_out(e, NCM_SET_MAX_DATAGRAM_SIZE, 0, b, 2),
                    ==, QXHCI_CC_SUCCESS);
    ncm_set_alt(e, 1);
    ncm_frames_add(out, ncm_peer_mac, 1, 60000);
    ncm_send_frames(e, out);
    ncm_sock_expect_frames(e, out);
    ncm_frames_add(in, ncm_mac, 2, 60000);
    ncm_frames_add(in, ncm_mac, 3, 9000);
    ncm_sock_send_frames(e, in);
    got = spec_receive(e, in->len, 0, false);
    ncm_frames_assert_equal(got, in);
    /* one byte over the negotiated size is dropped, counted */
    g_ptr_array_set_size(in, 0);
    ncm_frames_add(in, ncm_mac, 4, 60001);
    ncm_sock_send_frames(e, in);
    ncm_expect_no_rx(e);
    g_assert_cmpuint(stat_now(e, "rx_oversize"), ==, 1);
}

void ncm_add_spec_cases(bool ss)
{
    const char *dl = NCM_DL;
    unsigned i;

    /* one speed is enough for most: the requests do not depend on it */
    if (!ss) {
        ncm_add_case(false, dl, "ncm-spec/input-size-8-byte",
                     test_spec_input_size_8, NULL,
                     "network-capabilities=0x2b");
        ncm_add_case(false, dl, "ncm-spec/crc/both-ways", test_spec_crc, NULL,
                     "network-capabilities=0x1b");
        return;
    }

    ncm_add_case(true, dl, "ncm-spec/input-size-8-byte",
                 test_spec_input_size_8, NULL, "network-capabilities=0x2b");
    ncm_add_case(true, dl, "ncm-spec/multicast/perfect",
                 test_spec_mc_perfect, NULL, "multicast-filters=2");
    ncm_add_case(true, dl, "ncm-spec/multicast/imperfect",
                 test_spec_mc_imperfect, NULL, "multicast-filters=0x8004");
    ncm_add_case(true, dl, "ncm-spec/ethernet-statistics",
                 test_spec_statistics, NULL, "ethernet-statistics=0x1fffd");
    ncm_add_case(true, dl, "ncm-spec/crc/both-ways", test_spec_crc, NULL,
                 "network-capabilities=0x1b");
    ncm_add_case(true, dl, "ncm-spec/crc/malformed", test_spec_crc_malformed,
                 NULL, "network-capabilities=0x1b");
    ncm_add_case(true, dl, "ncm-spec/crc/not-offered",
                 test_spec_crc_not_offered, NULL, NULL);
    ncm_add_case(true, dl, "ncm-spec/max-segment-size-65472",
                 test_spec_max_segment, NULL, "max-segment-size=65472");
    for (i = 0; i < ARRAY_SIZE(spec_profiles); i++) {
        g_autofree char *name = g_strdup_printf("ncm-spec/profile/%s",
                                                spec_profiles[i].name);

        ncm_add_case(true, dl, name, test_spec_profile, &spec_profiles[i],
                     spec_profiles[i].props);
    }
}
