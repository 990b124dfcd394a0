/*
 * USB CDC-NCM function: the Ethernet statistics it keeps, in one list
 *
 * Apart from ncm-function.h so that the qtests, which have functions of
 * the same names, can take the list without the function's API.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_USB_NCM_ETH_STATS_H
#define HW_USB_NCM_ETH_STATS_H

/*
 * The Ethernet statistics GET_ETHERNET_STATISTIC answers (CDC ECM 1.2
 * 6.2.5), each the NcmCounters counter it names; RCV_OK, the frames
 * received, is the sum of the three *_FRAMES_RCV ones.  These counters are
 * the ones a real function keeps across a migration.  Written once:
 * ncm_eth_stats[] (ncm_statistic(), the migrated array and its needed()),
 * the names the qtests compare across a migration and the device suite's
 * check of the stream are generated from it; the unit tests check
 * NCM_ETH_STATS_SUPPORTED against it.  The stream carries the counters
 * in this order: a new one goes at the end.
 */
#define NCM_ETH_STAT_COUNTERS(X) \
    X(XMIT_OK, out_datagrams) \
    X(XMIT_ERROR, out_crc_errors) \
    X(RCV_ERROR, rx_oversize) \
    X(RCV_NO_BUFFER, rx_inactive_drops) \
    X(DIRECTED_FRAMES_XMIT, out_directed_frames) \
    X(DIRECTED_BYTES_XMIT, out_directed_bytes) \
    X(MULTICAST_FRAMES_XMIT, out_multicast_frames) \
    X(MULTICAST_BYTES_XMIT, out_multicast_bytes) \
    X(BROADCAST_FRAMES_XMIT, out_broadcast_frames) \
    X(BROADCAST_BYTES_XMIT, out_broadcast_bytes) \
    X(DIRECTED_FRAMES_RCV, in_directed_frames) \
    X(DIRECTED_BYTES_RCV, in_directed_bytes) \
    X(MULTICAST_FRAMES_RCV, in_multicast_frames) \
    X(MULTICAST_BYTES_RCV, in_multicast_bytes) \
    X(BROADCAST_FRAMES_RCV, in_broadcast_frames) \
    X(BROADCAST_BYTES_RCV, in_broadcast_bytes)

#endif
