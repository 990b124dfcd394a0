/*
 * usb-ncm-dl: strict NCM 1.0 / USB ch. 9 oracle for the qtests and fuzzers
 *
 * Plain C and glib (no libqtest), so that a fuzz target can link it too.
 * The checks are the specifications' rules, not the device's code: see
 * ncm-oracle.c for the sections each one comes from.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef NCM_ORACLE_H
#define NCM_ORACLE_H

typedef struct NcmOracleParams {      /* what the host negotiated */
    bool ntb32;                /* SET_NTB_FORMAT: false = NTB16 */
    bool crc;                  /* SET_CRC_MODE on */
    uint32_t in_max_size;      /* dwNtbInMaxSize in force, 0 = unknown */
    uint16_t in_divisor, in_remainder, in_alignment; /* GET_NTB_PARAMETERS */
    uint16_t in_max_datagrams; /* wNtbInMaxDatagrams, 0 = none */
    uint16_t max_packet;       /* bulk IN wMaxPacketSize at the current speed */
} NcmOracleParams;

/* Stream state: wSequence, an NTB spread over full transfers */
typedef struct NcmOracle NcmOracle;

NcmOracle *ncm_oracle_new(void);
void ncm_oracle_free(NcmOracle *o);
/* A function reset: device reset, alternate setting or configuration */
void ncm_oracle_reset(NcmOracle *o);
/*
 * The host lost an NTB the device sent (a babble, a fault that drops one):
 * the next NTB's wSequence skips it, and a partial NTB is forgotten.
 */
void ncm_oracle_lost(NcmOracle *o);

/*
 * One completed bulk IN transfer: the @len bytes the device returned for
 * a buffer of @requested bytes.  Returns false on a violation of NCM 1.0
 * (or of the USB short packet rule) and fills @why.  A transfer that
 * filled its buffer leaves the NTB open until a later one ends it, so
 * the NTB is checked when its last transfer arrives.
 */
bool ncm_oracle_in_transfer(NcmOracle *o, const NcmOracleParams *p,
                            const uint8_t *buf, size_t len, size_t requested,
                            char *why, size_t why_len);

/*
 * A GET_DESCRIPTOR reply (@type/@index from wValue, @wlength asked, the
 * @len bytes returned), checked by the USB 2.0 ch. 9 / USB 3.x rules and,
 * for a configuration, CDC 1.2 / NCM 1.0 section 5.  The device
 * descriptor's bcdUSB (the speed) and a configuration's iMACAddress are
 * remembered for the descriptors read after them.
 */
bool ncm_oracle_descriptor(uint8_t type, uint8_t index, uint16_t wlength,
                           const uint8_t *buf, size_t len,
                           char *why, size_t why_len);

#endif
