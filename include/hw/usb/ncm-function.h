/*
 * USB CDC-NCM function: the protocol state machine behind usb-ncm-dl
 *
 * Class requests, OUT transfer delimiting (the ZLP policy), IN NTB
 * aggregation, notifications and counters.  It knows nothing of USB
 * packets or QEMU's net layer; hw/usb/dev-ncm.c is the glue.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_USB_NCM_FUNCTION_H
#define HW_USB_NCM_FUNCTION_H

#include "hw/usb/ncm-ntb.h"
#include "hw/usb/ncm-eth-stats.h"

typedef enum NcmZlpPolicy {
    /* NCM 1.0: a short packet, a ZLP, wBlockLength or dwNtbOutMaxSize */
    NCM_ZLP_AUTO,
    /* DisplayLink firmware: only a short packet or a ZLP ends a transfer */
    NCM_ZLP_REQUIRED,
} NcmZlpPolicy;

/* What the device advertises; fixed at realize from the properties. */
typedef struct NcmConfig {
    /* the device's name in trace events (its id, else its USB port) */
    const char *name;
    uint32_t ntb_in_max_size;
    uint32_t ntb_out_max_size;
    uint16_t in_divisor;
    uint16_t in_remainder;
    uint16_t in_alignment;
    uint16_t out_divisor;
    uint16_t out_remainder;
    uint16_t out_alignment;
    uint16_t out_max_datagrams;
    uint16_t max_segment_size;
    uint8_t network_caps;
    uint8_t ntb_formats;
    uint8_t mac[6];
    uint32_t link_speed_bps;
    NcmZlpPolicy zlp;
    uint16_t power_on_filter;       /* until SET_ETHERNET_PACKET_FILTER */
    /* wNumberMCFilters: D14..D0 how many, D15 imperfect (hash) filtering */
    uint16_t mc_filters;
    uint32_t eth_stats;             /* bmEthernetStatistics */
    /* the firmware's own limit of datagrams per IN NTB, 0: none */
    uint16_t in_max_datagrams;
} NcmConfig;

/* Most multicast filters a configuration may advertise */
#define NCM_MAX_MC_FILTERS              256

/* NCM_ETH_STAT_COUNTERS: the Ethernet statistics, by their counters */

/* The statistics GET_ETHERNET_STATISTIC can answer: the above and RCV_OK */
#define NCM_ETH_STATS_SUPPORTED         0x0001ffffu

/*
 * The bmNetworkCapabilities bits the function implements: all but
 * encapsulated commands (bit 2); bits 6-7 are reserved.
 */
#define NCM_CAPS_SUPPORTED              (NCM_CAP_PACKET_FILTER | \
                                         NCM_CAP_NET_ADDRESS | \
                                         NCM_CAP_MAX_DATAGRAM_SIZE | \
                                         NCM_CAP_CRC_MODE | \
                                         NCM_CAP_NTB_INPUT_SIZE_8)

/*
 * Every counter of the function, written once: NcmCounters and the
 * device's x-stats are generated from this list.  The migration stream
 * is not: it carries only the counters GET_ETHERNET_STATISTIC reports
 * (NCM_ETH_STAT_COUNTERS), so a counter added here is no change of the
 * stream.
 */
#define NCM_FUNCTION_COUNTERS(X) \
    X(out_transfers) \
    X(out_direct_transfers)     /* parsed in guest memory, no copy */ \
    X(out_ntbs) \
    X(out_datagrams) \
    X(out_bytes) \
    X(out_zlps) \
    X(out_overflow_bytes) \
    X(out_merged_transfers) \
    X(out_merge_lost_datagrams) \
    X(in_ntbs) \
    X(in_direct_ntbs)           /* built in the host's buffer: 1 copy */ \
    X(in_datagrams) \
    X(in_bytes) \
    X(in_zlps)                  /* ZLPs ending an exact-multiple NTB */ \
    X(in_babbles)               /* buffers ending inside a packet */ \
    X(in_rescued_datagrams)     /* taken back from a cancelled buffer */ \
    X(rx_backpressure) \
    X(rx_filtered) \
    X(rx_oversize) \
    X(rx_inactive_drops) \
    X(in_flushed_datagrams) \
    X(bad_requests) \
    X(notifications) \
    X(link_down_drops) \
    X(fault_dropped_in_ntbs) \
    X(fault_corrupted_in_ntbs) \
    /* NCM 1.0 requests, by kind */ \
    X(input_size_requests_4)    /* SET_NTB_INPUT_SIZE, 4-byte form */ \
    X(input_size_requests_8)    /* SET_NTB_INPUT_SIZE, 8-byte form */ \
    X(crc_mode_requests)        /* SET_CRC_MODE accepted */ \
    X(mc_filter_requests)       /* SET_ETHERNET_MULTICAST_FILTERS */ \
    X(mc_filter_rejects)        /* ... with a malformed list */ \
    X(statistic_requests)       /* GET_ETHERNET_STATISTIC answered */ \
    /* CRC mode */ \
    X(out_crc_datagrams)        /* OUT datagrams whose CRC matched */ \
    X(out_crc_errors)           /* ... that did not: dropped */ \
    X(in_crc_ntbs)              /* IN NTBs sent with NCM1/ncm1 NDPs */ \
    /* by destination, for GET_ETHERNET_STATISTIC: OUT is "XMIT" */ \
    X(out_directed_frames) \
    X(out_directed_bytes) \
    X(out_multicast_frames) \
    X(out_multicast_bytes) \
    X(out_broadcast_frames) \
    X(out_broadcast_bytes) \
    /* frames from the network passed to the host: "RCV" */ \
    X(in_directed_frames) \
    X(in_directed_bytes) \
    X(in_multicast_frames) \
    X(in_multicast_bytes) \
    X(in_broadcast_frames) \
    X(in_broadcast_bytes)

#define NCM_COUNTER_FIELD(name) uint64_t name;

typedef struct NcmCounters {
    NCM_FUNCTION_COUNTERS(NCM_COUNTER_FIELD)
    uint64_t out_parse_errors[NCM_PARSE_ERROR__MAX];
} NcmCounters;

/* A counter of NCM_ETH_STAT_COUNTERS: its selector, where it is kept */
typedef struct NcmEthStat {
    uint8_t selector;
    size_t offset;                  /* in NcmCounters */
} NcmEthStat;

#define NCM_ETH_STAT_ENTRY(sel, counter) \
    { CDC_STAT_##sel, offsetof(NcmCounters, counter) },
/* How many NCM_ETH_STAT_COUNTERS lists: a byte each */
#define NCM_ETH_STAT_SLOT(sel, counter) char counter;
typedef struct NcmEthStatSlots {
    NCM_ETH_STAT_COUNTERS(NCM_ETH_STAT_SLOT)
} NcmEthStatSlots;
#define NCM_ETH_STATS_COUNT sizeof(NcmEthStatSlots)
extern const NcmEthStat ncm_eth_stats[NCM_ETH_STATS_COUNT];

static inline uint64_t *ncm_eth_stat_counter(NcmCounters *c,
                                             const NcmEthStat *stat)
{
    return (uint64_t *)((uint8_t *)c + stat->offset);
}

static inline uint64_t ncm_eth_stat_value(const NcmCounters *c,
                                          const NcmEthStat *stat)
{
    return *(const uint64_t *)((const uint8_t *)c + stat->offset);
}

/*
 * IN-side corruptions for exercising a host driver's NTB parser.  Each is
 * applied to a finished NTB in a fixed way so that a failure replays.
 */
typedef enum NcmInCorruption {
    NCM_CORRUPT_NONE,
    NCM_CORRUPT_NDP_AT_END,         /* NDP in the last 8 bytes */
    NCM_CORRUPT_DATAGRAM_WRAP,      /* first entry: index 0xfff0, len 0x20 */
    NCM_CORRUPT_NDP_LOOP,           /* wNextNdpIndex points at itself */
    NCM_CORRUPT_BLOCK_LEN,          /* wBlockLength past the input size */
    NCM_CORRUPT_SHORT_NOTIFY,       /* next notification is 4 bytes */
    NCM_CORRUPT__MAX,
} NcmInCorruption;

extern const char *const ncm_in_corruption_names[NCM_CORRUPT__MAX];

/*
 * Fault injection is an object of its own (hw/usb/ncm-fault.c owns its
 * state, attached to the device through ncm-fault-target.h); the
 * function asks it through these hooks where a fault changes what it
 * does.  Without hooks (the default) there are no faults.
 */
typedef struct NcmFaultHooks {
    /* the firmware is busy: the bulk endpoints NAK, nothing is sent */
    bool (*busy)(void *opaque);
    /*
     * An IN NTB is finished: true to drop it; else *@how (preset to
     * NCM_CORRUPT_NONE) says how it is corrupted before it goes.
     */
    bool (*in_ntb)(void *opaque, NcmInCorruption *how);
    /* a notification is built: true to cut it to 4 bytes */
    bool (*short_notify)(void *opaque);
} NcmFaultHooks;

enum {
    NCM_NOTIFY_SPEED = 1 << 0,
    NCM_NOTIFY_CONNECTION = 1 << 1,
};

typedef enum NcmRxResult {
    NCM_RX_QUEUED,      /* in the IN NTB under construction */
    NCM_RX_BUSY,        /* no room now: retry after the host reads */
    NCM_RX_DROPPED,     /* filtered, oversized or data interface off */
} NcmRxResult;

typedef struct NcmFunction {
    NcmConfig cfg;

    /* negotiated with the host; reset when the data interface goes alt 0 */
    const NcmNtbFormat *format;
    uint32_t ntb_in_size;
    uint16_t ntb_in_max_datagrams;
    uint16_t max_datagram_size;
    uint16_t packet_filter;
    uint8_t net_address[6];
    bool crc_mode;                  /* SET_CRC_MODE(1): NCM1 NDPs */
    /* SET_ETHERNET_MULTICAST_FILTERS */
    uint16_t mc_count;
    uint8_t mc_addrs[NCM_MAX_MC_FILTERS][CDC_MC_ADDRESS_LEN];
    uint64_t mc_hash;               /* imperfect filtering: 64 bins */
    bool data_active;               /* data interface in alt 1 */
    bool link_up;

    /* OUT: one transfer being collected until it is known to be complete */
    uint8_t *out_buf;
    uint32_t out_buf_size;
    uint32_t out_len;
    bool out_discarding;            /* overflowed: drop until transfer end */
    NcmNtbView out_view;

    /*
     * IN: the NTB is built in place, in the buffer of a parked IN packet
     * when the host has one waiting (in_attached), else in in_buf and sent
     * from in_send_off when the host asks.
     */
    uint8_t *in_buf;
    bool in_attached;
    uint32_t in_attached_size;
    NcmNtbBuilder in_builder;
    uint32_t in_ntb_len;            /* non-zero while a finished NTB drains */
    uint32_t in_send_off;
    uint16_t in_sequence;
    /*
     * The last NTB filled its packet exactly and was an exact multiple of
     * wMaxPacketSize, shorter than the input size: the host's transfer is
     * still open, so the next IN packet is a ZLP (USB 2.0 5.8.3, NCM 1.0
     * 3.2.2).
     */
    bool in_zlp_owed;

    /* interrupt endpoint */
    uint8_t notify_pending;
    uint8_t notify_buf[CDC_NOTIFY_SPEED_CHANGE_LEN];
    uint8_t notify_len;
    uint8_t notify_off;
    uint8_t control_interface;

    const NcmFaultHooks *fault_hooks;
    void *fault_opaque;
    /*
     * Allocated apart, so that a debug counter added to NcmCounters does
     * not change NcmFunction's size, which the migration description
     * (-dump-vmstate) shows: only the counters listed in
     * ncm-function-vmstate.c are migration ABI.
     */
    NcmCounters *stats;

    /* what migration carries in another form than the above */
    struct {
        bool ntb32;
        uint32_t in_buf_len;        /* bytes of in_buf in the stream */
    } mig;
} NcmFunction;

typedef void NcmEmitFn(void *opaque, const uint8_t *frame, size_t len);

/*
 * Whether @cfg is within what NCM 1.0 and the function allow: NULL, or
 * why not (g_free() it), naming the property that is wrong.
 */
char *ncm_function_check_config(const NcmConfig *cfg);
/* @cfg may be &f->cfg, where the device's properties put it. */
void ncm_function_init(NcmFunction *f, const NcmConfig *cfg);
void ncm_function_cleanup(NcmFunction *f);
/* Bus reset: back to the power-on state, data interface off. */
void ncm_function_reset(NcmFunction *f);
/* SET_INTERFACE on the data interface. */
void ncm_function_set_data_alt(NcmFunction *f, int alt);
/* Link as the host is to see it (the backend's, or a fault's). */
void ncm_function_set_link(NcmFunction *f, bool up);
/* After ncm_function_init(): where the function asks about faults */
void ncm_function_set_fault_hooks(NcmFunction *f, const NcmFaultHooks *hooks,
                                  void *opaque);
/* The firmware is busy (a fault): the bulk endpoints NAK */
bool ncm_function_busy(const NcmFunction *f);

/*
 * A class request addressed to the control interface.  Returns the number
 * of bytes placed in @data for IN requests, 0 for OUT requests, or -1 when
 * the request must be stalled (already logged as a guest error).
 */
int ncm_function_control(NcmFunction *f, int request, int value, int index,
                         int length, uint8_t *data);

/*
 * OUT: where the glue copies the next bulk OUT packet, and how much room
 * there is.  Then ncm_function_out_packet() with the packet's size and the
 * bytes actually copied; @max_packet is the endpoint's wMaxPacketSize.
 */
uint8_t *ncm_function_out_space(NcmFunction *f, uint32_t *avail);
void ncm_function_out_packet(NcmFunction *f, uint32_t packet_len,
                             uint32_t copied, uint32_t max_packet,
                             NcmEmitFn *emit, void *opaque);

/*
 * OUT, fast path: a packet that is a whole transfer by itself, parsed where
 * it lies (guest memory) without a copy.  Returns false, having done
 * nothing, when the packet is not one; use out_space/out_packet then.
 * Every field is read once and validated before use, so a guest changing
 * the buffer meanwhile can only change the payload it sends.
 */
bool ncm_function_out_direct(NcmFunction *f, const uint8_t *buf,
                             uint32_t len, uint32_t max_packet,
                             NcmEmitFn *emit, void *opaque);

/* IN: frames from the network. */
NcmRxResult ncm_function_rx(NcmFunction *f, const uint8_t *frame,
                            size_t len);
bool ncm_function_rx_can_queue(const NcmFunction *f);

/*
 * IN: the bytes to send for the next bulk IN packet of up to @room bytes,
 * or NULL when nothing is pending (NAK or park).  A ZLP that is owed comes
 * back as a non-NULL pointer with *@len 0.  Then call
 * ncm_function_in_sent() with the count actually sent, the packet's size
 * and the endpoint's wMaxPacketSize; it returns true when a whole NTB has
 * gone and queued network frames may flow again.
 */
const uint8_t *ncm_function_in_next(NcmFunction *f, uint32_t room,
                                    uint32_t *len);
bool ncm_function_in_sent(NcmFunction *f, uint32_t len, uint32_t room,
                          uint32_t max_packet);
/*
 * A host buffer of @room bytes that is not a multiple of @max_packet and
 * shorter than what is left of the NTB: a real device sends a full
 * packet, the host sees babble and the NTB is lost.  Returns true (the
 * NTB dropped, counted and reported) when the packet must end so.
 */
bool ncm_function_in_babble(NcmFunction *f, uint32_t room,
                            uint32_t max_packet);
/* Something (an NTB, datagrams or a ZLP) is ready for an IN packet. */
bool ncm_function_in_pending(const NcmFunction *f);

/*
 * IN, one copy: build the next NTB straight into @buf (@size bytes, the
 * first piece of the host's waiting buffer).  Only when nothing is pending
 * and a largest datagram fits; returns false otherwise.  Frames from
 * ncm_function_rx() then land in @buf.
 */
bool ncm_function_in_attach(NcmFunction *f, uint8_t *buf, uint32_t size);
/*
 * Finish the NTB in the attached buffer and detach; returns its length, or
 * 0 (still attached) when there is nothing to send yet or a fault dropped
 * the NTB.  @room is the whole packet's size, for the ZLP rule.
 */
uint32_t ncm_function_in_attached_finish(NcmFunction *f, uint32_t room,
                                         uint32_t max_packet);
/*
 * The NTB in the attached buffer holds datagrams and still has room for a
 * largest one: it could wait for more.
 */
bool ncm_function_in_attached_has_room(const NcmFunction *f);
/*
 * The attached buffer goes away (cancelled or handed back): the datagrams
 * already in it move to the device's own buffer and go out later.
 */
void ncm_function_in_detach(NcmFunction *f);

/*
 * Migration.  Before saving, the NTB under construction leaves any host
 * buffer for the device's own (the destination's host re-sends its
 * transfers).  After loading, every field that came from the stream is
 * checked against what the configuration and the class requests allow,
 * and the derived state is rebuilt; @in_bytes is how much of the IN
 * buffer came with it.  Returns NULL, or why the state is refused.
 */
void ncm_function_pre_save(NcmFunction *f);
const char *ncm_function_post_load(NcmFunction *f, bool ntb32,
                                   uint32_t in_bytes);
/* How much of the IN buffer holds state: what migration must carry. */
uint32_t ncm_function_in_bytes(const NcmFunction *f);

/*
 * The function's part of a device's migration stream, built only inside
 * QEMU (ncm-function-vmstate.c).  The GET_ETHERNET_STATISTIC counters
 * travel in a subsection, only when they are not all zero; the other
 * counters and the fault injection state do not migrate (the device
 * blocks migration while a fault is active).
 */
extern const struct VMStateDescription vmstate_ncm_function;

#define VMSTATE_NCM_FUNCTION(_field, _state)                              \
    VMSTATE_STRUCT(_field, _state, 1, vmstate_ncm_function, NcmFunction)

/*
 * The imperfect filter's bin of a multicast address: the top 6 bits of
 * its CRC-32, as the common Ethernet MAC hash filters do.
 */
unsigned ncm_mc_hash_bin(const uint8_t *mac);

/* Interrupt IN: next notification bytes, or 0 when none. */
uint32_t ncm_function_notify_next(NcmFunction *f, uint8_t *buf,
                                  uint32_t room);

#endif /* HW_USB_NCM_FUNCTION_H */
