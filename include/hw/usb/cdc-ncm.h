/*
 * USB CDC Network Control Model (NCM) 1.0: wire constants
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_USB_CDC_NCM_H
#define HW_USB_CDC_NCM_H

/* Interface class codes (CDC 1.2 tables 4, 5, 6) */
#define CDC_CLASS_COMM                  0x02
#define CDC_CLASS_DATA                  0x0a
#define CDC_SUBCLASS_NCM                0x0d
#define CDC_PROTO_NONE                  0x00
#define CDC_PROTO_NTB                   0x01

/* Functional descriptor subtypes (CDC 1.2 table 13, NCM 1.0 table 5-2) */
#define CDC_CS_INTERFACE                0x24
#define CDC_DESC_HEADER                 0x00
#define CDC_DESC_UNION                  0x06
#define CDC_DESC_ETHERNET               0x0f
#define CDC_DESC_NCM                    0x1a

/* bmNetworkCapabilities (NCM 1.0 table 5-2) */
#define NCM_CAP_PACKET_FILTER           (1 << 0)
#define NCM_CAP_NET_ADDRESS             (1 << 1)
#define NCM_CAP_ENCAPSULATED            (1 << 2)
#define NCM_CAP_MAX_DATAGRAM_SIZE       (1 << 3)
#define NCM_CAP_CRC_MODE                (1 << 4)
#define NCM_CAP_NTB_INPUT_SIZE_8        (1 << 5)

/* Class-specific requests (CDC ECM 1.2 table 6, NCM 1.0 table 6-2) */
#define CDC_SET_ETHERNET_MULTICAST_FILTERS      0x40
#define CDC_SET_ETHERNET_PM_PATTERN_FILTER      0x41
#define CDC_GET_ETHERNET_PM_PATTERN_FILTER      0x42
#define CDC_SET_ETHERNET_PACKET_FILTER          0x43
#define CDC_GET_ETHERNET_STATISTIC              0x44
#define NCM_GET_NTB_PARAMETERS                  0x80
#define NCM_GET_NET_ADDRESS                     0x81
#define NCM_SET_NET_ADDRESS                     0x82
#define NCM_GET_NTB_FORMAT                      0x83
#define NCM_SET_NTB_FORMAT                      0x84
#define NCM_GET_NTB_INPUT_SIZE                  0x85
#define NCM_SET_NTB_INPUT_SIZE                  0x86
#define NCM_GET_MAX_DATAGRAM_SIZE               0x87
#define NCM_SET_MAX_DATAGRAM_SIZE               0x88
#define NCM_GET_CRC_MODE                        0x89
#define NCM_SET_CRC_MODE                        0x8a

/* SET_ETHERNET_PACKET_FILTER wValue bits (CDC ECM 1.2 table 8) */
#define CDC_FILTER_PROMISCUOUS          (1 << 0)
#define CDC_FILTER_ALL_MULTICAST        (1 << 1)
#define CDC_FILTER_DIRECTED             (1 << 2)
#define CDC_FILTER_BROADCAST            (1 << 3)
#define CDC_FILTER_MULTICAST            (1 << 4)

/* wNumberMCFilters (CDC ECM 1.2 table 3) */
#define CDC_MC_FILTERS_IMPERFECT        (1 << 15)
#define CDC_MC_FILTERS_COUNT_MASK       0x7fff
#define CDC_MC_ADDRESS_LEN              6

/* GET_ETHERNET_STATISTIC feature selectors (CDC ECM 1.2 table 9) */
#define CDC_STAT_XMIT_OK                1
#define CDC_STAT_RCV_OK                 2
#define CDC_STAT_XMIT_ERROR             3
#define CDC_STAT_RCV_ERROR              4
#define CDC_STAT_RCV_NO_BUFFER          5
#define CDC_STAT_DIRECTED_BYTES_XMIT    6
#define CDC_STAT_DIRECTED_FRAMES_XMIT   7
#define CDC_STAT_MULTICAST_BYTES_XMIT   8
#define CDC_STAT_MULTICAST_FRAMES_XMIT  9
#define CDC_STAT_BROADCAST_BYTES_XMIT   10
#define CDC_STAT_BROADCAST_FRAMES_XMIT  11
#define CDC_STAT_DIRECTED_BYTES_RCV     12
#define CDC_STAT_DIRECTED_FRAMES_RCV    13
#define CDC_STAT_MULTICAST_BYTES_RCV    14
#define CDC_STAT_MULTICAST_FRAMES_RCV   15
#define CDC_STAT_BROADCAST_BYTES_RCV    16
#define CDC_STAT_BROADCAST_FRAMES_RCV   17
#define CDC_STAT__MAX                   29
/* bmEthernetStatistics: bit (selector - 1) */
#define CDC_STAT_BIT(sel)               (1u << ((sel) - 1))

/* SET_CRC_MODE wValue (NCM 1.0 6.2.13) */
#define NCM_CRC_NOT_APPENDED            0
#define NCM_CRC_APPENDED                1
#define NCM_CRC_LEN                     4

/* Notifications (CDC 1.2 table 20) */
#define CDC_NOTIFY_REQUEST_TYPE         0xa1
#define CDC_NOTIFY_NETWORK_CONNECTION   0x00
#define CDC_NOTIFY_SPEED_CHANGE         0x2a
#define CDC_NOTIFY_HEADER_LEN           8
#define CDC_NOTIFY_SPEED_CHANGE_LEN     16

/* GET_NTB_PARAMETERS reply (NCM 1.0 table 6-3) */
#define NCM_NTB_PARAMETERS_LEN          28
#define NCM_NTB_FORMAT_16               (1 << 0)
#define NCM_NTB_FORMAT_32               (1 << 1)

/* SET_NTB_FORMAT wValue */
#define NCM_NTB_FORMAT_SELECT_16        0
#define NCM_NTB_FORMAT_SELECT_32        1

/* NTB structures (NCM 1.0 section 3), stored little-endian */
#define NCM_NTH16_SIGNATURE             0x484d434eu     /* "NCMH" */
#define NCM_NTH32_SIGNATURE             0x686d636eu     /* "ncmh" */
#define NCM_NDP16_NOCRC_SIGNATURE       0x304d434eu     /* "NCM0" */
#define NCM_NDP16_CRC_SIGNATURE         0x314d434eu     /* "NCM1" */
#define NCM_NDP32_NOCRC_SIGNATURE       0x306d636eu     /* "ncm0" */
#define NCM_NDP32_CRC_SIGNATURE         0x316d636eu     /* "ncm1" */
#define NCM_NTH16_LEN                   12
#define NCM_NTH32_LEN                   16
#define NCM_NDP16_HEADER_LEN            8
#define NCM_NDP32_HEADER_LEN            16
#define NCM_NDP16_MIN_LEN               16
#define NCM_NDP32_MIN_LEN               32

/* Spec lower bound for dwNtbInMaxSize / dwNtbOutMaxSize (NCM 1.0 6.2.1) */
#define NCM_NTB_MIN_SIZE                2048
#define NCM_NTB16_MAX_SIZE              65536

#define NCM_ETH_HEADER_LEN              14

#endif /* HW_USB_CDC_NCM_H */
