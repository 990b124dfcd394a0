/*
 * Minimal stand-in for QEMU's qemu/bswap.h little-endian accessors.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef NCM_STANDALONE_BSWAP_H
#define NCM_STANDALONE_BSWAP_H

static inline int lduw_le_p(const void *ptr)
{
    const uint8_t *p = ptr;
    return p[0] | (p[1] << 8);
}

static inline int ldl_le_p(const void *ptr)
{
    const uint8_t *p = ptr;
    return (int)((uint32_t)p[0] | ((uint32_t)p[1] << 8) |
                 ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24));
}

static inline void stw_le_p(void *ptr, uint16_t v)
{
    uint8_t *p = ptr;
    p[0] = v;
    p[1] = v >> 8;
}

static inline void stl_le_p(void *ptr, uint32_t v)
{
    uint8_t *p = ptr;
    p[0] = v;
    p[1] = v >> 8;
    p[2] = v >> 16;
    p[3] = v >> 24;
}

#endif
