/*
 * usb-ncm-dl: strict NCM 1.0 / USB ch. 9 oracle for the qtests and fuzzers
 *
 * Written from the specifications, not from the device: NCM 1.0 section 3
 * (NTH16/NTH32, NDP16/NDP32, datagram placement) and 6.2 (the negotiated
 * parameters), USB 2.0 section 5.8.3 and 9.6 (bulk packet sizes, short
 * packets, standard descriptors), USB 3.2 section 9.6 (BOS, SuperSpeed
 * endpoint companion) and CDC 1.2 / ECM 1.2 (functional descriptors).
 * Plain C and glib, so that both a qtest and a fuzz target can link it.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "hw/usb/cdc-ncm.h"
#include "ncm-oracle.h"
#include "../libqos/ncm-host.h"

/* USB 2.0 table 9-5, USB 3.2 table 9-6 */
#define OR_DT_DEVICE            0x01
#define OR_DT_CONFIG            0x02
#define OR_DT_STRING            0x03
#define OR_DT_INTERFACE         0x04
#define OR_DT_ENDPOINT          0x05
#define OR_DT_QUALIFIER         0x06
#define OR_DT_OTHER_SPEED       0x07
#define OR_DT_IAD               0x0b
#define OR_DT_BOS               0x0f
#define OR_DT_DEVICE_CAP        0x10
#define OR_DT_SS_COMPANION      0x30
/* USB 3.2 table 9-14 */
#define OR_CAP_USB20_EXT        0x02
#define OR_CAP_SS_USB           0x03

struct NcmOracle {
    bool have_seq;              /* an NTB came since the function reset */
    uint16_t seq;               /* its wSequence */
    uint16_t lost;              /* NTBs the host lost since (their numbers) */
    GByteArray *acc;            /* an NTB whose transfers filled the buffer */
};

/*
 * What one descriptor tells about the next ones: the speed (bcdUSB of
 * the device descriptor; 0 until one was read, and then a configuration
 * with SuperSpeed companions is taken for SuperSpeed) and the iMACAddress
 * string index of the last configuration.  One device at a time, as in a
 * qtest or a fuzz input.
 */
static struct {
    uint16_t bcd_usb;
    uint8_t mac_index;
} or_dev;

#define FAIL(...) do { \
        g_snprintf(why, why_len, __VA_ARGS__); \
        return false; \
    } while (0)

static uint16_t rd16(const uint8_t *b)
{
    return b[0] | (b[1] << 8);
}

static uint32_t rd32(const uint8_t *b)
{
    return rd16(b) | ((uint32_t)rd16(b + 2) << 16);
}

NcmOracle *ncm_oracle_new(void)
{
    NcmOracle *o = g_new0(NcmOracle, 1);

    o->acc = g_byte_array_new();
    return o;
}

void ncm_oracle_free(NcmOracle *o)
{
    if (o) {
        g_byte_array_unref(o->acc);
        g_free(o);
    }
}

void ncm_oracle_reset(NcmOracle *o)
{
    o->have_seq = false;
    o->lost = 0;
    g_byte_array_set_size(o->acc, 0);
}

void ncm_oracle_lost(NcmOracle *o)
{
    o->lost++;
    g_byte_array_set_size(o->acc, 0);
}

typedef struct OrRange {
    uint64_t start, end;
} OrRange;

static bool or_overlap(const OrRange *a, const OrRange *b)
{
    return a->start < b->end && b->start < a->end;
}

/*
 * One whole NTB of @n bytes, as the host sees it once the transfer ended
 * (@by_short: with a short packet, else by reaching dwNtbInMaxSize).
 */
static bool or_check_ntb(NcmOracle *o, const NcmOracleParams *p,
                         const uint8_t *b, size_t n, bool by_short,
                         char *why, size_t why_len)
{
    bool n32 = p->ntb32;
    size_t hl = n32 ? NCM_NTH32_LEN : NCM_NTH16_LEN;
    size_t ndp_hdr = n32 ? NCM_NDP32_HEADER_LEN : NCM_NDP16_HEADER_LEN;
    size_t ndp_min = n32 ? NCM_NDP32_MIN_LEN : NCM_NDP16_MIN_LEN;
    size_t fs = n32 ? 4 : 2;           /* one index or length field */
    uint32_t nth_sig = n32 ? NCM_NTH32_SIGNATURE : NCM_NTH16_SIGNATURE;
    uint32_t ndp_sig, other_crc_sig;
    uint16_t seq;
    uint64_t blen, ndp;
    g_autoptr(GArray) ndps = g_array_new(false, false, sizeof(OrRange));
    g_autoptr(GArray) dgs = g_array_new(false, false, sizeof(OrRange));
    unsigned total = 0, i, j;

    if (p->crc) {
        ndp_sig = n32 ? NCM_NDP32_CRC_SIGNATURE : NCM_NDP16_CRC_SIGNATURE;
        other_crc_sig = n32 ? NCM_NDP32_NOCRC_SIGNATURE :
                              NCM_NDP16_NOCRC_SIGNATURE;
    } else {
        ndp_sig = n32 ? NCM_NDP32_NOCRC_SIGNATURE : NCM_NDP16_NOCRC_SIGNATURE;
        other_crc_sig = n32 ? NCM_NDP32_CRC_SIGNATURE :
                              NCM_NDP16_CRC_SIGNATURE;
    }

    /* NCM 1.0 3.2.1 / 3.2.2: the NTH */
    if (n < hl) {
        FAIL("NTB of %zu bytes is shorter than its NTH%s (%zu)", n,
             n32 ? "32" : "16", hl);
    }
    if (rd32(b) != nth_sig) {
        FAIL("NTH dwSignature 0x%08x, not \"%s\"", rd32(b),
             n32 ? "ncmh" : "NCMH");
    }
    if (rd16(b + 4) != hl) {
        FAIL("NTH wHeaderLength %u, not %zu", rd16(b + 4), hl);
    }
    /*
     * wSequence: "shall" be 0 in the first NTB after a function reset and
     * "shall" increment by one for every NTB after it.
     */
    seq = rd16(b + 6);
    if (!o->have_seq && seq != o->lost) {
        FAIL("wSequence %u in the first NTB after a function reset, not %u",
             seq, o->lost);
    }
    if (o->have_seq && seq != (uint16_t)(o->seq + 1 + o->lost)) {
        FAIL("wSequence %u after %u%s", seq, o->seq,
             o->lost ? " and NTBs the host lost" : "");
    }
    o->have_seq = true;
    o->seq = seq;
    o->lost = 0;

    blen = n32 ? rd32(b + 8) : rd16(b + 8);
    ndp = n32 ? rd32(b + 12) : rd16(b + 10);
    if (!n32 && blen == 0) {
        /*
         * 3.2.1: wBlockLength 0 means the block is ended by a short
         * packet, and the transfer must still be shorter than
         * dwNtbInMaxSize.
         */
        if (!by_short) {
            FAIL("wBlockLength 0 but the transfer was not ended by a short "
                 "packet (%zu bytes)", n);
        }
        if (p->in_max_size && n >= p->in_max_size) {
            FAIL("wBlockLength 0 in a transfer of %zu bytes, not shorter "
                 "than dwNtbInMaxSize %u", n, p->in_max_size);
        }
        blen = n;
    }
    if (blen != n) {
        FAIL("%s %" PRIu64 " but the transfer carried %zu bytes",
             n32 ? "dwBlockLength" : "wBlockLength", blen, n);
    }
    if (!n32 && n > NCM_NTB16_MAX_SIZE) {
        FAIL("NTB16 of %zu bytes exceeds 64 KiB", n);
    }

    /*
     * 3.3.1 / 3.3.2: the NDP chain, from wNdpIndex on.  NDPs may not
     * overlap, so a chain that loops fails that check and every chain
     * ends within the block (dwNtbInMaxSize was checked per transfer).
     */
    for (i = 0; ; i++) {
        const uint8_t *d;
        uint64_t dl, next;
        OrRange r;
        bool terminated = false;
        size_t e;

        if (ndp < hl) {
            FAIL("NDP %u at %" PRIu64 ", inside the NTH", i, ndp);
        }
        if (ndp % 4) {
            FAIL("NDP %u at %" PRIu64 ", not a multiple of 4", i, ndp);
        }
        if (p->in_alignment && ndp % p->in_alignment) {
            FAIL("NDP %u at %" PRIu64 ", not aligned to wNdpInAlignment %u",
                 i, ndp, p->in_alignment);
        }
        if (ndp + ndp_hdr > n) {
            FAIL("NDP %u at %" PRIu64 " runs past the %zu-byte block", i, ndp,
                 n);
        }
        d = b + ndp;
        if (rd32(d) == other_crc_sig) {
            FAIL("NDP %u signature \"%.4s\" while CRC mode is %s", i,
                 (const char *)d, p->crc ? "on" : "off");
        }
        if (rd32(d) != ndp_sig) {
            FAIL("NDP %u dwSignature 0x%08x, not an NDP%s signature", i,
                 rd32(d), n32 ? "32" : "16");
        }
        dl = rd16(d + 4);
        if (dl < ndp_min) {
            FAIL("NDP %u wLength %" PRIu64 " < %zu", i, dl, ndp_min);
        }
        if (dl % (n32 ? 8 : 4)) {
            FAIL("NDP %u wLength %" PRIu64 " not a multiple of %d", i, dl,
                 n32 ? 8 : 4);
        }
        if (ndp + dl > n) {
            FAIL("NDP %u (%" PRIu64 "+%" PRIu64 ") runs past the %zu-byte "
                 "block", i, ndp, dl, n);
        }
        if (n32 && (rd16(d + 6) || rd32(d + 12))) {
            FAIL("NDP32 %u reserved fields not zero", i);
        }
        next = n32 ? rd32(d + 8) : rd16(d + 6);
        r.start = ndp;
        r.end = ndp + dl;
        for (j = 0; j < ndps->len; j++) {
            if (or_overlap(&r, &g_array_index(ndps, OrRange, j))) {
                FAIL("NDP %u at %" PRIu64 " overlaps NDP %u (chain loop?)",
                     i, ndp, j);
            }
        }
        g_array_append_val(ndps, r);

        for (e = ndp_hdr; e + 2 * fs <= dl; e += 2 * fs) {
            uint64_t di = n32 ? rd32(d + e) : rd16(d + e);
            uint64_t dn = n32 ? rd32(d + e + fs) : rd16(d + e + fs);
            uint64_t min = NCM_ETH_HEADER_LEN + (p->crc ? NCM_CRC_LEN : 0);
            OrRange dr;

            if (di == 0 && dn == 0) {
                terminated = true;
                break;
            }
            if (di == 0 || dn == 0) {
                FAIL("NDP %u entry %u: index %" PRIu64 " length %" PRIu64
                     " (only 0/0 ends the list)", i, total, di, dn);
            }
            if (di < hl) {
                FAIL("datagram %u at %" PRIu64 ", inside the NTH", total, di);
            }
            if (di + dn > n) {
                FAIL("datagram %u (%" PRIu64 "+%" PRIu64 ") runs past the "
                     "%zu-byte block", total, di, dn, n);
            }
            if (dn < min) {
                FAIL("datagram %u of %" PRIu64 " bytes, shorter than an "
                     "Ethernet header%s", total, dn, p->crc ? " and CRC" : "");
            }
            if (p->in_divisor &&
                di % p->in_divisor != p->in_remainder % p->in_divisor) {
                FAIL("datagram %u at %" PRIu64 ": offset %% wNdpInDivisor %u "
                     "is %" PRIu64 ", not wNdpInPayloadRemainder %u", total,
                     di, p->in_divisor, di % p->in_divisor, p->in_remainder);
            }
            if (p->crc) {
                uint32_t want = ncm_host_crc32(b + di, dn - NCM_CRC_LEN);
                uint32_t got = rd32(b + di + dn - NCM_CRC_LEN);

                if (want != got) {
                    FAIL("datagram %u CRC-32 0x%08x, not 0x%08x", total, got,
                         want);
                }
            }
            dr.start = di;
            dr.end = di + dn;
            g_array_append_val(dgs, dr);
            total++;
        }
        if (!terminated) {
            FAIL("NDP %u datagram list has no 0/0 terminator within its "
                 "wLength %" PRIu64, i, dl);
        }
        if (!next) {
            break;
        }
        ndp = next;
    }

    for (i = 0; i < dgs->len; i++) {
        for (j = 0; j < ndps->len; j++) {
            const OrRange *dr = &g_array_index(dgs, OrRange, i);
            const OrRange *nr = &g_array_index(ndps, OrRange, j);

            if (or_overlap(dr, nr)) {
                FAIL("datagram %u (%" PRIu64 "+%" PRIu64 ") overlaps NDP %u "
                     "at %" PRIu64, i, dr->start, dr->end - dr->start, j,
                     nr->start);
            }
        }
    }
    if (p->in_max_datagrams && total > p->in_max_datagrams) {
        FAIL("%u datagrams in one NTB, more than wNtbInMaxDatagrams %u",
             total, p->in_max_datagrams);
    }
    return true;
}

/*
 * USB 2.0 5.8.3: a bulk transfer ends with a short packet (one shorter
 * than wMaxPacketSize, a ZLP included) or when the host's buffer is full.
 * NCM 1.0 3.2.1: an NTB ends its transfer with a short packet, except one
 * of exactly dwNtbInMaxSize bytes, which has no ZLP after it.  So a
 * transfer that filled the buffer leaves the NTB open: the next transfer
 * goes on with it (or is the ZLP that ends it), and an NTB that the
 * device failed to end shows as a block whose length does not match.
 */
bool ncm_oracle_in_transfer(NcmOracle *o, const NcmOracleParams *p,
                            const uint8_t *buf, size_t len, size_t requested,
                            char *why, size_t why_len)
{
    bool by_short, ended;
    bool ok;

    if (len > requested) {
        FAIL("transfer of %zu bytes for a %zu-byte buffer", len, requested);
    }
    if (requested == 0) {
        return true;            /* nothing could move */
    }
    if (len == 0 && o->acc->len == 0) {
        FAIL("zero-length IN transfer with no NTB to end (a ZLP after a "
             "short packet or after an NTB of dwNtbInMaxSize)");
    }
    g_byte_array_append(o->acc, buf, len);
    by_short = len < requested ||
               (p->max_packet && requested % p->max_packet);
    ended = by_short ||
            (p->in_max_size && o->acc->len >= p->in_max_size);
    if (p->in_max_size && o->acc->len > p->in_max_size) {
        g_snprintf(why, why_len, "IN transfer(s) of %u bytes without a "
                   "short packet, past dwNtbInMaxSize %u (missing ZLP?)",
                   o->acc->len, p->in_max_size);
        g_byte_array_set_size(o->acc, 0);
        return false;
    }
    if (!ended) {
        return true;
    }
    ok = or_check_ntb(o, p, o->acc->data, o->acc->len, by_short, why,
                      why_len);
    g_byte_array_set_size(o->acc, 0);
    return ok;
}

/* Descriptors */

/* USB 2.0 table 9-13 / USB 3.2 9.6.6: wMaxPacketSize for the speed */
static bool or_check_endpoint(const uint8_t *d, bool ss, int *bulk_speed,
                              char *why, size_t why_len)
{
    uint8_t addr = d[2], attr = d[3], ival = d[6];
    uint16_t w = rd16(d + 4), mps = w & 0x7ff, mult = (w >> 11) & 3;
    int type = attr & 3;

    if (d[0] != 7) {
        FAIL("endpoint 0x%02x bLength %u, not 7", addr, d[0]);
    }
    if ((addr & 0x70) || !(addr & 0x0f)) {
        FAIL("bEndpointAddress 0x%02x invalid", addr);
    }
    if (type == 0) {
        FAIL("endpoint 0x%02x is a control endpoint", addr);
    }
    if (type != 1 && (attr & 0xfc)) {
        FAIL("endpoint 0x%02x bmAttributes 0x%02x: reserved bits set", addr,
             attr);
    }
    if (w & 0xe000 || mult == 3) {
        FAIL("endpoint 0x%02x wMaxPacketSize 0x%04x: reserved bits set",
             addr, w);
    }
    if (mps == 0) {
        FAIL("endpoint 0x%02x wMaxPacketSize 0", addr);
    }
    if (type == 2) {
        if (mult) {
            FAIL("bulk endpoint 0x%02x with additional transactions", addr);
        }
        if (ss) {
            if (mps != 1024) {
                FAIL("SuperSpeed bulk endpoint 0x%02x wMaxPacketSize %u, "
                     "not 1024", addr, mps);
            }
        } else if (mps == 512) {
            if (*bulk_speed == 1) {
                FAIL("bulk endpoint 0x%02x: 512 next to full-speed sizes",
                     addr);
            }
            *bulk_speed = 2;
        } else if (mps == 8 || mps == 16 || mps == 32 || mps == 64) {
            if (*bulk_speed == 2) {
                FAIL("bulk endpoint 0x%02x: %u at high speed (must be 512)",
                     addr, mps);
            }
            *bulk_speed = 1;
        } else {
            FAIL("bulk endpoint 0x%02x wMaxPacketSize %u: not 8/16/32/64 "
                 "(full speed) or 512 (high speed)", addr, mps);
        }
    } else if (type == 3) {
        if (mps > 1024) {
            FAIL("interrupt endpoint 0x%02x wMaxPacketSize %u > 1024", addr,
                 mps);
        }
        if (ival == 0) {
            FAIL("interrupt endpoint 0x%02x bInterval 0", addr);
        }
        if (ss && mult) {
            FAIL("SuperSpeed endpoint 0x%02x with high-speed mult bits",
                 addr);
        }
    }
    return true;
}

typedef struct OrIface {
    int num, alt, cls, sub, proto, neps, seen_eps;
    int n_in, n_out, n_bulk, n_int;
    bool header, unio, eth, ncm, cs_other_first;
    int union_sub[8], n_union_sub;
} OrIface;

static bool or_iface_done(const OrIface *f, char *why, size_t why_len)
{
    if (f->num < 0) {
        return true;
    }
    if (f->seen_eps != f->neps) {
        FAIL("interface %d alt %d: bNumEndpoints %d, %d endpoint "
             "descriptors", f->num, f->alt, f->neps, f->seen_eps);
    }
    if (f->cls == CDC_CLASS_COMM && f->sub == CDC_SUBCLASS_NCM) {
        /* NCM 1.0 5.2: header, union, Ethernet and NCM descriptors */
        if (!f->header || !f->unio || !f->eth || !f->ncm) {
            FAIL("NCM communication interface %d lacks a%s%s%s%s "
                 "functional descriptor", f->num,
                 f->header ? "" : " header", f->unio ? "" : " union",
                 f->eth ? "" : " Ethernet", f->ncm ? "" : " NCM");
        }
        if (f->cs_other_first) {
            FAIL("interface %d: functional descriptor before the header",
                 f->num);
        }
        if (f->neps != 1 || f->n_int != 1 || f->n_in != 1) {
            FAIL("NCM communication interface %d: not one interrupt IN "
                 "endpoint", f->num);
        }
        if (f->proto != CDC_PROTO_NONE) {
            FAIL("NCM communication interface %d protocol %d", f->num,
                 f->proto);
        }
    }
    if (f->cls == CDC_CLASS_DATA) {
        /* NCM 1.0 5.3: alt 0 without endpoints, alt 1 bulk IN + OUT */
        if (f->alt == 0 && f->neps) {
            FAIL("data interface %d alt 0 has %d endpoints", f->num,
                 f->neps);
        }
        if (f->alt == 1 && (f->neps != 2 || f->n_bulk != 2 ||
                            f->n_in != 1 || f->n_out != 1)) {
            FAIL("data interface %d alt 1: not one bulk IN and one bulk OUT",
                 f->num);
        }
        if (f->alt == 1 && f->proto != CDC_PROTO_NTB) {
            FAIL("data interface %d alt 1 bInterfaceProtocol %d, not NTB "
                 "(%d)", f->num, f->proto, CDC_PROTO_NTB);
        }
    }
    return true;
}

static bool or_check_cs(OrIface *f, const uint8_t *d, uint8_t *unions,
                        char *why, size_t why_len)
{
    int i;

    if (f->num < 0 || f->cls != CDC_CLASS_COMM) {
        FAIL("CDC functional descriptor outside a communication interface");
    }
    if (d[0] < 3) {
        FAIL("CDC functional descriptor bLength %u", d[0]);
    }
    if (d[2] != CDC_DESC_HEADER && !f->header) {
        f->cs_other_first = true;
    }
    switch (d[2]) {
    case CDC_DESC_HEADER:
        if (d[0] != 5) {
            FAIL("CDC header bLength %u, not 5", d[0]);
        }
        if (f->header) {
            FAIL("two CDC header descriptors in interface %d", f->num);
        }
        if (rd16(d + 3) < 0x0110) {
            FAIL("CDC header bcdCDC 0x%04x", rd16(d + 3));
        }
        f->header = true;
        break;
    case CDC_DESC_UNION:
        if (d[0] < 5) {
            FAIL("CDC union bLength %u < 5", d[0]);
        }
        if (d[3] != f->num) {
            FAIL("CDC union bControlInterface %u in interface %d", d[3],
                 f->num);
        }
        for (i = 4; i < d[0] && f->n_union_sub < 8; i++) {
            f->union_sub[f->n_union_sub++] = d[i];
            unions[d[i]] = 1;
        }
        f->unio = true;
        break;
    case CDC_DESC_ETHERNET:
        if (d[0] != 13) {
            FAIL("Ethernet networking descriptor bLength %u, not 13", d[0]);
        }
        if (d[3] == 0) {
            FAIL("Ethernet networking descriptor iMACAddress 0");
        }
        or_dev.mac_index = d[3];
        f->eth = true;
        break;
    case CDC_DESC_NCM:
        if (d[0] != 6) {
            FAIL("NCM functional descriptor bLength %u, not 6", d[0]);
        }
        if (rd16(d + 3) != 0x0100) {
            FAIL("NCM functional descriptor bcdNcmVersion 0x%04x, not 0x0100",
                 rd16(d + 3));
        }
        if (d[5] & 0xc0) {
            FAIL("bmNetworkCapabilities 0x%02x: reserved bits set", d[5]);
        }
        f->ncm = true;
        break;
    default:
        break;
    }
    return true;
}

/* USB 2.0 9.6.3, 9.6.5, 9.6.6; USB 3.2 9.6.7; IAD ECN; CDC 1.2 5.2.3 */
static bool or_check_config(const uint8_t *b, size_t len, bool other_speed,
                            char *why, size_t why_len)
{
    bool ss = !other_speed && or_dev.bcd_usb >= 0x0300;
    size_t pos;
    uint8_t seen_if[256] = { 0 }, unions[256] = { 0 };
    int n_if = 0, bulk_speed = 0, i;
    int iad_first = -1, iad_count = 0;
    bool need_companion = false;
    uint8_t ep_addrs[32];
    int n_addrs = 0;
    OrIface f = { .num = -1 };

    if (b[0] != 9) {
        FAIL("configuration bLength %u, not 9", b[0]);
    }
    if (!other_speed && !or_dev.bcd_usb) {
        /* no device descriptor read yet: companions tell the speed */
        for (pos = 9; pos + 2 <= len && b[pos] >= 2; pos += b[pos]) {
            ss |= b[pos + 1] == OR_DT_SS_COMPANION;
        }
    }
    if (b[5] == 0) {
        FAIL("bConfigurationValue 0");
    }
    if (!(b[7] & 0x80) || (b[7] & 0x1f)) {
        FAIL("configuration bmAttributes 0x%02x: D7 clear or D4..0 set",
             b[7]);
    }
    for (pos = 9; pos < len; pos += b[pos]) {
        const uint8_t *d = b + pos;

        if (pos + 2 > len || d[0] < 2) {
            FAIL("descriptor at %zu of the configuration: bLength %u", pos,
                 pos < len ? d[0] : 0);
        }
        if (pos + d[0] > len) {
            FAIL("descriptor at %zu (bLength %u) runs past wTotalLength %zu",
                 pos, d[0], len);
        }
        if (need_companion && d[1] != OR_DT_SS_COMPANION) {
            FAIL("SuperSpeed endpoint 0x%02x without its companion "
                 "descriptor", ep_addrs[n_addrs - 1]);
        }
        need_companion = false;
        switch (d[1]) {
        case OR_DT_INTERFACE:
            if (d[0] != 9) {
                FAIL("interface bLength %u, not 9", d[0]);
            }
            if (!or_iface_done(&f, why, why_len)) {
                return false;
            }
            memset(&f, 0, sizeof(f));
            f.num = d[2];
            f.alt = d[3];
            f.neps = d[4];
            f.cls = d[5];
            f.sub = d[6];
            f.proto = d[7];
            if (!seen_if[d[2]]) {
                seen_if[d[2]] = 1;
                n_if++;
                if (d[3] != 0) {
                    FAIL("interface %u starts with alt %u, not 0", d[2],
                         d[3]);
                }
            }
            n_addrs = 0;
            break;
        case OR_DT_ENDPOINT:
            if (f.num < 0) {
                FAIL("endpoint descriptor before any interface");
            }
            if (!or_check_endpoint(d, ss, &bulk_speed, why, why_len)) {
                return false;
            }
            for (i = 0; i < n_addrs; i++) {
                if (ep_addrs[i] == d[2]) {
                    FAIL("endpoint 0x%02x twice in interface %d alt %d",
                         d[2], f.num, f.alt);
                }
            }
            if (n_addrs < ARRAY_SIZE(ep_addrs)) {
                ep_addrs[n_addrs++] = d[2];
            }
            f.seen_eps++;
            f.n_in += !!(d[2] & 0x80);
            f.n_out += !(d[2] & 0x80);
            f.n_bulk += (d[3] & 3) == 2;
            f.n_int += (d[3] & 3) == 3;
            need_companion = ss;
            break;
        case OR_DT_SS_COMPANION:
            if (!ss) {
                FAIL("SuperSpeed endpoint companion in a bcdUSB 0x%04x "
                     "configuration", or_dev.bcd_usb);
            }
            if (d[0] != 6) {
                FAIL("SS endpoint companion bLength %u, not 6", d[0]);
            }
            if (pos < 7 || b[pos - 7 + 1] != OR_DT_ENDPOINT) {
                FAIL("SS endpoint companion not after an endpoint");
            }
            if (d[2] > 15) {
                FAIL("SS companion bMaxBurst %u > 15", d[2]);
            }
            if ((b[pos - 7 + 3] & 3) == 2 && (d[3] & 0xe0)) {
                FAIL("SS companion of bulk endpoint: bmAttributes 0x%02x",
                     d[3]);
            }
            if ((b[pos - 7 + 3] & 3) == 3 && d[3]) {
                FAIL("SS companion of interrupt endpoint: bmAttributes "
                     "0x%02x", d[3]);
            }
            break;
        case OR_DT_IAD:
            if (d[0] != 8) {
                FAIL("IAD bLength %u, not 8", d[0]);
            }
            if (d[3] == 0) {
                FAIL("IAD bInterfaceCount 0");
            }
            iad_first = d[2];
            iad_count = d[3];
            break;
        case CDC_CS_INTERFACE:
            if (!or_check_cs(&f, d, unions, why, why_len)) {
                return false;
            }
            break;
        case OR_DT_DEVICE:
        case OR_DT_CONFIG:
        case OR_DT_STRING:
        case OR_DT_QUALIFIER:
        case OR_DT_OTHER_SPEED:
        case OR_DT_BOS:
            FAIL("descriptor type %u inside a configuration", d[1]);
        default:
            break;
        }
    }
    if (need_companion) {
        FAIL("SuperSpeed endpoint without its companion descriptor");
    }
    if (!or_iface_done(&f, why, why_len)) {
        return false;
    }
    if (ss && bulk_speed) {
        FAIL("full/high-speed bulk sizes in a SuperSpeed configuration");
    }
    if (n_if != b[4]) {
        FAIL("bNumInterfaces %u, %d interfaces described", b[4], n_if);
    }
    for (i = 0; i < 256; i++) {
        if (seen_if[i] && i >= b[4]) {
            FAIL("interface number %d >= bNumInterfaces %u", i, b[4]);
        }
        if (unions[i] && !seen_if[i]) {
            FAIL("CDC union names interface %d, which is not there", i);
        }
    }
    if (iad_first >= 0) {
        for (i = iad_first; i < iad_first + iad_count; i++) {
            if (i > 255 || !seen_if[i]) {
                FAIL("IAD covers interface %d, which is not there", i);
            }
        }
    }
    return true;
}

/* USB 3.2 9.6.2 */
static bool or_check_bos(const uint8_t *b, size_t len, char *why,
                         size_t why_len)
{
    size_t pos;
    int ncaps = 0;
    bool usb2 = false, ssusb = false;

    if (b[0] != 5) {
        FAIL("BOS bLength %u, not 5", b[0]);
    }
    for (pos = 5; pos < len; pos += b[pos]) {
        const uint8_t *d = b + pos;

        if (pos + 3 > len || d[0] < 3 || pos + d[0] > len) {
            FAIL("BOS capability at %zu malformed", pos);
        }
        if (d[1] != OR_DT_DEVICE_CAP) {
            FAIL("BOS entry at %zu of type %u, not a device capability", pos,
                 d[1]);
        }
        ncaps++;
        if (d[2] == OR_CAP_USB20_EXT) {
            if (d[0] != 7) {
                FAIL("USB 2.0 extension bLength %u, not 7", d[0]);
            }
            usb2 = true;
        } else if (d[2] == OR_CAP_SS_USB) {
            if (d[0] != 10) {
                FAIL("SuperSpeed USB capability bLength %u, not 10", d[0]);
            }
            if ((rd16(d + 4) & 0xfff0) || !(rd16(d + 4) & 8)) {
                FAIL("SuperSpeed USB capability wSpeedsSupported 0x%04x",
                     rd16(d + 4));
            }
            if (d[6] > 3 || !(rd16(d + 4) & (1 << d[6]))) {
                FAIL("bFunctionalitySupport %u not among wSpeedsSupported "
                     "0x%04x", d[6], rd16(d + 4));
            }
            if (d[7] > 10) {
                FAIL("bU1DevExitLat %u > 10", d[7]);
            }
            if (rd16(d + 8) > 0x7ff) {
                FAIL("wU2DevExitLat 0x%04x > 0x07ff", rd16(d + 8));
            }
            ssusb = true;
        }
    }
    if (ncaps != b[4]) {
        FAIL("BOS bNumDeviceCaps %u, %d capabilities", b[4], ncaps);
    }
    if (or_dev.bcd_usb >= 0x0300 && (!usb2 || !ssusb)) {
        FAIL("SuperSpeed device BOS without the %s capability",
             usb2 ? "SuperSpeed USB" : "USB 2.0 extension");
    }
    return true;
}

/* USB 2.0 9.6.7 */
static bool or_check_string(uint8_t index, const uint8_t *b, size_t len,
                            char *why, size_t why_len)
{
    size_t i;

    if (b[0] % 2) {
        FAIL("string %u bLength %u is odd", index, b[0]);
    }
    if (index == 0) {
        if (b[0] < 4) {
            FAIL("string 0 (LANGID list) bLength %u < 4", b[0]);
        }
        for (i = 2; i + 1 < len; i += 2) {
            if (rd16(b + i) == 0) {
                FAIL("string 0: LANGID 0 at %zu", i);
            }
        }
        return true;
    }
    for (i = 2; i + 1 < len; i += 2) {
        uint16_t c = rd16(b + i);

        if (c >= 0xd800 && c < 0xdc00) {
            if (i + 3 >= len || rd16(b + i + 2) < 0xdc00 ||
                rd16(b + i + 2) >= 0xe000) {
                FAIL("string %u: unpaired UTF-16 high surrogate at %zu",
                     index, i);
            }
            i += 2;
        } else if (c >= 0xdc00 && c < 0xe000) {
            FAIL("string %u: unpaired UTF-16 low surrogate at %zu", index, i);
        }
    }
    if (or_dev.mac_index && index == or_dev.mac_index && len == b[0]) {
        /* ECM 1.2 5.4: 12 hexadecimal digits, high nibble first */
        if (b[0] != 2 + 12 * 2) {
            FAIL("iMACAddress string %u has %u characters, not 12", index,
                 (b[0] - 2) / 2);
        }
        for (i = 2; i < len; i += 2) {
            if (b[i + 1] || !g_ascii_isxdigit(b[i])) {
                FAIL("iMACAddress string %u: character %zu is not a hex "
                     "digit", index, (i - 2) / 2);
            }
        }
    }
    return true;
}

bool ncm_oracle_descriptor(uint8_t type, uint8_t index, uint16_t wlength,
                           const uint8_t *buf, size_t len,
                           char *why, size_t why_len)
{
    size_t real, want;

    if (len > wlength) {
        FAIL("descriptor %u/%u: %zu bytes for wLength %u", type, index, len,
             wlength);
    }
    if (len < 2) {
        if (len < MIN(wlength, 2)) {
            FAIL("descriptor %u/%u: %zu bytes for wLength %u", type, index,
                 len, wlength);
        }
        return true;
    }
    if (buf[1] != type) {
        FAIL("bDescriptorType %u for a request of type %u", buf[1], type);
    }
    if (buf[0] < 2) {
        FAIL("descriptor %u/%u bLength %u", type, index, buf[0]);
    }
    real = buf[0];
    if (type == OR_DT_CONFIG || type == OR_DT_OTHER_SPEED ||
        type == OR_DT_BOS) {
        if (len < 4) {
            if (len < wlength) {
                FAIL("descriptor %u/%u: %zu bytes, no wTotalLength", type,
                     index, len);
            }
            return true;
        }
        real = rd16(buf + 2);
        if (real < buf[0]) {
            FAIL("wTotalLength %zu < bLength %u", real, buf[0]);
        }
    }
    want = MIN(wlength, real);
    if (len != want) {
        FAIL("descriptor %u/%u: %zu bytes returned, expected min(wLength %u, "
             "length %zu) = %zu", type, index, len, wlength, real, want);
    }
    if (len < real) {
        return true;            /* truncated as asked: nothing more to see */
    }

    switch (type) {
    case OR_DT_DEVICE:
        if (buf[0] != 18) {
            FAIL("device descriptor bLength %u, not 18", buf[0]);
        }
        or_dev.bcd_usb = rd16(buf + 2);
        if (or_dev.bcd_usb >= 0x0300 ? buf[7] != 9 :
            (buf[7] != 8 && buf[7] != 16 && buf[7] != 32 && buf[7] != 64)) {
            FAIL("bMaxPacketSize0 %u with bcdUSB 0x%04x", buf[7],
                 or_dev.bcd_usb);
        }
        if (buf[17] == 0) {
            FAIL("bNumConfigurations 0");
        }
        return true;
    case OR_DT_QUALIFIER:
        if (buf[0] != 10) {
            FAIL("device qualifier bLength %u, not 10", buf[0]);
        }
        if (buf[7] != 8 && buf[7] != 16 && buf[7] != 32 && buf[7] != 64) {
            FAIL("device qualifier bMaxPacketSize0 %u", buf[7]);
        }
        if (buf[9]) {
            FAIL("device qualifier bReserved %u", buf[9]);
        }
        return true;
    case OR_DT_CONFIG:
    case OR_DT_OTHER_SPEED:
        return or_check_config(buf, len, type == OR_DT_OTHER_SPEED, why,
                               why_len);
    case OR_DT_BOS:
        return or_check_bos(buf, len, why, why_len);
    case OR_DT_STRING:
        return or_check_string(index, buf, len, why, why_len);
    default:
        return true;
    }
}
