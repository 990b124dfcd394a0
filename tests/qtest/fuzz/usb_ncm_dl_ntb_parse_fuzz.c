/*
 * qemu-fuzz target usb-ncm-dl-ntb-parse: USB CDC-NCM OUT transfer parser
 *
 * Input: one selector byte, then the transfer as the host would send it.
 *   bit 0      NTB32 instead of NTB16
 *   bits 1-3   dwNtbOutMaxSize, from ntb_sizes[]
 *   bits 4-5   maximum datagram size, from datagram_sizes[]
 *   bits 6-7   wNtbOutMaxDatagrams, from max_datagrams[]
 * CRC mode (NCM1/ncm1 NDPs, a CRC-32 after every datagram) when bit 15 of
 * the first NTH's wSequence is set (the parser ignores wSequence).
 *
 * Besides letting ASan/UBSan watch the parser, every emitted datagram must
 * lie inside the transfer and respect the limits, and the transfer walk
 * must agree with ncm_ntb_parse_one() run NTB by NTB: same datagrams, same
 * stopping point, same error, nothing emitted from a malformed NTB.
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

static const uint32_t ntb_sizes[8] = {
    2048, 4096, 16384, 32768, 65536, 65537, 1 << 20, UINT32_MAX,
};
static const uint32_t datagram_sizes[4] = { 1514, 1518, 9014, 65535 };
static const uint16_t max_datagrams[4] = { 0, 1, 40, NCM_MAX_DATAGRAMS };

typedef struct Emitted {
    const uint8_t *data;
    size_t len;
} Emitted;

typedef struct Ctx {
    const uint8_t *buf;
    size_t len;
    const NcmParseLimits *limits;
    Emitted *out;
    size_t n, cap;
} Ctx;

/* written so that the reads of each datagram's ends cannot be dropped */
static volatile uint8_t touch;

static void fail(const char *what, size_t a, size_t b)
{
    fprintf(stderr, "usb-ncm-dl-ntb-parse: %s (%zu, %zu)\n", what, a, b);
    abort();
}

static void emit(void *opaque, const uint8_t *data, size_t len)
{
    Ctx *c = opaque;

    /* in CRC mode the CRC follows the datagram, inside the transfer */
    size_t whole = len + (c->limits->crc ? NCM_CRC_LEN : 0);

    if (data < c->buf || whole > c->len ||
        (size_t)(data - c->buf) > c->len - whole) {
        fail("datagram outside the transfer", data - c->buf, len);
    }
    if (c->limits->crc) {
        /* reads the 4 bytes after it: ASan checks they are there */
        touch ^= ncm_datagram_crc_ok(data, len);
    }
    if (len < NCM_ETH_HEADER_LEN || len > c->limits->max_datagram_len) {
        fail("datagram length outside the limits", len,
             c->limits->max_datagram_len);
    }
    /* make ASan look at both ends */
    touch = data[0] ^ data[len - 1];
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 256;
        c->out = realloc(c->out, c->cap * sizeof(*c->out));
        if (!c->out) {
            abort();
        }
    }
    c->out[c->n].data = data;
    c->out[c->n].len = len;
    c->n++;
}

static void ntb_parse_fuzz(QTestState *s, const unsigned char *data,
                           size_t size)
{
    static NcmNtbView scratch, view;
    const NcmNtbFormat *fmt;
    NcmParseLimits limits;
    NcmParseError err, err1 = NCM_PARSE_OK;
    const uint8_t *buf;
    size_t len, off = 0, k = 0, min_ntb;
    unsigned ntbs = ~0u, i, walked = 0;
    uint32_t maxd;
    Ctx c = { 0 };

    if (size < 1) {
        return;
    }
    fmt = data[0] & 1 ? &ncm_ntb32_format : &ncm_ntb16_format;
    limits.max_ntb_len = ntb_sizes[(data[0] >> 1) & 7];
    limits.max_datagram_len = datagram_sizes[(data[0] >> 4) & 3];
    limits.max_datagrams = max_datagrams[data[0] >> 6];
    /* CRC mode: bit 15 of the first wSequence (NTH16 and NTH32 alike) */
    limits.crc = size > 8 && (data[1 + 7] & 0x80);
    maxd = limits.max_datagrams ? limits.max_datagrams : NCM_MAX_DATAGRAMS;
    buf = data + 1;
    len = size - 1;

    c.buf = buf;
    c.len = len;
    c.limits = &limits;
    err = ncm_transfer_parse(fmt, buf, len, &limits, &scratch, emit, &c,
                             &ntbs);

    if ((unsigned)err >= NCM_PARSE_ERROR__MAX) {
        fail("error code out of range", err, 0);
    }
    if (!ncm_parse_error_name(err)) {
        fail("error without a name", err, 0);
    }
    min_ntb = fmt->nth_len + fmt->ndp_min_len;
    if (ntbs > len / min_ntb || c.n > (size_t)ntbs * maxd) {
        fail("more NTBs or datagrams than the input can hold", ntbs, c.n);
    }

    /* Walk again one NTB at a time: the transfer walk must agree. */
    while (off < len) {
        if (len - off == 1 && buf[off] == 0) {
            break;
        }
        err1 = ncm_ntb_parse_one(fmt, buf + off, len - off, &limits, &view);
        if (err1 != NCM_PARSE_OK) {
            break;
        }
        if (view.block_len < min_ntb || view.block_len > len - off ||
            view.block_len > limits.max_ntb_len ||
            view.n_datagrams > maxd || view.n_ndps > NCM_MAX_NDP_CHAIN) {
            fail("view out of bounds", view.block_len, view.n_datagrams);
        }
        for (i = 0; i < view.n_datagrams; i++, k++) {
            const NcmDatagram *d = &view.datagrams[i];

            if (d->offset > view.block_len ||
                d->len + (limits.crc ? NCM_CRC_LEN : 0) >
                view.block_len - d->offset) {
                fail("datagram outside its NTB", d->offset, d->len);
            }
            if (k >= c.n || c.out[k].data != buf + off + d->offset ||
                c.out[k].len != d->len) {
                fail("transfer walk emitted something else", k, c.n);
            }
        }
        off += view.block_len;
        walked++;
    }
    if (walked != ntbs || k != c.n || err1 != err) {
        fprintf(stderr, "walked %u/%u ntbs, %zu/%zu datagrams, %s/%s\n",
                walked, ntbs, k, c.n, ncm_parse_error_name(err1),
                ncm_parse_error_name(err));
        abort();
    }
    free(c.out);
}

/*
 * The codec needs no machine: the target runs it on "-machine none", so
 * that it is built, run and fuzzed (by OSS-Fuzz too) like the device's
 * own targets, with QEMU's headers and instrumentation.
 */
static GString *ntb_parse_fuzz_cmdline(FuzzTarget *t)
{
    return g_string_new(TARGET_NAME " -machine none -nodefaults"
                        " -display none");
}

static void register_ntb_parse_fuzz(void)
{
    fuzz_add_target(&(FuzzTarget){
        .name = "usb-ncm-dl-ntb-parse",
        .description = "Parse a USB CDC-NCM OUT transfer (NTB16/NTB32) with "
                       "the usb-ncm-dl codec and check what it hands out",
        .get_init_cmdline = ntb_parse_fuzz_cmdline,
        .fuzz = ntb_parse_fuzz,
    });
}

fuzz_target_init(register_ntb_parse_fuzz);
