/*
 * Unit tests for the USB CDC-NCM NTB16/NTB32 codec
 *
 * Every NTB the parser is fed here is either a hand-written byte array or
 * the output of a small writer in this file that pokes fields at the
 * offsets of NCM 1.0 section 3; none comes from ncm_ntb_builder_*(), so a
 * builder bug cannot hide a parser bug.  The builder is checked against
 * hand-written arrays and against a model of its documented layout, then
 * by parsing what it built.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include <glib.h>
#include "hw/usb/ncm-ntb.h"
/* the host side the qtests and fuzz targets use, bit by bit */
#include "../qtest/libqos/ncm-host.h"

/* Scratch view: 8 KiB is too much for every test's stack frame. */
static NcmNtbView view;

/* Field writers independent of the codec and of QEMU's bswap helpers. */
static void put8(uint8_t *buf, uint32_t off, uint32_t v)
{
    buf[off] = v;
}

static void put16(uint8_t *buf, uint32_t off, uint32_t v)
{
    buf[off] = v;
    buf[off + 1] = v >> 8;
}

static void put32(uint8_t *buf, uint32_t off, uint32_t v)
{
    buf[off] = v;
    buf[off + 1] = v >> 8;
    buf[off + 2] = v >> 16;
    buf[off + 3] = v >> 24;
}

static uint32_t get16(const uint8_t *buf, uint32_t off)
{
    return buf[off] | (buf[off + 1] << 8);
}

static uint32_t get32(const uint8_t *buf, uint32_t off)
{
    return get16(buf, off) | ((uint32_t)get16(buf, off + 2) << 16);
}

static void put_sig(uint8_t *buf, uint32_t off, const char *sig)
{
    memcpy(buf + off, sig, 4);
}

/* Recognisable datagram contents: frame @i of a test, byte @j. */
static uint8_t frame_byte(unsigned seed, unsigned i, unsigned j)
{
    return (uint8_t)(seed * 131 + i * 37 + j * 7 + (j >> 8));
}

static void fill_frame(uint8_t *p, unsigned seed, unsigned i, uint32_t len)
{
    uint32_t j;

    for (j = 0; j < len; j++) {
        p[j] = frame_byte(seed, i, j);
    }
}

static void assert_frame(const uint8_t *p, unsigned seed, unsigned i,
                         uint32_t len)
{
    uint32_t j;

    for (j = 0; j < len; j++) {
        if (p[j] != frame_byte(seed, i, j)) {
            g_test_message("frame %u byte %u: got 0x%02x want 0x%02x",
                           i, j, p[j], frame_byte(seed, i, j));
            g_assert_cmphex(p[j], ==, frame_byte(seed, i, j));
        }
    }
}

/* Collects what ncm_transfer_parse() hands out, checking it is in bounds. */
typedef struct Sink {
    const uint8_t *buf;
    size_t len;
    unsigned n;
    uint32_t off[4 * NCM_MAX_DATAGRAMS];
    uint32_t dlen[4 * NCM_MAX_DATAGRAMS];
} Sink;

static Sink sink;

static void sink_reset(const uint8_t *buf, size_t len)
{
    sink.buf = buf;
    sink.len = len;
    sink.n = 0;
}

static void sink_emit(void *opaque, const uint8_t *data, size_t len)
{
    Sink *s = opaque;

    g_assert_true(data >= s->buf);
    g_assert_cmpuint(len, <=, s->len);
    g_assert_cmpuint(data - s->buf, <=, s->len - len);
    g_assert_cmpuint(s->n, <, G_N_ELEMENTS(s->off));
    s->off[s->n] = data - s->buf;
    s->dlen[s->n] = len;
    s->n++;
}

static NcmParseError transfer(const NcmNtbFormat *fmt, const uint8_t *buf,
                              size_t len, const NcmParseLimits *limits,
                              unsigned *ntbs)
{
    sink_reset(buf, len);
    *ntbs = 12345;
    return ncm_transfer_parse(fmt, buf, len, limits, &view, sink_emit, &sink,
                              ntbs);
}

static const NcmParseLimits limits_1514 = {
    .max_ntb_len = 65536,
    .max_datagram_len = 1514,
};

/*
 * Golden vectors: parsing
 */

/* NTH16 + NDP16 at 12 (one entry + null entry) + a 14-byte ARP header. */
static const uint8_t golden_ntb16_min[42] = {
    0x4e, 0x43, 0x4d, 0x48,     /*  0 dwSignature "NCMH" */
    0x0c, 0x00,                 /*  4 wHeaderLength 12 */
    0x01, 0x00,                 /*  6 wSequence 1 */
    0x2a, 0x00,                 /*  8 wBlockLength 42 */
    0x0c, 0x00,                 /* 10 wNdpIndex 12 */
    0x4e, 0x43, 0x4d, 0x30,     /* 12 dwSignature "NCM0" */
    0x10, 0x00,                 /* 16 wLength 16 */
    0x00, 0x00,                 /* 18 wNextNdpIndex 0 */
    0x1c, 0x00, 0x0e, 0x00,     /* 20 datagram 28, 14 bytes */
    0x00, 0x00, 0x00, 0x00,     /* 24 null entry */
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff,     /* 28 destination */
    0x52, 0x54, 0x00, 0x12, 0x34, 0x56,     /* 34 source */
    0x08, 0x06,                             /* 40 ethertype ARP */
};

/* NTH32 + NDP32 at 16 (one entry + null entry) + the same header. */
static const uint8_t golden_ntb32_min[62] = {
    0x6e, 0x63, 0x6d, 0x68,     /*  0 dwSignature "ncmh" */
    0x10, 0x00,                 /*  4 wHeaderLength 16 */
    0x01, 0x00,                 /*  6 wSequence 1 */
    0x3e, 0x00, 0x00, 0x00,     /*  8 dwBlockLength 62 */
    0x10, 0x00, 0x00, 0x00,     /* 12 dwNdpIndex 16 */
    0x6e, 0x63, 0x6d, 0x30,     /* 16 dwSignature "ncm0" */
    0x20, 0x00,                 /* 20 wLength 32 */
    0x00, 0x00,                 /* 22 wReserved6 */
    0x00, 0x00, 0x00, 0x00,     /* 24 dwNextNdpIndex 0 */
    0x00, 0x00, 0x00, 0x00,     /* 28 dwReserved12 */
    0x30, 0x00, 0x00, 0x00,     /* 32 dwDatagramIndex 48 */
    0x0e, 0x00, 0x00, 0x00,     /* 36 dwDatagramLength 14 */
    0x00, 0x00, 0x00, 0x00,     /* 40 null entry */
    0x00, 0x00, 0x00, 0x00,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff,     /* 48 destination */
    0x52, 0x54, 0x00, 0x12, 0x34, 0x56,     /* 54 source */
    0x08, 0x06,                             /* 60 ethertype ARP */
};

static void check_min_parse(const NcmNtbFormat *fmt, const uint8_t *ntb,
                            size_t len, uint32_t dg_off)
{
    unsigned ntbs;

    g_assert_cmpint(ncm_ntb_parse_one(fmt, ntb, len, &limits_1514, &view),
                    ==, NCM_PARSE_OK);
    g_assert_cmpuint(view.block_len, ==, len);
    g_assert_cmpuint(view.sequence, ==, 1);
    g_assert_cmpuint(view.n_ndps, ==, 1);
    g_assert_cmpuint(view.n_datagrams, ==, 1);
    g_assert_cmpuint(view.datagrams[0].offset, ==, dg_off);
    g_assert_cmpuint(view.datagrams[0].len, ==, 14);

    g_assert_cmpint(transfer(fmt, ntb, len, &limits_1514, &ntbs), ==,
                    NCM_PARSE_OK);
    g_assert_cmpuint(ntbs, ==, 1);
    g_assert_cmpuint(sink.n, ==, 1);
    g_assert_cmpuint(sink.off[0], ==, dg_off);
    g_assert_cmpuint(sink.dlen[0], ==, 14);
    g_assert_cmpmem(ntb + sink.off[0], 14, golden_ntb16_min + 28, 14);
}

static void test_golden_parse_ntb16_min(void)
{
    check_min_parse(&ncm_ntb16_format, golden_ntb16_min,
                    sizeof(golden_ntb16_min), 28);
}

static void test_golden_parse_ntb32_min(void)
{
    check_min_parse(&ncm_ntb32_format, golden_ntb32_min,
                    sizeof(golden_ntb32_min), 48);
}

/*
 * An OUT NTB as Linux cdc_ncm_fill_tx_frame() builds it with its defaults
 * against a device advertising wNdpOutAlignment 4, wNdpOutDivisor 4 and
 * wNdpOutPayloadRemainder 0: NTH16; the NDP16 right behind it, aligned to
 * wNdpOutAlignment and sized for tx_max_datagrams + 1 entries while its
 * wLength only covers the entries in use; every datagram placed by
 * cdc_ncm_align_tail(), i.e. at ALIGN(len, divisor) + remainder, where
 * Linux has already turned the advertised remainder into (0 - ETH_HLEN) &
 * (divisor - 1) = 2 (payload after the Ethernet header 4-aligned); then
 * zero padding to tx_max and wBlockLength = tx_max.
 */
#define LINUX_TX_MAX            16384
#define LINUX_TX_DATAGRAMS      40
#define LINUX_NDP_MODULUS       4
#define LINUX_TX_MODULUS        4
#define LINUX_TX_REMAINDER      2
#define LINUX_SEQ               7

static uint32_t linux_frame_len(unsigned i)
{
    return 60 + 11 * i;
}

static uint32_t linux_align_tail(uint8_t *buf, uint32_t len, uint32_t mod,
                                 uint32_t rem)
{
    uint32_t align = (len + mod - 1) / mod * mod + rem;

    if (align != len && align <= LINUX_TX_MAX) {
        memset(buf + len, 0, align - len);
        len = align;
    }
    return len;
}

static void make_linux_out_ntb(uint8_t *buf, uint32_t *offs)
{
    uint32_t len = 0, ndp, ndp_size, wlength;
    unsigned i;

    memset(buf, 0xee, LINUX_TX_MAX);
    memset(buf, 0, 12);
    put_sig(buf, 0, "NCMH");
    put16(buf, 4, 12);
    put16(buf, 6, LINUX_SEQ);
    len = 12;

    len = linux_align_tail(buf, len, LINUX_NDP_MODULUS, 0);
    ndp = len;
    put16(buf, 10, ndp);
    ndp_size = 8 + (LINUX_TX_DATAGRAMS + 1) * 4;
    memset(buf + ndp, 0, ndp_size);
    put_sig(buf, ndp, "NCM0");
    wlength = 8 + 4;
    put16(buf, ndp + 4, wlength);
    len += ndp_size;

    for (i = 0; i < LINUX_TX_DATAGRAMS; i++) {
        uint32_t entry;

        len = linux_align_tail(buf, len, LINUX_TX_MODULUS,
                               LINUX_TX_REMAINDER);
        entry = ndp + 8 + (wlength - 8 - 4);
        put16(buf, entry, len);
        put16(buf, entry + 2, linux_frame_len(i));
        wlength += 4;
        put16(buf, ndp + 4, wlength);
        fill_frame(buf + len, 3, i, linux_frame_len(i));
        offs[i] = len;
        len += linux_frame_len(i);
    }
    memset(buf + len, 0, LINUX_TX_MAX - len);
    put16(buf, 8, LINUX_TX_MAX);
}

/* The first 36 bytes worked out by hand from the rules above. */
static const uint8_t golden_linux_head[36] = {
    0x4e, 0x43, 0x4d, 0x48, 0x0c, 0x00,     /* "NCMH", wHeaderLength 12 */
    0x07, 0x00, 0x00, 0x40, 0x0c, 0x00,     /* seq 7, 16384, NDP at 12 */
    0x4e, 0x43, 0x4d, 0x30,                 /* "NCM0" */
    0xac, 0x00, 0x00, 0x00,                 /* wLength 172, no next NDP */
    0xba, 0x00, 0x3c, 0x00,                 /* 186 = ALIGN(184) + 2, 60 */
    0xfa, 0x00, 0x47, 0x00,                 /* 250 = ALIGN(246) + 2, 71 */
    0x46, 0x01, 0x52, 0x00,                 /* 326 = ALIGN(321) + 2, 82 */
    0x9a, 0x01, 0x5d, 0x00,                 /* 410 = ALIGN(408) + 2, 93 */
};

static void test_golden_parse_linux_out(void)
{
    g_autofree uint8_t *buf = g_malloc(LINUX_TX_MAX + 1);
    uint32_t offs[LINUX_TX_DATAGRAMS];
    unsigned i, ntbs;

    make_linux_out_ntb(buf, offs);
    g_assert_cmpmem(buf, sizeof(golden_linux_head),
                    golden_linux_head, sizeof(golden_linux_head));
    /* entry 40 is the null terminator, inside the reserved NDP space */
    g_assert_cmpuint(get32(buf, 12 + 8 + 40 * 4), ==, 0);

    g_assert_cmpint(ncm_ntb_parse_one(&ncm_ntb16_format, buf, LINUX_TX_MAX,
                                      &limits_1514, &view), ==, NCM_PARSE_OK);
    g_assert_cmpuint(view.block_len, ==, LINUX_TX_MAX);
    g_assert_cmpuint(view.sequence, ==, LINUX_SEQ);
    g_assert_cmpuint(view.n_datagrams, ==, LINUX_TX_DATAGRAMS);

    /* Linux does not pad a full-size NTB, but a host may still add one */
    buf[LINUX_TX_MAX] = 0;
    g_assert_cmpint(transfer(&ncm_ntb16_format, buf, LINUX_TX_MAX + 1,
                             &limits_1514, &ntbs), ==, NCM_PARSE_OK);
    g_assert_cmpuint(ntbs, ==, 1);
    g_assert_cmpuint(sink.n, ==, LINUX_TX_DATAGRAMS);
    for (i = 0; i < LINUX_TX_DATAGRAMS; i++) {
        g_assert_cmpuint(view.datagrams[i].offset, ==, offs[i]);
        g_assert_cmpuint(view.datagrams[i].len, ==, linux_frame_len(i));
        g_assert_cmpuint(sink.off[i], ==, offs[i]);
        g_assert_cmpuint(sink.dlen[i], ==, linux_frame_len(i));
        g_assert_cmpuint(offs[i] % LINUX_TX_MODULUS, ==, LINUX_TX_REMAINDER);
        assert_frame(buf + sink.off[i], 3, i, sink.dlen[i]);
    }
}

/*
 * A full 64 KiB NTB16, which cannot state its length in wBlockLength and
 * writes 0 there: NDP at 12 with 44 entries, 43 datagrams of 1514 bytes
 * from offset 200, and one of 234 bytes ending exactly at byte 65536.
 */
#define BIG_NDP_ENTRIES         44
#define BIG_FIRST_DATAGRAM      200

static uint32_t big_frame_len(unsigned i)
{
    return i < BIG_NDP_ENTRIES - 1 ? 1514 : 234;
}

static void make_ntb16_64k(uint8_t *buf)
{
    uint32_t pos = BIG_FIRST_DATAGRAM;
    unsigned i;

    memset(buf, 0, NCM_NTB16_MAX_SIZE);
    put_sig(buf, 0, "NCMH");
    put16(buf, 4, 12);
    put16(buf, 6, 0xbeef);
    put16(buf, 8, 0);
    put16(buf, 10, 12);
    put_sig(buf, 12, "NCM0");
    put16(buf, 16, 8 + (BIG_NDP_ENTRIES + 1) * 4);
    put16(buf, 18, 0);
    for (i = 0; i < BIG_NDP_ENTRIES; i++) {
        put16(buf, 20 + i * 4, pos);
        put16(buf, 22 + i * 4, big_frame_len(i));
        fill_frame(buf + pos, 5, i, big_frame_len(i));
        pos += big_frame_len(i);
    }
    g_assert_cmpuint(pos, ==, NCM_NTB16_MAX_SIZE);
    g_assert_cmpuint(20 + (BIG_NDP_ENTRIES + 1) * 4, ==, BIG_FIRST_DATAGRAM);
}

static void test_golden_parse_ntb16_64k_zero_block_len(void)
{
    g_autofree uint8_t *buf = g_malloc(NCM_NTB16_MAX_SIZE);
    static const uint8_t head[28] = {
        0x4e, 0x43, 0x4d, 0x48, 0x0c, 0x00, 0xef, 0xbe,
        0x00, 0x00, 0x0c, 0x00,                 /* wBlockLength 0 */
        0x4e, 0x43, 0x4d, 0x30, 0xbc, 0x00, 0x00, 0x00,
        0xc8, 0x00, 0xea, 0x05,                 /* 200, 1514 */
        0xb2, 0x06, 0xea, 0x05,                 /* 1714, 1514 */
    };
    NcmParseLimits small = limits_1514;
    uint32_t pos = BIG_FIRST_DATAGRAM;
    unsigned i, ntbs;

    make_ntb16_64k(buf);
    g_assert_cmpmem(buf, sizeof(head), head, sizeof(head));

    g_assert_cmpint(transfer(&ncm_ntb16_format, buf, NCM_NTB16_MAX_SIZE,
                             &limits_1514, &ntbs), ==, NCM_PARSE_OK);
    g_assert_cmpuint(ntbs, ==, 1);
    g_assert_cmpuint(view.block_len, ==, NCM_NTB16_MAX_SIZE);
    g_assert_cmpuint(view.sequence, ==, 0xbeef);
    g_assert_cmpuint(sink.n, ==, BIG_NDP_ENTRIES);
    for (i = 0; i < BIG_NDP_ENTRIES; i++) {
        g_assert_cmpuint(sink.off[i], ==, pos);
        g_assert_cmpuint(sink.dlen[i], ==, big_frame_len(i));
        assert_frame(buf + pos, 5, i, big_frame_len(i));
        pos += big_frame_len(i);
    }

    /* the implied length is still held to dwNtbOutMaxSize */
    small.max_ntb_len = 32768;
    g_assert_cmpint(transfer(&ncm_ntb16_format, buf, NCM_NTB16_MAX_SIZE,
                             &small, &ntbs), ==, NCM_PARSE_BLOCK_TOO_LONG);
    g_assert_cmpuint(ntbs, ==, 0);
    g_assert_cmpuint(sink.n, ==, 0);
}

/*
 * Golden vectors: building
 */

static const uint8_t dg_a[14] = {
    0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6,
    0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad,
};

static const uint8_t dg_b[20] = {
    0xb0, 0xb1, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9,
    0xba, 0xbb, 0xbc, 0xbd, 0xbe, 0xbf, 0xc0, 0xc1, 0xc2, 0xc3,
};

/*
 * NTB16, divisor 4 remainder 2, alignment 4: datagrams of 14 and 15 bytes
 * land at 14 and 30, the NDP at 48 with its null entry; gaps are zero.
 */
static const uint8_t golden_build16[68] = {
    0x4e, 0x43, 0x4d, 0x48,     /*  0 "NCMH" */
    0x0c, 0x00, 0x34, 0x12,     /*  4 wHeaderLength 12, wSequence 0x1234 */
    0x44, 0x00, 0x30, 0x00,     /*  8 wBlockLength 68, wNdpIndex 48 */
    0x00, 0x00,                 /* 12 pad to 14 % 4 == 2 */
    0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6,       /* 14 datagram 0 */
    0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad,
    0x00, 0x00,                 /* 28 pad to 30 % 4 == 2 */
    0xb0, 0xb1, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, /* 30 datagram 1 */
    0xb8, 0xb9, 0xba, 0xbb, 0xbc, 0xbd, 0xbe,
    0x00, 0x00, 0x00,           /* 45 pad to NDP alignment */
    0x4e, 0x43, 0x4d, 0x30,     /* 48 "NCM0" */
    0x14, 0x00, 0x00, 0x00,     /* 52 wLength 20, wNextNdpIndex 0 */
    0x0e, 0x00, 0x0e, 0x00,     /* 56 14, 14 */
    0x1e, 0x00, 0x0f, 0x00,     /* 60 30, 15 */
    0x00, 0x00, 0x00, 0x00,     /* 64 null entry */
};

/*
 * NTB32, divisor 8 remainder 0, alignment 8: 14 bytes at 16, 20 bytes at
 * 32, NDP32 at 56 with two entries and the null entry.
 */
static const uint8_t golden_build32[96] = {
    0x6e, 0x63, 0x6d, 0x68,     /*  0 "ncmh" */
    0x10, 0x00, 0x07, 0x00,     /*  4 wHeaderLength 16, wSequence 7 */
    0x60, 0x00, 0x00, 0x00,     /*  8 dwBlockLength 96 */
    0x38, 0x00, 0x00, 0x00,     /* 12 dwNdpIndex 56 */
    0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6,       /* 16 datagram 0 */
    0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad,
    0x00, 0x00,                 /* 30 pad to 32 % 8 == 0 */
    0xb0, 0xb1, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, /* 32 datagram 1 */
    0xb8, 0xb9, 0xba, 0xbb, 0xbc, 0xbd, 0xbe, 0xbf,
    0xc0, 0xc1, 0xc2, 0xc3,
    0x00, 0x00, 0x00, 0x00,     /* 52 pad to NDP alignment */
    0x6e, 0x63, 0x6d, 0x30,     /* 56 "ncm0" */
    0x28, 0x00, 0x00, 0x00,     /* 60 wLength 40, wReserved6 */
    0x00, 0x00, 0x00, 0x00,     /* 64 dwNextNdpIndex 0 */
    0x00, 0x00, 0x00, 0x00,     /* 68 dwReserved12 */
    0x10, 0x00, 0x00, 0x00, 0x0e, 0x00, 0x00, 0x00, /* 72 16, 14 */
    0x20, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, /* 80 32, 20 */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* 88 null entry */
};

/* An NTB16 without datagrams: NTH and a 16-byte NDP of null entries. */
static const uint8_t golden_build16_empty[28] = {
    0x4e, 0x43, 0x4d, 0x48, 0x0c, 0x00, 0x00, 0x00,
    0x1c, 0x00, 0x0c, 0x00,     /* wBlockLength 28, wNdpIndex 12 */
    0x4e, 0x43, 0x4d, 0x30, 0x10, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};

static void test_golden_build_ntb16(void)
{
    const NcmNtbLayout l = {
        .max_len = 2048, .divisor = 4, .remainder = 2, .ndp_alignment = 4,
    };
    g_autofree uint8_t *buf = g_malloc(l.max_len);
    NcmNtbBuilder b;

    memset(buf, 0x5a, l.max_len);
    ncm_ntb_builder_init(&b, &ncm_ntb16_format, &l, buf);
    g_assert_true(ncm_ntb_builder_append(&b, dg_a, 14));
    g_assert_true(ncm_ntb_builder_append(&b, dg_b, 15));
    g_assert_cmpuint(ncm_ntb_builder_finish(&b, 0x1234), ==,
                     sizeof(golden_build16));
    g_assert_cmpmem(buf, sizeof(golden_build16), golden_build16,
                    sizeof(golden_build16));
}

static void test_golden_build_ntb32(void)
{
    const NcmNtbLayout l = {
        .max_len = 4096, .divisor = 8, .remainder = 0, .ndp_alignment = 8,
    };
    g_autofree uint8_t *buf = g_malloc(l.max_len);
    NcmNtbBuilder b;

    memset(buf, 0x5a, l.max_len);
    ncm_ntb_builder_init(&b, &ncm_ntb32_format, &l, buf);
    g_assert_true(ncm_ntb_builder_append(&b, dg_a, 14));
    g_assert_true(ncm_ntb_builder_append(&b, dg_b, 20));
    g_assert_cmpuint(ncm_ntb_builder_finish(&b, 7), ==,
                     sizeof(golden_build32));
    g_assert_cmpmem(buf, sizeof(golden_build32), golden_build32,
                    sizeof(golden_build32));
}

static void test_golden_build_empty(void)
{
    const NcmNtbLayout l = { .max_len = 2048, .divisor = 4 };
    g_autofree uint8_t *buf = g_malloc(l.max_len);
    NcmNtbBuilder b;

    memset(buf, 0x5a, l.max_len);
    ncm_ntb_builder_init(&b, &ncm_ntb16_format, &l, buf);
    /* nothing to send: nothing is written, not even an NTH */
    g_assert_cmpuint(ncm_ntb_builder_finish(&b, 0), ==, 0);
    g_assert_cmpuint(buf[0], ==, 0x5a);
    g_assert_cmpuint(buf[l.max_len - 1], ==, 0x5a);
    /* an empty NTB is still valid input to the parser */
    g_assert_cmpint(ncm_ntb_parse_one(&ncm_ntb16_format, golden_build16_empty,
                                      sizeof(golden_build16_empty),
                                      &limits_1514, &view), ==, NCM_PARSE_OK);
    g_assert_cmpuint(view.n_datagrams, ==, 0);
}

/*
 * One datagram of 65508 bytes at 12 puts the NDP at 65520 and the end at
 * exactly 65536, which an NTB16 can only express as wBlockLength 0.
 */
static void test_golden_build_ntb16_64k(void)
{
    const NcmNtbLayout l = {
        .max_len = NCM_NTB16_MAX_SIZE, .divisor = 4, .ndp_alignment = 4,
    };
    static const uint8_t head[12] = {
        0x4e, 0x43, 0x4d, 0x48, 0x0c, 0x00, 0x02, 0x00,
        0x00, 0x00, 0xf0, 0xff,     /* wBlockLength 0, wNdpIndex 65520 */
    };
    static const uint8_t ndp[16] = {
        0x4e, 0x43, 0x4d, 0x30, 0x10, 0x00, 0x00, 0x00,
        0x0c, 0x00, 0xe4, 0xff,     /* 12, 65508 */
        0x00, 0x00, 0x00, 0x00,
    };
    const NcmParseLimits big = {
        .max_ntb_len = NCM_NTB16_MAX_SIZE, .max_datagram_len = 65535,
    };
    g_autofree uint8_t *buf = g_malloc(l.max_len);
    NcmNtbBuilder b;
    uint8_t *p;
    unsigned ntbs;

    ncm_ntb_builder_init(&b, &ncm_ntb16_format, &l, buf);
    g_assert_false(ncm_ntb_builder_fits(&b, 65509));
    p = ncm_ntb_builder_reserve(&b, 65508);
    g_assert_true(p == buf + 12);
    fill_frame(p, 9, 0, 65508);
    g_assert_cmpuint(ncm_ntb_builder_finish(&b, 2), ==, NCM_NTB16_MAX_SIZE);
    g_assert_cmpmem(buf, sizeof(head), head, sizeof(head));
    g_assert_cmpmem(buf + 65520, sizeof(ndp), ndp, sizeof(ndp));

    g_assert_cmpint(transfer(&ncm_ntb16_format, buf, NCM_NTB16_MAX_SIZE,
                             &big, &ntbs), ==, NCM_PARSE_OK);
    g_assert_cmpuint(ntbs, ==, 1);
    g_assert_cmpuint(sink.n, ==, 1);
    assert_frame(buf + sink.off[0], 9, 0, sink.dlen[0]);
}

/*
 * Build -> parse round trips
 */

typedef struct RoundTrip {
    const char *name;
    NcmNtbLayout layout;
    uint32_t sizes[6];          /* offered in turn; 0 ends the cycle */
    unsigned offered;           /* datagrams offered before giving up */
    int expect16, expect32;     /* datagrams that fit, -1 = not fixed */
} RoundTrip;

static const RoundTrip roundtrips[] = {
    {
        /* the device's usual IN parameters; 10 x 1514 fill 16 KiB */
        "div4-rem0-align4-16k-1514",
        { .max_len = 16384, .divisor = 4, .remainder = 0,
          .ndp_alignment = 4 },
        { 1514 }, 64, 10, 10,
    }, {
        /* IP header 512-aligned after the Ethernet header */
        "div512-rem14-align4-32k-1514",
        { .max_len = 32768, .divisor = 512, .remainder = 14,
          .ndp_alignment = 4 },
        { 1514 }, 64, 21, 20,
    }, {
        "div1-rem0-align4-8k-64",
        { .max_len = 8192, .divisor = 1, .ndp_alignment = 4 },
        { 64 }, 256, -1, -1,
    }, {
        "div8-rem6-align16-16k-mixed",
        { .max_len = 16384, .divisor = 8, .remainder = 6,
          .ndp_alignment = 16 },
        { 14, 15, 60, 1514, 333, 9014 }, 64, -1, -1,
    }, {
        /* 0 means "none" for both; max_datagrams 3 stops a roomy NTB */
        "div0-align0-max3",
        { .max_len = 16384, .divisor = 0, .ndp_alignment = 0,
          .max_datagrams = 3 },
        { 100 }, 10, 3, 3,
    }, {
        /* remainder >= divisor is taken modulo the divisor */
        "div4-rem6-align4-4k-61",
        { .max_len = 4096, .divisor = 4, .remainder = 6,
          .ndp_alignment = 4 },
        { 61 }, 200, -1, -1,
    }, {
        "div32-rem0-align64-64k-1514",
        { .max_len = 65536, .divisor = 32, .ndp_alignment = 64 },
        { 1514 }, 100, -1, -1,
    }, {
        /* the array bound NCM_MAX_DATAGRAMS caps an unlimited layout */
        "div4-rem2-align4-64k-1024-min-datagrams",
        { .max_len = 65536, .divisor = 4, .remainder = 2,
          .ndp_alignment = 4 },
        { 14 }, 2000, NCM_MAX_DATAGRAMS, NCM_MAX_DATAGRAMS,
    }, {
        /* NTB16 is clamped to 64 KiB, NTB32 is not */
        "div4-rem0-align8-256k-9014",
        { .max_len = 262144, .divisor = 4, .ndp_alignment = 8 },
        { 9014 }, 100, 7, 29,
    }, {
        "div4096-rem100-align4-64k-jumbo",
        { .max_len = 65536, .divisor = 4096, .remainder = 100,
          .ndp_alignment = 4 },
        { 4000, 14, 4096 }, 100, -1, -1,
    },
};

static uint64_t model_max_len(const NcmNtbFormat *fmt, const NcmNtbLayout *l)
{
    return MIN((uint64_t)l->max_len, fmt->field_size == 2 ? 65536 :
               UINT32_MAX);
}

/*
 * The builder's documented layout, from the spec rules: datagram at the
 * first offset >= @end with offset % divisor == remainder, one NDP after
 * the last datagram at the NDP alignment, sized for every datagram plus
 * the null entry.
 */
static bool model_fits(const NcmNtbFormat *fmt, const NcmNtbLayout *l,
                       uint32_t n, uint64_t end, uint32_t len)
{
    uint64_t div = l->divisor ? l->divisor : 1;
    uint64_t rem = l->remainder % div;
    uint64_t align = MAX(l->ndp_alignment, 4);
    uint32_t maxd = l->max_datagrams;
    uint64_t off, ndp, ndp_len;

    if (maxd == 0 || maxd > NCM_MAX_DATAGRAMS) {
        maxd = NCM_MAX_DATAGRAMS;
    }
    if (n >= maxd) {
        return false;
    }
    off = end - end % div + rem;
    if (off < end) {
        off += div;
    }
    ndp = (off + len + align - 1) / align * align;
    ndp_len = fmt->ndp_header_len + (uint64_t)(n + 2) * 2 * fmt->field_size;
    ndp_len = MAX(ndp_len, fmt->ndp_min_len);
    return ndp + ndp_len <= model_max_len(fmt, l);
}

/*
 * Fill one NTB from @sizes (cycled) until the builder refuses or @offered
 * datagrams went in, checking every promise of the builder, then parse it
 * back.  Returns how many datagrams went in.
 */
static unsigned roundtrip_one(const NcmNtbFormat *fmt, const NcmNtbLayout *l,
                              const uint32_t *sizes, unsigned n_sizes,
                              unsigned offered, unsigned seed)
{
    uint64_t max_len = model_max_len(fmt, l);
    uint8_t *buf = g_malloc(max_len + 1);
    uint8_t *covered = g_malloc0(max_len);
    uint32_t *offs = g_new(uint32_t, NCM_MAX_DATAGRAMS);
    uint32_t *lens = g_new(uint32_t, NCM_MAX_DATAGRAMS);
    uint32_t div = l->divisor ? l->divisor : 1;
    uint32_t align = MAX(l->ndp_alignment, 4);
    uint32_t maxdg = 14, total, ndp, ndp_len, block_len, pad, i;
    uint64_t end = fmt->nth_len;
    NcmParseLimits limits;
    NcmNtbBuilder b;
    unsigned n = 0, ntbs;

    memset(buf, 0xaa, max_len + 1);
    ncm_ntb_builder_init(&b, fmt, l, buf);
    for (i = 0; i < offered; i++) {
        uint32_t len = sizes[i % n_sizes];
        bool fits = ncm_ntb_builder_fits(&b, len);
        uint8_t *p;

        g_assert_cmpint(fits, ==, model_fits(fmt, l, n, end, len));
        p = ncm_ntb_builder_reserve(&b, len);
        if (!fits) {
            g_assert_null(p);
            break;
        }
        g_assert_nonnull(p);
        g_assert_true(p >= buf + end && p + len <= buf + max_len);
        offs[n] = p - buf;
        lens[n] = len;
        g_assert_cmpuint(offs[n] % div, ==, l->remainder % div);
        fill_frame(p, seed, n, len);
        end = offs[n] + len;
        maxdg = MAX(maxdg, len);
        n++;
    }

    total = ncm_ntb_builder_finish(&b, seed);
    if (n == 0) {
        g_assert_cmpuint(total, ==, 0);
        g_free(buf);
        g_free(covered);
        g_free(offs);
        g_free(lens);
        return 0;
    }
    g_assert_cmpuint(total, <=, max_len);
    g_assert_cmpuint(get32(buf, 0), ==, fmt->nth_signature);
    g_assert_cmpuint(get16(buf, 4), ==, fmt->nth_len);
    g_assert_cmpuint(get16(buf, 6), ==, seed & 0xffff);
    if (fmt->field_size == 2) {
        block_len = get16(buf, 8);
        ndp = get16(buf, 10);
        g_assert_cmpuint(block_len, ==, total == 65536 ? 0 : total);
    } else {
        block_len = get32(buf, 8);
        ndp = get32(buf, 12);
        g_assert_cmpuint(block_len, ==, total);
    }
    g_assert_cmpuint(ndp % align, ==, 0);
    g_assert_cmpuint(ndp, >=, end);
    ndp_len = get16(buf, ndp + 4);
    g_assert_cmpuint(ndp + ndp_len, ==, total);
    if (l->max_datagrams) {
        g_assert_cmpuint(n, <=, l->max_datagrams);
    }

    /* nothing but NTH, datagrams and NDP may be non-zero: no stale bytes */
    memset(covered, 1, fmt->nth_len);
    memset(covered + ndp, 1, ndp_len);
    for (i = 0; i < n; i++) {
        memset(covered + offs[i], 1, lens[i]);
    }
    for (i = 0; i < total; i++) {
        if (!covered[i] && buf[i]) {
            g_test_message("stale byte 0x%02x at %u", buf[i], i);
            g_assert_cmphex(buf[i], ==, 0);
        }
    }

    limits.max_ntb_len = max_len;
    limits.max_datagram_len = maxdg;
    limits.max_datagrams = l->max_datagrams;
    g_assert_cmpint(ncm_ntb_parse_one(fmt, buf, total, &limits, &view), ==,
                    NCM_PARSE_OK);
    g_assert_cmpuint(view.block_len, ==, total);
    g_assert_cmpuint(view.sequence, ==, seed & 0xffff);
    g_assert_cmpuint(view.n_datagrams, ==, n);
    for (i = 0; i < n; i++) {
        g_assert_cmpuint(view.datagrams[i].offset, ==, offs[i]);
        g_assert_cmpuint(view.datagrams[i].len, ==, lens[i]);
    }

    /*
     * and through the transfer walker, with a Windows-style zero pad unless
     * wBlockLength is 0 (a full 64 KiB NTB16), which makes the pad part of
     * the block and the block longer than the maximum
     */
    pad = fmt->field_size == 2 && total == 65536 ? 0 : 1;
    buf[total] = 0;
    g_assert_cmpint(transfer(fmt, buf, total + pad, &limits, &ntbs), ==,
                    NCM_PARSE_OK);
    g_assert_cmpuint(ntbs, ==, 1);
    g_assert_cmpuint(sink.n, ==, n);
    for (i = 0; i < n; i++) {
        g_assert_cmpuint(sink.off[i], ==, offs[i]);
        g_assert_cmpuint(sink.dlen[i], ==, lens[i]);
        assert_frame(buf + sink.off[i], seed, i, sink.dlen[i]);
    }

    g_free(buf);
    g_free(covered);
    g_free(offs);
    g_free(lens);
    return n;
}

static unsigned n_sizes(const RoundTrip *rt)
{
    unsigned n = 0;

    while (n < G_N_ELEMENTS(rt->sizes) && rt->sizes[n]) {
        n++;
    }
    return n;
}

static void test_roundtrip16(gconstpointer data)
{
    const RoundTrip *rt = data;
    unsigned n = roundtrip_one(&ncm_ntb16_format, &rt->layout, rt->sizes,
                               n_sizes(rt), rt->offered, 16);

    g_assert_cmpuint(n, >, 0);
    if (rt->expect16 >= 0) {
        g_assert_cmpuint(n, ==, rt->expect16);
    }
}

static void test_roundtrip32(gconstpointer data)
{
    const RoundTrip *rt = data;
    unsigned n = roundtrip_one(&ncm_ntb32_format, &rt->layout, rt->sizes,
                               n_sizes(rt), rt->offered, 32);

    g_assert_cmpuint(n, >, 0);
    if (rt->expect32 >= 0) {
        g_assert_cmpuint(n, ==, rt->expect32);
    }
}

/* Fixed-seed xorshift so that a failure reproduces without --seed. */
static uint64_t rng_state;

static uint32_t rng(uint32_t bound)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return bound ? (uint32_t)(rng_state % bound) : 0;
}

static void test_roundtrip_random_layouts(void)
{
    static const uint16_t divisors[] = { 0, 1, 2, 4, 8, 16, 64, 512, 4096 };
    unsigned iter;

    rng_state = 0x9e3779b97f4a7c15ull;
    for (iter = 0; iter < 300; iter++) {
        const NcmNtbFormat *fmt = rng(2) ? &ncm_ntb32_format
                                         : &ncm_ntb16_format;
        NcmNtbLayout l = {
            .max_len = NCM_NTB_MIN_SIZE + rng(3 * 65536),
            .divisor = divisors[rng(G_N_ELEMENTS(divisors))],
            .ndp_alignment = 4 << rng(6),
            .max_datagrams = rng(4) ? rng(60) : 0,
        };
        uint32_t sizes[5];
        unsigned i;

        l.remainder = rng(l.divisor ? 2 * l.divisor : 8);
        for (i = 0; i < G_N_ELEMENTS(sizes); i++) {
            sizes[i] = 14 + rng(rng(4) ? 1501 : 9001);
        }
        roundtrip_one(fmt, &l, sizes, G_N_ELEMENTS(sizes), 1 + rng(300),
                      iter);
    }
}

/*
 * Builder limits
 */

static void test_builder_full(void)
{
    const NcmNtbLayout l = {
        .max_len = 2048, .divisor = 4, .ndp_alignment = 4,
    };
    g_autofree uint8_t *buf = g_malloc(l.max_len);
    g_autofree uint8_t *frame = g_malloc0(1514);
    NcmNtbBuilder b;
    unsigned n = 1, total;

    ncm_ntb_builder_init(&b, &ncm_ntb16_format, &l, buf);
    g_assert_true(ncm_ntb_builder_fits(&b, 1514));
    g_assert_true(ncm_ntb_builder_append(&b, frame, 1514));
    /* 12 + 1514 -> 1528 + 1514 leaves no room for a second one */
    g_assert_false(ncm_ntb_builder_fits(&b, 1514));
    g_assert_null(ncm_ntb_builder_reserve(&b, 1514));
    g_assert_false(ncm_ntb_builder_append(&b, frame, 1514));
    /* but smaller datagrams still go in, until they do not either */
    while (ncm_ntb_builder_fits(&b, 64)) {
        g_assert_true(ncm_ntb_builder_append(&b, frame, 64));
        n++;
        g_assert_cmpuint(n, <, 100);
    }
    g_assert_cmpuint(n, >, 1);
    g_assert_null(ncm_ntb_builder_reserve(&b, 64));
    g_assert_false(ncm_ntb_builder_append(&b, frame, 64));

    total = ncm_ntb_builder_finish(&b, 0);
    g_assert_cmpuint(total, <=, l.max_len);
    /* a refused reserve must not have left a trace */
    g_assert_cmpint(ncm_ntb_parse_one(&ncm_ntb16_format, buf, total,
                                      &limits_1514, &view), ==, NCM_PARSE_OK);
    g_assert_cmpuint(view.n_datagrams, ==, n);
}

static void test_builder_max_datagrams(void)
{
    NcmNtbLayout l = {
        .max_len = 65536, .divisor = 4, .ndp_alignment = 4,
        .max_datagrams = 5,
    };
    g_autofree uint8_t *buf = g_malloc(l.max_len);
    NcmNtbBuilder b;
    unsigned i, total;

    ncm_ntb_builder_init(&b, &ncm_ntb32_format, &l, buf);
    for (i = 0; i < 5; i++) {
        g_assert_true(ncm_ntb_builder_append(&b, dg_b, 20));
    }
    g_assert_false(ncm_ntb_builder_fits(&b, 14));
    g_assert_null(ncm_ntb_builder_reserve(&b, 14));
    total = ncm_ntb_builder_finish(&b, 0);
    g_assert_cmpint(ncm_ntb_parse_one(&ncm_ntb32_format, buf, total,
                                      &limits_1514, &view), ==, NCM_PARSE_OK);
    g_assert_cmpuint(view.n_datagrams, ==, 5);

    /* above the array bound the builder stops at NCM_MAX_DATAGRAMS */
    l.max_datagrams = NCM_MAX_DATAGRAMS + 1;
    ncm_ntb_builder_init(&b, &ncm_ntb16_format, &l, buf);
    for (i = 0; i < NCM_MAX_DATAGRAMS; i++) {
        g_assert_true(ncm_ntb_builder_append(&b, dg_a, 14));
    }
    g_assert_false(ncm_ntb_builder_fits(&b, 14));
    g_assert_null(ncm_ntb_builder_reserve(&b, 14));
}

/*
 * A datagram length near 4 GiB must not wrap offset + length into a small
 * NDP position and be accepted.
 */
static void test_builder_wrapping_length(void)
{
    const NcmNtbLayout l16 = {
        .max_len = 65536, .divisor = 4, .ndp_alignment = 4,
    };
    const NcmNtbLayout l32 = {
        .max_len = UINT32_MAX, .divisor = 4, .ndp_alignment = 4,
    };
    static const uint32_t lens[] = {
        65536, 0x7fffffff, 0xfffffff0, 0xfffffff4, 0xfffffff8, UINT32_MAX,
    };
    g_autofree uint8_t *buf = g_malloc(l16.max_len);
    NcmNtbBuilder b;
    unsigned i;

    ncm_ntb_builder_init(&b, &ncm_ntb16_format, &l16, buf);
    for (i = 0; i < G_N_ELEMENTS(lens); i++) {
        g_test_message("NTB16 len 0x%x", lens[i]);
        g_assert_false(ncm_ntb_builder_fits(&b, lens[i]));
        g_assert_null(ncm_ntb_builder_reserve(&b, lens[i]));
    }
    g_assert_true(ncm_ntb_builder_reserve(&b, 14) == buf + 12);

    /* only ask: a 4 GiB NTB32 buffer is not something to allocate */
    ncm_ntb_builder_init(&b, &ncm_ntb32_format, &l32, buf);
    for (i = 2; i < G_N_ELEMENTS(lens); i++) {
        g_test_message("NTB32 len 0x%x", lens[i]);
        g_assert_false(ncm_ntb_builder_fits(&b, lens[i]));
    }
}

static void test_builder_reinit(void)
{
    const NcmNtbLayout l = {
        .max_len = 4096, .divisor = 4, .remainder = 2, .ndp_alignment = 4,
    };
    g_autofree uint8_t *buf = g_malloc(l.max_len);
    NcmNtbBuilder b;
    unsigned total;

    memset(buf, 0x5a, l.max_len);
    ncm_ntb_builder_init(&b, &ncm_ntb16_format, &l, buf);
    g_assert_true(ncm_ntb_builder_append(&b, dg_b, 20));
    g_assert_true(ncm_ntb_builder_append(&b, dg_b, 20));
    g_assert_true(ncm_ntb_builder_append(&b, dg_b, 20));
    ncm_ntb_builder_finish(&b, 1);

    ncm_ntb_builder_init(&b, &ncm_ntb16_format, &l, buf);
    g_assert_true(ncm_ntb_builder_append(&b, dg_a, 14));
    g_assert_true(ncm_ntb_builder_append(&b, dg_b, 15));
    total = ncm_ntb_builder_finish(&b, 0x1234);
    g_assert_cmpmem(buf, total, golden_build16, sizeof(golden_build16));
}

/*
 * Malformed input: one table, one test per row, and a check that every
 * NcmParseError value is produced by some row.
 */

typedef struct Poke {
    uint32_t off;
    uint8_t width;              /* 1, 2 or 4; 0 ends the list */
    uint32_t val;
} Poke;

typedef struct ErrorCase {
    const char *name;
    bool ntb32;                 /* parse as NTB32 */
    size_t (*make)(uint8_t *buf);
    size_t len;                 /* 0: as made */
    Poke pokes[6];
    NcmParseLimits limits;      /* max_ntb_len 0: limits_1514 */
    NcmParseError expect;
    unsigned ntbs;              /* NTBs the transfer walk accepts */
    unsigned datagrams;         /* datagrams it emits */
} ErrorCase;

#define ERR_BUF_LEN     (NCM_NTB16_MAX_SIZE + 64)

static size_t make_min16(uint8_t *buf)
{
    memcpy(buf, golden_ntb16_min, sizeof(golden_ntb16_min));
    return sizeof(golden_ntb16_min);
}

static size_t make_min32(uint8_t *buf)
{
    memcpy(buf, golden_ntb32_min, sizeof(golden_ntb32_min));
    return sizeof(golden_ntb32_min);
}

/*
 * NDP whose header is the last 8 bytes of the block, so that its wLength
 * of 16 reaches 8 bytes past wBlockLength (into bytes that were received
 * but belong to no NTB).
 */
static size_t make_ndp_at_end16(uint8_t *buf)
{
    put_sig(buf, 0, "NCMH");
    put16(buf, 4, 12);
    put16(buf, 8, 36);
    put16(buf, 10, 28);
    fill_frame(buf + 12, 1, 0, 14);
    put_sig(buf, 28, "NCM0");
    put16(buf, 32, 16);
    put16(buf, 34, 0);
    put16(buf, 36, 12);
    put16(buf, 38, 14);
    return 44;
}

/*
 * @n NDPs of one datagram each, chained at 12, 28, 44, ...; the last one
 * links back to NDP @loop_to (1-based) or ends the chain when it is 0.
 */
static size_t make_chain16(uint8_t *buf, unsigned n, unsigned loop_to)
{
    uint32_t dg = 12 + 16 * n;
    unsigned i;

    put_sig(buf, 0, "NCMH");
    put16(buf, 4, 12);
    put16(buf, 8, dg + 14);
    put16(buf, 10, 12);
    for (i = 0; i < n; i++) {
        uint32_t ndp = 12 + 16 * i;

        put_sig(buf, ndp, "NCM0");
        put16(buf, ndp + 4, 16);
        put16(buf, ndp + 6, i + 1 < n ? ndp + 16 :
              loop_to ? 12 + 16 * (loop_to - 1) : 0);
        put16(buf, ndp + 8, dg);
        put16(buf, ndp + 10, 14);
    }
    fill_frame(buf + dg, 1, 0, 14);
    return dg + 14;
}

static size_t make_chain_max(uint8_t *buf)
{
    return make_chain16(buf, NCM_MAX_NDP_CHAIN, 0);
}

static size_t make_chain_over(uint8_t *buf)
{
    return make_chain16(buf, NCM_MAX_NDP_CHAIN + 1, 0);
}

static size_t make_chain_loop(uint8_t *buf)
{
    return make_chain16(buf, 3, 2);
}

/* One NDP with @n entries, all pointing at the same 14-byte datagram. */
static size_t make_many16(uint8_t *buf, unsigned n)
{
    uint32_t dg = 12 + 8 + (n + 1) * 4;
    unsigned i;

    put_sig(buf, 0, "NCMH");
    put16(buf, 4, 12);
    put16(buf, 8, dg + 14);
    put16(buf, 10, 12);
    put_sig(buf, 12, "NCM0");
    put16(buf, 16, 8 + (n + 1) * 4);
    for (i = 0; i < n; i++) {
        put16(buf, 20 + i * 4, dg);
        put16(buf, 22 + i * 4, 14);
    }
    fill_frame(buf + dg, 1, 0, 14);
    return dg + 14;
}

static size_t make_many_2(uint8_t *buf)
{
    return make_many16(buf, 2);
}

static size_t make_many_max(uint8_t *buf)
{
    return make_many16(buf, NCM_MAX_DATAGRAMS);
}

static size_t make_many_over(uint8_t *buf)
{
    return make_many16(buf, NCM_MAX_DATAGRAMS + 1);
}

static size_t make_64k(uint8_t *buf)
{
    make_ntb16_64k(buf);
    return NCM_NTB16_MAX_SIZE;
}

#define P16(o, v)       { (o), 2, (v) }
#define P32(o, v)       { (o), 4, (v) }
#define NCM1            0x314d434e
#define NCM0            0x304d434e
#define NCM1_32         0x316d636e

static const ErrorCase error_cases[] = {
    /* accepted */
    { "ntb16-minimal", false, make_min16, 0, {},
      {}, NCM_PARSE_OK, 1, 1 },
    { "ntb32-minimal", true, make_min32, 0, {},
      {}, NCM_PARSE_OK, 1, 1 },
    { "windows-1-byte-zero-pad-cve-2024-27405", false, make_min16, 43, {},
      {}, NCM_PARSE_OK, 1, 1 },
    { "ntb32-windows-1-byte-zero-pad", true, make_min32, 63, {},
      {}, NCM_PARSE_OK, 1, 1 },
    { "ntb16-block-length-0-is-whole-transfer", false, make_min16, 100,
      { P16(8, 0) }, {}, NCM_PARSE_OK, 1, 1 },
    { "ndp-chain-of-max-length", false, make_chain_max, 0, {},
      {}, NCM_PARSE_OK, 1, NCM_MAX_NDP_CHAIN },
    { "exactly-max-datagrams", false, make_many_2, 0, {},
      { 65536, 1514, 2, false }, NCM_PARSE_OK, 1, 2 },
    { "exactly-ncm-max-datagrams", false, make_many_max, 0, {},
      {}, NCM_PARSE_OK, 1, NCM_MAX_DATAGRAMS },
    { "datagram-of-max-length", false, make_min16, 1542,
      { P16(8, 1542), P16(22, 1514) }, {}, NCM_PARSE_OK, 1, 1 },

    /* NTH */
    { "11-bytes", false, make_min16, 11, {},
      {}, NCM_PARSE_NTH_TRUNCATED, 0, 0 },
    { "ntb32-15-bytes", true, make_min32, 15, {},
      {}, NCM_PARSE_NTH_TRUNCATED, 0, 0 },
    { "after-nonzero-pad-byte", false, make_min16, 43,
      { { 42, 1, 0x01 } }, {}, NCM_PARSE_NTH_TRUNCATED, 1, 1 },
    { "after-2-byte-pad", false, make_min16, 44, {},
      {}, NCM_PARSE_NTH_TRUNCATED, 1, 1 },
    { "ntb32-nth-given-to-ntb16", false, make_min32, 0, {},
      {}, NCM_PARSE_NTH_SIGNATURE, 0, 0 },
    { "ntb16-nth-given-to-ntb32", true, make_min16, 0, {},
      {}, NCM_PARSE_NTH_SIGNATURE, 0, 0 },
    { "16-on-ntb16", false, make_min16, 0,
      { P16(4, 16) }, {}, NCM_PARSE_NTH_HEADER_LEN, 0, 0 },
    { "12-on-ntb32", true, make_min32, 0,
      { P16(4, 12) }, {}, NCM_PARSE_NTH_HEADER_LEN, 0, 0 },

    /* block length */
    { "shorter-than-nth-plus-ndp-cve-2026-31617", false, make_min16, 0,
      { P16(8, 27) }, {}, NCM_PARSE_BLOCK_TOO_SHORT, 0, 0 },
    { "12-nth-only", false, make_min16, 0,
      { P16(8, 12) }, {}, NCM_PARSE_BLOCK_TOO_SHORT, 0, 0 },
    { "ntb32-block-length-0-does-not-loop", true, make_min32, 0,
      { P32(8, 0) }, {}, NCM_PARSE_BLOCK_TOO_SHORT, 0, 0 },
    { "ntb16-block-length-0-12-byte-transfer", false, make_min16, 12,
      { P16(8, 0) }, {}, NCM_PARSE_BLOCK_TOO_SHORT, 0, 0 },
    { "one-byte-past", false, make_min16, 0,
      { P16(8, 43) }, {}, NCM_PARSE_BLOCK_PAST_TRANSFER, 0, 0 },
    { "ntb32-2-gib", true, make_min32, 0,
      { P32(8, 0x80000000) }, { UINT32_MAX, 1514, 0, false },
      NCM_PARSE_BLOCK_PAST_TRANSFER, 0, 0 },
    { "longer-than-max-ntb-len", false, make_min16, 0, {},
      { 41, 1514, 0, false }, NCM_PARSE_BLOCK_TOO_LONG, 0, 0 },
    { "block-length-0-transfer-longer-than-max", false, make_min16, 100,
      { P16(8, 0) }, { 64, 1514, 0, false }, NCM_PARSE_BLOCK_TOO_LONG, 0, 0 },
    { "ntb32-256-mib", true, make_min32, 0,
      { P32(8, 0x10000000) }, {}, NCM_PARSE_BLOCK_TOO_LONG, 0, 0 },

    /* NDP placement */
    { "index-14", false, make_min16, 0,
      { P16(10, 14) }, {}, NCM_PARSE_NDP_ALIGNMENT, 0, 0 },
    { "ntb32-index-18", true, make_min32, 0,
      { P32(12, 18) }, {}, NCM_PARSE_NDP_ALIGNMENT, 0, 0 },
    { "index-0", false, make_min16, 0,
      { P16(10, 0) }, {}, NCM_PARSE_NDP_BOUNDS, 0, 0 },
    { "inside-nth", false, make_min16, 0,
      { P16(10, 8) }, {}, NCM_PARSE_NDP_BOUNDS, 0, 0 },
    { "header-past-block-end", false, make_min16, 0,
      { P16(10, 36) }, {}, NCM_PARSE_NDP_BOUNDS, 0, 0 },
    { "index-0xfffc", false, make_min16, 0,
      { P16(10, 0xfffc) }, {}, NCM_PARSE_NDP_BOUNDS, 0, 0 },
    { "ntb32-index-near-4-gib", true, make_min32, 0,
      { P32(12, 0xfffffffc) }, {}, NCM_PARSE_NDP_BOUNDS, 0, 0 },
    { "next-index-past-block-end", false, make_min16, 0,
      { P16(18, 40) }, {}, NCM_PARSE_NDP_BOUNDS, 0, 0 },

    /* NDP contents */
    { "ncm1-crc", false, make_min16, 0,
      { P32(12, NCM1) }, {}, NCM_PARSE_NDP_SIGNATURE, 0, 0 },
    { "ntb32-ncm1-crc", true, make_min32, 0,
      { P32(16, NCM1_32) }, {}, NCM_PARSE_NDP_SIGNATURE, 0, 0 },
    { "ndp16-signature-in-ntb32", true, make_min32, 0,
      { P32(16, NCM0) }, {}, NCM_PARSE_NDP_SIGNATURE, 0, 0 },
    { "below-minimum", false, make_min16, 0,
      { P16(16, 12) }, {}, NCM_PARSE_NDP_LENGTH, 0, 0 },
    { "not-whole-entries", false, make_min16, 0,
      { P16(16, 18) }, {}, NCM_PARSE_NDP_LENGTH, 0, 0 },
    { "ntb32-not-whole-entries", true, make_min32, 0,
      { P16(20, 36) }, {}, NCM_PARSE_NDP_LENGTH, 0, 0 },
    { "past-block-end", false, make_min16, 0,
      { P16(16, 32) }, {}, NCM_PARSE_NDP_LENGTH, 0, 0 },
    { "ndp-at-block-end-entries-run-past-it", false, make_ndp_at_end16, 0,
      {}, {}, NCM_PARSE_NDP_LENGTH, 0, 0 },
    { "no-null-entry", false, make_min16, 0,
      { P16(24, 28), P16(26, 14) }, {}, NCM_PARSE_NDP_UNTERMINATED, 0, 0 },
    { "links-to-itself", false, make_min16, 0,
      { P16(18, 12) }, {}, NCM_PARSE_NDP_CHAIN_LOOP, 0, 0 },
    { "links-back", false, make_chain_loop, 0, {},
      {}, NCM_PARSE_NDP_CHAIN_LOOP, 0, 0 },
    { "17-ndps", false, make_chain_over, 0, {},
      {}, NCM_PARSE_NDP_CHAIN_TOO_LONG, 0, 0 },

    /* datagrams */
    { "0xfff0-length-wraps-cve-2022-48938", false, make_min16, 0,
      { P16(20, 0xfff0), P16(22, 0x20) }, {}, NCM_PARSE_DATAGRAM_BOUNDS, 0, 0 },
    { "0xfff0-length-wraps-in-64k-ntb", false, make_64k, 0,
      { P16(20, 0xfff0), P16(22, 0x20) }, {}, NCM_PARSE_DATAGRAM_BOUNDS, 0, 0 },
    { "last-one-past-64k", false, make_64k, 0,
      { P16(22 + 4 * (BIG_NDP_ENTRIES - 1), 235) },
      {}, NCM_PARSE_DATAGRAM_BOUNDS, 0, 0 },
    { "ntb32-index-wraps-32-bit", true, make_min32, 0,
      { P32(32, 0xfffffff0), P32(36, 0x20) },
      {}, NCM_PARSE_DATAGRAM_BOUNDS, 0, 0 },
    { "ntb32-length-wraps-32-bit", true, make_min32, 0,
      { P32(36, 0xfffffff0) }, {}, NCM_PARSE_DATAGRAM_BOUNDS, 0, 0 },
    { "one-byte-past-block", false, make_min16, 0,
      { P16(22, 15) }, {}, NCM_PARSE_DATAGRAM_BOUNDS, 0, 0 },
    { "inside-nth", false, make_min16, 0,
      { P16(20, 4) }, {}, NCM_PARSE_DATAGRAM_BOUNDS, 0, 0 },
    { "13-bytes", false, make_min16, 0,
      { P16(22, 13) }, {}, NCM_PARSE_DATAGRAM_TOO_SHORT, 0, 0 },
    { "ntb32-1-byte", true, make_min32, 0,
      { P32(36, 1) }, {}, NCM_PARSE_DATAGRAM_TOO_SHORT, 0, 0 },
    { "1515-bytes", false, make_min16, 1543,
      { P16(8, 1543), P16(22, 1515) }, {}, NCM_PARSE_DATAGRAM_TOO_LONG, 0, 0 },
    { "ntb32-1515-bytes", true, make_min32, 1563,
      { P32(8, 1563), P32(36, 1515) }, {}, NCM_PARSE_DATAGRAM_TOO_LONG, 0, 0 },
    { "over-max-datagrams", false, make_many_2, 0, {},
      { 65536, 1514, 1, false }, NCM_PARSE_TOO_MANY_DATAGRAMS, 0, 0 },
    { "over-ncm-max-datagrams", false, make_many_over, 0, {},
      {}, NCM_PARSE_TOO_MANY_DATAGRAMS, 0, 0 },
    { "over-max-across-ndp-chain", false, make_chain_max, 0, {},
      { 65536, 1514, NCM_MAX_NDP_CHAIN - 1, false },
      NCM_PARSE_TOO_MANY_DATAGRAMS, 0, 0 },
};

static NcmParseError run_error_case(const ErrorCase *c, unsigned *ntbs)
{
    const NcmNtbFormat *fmt = c->ntb32 ? &ncm_ntb32_format
                                       : &ncm_ntb16_format;
    g_autofree uint8_t *buf = g_malloc0(ERR_BUF_LEN);
    g_autofree uint8_t *exact = NULL;
    size_t len = c->make(buf);
    const Poke *p;
    NcmParseError err;

    if (c->len) {
        len = c->len;
    }
    g_assert_cmpuint(len, <=, ERR_BUF_LEN);
    for (p = c->pokes; p < c->pokes + G_N_ELEMENTS(c->pokes) && p->width;
         p++) {
        g_assert_cmpuint(p->off + p->width, <=, ERR_BUF_LEN);
        if (p->width == 1) {
            put8(buf, p->off, p->val);
        } else if (p->width == 2) {
            put16(buf, p->off, p->val);
        } else {
            put32(buf, p->off, p->val);
        }
    }
    /* an exactly-sized copy lets ASan see any read past the transfer */
    exact = g_memdup2(buf, len);
    err = transfer(fmt, exact, len,
                   c->limits.max_ntb_len ? &c->limits : &limits_1514, ntbs);
    g_assert_cmpuint(*ntbs, <=, 1);
    return err;
}

static void test_error_case(gconstpointer data)
{
    const ErrorCase *c = data;
    unsigned ntbs;
    NcmParseError err = run_error_case(c, &ntbs);

    g_test_message("got %s, want %s", ncm_parse_error_name(err),
                   ncm_parse_error_name(c->expect));
    g_assert_cmpstr(ncm_parse_error_name(err), ==,
                    ncm_parse_error_name(c->expect));
    g_assert_cmpuint(ntbs, ==, c->ntbs);
    /* a malformed NTB emits nothing, not even its valid datagrams */
    g_assert_cmpuint(sink.n, ==, c->datagrams);
}

static void test_error_codes_all_produced(void)
{
    bool hit[NCM_PARSE_ERROR__MAX] = { false };
    unsigned i, ntbs, missing = 0;

    for (i = 0; i < G_N_ELEMENTS(error_cases); i++) {
        NcmParseError err = run_error_case(&error_cases[i], &ntbs);

        if (err != error_cases[i].expect) {
            g_test_message("%s: got %s", error_cases[i].name,
                           ncm_parse_error_name(err));
        }
        g_assert_cmpint(err, ==, error_cases[i].expect);
        g_assert_cmpint(err, >=, 0);
        g_assert_cmpint(err, <, NCM_PARSE_ERROR__MAX);
        hit[err] = true;
    }
    for (i = 0; i < NCM_PARSE_ERROR__MAX; i++) {
        if (!hit[i]) {
            g_test_message("no test produces %s", ncm_parse_error_name(i));
            missing++;
        }
    }
    g_assert_cmpuint(missing, ==, 0);
}

static void test_error_names(void)
{
    unsigned i, j;

    for (i = 0; i < NCM_PARSE_ERROR__MAX; i++) {
        const char *name = ncm_parse_error_name(i);

        g_assert_nonnull(name);
        g_assert_cmpstr(name, !=, "unknown");
        for (j = 0; j < i; j++) {
            g_assert_cmpstr(name, !=, ncm_parse_error_name(j));
        }
    }
    g_assert_cmpstr(ncm_parse_error_name(NCM_PARSE_ERROR__MAX), ==,
                    "unknown");
    g_assert_cmpstr(ncm_parse_error_name((NcmParseError)-1), ==, "unknown");
}

/*
 * Transfers holding several NTBs
 */

/*
 * The simplest NTB the spec allows, written field by field: NTH, one NDP
 * right after it, datagrams 4-aligned behind the NDP.  Returns its length.
 */
static uint32_t write_ntb(bool ntb32, uint8_t *buf, uint16_t seq,
                          const uint32_t *lens, unsigned n, unsigned seed)
{
    uint32_t nth_len = ntb32 ? 16 : 12;
    uint32_t hdr = ntb32 ? 16 : 8, entry = ntb32 ? 8 : 4;
    uint32_t ndp_len = MAX(hdr + (n + 1) * entry, 2 * hdr);
    uint32_t pos = nth_len + ndp_len;
    unsigned i;

    memset(buf, 0, pos);
    put_sig(buf, 0, ntb32 ? "ncmh" : "NCMH");
    put16(buf, 4, nth_len);
    put16(buf, 6, seq);
    put_sig(buf, nth_len, ntb32 ? "ncm0" : "NCM0");
    put16(buf, nth_len + 4, ndp_len);
    for (i = 0; i < n; i++) {
        uint32_t e = nth_len + hdr + i * entry;

        while (pos % 4) {
            buf[pos++] = 0;
        }
        if (ntb32) {
            put32(buf, e, pos);
            put32(buf, e + 4, lens[i]);
        } else {
            put16(buf, e, pos);
            put16(buf, e + 2, lens[i]);
        }
        fill_frame(buf + pos, seed, i, lens[i]);
        pos += lens[i];
    }
    if (ntb32) {
        put32(buf, 8, pos);
        put32(buf, 12, nth_len);
    } else {
        put16(buf, 8, pos);
        put16(buf, 10, nth_len);
    }
    return pos;
}

static const uint32_t ntb_a_lens[] = { 60, 1514, 14 };
static const uint32_t ntb_b_lens[] = { 99 };
static const uint32_t ntb_c_lens[] = { 1514, 1514, 200, 42 };

/* A, B and C back to back; returns the total and each NTB's start. */
static size_t write_abc(bool ntb32, uint8_t *buf, size_t *starts)
{
    size_t len = 0;

    starts[0] = len;
    len += write_ntb(ntb32, buf + len, 1, ntb_a_lens, 3, 1);
    starts[1] = len;
    len += write_ntb(ntb32, buf + len, 2, ntb_b_lens, 1, 2);
    starts[2] = len;
    len += write_ntb(ntb32, buf + len, 3, ntb_c_lens, 4, 3);
    return len;
}

static void check_abc(const uint8_t *buf, unsigned first, unsigned n_ntbs)
{
    static const struct {
        const uint32_t *lens;
        unsigned n;
    } ntbs[] = {
        { ntb_a_lens, 3 }, { ntb_b_lens, 1 }, { ntb_c_lens, 4 },
    };
    unsigned k, i, d = first;

    for (k = 0; k < n_ntbs; k++) {
        for (i = 0; i < ntbs[k].n; i++, d++) {
            g_assert_cmpuint(d, <, sink.n);
            g_assert_cmpuint(sink.dlen[d], ==, ntbs[k].lens[i]);
            assert_frame(buf + sink.off[d], k + 1, i, sink.dlen[d]);
        }
    }
    g_assert_cmpuint(d, ==, sink.n);
}

static void check_back_to_back(bool ntb32)
{
    const NcmNtbFormat *fmt = ntb32 ? &ncm_ntb32_format : &ncm_ntb16_format;
    g_autofree uint8_t *buf = g_malloc0(16384);
    size_t starts[3], len = write_abc(ntb32, buf, starts);
    unsigned ntbs;

    g_assert_cmpint(transfer(fmt, buf, len, &limits_1514, &ntbs), ==,
                    NCM_PARSE_OK);
    g_assert_cmpuint(ntbs, ==, 3);
    check_abc(buf, 0, 3);
    /* the last NTB's sequence number is what the scratch view holds */
    g_assert_cmpuint(view.sequence, ==, 3);
    g_assert_cmpuint(sink.off[0], >, starts[0]);
    g_assert_cmpuint(sink.off[3], >, starts[1]);
    g_assert_cmpuint(sink.off[4], >, starts[2]);

    /* and once more with the Windows pad behind the last NTB */
    g_assert_cmpint(transfer(fmt, buf, len + 1, &limits_1514, &ntbs), ==,
                    NCM_PARSE_OK);
    g_assert_cmpuint(ntbs, ==, 3);
    check_abc(buf, 0, 3);
}

static void test_transfer_back_to_back16(void)
{
    check_back_to_back(false);
}

static void test_transfer_back_to_back32(void)
{
    check_back_to_back(true);
}

/*
 * The second NTB's first datagram is fine and its second is 13 bytes: only
 * the first NTB's datagrams may come out.
 */
static void check_malformed_second(bool ntb32)
{
    const NcmNtbFormat *fmt = ntb32 ? &ncm_ntb32_format : &ncm_ntb16_format;
    uint32_t nth_len = ntb32 ? 16 : 12;
    g_autofree uint8_t *buf = g_malloc0(16384);
    size_t starts[3], len = write_abc(ntb32, buf, starts);
    unsigned ntbs;

    /* NTB B becomes two datagrams: 99 bytes and 13 bytes */
    len = write_ntb(ntb32, buf + starts[1], 2, (const uint32_t[]){ 99, 13 },
                    2, 2) + starts[1];
    g_assert_cmpint(transfer(fmt, buf, len, &limits_1514, &ntbs), ==,
                    NCM_PARSE_DATAGRAM_TOO_SHORT);
    g_assert_cmpuint(ntbs, ==, 1);
    check_abc(buf, 0, 1);

    /* same with NTB B's NTH signature broken */
    len = write_abc(ntb32, buf, starts);
    buf[starts[1]] ^= 0x20;
    g_assert_cmpint(transfer(fmt, buf, len, &limits_1514, &ntbs), ==,
                    NCM_PARSE_NTH_SIGNATURE);
    g_assert_cmpuint(ntbs, ==, 1);
    check_abc(buf, 0, 1);

    /* and with NTB C's NDP chaining to itself: A and B come out */
    len = write_abc(ntb32, buf, starts);
    put16(buf, starts[2] + nth_len + (ntb32 ? 8 : 6), nth_len);
    g_assert_cmpint(transfer(fmt, buf, len, &limits_1514, &ntbs), ==,
                    NCM_PARSE_NDP_CHAIN_LOOP);
    g_assert_cmpuint(ntbs, ==, 2);
    check_abc(buf, 0, 2);
}

static void test_transfer_malformed_second16(void)
{
    check_malformed_second(false);
}

static void test_transfer_malformed_second32(void)
{
    check_malformed_second(true);
}

/* wBlockLength 0 in a later NTB16 swallows the rest of the transfer. */
static void test_transfer_zero_block_len_last(void)
{
    g_autofree uint8_t *buf = g_malloc0(16384);
    size_t starts[3], len = write_abc(false, buf, starts);
    unsigned ntbs;

    put16(buf, starts[1] + 8, 0);
    g_assert_cmpint(transfer(&ncm_ntb16_format, buf, len, &limits_1514,
                             &ntbs), ==, NCM_PARSE_OK);
    g_assert_cmpuint(ntbs, ==, 2);
    g_assert_cmpuint(view.block_len, ==, len - starts[1]);
    check_abc(buf, 0, 2);
}

static void test_transfer_empty(void)
{
    uint8_t byte = 0;
    unsigned ntbs;

    g_assert_cmpint(transfer(&ncm_ntb16_format, &byte, 0, &limits_1514,
                             &ntbs), ==, NCM_PARSE_OK);
    g_assert_cmpuint(ntbs, ==, 0);
    g_assert_cmpuint(sink.n, ==, 0);
    /* a lone zero byte is a pad, not a truncated NTH */
    g_assert_cmpint(transfer(&ncm_ntb16_format, &byte, 1, &limits_1514,
                             &ntbs), ==, NCM_PARSE_OK);
    g_assert_cmpuint(ntbs, ==, 0);
    /* ntbs_out is optional */
    sink_reset(golden_ntb16_min, sizeof(golden_ntb16_min));
    g_assert_cmpint(ncm_transfer_parse(&ncm_ntb16_format, golden_ntb16_min,
                                       sizeof(golden_ntb16_min),
                                       &limits_1514, &view, sink_emit, &sink,
                                       NULL), ==, NCM_PARSE_OK);
    g_assert_cmpuint(sink.n, ==, 1);
}

/*
 * CRC mode (NCM 1.0 6.2.13): NCM1/ncm1 NDPs, each datagram followed by
 * its CRC-32, which wDatagramLength includes.
 */

static void test_crc32_check_value(void)
{
    static const uint8_t buf[300] = { 1, 2, 3 };

    /* the CRC-32 catalogue's check value */
    g_assert_cmphex(ncm_crc32((const uint8_t *)"123456789", 9), ==,
                    0xcbf43926);
    g_assert_cmphex(ncm_crc32(buf, sizeof(buf)), ==,
                    ncm_host_crc32(buf, sizeof(buf)));
    g_assert_cmphex(ncm_crc32(buf, 0), ==, 0);
    g_assert_cmphex(ncm_host_crc32((const uint8_t *)"123456789", 9), ==,
                    0xcbf43926);
}

/*
 * The host side the qtests and fuzz targets build and read NTBs with
 * (tests/qtest/libqos/ncm-host.c) against this codec: every layout a
 * host may choose parses here to the frames it was built from, and
 * back through the host side's own parser; a wrong CRC fails both.
 */
static void test_host_side_layouts(void)
{
    static const uint32_t lens[] = { 60, 1514, 14, 333 };
    unsigned combo, i, k;

    for (combo = 0; combo < 32; combo++) {
        bool wide = combo & 8;
        NcmHostLayout l = {
            .ntb32 = combo & 1, .crc = combo & 2, .ndp_last = combo & 4,
            .ndp_alignment = wide ? 16 : 4, .divisor = wide ? 64 : 4,
            .remainder = wide ? 14 : 0,
        };
        const NcmNtbFormat *fmt = l.ntb32 ? &ncm_ntb32_format
                                          : &ncm_ntb16_format;
        NcmParseLimits lim = limits_1514;
        g_autoptr(GPtrArray) frames =
            g_ptr_array_new_with_free_func((GDestroyNotify)g_byte_array_unref);
        g_autoptr(GPtrArray) parsed =
            g_ptr_array_new_with_free_func((GDestroyNotify)g_byte_array_unref);
        g_autoptr(GByteArray) ntb = NULL;
        bool bad = combo & 16 && l.crc;
        char why[128];

        for (i = 0; i < G_N_ELEMENTS(lens); i++) {
            GByteArray *f = g_byte_array_sized_new(lens[i] + 4);

            for (k = 0; k < lens[i]; k++) {
                uint8_t v = i * 31 + k;

                g_byte_array_append(f, &v, 1);
            }
            if (l.crc) {
                ncm_frame_append_crc(f, bad && i == 2);
            }
            g_ptr_array_add(frames, f);
        }
        ntb = ncm_ntb_build(&l, frames, 7);
        lim.crc = l.crc;
        g_assert_cmpint(ncm_ntb_parse_one(fmt, ntb->data, ntb->len, &lim,
                                          &view), ==, NCM_PARSE_OK);
        g_assert_cmpuint(view.n_datagrams, ==, G_N_ELEMENTS(lens));
        for (i = 0; i < G_N_ELEMENTS(lens); i++) {
            GByteArray *f = g_ptr_array_index(frames, i);
            const uint8_t *d = ntb->data + view.datagrams[i].offset;

            g_assert_cmpuint(view.datagrams[i].len, ==, lens[i]);
            g_assert_cmpmem(d, lens[i], f->data, lens[i]);
            g_assert_cmpuint(view.datagrams[i].offset % l.divisor, ==,
                             l.remainder);
            if (l.crc) {
                g_assert_true(ncm_datagram_crc_ok(d, lens[i]) ==
                              !(bad && i == 2));
            }
        }
        if (bad) {
            g_assert_false(ncm_ntb_parse(&l, ntb->data, ntb->len, parsed,
                                         why, sizeof(why)));
            g_assert_nonnull(strstr(why, "datagram 2: CRC-32"));
            continue;
        }
        g_assert_true(ncm_ntb_parse(&l, ntb->data, ntb->len, parsed, why,
                                    sizeof(why)));
        g_assert_cmpuint(parsed->len, ==, G_N_ELEMENTS(lens));
        for (i = 0; i < G_N_ELEMENTS(lens); i++) {
            GByteArray *f = g_ptr_array_index(frames, i);
            GByteArray *p = g_ptr_array_index(parsed, i);

            g_assert_cmpmem(p->data, p->len, f->data, lens[i]);
        }
        /* the other format's signature is refused, naming the NDP */
        l.ntb32 = !l.ntb32;
        g_ptr_array_set_size(parsed, 0);
        g_assert_false(ncm_ntb_parse(&l, ntb->data, ntb->len, parsed, why,
                                     sizeof(why)));
        g_assert_nonnull(strstr(why, "NTH signature"));
    }
}

/*
 * write_ntb() with an NCM1/ncm1 NDP (or @sig) and a CRC-32 after every
 * datagram; wDatagramLength = lens[i] + 4.  @bad_crc: datagram whose CRC
 * is off by one bit (-1: none).
 */
static uint32_t write_crc_ntb(bool ntb32, uint8_t *buf, const char *sig,
                              const uint32_t *lens, unsigned n, int bad_crc)
{
    uint32_t nth_len = ntb32 ? 16 : 12;
    uint32_t hdr = ntb32 ? 16 : 8, entry = ntb32 ? 8 : 4;
    uint32_t ndp_len = MAX(hdr + (n + 1) * entry, 2 * hdr);
    uint32_t pos = nth_len + ndp_len;
    unsigned i;

    memset(buf, 0, pos);
    put_sig(buf, 0, ntb32 ? "ncmh" : "NCMH");
    put16(buf, 4, nth_len);
    put_sig(buf, nth_len, sig ? sig : ntb32 ? "ncm1" : "NCM1");
    put16(buf, nth_len + 4, ndp_len);
    for (i = 0; i < n; i++) {
        uint32_t e = nth_len + hdr + i * entry;
        uint32_t crc;

        while (pos % 4) {
            buf[pos++] = 0;
        }
        if (ntb32) {
            put32(buf, e, pos);
            put32(buf, e + 4, lens[i] + 4);
        } else {
            put16(buf, e, pos);
            put16(buf, e + 2, lens[i] + 4);
        }
        fill_frame(buf + pos, 9, i, lens[i]);
        crc = ncm_host_crc32(buf + pos, lens[i]);
        put32(buf, pos + lens[i], crc ^ ((int)i == bad_crc));
        pos += lens[i] + 4;
    }
    if (ntb32) {
        put32(buf, 8, pos);
        put32(buf, 12, nth_len);
    } else {
        put16(buf, 8, pos);
        put16(buf, 10, nth_len);
    }
    return pos;
}

static const NcmParseLimits limits_crc = {
    .max_ntb_len = 65536, .max_datagram_len = 1514, .max_datagrams = 0,
    .crc = true,
};

static void check_crc_parse(bool ntb32)
{
    const NcmNtbFormat *fmt = ntb32 ? &ncm_ntb32_format : &ncm_ntb16_format;
    static const uint32_t lens[] = { 60, 1514, 14, 333 };
    g_autofree uint8_t *buf = g_malloc0(16384);
    NcmParseLimits no_crc = limits_crc;
    uint32_t len;
    unsigned i;

    len = write_crc_ntb(ntb32, buf, NULL, lens, 4, 2);
    g_assert_cmpint(ncm_ntb_parse_one(fmt, buf, len, &limits_crc, &view),
                    ==, NCM_PARSE_OK);
    g_assert_cmpuint(view.n_datagrams, ==, 4);
    for (i = 0; i < 4; i++) {
        /* the length comes without the CRC; the CRC follows */
        g_assert_cmpuint(view.datagrams[i].len, ==, lens[i]);
        assert_frame(buf + view.datagrams[i].offset, 9, i, lens[i]);
        g_assert_cmpint(ncm_datagram_crc_ok(buf + view.datagrams[i].offset,
                                            lens[i]), ==, i != 2);
    }
    /* a CRC NDP when CRC mode is off, and NCM0 when it is on */
    no_crc.crc = false;
    g_assert_cmpint(ncm_ntb_parse_one(fmt, buf, len, &no_crc, &view),
                    ==, NCM_PARSE_NDP_SIGNATURE);
    len = write_crc_ntb(ntb32, buf, ntb32 ? "ncm0" : "NCM0", lens, 4, -1);
    g_assert_cmpint(ncm_ntb_parse_one(fmt, buf, len, &limits_crc, &view),
                    ==, NCM_PARSE_NDP_SIGNATURE);
    /* the other format's CRC signature */
    len = write_crc_ntb(ntb32, buf, ntb32 ? "NCM1" : "ncm1", lens, 4, -1);
    g_assert_cmpint(ncm_ntb_parse_one(fmt, buf, len, &limits_crc, &view),
                    ==, NCM_PARSE_NDP_SIGNATURE);
}

static void test_crc_parse16(void)
{
    check_crc_parse(false);
}

static void test_crc_parse32(void)
{
    check_crc_parse(true);
}

/*
 * Datagram lengths around the CRC: shorter than the CRC itself, shorter
 * than a header plus CRC, and a payload of exactly / one over the maximum.
 */
static void test_crc_lengths(void)
{
    static const struct {
        uint32_t dlen;          /* wDatagramLength written */
        NcmParseError err;
    } cases[] = {
        { 3, NCM_PARSE_DATAGRAM_TOO_SHORT },
        { 4, NCM_PARSE_DATAGRAM_TOO_SHORT },
        { 17, NCM_PARSE_DATAGRAM_TOO_SHORT },
        { 18, NCM_PARSE_OK },
        { 1518, NCM_PARSE_OK },
        { 1519, NCM_PARSE_DATAGRAM_TOO_LONG },
    };
    static const uint32_t lens[] = { 1515 };
    g_autofree uint8_t *buf = g_malloc0(4096);
    unsigned i;

    for (i = 0; i < ARRAY_SIZE(cases); i++) {
        uint32_t len = write_crc_ntb(false, buf, NULL, lens, 1, -1);

        /* the NTB holds 1519 bytes there; only the length field varies */
        put16(buf, 12 + 8 + 2, cases[i].dlen);
        g_test_message("wDatagramLength %u", cases[i].dlen);
        g_assert_cmpint(ncm_ntb_parse_one(&ncm_ntb16_format, buf, len,
                                          &limits_crc, &view),
                        ==, cases[i].err);
        if (cases[i].err == NCM_PARSE_OK) {
            g_assert_cmpuint(view.datagrams[0].len, ==, cases[i].dlen - 4);
        }
    }
}

/* The builder in CRC mode: NCM1/ncm1, lengths + 4, a CRC after each. */
static void check_crc_build(bool ntb32)
{
    const NcmNtbFormat *fmt = ntb32 ? &ncm_ntb32_format : &ncm_ntb16_format;
    static const uint32_t lens[] = { 14, 1514, 61 };
    NcmNtbLayout layout = {
        .max_len = 8192, .divisor = 4, .ndp_alignment = 4, .crc = true,
    };
    g_autofree NcmNtbBuilder *b = g_new0(NcmNtbBuilder, 1);
    g_autofree uint8_t *buf = g_malloc0(8192);
    g_autofree uint8_t *src = g_malloc0(1514);
    uint32_t total, ndp, e, i;
    unsigned fs = fmt->field_size;

    ncm_ntb_builder_init(b, fmt, &layout, buf);
    for (i = 0; i < ARRAY_SIZE(lens); i++) {
        fill_frame(src, 5, i, lens[i]);
        g_assert(ncm_ntb_builder_append(b, src, lens[i]));
    }
    total = ncm_ntb_builder_finish(b, 7);
    g_assert_cmpuint(total, >, 0);
    ndp = ntb32 ? get32(buf, 12) : get16(buf, 10);
    g_assert_cmpmem(buf + ndp, 4, ntb32 ? "ncm1" : "NCM1", 4);
    for (i = 0; i < ARRAY_SIZE(lens); i++) {
        uint32_t off, dlen;

        e = ndp + fmt->ndp_header_len + i * 2 * fs;
        off = ntb32 ? get32(buf, e) : get16(buf, e);
        dlen = ntb32 ? get32(buf, e + 4) : get16(buf, e + 2);
        g_assert_cmpuint(dlen, ==, lens[i] + 4);
        assert_frame(buf + off, 5, i, lens[i]);
        g_assert_cmphex(get32(buf, off + lens[i]), ==,
                        ncm_host_crc32(buf + off, lens[i]));
    }
    /* and the parser takes it back */
    g_assert_cmpint(ncm_ntb_parse_one(fmt, buf, total, &limits_crc, &view),
                    ==, NCM_PARSE_OK);
    g_assert_cmpuint(view.n_datagrams, ==, ARRAY_SIZE(lens));
}

static void test_crc_build16(void)
{
    check_crc_build(false);
}

static void test_crc_build32(void)
{
    check_crc_build(true);
}

/* The 4 CRC bytes count against the NTB: what fits without does not. */
static void test_crc_build_room(void)
{
    NcmNtbLayout layout = {
        .max_len = 2048, .divisor = 4, .ndp_alignment = 4,
    };
    g_autofree NcmNtbBuilder *b = g_new0(NcmNtbBuilder, 1);
    g_autofree uint8_t *buf = g_malloc0(2048);
    /* NTH 12 + datagram at 12 + NDP16 of 16 bytes at the end: 2048 */
    uint32_t exact = 2048 - 12 - 16;

    ncm_ntb_builder_init(b, &ncm_ntb16_format, &layout, buf);
    g_assert(ncm_ntb_builder_fits(b, exact));
    layout.crc = true;
    ncm_ntb_builder_init(b, &ncm_ntb16_format, &layout, buf);
    g_assert(!ncm_ntb_builder_fits(b, exact));
    g_assert(ncm_ntb_builder_fits(b, exact - 4));
}

int main(int argc, char **argv)
{
    unsigned i;

    g_test_init(&argc, &argv, NULL);

    g_test_add_func("/ncm-ntb/golden/parse/ntb16-minimal-one-datagram",
                    test_golden_parse_ntb16_min);
    g_test_add_func("/ncm-ntb/golden/parse/ntb32-minimal-one-datagram",
                    test_golden_parse_ntb32_min);
    g_test_add_func("/ncm-ntb/golden/parse/linux-cdc-ncm-out-16k-40-datagrams",
                    test_golden_parse_linux_out);
    g_test_add_func("/ncm-ntb/golden/parse/ntb16-64k-block-length-0",
                    test_golden_parse_ntb16_64k_zero_block_len);
    g_test_add_func("/ncm-ntb/golden/build/ntb16-div4-rem2-two-datagrams",
                    test_golden_build_ntb16);
    g_test_add_func("/ncm-ntb/golden/build/ntb32-div8-align8-two-datagrams",
                    test_golden_build_ntb32);
    g_test_add_func("/ncm-ntb/golden/build/ntb16-empty-writes-nothing",
                    test_golden_build_empty);
    g_test_add_func("/ncm-ntb/golden/build/ntb16-64k-writes-block-length-0",
                    test_golden_build_ntb16_64k);

    for (i = 0; i < G_N_ELEMENTS(roundtrips); i++) {
        g_autofree char *p16 = g_strdup_printf("/ncm-ntb/roundtrip/ntb16/%s",
                                               roundtrips[i].name);
        g_autofree char *p32 = g_strdup_printf("/ncm-ntb/roundtrip/ntb32/%s",
                                               roundtrips[i].name);

        g_test_add_data_func(p16, &roundtrips[i], test_roundtrip16);
        g_test_add_data_func(p32, &roundtrips[i], test_roundtrip32);
    }
    g_test_add_func("/ncm-ntb/roundtrip/random-layouts",
                    test_roundtrip_random_layouts);

    g_test_add_func("/ncm-ntb/builder/fits-and-reserve-refuse-when-full",
                    test_builder_full);
    g_test_add_func("/ncm-ntb/builder/stops-at-max-datagrams",
                    test_builder_max_datagrams);
    g_test_add_func("/ncm-ntb/builder/refuses-length-that-wraps-offset",
                    test_builder_wrapping_length);
    g_test_add_func("/ncm-ntb/builder/reinit-leaves-nothing-behind",
                    test_builder_reinit);

    for (i = 0; i < G_N_ELEMENTS(error_cases); i++) {
        g_autofree char *path =
            g_strdup_printf("/ncm-ntb/parse/%s/%s",
                            ncm_parse_error_name(error_cases[i].expect),
                            error_cases[i].name);

        g_test_add_data_func(path, &error_cases[i], test_error_case);
    }
    g_test_add_func("/ncm-ntb/parse-table/every-code-produced",
                    test_error_codes_all_produced);
    g_test_add_func("/ncm-ntb/parse-table/error-names-distinct",
                    test_error_names);

    g_test_add_func("/ncm-ntb/transfer/back-to-back-ntb16",
                    test_transfer_back_to_back16);
    g_test_add_func("/ncm-ntb/transfer/back-to-back-ntb32",
                    test_transfer_back_to_back32);
    g_test_add_func("/ncm-ntb/transfer/malformed-second-ntb16",
                    test_transfer_malformed_second16);
    g_test_add_func("/ncm-ntb/transfer/malformed-second-ntb32",
                    test_transfer_malformed_second32);
    g_test_add_func("/ncm-ntb/transfer/block-length-0-takes-the-rest",
                    test_transfer_zero_block_len_last);
    g_test_add_func("/ncm-ntb/crc/crc32-check-value",
                    test_crc32_check_value);
    g_test_add_func("/ncm-ntb/host-side/every-layout",
                    test_host_side_layouts);
    g_test_add_func("/ncm-ntb/crc/parse-ntb16", test_crc_parse16);
    g_test_add_func("/ncm-ntb/crc/parse-ntb32", test_crc_parse32);
    g_test_add_func("/ncm-ntb/crc/datagram-lengths", test_crc_lengths);
    g_test_add_func("/ncm-ntb/crc/build-ntb16", test_crc_build16);
    g_test_add_func("/ncm-ntb/crc/build-ntb32", test_crc_build32);
    g_test_add_func("/ncm-ntb/crc/build-room-for-crc", test_crc_build_room);
    g_test_add_func("/ncm-ntb/transfer/empty-and-pad-only",
                    test_transfer_empty);

    return g_test_run();
}
