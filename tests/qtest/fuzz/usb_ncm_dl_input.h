/*
 * usb-ncm-dl fuzz targets: reading an input
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef USB_NCM_DL_INPUT_H
#define USB_NCM_DL_INPUT_H

#include "tests/qtest/libqos/ncm-host.h"

/*
 * The bytes of an input not read yet.  An input that runs out reads as
 * zeros, so that every prefix of an input is an input too.
 */
typedef struct FuzzIn {
    const uint8_t *p;
    size_t len;
} FuzzIn;

static inline uint8_t in_u8(FuzzIn *in)
{
    if (!in->len) {
        return 0;
    }
    in->len--;
    return *in->p++;
}

static inline uint16_t in_u16(FuzzIn *in)
{
    uint16_t lo = in_u8(in);

    return lo | (uint16_t)in_u8(in) << 8;
}

static inline uint32_t in_u32(FuzzIn *in)
{
    uint32_t lo = in_u16(in);

    return lo | (uint32_t)in_u16(in) << 16;
}

/*
 * Fill @buf with up to @take of the next input bytes, repeated over the
 * rest of @len (a pattern when the input has run out).
 */
static inline void in_fill(FuzzIn *in, uint8_t *buf, size_t len, size_t take)
{
    size_t n = MIN(MIN(len, take), in->len), i;

    if (n) {
        memcpy(buf, in->p, n);
    }
    in->p += n;
    in->len -= n;
    for (i = n; i < len; i++) {
        buf[i] = n ? buf[i % n] : (uint8_t)(i * 7);
    }
}

/*
 * An NTB of @n datagrams of 14 to 1514 bytes from the input (with
 * @crc, each followed by its CRC-32: the right one unless bit 15 of its
 * length word asks for the input's), laid out by @l, which says the
 * format and CRC mode.  The input is read datagram by datagram, length
 * word then up to 64 bytes, so that a seed keeps its meaning.
 */
static inline GByteArray *in_ntb(FuzzIn *in, const NcmHostLayout *l,
                                 unsigned n, uint16_t seq)
{
    g_autoptr(GPtrArray) frames =
        g_ptr_array_new_with_free_func((GDestroyNotify)g_byte_array_unref);
    unsigned i;

    for (i = 0; i < n; i++) {
        uint16_t v = in_u16(in);
        uint32_t len = 14 + v % 1501 + (l->crc ? 4 : 0);
        GByteArray *f = g_byte_array_sized_new(len);

        g_byte_array_set_size(f, len);
        in_fill(in, f->data, len, 64);
        if (l->crc && !(v & 0x8000)) {
            g_byte_array_set_size(f, len - 4);
            ncm_frame_append_crc(f, false);
        }
        g_ptr_array_add(frames, f);
    }
    return ncm_ntb_build(l, frames, seq);
}

#endif /* USB_NCM_DL_INPUT_H */
