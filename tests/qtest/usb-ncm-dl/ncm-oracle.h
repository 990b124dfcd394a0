/*
 * usb-ncm-dl: strict NCM 1.0 / USB ch. 9 oracle for tests and the fuzzer
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef NCM_ORACLE_H
#define NCM_ORACLE_H

typedef struct NcmOracleParams {      /* what the host negotiated */
    bool ntb32;                /* SET_NTB_FORMAT: false = NTB16 */
    bool crc;                  /* SET_CRC_MODE on */
    uint32_t in_max_size;      /* dwNtbInMaxSize in force */
    uint16_t in_divisor, in_remainder, in_alignment;
    uint16_t in_max_datagrams; /* wNtbInMaxDatagrams, 0 = none */
    uint16_t max_packet;       /* bulk IN wMaxPacketSize at the current speed */
} NcmOracleParams;

typedef struct NcmOracle NcmOracle;

NcmOracle *ncm_oracle_new(void);
void ncm_oracle_free(NcmOracle *o);
void ncm_oracle_reset(NcmOracle *o);
bool ncm_oracle_in_transfer(NcmOracle *o, const NcmOracleParams *p,
                            const uint8_t *buf, size_t len, size_t requested,
                            char *why, size_t why_len);
bool ncm_oracle_descriptor(uint8_t type, uint8_t index, uint16_t wlength,
                           const uint8_t *buf, size_t len,
                           char *why, size_t why_len);

#endif
