/*
 * USB CDC-NCM NTB16/NTB32 codec
 *
 * Every offset read from an NTB is checked against the bytes actually
 * received before it is used, every loop has a bound that does not depend
 * on guest data, and an NTB is validated completely before any of its
 * datagrams is handed out.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include <zlib.h>
#include "hw/usb/ncm-ntb.h"

const NcmNtbFormat ncm_ntb16_format = {
    .name = "NTB16",
    .nth_signature = NCM_NTH16_SIGNATURE,
    .ndp_signature = NCM_NDP16_NOCRC_SIGNATURE,
    .ndp_crc_signature = NCM_NDP16_CRC_SIGNATURE,
    .nth_len = NCM_NTH16_LEN,
    .ndp_header_len = NCM_NDP16_HEADER_LEN,
    .ndp_min_len = NCM_NDP16_MIN_LEN,
    .field_size = 2,
    .nth_sequence_off = 6,
    .nth_block_len_off = 8,
    .nth_ndp_index_off = 10,
    .ndp_next_off = 6,
    .zero_block_len_is_transfer = true,
    .max_block_len = NCM_NTB16_MAX_SIZE,
};

const NcmNtbFormat ncm_ntb32_format = {
    .name = "NTB32",
    .nth_signature = NCM_NTH32_SIGNATURE,
    .ndp_signature = NCM_NDP32_NOCRC_SIGNATURE,
    .ndp_crc_signature = NCM_NDP32_CRC_SIGNATURE,
    .nth_len = NCM_NTH32_LEN,
    .ndp_header_len = NCM_NDP32_HEADER_LEN,
    .ndp_min_len = NCM_NDP32_MIN_LEN,
    .field_size = 4,
    .nth_sequence_off = 6,
    .nth_block_len_off = 8,
    .nth_ndp_index_off = 12,
    .ndp_next_off = 8,
    .zero_block_len_is_transfer = false,
    .max_block_len = UINT32_MAX,
};

static const char *const parse_error_names[NCM_PARSE_ERROR__MAX] = {
    [NCM_PARSE_OK] = "ok",
    [NCM_PARSE_NTH_TRUNCATED] = "nth-truncated",
    [NCM_PARSE_NTH_SIGNATURE] = "nth-signature",
    [NCM_PARSE_NTH_HEADER_LEN] = "nth-header-length",
    [NCM_PARSE_BLOCK_TOO_SHORT] = "block-too-short",
    [NCM_PARSE_BLOCK_PAST_TRANSFER] = "block-past-transfer",
    [NCM_PARSE_BLOCK_TOO_LONG] = "block-too-long",
    [NCM_PARSE_NDP_ALIGNMENT] = "ndp-alignment",
    [NCM_PARSE_NDP_BOUNDS] = "ndp-bounds",
    [NCM_PARSE_NDP_SIGNATURE] = "ndp-signature",
    [NCM_PARSE_NDP_LENGTH] = "ndp-length",
    [NCM_PARSE_NDP_UNTERMINATED] = "ndp-unterminated",
    [NCM_PARSE_NDP_CHAIN_LOOP] = "ndp-chain-loop",
    [NCM_PARSE_NDP_CHAIN_TOO_LONG] = "ndp-chain-too-long",
    [NCM_PARSE_DATAGRAM_BOUNDS] = "datagram-bounds",
    [NCM_PARSE_DATAGRAM_TOO_SHORT] = "datagram-too-short",
    [NCM_PARSE_DATAGRAM_TOO_LONG] = "datagram-too-long",
    [NCM_PARSE_TOO_MANY_DATAGRAMS] = "too-many-datagrams",
};

const char *ncm_parse_error_name(NcmParseError err)
{
    if ((unsigned)err >= NCM_PARSE_ERROR__MAX) {
        return "unknown";
    }
    return parse_error_names[err];
}

/*
 * Walk one NDP at @ndp (already known to hold its header inside the block)
 * and append its datagrams to @view.
 */
static NcmParseError ncm_parse_ndp(const NcmNtbFormat *fmt,
                                   const uint8_t *buf, uint32_t block_len,
                                   uint32_t ndp, uint32_t max_datagrams,
                                   const NcmParseLimits *limits,
                                   NcmNtbView *view)
{
    unsigned fs = fmt->field_size;
    unsigned entry_len = 2 * fs;
    uint32_t sig = ldl_le_p(buf + ndp);
    uint32_t ndp_len = lduw_le_p(buf + ndp + 4);
    uint32_t crc_len = limits->crc ? NCM_CRC_LEN : 0;
    uint32_t entry, ndp_end;

    /* NCM 1.0 3.3.1: NCM1/ncm1 in CRC mode, NCM0/ncm0 otherwise */
    if (sig != (limits->crc ? fmt->ndp_crc_signature : fmt->ndp_signature)) {
        return NCM_PARSE_NDP_SIGNATURE;
    }
    if (ndp_len < fmt->ndp_min_len ||
        (ndp_len - fmt->ndp_header_len) % entry_len != 0) {
        return NCM_PARSE_NDP_LENGTH;
    }
    if (ndp_len > block_len - ndp) {
        return NCM_PARSE_NDP_LENGTH;
    }

    ndp_end = ndp + ndp_len;
    for (entry = ndp + fmt->ndp_header_len; entry < ndp_end;
         entry += entry_len) {
        uint32_t index = ncm_ntb_field_get(buf + entry, fs);
        uint32_t len = ncm_ntb_field_get(buf + entry + fs, fs);

        if (index == 0 || len == 0) {
            return NCM_PARSE_OK;
        }
        if (view->n_datagrams >= max_datagrams) {
            return NCM_PARSE_TOO_MANY_DATAGRAMS;
        }
        if (index < fmt->nth_len || index > block_len ||
            len > block_len - index) {
            return NCM_PARSE_DATAGRAM_BOUNDS;
        }
        /* in CRC mode the length includes the CRC: take it off */
        if (len < NCM_ETH_HEADER_LEN + crc_len) {
            return NCM_PARSE_DATAGRAM_TOO_SHORT;
        }
        len -= crc_len;
        if (len > limits->max_datagram_len) {
            return NCM_PARSE_DATAGRAM_TOO_LONG;
        }
        view->datagrams[view->n_datagrams].offset = index;
        view->datagrams[view->n_datagrams].len = len;
        view->n_datagrams++;
    }
    return NCM_PARSE_NDP_UNTERMINATED;
}

NcmParseError ncm_ntb_parse_one(const NcmNtbFormat *fmt,
                                const uint8_t *buf, size_t len,
                                const NcmParseLimits *limits,
                                NcmNtbView *view)
{
    unsigned fs = fmt->field_size;
    uint32_t visited[NCM_MAX_NDP_CHAIN];
    uint32_t block_len, max_block, ndp, max_datagrams;
    unsigned i;

    view->n_datagrams = 0;
    view->n_ndps = 0;
    view->block_len = 0;

    if (len < fmt->nth_len) {
        return NCM_PARSE_NTH_TRUNCATED;
    }
    if ((uint32_t)ldl_le_p(buf) != fmt->nth_signature) {
        return NCM_PARSE_NTH_SIGNATURE;
    }
    if (lduw_le_p(buf + 4) != fmt->nth_len) {
        return NCM_PARSE_NTH_HEADER_LEN;
    }

    max_block = MIN(limits->max_ntb_len, fmt->max_block_len);
    block_len = ncm_ntb_field_get(buf + fmt->nth_block_len_off, fs);
    if (block_len == 0 && fmt->zero_block_len_is_transfer) {
        if (len > max_block) {
            return NCM_PARSE_BLOCK_TOO_LONG;
        }
        block_len = len;
    }
    if (block_len > max_block) {
        return NCM_PARSE_BLOCK_TOO_LONG;
    }
    if (block_len < (uint32_t)fmt->nth_len + fmt->ndp_min_len) {
        return NCM_PARSE_BLOCK_TOO_SHORT;
    }
    if (block_len > len) {
        return NCM_PARSE_BLOCK_PAST_TRANSFER;
    }

    view->block_len = block_len;
    view->sequence = lduw_le_p(buf + fmt->nth_sequence_off);
    max_datagrams = limits->max_datagrams;
    if (max_datagrams == 0 || max_datagrams > NCM_MAX_DATAGRAMS) {
        max_datagrams = NCM_MAX_DATAGRAMS;
    }

    ndp = ncm_ntb_field_get(buf + fmt->nth_ndp_index_off, fs);
    for (;;) {
        NcmParseError err;

        if (view->n_ndps == NCM_MAX_NDP_CHAIN) {
            return NCM_PARSE_NDP_CHAIN_TOO_LONG;
        }
        if (ndp % 4) {
            return NCM_PARSE_NDP_ALIGNMENT;
        }
        if (ndp < fmt->nth_len || ndp > block_len - fmt->ndp_header_len) {
            return NCM_PARSE_NDP_BOUNDS;
        }
        for (i = 0; i < view->n_ndps; i++) {
            if (visited[i] == ndp) {
                return NCM_PARSE_NDP_CHAIN_LOOP;
            }
        }
        visited[view->n_ndps++] = ndp;

        err = ncm_parse_ndp(fmt, buf, block_len, ndp, max_datagrams,
                            limits, view);
        if (err != NCM_PARSE_OK) {
            return err;
        }
        ndp = ncm_ntb_field_get(buf + ndp + fmt->ndp_next_off, fs);
        if (ndp == 0) {
            return NCM_PARSE_OK;
        }
    }
}

NcmParseError ncm_transfer_parse(const NcmNtbFormat *fmt,
                                 const uint8_t *buf, size_t len,
                                 const NcmParseLimits *limits,
                                 NcmNtbView *scratch,
                                 NcmDatagramFn *emit, void *opaque,
                                 unsigned *ntbs_out)
{
    size_t off = 0;
    unsigned ntbs = 0;
    NcmParseError err = NCM_PARSE_OK;

    /* Each NTB is at least nth_len + ndp_min_len bytes: this terminates. */
    while (off < len) {
        const uint8_t *ntb = buf + off;
        uint32_t i;

        if (len - off == 1 && ntb[0] == 0) {
            break;
        }
        err = ncm_ntb_parse_one(fmt, ntb, len - off, limits, scratch);
        if (err != NCM_PARSE_OK) {
            break;
        }
        for (i = 0; i < scratch->n_datagrams; i++) {
            emit(opaque, ntb + scratch->datagrams[i].offset,
                 scratch->datagrams[i].len);
        }
        off += scratch->block_len;
        ntbs++;
    }
    if (ntbs_out) {
        *ntbs_out = ntbs;
    }
    return err;
}

/* CRC mode */

uint32_t ncm_crc32(const uint8_t *data, size_t len)
{
    /* zlib's crc32() is this CRC, initial and final inversion included */
    return crc32(0, data, len);
}

bool ncm_datagram_crc_ok(const uint8_t *data, uint32_t len)
{
    return (uint32_t)ldl_le_p(data + len) == ncm_crc32(data, len);
}

/* Builder */

/* 64-bit so that offset + a huge datagram length cannot wrap to a small NDP */
static inline uint64_t ncm_align_up(uint64_t v, uint32_t a)
{
    return a > 1 ? ROUND_UP(v, a) : v;
}

/* First offset >= @pos with offset % divisor == remainder. */
static inline uint32_t ncm_payload_offset(const NcmNtbLayout *l, uint32_t pos)
{
    uint32_t div = l->divisor ? l->divisor : 1;
    uint32_t rem = l->remainder % div;

    return pos + (rem + div - pos % div) % div;
}

static inline uint32_t ncm_ndp_len(const NcmNtbFormat *fmt, uint32_t n)
{
    uint32_t len = fmt->ndp_header_len + (n + 1) * 2 * fmt->field_size;

    return MAX(len, fmt->ndp_min_len);
}

void ncm_ntb_builder_init(NcmNtbBuilder *b, const NcmNtbFormat *fmt,
                          const NcmNtbLayout *layout, uint8_t *buf)
{
    b->fmt = fmt;
    b->layout = *layout;
    /* NDPs are 4-byte aligned whatever the host asked (NCM 3.3.1) */
    if (b->layout.ndp_alignment < 4 ||
        (b->layout.ndp_alignment & (b->layout.ndp_alignment - 1))) {
        b->layout.ndp_alignment = 4;
    }
    b->layout.max_len = MIN(b->layout.max_len, fmt->max_block_len);
    b->buf = buf;
    b->len = fmt->nth_len;
    b->n_datagrams = 0;
    b->max_datagrams = layout->max_datagrams;
    if (b->max_datagrams == 0 || b->max_datagrams > NCM_MAX_DATAGRAMS) {
        b->max_datagrams = NCM_MAX_DATAGRAMS;
    }
}

/* Offset of the datagram that would be added, or 0 when it cannot be. */
static uint32_t ncm_builder_place(const NcmNtbBuilder *b, uint32_t len)
{
    uint32_t crc_len = b->layout.crc ? NCM_CRC_LEN : 0;
    uint64_t off, end, ndp;

    /* a datagram shorter than an Ethernet header is not one (NCM 3.7) */
    if (b->n_datagrams >= b->max_datagrams || len < NCM_ETH_HEADER_LEN) {
        return 0;
    }
    off = ncm_payload_offset(&b->layout, b->len);
    end = off + len + crc_len;
    ndp = ncm_align_up(end, b->layout.ndp_alignment);
    if (ndp + ncm_ndp_len(b->fmt, b->n_datagrams + 1) > b->layout.max_len) {
        return 0;
    }
    return off;
}

bool ncm_ntb_builder_fits(const NcmNtbBuilder *b, uint32_t len)
{
    return ncm_builder_place(b, len) != 0;
}

uint8_t *ncm_ntb_builder_reserve(NcmNtbBuilder *b, uint32_t len)
{
    uint32_t off = ncm_builder_place(b, len);

    if (!off) {
        return NULL;
    }
    if (b->layout.crc) {
        len += NCM_CRC_LEN;     /* written by finish() */
    }
    /* zero the alignment gap so no stale bytes leave the device */
    memset(b->buf + b->len, 0, off - b->len);
    b->datagrams[b->n_datagrams].offset = off;
    b->datagrams[b->n_datagrams].len = len;
    b->n_datagrams++;
    b->len = off + len;
    return b->buf + off;
}

bool ncm_ntb_builder_append(NcmNtbBuilder *b, const void *data, uint32_t len)
{
    uint8_t *dst = ncm_ntb_builder_reserve(b, len);

    if (!dst) {
        return false;
    }
    memcpy(dst, data, len);
    return true;
}

uint32_t ncm_ntb_builder_finished_len(const NcmNtbBuilder *b)
{
    return ncm_align_up(b->len, b->layout.ndp_alignment) +
           ncm_ndp_len(b->fmt, b->n_datagrams);
}

uint32_t ncm_ntb_builder_finish(NcmNtbBuilder *b, uint16_t sequence)
{
    const NcmNtbFormat *fmt = b->fmt;
    unsigned fs = fmt->field_size;
    uint32_t ndp = ncm_align_up(b->len, b->layout.ndp_alignment);
    uint32_t ndp_len = ncm_ndp_len(fmt, b->n_datagrams);
    uint32_t total = ndp + ndp_len;
    uint32_t block_len = total;
    uint8_t *p;
    uint32_t i;

    if (!b->n_datagrams) {
        return 0;   /* only reserve() proved that the headers fit */
    }
    b->ndp_offset = ndp;
    if (b->layout.crc) {
        for (i = 0; i < b->n_datagrams; i++) {
            uint8_t *d = b->buf + b->datagrams[i].offset;
            uint32_t dlen = b->datagrams[i].len - NCM_CRC_LEN;

            stl_le_p(d + dlen, ncm_crc32(d, dlen));
        }
    }
    memset(b->buf + b->len, 0, ndp - b->len);
    memset(b->buf + ndp, 0, ndp_len);
    stl_le_p(b->buf + ndp, b->layout.crc ? fmt->ndp_crc_signature :
             fmt->ndp_signature);
    stw_le_p(b->buf + ndp + 4, ndp_len);
    p = b->buf + ndp + fmt->ndp_header_len;
    for (i = 0; i < b->n_datagrams; i++) {
        ncm_ntb_field_put(p, fs, b->datagrams[i].offset);
        ncm_ntb_field_put(p + fs, fs, b->datagrams[i].len);
        p += 2 * fs;
    }

    memset(b->buf, 0, fmt->nth_len);
    stl_le_p(b->buf, fmt->nth_signature);
    stw_le_p(b->buf + 4, fmt->nth_len);
    stw_le_p(b->buf + fmt->nth_sequence_off, sequence);
    if (fs == 2 && block_len > UINT16_MAX) {
        block_len = 0;  /* a 64 KiB NTB16: length comes from the transfer */
    }
    ncm_ntb_field_put(b->buf + fmt->nth_block_len_off, fs, block_len);
    ncm_ntb_field_put(b->buf + fmt->nth_ndp_index_off, fs, ndp);
    return total;
}
