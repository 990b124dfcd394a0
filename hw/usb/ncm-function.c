/*
 * USB CDC-NCM function: the protocol state machine behind usb-ncm-dl
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "qemu/log.h"
#include "hw/usb/ncm-function.h"
#include "trace.h"

/* bmRequestType << 8 | bRequest, class requests to an interface */
#define NCM_REQ_IN(r)   ((0xa1 << 8) | (r))
#define NCM_REQ_OUT(r)  ((0x21 << 8) | (r))

/*
 * A DisplayLink-style firmware collects a transfer that lacks its
 * terminator in a buffer of this many maximum-size NTBs; past that it
 * discards.
 */
#define NCM_ZLP_REQUIRED_BUFFER_NTBS    4

/*
 * Datagrams per IN NTB: the host's wNtbInMaxDatagrams (8-byte
 * SET_NTB_INPUT_SIZE) and the firmware's own limit; 0 when neither.
 */
static uint16_t ncm_in_max_datagrams(const NcmFunction *f)
{
    uint16_t host = f->ntb_in_max_datagrams, own = f->cfg.in_max_datagrams;

    if (!host || !own) {
        return host | own;
    }
    return MIN(host, own);
}

/*
 * The longest IN NTB for @size bytes.  NCM 1.0 3.2.1: an NTB16 with
 * wBlockLength 0 ends with a short packet, in a transfer shorter than
 * dwNtbInMaxSize; one of 64 KiB at the 64 KiB input size would end by its
 * size instead, so IN NTB16s stop at what wBlockLength can say.
 */
static uint32_t ncm_in_max_len(const NcmFunction *f, uint32_t size)
{
    if (f->format->zero_block_len_is_transfer) {
        size = MIN(size, UINT16_MAX);
    }
    return MIN(size, f->format->max_block_len);
}

/* The IN NTB layout that the configuration and the host's requests ask */
static NcmNtbLayout ncm_in_layout(const NcmFunction *f)
{
    NcmNtbLayout layout = {
        .max_len = ncm_in_max_len(f, f->ntb_in_size),
        .divisor = f->cfg.in_divisor,
        .remainder = f->cfg.in_remainder,
        .ndp_alignment = f->cfg.in_alignment,
        .max_datagrams = ncm_in_max_datagrams(f),
        .crc = f->crc_mode,
    };
    return layout;
}

static void ncm_in_restart(NcmFunction *f)
{
    NcmNtbLayout layout = ncm_in_layout(f);

    f->in_ntb_len = 0;
    f->in_send_off = 0;
    f->in_attached = false;
    ncm_ntb_builder_init(&f->in_builder, f->format, &layout, f->in_buf);
}

/* Drop the IN NTB under construction, counting what is lost. */
static void ncm_in_flush(NcmFunction *f)
{
    uint32_t lost = f->in_builder.n_datagrams;

    if (lost) {
        f->stats->in_flushed_datagrams += lost;
        trace_usb_ncm_in_flush(f->cfg.name, lost);
    }
    f->in_zlp_owed = false;
    ncm_in_restart(f);
}

/* Drop everything in flight in both directions, counting what is lost. */
static void ncm_flush_data(NcmFunction *f)
{
    f->out_len = 0;
    f->out_discarding = false;
    ncm_in_flush(f);
}

/* NCM 1.0 section 7.2: selecting data alt 0 resets the function. */
static void ncm_reset_data_state(NcmFunction *f)
{
    f->format = &ncm_ntb16_format;
    f->ntb_in_size = f->cfg.ntb_in_max_size;
    f->ntb_in_max_datagrams = 0;
    f->max_datagram_size = f->cfg.max_segment_size;
    /* what the firmware applies until the host sets a filter */
    f->packet_filter = f->cfg.power_on_filter;
    f->crc_mode = false;
    f->mc_count = 0;
    f->mc_hash = 0;
    memcpy(f->net_address, f->cfg.mac, sizeof(f->net_address));
    f->in_sequence = 0;
    ncm_flush_data(f);
}

static bool ncm_is_pow2_in(uint32_t v, uint32_t lo, uint32_t hi)
{
    return v >= lo && v <= hi && !(v & (v - 1));
}

static char *ncm_check_ntb_max(const char *prop, uint32_t size)
{
    if (size < NCM_NTB_MIN_SIZE || size > NCM_NTB16_MAX_SIZE) {
        return g_strdup_printf("%s %u is outside %u..%u (NCM 1.0 minimum, "
                               "NTB16 maximum)", prop, size,
                               NCM_NTB_MIN_SIZE, NCM_NTB16_MAX_SIZE);
    }
    return NULL;
}

/* Table 6-3 of NCM 1.0 and what the buffers here are sized for */
char *ncm_function_check_config(const NcmConfig *cfg)
{
    uint32_t smallest_ntb = MIN(cfg->ntb_in_max_size, cfg->ntb_out_max_size);
    char *why;

    why = ncm_check_ntb_max("ntb-in-max-size", cfg->ntb_in_max_size) ?:
          ncm_check_ntb_max("ntb-out-max-size", cfg->ntb_out_max_size);
    if (why) {
        return why;
    }
    if (!ncm_is_pow2_in(cfg->in_divisor, 4, 4096) ||
        !ncm_is_pow2_in(cfg->out_divisor, 4, 4096)) {
        return g_strdup_printf("ntb-in-divisor and ntb-out-divisor must be "
                               "powers of two in 4..4096 (got %u and %u)",
                               cfg->in_divisor, cfg->out_divisor);
    }
    if (cfg->in_remainder >= cfg->in_divisor ||
        cfg->out_remainder >= cfg->out_divisor) {
        return g_strdup_printf("ntb-in-remainder and ntb-out-remainder must "
                               "be smaller than their divisors (got %u and "
                               "%u)", cfg->in_remainder, cfg->out_remainder);
    }
    if (!ncm_is_pow2_in(cfg->in_alignment, 4, 4096) ||
        !ncm_is_pow2_in(cfg->out_alignment, 4, 4096)) {
        return g_strdup_printf("ntb-in-alignment and ntb-out-alignment must "
                               "be powers of two in 4..4096 (got %u and %u)",
                               cfg->in_alignment, cfg->out_alignment);
    }
    if (cfg->out_max_datagrams > NCM_MAX_DATAGRAMS) {
        return g_strdup_printf("ntb-out-max-datagrams must be in 0..%u, 0 "
                               "for no limit (got %u)", NCM_MAX_DATAGRAMS,
                               cfg->out_max_datagrams);
    }
    if (cfg->in_max_datagrams > NCM_MAX_DATAGRAMS) {
        return g_strdup_printf("in-datagrams-per-ntb must be in 0..%u, 0 for "
                               "no limit (got %u)", NCM_MAX_DATAGRAMS,
                               cfg->in_max_datagrams);
    }
    if (cfg->network_caps & ~NCM_CAPS_SUPPORTED) {
        return g_strdup_printf("network-capabilities 0x%02x: the model "
                               "offers bits 0, 1, 3, 4 and 5 only (0x%02x; "
                               "bit 2, encapsulated commands, is not "
                               "implemented, bits 6-7 are reserved)",
                               cfg->network_caps, NCM_CAPS_SUPPORTED);
    }
    if ((cfg->mc_filters & CDC_MC_FILTERS_COUNT_MASK) > NCM_MAX_MC_FILTERS) {
        return g_strdup_printf("multicast-filters 0x%04x: at most %u filters "
                               "(bit 15 selects imperfect filtering)",
                               cfg->mc_filters, NCM_MAX_MC_FILTERS);
    }
    if (cfg->eth_stats & ~NCM_ETH_STATS_SUPPORTED) {
        return g_strdup_printf("ethernet-statistics 0x%08x: the model counts "
                               "feature selectors 1..17 only (mask 0x%08x)",
                               cfg->eth_stats, NCM_ETH_STATS_SUPPORTED);
    }
    if (cfg->power_on_filter & ~0x1f) {
        return g_strdup_printf("power-on-filter 0x%x has bits beyond the "
                               "five CDC packet filter bits (0x1f)",
                               cfg->power_on_filter);
    }
    if (cfg->max_segment_size < 1514 ||
        (uint32_t)cfg->max_segment_size + 64 > smallest_ntb) {
        return g_strdup_printf("max-segment-size %u must be at least 1514 "
                               "and fit an NTB of %u bytes with its headers",
                               cfg->max_segment_size, smallest_ntb);
    }
    return NULL;
}

void ncm_function_init(NcmFunction *f, const NcmConfig *cfg)
{
    NcmConfig c = *cfg;

    if (!c.name) {
        c.name = "usb-ncm";
    }
    memset(f, 0, sizeof(*f));
    f->cfg = c;
    f->out_buf_size = cfg->ntb_out_max_size;
    if (cfg->zlp == NCM_ZLP_REQUIRED) {
        f->out_buf_size *= NCM_ZLP_REQUIRED_BUFFER_NTBS;
    }
    f->out_buf = g_malloc(f->out_buf_size);
    f->in_buf = g_malloc(cfg->ntb_in_max_size);
    f->stats = g_new0(NcmCounters, 1);
    f->link_up = true;
    f->format = &ncm_ntb16_format;
    f->ntb_in_size = cfg->ntb_in_max_size;
    ncm_function_reset(f);
}

void ncm_function_cleanup(NcmFunction *f)
{
    g_free(f->out_buf);
    g_free(f->in_buf);
    g_free(f->stats);
    f->out_buf = NULL;
    f->in_buf = NULL;
    f->stats = NULL;
}

void ncm_function_reset(NcmFunction *f)
{
    f->data_active = false;
    f->notify_pending = 0;
    f->notify_len = 0;
    f->notify_off = 0;
    ncm_reset_data_state(f);
}

void ncm_function_set_data_alt(NcmFunction *f, int alt)
{
    trace_usb_ncm_data_alt(f->cfg.name, alt);
    if (alt == 0) {
        ncm_function_reset(f);
        return;
    }
    /* keep what was negotiated in alt 0, start the data path afresh */
    f->in_sequence = 0;
    ncm_flush_data(f);
    f->data_active = true;
    f->notify_pending = NCM_NOTIFY_SPEED | NCM_NOTIFY_CONNECTION;
}

const char *const ncm_in_corruption_names[NCM_CORRUPT__MAX] = {
    [NCM_CORRUPT_NONE] = "none",
    [NCM_CORRUPT_NDP_AT_END] = "ndp-at-end",
    [NCM_CORRUPT_DATAGRAM_WRAP] = "datagram-offset-wrap",
    [NCM_CORRUPT_NDP_LOOP] = "ndp-chain-loop",
    [NCM_CORRUPT_BLOCK_LEN] = "block-length-over-input-size",
    [NCM_CORRUPT_SHORT_NOTIFY] = "short-notification",
};

void ncm_function_set_link(NcmFunction *f, bool up)
{
    if (up == f->link_up) {
        return;
    }
    f->link_up = up;
    if (f->data_active) {
        f->notify_pending |= NCM_NOTIFY_CONNECTION;
        if (up) {
            f->notify_pending |= NCM_NOTIFY_SPEED;
        }
    }
}

void ncm_function_set_fault_hooks(NcmFunction *f, const NcmFaultHooks *hooks,
                                  void *opaque)
{
    f->fault_hooks = hooks;
    f->fault_opaque = opaque;
}

bool ncm_function_busy(const NcmFunction *f)
{
    return f->fault_hooks && f->fault_hooks->busy(f->fault_opaque);
}

/* Notifications */

static void ncm_notify_build(NcmFunction *f, uint8_t code, uint16_t value,
                             uint16_t data_len)
{
    uint8_t *b = f->notify_buf;

    b[0] = CDC_NOTIFY_REQUEST_TYPE;
    b[1] = code;
    stw_le_p(b + 2, value);
    stw_le_p(b + 4, f->control_interface);
    stw_le_p(b + 6, data_len);
    f->notify_len = CDC_NOTIFY_HEADER_LEN + data_len;
    f->notify_off = 0;
}

uint32_t ncm_function_notify_next(NcmFunction *f, uint8_t *buf,
                                  uint32_t room)
{
    uint32_t n;

    if (f->notify_off >= f->notify_len) {
        if (f->notify_pending & NCM_NOTIFY_SPEED) {
            f->notify_pending &= ~NCM_NOTIFY_SPEED;
            ncm_notify_build(f, CDC_NOTIFY_SPEED_CHANGE, 0, 8);
            stl_le_p(f->notify_buf + 8, f->cfg.link_speed_bps);
            stl_le_p(f->notify_buf + 12, f->cfg.link_speed_bps);
        } else if (f->notify_pending & NCM_NOTIFY_CONNECTION) {
            f->notify_pending &= ~NCM_NOTIFY_CONNECTION;
            ncm_notify_build(f, CDC_NOTIFY_NETWORK_CONNECTION,
                             f->link_up, 0);
        } else {
            return 0;
        }
        f->stats->notifications++;
        trace_usb_ncm_notify(f->cfg.name, f->notify_buf[1],
                             lduw_le_p(f->notify_buf + 2));
        if (f->fault_hooks &&
            f->fault_hooks->short_notify(f->fault_opaque)) {
            f->notify_len = 4;
        }
    }
    n = MIN(room, (uint32_t)(f->notify_len - f->notify_off));
    memcpy(buf, f->notify_buf + f->notify_off, n);
    f->notify_off += n;
    return n;
}

/* Class requests */

static int ncm_bad_request(NcmFunction *f, int request, int value,
                           int length, const char *why)
{
    f->stats->bad_requests++;
    trace_usb_ncm_bad_request(f->cfg.name, request, value, length);
    qemu_log_mask(LOG_GUEST_ERROR,
                  "usb-ncm: stalling request 0x%04x value 0x%x length %d: "
                  "%s\n", request, value, length, why);
    return -1;
}

static int ncm_get_ntb_parameters(NcmFunction *f, int length, uint8_t *d)
{
    memset(d, 0, NCM_NTB_PARAMETERS_LEN);
    stw_le_p(d + 0, NCM_NTB_PARAMETERS_LEN);
    stw_le_p(d + 2, f->cfg.ntb_formats);
    stl_le_p(d + 4, f->cfg.ntb_in_max_size);
    stw_le_p(d + 8, f->cfg.in_divisor);
    stw_le_p(d + 10, f->cfg.in_remainder);
    stw_le_p(d + 12, f->cfg.in_alignment);
    stl_le_p(d + 16, f->cfg.ntb_out_max_size);
    stw_le_p(d + 20, f->cfg.out_divisor);
    stw_le_p(d + 22, f->cfg.out_remainder);
    stw_le_p(d + 24, f->cfg.out_alignment);
    stw_le_p(d + 26, f->cfg.out_max_datagrams);
    return MIN(length, NCM_NTB_PARAMETERS_LEN);
}

static int ncm_set_ntb_input_size(NcmFunction *f, int request, int length,
                                  const uint8_t *d)
{
    uint32_t size;
    uint16_t max_datagrams = 0;

    if (length != 4 && length != 8) {
        return ncm_bad_request(f, request, 0, length,
                               "SET_NTB_INPUT_SIZE needs 4 or 8 bytes");
    }
    if (length == 8 && !(f->cfg.network_caps & NCM_CAP_NTB_INPUT_SIZE_8)) {
        /*
         * Not advertised (bmNetworkCapabilities D5), but FreeBSD's if_cdce
         * sends it anyway and ignores a stall: refusing would leave IN
         * NTBs larger than the host's reads.  Its first field is the same
         * as the 4-byte form's, so take the request as the host means it.
         */
        qemu_log_mask(LOG_GUEST_ERROR, "usb-ncm: 8-byte SET_NTB_INPUT_SIZE "
                      "without bmNetworkCapabilities D5: taken\n");
    }
    size = ldl_le_p(d);
    if (length == 8) {
        /* wNtbInMaxDatagrams; the 2 reserved bytes after it are ignored */
        max_datagrams = lduw_le_p(d + 4);
    }
    if (size < NCM_NTB_MIN_SIZE || size > f->cfg.ntb_in_max_size) {
        return ncm_bad_request(f, request, size, length,
                               "NTB input size outside 2048..dwNtbInMaxSize");
    }
    if (max_datagrams > NCM_MAX_DATAGRAMS) {
        /* the builder holds at most this many: a tighter limit is kept */
        max_datagrams = NCM_MAX_DATAGRAMS;
    }
    trace_usb_ncm_ntb_input_size(f->cfg.name, size, max_datagrams);
    if (length == 8) {
        f->stats->input_size_requests_8++;
    } else {
        f->stats->input_size_requests_4++;
    }
    f->ntb_in_size = size;
    f->ntb_in_max_datagrams = max_datagrams;
    max_datagrams = ncm_in_max_datagrams(f);

    if (f->in_ntb_len) {
        return 0;   /* the NTB on its way out keeps its size */
    }
    /* a parked host buffer bounds the NTB as well */
    if (f->in_attached) {
        size = MIN(size, f->in_attached_size);
    }
    if (f->in_builder.n_datagrams &&
        (ncm_ntb_builder_finished_len(&f->in_builder) > size ||
         (max_datagrams && f->in_builder.n_datagrams > max_datagrams))) {
        /* what was queued would not fit the new size: count it lost */
        NcmNtbLayout layout = f->in_builder.layout;

        f->stats->in_flushed_datagrams += f->in_builder.n_datagrams;
        layout.max_len = ncm_in_max_len(f, size);
        layout.max_datagrams = max_datagrams;
        ncm_ntb_builder_init(&f->in_builder, f->format, &layout,
                             f->in_builder.buf);
        return 0;
    }
    f->in_builder.layout.max_len = ncm_in_max_len(f, size);
    f->in_builder.layout.max_datagrams = max_datagrams;
    f->in_builder.max_datagrams = max_datagrams ? max_datagrams :
                                  NCM_MAX_DATAGRAMS;
    return 0;
}

unsigned ncm_mc_hash_bin(const uint8_t *mac)
{
    return ncm_crc32(mac, CDC_MC_ADDRESS_LEN) >> 26;
}

static void ncm_mc_rehash(NcmFunction *f)
{
    unsigned i;

    f->mc_hash = 0;
    for (i = 0; i < f->mc_count; i++) {
        f->mc_hash |= 1ull << ncm_mc_hash_bin(f->mc_addrs[i]);
    }
}

/*
 * CDC ECM 1.2 6.2.1: wValue filters of 6 bytes each, at most what
 * wNumberMCFilters advertises.  0 clears the list.
 */
static int ncm_set_mc_filters(NcmFunction *f, int request, int value,
                              int length, const uint8_t *d)
{
    unsigned max = f->cfg.mc_filters & CDC_MC_FILTERS_COUNT_MASK;
    const char *why = NULL;

    if ((unsigned)value > max) {
        why = "more multicast filters than wNumberMCFilters";
    } else if (length != value * CDC_MC_ADDRESS_LEN) {
        why = "multicast filter list length is not 6 x wValue";
    }
    if (why) {
        f->stats->mc_filter_rejects++;
        return ncm_bad_request(f, request, value, length, why);
    }
    f->mc_count = value;
    if (value) {
        memcpy(f->mc_addrs, d, length);
    }
    ncm_mc_rehash(f);
    f->stats->mc_filter_requests++;
    trace_usb_ncm_mc_filters(f->cfg.name, value,
                             !!(f->cfg.mc_filters & CDC_MC_FILTERS_IMPERFECT));
    return 0;
}

const NcmEthStat ncm_eth_stats[NCM_ETH_STATS_COUNT] = {
    NCM_ETH_STAT_COUNTERS(NCM_ETH_STAT_ENTRY)
};

/* CDC ECM 1.2 6.2.5: a 32-bit count, wrapping */
static bool ncm_statistic(const NcmFunction *f, int selector, uint64_t *v)
{
    const NcmCounters *c = f->stats;
    size_t i;

    if (selector == CDC_STAT_RCV_OK) {
        *v = c->in_directed_frames + c->in_multicast_frames +
             c->in_broadcast_frames;
        return true;
    }
    for (i = 0; i < ARRAY_SIZE(ncm_eth_stats); i++) {
        if (ncm_eth_stats[i].selector == selector) {
            *v = ncm_eth_stat_value(c, &ncm_eth_stats[i]);
            return true;
        }
    }
    return false;
}

int ncm_function_control(NcmFunction *f, int request, int value, int index,
                         int length, uint8_t *data)
{
    uint8_t caps = f->cfg.network_caps;

    if ((request >> 8) != 0xa1 && (request >> 8) != 0x21) {
        return ncm_bad_request(f, request, value, length,
                               "not a class request to an interface");
    }
    if ((index & 0xff) != f->control_interface) {
        return ncm_bad_request(f, request, value, length,
                               "wIndex is not the control interface");
    }

    switch (request) {
    case NCM_REQ_IN(NCM_GET_NTB_PARAMETERS):
        if (value != 0) {
            break;
        }
        return ncm_get_ntb_parameters(f, length, data);

    case NCM_REQ_IN(NCM_GET_NTB_FORMAT):
        if (value != 0 || length < 2) {
            break;
        }
        stw_le_p(data, f->format == &ncm_ntb32_format ?
                 NCM_NTB_FORMAT_SELECT_32 : NCM_NTB_FORMAT_SELECT_16);
        return 2;

    case NCM_REQ_OUT(NCM_SET_NTB_FORMAT):
        if (f->data_active) {
            return ncm_bad_request(f, request, value, length,
                                   "SET_NTB_FORMAT while data alt 1");
        }
        if (value == NCM_NTB_FORMAT_SELECT_16) {
            f->format = &ncm_ntb16_format;
        } else if (value == NCM_NTB_FORMAT_SELECT_32 &&
                   (f->cfg.ntb_formats & NCM_NTB_FORMAT_32)) {
            f->format = &ncm_ntb32_format;
        } else {
            break;
        }
        trace_usb_ncm_ntb_format(f->cfg.name, f->format->name);
        ncm_in_restart(f);
        return 0;

    case NCM_REQ_IN(NCM_GET_NTB_INPUT_SIZE):
        if (value != 0 || length < 4) {
            break;
        }
        stl_le_p(data, f->ntb_in_size);
        if (length >= 8 && (caps & NCM_CAP_NTB_INPUT_SIZE_8)) {
            stw_le_p(data + 4, f->ntb_in_max_datagrams);
            stw_le_p(data + 6, 0);
            return 8;
        }
        return 4;

    case NCM_REQ_OUT(NCM_SET_NTB_INPUT_SIZE):
        return ncm_set_ntb_input_size(f, request, length, data);

    case NCM_REQ_IN(NCM_GET_MAX_DATAGRAM_SIZE):
        if (!(caps & NCM_CAP_MAX_DATAGRAM_SIZE) || value != 0 ||
            length < 2) {
            break;
        }
        stw_le_p(data, f->max_datagram_size);
        return 2;

    case NCM_REQ_OUT(NCM_SET_MAX_DATAGRAM_SIZE):
        if (!(caps & NCM_CAP_MAX_DATAGRAM_SIZE) || length != 2) {
            break;
        }
        value = lduw_le_p(data);
        if (value < NCM_ETH_HEADER_LEN || value > f->cfg.max_segment_size) {
            return ncm_bad_request(f, request, value, length,
                                   "max datagram size above wMaxSegmentSize");
        }
        f->max_datagram_size = value;
        return 0;

    case NCM_REQ_IN(NCM_GET_NET_ADDRESS):
        if (!(caps & NCM_CAP_NET_ADDRESS) || value != 0 || length < 6) {
            break;
        }
        memcpy(data, f->net_address, 6);
        return 6;

    case NCM_REQ_OUT(NCM_SET_NET_ADDRESS):
        if (!(caps & NCM_CAP_NET_ADDRESS) || length != 6) {
            break;
        }
        if (f->data_active) {
            return ncm_bad_request(f, request, value, length,
                                   "SET_NET_ADDRESS while data alt 1");
        }
        memcpy(f->net_address, data, 6);
        return 0;

    case NCM_REQ_IN(NCM_GET_CRC_MODE):
        if (!(caps & NCM_CAP_CRC_MODE) || value != 0 || length < 2) {
            break;
        }
        stw_le_p(data, f->crc_mode ? NCM_CRC_APPENDED : NCM_CRC_NOT_APPENDED);
        return 2;

    case NCM_REQ_OUT(NCM_SET_CRC_MODE):
        if (!(caps & NCM_CAP_CRC_MODE) || length != 0 ||
            (value != NCM_CRC_NOT_APPENDED && value != NCM_CRC_APPENDED)) {
            break;
        }
        if (f->data_active) {
            /* NCM 1.0 6.2.13: only while the data interface is in alt 0 */
            return ncm_bad_request(f, request, value, length,
                                   "SET_CRC_MODE while data alt 1");
        }
        trace_usb_ncm_crc_mode(f->cfg.name, value);
        f->crc_mode = value == NCM_CRC_APPENDED;
        f->stats->crc_mode_requests++;
        ncm_in_restart(f);
        return 0;

    case NCM_REQ_OUT(CDC_SET_ETHERNET_MULTICAST_FILTERS):
        return ncm_set_mc_filters(f, request, value, length, data);

    case NCM_REQ_IN(CDC_GET_ETHERNET_STATISTIC): {
        uint64_t v;

        if (value < 1 || value > CDC_STAT__MAX || length < 4 ||
            !(f->cfg.eth_stats & CDC_STAT_BIT(value)) ||
            !ncm_statistic(f, value, &v)) {
            break;
        }
        f->stats->statistic_requests++;
        trace_usb_ncm_statistic(f->cfg.name, value, v);
        stl_le_p(data, (uint32_t)v);
        return 4;
    }

    case NCM_REQ_OUT(CDC_SET_ETHERNET_PACKET_FILTER):
        if (!(caps & NCM_CAP_PACKET_FILTER) || length != 0 ||
            (value & ~0x1f)) {
            break;
        }
        trace_usb_ncm_packet_filter(f->cfg.name, value);
        f->packet_filter = value;
        return 0;
    }
    return ncm_bad_request(f, request, value, length,
                           "unsupported or malformed class request");
}

/* OUT */

typedef struct NcmEmitCtx {
    NcmFunction *f;
    NcmEmitFn *emit;
    void *opaque;
} NcmEmitCtx;

static bool ncm_is_broadcast(const uint8_t *mac)
{
    static const uint8_t broadcast[6] = {
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff
    };

    return !memcmp(mac, broadcast, 6);
}

/* Counters by destination class, for GET_ETHERNET_STATISTIC */
static void ncm_count_class(NcmCounters *c, bool out, const uint8_t *frame,
                            size_t len)
{
    uint64_t *frames, *bytes;

    if (ncm_is_broadcast(frame)) {
        frames = out ? &c->out_broadcast_frames : &c->in_broadcast_frames;
        bytes = out ? &c->out_broadcast_bytes : &c->in_broadcast_bytes;
    } else if (frame[0] & 1) {
        frames = out ? &c->out_multicast_frames : &c->in_multicast_frames;
        bytes = out ? &c->out_multicast_bytes : &c->in_multicast_bytes;
    } else {
        frames = out ? &c->out_directed_frames : &c->in_directed_frames;
        bytes = out ? &c->out_directed_bytes : &c->in_directed_bytes;
    }
    (*frames)++;
    *bytes += len;
}

static void ncm_out_emit_one(void *opaque, const uint8_t *data, size_t len)
{
    NcmEmitCtx *ctx = opaque;
    NcmFunction *f = ctx->f;

    if (f->crc_mode) {
        /* the parser has checked that the CRC lies inside the NTB */
        if (!ncm_datagram_crc_ok(data, len)) {
            f->stats->out_crc_errors++;
            trace_usb_ncm_out_crc_error(f->cfg.name, len, ldl_le_p(data + len),
                                        ncm_crc32(data, len));
            qemu_log_mask(LOG_GUEST_ERROR,
                          "usb-ncm: dropping OUT datagram of %zu bytes "
                          "with a bad CRC-32\n", len);
            return;
        }
        f->stats->out_crc_datagrams++;
    }
    if (!f->link_up) {
        f->stats->link_down_drops++;
        return;
    }
    f->stats->out_datagrams++;
    f->stats->out_bytes += len;
    ncm_count_class(f->stats, true, data, len);
    ctx->emit(ctx->opaque, data, len);
}

static void ncm_out_count_only(void *opaque, const uint8_t *data, size_t len)
{
    uint64_t *count = opaque;

    (*count)++;
}

static NcmParseLimits ncm_out_limits(const NcmFunction *f)
{
    NcmParseLimits limits = {
        .max_ntb_len = f->cfg.ntb_out_max_size,
        .max_datagram_len = f->max_datagram_size,
        .max_datagrams = f->cfg.out_max_datagrams,
        .crc = f->crc_mode,
    };
    return limits;
}

static void ncm_out_parse_error(NcmFunction *f, NcmParseError err,
                                uint32_t len)
{
    f->stats->out_parse_errors[err]++;
    trace_usb_ncm_out_parse_error(f->cfg.name, ncm_parse_error_name(err), len);
    qemu_log_mask(LOG_GUEST_ERROR,
                  "usb-ncm: dropping malformed OUT %s (%u bytes): %s\n",
                  f->format->name, len, ncm_parse_error_name(err));
}

/* Parse and emit the NTB at the start of @buf; returns its length. */
static uint32_t ncm_out_take_ntb(NcmFunction *f, const uint8_t *buf,
                                 uint32_t len, NcmEmitFn *emit, void *opaque)
{
    NcmParseLimits limits = ncm_out_limits(f);
    NcmEmitCtx ctx = { f, emit, opaque };
    NcmNtbView *view = &f->out_view;
    NcmParseError err;
    uint32_t i;

    err = ncm_ntb_parse_one(f->format, buf, len, &limits, view);
    if (err != NCM_PARSE_OK) {
        ncm_out_parse_error(f, err, len);
        return 0;
    }
    f->stats->out_ntbs++;
    trace_usb_ncm_out_ntb(f->cfg.name, view->block_len, view->n_datagrams);
    for (i = 0; i < view->n_datagrams; i++) {
        ncm_out_emit_one(&ctx, buf + view->datagrams[i].offset,
                         view->datagrams[i].len);
    }
    return view->block_len;
}

static bool ncm_out_is_windows_pad(const uint8_t *buf, uint32_t len)
{
    return len == 1 && buf[0] == 0;
}

static void ncm_out_consume(NcmFunction *f, uint32_t len)
{
    memmove(f->out_buf, f->out_buf + len, f->out_len - len);
    f->out_len -= len;
}

/*
 * NCM 1.0 delimiting: an NTB whose wBlockLength has fully arrived is
 * complete, whatever follows.  Each pass consumes at least the minimum
 * NTB size or stops, so this terminates.
 */
static void ncm_out_take_complete_ntbs(NcmFunction *f, NcmEmitFn *emit,
                                       void *opaque)
{
    const NcmNtbFormat *fmt = f->format;

    while (!f->out_discarding && f->out_len >= fmt->nth_len) {
        uint32_t block_len, taken;

        block_len = ncm_ntb_field_get(f->out_buf + fmt->nth_block_len_off,
                                      fmt->field_size);
        if (block_len == 0 || block_len > f->out_len) {
            return;
        }
        taken = ncm_out_take_ntb(f, f->out_buf, block_len, emit, opaque);
        if (!taken) {
            f->out_discarding = true;
            return;
        }
        ncm_out_consume(f, taken);
    }
}

/* The rest of a transfer that has ended: every NTB in it, in order. */
static void ncm_out_end_auto(NcmFunction *f, const uint8_t *buf,
                             uint32_t len, NcmEmitFn *emit, void *opaque)
{
    if (len && !ncm_out_is_windows_pad(buf, len)) {
        NcmParseLimits limits = ncm_out_limits(f);
        NcmEmitCtx ctx = { f, emit, opaque };
        NcmParseError err;
        unsigned ntbs = 0;

        err = ncm_transfer_parse(f->format, buf, len, &limits, &f->out_view,
                                 ncm_out_emit_one, &ctx, &ntbs);
        f->stats->out_ntbs += ntbs;
        if (err != NCM_PARSE_OK) {
            ncm_out_parse_error(f, err, len);
        }
    }
}

/*
 * How far the firmware believes an NTB reaches: wBlockLength, or for
 * NTB16's 0 the rest of the transfer capped at dwNtbOutMaxSize.
 */
static uint32_t ncm_out_firmware_extent(NcmFunction *f, const uint8_t *buf,
                                        uint32_t len)
{
    const NcmNtbFormat *fmt = f->format;
    uint32_t block_len;

    if (len < fmt->nth_len) {
        return len;
    }
    block_len = ncm_ntb_field_get(buf + fmt->nth_block_len_off,
                                  fmt->field_size);
    if (block_len == 0) {
        block_len = MIN(len, f->cfg.ntb_out_max_size);
    }
    return MIN(block_len, len);
}

/*
 * ZLP-required firmware: the transfer ended only now, and only its first
 * NTB is used.  NTBs that merged into it because the host sent neither a
 * short packet nor a ZLP are lost; count their datagrams.
 */
static void ncm_out_end_required(NcmFunction *f, const uint8_t *buf,
                                 uint32_t len, NcmEmitFn *emit, void *opaque)
{
    uint32_t first, off;
    uint64_t lost = 0;
    unsigned guard;

    if (!len || ncm_out_is_windows_pad(buf, len)) {
        return;
    }
    first = ncm_out_firmware_extent(f, buf, len);
    if (!ncm_out_take_ntb(f, buf, first, emit, opaque)) {
        first = len;
    }
    off = first;
    if (off < len && !ncm_out_is_windows_pad(buf + off, len - off)) {
        NcmParseLimits limits = ncm_out_limits(f);

        f->stats->out_merged_transfers++;
        for (guard = 0; off < len && guard < 64; guard++) {
            uint32_t extent = ncm_out_firmware_extent(f, buf + off,
                                                      len - off);
            unsigned ntbs;

            if (ncm_transfer_parse(f->format, buf + off, extent,
                                   &limits, &f->out_view, ncm_out_count_only,
                                   &lost, &ntbs) != NCM_PARSE_OK ||
                extent == 0) {
                break;
            }
            off += extent;
        }
        f->stats->out_merge_lost_datagrams += lost;
        trace_usb_ncm_out_merged(f->cfg.name, len, first, lost);
    }
}

uint8_t *ncm_function_out_space(NcmFunction *f, uint32_t *avail)
{
    *avail = f->out_buf_size - f->out_len;
    return f->out_buf + f->out_len;
}

void ncm_function_out_packet(NcmFunction *f, uint32_t packet_len,
                             uint32_t copied, uint32_t max_packet,
                             NcmEmitFn *emit, void *opaque)
{
    bool terminated = packet_len == 0 ||
                      (max_packet && packet_len % max_packet != 0);

    trace_usb_ncm_out_packet(f->cfg.name, packet_len, f->out_len, terminated);
    if (packet_len == 0) {
        f->stats->out_zlps++;
    }
    f->out_len += copied;
    if (copied < packet_len) {
        f->stats->out_overflow_bytes += packet_len - copied;
        qemu_log_mask(LOG_GUEST_ERROR,
                      "usb-ncm: OUT transfer exceeds %u bytes without "
                      "terminator, discarding %u bytes\n",
                      f->out_buf_size, packet_len - copied);
    }
    if (terminated) {
        f->stats->out_transfers++;
    }

    if (f->cfg.zlp == NCM_ZLP_REQUIRED) {
        if (terminated) {
            ncm_out_end_required(f, f->out_buf, f->out_len, emit, opaque);
            f->out_len = 0;
        }
        return;
    }

    ncm_out_take_complete_ntbs(f, emit, opaque);
    /* NCM 1.0: a transfer of dwNtbOutMaxSize needs no terminator */
    if (terminated || f->out_len >= f->cfg.ntb_out_max_size) {
        if (!terminated) {
            f->stats->out_transfers++;
        }
        if (!f->out_discarding) {
            ncm_out_end_auto(f, f->out_buf, f->out_len, emit, opaque);
        }
        f->out_len = 0;
        f->out_discarding = false;
    }
}

bool ncm_function_out_direct(NcmFunction *f, const uint8_t *buf,
                             uint32_t len, uint32_t max_packet,
                             NcmEmitFn *emit, void *opaque)
{
    /* only a transfer that begins and ends in this packet */
    if (f->out_len || !len || (max_packet && len % max_packet == 0) ||
        len > f->out_buf_size) {
        return false;
    }
    trace_usb_ncm_out_packet(f->cfg.name, len, 0, true);
    f->stats->out_transfers++;
    f->stats->out_direct_transfers++;
    if (f->cfg.zlp == NCM_ZLP_REQUIRED) {
        ncm_out_end_required(f, buf, len, emit, opaque);
    } else {
        ncm_out_end_auto(f, buf, len, emit, opaque);
    }
    return true;
}

/* IN */

/*
 * PACKET_TYPE_MULTICAST (CDC ECM 1.2 6.2.4): the multicast frames the
 * list names.  A perfect filter compares whole addresses; an imperfect
 * one (wNumberMCFilters D15) passes every address whose hash bin one of
 * the listed addresses set, so it may pass some not listed.  A function
 * that advertises no filters cannot filter: it passes all multicast.
 */
static bool ncm_mc_accepts(const NcmFunction *f, const uint8_t *frame)
{
    unsigned i;

    if (!(f->cfg.mc_filters & CDC_MC_FILTERS_COUNT_MASK)) {
        return true;
    }
    if (f->cfg.mc_filters & CDC_MC_FILTERS_IMPERFECT) {
        return f->mc_hash & (1ull << ncm_mc_hash_bin(frame));
    }
    for (i = 0; i < f->mc_count; i++) {
        if (!memcmp(frame, f->mc_addrs[i], CDC_MC_ADDRESS_LEN)) {
            return true;
        }
    }
    return false;
}

static bool ncm_rx_filter_accepts(const NcmFunction *f, const uint8_t *frame)
{
    uint16_t filter = f->packet_filter;

    if (filter & CDC_FILTER_PROMISCUOUS) {
        return true;
    }
    if (ncm_is_broadcast(frame)) {
        return filter & CDC_FILTER_BROADCAST;
    }
    if (frame[0] & 1) {
        if (filter & CDC_FILTER_ALL_MULTICAST) {
            return true;
        }
        return (filter & CDC_FILTER_MULTICAST) && ncm_mc_accepts(f, frame);
    }
    return (filter & CDC_FILTER_DIRECTED) &&
           !memcmp(frame, f->net_address, 6);
}

bool ncm_function_rx_can_queue(const NcmFunction *f)
{
    if (!f->data_active) {
        return true;    /* frames are dropped and counted */
    }
    /*
     * An empty NTB takes any frame: one that does not fit is dropped and
     * counted, or moves the NTB out of a small attached buffer.
     */
    return !f->in_ntb_len &&
           (!f->in_builder.n_datagrams ||
            ncm_ntb_builder_fits(&f->in_builder, f->max_datagram_size));
}

NcmRxResult ncm_function_rx(NcmFunction *f, const uint8_t *frame, size_t len)
{
    uint8_t *dst;

    if (!f->data_active) {
        f->stats->rx_inactive_drops++;
        return NCM_RX_DROPPED;
    }
    if (!f->link_up) {
        f->stats->link_down_drops++;
        return NCM_RX_DROPPED;
    }
    if (len < NCM_ETH_HEADER_LEN || len > f->max_datagram_size) {
        f->stats->rx_oversize++;
        trace_usb_ncm_rx_drop(f->cfg.name, len, "length");
        return NCM_RX_DROPPED;
    }
    if (!ncm_rx_filter_accepts(f, frame)) {
        f->stats->rx_filtered++;
        return NCM_RX_DROPPED;
    }
    if (f->in_ntb_len) {
        f->stats->rx_backpressure++;
        return NCM_RX_BUSY;
    }
    dst = ncm_ntb_builder_reserve(&f->in_builder, len);
    if (!dst && f->in_attached && !f->in_builder.n_datagrams) {
        /* the host's buffer is too small for this frame: use our own */
        ncm_function_in_detach(f);
        dst = ncm_ntb_builder_reserve(&f->in_builder, len);
    }
    if (!dst) {
        if (f->in_builder.n_datagrams) {
            f->stats->rx_backpressure++;
            return NCM_RX_BUSY;
        }
        f->stats->rx_oversize++;
        trace_usb_ncm_rx_drop(f->cfg.name, len, "ntb-input-size");
        return NCM_RX_DROPPED;
    }
    memcpy(dst, frame, len);
    ncm_count_class(f->stats, false, frame, len);
    return NCM_RX_QUEUED;
}

/* Rewrite a finished IN NTB in one of the documented broken ways. */
static void ncm_in_corrupt(NcmFunction *f, NcmInCorruption how)
{
    const NcmNtbFormat *fmt = f->format;
    unsigned fs = fmt->field_size;
    /* the NTB may be in guest memory: take offsets from our own state */
    uint8_t *ntb = f->in_builder.buf;
    uint32_t ndp = f->in_builder.ndp_offset;
    uint32_t end = ROUND_DOWN(f->in_ntb_len - 8, 4);

    switch (how) {
    case NCM_CORRUPT_NDP_AT_END:
        stl_le_p(ntb + end, fmt->ndp_signature);
        stw_le_p(ntb + end + 4, fmt->ndp_min_len);
        stw_le_p(ntb + end + 6, 0);
        ncm_ntb_field_put(ntb + fmt->nth_ndp_index_off, fs, end);
        break;
    case NCM_CORRUPT_DATAGRAM_WRAP:
        /* 16 bytes below the top of the field's range: index + len wraps */
        ncm_ntb_field_put(ntb + ndp + fmt->ndp_header_len, fs,
                          fs == 2 ? 0xfff0 : 0xfffffff0);
        ncm_ntb_field_put(ntb + ndp + fmt->ndp_header_len + fs, fs, 0x20);
        break;
    case NCM_CORRUPT_NDP_LOOP:
        ncm_ntb_field_put(ntb + ndp + fmt->ndp_next_off, fs, ndp);
        break;
    case NCM_CORRUPT_BLOCK_LEN:
        ncm_ntb_field_put(ntb + fmt->nth_block_len_off, fs,
                          fs == 2 ? MIN(f->ntb_in_size + 4, UINT16_MAX) :
                          f->ntb_in_size + 4);
        break;
    default:
        return;
    }
    f->stats->fault_corrupted_in_ntbs++;
    trace_usb_ncm_fault_corrupt(f->cfg.name, ncm_in_corruption_names[how]);
}

/*
 * Finish the NTB under construction, then apply the IN faults.  Returns
 * false when a fault dropped it (the builder is empty again).
 */
static bool ncm_in_finish(NcmFunction *f)
{
    NcmNtbBuilder *b = &f->in_builder;
    NcmInCorruption how = NCM_CORRUPT_NONE;

    f->in_ntb_len = ncm_ntb_builder_finish(b, f->in_sequence++);
    f->in_send_off = 0;
    if (f->fault_hooks && f->fault_hooks->in_ntb(f->fault_opaque, &how)) {
        f->stats->fault_dropped_in_ntbs++;
        f->stats->in_flushed_datagrams += b->n_datagrams;
        trace_usb_ncm_fault_drop(f->cfg.name, f->in_ntb_len, b->n_datagrams);
        f->in_ntb_len = 0;
        ncm_ntb_builder_init(b, f->format, &b->layout, b->buf);
        return false;
    }
    f->stats->in_ntbs++;
    f->stats->in_datagrams += b->n_datagrams;
    f->stats->in_bytes += f->in_ntb_len;
    f->stats->in_crc_ntbs += b->layout.crc;
    trace_usb_ncm_in_ntb(f->cfg.name, f->in_ntb_len, b->n_datagrams);
    if (how != NCM_CORRUPT_NONE && how != NCM_CORRUPT_SHORT_NOTIFY) {
        ncm_in_corrupt(f, how);
    }
    return true;
}

/*
 * USB 2.0 5.8.3, NCM 1.0 3.2.2: a bulk IN transfer ends with a short
 * packet.  An NTB whose last piece filled the host's packet exactly, in
 * whole wMaxPacketSize units, and that is shorter than the NTB input size
 * (the transfer length the host posts) leaves the host's transfer open
 * (EHCI's next qTD, UHCI's next TD): the next IN packet is a ZLP.  When
 * the packet had room left, QEMU's controllers see a short packet and end
 * the transfer there, so nothing more is owed.
 */
static void ncm_in_ended(NcmFunction *f, uint32_t ntb_len, uint32_t last,
                         uint32_t room, uint32_t max_packet)
{
    f->in_zlp_owed = last == room && max_packet &&
                     ntb_len % max_packet == 0 && ntb_len < f->ntb_in_size;
}

bool ncm_function_in_attach(NcmFunction *f, uint8_t *buf, uint32_t size)
{
    NcmNtbLayout layout = f->in_builder.layout;

    if (!f->data_active || ncm_function_busy(f) || f->in_attached ||
        f->in_zlp_owed || f->in_ntb_len || f->in_builder.n_datagrams ||
        size < NCM_NTB_MIN_SIZE) {
        return false;
    }
    layout.max_len = ncm_in_max_len(f, MIN(f->ntb_in_size, size));
    layout.max_datagrams = ncm_in_max_datagrams(f);
    ncm_ntb_builder_init(&f->in_builder, f->format, &layout, buf);
    if (!ncm_ntb_builder_fits(&f->in_builder, f->max_datagram_size)) {
        /* a largest frame would not fit: build in our own buffer */
        ncm_in_restart(f);
        return false;
    }
    f->in_attached = true;
    f->in_attached_size = size;
    return true;
}

uint32_t ncm_function_in_attached_finish(NcmFunction *f, uint32_t room,
                                         uint32_t max_packet)
{
    uint32_t len;

    if (!f->in_attached || !f->in_builder.n_datagrams || ncm_function_busy(f) ||
        !ncm_in_finish(f)) {
        return 0;
    }
    len = f->in_ntb_len;
    f->stats->in_direct_ntbs++;
    ncm_in_restart(f);
    ncm_in_ended(f, len, len, room, max_packet);
    return len;
}

bool ncm_function_in_attached_has_room(const NcmFunction *f)
{
    return f->in_attached && f->in_builder.n_datagrams &&
           !ncm_function_busy(f) &&
           ncm_ntb_builder_fits(&f->in_builder, f->max_datagram_size);
}

void ncm_function_in_detach(NcmFunction *f)
{
    NcmNtbBuilder *b = &f->in_builder;

    if (!f->in_attached) {
        return;
    }
    /*
     * The builder's own table says where each datagram lies and the
     * headers are written only at finish, so the bytes can move as they
     * are; a guest that changed them meanwhile changed only its payload.
     */
    if (b->n_datagrams) {
        memcpy(f->in_buf, b->buf, b->len);
        f->stats->in_rescued_datagrams += b->n_datagrams;
        trace_usb_ncm_in_rescue(f->cfg.name, b->n_datagrams, b->len);
    }
    b->buf = f->in_buf;
    b->layout.max_len = ncm_in_max_len(f, f->ntb_in_size);
    f->in_attached = false;
}

bool ncm_function_in_babble(NcmFunction *f, uint32_t room,
                            uint32_t max_packet)
{
    uint32_t remaining;

    if (!max_packet || room % max_packet == 0 || ncm_function_busy(f) ||
        f->in_attached || f->in_zlp_owed) {
        return false;
    }
    /* finished first, so that the IN faults apply as usual */
    if (!f->in_ntb_len &&
        (!f->in_builder.n_datagrams || !ncm_in_finish(f))) {
        return false;
    }
    remaining = f->in_ntb_len - f->in_send_off;
    if (remaining <= room) {
        return false;
    }
    f->stats->in_babbles++;
    f->stats->in_flushed_datagrams += f->in_builder.n_datagrams;
    trace_usb_ncm_in_babble(f->cfg.name, room, remaining);
    qemu_log_mask(LOG_GUEST_ERROR,
                  "usb-ncm: bulk IN buffer of %u bytes ends inside a "
                  "packet with %u bytes of an NTB to send: babble, NTB "
                  "lost\n", room, remaining);
    ncm_in_restart(f);
    return true;
}

bool ncm_function_in_pending(const NcmFunction *f)
{
    return !ncm_function_busy(f) && !f->in_attached &&
           (f->in_zlp_owed || f->in_ntb_len || f->in_builder.n_datagrams);
}

const uint8_t *ncm_function_in_next(NcmFunction *f, uint32_t room,
                                    uint32_t *len)
{
    if (ncm_function_busy(f) || f->in_attached) {
        return NULL;
    }
    if (f->in_zlp_owed) {
        *len = 0;
        return f->in_buf;
    }
    if (!f->in_ntb_len) {
        if (!f->in_builder.n_datagrams) {
            return NULL;
        }
        if (!ncm_in_finish(f)) {
            return NULL;
        }
    }
    *len = MIN(room, f->in_ntb_len - f->in_send_off);
    return f->in_buf + f->in_send_off;
}

bool ncm_function_in_sent(NcmFunction *f, uint32_t len, uint32_t room,
                          uint32_t max_packet)
{
    uint32_t ntb_len = f->in_ntb_len;

    if (f->in_zlp_owed) {
        f->in_zlp_owed = false;
        f->stats->in_zlps++;
        trace_usb_ncm_in_zlp(f->cfg.name);
        return false;
    }
    f->in_send_off += len;
    if (f->in_send_off < ntb_len) {
        return false;
    }
    ncm_in_restart(f);
    ncm_in_ended(f, ntb_len, len, room, max_packet);
    return true;
}

/* Migration */

void ncm_function_pre_save(NcmFunction *f)
{
    ncm_function_in_detach(f);
}

uint32_t ncm_function_in_bytes(const NcmFunction *f)
{
    return MAX(f->in_ntb_len, f->in_builder.len);
}

/*
 * The limits an IN NTB is held to after a load.  One on its way out
 * keeps the size and the datagrams it was built with when the host asks
 * for less (ncm_set_ntb_input_size()), so it is held to the largest the
 * configuration allows; its builder takes no datagram until it is sent
 * and ncm_in_restart() applies the host's limits again.
 */
static NcmNtbLayout ncm_loaded_in_layout(const NcmFunction *f)
{
    NcmNtbLayout layout = ncm_in_layout(f);

    if (f->in_ntb_len) {
        layout.max_len = ncm_in_max_len(f, f->cfg.ntb_in_max_size);
        layout.max_datagrams = 0;
    }
    return layout;
}

static const char *ncm_check_builder(NcmFunction *f, uint32_t in_bytes)
{
    NcmNtbBuilder *b = &f->in_builder;
    NcmNtbLayout layout = ncm_loaded_in_layout(f);
    uint32_t len = b->len, n = b->n_datagrams, ndp = b->ndp_offset, i;

    /* the table came as it was; everything else is rebuilt */
    ncm_ntb_builder_init(b, f->format, &layout, f->in_buf);
    if (n > b->max_datagrams) {
        return "more IN datagrams than the NTB may hold";
    }
    if (len < f->format->nth_len || len > b->layout.max_len ||
        len > in_bytes) {
        return "IN NTB length outside its buffer";
    }
    for (i = 0; i < n; i++) {
        const NcmDatagram *d = &b->datagrams[i];

        if (d->offset < f->format->nth_len || d->len < NCM_ETH_HEADER_LEN ||
            (uint64_t)d->offset + d->len > len) {
            return "IN datagram outside the NTB";
        }
    }
    if (f->in_ntb_len &&
        (!n || (uint64_t)ndp + f->format->ndp_min_len > f->in_ntb_len)) {
        return "IN NDP outside the NTB being sent";
    }
    b->len = len;
    b->n_datagrams = n;
    b->ndp_offset = ndp;
    return NULL;
}

const char *ncm_function_post_load(NcmFunction *f, bool ntb32,
                                   uint32_t in_bytes)
{
    if (ntb32 && !(f->cfg.ntb_formats & NCM_NTB_FORMAT_32)) {
        return "NTB32 selected, but this device does not offer it";
    }
    f->format = ntb32 ? &ncm_ntb32_format : &ncm_ntb16_format;
    f->in_attached = false;
    if (f->ntb_in_size < NCM_NTB_MIN_SIZE ||
        f->ntb_in_size > f->cfg.ntb_in_max_size) {
        return "NTB input size outside 2048..ntb-in-max-size";
    }
    if (f->ntb_in_max_datagrams > NCM_MAX_DATAGRAMS) {
        return "wNtbInMaxDatagrams too large";
    }
    if (f->max_datagram_size < NCM_ETH_HEADER_LEN ||
        f->max_datagram_size > f->cfg.max_segment_size) {
        return "max datagram size outside 14..max-segment-size";
    }
    if (f->packet_filter & ~0x1f) {
        return "unknown packet filter bits";
    }
    if (f->crc_mode && !(f->cfg.network_caps & NCM_CAP_CRC_MODE)) {
        return "CRC mode on, but this device does not offer it";
    }
    if (f->mc_count > (f->cfg.mc_filters & CDC_MC_FILTERS_COUNT_MASK) ||
        f->mc_count > NCM_MAX_MC_FILTERS) {
        return "more multicast filters than the device advertises";
    }
    ncm_mc_rehash(f);
    if (f->out_len > f->out_buf_size) {
        return "OUT transfer longer than its buffer";
    }
    if (f->in_ntb_len > ncm_loaded_in_layout(f).max_len ||
        f->in_ntb_len > in_bytes || f->in_send_off > f->in_ntb_len) {
        return "IN NTB being sent is outside its buffer";
    }
    if (f->notify_len > sizeof(f->notify_buf) ||
        f->notify_off > f->notify_len ||
        (f->notify_pending & ~(NCM_NOTIFY_SPEED | NCM_NOTIFY_CONNECTION))) {
        return "notification state out of range";
    }
    return ncm_check_builder(f, in_bytes);
}
