/*
 * USB CDC-NCM function: its part of the migration stream
 *
 * Apart from ncm-function.c, which builds and is tested without QEMU.
 * A device embeds the function with VMSTATE_NCM_FUNCTION() and keeps the
 * USB side (configuration, packets, timers) in its own description, as
 * hw/input/hid.c does for the HID devices.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/error-report.h"
#include "migration/vmstate.h"
#include "hw/usb/ncm-function.h"

/*
 * The two byte buffers go as a length and the bytes
 * (VMSTATE_VBUFFER_UINT32); the length is validated against the buffer
 * before anything is written into it, since a migration stream is
 * untrusted input.
 */
static bool ncm_out_len_valid(void *opaque, int version_id)
{
    NcmFunction *fn = opaque;

    if (fn->out_len > fn->out_buf_size) {
        error_report("usb-ncm: migrated OUT transfer of %u bytes does not "
                     "fit this device's %u-byte buffer", fn->out_len,
                     fn->out_buf_size);
        return false;
    }
    return true;
}

static bool ncm_in_buf_len_valid(void *opaque, int version_id)
{
    NcmFunction *fn = opaque;

    if (fn->mig.in_buf_len > fn->cfg.ntb_in_max_size) {
        error_report("usb-ncm: migrated IN NTB of %u bytes does not fit "
                     "this device's %u-byte buffer (ntb-in-max-size)",
                     fn->mig.in_buf_len, fn->cfg.ntb_in_max_size);
        return false;
    }
    return true;
}

static bool ncm_in_datagrams_valid(void *opaque, int version_id)
{
    NcmFunction *fn = opaque;

    if (fn->in_builder.n_datagrams > NCM_MAX_DATAGRAMS) {
        error_report("usb-ncm: migrated IN NTB of %u datagrams exceeds the "
                     "builder's %u", fn->in_builder.n_datagrams,
                     NCM_MAX_DATAGRAMS);
        return false;
    }
    return true;
}

static int ncm_function_vmstate_pre_save(void *opaque)
{
    NcmFunction *f = opaque;

    /* the host re-sends its parked transfers to the destination */
    ncm_function_pre_save(f);
    f->mig.ntb32 = f->format == &ncm_ntb32_format;
    f->mig.in_buf_len = ncm_function_in_bytes(f);
    return 0;
}

static int ncm_function_vmstate_pre_load(void *opaque)
{
    NcmFunction *f = opaque;

    /*
     * A subsection that does not come was all zero on the source.  The
     * debug counters do not migrate: they start again from zero here.
     */
    memset(f->stats, 0, sizeof(*f->stats));
    f->crc_mode = false;
    f->mc_count = 0;
    return 0;
}

static int ncm_function_vmstate_post_load(void *opaque, int version_id)
{
    NcmFunction *f = opaque;
    const char *why;

    why = ncm_function_post_load(f, f->mig.ntb32, f->mig.in_buf_len);
    if (why) {
        error_report("usb-ncm: refusing the migrated state: %s", why);
        return -EINVAL;
    }
    return 0;
}

static const VMStateDescription vmstate_ncm_datagram = {
    .name = "ncm-function/datagram",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT32(offset, NcmDatagram),
        VMSTATE_UINT32(len, NcmDatagram),
        VMSTATE_END_OF_LIST()
    },
};

/* NCM 1.0 state beyond the base requests: only when in use */
static bool ncm_ext_needed(void *opaque)
{
    NcmFunction *f = opaque;

    return f->crc_mode || f->mc_count;
}

static const VMStateDescription vmstate_ncm_ext = {
    .name = "ncm-function/ext",
    .version_id = 1,
    .minimum_version_id = 1,
    .needed = ncm_ext_needed,
    .fields = (const VMStateField[]) {
        VMSTATE_BOOL(crc_mode, NcmFunction),
        VMSTATE_UINT16(mc_count, NcmFunction),
        VMSTATE_UINT8_2DARRAY(mc_addrs, NcmFunction, NCM_MAX_MC_FILTERS,
                              CDC_MC_ADDRESS_LEN),
        VMSTATE_END_OF_LIST()
    },
};

/*
 * The counters GET_ETHERNET_STATISTIC reports (NCM_ETH_STAT_COUNTERS,
 * ncm_eth_stats[]):
 * they are what a real function keeps across a migration.  The other
 * counters (x-stats) are for debugging and stay out of the stream, so
 * adding one changes nothing here.
 */
static bool ncm_eth_stats_needed(void *opaque)
{
    const NcmCounters *c = ((NcmFunction *)opaque)->stats;

    size_t i;

    for (i = 0; i < NCM_ETH_STATS_COUNT; i++) {
        if (ncm_eth_stat_value(c, &ncm_eth_stats[i])) {
            return true;
        }
    }
    return false;
}

/*
 * The counters travel as one array in NCM_ETH_STAT_COUNTERS' order,
 * copied out of NcmCounters before the save and back after the load
 * through ncm_eth_stats[] (QEMU's VMSTATE_WITH_TMP), so that the stream
 * is made from the list too.  Its bytes are those of one VMSTATE_UINT64
 * per counter, which is what it carried when the fields were listed here
 * by name: streams of either kind load.
 */
typedef struct NcmEthStatsTmp {
    NcmCounters *parent;            /* VMSTATE_WITH_TMP's, first */
    uint64_t values[NCM_ETH_STATS_COUNT];
} NcmEthStatsTmp;

static int ncm_eth_stats_tmp_pre_save(void *opaque)
{
    NcmEthStatsTmp *tmp = opaque;
    size_t i;

    for (i = 0; i < NCM_ETH_STATS_COUNT; i++) {
        tmp->values[i] = ncm_eth_stat_value(tmp->parent, &ncm_eth_stats[i]);
    }
    return 0;
}

static int ncm_eth_stats_tmp_post_load(void *opaque, int version_id)
{
    NcmEthStatsTmp *tmp = opaque;
    size_t i;

    for (i = 0; i < NCM_ETH_STATS_COUNT; i++) {
        *ncm_eth_stat_counter(tmp->parent, &ncm_eth_stats[i]) =
            tmp->values[i];
    }
    return 0;
}

static const VMStateDescription vmstate_ncm_eth_stats_tmp = {
    .name = "ncm-function/ethernet-statistics/counters/values",
    .pre_save = ncm_eth_stats_tmp_pre_save,
    .post_load = ncm_eth_stats_tmp_post_load,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT64_ARRAY(values, NcmEthStatsTmp, NCM_ETH_STATS_COUNT),
        VMSTATE_END_OF_LIST()
    },
};

static const VMStateDescription vmstate_ncm_eth_counters = {
    .name = "ncm-function/ethernet-statistics/counters",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_WITH_TMP(NcmCounters, NcmEthStatsTmp,
                         vmstate_ncm_eth_stats_tmp),
        VMSTATE_END_OF_LIST()
    },
};

static const VMStateDescription vmstate_ncm_eth_stats = {
    .name = "ncm-function/ethernet-statistics",
    .version_id = 1,
    .minimum_version_id = 1,
    .needed = ncm_eth_stats_needed,
    .fields = (const VMStateField[]) {
        VMSTATE_STRUCT_POINTER(stats, NcmFunction, vmstate_ncm_eth_counters,
                               NcmCounters),
        VMSTATE_END_OF_LIST()
    },
};

const VMStateDescription vmstate_ncm_function = {
    .name = "ncm-function",
    .version_id = 1,
    .minimum_version_id = 1,
    .pre_save = ncm_function_vmstate_pre_save,
    .pre_load = ncm_function_vmstate_pre_load,
    .post_load = ncm_function_vmstate_post_load,
    .fields = (const VMStateField[]) {
        /* negotiated */
        VMSTATE_BOOL(mig.ntb32, NcmFunction),
        VMSTATE_UINT32(ntb_in_size, NcmFunction),
        VMSTATE_UINT16(ntb_in_max_datagrams, NcmFunction),
        VMSTATE_UINT16(max_datagram_size, NcmFunction),
        VMSTATE_UINT16(packet_filter, NcmFunction),
        VMSTATE_UINT8_ARRAY(net_address, NcmFunction, 6),
        VMSTATE_BOOL(data_active, NcmFunction),
        VMSTATE_BOOL(link_up, NcmFunction),
        /* OUT */
        VMSTATE_BOOL(out_discarding, NcmFunction),
        /* IN */
        VMSTATE_UINT32(in_builder.len, NcmFunction),
        VMSTATE_UINT32(in_builder.n_datagrams, NcmFunction),
        VMSTATE_UINT32(in_builder.ndp_offset, NcmFunction),
        /* the datagrams the builder holds, not all NCM_MAX_DATAGRAMS */
        VMSTATE_VALIDATE("in_builder.n_datagrams fits the builder",
                         ncm_in_datagrams_valid),
        VMSTATE_STRUCT_VARRAY_UINT32(in_builder.datagrams, NcmFunction,
                                     in_builder.n_datagrams, 1,
                                     vmstate_ncm_datagram, NcmDatagram),
        VMSTATE_UINT32(in_ntb_len, NcmFunction),
        VMSTATE_UINT32(in_send_off, NcmFunction),
        VMSTATE_UINT16(in_sequence, NcmFunction),
        VMSTATE_BOOL(in_zlp_owed, NcmFunction),
        /* interrupt endpoint */
        VMSTATE_UINT8(notify_pending, NcmFunction),
        VMSTATE_UINT8_ARRAY(notify_buf, NcmFunction,
                            CDC_NOTIFY_SPEED_CHANGE_LEN),
        VMSTATE_UINT8(notify_len, NcmFunction),
        VMSTATE_UINT8(notify_off, NcmFunction),
        /* the bytes, last, each after its length and that length's check */
        VMSTATE_UINT32(out_len, NcmFunction),
        VMSTATE_VALIDATE("out_len fits the OUT buffer", ncm_out_len_valid),
        VMSTATE_VBUFFER_UINT32(out_buf, NcmFunction, 0, NULL, out_len),
        VMSTATE_UINT32(mig.in_buf_len, NcmFunction),
        VMSTATE_VALIDATE("in_buf_len fits ntb-in-max-size",
                         ncm_in_buf_len_valid),
        VMSTATE_VBUFFER_UINT32(in_buf, NcmFunction, 0, NULL, mig.in_buf_len),
        VMSTATE_END_OF_LIST()
    },
    .subsections = (const VMStateDescription * const []) {
        &vmstate_ncm_ext,
        &vmstate_ncm_eth_stats,
        NULL
    },
};
