/*
 * libqos CDC NCM host side: the NTBs a host builds and reads
 *
 * NCM 1.0 section 3: the NTH (3.2), the NDP and its datagram list
 * (3.3), the datagram placement by wNdpDivisor/wNdpPayloadRemainder
 * (6.2.1) and the CRC-32 of an NCM1/ncm1 NDP's datagrams (3.3.2).
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "ncm-host.h"

#define NCM_HOST_CRC_LEN        4
#define NCM_HOST_ETH_HDR_LEN    14

uint32_t ncm_host_crc32(const uint8_t *p, size_t len)
{
    uint32_t crc = 0xffffffff;
    size_t i;
    int k;

    for (i = 0; i < len; i++) {
        crc ^= p[i];
        for (k = 0; k < 8; k++) {
            crc = (crc >> 1) ^ ((crc & 1) ? 0xedb88320 : 0);
        }
    }
    return ~crc;
}

void ncm_frame_append_crc(GByteArray *f, bool wrong)
{
    uint8_t c[NCM_HOST_CRC_LEN];

    stl_le_p(c, ncm_host_crc32(f->data, f->len) ^ wrong);
    g_byte_array_append(f, c, sizeof(c));
}

void ncm_put_field(uint8_t *p, bool ntb32, uint32_t v)
{
    if (ntb32) {
        stl_le_p(p, v);
    } else {
        stw_le_p(p, v);
    }
}

uint32_t ncm_get_field(const uint8_t *p, bool ntb32)
{
    return ntb32 ? ldl_le_p(p) : lduw_le_p(p);
}

static uint32_t nth_len(bool ntb32)
{
    return ntb32 ? NCM_HOST_NTH32_LEN : NCM_HOST_NTH16_LEN;
}

static uint32_t ndp_hdr_len(bool ntb32)
{
    return ntb32 ? NCM_HOST_NDP32_HDR : NCM_HOST_NDP16_HDR;
}

/* The NDP's wLength for @n datagrams and the 0/0 entry that ends them */
static uint32_t ndp_len(bool ntb32, uint32_t n)
{
    uint32_t entry = ntb32 ? 8 : 4;

    return MAX(ndp_hdr_len(ntb32) + (n + 1) * entry,
               ndp_hdr_len(ntb32) + 2 * entry);
}

static const char *ndp_signature(const NcmHostLayout *l)
{
    return l->ntb32 ? (l->crc ? "ncm1" : "ncm0") :
                      (l->crc ? "NCM1" : "NCM0");
}

/* The first offset from @pos on with offset % divisor == remainder */
static uint32_t place(const NcmHostLayout *l, uint32_t pos)
{
    uint32_t div = MAX(l->divisor, 1);

    return pos + ((l->remainder % div) + div - pos % div) % div;
}

static void zero_fill_to(GByteArray *b, uint32_t len)
{
    uint32_t old = b->len;

    g_byte_array_set_size(b, len);
    memset(b->data + old, 0, len - old);
}

GByteArray *ncm_ntb_build(const NcmHostLayout *l, GPtrArray *frames,
                          uint16_t seq)
{
    bool n32 = l->ntb32;
    unsigned fs = n32 ? 4 : 2;
    uint32_t n = frames->len, dl = ndp_len(n32, n);
    uint32_t align = MAX(l->ndp_alignment, 4);
    g_autofree uint32_t *offs = g_new(uint32_t, MAX(n, 1));
    GByteArray *ntb = g_byte_array_new();
    uint32_t ndp = 0, i;

    zero_fill_to(ntb, nth_len(n32));
    if (!l->ndp_last) {
        ndp = ROUND_UP(ntb->len, align);
        zero_fill_to(ntb, ndp + dl);
    }
    for (i = 0; i < n; i++) {
        GByteArray *f = g_ptr_array_index(frames, i);

        offs[i] = place(l, ntb->len);
        zero_fill_to(ntb, offs[i]);
        g_byte_array_append(ntb, f->data, f->len);
    }
    if (l->ndp_last) {
        ndp = ROUND_UP(ntb->len, align);
        zero_fill_to(ntb, ndp + dl);
    }
    memcpy(ntb->data + ndp, ndp_signature(l), 4);
    stw_le_p(ntb->data + ndp + 4, dl);
    for (i = 0; i < n; i++) {
        GByteArray *f = g_ptr_array_index(frames, i);
        uint8_t *entry = ntb->data + ndp + ndp_hdr_len(n32) + i * 2 * fs;

        ncm_put_field(entry, n32, offs[i]);
        ncm_put_field(entry + fs, n32, f->len);
    }
    memcpy(ntb->data, n32 ? "ncmh" : "NCMH", 4);
    stw_le_p(ntb->data + 4, nth_len(n32));
    stw_le_p(ntb->data + 6, seq);
    ncm_put_field(ntb->data + 8, n32,
                  !n32 && ntb->len > 0xffff ? 0 : ntb->len);
    ncm_put_field(ntb->data + (n32 ? 12 : 10), n32, ndp);
    return ntb;
}

void ncm_ntb_pad_to(GByteArray *ntb, bool ntb32, uint32_t len)
{
    g_assert(len >= ntb->len);
    zero_fill_to(ntb, len);
    ncm_put_field(ntb->data + 8, ntb32, !ntb32 && len > 0xffff ? 0 : len);
}

#define BROKEN(...) do { \
        g_snprintf(why, why_len, __VA_ARGS__); \
        return false; \
    } while (0)

bool ncm_ntb_parse(const NcmHostLayout *l, const uint8_t *b, uint32_t len,
                   GPtrArray *out, char *why, size_t why_len)
{
    bool n32 = l->ntb32;
    unsigned fs = n32 ? 4 : 2;
    uint32_t hl = nth_len(n32), hdr = ndp_hdr_len(n32);
    uint32_t min_dl = ndp_len(n32, 1);
    uint32_t min_dg = NCM_HOST_ETH_HDR_LEN + (l->crc ? NCM_HOST_CRC_LEN : 0);
    uint32_t div = MAX(l->divisor, 1);
    uint32_t block, ndp, dl, entry;
    unsigned count = 0;

    if (len < hl + min_dl) {
        BROKEN("%u bytes: shorter than an NTH and an NDP", len);
    }
    if (memcmp(b, n32 ? "ncmh" : "NCMH", 4)) {
        BROKEN("NTH signature \"%.4s\"", (const char *)b);
    }
    if ((uint32_t)lduw_le_p(b + 4) != hl) {
        BROKEN("NTH wHeaderLength %u, not %u", lduw_le_p(b + 4), hl);
    }
    block = ncm_get_field(b + 8, n32);
    if (!n32 && block == 0) {
        block = len;            /* an NTB16 of 64 KiB */
    }
    if (block != len) {
        BROKEN("block length %u in a %u-byte NTB", block, len);
    }
    ndp = ncm_get_field(b + (n32 ? 12 : 10), n32);
    if (ndp < hl || ndp % MAX(l->ndp_alignment, 4)) {
        BROKEN("NDP at %u (NTH of %u, alignment %u)", ndp, hl,
               MAX(l->ndp_alignment, 4));
    }
    if (ndp > block || block - ndp < hdr) {
        BROKEN("NDP at %u runs past the %u-byte block", ndp, block);
    }
    if (memcmp(b + ndp, ndp_signature(l), 4)) {
        BROKEN("NDP signature \"%.4s\", not \"%s\"", (const char *)b + ndp,
               ndp_signature(l));
    }
    dl = lduw_le_p(b + ndp + 4);
    if (dl < min_dl || (dl - hdr) % (2 * fs) || dl > block - ndp) {
        BROKEN("NDP wLength %u at %u in a %u-byte block", dl, ndp, block);
    }
    if (ncm_get_field(b + ndp + (n32 ? 8 : 6), n32)) {
        BROKEN("wNextNdpIndex %u: one NDP expected",
               ncm_get_field(b + ndp + (n32 ? 8 : 6), n32));
    }
    for (entry = ndp + hdr; entry < ndp + dl; entry += 2 * fs) {
        uint32_t off = ncm_get_field(b + entry, n32);
        uint32_t dlen = ncm_get_field(b + entry + fs, n32);
        GByteArray *f;

        if (!off || !dlen) {
            if (!count) {
                BROKEN("the NDP lists no datagram");
            }
            return true;
        }
        if (off < hl || off > block || dlen > block - off) {
            BROKEN("datagram %u (%u+%u) outside the %u-byte block", count,
                   off, dlen, block);
        }
        if (off + dlen > ndp && off < ndp + dl) {
            BROKEN("datagram %u (%u+%u) overlaps the NDP", count, off, dlen);
        }
        if (off % div != l->remainder % div) {
            BROKEN("datagram %u at %u: offset %% %u is not %u", count, off,
                   div, l->remainder % div);
        }
        if (dlen < min_dg) {
            BROKEN("datagram %u of %u bytes, shorter than %u", count, dlen,
                   min_dg);
        }
        if (l->crc) {
            dlen -= NCM_HOST_CRC_LEN;
            if ((uint32_t)ldl_le_p(b + off + dlen) !=
                ncm_host_crc32(b + off, dlen)) {
                BROKEN("datagram %u: CRC-32 0x%08x, not 0x%08x", count,
                       ldl_le_p(b + off + dlen),
                       ncm_host_crc32(b + off, dlen));
            }
        }
        f = g_byte_array_sized_new(dlen);
        g_byte_array_append(f, b + off, dlen);
        g_ptr_array_add(out, f);
        count++;
    }
    BROKEN("the NDP's datagram list has no 0/0 entry");
}
