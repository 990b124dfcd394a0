/*
 * libqos CDC NCM host side: the NTBs a host builds and reads
 *
 * What a USB host's CDC NCM 1.0 driver does with NCM Transfer Blocks,
 * for the qtests, the unit tests and the fuzz targets alike: build an
 * NTB16 or NTB32 (NCM 1.0 3.2, 3.3) from a list of frames at the
 * datagram placement the other side asked for, read the datagrams of
 * one back, and the IEEE 802.3 CRC-32 of NCM1/ncm1 datagrams.  Written
 * from the specification, apart from any device's codec, so that the
 * two can disagree.  Plain C and glib: no libqtest.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef LIBQOS_NCM_HOST_H
#define LIBQOS_NCM_HOST_H

/* NCM 1.0 table 3-1 and 3-3: header sizes */
#define NCM_HOST_NTH16_LEN      12
#define NCM_HOST_NTH32_LEN      16
#define NCM_HOST_NDP16_HDR      8
#define NCM_HOST_NDP32_HDR      16

/* Where the datagrams and the NDP go in an NTB */
typedef struct NcmHostLayout {
    bool ntb32;                 /* NTH32/NDP32, else NTH16/NDP16 */
    /*
     * NDP signature NCM1/ncm1: each frame already ends with its CRC-32
     * (ncm_frame_append_crc()); the parser checks and strips it
     */
    bool crc;
    /*
     * The NDP after the datagrams, where a device puts it in an IN NTB;
     * else right after the NTH, as Linux's cdc_ncm does for OUT
     */
    bool ndp_last;
    uint16_t ndp_alignment;     /* wNdp{In,Out}Alignment (0: 4) */
    uint16_t divisor;           /* wNdp{In,Out}Divisor (0: 1) */
    uint16_t remainder;         /* wNdp{In,Out}PayloadRemainder */
} NcmHostLayout;

/* IEEE 802.3 CRC-32, bit by bit (NCM 1.0 3.3.2) */
uint32_t ncm_host_crc32(const uint8_t *p, size_t len);

/* @f's CRC-32 after it, off by one bit when @wrong */
void ncm_frame_append_crc(GByteArray *f, bool wrong);

/* A 16-bit field of an NTH16/NDP16 or the 32-bit one of an NTH32/NDP32 */
void ncm_put_field(uint8_t *p, bool ntb32, uint32_t v);
uint32_t ncm_get_field(const uint8_t *p, bool ntb32);

/*
 * An NTB of @frames (GByteArray each) laid out by @l: the NTH, one NDP
 * listing every frame, the frames at offsets with
 * offset % divisor == remainder.  wBlockLength is its length (0 for an
 * NTB16 of 64 KiB).
 */
GByteArray *ncm_ntb_build(const NcmHostLayout *l, GPtrArray *frames,
                          uint16_t seq);

/* Zero-pad @ntb to @len bytes inside the block (NTB16 64 KiB: length 0). */
void ncm_ntb_pad_to(GByteArray *ntb, bool ntb32, uint32_t len);

/*
 * Read the NTB of @len bytes at @b as @l describes it (format, CRC
 * mode; a non-zero ndp_alignment and divisor are checked too): the
 * NTH, its first NDP and that NDP's datagrams, each appended to @out as
 * a GByteArray without its CRC.  Returns false at the first rule the
 * NTB breaks, said in @why; @out then holds the datagrams read before.
 */
bool ncm_ntb_parse(const NcmHostLayout *l, const uint8_t *b, uint32_t len,
                   GPtrArray *out, char *why, size_t why_len);

#endif
