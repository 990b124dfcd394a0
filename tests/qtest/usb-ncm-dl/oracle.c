/*
 * QTest cases oracle/...: the NCM 1.0 / USB ch. 9 oracle (ncm-oracle.c)
 * against hand-made input, without QEMU
 *
 * Good NTBs (from the fixture's builder, which needs no device) and good
 * descriptors must pass; one planted violation per rule must fail, and
 * with the message of that rule, so that each check is seen to fire.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "fixture.h"
#include "ncm-oracle.h"

#define OT_WHY_LEN      256

static const NcmOracleParams ot_p16 = {
    .in_max_size = 16384, .in_divisor = 4, .in_remainder = 0,
    .in_alignment = 4, .max_packet = 512,
};

/* An IN NTB of @n frames as a device following @p builds it */
static GByteArray *ot_ntb(const NcmOracleParams *p, unsigned n, uint16_t seq)
{
    NcmHostLayout l = {
        .ntb32 = p->ntb32,
        .crc = p->crc,
        .ndp_last = true,
        .ndp_alignment = p->in_alignment,
        .divisor = p->in_divisor,
        .remainder = p->in_remainder,
    };
    g_autoptr(GPtrArray) frames = ncm_frames_new();
    unsigned i;

    for (i = 0; i < n; i++) {
        ncm_frames_add(frames, ncm_mac, 100 + i, 60 + 41 * i);
        if (p->crc) {
            ncm_frame_append_crc(g_ptr_array_index(frames, i), false);
        }
    }
    return ncm_ntb_build(&l, frames, seq);
}

static uint32_t ot_ndp(const NcmOracleParams *p, GByteArray *ntb)
{
    return ncm_get_field(ntb->data + (p->ntb32 ? 12 : 10), p->ntb32);
}

/* Entry @i of the first NDP: its index field */
static uint8_t *ot_entry(const NcmOracleParams *p, GByteArray *ntb, int i)
{
    return ntb->data + ot_ndp(p, ntb) + (p->ntb32 ? 16 : 8) +
           i * (p->ntb32 ? 8 : 4);
}

static bool ot_feed(NcmOracle *o, const NcmOracleParams *p,
                    const uint8_t *b, size_t len, size_t requested,
                    char *why)
{
    why[0] = 0;
    return ncm_oracle_in_transfer(o, p, b, len, requested, why, OT_WHY_LEN);
}

static void ot_expect_ok(NcmOracle *o, const NcmOracleParams *p,
                         const uint8_t *b, size_t len, size_t requested)
{
    char why[OT_WHY_LEN];

    if (!ot_feed(o, p, b, len, requested, why)) {
        g_test_message("oracle refused a good transfer: %s", why);
        g_assert_not_reached();
    }
}

static void ot_expect_fail(NcmOracle *o, const NcmOracleParams *p,
                           const uint8_t *b, size_t len, size_t requested,
                           const char *rule)
{
    char why[OT_WHY_LEN];

    if (ot_feed(o, p, b, len, requested, why)) {
        g_test_message("oracle let a violation of '%s' through", rule);
        g_assert_not_reached();
    }
    g_test_message("caught: %s", why);
    if (!strstr(why, rule)) {
        g_test_message("expected the rule '%s' to fire", rule);
        g_assert_not_reached();
    }
}

/* Good streams: every format, several NTBs, split and size-ended ones */
static void test_oracle_good_ntbs(void)
{
    static const NcmOracleParams variants[] = {
        { .in_max_size = 16384, .in_divisor = 4, .in_alignment = 4,
          .max_packet = 512 },
        { .ntb32 = true, .in_max_size = 16384, .in_divisor = 4,
          .in_alignment = 4, .max_packet = 1024 },
        { .crc = true, .in_max_size = 16384, .in_divisor = 4,
          .in_alignment = 4, .max_packet = 512 },
        { .ntb32 = true, .crc = true, .in_max_size = 65536,
          .in_divisor = 8, .in_remainder = 2, .in_alignment = 16,
          .in_max_datagrams = 4, .max_packet = 1024 },
    };
    unsigned v, i;

    for (v = 0; v < ARRAY_SIZE(variants); v++) {
        const NcmOracleParams *p = &variants[v];
        NcmOracle *o = ncm_oracle_new();

        for (i = 0; i < 4; i++) {
            g_autoptr(GByteArray) ntb = ot_ntb(p, 1 + i, i);

            ot_expect_ok(o, p, ntb->data, ntb->len, p->in_max_size);
        }
        ncm_oracle_reset(o);
        {
            g_autoptr(GByteArray) ntb = ot_ntb(p, 2, 0);

            ot_expect_ok(o, p, ntb->data, ntb->len, 65536);
        }
        ncm_oracle_free(o);
    }
}

static void test_oracle_good_framing(void)
{
    NcmOracleParams p = ot_p16;
    NcmOracle *o = ncm_oracle_new();
    g_autoptr(GByteArray) a = ot_ntb(&p, 3, 0);
    g_autoptr(GByteArray) b = ot_ntb(&p, 3, 1);
    g_autoptr(GByteArray) c = NULL;
    g_autoptr(GByteArray) d = NULL;
    size_t off;

    /* an NTB over 512-byte buffers: full ones, then a short one */
    g_byte_array_set_size(a, 1300);
    stw_le_p(a->data + 8, 1300);
    for (off = 0; off + 512 <= a->len; off += 512) {
        ot_expect_ok(o, &p, a->data + off, 512, 512);
    }
    ot_expect_ok(o, &p, a->data + off, a->len - off, 512);

    /* an exact multiple of wMaxPacketSize, ended by a ZLP */
    g_byte_array_set_size(b, 1024);
    stw_le_p(b->data + 8, 1024);
    ot_expect_ok(o, &p, b->data, 1024, 1024);
    ot_expect_ok(o, &p, NULL, 0, 1024);

    /* exactly dwNtbInMaxSize in one full buffer: no ZLP after it */
    p.in_max_size = 2048;
    c = ot_ntb(&p, 2, 2);
    g_byte_array_set_size(c, 2048);
    stw_le_p(c->data + 8, 2048);
    ot_expect_ok(o, &p, c->data, 2048, 2048);

    /* NTB16 wBlockLength 0, ended by a short packet */
    d = ot_ntb(&p, 1, 3);
    stw_le_p(d->data + 8, 0);
    ot_expect_ok(o, &p, d->data, d->len, 2048);

    /* an NTB the host lost (babble): wSequence skips it */
    ncm_oracle_lost(o);
    stw_le_p(d->data + 6, 5);
    ot_expect_ok(o, &p, d->data, d->len, 2048);
    ncm_oracle_reset(o);
    ncm_oracle_lost(o);
    stw_le_p(d->data + 6, 1);
    ot_expect_ok(o, &p, d->data, d->len, 2048);
    ncm_oracle_free(o);
}

/* Two NDPs chained through wNextNdpIndex */
static GByteArray *ot_chained(const NcmOracleParams *p)
{
    GByteArray *ntb = ot_ntb(p, 2, 0);
    uint32_t ndp = ot_ndp(p, ntb), ndp2 = ntb->len;
    uint8_t *e1 = ot_entry(p, ntb, 1);
    uint32_t idx = lduw_le_p(e1), len = lduw_le_p(e1 + 2);

    g_assert(!p->ntb32);
    /* the second datagram moves to a second NDP */
    stw_le_p(e1, 0);
    stw_le_p(e1 + 2, 0);
    g_byte_array_set_size(ntb, ndp2 + 16);
    memset(ntb->data + ndp2, 0, 16);
    stl_le_p(ntb->data + ndp2, NCM_NDP16_NOCRC_SIGNATURE);
    stw_le_p(ntb->data + ndp2 + 4, 16);
    stw_le_p(ntb->data + ndp2 + 8, idx);
    stw_le_p(ntb->data + ndp2 + 10, len);
    stw_le_p(ntb->data + ndp + 6, ndp2);
    stw_le_p(ntb->data + 8, ntb->len);
    return ntb;
}

static void test_oracle_good_chain(void)
{
    NcmOracle *o = ncm_oracle_new();
    g_autoptr(GByteArray) ntb = ot_chained(&ot_p16);

    ot_expect_ok(o, &ot_p16, ntb->data, ntb->len, 16384);
    ncm_oracle_free(o);
}

/* One planted violation per rule */
typedef enum {
    OT_LONGER, OT_SHORT_NTH, OT_NTH_SIG, OT_HDR_LEN, OT_SEQ_FIRST,
    OT_SEQ_SKIP, OT_BLOCK_LEN, OT_BLOCK0_FULL, OT_BLOCK0_MAX, OT_BLOCK0_32,
    OT_NTB16_64K, OT_OVER_MAX, OT_NDP_IN_NTH, OT_NDP_MOD4, OT_NDP_ALIGN,
    OT_NDP_PAST, OT_NDP_SIG, OT_NDP_CRC_OFF, OT_NDP_NOCRC_ON, OT_NDP_LEN_MIN,
    OT_NDP_LEN_MOD, OT_NDP_LEN_PAST, OT_NDP32_RSVD, OT_NDP_LOOP,
    OT_ENTRY_HALF, OT_DG_IN_NTH, OT_DG_PAST, OT_DG_SHORT, OT_DG_ALIGN,
    OT_DG_CRC, OT_NO_TERM, OT_DG_OVER_NDP, OT_MAX_DG, OT_ZLP_ALONE,
    OT_ZLP_AFTER_MAX, OT_NO_ZLP,
} OtBad;

typedef struct OtBadCase {
    const char *name;
    OtBad bad;
    const char *rule;           /* what the message must say */
} OtBadCase;

static const OtBadCase ot_bad[] = {
    { "longer-than-buffer", OT_LONGER, "-byte buffer" },
    { "shorter-than-nth", OT_SHORT_NTH, "shorter than its NTH" },
    { "nth-signature", OT_NTH_SIG, "NTH dwSignature" },
    { "nth-header-length", OT_HDR_LEN, "wHeaderLength" },
    { "sequence-first", OT_SEQ_FIRST, "first NTB after a function reset" },
    { "sequence-skip", OT_SEQ_SKIP, "wSequence 2 after 0" },
    { "block-length", OT_BLOCK_LEN, "wBlockLength 100 but" },
    { "block-length-0-no-short", OT_BLOCK0_FULL,
      "not ended by a short packet" },
    { "block-length-0-max", OT_BLOCK0_MAX, "not shorter than dwNtbInMaxSize" },
    { "block-length-0-ntb32", OT_BLOCK0_32, "dwBlockLength 0 but" },
    { "ntb16-over-64k", OT_NTB16_64K, "exceeds 64 KiB" },
    { "over-in-max-size", OT_OVER_MAX, "past dwNtbInMaxSize" },
    { "ndp-inside-nth", OT_NDP_IN_NTH, "inside the NTH" },
    { "ndp-not-mod4", OT_NDP_MOD4, "not a multiple of 4" },
    { "ndp-alignment", OT_NDP_ALIGN, "wNdpInAlignment" },
    { "ndp-past-block", OT_NDP_PAST, "runs past" },
    { "ndp-signature", OT_NDP_SIG, "not an NDP16 signature" },
    { "ndp-crc-signature-crc-off", OT_NDP_CRC_OFF, "CRC mode is off" },
    { "ndp-nocrc-signature-crc-on", OT_NDP_NOCRC_ON, "CRC mode is on" },
    { "ndp-length-min", OT_NDP_LEN_MIN, "wLength 12 < 16" },
    { "ndp-length-multiple", OT_NDP_LEN_MOD, "not a multiple of 4" },
    { "ndp-length-past-block", OT_NDP_LEN_PAST, ") runs past the" },
    { "ndp32-reserved", OT_NDP32_RSVD, "reserved fields" },
    { "ndp-chain-loop", OT_NDP_LOOP, "chain loop" },
    { "entry-half-zero", OT_ENTRY_HALF, "only 0/0 ends the list" },
    { "datagram-inside-nth", OT_DG_IN_NTH, "inside the NTH" },
    { "datagram-past-block", OT_DG_PAST, "runs past the" },
    { "datagram-too-short", OT_DG_SHORT, "shorter than an Ethernet header" },
    { "datagram-alignment", OT_DG_ALIGN, "wNdpInPayloadRemainder" },
    { "datagram-crc", OT_DG_CRC, "CRC-32" },
    { "no-terminator", OT_NO_TERM, "no 0/0 terminator" },
    { "datagram-overlaps-ndp", OT_DG_OVER_NDP, "overlaps NDP" },
    { "too-many-datagrams", OT_MAX_DG, "wNtbInMaxDatagrams" },
    { "zlp-alone", OT_ZLP_ALONE, "no NTB to end" },
    { "zlp-after-max-size", OT_ZLP_AFTER_MAX, "no NTB to end" },
    { "missing-zlp", OT_NO_ZLP, "but the transfer carried" },
};

static void test_oracle_bad_ntb(const void *data)
{
    const OtBadCase *c = data;
    NcmOracleParams p = ot_p16;
    NcmOracle *o = ncm_oracle_new();
    g_autoptr(GByteArray) ntb = NULL;
    size_t requested = 16384;
    uint32_t ndp;

    switch (c->bad) {
    case OT_NDP32_RSVD:
        p.ntb32 = true;
        break;
    case OT_NDP_NOCRC_ON:
    case OT_DG_CRC:
        p.crc = true;
        break;
    case OT_NDP_ALIGN:
        p.in_alignment = 16;
        break;
    case OT_MAX_DG:
        p.in_max_datagrams = 2;
        break;
    default:
        break;
    }
    ntb = (c->bad == OT_NDP_LOOP) ? ot_chained(&p) : ot_ntb(&p, 3, 0);
    ndp = ot_ndp(&p, ntb);

    switch (c->bad) {
    case OT_LONGER:
        requested = ntb->len - 1;
        ot_expect_fail(o, &p, ntb->data, ntb->len, requested, c->rule);
        goto out;
    case OT_SHORT_NTH:
        ot_expect_fail(o, &p, ntb->data, 10, requested, c->rule);
        goto out;
    case OT_NTH_SIG:
        ntb->data[3] = 'h';
        break;
    case OT_HDR_LEN:
        stw_le_p(ntb->data + 4, 16);
        break;
    case OT_SEQ_FIRST:
        stw_le_p(ntb->data + 6, 5);
        break;
    case OT_SEQ_SKIP:
        ot_expect_ok(o, &p, ntb->data, ntb->len, requested);
        stw_le_p(ntb->data + 6, 2);
        break;
    case OT_BLOCK_LEN:
        stw_le_p(ntb->data + 8, 100);
        break;
    case OT_BLOCK0_FULL:
        /* a full 1024-byte buffer, then a ZLP: ended, but not short */
        p.in_max_size = 1024;
        g_byte_array_set_size(ntb, 1024);
        stw_le_p(ntb->data + 8, 0);
        ot_expect_fail(o, &p, ntb->data, 1024, 1024, c->rule);
        goto out;
    case OT_BLOCK0_MAX:
        /* a short transfer of exactly dwNtbInMaxSize bytes */
        p.in_max_size = 1000;
        g_byte_array_set_size(ntb, 1000);
        stw_le_p(ntb->data + 8, 0);
        ot_expect_fail(o, &p, ntb->data, 1000, 4096, c->rule);
        goto out;
    case OT_BLOCK0_32:
        p.ntb32 = true;
        g_byte_array_unref(ntb);
        ntb = ot_ntb(&p, 2, 0);
        stl_le_p(ntb->data + 8, 0);
        break;
    case OT_NTB16_64K:
        p.in_max_size = 0;
        g_byte_array_set_size(ntb, 70000);
        stw_le_p(ntb->data + 8, 0);
        ot_expect_fail(o, &p, ntb->data, 70000, 70004, c->rule);
        goto out;
    case OT_OVER_MAX:
        p.in_max_size = 2048;
        g_byte_array_set_size(ntb, 4096);
        ot_expect_ok(o, &p, ntb->data, 2048 - 512, 2048 - 512);
        ot_expect_fail(o, &p, ntb->data + 1536, 1024, 1024, c->rule);
        goto out;
    case OT_NDP_IN_NTH:
        stw_le_p(ntb->data + 10, 8);
        break;
    case OT_NDP_MOD4:
        stw_le_p(ntb->data + 10, ndp + 2);
        break;
    case OT_NDP_ALIGN:
        /* 4 bytes of padding move the NDP off its 16-byte boundary */
        g_byte_array_set_size(ntb, ntb->len + 4);
        memmove(ntb->data + ndp + 4, ntb->data + ndp, ntb->len - 4 - ndp);
        memset(ntb->data + ndp, 0, 4);
        stw_le_p(ntb->data + 10, ndp + 4);
        stw_le_p(ntb->data + 8, ntb->len);
        break;
    case OT_NDP_PAST:
        stw_le_p(ntb->data + 10, ntb->len - 4);
        break;
    case OT_NDP_SIG:
        ntb->data[ndp + 3] = '7';
        break;
    case OT_NDP_CRC_OFF:
        stl_le_p(ntb->data + ndp, NCM_NDP16_CRC_SIGNATURE);
        break;
    case OT_NDP_NOCRC_ON:
        stl_le_p(ntb->data + ndp, NCM_NDP16_NOCRC_SIGNATURE);
        break;
    case OT_NDP_LEN_MIN:
        stw_le_p(ntb->data + ndp + 4, 12);
        break;
    case OT_NDP_LEN_MOD:
        stw_le_p(ntb->data + ndp + 4, lduw_le_p(ntb->data + ndp + 4) + 2);
        break;
    case OT_NDP_LEN_PAST:
        stw_le_p(ntb->data + ndp + 4, lduw_le_p(ntb->data + ndp + 4) + 8);
        break;
    case OT_NDP32_RSVD:
        stl_le_p(ntb->data + ndp + 12, 1);
        break;
    case OT_NDP_LOOP: {
        uint32_t ndp2 = lduw_le_p(ntb->data + ndp + 6);

        stw_le_p(ntb->data + ndp2 + 6, ndp);
        break;
    }
    case OT_ENTRY_HALF:
        stw_le_p(ot_entry(&p, ntb, 1) + 2, 0);
        break;
    case OT_DG_IN_NTH:
        stw_le_p(ot_entry(&p, ntb, 0), 4);
        break;
    case OT_DG_PAST:
        stw_le_p(ot_entry(&p, ntb, 2) + 2, ntb->len);
        break;
    case OT_DG_SHORT:
        stw_le_p(ot_entry(&p, ntb, 1) + 2, 13);
        break;
    case OT_DG_ALIGN:
        stw_le_p(ot_entry(&p, ntb, 1), lduw_le_p(ot_entry(&p, ntb, 1)) + 1);
        break;
    case OT_DG_CRC:
        ntb->data[lduw_le_p(ot_entry(&p, ntb, 0)) + 20] ^= 1;
        break;
    case OT_NO_TERM:
        /* the 0/0 entry becomes a datagram; wLength ends right after it */
        stw_le_p(ot_entry(&p, ntb, 3), lduw_le_p(ot_entry(&p, ntb, 0)));
        stw_le_p(ot_entry(&p, ntb, 3) + 2, 20);
        stw_le_p(ntb->data + ndp + 4, 8 + 4 * 4);
        break;
    case OT_DG_OVER_NDP:
        stw_le_p(ot_entry(&p, ntb, 2), ndp - 4);
        stw_le_p(ot_entry(&p, ntb, 2) + 2, 16);
        break;
    case OT_MAX_DG:
        break;
    case OT_ZLP_ALONE:
        ot_expect_fail(o, &p, NULL, 0, 512, c->rule);
        goto out;
    case OT_ZLP_AFTER_MAX:
        p.in_max_size = 2048;
        g_byte_array_set_size(ntb, 2048);
        stw_le_p(ntb->data + 8, 2048);
        ot_expect_ok(o, &p, ntb->data, 2048, 2048);
        ot_expect_fail(o, &p, NULL, 0, 2048, c->rule);
        goto out;
    case OT_NO_ZLP: {
        /* a 1024-byte NTB fills its buffer; the next NTB comes at once */
        g_autoptr(GByteArray) next = ot_ntb(&p, 1, 1);

        g_byte_array_set_size(ntb, 1024);
        stw_le_p(ntb->data + 8, 1024);
        ot_expect_ok(o, &p, ntb->data, 1024, 1024);
        ot_expect_fail(o, &p, next->data, next->len, 1024, c->rule);
        goto out;
    }
    }
    ot_expect_fail(o, &p, ntb->data, ntb->len, requested, c->rule);
out:
    ncm_oracle_free(o);
}

/* Descriptors: a device like the NCM reference, at high and super speed */

static const uint8_t ot_dev_hs[18] = {
    18, 1, 0x00, 0x02, 0, 0, 0, 64, 0xe9, 0x17, 0x01, 0x60, 0, 1,
    1, 2, 3, 1,
};

static const uint8_t ot_dev_ss[18] = {
    18, 1, 0x20, 0x03, 0, 0, 0, 9, 0xe9, 0x17, 0x01, 0x60, 0, 1,
    1, 2, 3, 1,
};

/* Configuration: IAD, comm interface + CDC descriptors, data alt 0 and 1 */
static GByteArray *ot_config(bool ss)
{
    static const uint8_t head[] = {
        9, 2, 0, 0, 2, 1, 0, 0x80, 50,
        8, 0x0b, 0, 2, CDC_CLASS_COMM, CDC_SUBCLASS_NCM, 0, 0,
        9, 4, 0, 0, 1, CDC_CLASS_COMM, CDC_SUBCLASS_NCM, 0, 0,
        5, CDC_CS_INTERFACE, CDC_DESC_HEADER, 0x20, 0x01,
        5, CDC_CS_INTERFACE, CDC_DESC_UNION, 0, 1,
        13, CDC_CS_INTERFACE, CDC_DESC_ETHERNET, 4, 0, 0, 0, 0,
        0xea, 0x05, 0, 0, 0,
        6, CDC_CS_INTERFACE, CDC_DESC_NCM, 0x00, 0x01, 0x13,
    };
    static const uint8_t data0[] = {
        9, 4, 1, 0, 0, CDC_CLASS_DATA, 0, CDC_PROTO_NTB, 0,
    };
    static const uint8_t data1[] = {
        9, 4, 1, 1, 2, CDC_CLASS_DATA, 0, CDC_PROTO_NTB, 0,
    };
    GByteArray *c = g_byte_array_new();
    uint16_t bulk = ss ? 1024 : 512;
    uint8_t ep[7], comp[6] = { 6, 0x30, 0, 0, 0, 0 };

    g_byte_array_append(c, head, sizeof(head));
    ep[0] = 7;
    ep[1] = 5;
    ep[2] = 0x81;
    ep[3] = 3;
    stw_le_p(ep + 4, 16);
    ep[6] = ss ? 8 : 9;
    g_byte_array_append(c, ep, 7);
    if (ss) {
        stw_le_p(comp + 4, 16);
        g_byte_array_append(c, comp, 6);
    }
    g_byte_array_append(c, data0, sizeof(data0));
    g_byte_array_append(c, data1, sizeof(data1));
    ep[2] = 0x82;
    ep[3] = 2;
    stw_le_p(ep + 4, bulk);
    ep[6] = 0;
    g_byte_array_append(c, ep, 7);
    if (ss) {
        comp[2] = 15;
        stw_le_p(comp + 4, 0);
        g_byte_array_append(c, comp, 6);
    }
    ep[2] = 0x03;
    g_byte_array_append(c, ep, 7);
    if (ss) {
        g_byte_array_append(c, comp, 6);
    }
    stw_le_p(c->data + 2, c->len);
    return c;
}

static const uint8_t ot_bos[] = {
    5, 0x0f, 22, 0, 2,
    7, 0x10, 2, 0x02, 0, 0, 0,
    10, 0x10, 3, 0, 0x0e, 0, 1, 10, 0xff, 0x07,
};

static GByteArray *ot_string(const char *s)
{
    GByteArray *b = g_byte_array_new();
    uint8_t h[2] = { 2 + 2 * strlen(s), 3 };

    g_byte_array_append(b, h, 2);
    for (; *s; s++) {
        uint8_t u[2] = { *s, 0 };

        g_byte_array_append(b, u, 2);
    }
    return b;
}

static bool ot_desc(uint8_t type, uint8_t index, uint16_t wlength,
                    const uint8_t *b, size_t len, char *why)
{
    why[0] = 0;
    return ncm_oracle_descriptor(type, index, wlength, b, len, why,
                                 OT_WHY_LEN);
}

static void ot_desc_ok(uint8_t type, uint8_t index, uint16_t wlength,
                       const uint8_t *b, size_t len)
{
    char why[OT_WHY_LEN];

    if (!ot_desc(type, index, wlength, b, len, why)) {
        g_test_message("oracle refused descriptor %u/%u: %s", type, index,
                       why);
        g_assert_not_reached();
    }
}

static void ot_desc_fail(uint8_t type, uint8_t index, uint16_t wlength,
                         const uint8_t *b, size_t len, const char *rule)
{
    char why[OT_WHY_LEN];

    if (ot_desc(type, index, wlength, b, len, why)) {
        g_test_message("oracle let descriptor %u/%u through ('%s')", type,
                       index, rule);
        g_assert_not_reached();
    }
    g_test_message("caught: %s", why);
    if (!strstr(why, rule)) {
        g_test_message("expected the rule '%s' to fire", rule);
        g_assert_not_reached();
    }
}

static void ot_good_device(bool ss)
{
    g_autoptr(GByteArray) cfg = ot_config(ss);
    g_autoptr(GByteArray) mac = ot_string(NCM_MAC_HEX);
    g_autoptr(GByteArray) prod = ot_string("NCM");
    static const uint8_t langs[] = { 4, 3, 0x09, 0x04 };

    ot_desc_ok(1, 0, 18, ss ? ot_dev_ss : ot_dev_hs, 18);
    ot_desc_ok(1, 0, 8, ss ? ot_dev_ss : ot_dev_hs, 8);
    ot_desc_ok(2, 0, 9, cfg->data, 9);
    ot_desc_ok(2, 0, 0xffff, cfg->data, cfg->len);
    ot_desc_ok(3, 0, 255, langs, sizeof(langs));
    ot_desc_ok(3, 4, 255, mac->data, mac->len);
    ot_desc_ok(3, 2, 255, prod->data, prod->len);
    ot_desc_ok(3, 4, 2, mac->data, 2);
    if (ss) {
        ot_desc_ok(0x0f, 0, 5, ot_bos, 5);
        ot_desc_ok(0x0f, 0, 255, ot_bos, sizeof(ot_bos));
    }
}

static void test_oracle_good_descriptors(void)
{
    ot_good_device(false);
    ot_good_device(true);
    ot_good_device(false);
}

typedef enum {
    OD_LONGER, OD_TYPE, OD_SHORT_REPLY, OD_TOTAL_LONG, OD_TOTAL_SHORT,
    OD_DEV_LEN, OD_EP0_SIZE, OD_CFG_ATTR, OD_CFG_VALUE, OD_NUM_EPS,
    OD_NUM_IFS, OD_HS_BULK, OD_SS_BULK, OD_NO_COMPANION, OD_HS_COMPANION,
    OD_NO_HEADER, OD_NCM_VERSION, OD_UNION_CTRL, OD_UNION_SUB, OD_ETH_LEN,
    OD_ETH_MAC0, OD_NO_NCM_DESC, OD_DATA_ALT1, OD_DATA_PROTO, OD_IAD,
    OD_EP_ADDR, OD_INT_IVAL, OD_MAC_HEX, OD_MAC_LEN, OD_STR_ODD,
    OD_LANG_SHORT, OD_LANG_ZERO, OD_SURROGATE, OD_BOS_NUM, OD_BOS_NO_SS,
} OdBad;

typedef struct OdBadCase {
    const char *name;
    OdBad bad;
    const char *rule;
} OdBadCase;

static const OdBadCase od_bad[] = {
    { "longer-than-wlength", OD_LONGER, "for wLength" },
    { "descriptor-type", OD_TYPE, "for a request of type" },
    { "short-reply", OD_SHORT_REPLY, "expected min(wLength" },
    { "total-length-over", OD_TOTAL_LONG, "runs past wTotalLength" },
    { "total-length-under", OD_TOTAL_SHORT, "expected min(wLength" },
    { "device-blength", OD_DEV_LEN, "device descriptor bLength" },
    { "ep0-size", OD_EP0_SIZE, "bMaxPacketSize0" },
    { "config-attributes", OD_CFG_ATTR, "bmAttributes" },
    { "config-value", OD_CFG_VALUE, "bConfigurationValue 0" },
    { "num-endpoints", OD_NUM_EPS, "bNumEndpoints" },
    { "num-interfaces", OD_NUM_IFS, "bNumInterfaces" },
    { "hs-bulk-size", OD_HS_BULK, "not 8/16/32/64" },
    { "ss-bulk-size", OD_SS_BULK, "not 1024" },
    { "ss-no-companion", OD_NO_COMPANION, "without its companion" },
    { "hs-companion", OD_HS_COMPANION, "companion in a bcdUSB" },
    { "cdc-no-header", OD_NO_HEADER, "before the header" },
    { "ncm-version", OD_NCM_VERSION, "bcdNcmVersion" },
    { "union-control", OD_UNION_CTRL, "bControlInterface" },
    { "union-subordinate", OD_UNION_SUB, "which is not there" },
    { "ethernet-blength", OD_ETH_LEN, "Ethernet networking descriptor bLe" },
    { "ethernet-mac-index", OD_ETH_MAC0, "iMACAddress 0" },
    { "no-ncm-descriptor", OD_NO_NCM_DESC, "lacks a NCM" },
    { "data-alt1-endpoints", OD_DATA_ALT1, "not one bulk IN" },
    { "data-protocol", OD_DATA_PROTO, "not NTB" },
    { "iad-interfaces", OD_IAD, "IAD covers interface" },
    { "endpoint-address", OD_EP_ADDR, "bEndpointAddress" },
    { "interrupt-interval", OD_INT_IVAL, "bInterval 0" },
    { "mac-string-hex", OD_MAC_HEX, "not a hex digit" },
    { "mac-string-length", OD_MAC_LEN, "not 12" },
    { "string-odd", OD_STR_ODD, "is odd" },
    { "langid-short", OD_LANG_SHORT, "bLength 2 < 4" },
    { "langid-zero", OD_LANG_ZERO, "LANGID 0" },
    { "utf16-surrogate", OD_SURROGATE, "surrogate" },
    { "bos-num-caps", OD_BOS_NUM, "bNumDeviceCaps" },
    { "bos-no-ss-cap", OD_BOS_NO_SS, "SuperSpeed USB capability" },
};

/* Offset of the @n-th descriptor of type @type (and CDC @sub) in @c */
static size_t od_find(GByteArray *c, uint8_t type, int sub, int n)
{
    size_t pos;

    for (pos = 0; pos < c->len; pos += c->data[pos]) {
        if (c->data[pos + 1] == type &&
            (sub < 0 || c->data[pos + 2] == sub) && n-- == 0) {
            return pos;
        }
    }
    g_assert_not_reached();
}

static void od_remove(GByteArray *c, size_t pos)
{
    g_byte_array_remove_range(c, pos, c->data[pos]);
    stw_le_p(c->data + 2, c->len);
}

static void test_oracle_bad_descriptor(const void *data)
{
    const OdBadCase *t = data;
    bool ss = t->bad == OD_SS_BULK || t->bad == OD_NO_COMPANION ||
              t->bad == OD_BOS_NUM || t->bad == OD_BOS_NO_SS;
    g_autoptr(GByteArray) cfg = ot_config(ss);
    g_autoptr(GByteArray) dev = g_byte_array_new();
    g_autoptr(GByteArray) bos = g_byte_array_new();
    g_autoptr(GByteArray) str = ot_string(NCM_MAC_HEX);
    uint8_t type = 2, index = 0;
    GByteArray *d = cfg;
    uint16_t wlength = 0xffff;
    size_t len, pos;

    g_byte_array_append(dev, ss ? ot_dev_ss : ot_dev_hs, 18);
    g_byte_array_append(bos, ot_bos, sizeof(ot_bos));
    /* the oracle learns the speed and the MAC string from these two */
    ot_desc_ok(1, 0, 18, dev->data, dev->len);
    {
        g_autoptr(GByteArray) good = ot_config(ss);

        ot_desc_ok(2, 0, good->len, good->data, good->len);
    }

    switch (t->bad) {
    case OD_LONGER:
        wlength = cfg->len - 1;
        break;
    case OD_TYPE:
        type = 7;
        break;
    case OD_SHORT_REPLY:
        type = 1;
        d = dev;
        dev->data[0] = 18;
        g_byte_array_set_size(dev, 12);
        break;
    case OD_TOTAL_LONG:
        g_byte_array_set_size(cfg, cfg->len - 3);
        stw_le_p(cfg->data + 2, cfg->len);
        break;
    case OD_TOTAL_SHORT:
        stw_le_p(cfg->data + 2, cfg->len + 7);
        break;
    case OD_DEV_LEN:
        type = 1;
        d = dev;
        dev->data[0] = 17;
        g_byte_array_set_size(dev, 17);
        break;
    case OD_EP0_SIZE:
        type = 1;
        d = dev;
        dev->data[7] = 48;
        break;
    case OD_CFG_ATTR:
        cfg->data[7] = 0x40;
        break;
    case OD_CFG_VALUE:
        cfg->data[5] = 0;
        break;
    case OD_NUM_EPS:
        cfg->data[od_find(cfg, 4, -1, 2) + 4] = 3;
        break;
    case OD_NUM_IFS:
        cfg->data[4] = 3;
        break;
    case OD_HS_BULK:
        stw_le_p(cfg->data + od_find(cfg, 5, -1, 1) + 4, 256);
        break;
    case OD_SS_BULK:
        stw_le_p(cfg->data + od_find(cfg, 5, -1, 1) + 4, 512);
        break;
    case OD_NO_COMPANION:
        od_remove(cfg, od_find(cfg, 0x30, -1, 2));
        break;
    case OD_HS_COMPANION: {
        uint8_t comp[6] = { 6, 0x30, 0, 0, 0, 0 };

        g_byte_array_append(cfg, comp, 6);
        stw_le_p(cfg->data + 2, cfg->len);
        break;
    }
    case OD_NO_HEADER: {
        /* the union (5 bytes) before the header (5 bytes) */
        uint8_t tmp[5];

        pos = od_find(cfg, CDC_CS_INTERFACE, CDC_DESC_HEADER, 0);
        memcpy(tmp, cfg->data + pos, 5);
        memmove(cfg->data + pos, cfg->data + pos + 5, 5);
        memcpy(cfg->data + pos + 5, tmp, 5);
        break;
    }
    case OD_NCM_VERSION:
        stw_le_p(cfg->data + od_find(cfg, CDC_CS_INTERFACE, CDC_DESC_NCM, 0) +
                 3, 0x0110);
        break;
    case OD_UNION_CTRL:
        cfg->data[od_find(cfg, CDC_CS_INTERFACE, CDC_DESC_UNION, 0) + 3] = 1;
        break;
    case OD_UNION_SUB:
        cfg->data[od_find(cfg, CDC_CS_INTERFACE, CDC_DESC_UNION, 0) + 4] = 5;
        break;
    case OD_ETH_LEN:
        pos = od_find(cfg, CDC_CS_INTERFACE, CDC_DESC_ETHERNET, 0);
        cfg->data[pos] = 12;
        g_byte_array_remove_index(cfg, pos + 12);
        stw_le_p(cfg->data + 2, cfg->len);
        break;
    case OD_ETH_MAC0:
        cfg->data[od_find(cfg, CDC_CS_INTERFACE, CDC_DESC_ETHERNET, 0) + 3] =
            0;
        break;
    case OD_NO_NCM_DESC:
        od_remove(cfg, od_find(cfg, CDC_CS_INTERFACE, CDC_DESC_NCM, 0));
        break;
    case OD_DATA_ALT1:
        od_remove(cfg, od_find(cfg, 5, -1, 2));
        cfg->data[od_find(cfg, 4, -1, 2) + 4] = 1;
        break;
    case OD_DATA_PROTO:
        cfg->data[od_find(cfg, 4, -1, 2) + 7] = 0;
        break;
    case OD_IAD:
        cfg->data[od_find(cfg, 0x0b, -1, 0) + 3] = 3;
        break;
    case OD_EP_ADDR:
        cfg->data[od_find(cfg, 5, -1, 1) + 2] = 0x92;
        break;
    case OD_INT_IVAL:
        cfg->data[od_find(cfg, 5, -1, 0) + 6] = 0;
        break;
    case OD_MAC_HEX:
        type = 3;
        index = 4;
        d = str;
        str->data[2 + 2 * 5] = 'g';
        break;
    case OD_MAC_LEN:
        type = 3;
        index = 4;
        d = str;
        g_byte_array_set_size(str, str->len - 2);
        str->data[0] = str->len;
        break;
    case OD_STR_ODD:
        type = 3;
        index = 2;
        d = str;
        g_byte_array_set_size(str, str->len - 1);
        str->data[0] = str->len;
        break;
    case OD_LANG_SHORT:
        type = 3;
        d = str;
        g_byte_array_set_size(str, 2);
        str->data[0] = 2;
        break;
    case OD_LANG_ZERO:
        type = 3;
        d = str;
        g_byte_array_set_size(str, 6);
        str->data[0] = 6;
        stw_le_p(str->data + 2, 0x0409);
        stw_le_p(str->data + 4, 0);
        break;
    case OD_SURROGATE:
        type = 3;
        index = 2;
        d = str;
        stw_le_p(str->data + 6, 0xd801);
        break;
    case OD_BOS_NUM:
        type = 0x0f;
        d = bos;
        bos->data[4] = 3;
        break;
    case OD_BOS_NO_SS:
        type = 0x0f;
        d = bos;
        g_byte_array_set_size(bos, 12);
        stw_le_p(bos->data + 2, 12);
        bos->data[4] = 1;
        break;
    }
    len = MIN(d->len, wlength);
    if (t->bad == OD_LONGER) {
        len = d->len;
    }
    ot_desc_fail(type, index, wlength, d->data, len, t->rule);
}

void ncm_add_oracle_cases(void)
{
    unsigned i;

    qtest_add_func("/usb-ncm-dl/oracle/ntb/good", test_oracle_good_ntbs);
    qtest_add_func("/usb-ncm-dl/oracle/ntb/good-framing",
                   test_oracle_good_framing);
    qtest_add_func("/usb-ncm-dl/oracle/ntb/good-chain",
                   test_oracle_good_chain);
    for (i = 0; i < ARRAY_SIZE(ot_bad); i++) {
        g_autofree char *path = g_strdup_printf("/usb-ncm-dl/oracle/ntb/bad/%s",
                                                ot_bad[i].name);

        qtest_add_data_func(path, &ot_bad[i], test_oracle_bad_ntb);
    }
    qtest_add_func("/usb-ncm-dl/oracle/descriptor/good",
                   test_oracle_good_descriptors);
    for (i = 0; i < ARRAY_SIZE(od_bad); i++) {
        g_autofree char *path =
            g_strdup_printf("/usb-ncm-dl/oracle/descriptor/bad/%s",
                            od_bad[i].name);

        qtest_add_data_func(path, &od_bad[i], test_oracle_bad_descriptor);
    }
}
