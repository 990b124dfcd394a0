/*
 * usb-ncm-dl: strict NCM 1.0 / USB ch. 9 oracle (NTB checks; partial)
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "qemu/osdep.h"
#include "ncm-oracle.h"

struct NcmOracle {
    bool have_seq;
    uint16_t seq;
};

#define FAIL(...) do { g_snprintf(why, why_len, __VA_ARGS__); return false; } \
    while (0)

static uint16_t rd16(const uint8_t *b) { return b[0] | (b[1] << 8); }
static uint32_t rd32(const uint8_t *b) { return rd16(b) | (rd16(b + 2) << 16); }

NcmOracle *ncm_oracle_new(void) { return g_new0(NcmOracle, 1); }
void ncm_oracle_free(NcmOracle *o) { g_free(o); }
void ncm_oracle_reset(NcmOracle *o) { o->have_seq = false; }

bool ncm_oracle_in_transfer(NcmOracle *o, const NcmOracleParams *p,
                            const uint8_t *buf, size_t len, size_t requested,
                            char *why, size_t why_len)
{
    size_t hl = p->ntb32 ? 16 : 12, blen, ndp;
    uint16_t seq;

    if (len == 0) {
        return true;            /* a ZLP */
    }
    if (len > requested) {
        FAIL("transfer %zu longer than requested %zu", len, requested);
    }
    if (len < hl || memcmp(buf, p->ntb32 ? "ncmh" : "NCMH", 4)) {
        FAIL("bad NTH signature or short transfer (%zu)", len);
    }
    if (rd16(buf + 4) != hl) {
        FAIL("wHeaderLength %u != %zu", rd16(buf + 4), hl);
    }
    seq = rd16(buf + 6);
    if (o->have_seq && seq != (uint16_t)(o->seq + 1)) {
        FAIL("wSequence %u after %u", seq, o->seq);
    }
    o->have_seq = true;
    o->seq = seq;
    blen = p->ntb32 ? rd32(buf + 8) : rd16(buf + 8);
    ndp = p->ntb32 ? rd32(buf + 12) : rd16(buf + 10);
    if (blen != len) {
        FAIL("block length %zu != transfer length %zu", blen, len);
    }
    if (p->in_max_size && blen > p->in_max_size) {
        FAIL("block length %zu > dwNtbInMaxSize %u", blen, p->in_max_size);
    }
    if (ndp < hl || ndp % 4 || ndp + (p->ntb32 ? 16 : 8) > len) {
        FAIL("NDP index %zu invalid", ndp);
    }
    {
        const uint8_t *d = buf + ndp;
        size_t ent = p->ntb32 ? 8 : 4, dl = p->ntb32 ? rd16(d + 4) : rd16(d + 4);
        size_t i, n = 0, first = p->ntb32 ? 16 : 8;
        char sig3 = p->crc ? '1' : '0';

        if (memcmp(d, p->ntb32 ? "ncm" : "NCM", 3) || d[3] != sig3) {
            FAIL("bad NDP signature at %zu", ndp);
        }
        if (dl < (p->ntb32 ? 32 : 16) || dl % (p->ntb32 ? 8 : 4) ||
            ndp + dl > len) {
            FAIL("NDP wLength %zu invalid", dl);
        }
        for (i = first; i + ent <= dl; i += ent) {
            size_t di = p->ntb32 ? rd32(d + i) : rd16(d + i);
            size_t dn = p->ntb32 ? rd32(d + i + 4) : rd16(d + i + 2);

            if (di == 0 || dn == 0) {
                break;
            }
            if (di < hl || di + dn > len) {
                FAIL("datagram %zu (%zu+%zu) outside the block", n, di, dn);
            }
            if (p->in_divisor &&
                di % p->in_divisor != p->in_remainder % p->in_divisor) {
                FAIL("datagram %zu at %zu misaligned", n, di);
            }
            n++;
        }
        if (i + ent > dl) {
            FAIL("datagram pointer list not terminated by a zero entry");
        }
        if (p->in_max_datagrams && n > p->in_max_datagrams) {
            FAIL("%zu datagrams > wNtbInMaxDatagrams %u", n,
                 p->in_max_datagrams);
        }
    }
    return true;
}

bool ncm_oracle_descriptor(uint8_t type, uint8_t index, uint16_t wlength,
                           const uint8_t *buf, size_t len,
                           char *why, size_t why_len)
{
    if (len > wlength) {
        FAIL("reply %zu longer than wLength %u", len, wlength);
    }
    if (len >= 2 && buf[1] != type) {
        FAIL("bDescriptorType %u != requested %u", buf[1], type);
    }
    return true;
}
