/*
 * USB CDC-NCM NTB16/NTB32 codec
 *
 * Parses OUT transfers into datagrams and builds IN NTBs.  It knows nothing
 * of QEMU devices so that it can be unit-tested, fuzzed and benchmarked on
 * its own; both NTB formats go through the same code, driven by
 * NcmNtbFormat.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_USB_NCM_NTB_H
#define HW_USB_NCM_NTB_H

#include "qemu/bswap.h"
#include "hw/usb/cdc-ncm.h"

/* Layout of one NTB format: everything the parser and builder vary on. */
typedef struct NcmNtbFormat {
    const char *name;
    uint32_t nth_signature;
    uint32_t ndp_signature;
    uint32_t ndp_crc_signature;
    uint16_t nth_len;
    uint16_t ndp_header_len;
    uint16_t ndp_min_len;
    /* width in bytes of wBlockLength/wNdpIndex/entries (2 or 4) */
    uint8_t field_size;
    /* offsets inside the NTH and NDP headers */
    uint8_t nth_sequence_off;
    uint8_t nth_block_len_off;
    uint8_t nth_ndp_index_off;
    uint8_t ndp_next_off;
    /* NTB16 only: wBlockLength 0 means "up to the end of the transfer" */
    bool zero_block_len_is_transfer;
    uint32_t max_block_len;
} NcmNtbFormat;

extern const NcmNtbFormat ncm_ntb16_format;
extern const NcmNtbFormat ncm_ntb32_format;

/* A length or index field of @size bytes (NcmNtbFormat.field_size). */
static inline uint32_t ncm_ntb_field_get(const uint8_t *p, unsigned size)
{
    return size == 2 ? (uint32_t)lduw_le_p(p) : (uint32_t)ldl_le_p(p);
}

static inline void ncm_ntb_field_put(uint8_t *p, unsigned size, uint32_t v)
{
    if (size == 2) {
        stw_le_p(p, v);
    } else {
        stl_le_p(p, v);
    }
}

/*
 * Hard bound on NDPs followed in one NTB: Linux hosts send one, and the
 * chain walk must terminate whatever the guest writes.
 */
#define NCM_MAX_NDP_CHAIN               16
/* Upper bound for wNtbOutMaxDatagrams / the parser's datagram array */
#define NCM_MAX_DATAGRAMS               1024

typedef enum NcmParseError {
    NCM_PARSE_OK = 0,
    NCM_PARSE_NTH_TRUNCATED,        /* fewer bytes than an NTH */
    NCM_PARSE_NTH_SIGNATURE,        /* not "NCMH"/"ncmh" */
    NCM_PARSE_NTH_HEADER_LEN,       /* wHeaderLength != 12/16 */
    NCM_PARSE_BLOCK_TOO_SHORT,      /* block cannot hold NTH + NDP */
    NCM_PARSE_BLOCK_PAST_TRANSFER,  /* wBlockLength > bytes received */
    NCM_PARSE_BLOCK_TOO_LONG,       /* wBlockLength > dwNtbOutMaxSize */
    NCM_PARSE_NDP_ALIGNMENT,        /* NDP index not 4-byte aligned */
    NCM_PARSE_NDP_BOUNDS,           /* NDP header outside NTB or in NTH */
    NCM_PARSE_NDP_SIGNATURE,        /* not NCM0/ncm0 (or NCM1 w/o CRC) */
    NCM_PARSE_NDP_LENGTH,           /* wLength too small, odd or too long */
    NCM_PARSE_NDP_UNTERMINATED,     /* no null entry inside wLength */
    NCM_PARSE_NDP_CHAIN_LOOP,       /* wNextNdpIndex revisits an NDP */
    NCM_PARSE_NDP_CHAIN_TOO_LONG,   /* more than NCM_MAX_NDP_CHAIN NDPs */
    NCM_PARSE_DATAGRAM_BOUNDS,      /* index/length outside the block */
    NCM_PARSE_DATAGRAM_TOO_SHORT,   /* < 14 bytes */
    NCM_PARSE_DATAGRAM_TOO_LONG,    /* > maximum datagram size */
    NCM_PARSE_TOO_MANY_DATAGRAMS,   /* > wNtbOutMaxDatagrams */
    NCM_PARSE_ERROR__MAX,
} NcmParseError;

const char *ncm_parse_error_name(NcmParseError err);

/* What the device advertised; the parser holds the host to it. */
typedef struct NcmParseLimits {
    uint32_t max_ntb_len;           /* dwNtbOutMaxSize */
    uint32_t max_datagram_len;      /* current maximum datagram size */
    uint16_t max_datagrams;         /* 0 means NCM_MAX_DATAGRAMS */
    /*
     * CRC mode (NCM 1.0 6.2.13): NDPs must be NCM1/ncm1 and every
     * datagram ends in a CRC-32 that its wDatagramLength includes; the
     * parser reports the length without it (the CRC follows the
     * datagram, inside the block) and leaves checking it to the caller.
     */
    bool crc;
} NcmParseLimits;

typedef struct NcmDatagram {
    uint32_t offset;                /* from the start of the NTB */
    uint32_t len;
} NcmDatagram;

/*
 * One NTB, fully validated before any of its datagrams is handed out, so
 * that a malformed NTB never emits a partial set of frames.
 */
typedef struct NcmNtbView {
    uint32_t block_len;             /* bytes the NTB occupies */
    uint32_t sequence;
    uint32_t n_datagrams;
    uint32_t n_ndps;
    NcmDatagram datagrams[NCM_MAX_DATAGRAMS];
} NcmNtbView;

/*
 * Validate the NTB at the start of @buf (@len bytes received).  On success
 * fill @view; datagram offsets are relative to @buf.
 */
NcmParseError ncm_ntb_parse_one(const NcmNtbFormat *fmt,
                                const uint8_t *buf, size_t len,
                                const NcmParseLimits *limits,
                                NcmNtbView *view);

/*
 * Walk a complete OUT transfer that may hold several NTBs back to back,
 * and a trailing 1-byte zero pad (Windows).  @emit is called for every
 * datagram of every valid NTB, in order.  Parsing stops at the first
 * malformed NTB; its error is returned and the NTBs before it have been
 * emitted.  *@ntbs_out counts the valid NTBs.
 */
typedef void NcmDatagramFn(void *opaque, const uint8_t *data, size_t len);

NcmParseError ncm_transfer_parse(const NcmNtbFormat *fmt,
                                 const uint8_t *buf, size_t len,
                                 const NcmParseLimits *limits,
                                 NcmNtbView *scratch,
                                 NcmDatagramFn *emit, void *opaque,
                                 unsigned *ntbs_out);

/*
 * The IEEE 802.3 CRC-32 (Ethernet's FCS) that CRC mode appends to every
 * datagram, stored little-endian after it (as Linux's f_ncm does).
 */
uint32_t ncm_crc32(const uint8_t *data, size_t len);

/*
 * True when the @len bytes at @data are followed by their CRC-32; the
 * parser in CRC mode guarantees those 4 bytes lie inside the NTB.
 */
bool ncm_datagram_crc_ok(const uint8_t *data, uint32_t len);

/* Builder for IN NTBs: NTH first, datagrams, one NDP written at the end. */
typedef struct NcmNtbLayout {
    uint32_t max_len;               /* host's NTB input size */
    uint16_t divisor;               /* wNdpInDivisor */
    uint16_t remainder;             /* wNdpInPayloadRemainder */
    uint16_t ndp_alignment;         /* wNdpInAlignment */
    uint16_t max_datagrams;         /* wNtbInMaxDatagrams, 0 = no limit */
    bool crc;                       /* NCM1/ncm1 NDPs, CRC-32 appended */
} NcmNtbLayout;

typedef struct NcmNtbBuilder {
    const NcmNtbFormat *fmt;
    NcmNtbLayout layout;
    uint8_t *buf;
    uint32_t len;                   /* end of the last datagram */
    uint32_t n_datagrams;
    uint32_t max_datagrams;
    uint32_t ndp_offset;            /* where finish() put the NDP */
    NcmDatagram datagrams[NCM_MAX_DATAGRAMS];
} NcmNtbBuilder;

/* Start an empty NTB in @buf, which must hold layout->max_len bytes. */
void ncm_ntb_builder_init(NcmNtbBuilder *b, const NcmNtbFormat *fmt,
                          const NcmNtbLayout *layout, uint8_t *buf);

/*
 * Reserve room for a datagram of @len bytes and return where to write it,
 * or NULL when it does not fit (the NTB should then be sent) or is shorter
 * than an Ethernet header.  In CRC mode 4 more bytes are reserved and
 * finish() writes the CRC there.
 */
uint8_t *ncm_ntb_builder_reserve(NcmNtbBuilder *b, uint32_t len);

/* Copy helper around reserve: true when the datagram was added. */
bool ncm_ntb_builder_append(NcmNtbBuilder *b, const void *data, uint32_t len);

/* True when a datagram of @len bytes would still fit. */
bool ncm_ntb_builder_fits(const NcmNtbBuilder *b, uint32_t len);

/* How long the NTB would be if finished now. */
uint32_t ncm_ntb_builder_finished_len(const NcmNtbBuilder *b);

/*
 * Write the NDP after the last datagram and the NTH in front, in place,
 * and return the NTB length; 0 (nothing written) for an empty NTB.  Call
 * ncm_ntb_builder_init() before reuse.
 */
uint32_t ncm_ntb_builder_finish(NcmNtbBuilder *b, uint16_t sequence);

#endif /* HW_USB_NCM_NTB_H */
