/*
 * qemu-fuzz target usb-ncm-dl-ntb-roundtrip: USB CDC-NCM IN NTB builder,
 * checked by the parser
 *
 * Input:
 *   byte 0     bit 0 NTB32; bits 1-3 wNdpInAlignment 4 << n;
 *              bits 4-5 maximum datagram size; bits 6-7 content seed
 *   bytes 1-2  NTB input size: 2048 + n (NTB16) or 2048 + 4n (NTB32)
 *   bytes 3-4  wNdpInDivisor (any value, 0 included)
 *   bytes 5-6  wNdpInPayloadRemainder (any value)
 *   byte 7     wNtbInMaxDatagrams (0 = no limit)
 *   then       16-bit datagram sizes, each mapped to 14..maximum, until
 *              4 NTB sizes or 4 * NCM_MAX_DATAGRAMS datagrams were offered
 *              (more only repeats the same paths, slowly)
 *
 * Datagrams go into an NTB until the builder refuses one; that NTB is
 * finished and checked, and the refused datagram starts the next.  Each
 * NTB must parse back to exactly the datagrams put in, at offsets that
 * honour divisor/remainder, with its NDP aligned, no byte outside NTH,
 * NDP and datagrams left non-zero, and no byte written past the size.
 *
 * The layout is kept inside what NCM 1.0 allows a device to advertise
 * (sizes >= 2048, power-of-two alignment): the builder assumes both and
 * does not check them.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/module.h"
#include "hw/usb/ncm-ntb.h"
#include "tests/qtest/libqtest.h"
#include "fuzz.h"

static const uint32_t datagram_sizes[4] = { 1514, 9014, 16384, 65535 };

typedef struct Run {
    const NcmNtbFormat *fmt;
    NcmNtbLayout layout;
    uint32_t max_len;           /* after the NTB16 clamp */
    uint32_t max_datagram;
    unsigned seed;
    unsigned ntb;               /* NTBs finished so far */
    uint8_t *buf;               /* exactly max_len bytes */
    uint8_t *copy;              /* max_len + 1, for the transfer walk */
    NcmNtbBuilder b;
    uint32_t n;
    uint32_t off[NCM_MAX_DATAGRAMS];
    uint32_t len[NCM_MAX_DATAGRAMS];
} Run;

static Run run;
static NcmNtbView view;
static unsigned emitted;
/* datagram i starts at table[start(i)]: bytes differ along the datagram */
static uint8_t table[256 + 65536];
static const uint8_t zeros[65536];

static void fail(const char *what, unsigned long a, unsigned long b)
{
    fprintf(stderr, "usb-ncm-dl-ntb-roundtrip: %s (%lu, %lu) in %s NTB %u: "
            "max_len %u divisor %u remainder %u alignment %u max %u\n",
            what, a, b, run.fmt->name, run.ntb, run.max_len,
            run.layout.divisor, run.layout.remainder,
            run.layout.ndp_alignment, run.layout.max_datagrams);
    abort();
}

static const uint8_t *pattern(unsigned i)
{
    return table + (uint8_t)(run.seed * 89 + run.ntb * 7 + i * 29);
}

static uint32_t get_field(const uint8_t *p, unsigned size)
{
    uint32_t v = p[0] | (p[1] << 8);

    if (size == 4) {
        v |= (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    }
    return v;
}

/* Alignment gaps must be zero: no stale bytes may leave the device. */
static void check_gap(uint32_t from, uint32_t to)
{
    uint32_t n;

    if (from > to) {
        fail("regions overlap", from, to);
    }
    for (; from < to; from += n) {
        n = MIN(to - from, sizeof(zeros));
        if (memcmp(run.buf + from, zeros, n)) {
            fail("stale bytes in a gap", from, to);
        }
    }
}

static void count_emit(void *opaque, const uint8_t *data, size_t len)
{
    const uint8_t *base = opaque;
    uint32_t i = emitted++;

    if (i >= run.n || data != base + run.off[i] || len != run.len[i]) {
        fail("transfer walk emitted something else", i, len);
    }
}

static void finish_and_check(void)
{
    const NcmNtbFormat *fmt = run.fmt;
    unsigned fs = fmt->field_size;
    uint32_t div = run.layout.divisor ? run.layout.divisor : 1;
    uint32_t total, ndp, ndp_len, block_len, end, i;
    NcmParseLimits limits = {
        .max_ntb_len = run.max_len,
        .max_datagram_len = run.max_datagram,
        .max_datagrams = run.layout.max_datagrams,
    };
    NcmParseError err;
    unsigned ntbs;
    size_t tlen;

    total = ncm_ntb_builder_finish(&run.b, run.ntb);
    if (run.b.n_datagrams == 0) {
        if (total != 0) {
            fail("empty NTB written", total, 0);
        }
        return;
    }
    if (total > run.max_len || total < fmt->nth_len + fmt->ndp_min_len) {
        fail("NTB length", total, run.max_len);
    }
    block_len = get_field(run.buf + fmt->nth_block_len_off, fs);
    ndp = get_field(run.buf + fmt->nth_ndp_index_off, fs);
    if (block_len != total && !(fs == 2 && total == 65536 && !block_len)) {
        fail("block length", block_len, total);
    }
    if (ndp % run.layout.ndp_alignment || ndp > total - fmt->ndp_min_len) {
        fail("NDP index", ndp, run.layout.ndp_alignment);
    }
    ndp_len = get_field(run.buf + ndp + 4, 2);
    if (ndp + ndp_len != total) {
        fail("NDP does not end the NTB", ndp + ndp_len, total);
    }
    if (run.layout.max_datagrams && run.n > run.layout.max_datagrams) {
        fail("too many datagrams", run.n, run.layout.max_datagrams);
    }

    /* NTH, datagrams in the order they came, NDP */
    end = fmt->nth_len;
    for (i = 0; i < run.n; i++) {
        if (run.off[i] % div != run.layout.remainder % div) {
            fail("datagram offset % divisor", run.off[i], div);
        }
        check_gap(end, run.off[i]);
        end = run.off[i] + run.len[i];
    }
    check_gap(end, ndp);

    err = ncm_ntb_parse_one(fmt, run.buf, total, &limits, &view);
    if (err != NCM_PARSE_OK) {
        fprintf(stderr, "parse: %s\n", ncm_parse_error_name(err));
        fail("built NTB does not parse", err, total);
    }
    if (view.block_len != total || view.n_datagrams != run.n ||
        view.sequence != (run.ntb & 0xffff)) {
        fail("parsed NTB differs", view.n_datagrams, run.n);
    }
    for (i = 0; i < run.n; i++) {
        const uint8_t *p = run.buf + view.datagrams[i].offset;

        if (view.datagrams[i].offset != run.off[i] ||
            view.datagrams[i].len != run.len[i]) {
            fail("parsed datagram differs", i, view.datagrams[i].offset);
        }
        if (memcmp(p, pattern(i), run.len[i])) {
            fail("datagram bytes differ", i, run.len[i]);
        }
    }

    /* the same NTB through the transfer walk, Windows pad included */
    tlen = total;
    memcpy(run.copy, run.buf, total);
    if (block_len) {
        run.copy[tlen++] = 0;
    }
    emitted = 0;
    err = ncm_transfer_parse(fmt, run.copy, tlen, &limits, &view,
                             count_emit, run.copy, &ntbs);
    if (err != NCM_PARSE_OK || ntbs != 1 || emitted != run.n) {
        fail("transfer walk", err, emitted);
    }

    run.ntb++;
    run.n = 0;
    ncm_ntb_builder_init(&run.b, fmt, &run.layout, run.buf);
}

/* Offer one datagram; false when even an empty NTB cannot take it. */
static bool offer(uint32_t len)
{
    bool fits = ncm_ntb_builder_fits(&run.b, len);
    uint8_t *p = ncm_ntb_builder_reserve(&run.b, len);

    if (fits != (p != NULL)) {
        fail("fits() and reserve() disagree", fits, len);
    }
    if (!p) {
        if (run.n == 0) {
            return false;
        }
        finish_and_check();
        return offer(len);
    }
    if (p < run.buf + run.b.fmt->nth_len || len > run.max_len ||
        (uint32_t)(p - run.buf) > run.max_len - len) {
        fail("reserve() outside the buffer", p - run.buf, len);
    }
    if (run.n >= NCM_MAX_DATAGRAMS) {
        fail("more than NCM_MAX_DATAGRAMS accepted", run.n, len);
    }
    run.off[run.n] = p - run.buf;
    run.len[run.n] = len;
    memcpy(p, pattern(run.n), len);
    run.n++;
    return true;
}

static void ntb_roundtrip_fuzz(QTestState *s, const unsigned char *data,
                               size_t size)
{
    size_t pos, budget;
    uint32_t v;

    if (size < 8) {
        return;
    }
    if (!table[1]) {
        for (pos = 0; pos < sizeof(table); pos++) {
            table[pos] = pos + (pos >> 8) + 1;
        }
    }
    run.fmt = data[0] & 1 ? &ncm_ntb32_format : &ncm_ntb16_format;
    run.layout.ndp_alignment = 4 << ((data[0] >> 1) & 7);
    run.max_datagram = datagram_sizes[(data[0] >> 4) & 3];
    run.seed = data[0] >> 6;
    v = data[1] | (data[2] << 8);
    run.layout.max_len = NCM_NTB_MIN_SIZE + (data[0] & 1 ? 4 * v : v);
    run.layout.divisor = data[3] | (data[4] << 8);
    run.layout.remainder = data[5] | (data[6] << 8);
    run.layout.max_datagrams = data[7];
    run.max_len = MIN(run.layout.max_len, run.fmt->max_block_len);
    run.ntb = 0;
    run.n = 0;

    /* exact sizes, so that ASan catches a write past max_len */
    run.buf = malloc(run.max_len);
    run.copy = malloc(run.max_len + 1);
    if (!run.buf || !run.copy) {
        abort();
    }
    memset(run.buf, 0xa5, run.max_len);
    ncm_ntb_builder_init(&run.b, run.fmt, &run.layout, run.buf);

    budget = 4 * (size_t)run.max_len;
    for (pos = 8; pos + 1 < size && pos < 8 + 8 * NCM_MAX_DATAGRAMS;
         pos += 2) {
        v = NCM_ETH_HEADER_LEN + (data[pos] | (data[pos + 1] << 8)) %
            (run.max_datagram - 13);
        if (v > budget) {
            break;
        }
        budget -= v;
        offer(v);
    }
    /* the last NTB, possibly empty */
    finish_and_check();

    free(run.buf);
    free(run.copy);
}

/*
 * The codec needs no machine: the target runs it on "-machine none", so
 * that it is built, run and fuzzed (by OSS-Fuzz too) like the device's
 * own targets, with QEMU's headers and instrumentation.
 */
static GString *ntb_roundtrip_fuzz_cmdline(FuzzTarget *t)
{
    return g_string_new(TARGET_NAME " -machine none -nodefaults"
                        " -display none");
}

static void register_ntb_roundtrip_fuzz(void)
{
    fuzz_add_target(&(FuzzTarget){
        .name = "usb-ncm-dl-ntb-roundtrip",
        .description = "Build USB CDC-NCM IN NTBs with the usb-ncm-dl codec "
                       "and check that they parse back to what went in",
        .get_init_cmdline = ntb_roundtrip_fuzz_cmdline,
        .fuzz = ntb_roundtrip_fuzz,
    });
}

fuzz_target_init(register_ntb_roundtrip_fuzz);
