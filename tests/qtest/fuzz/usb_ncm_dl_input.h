/*
 * usb-ncm-dl fuzz targets: reading an input
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef USB_NCM_DL_INPUT_H
#define USB_NCM_DL_INPUT_H

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

#endif /* USB_NCM_DL_INPUT_H */
