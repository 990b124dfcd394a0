/*
 * USB CDC-NCM Ethernet adapter (usb-ncm-dl, usb-ncm)
 *
 * QEMU glue: USB packets, the net client, x-stats, the hook interface a
 * fault injector attaches through (ncm-fault-target.h; the injector is
 * the usb-ncm-fault object, ncm-fault.c), migration of the USB side,
 * realize and properties.  The protocol lives
 * in ncm-function.c (its migration state in ncm-function-vmstate.c), the
 * NTB codec in ncm-ntb.c, the profiles and descriptors in dev-ncm-desc.c.
 *
 * usb-ncm-dl presents itself as a DisplayLink NCM function (vendor 0x17e9,
 * 64 KiB NTBs) so that Linux binds it as "CDC NCM (SEND ZLP)"; usb-ncm is a
 * generic NCM 1.0 adapter.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qemu/error-report.h"
#include "qemu/log.h"
#include "qemu/main-loop.h"
#include "qemu/module.h"
#include "qemu/timer.h"
#include "qapi/visitor.h"
#include "hw/qdev-properties.h"
#include "qemu/bswap.h"
#include "qemu/cutils.h"
#include "migration/vmstate.h"
#include "system/replay.h"
#include "system/runstate.h"
#include "system/system.h"
#include "net/net.h"
#include "hw/usb.h"
#include "hw/usb/ncm-compat.h"
#include "hw/usb/ncm-fault-target.h"
#include "dev-ncm.h"
#include "trace.h"

#define TYPE_USB_NCM_BASE   "usb-ncm-base"
#define TYPE_USB_NCM        "usb-ncm"
#define TYPE_USB_NCM_DL     "usb-ncm-dl"

OBJECT_DECLARE_TYPE(USBNcmState, USBNcmClass, USB_NCM_BASE)

struct USBNcmClass {
    USBDeviceClass parent_class;
    const USBNcmVariant *variant;
    int default_profile;            /* USBNcmProfileId, without profile= */
};

/*
 * The device's properties, each once: how it is defined, its name, its
 * field of USBNcmState, what it is (-device usb-ncm-dl,help) and its
 * default.  usb_ncm_property_defs[] is made of this list and
 * USB_NCM_PROFILE_PROPS; the properties, their descriptions and the
 * profile's values come from that table.
 */
#define USB_NCM_PROPS(X) \
    X(DEFINE_PROP_UINT16, "ntb-in-divisor", fn.cfg.in_divisor, \
      "wNdpInDivisor, power of two 4..4096", 4) \
    X(DEFINE_PROP_UINT16, "ntb-in-remainder", fn.cfg.in_remainder, \
      "wNdpInPayloadRemainder, below the divisor", 0) \
    X(DEFINE_PROP_UINT16, "ntb-in-alignment", fn.cfg.in_alignment, \
      "wNdpInAlignment, power of two 4..4096", 4) \
    X(DEFINE_PROP_UINT16, "ntb-out-divisor", fn.cfg.out_divisor, \
      "wNdpOutDivisor, power of two 4..4096", 4) \
    X(DEFINE_PROP_UINT16, "ntb-out-remainder", fn.cfg.out_remainder, \
      "wNdpOutPayloadRemainder, below the divisor", 0) \
    X(DEFINE_PROP_UINT16, "ntb-out-alignment", fn.cfg.out_alignment, \
      "wNdpOutAlignment, power of two 4..4096", 4) \
    X(DEFINE_PROP_BOOL, "x-deferred-out", deferred_out, \
      "read bulk OUT in a bottom half (off: in the vCPU thread, for " \
      "comparison)", true) \
    X(DEFINE_PROP_UINT32, "in-coalesce-us", in_coalesce.max_us, \
      "while the host has fewer bulk IN transfers queued than usual, an " \
      "IN NTB keeps taking datagrams for up to this long, 0 (off)..100000", \
      NCM_IN_COALESCE_US_DEFAULT) \
    X(DEFINE_PROP_BOOL, "remote-wakeup", remote_wakeup, \
      "advertise remote wakeup: a frame wakes a suspended device", true) \
    X(DEFINE_PROP_ON_OFF_AUTO, "x-park-packets", park_packets, \
      "hold bulk packets until there is data (auto: at high speed and " \
      "above; below, the controller may be an OHCI, which allows one per " \
      "controller)", ON_OFF_AUTO_AUTO) \
    X(DEFINE_PROP_UINT16, "vendorid", vendor_id, \
      "idVendor (0: the model's own)", 0) \
    X(DEFINE_PROP_UINT16, "productid", product_id, \
      "idProduct (0: the model's own)", 0) \
    X(USB_NCM_PROP_STRING, "manufacturer", manufacturer, \
      "manufacturer string, UTF-8, at most 126 UTF-16 code units", NULL) \
    X(USB_NCM_PROP_STRING, "product", product, \
      "product string, UTF-8, at most 126 UTF-16 code units", NULL)

/*
 * The numeric properties a profile supplies: how it is defined, its
 * name, field of USBNcmProfile, field of USBNcmState (the same size), the
 * default, which means "the profile's" (it is no valid value of the
 * property: realize replaces it with the profile's), and what the
 * property is.  ntb32 (OnOffAuto, auto), zlp (unset or "profile") and
 * profile itself are described in usb_ncm_class_set_props().
 */
#define USB_NCM_PROFILE_PROPS(X) \
    X(DEFINE_PROP_UINT32, "ntb-in-max-size", ntb_in_max_size, \
      fn.cfg.ntb_in_max_size, 0, "dwNtbInMaxSize, 2048..65536") \
    X(DEFINE_PROP_UINT32, "ntb-out-max-size", ntb_out_max_size, \
      fn.cfg.ntb_out_max_size, 0, "dwNtbOutMaxSize, 2048..65536") \
    X(DEFINE_PROP_UINT16, "ntb-out-max-datagrams", \
      out_max_datagrams, fn.cfg.out_max_datagrams, UINT16_MAX, \
      "wNtbOutMaxDatagrams, 0 (no limit)..1024") \
    X(DEFINE_PROP_UINT16, "in-datagrams-per-ntb", in_datagrams, \
      fn.cfg.in_max_datagrams, UINT16_MAX, \
      "the firmware's own limit of datagrams per IN NTB, 0 (none)..1024") \
    X(DEFINE_PROP_UINT16, "max-segment-size", max_segment_size, \
      fn.cfg.max_segment_size, 0, \
      "wMaxSegmentSize (largest frame), from 1514") \
    X(DEFINE_PROP_UINT16, "power-on-filter", power_on_filter, \
      fn.cfg.power_on_filter, UINT16_MAX, \
      "packet filter until the host sets one: CDC bits, 0x01 " \
      "promiscuous, 0x02 all multicast, 0x04 directed, 0x08 broadcast, " \
      "0x10 multicast") \
    X(DEFINE_PROP_UINT8, "network-capabilities", caps, \
      fn.cfg.network_caps, UINT8_MAX, \
      "bmNetworkCapabilities: 0x01 packet filter, 0x02 net address, " \
      "0x08 max datagram size, 0x10 CRC mode, 0x20 8-byte NTB input " \
      "size") \
    X(DEFINE_PROP_UINT16, "multicast-filters", mc_filters, \
      fn.cfg.mc_filters, UINT16_MAX, \
      "wNumberMCFilters: filters 0..256, +0x8000 for imperfect (hash) " \
      "filtering") \
    X(DEFINE_PROP_UINT32, "ethernet-statistics", eth_stats, \
      fn.cfg.eth_stats, UINT32_MAX, \
      "bmEthernetStatistics: bit N-1 for GET_ETHERNET_STATISTIC " \
      "selector N, 1..17") \
    X(DEFINE_PROP_UINT16, "bcd-cdc", bcd_cdc, bcd_cdc, 0, \
      "bcdCDC of the header descriptor, 0x0110 or 0x0120")

/* zlp=profile: the profile's NcmZlpPolicy */
#define USB_NCM_ZLP_PROFILE     (NCM_ZLP_REQUIRED + 1)

/*
 * What happens to USB packets, which only the glue sees (the function
 * counts what happens to NTBs, datagrams and requests); x-stats shows
 * both sets as one.
 */
#define USB_NCM_PACKET_COUNTERS(X) \
    X(in_naks) \
    X(in_parked)                /* IN packets held for the next NTB */ \
    X(out_deferred_packets)     /* OUT packets read in a bottom half */ \
    X(packets_handed_back)      /* completed empty by a reset/alt */ \
    X(replugs)                  /* fault: dropped off the bus */ \
    X(in_coalesced)             /* IN NTBs kept for more datagrams */ \
    X(in_coalesce_timeouts)     /* ... until in-coalesce-us passed */ \
    X(rx_frames_taken)          /* from the netdev, queued or dropped */

typedef struct USBNcmPacketCounters {
    USB_NCM_PACKET_COUNTERS(NCM_COUNTER_FIELD)
} USBNcmPacketCounters;

/*
 * IN coalescing.  A host keeps several bulk IN transfers queued (Linux
 * usbnet: six of 64 KiB at super speed) and queues each again once it has
 * processed the NTB that came in it.  With fewer queued than it keeps, it
 * is still busy with NTBs already sent: finishing the NTB under
 * construction would not get it read any sooner, while each NTB costs
 * the host a completion, an interrupt share and a resubmission.  So the
 * NTB keeps taking datagrams until the host is back (all its transfers
 * queued), it is full, or in-coalesce-us have passed.
 */
typedef struct USBNcmInCoalesce {
    uint32_t max_us;                /* property in-coalesce-us; 0: off */
    uint32_t host_queue;            /* most IN packets seen queued at */
                                    /* once; lowered when one kept NTB */
                                    /* reaches max_us */
    int64_t since_ns;               /* QEMU_CLOCK_VIRTUAL; 0: not kept */
    QEMUTimer *timer;               /* looks again while kept */
} USBNcmInCoalesce;

/* A bulk endpoint and the one packet the device holds on it, if any */
typedef struct USBNcmBulk {
    USBEndpoint *ep;
    USBPacket *parked;
    /*
     * A packet was NAK'd: the controller waits for usb_wakeup().  Only
     * then is it woken; a wakeup out of the blue restarts an endpoint the
     * guest has just stopped on QEMU's xHCI (its Set TR Dequeue Pointer
     * then fails with a context state error).
     */
    bool nakd;
} USBNcmBulk;

struct USBNcmState {
    USBDevice dev;

    /* properties; the NTB ones land in fn.cfg, the function's own */
    NICConf conf;
    OnOffAuto ntb32;                /* auto: the profile's */
    char *zlp_name;                 /* property zlp; NULL: "profile" */
    int zlp;                        /* parsed at realize: NcmZlpPolicy, */
                                    /* or USB_NCM_ZLP_PROFILE until the */
                                    /* profile is applied */
    bool deferred_out;
    bool remote_wakeup;
    /*
     * USB 3 function remote wake, enabled by SET_FEATURE(FUNCTION_SUSPEND)
     * to the control interface (at super speed the host enables remote
     * wakeup this way, not with DEVICE_REMOTE_WAKEUP)
     */
    bool func_remote_wakeup;
    OnOffAuto park_packets;
    char *profile_name;             /* property profile; NULL: the class's */
    int profile;                    /* USBNcmProfileId, parsed at realize */
    uint16_t bcd_cdc;
    uint16_t vendor_id;
    uint16_t product_id;
    char *manufacturer;
    char *product;

    /* protocol state: all of it */
    NcmFunction fn;

    /* glue */
    NICState *nic;
    USBEndpoint *ep_notify;
    USBNcmBulk in;                  /* parked: the next NTB goes there */
    USBNcmBulk out;                 /* parked: waiting for out_bh */
    bool may_park;                  /* rule 3, from x-park-packets */
    bool handing_back;              /* rule 2 */
    bool out_draining;              /* completing OUT packets */
    QEMUBH *wakeup_bh;
    QEMUBH *out_bh;
    /* the fault injector attached (ncm-fault-target.h), if any */
    const UsbNcmFaultInjector *fault;
    void *fault_opaque;
    QEMUTimer *replug_timer;        /* off the bus until it fires */
    bool replug_down;
    VMChangeStateEntry *vmstate_change;
    /*
     * The configuration as this device's stream carried it before the
     * core's USBDevice/configuration subsection did: still sent, for a
     * destination that reads it, and from a source without the
     * subsection put in place through usb_desc_load_config().
     */
    struct {
        int32_t configuration;
        int32_t altsetting[NCM_IF_COUNT];
    } mig;
    bool wake_bulk_in;
    bool wake_notify;
    bool notify_nakd;               /* as USBNcmBulk.nakd */
    USBNcmInCoalesce in_coalesce;
    USBNcmPacketCounters packet_stats;
    char *trace_name;               /* fn.cfg.name */
    char mac_string[13];
    USBNcmDescriptors descs;
};



/*
 * Who holds which USB packet
 *
 * For each bulk endpoint the device holds at most one packet, the parked
 * one: it answered USB_RET_ASYNC and the packet heads the core's
 * ep->queue.  Packets the controller sends meanwhile wait in ep->queue
 * (USB_PACKET_QUEUED) and reach usb_ncm_handle_data() from inside
 * usb_packet_complete() when the parked one completes; on xHCI they may
 * also arrive fresh from inside that call, when the controller refills
 * the endpoint.  USBNcmBulk.parked is the only record of which packet is
 * parked.  Three rules keep the core's assertions and the guest's
 * transfers intact; usb_ncm_bulk_in() and usb_ncm_bulk_out() enforce
 * them, nothing else parks or NAKs:
 *
 * 1. NAK only a packet fresh from the controller (USB_PACKET_SETUP).  One
 *    that comes out of ep->queue is answered or parked: core.c asserts on
 *    a NAK there.
 * 2. While the device hands packets back (bus reset, SET_INTERFACE,
 *    SET_CONFIGURATION), nothing is parked: IN packets complete empty and
 *    OUT packets are read.  Completing the parked packet then empties the
 *    endpoint's whole queue, before usb_desc_ep_init() forgets it.
 * 3. Park only where the controller lets other transfers go on meanwhile
 *    (usb_ncm_controller_lets_packets_wait()): at high speed and above.
 *    Below it the controller may be an OHCI, which runs one asynchronous
 *    packet per controller and reuses its buffer for the next TD.  There
 *    bulk IN NAKs and OUT is read at once.  Behind an EHCI the speed
 *    changes with the port's owner, so it is asked again at every bus
 *    reset.
 */

static bool usb_ncm_controller_lets_packets_wait(USBNcmState *s);

static void usb_ncm_out_drain(USBNcmState *s);
static void usb_ncm_schedule_wakeup(USBNcmState *s, bool bulk_in,
                                    bool notify);
static void usb_ncm_flush_rx(USBNcmState *s);
static void usb_ncm_in_coalesce_end(USBNcmState *s);
static void usb_ncm_in_coalesce_forget(USBNcmState *s);
static void usb_ncm_vm_state_change(void *opaque, bool running,
                                    RunState state);

/* a fault injector holds the bulk endpoints busy: they NAK */
static bool usb_ncm_fault_busy(USBNcmState *s)
{
    return s->fault && s->fault->fn.busy(s->fault_opaque);
}

static void usb_ncm_wakeup_nakd(USBNcmBulk *b)
{
    if (b->nakd) {
        b->nakd = false;
        usb_wakeup(b->ep, 0);
    }
}

static void usb_ncm_park(USBNcmBulk *b, USBPacket *p, bool attached)
{
    USBNcmState *s = USB_NCM_BASE(p->ep->dev);

    b->parked = p;
    p->status = USB_RET_ASYNC;
    trace_usb_ncm_park(s->fn.cfg.name, p->ep->nr, p->iov.size, attached);
}

/*
 * Complete @b's parked packet with what is already in it.  The core may
 * call usb_ncm_handle_data() from in here, for the packets queued behind.
 */
static void usb_ncm_complete_parked(USBNcmState *s, USBNcmBulk *b)
{
    USBPacket *p = b->parked;

    if (b == &s->in) {
        usb_ncm_in_coalesce_end(s);
    }
    b->parked = NULL;
    if (p->status == USB_RET_ASYNC) {
        p->status = USB_RET_SUCCESS;
    }
    usb_packet_complete(&s->dev, p);
}

/* Rule 2: give back every packet of both bulk endpoints. */
static void usb_ncm_hand_back(USBNcmState *s)
{
    if (s->handing_back) {
        return;
    }
    s->handing_back = true;
    /*
     * The host sent its OUT data before the request: read it first.  A
     * queue left behind a cancelled packet is run too (usb_ep_run_queue()).
     */
    usb_ep_run_queue(s->out.ep);
    usb_ncm_out_drain(s);
    usb_ep_run_queue(s->in.ep);
    if (s->in.parked) {
        /* datagrams in the host's buffer stay with the function */
        ncm_function_in_detach(&s->fn);
        s->packet_stats.packets_handed_back++;
        trace_usb_ncm_hand_back(s->fn.cfg.name, NCM_EP_BULK_IN,
                                s->in.parked->iov.size);
        usb_ncm_complete_parked(s, &s->in);
    }
    s->handing_back = false;
}

/* Bulk IN */

/*
 * Copy the next IN bytes (or the ZLP owed) into @p, or end it with
 * babble; false when there is nothing to send.
 */
static bool usb_ncm_in_send(USBNcmState *s, USBPacket *p)
{
    const uint8_t *src;
    uint32_t len;

    if (ncm_function_in_babble(&s->fn, p->iov.size,
                               p->ep->max_packet_size)) {
        p->status = USB_RET_BABBLE;
        usb_ncm_flush_rx(s);
        return true;
    }
    src = ncm_function_in_next(&s->fn, p->iov.size, &len);
    if (!src) {
        /* a fault may have dropped the NTB: room again (cheap if not) */
        usb_ncm_flush_rx(s);
        return false;
    }
    usb_packet_copy(p, (void *)src, len);
    if (ncm_function_in_sent(&s->fn, len, p->iov.size,
                             p->ep->max_packet_size)) {
        usb_ncm_flush_rx(s);
    }
    return true;
}

/*
 * When the first piece of @p's guest memory can hold an NTB, the next one
 * is built right there, so each frame is copied once; an NTB is never
 * split over pieces.
 */
static bool usb_ncm_in_attach(USBNcmState *s, USBPacket *p)
{
    return p->iov.niov >= 1 &&
           ncm_function_in_attach(&s->fn, p->iov.iov[0].iov_base,
                                  p->iov.iov[0].iov_len);
}

/* Keep @p for the next NTB. */
static void usb_ncm_in_hold(USBNcmState *s, USBPacket *p)
{
    s->packet_stats.in_parked++;
    usb_ncm_park(&s->in, p, usb_ncm_in_attach(s, p));
}

static void usb_ncm_bulk_in(USBNcmState *s, USBPacket *p)
{
    bool fresh = p->state == USB_PACKET_SETUP;

    if (s->handing_back) {
        s->packet_stats.packets_handed_back++;
        trace_usb_ncm_hand_back(s->fn.cfg.name, p->ep->nr, p->iov.size);
        return;                             /* empty, successful */
    }
    if (!p->iov.size) {
        /* a zero-length TD takes the ZLP owed, if any, and nothing else */
        uint32_t len;

        if (s->fn.in_zlp_owed &&
            ncm_function_in_next(&s->fn, 0, &len)) {
            ncm_function_in_sent(&s->fn, 0, 0, p->ep->max_packet_size);
        }
        return;
    }
    if (usb_ncm_in_send(s, p)) {
        return;
    }
    if (s->in.parked ||
        (fresh && (usb_ncm_fault_busy(s) || !s->may_park))) {
        if (fresh) {
            s->packet_stats.in_naks++;
            s->in.nakd = true;
            p->status = USB_RET_NAK;
        }
        /* else: cannot happen (the parked packet heads the queue) */
        return;
    }
    usb_ncm_in_hold(s, p);
}

/*
 * A kept NTB goes after this long at most: the value interleaved A/B runs
 * on tap and slirp chose (their figures are in
 * docs/performance/in-coalesce-ab.txt, not here, where they would go
 * stale).
 */
#define NCM_IN_COALESCE_US_DEFAULT 200
/* Re-check a kept NTB this often: the host queues transfers silently. */
#define NCM_IN_COALESCE_POLL_NS (50 * SCALE_US)
/* Counting queued IN packets stops here: more says the same. */
#define NCM_IN_QUEUE_COUNT_MAX 64

static uint32_t usb_ncm_in_host_queue(USBNcmState *s)
{
    return usb_ep_queue_length(s->in.ep, NCM_IN_QUEUE_COUNT_MAX);
}

static void usb_ncm_in_coalesce_end(USBNcmState *s)
{
    s->in_coalesce.since_ns = 0;
    timer_del(s->in_coalesce.timer);
}

/* A new host, or the same one starting over: learn its queue again. */
static void usb_ncm_in_coalesce_forget(USBNcmState *s)
{
    s->in_coalesce.host_queue = 0;
    usb_ncm_in_coalesce_end(s);
}

/*
 * Whether the NTB in the parked packet keeps taking datagrams for now
 * (see USBNcmInCoalesce); the timer looks again while it does.
 */
static bool usb_ncm_in_keep(USBNcmState *s)
{
    USBNcmInCoalesce *c = &s->in_coalesce;
    uint32_t queued;
    int64_t now;

    if (!c->max_us || !ncm_function_in_attached_has_room(&s->fn)) {
        usb_ncm_in_coalesce_end(s);
        return false;
    }
    queued = usb_ncm_in_host_queue(s);
    c->host_queue = MAX(c->host_queue, queued);
    if (queued >= c->host_queue) {
        usb_ncm_in_coalesce_end(s);         /* the host waits for data */
        return false;
    }
    now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    if (!c->since_ns) {
        c->since_ns = now;
        s->packet_stats.in_coalesced++;
    } else if (now - c->since_ns >= (int64_t)c->max_us * SCALE_US) {
        /* it keeps fewer transfers queued now: learn that */
        c->host_queue = queued;
        s->packet_stats.in_coalesce_timeouts++;
        trace_usb_ncm_in_coalesce_timeout(s->fn.cfg.name, queued);
        usb_ncm_in_coalesce_end(s);
        return false;
    }
    timer_mod(c->timer, now + NCM_IN_COALESCE_POLL_NS);
    return true;
}

static void usb_ncm_in_coalesce_timer(void *opaque)
{
    USBNcmState *s = opaque;

    usb_ncm_schedule_wakeup(s, true, false);
}

/*
 * Deferred to the end of the main-loop iteration so that a burst of
 * frames becomes one NTB: answer the parked IN packet, if there is
 * something for it.
 */
static void usb_ncm_in_kick(USBNcmState *s)
{
    USBPacket *p;

    /* packets queued behind a cancelled one: the first is held now */
    usb_ep_run_queue(s->in.ep);
    p = s->in.parked;
    if (!p) {
        usb_ncm_wakeup_nakd(&s->in);
        return;
    }
    if (s->fn.in_attached) {
        uint32_t len;

        if (usb_ncm_in_keep(s)) {
            return;
        }
        len = ncm_function_in_attached_finish(&s->fn, p->iov.size,
                                              p->ep->max_packet_size);
        if (len) {
            p->actual_length = len;
            usb_ncm_complete_parked(s, &s->in);
        }
    } else if (usb_ncm_in_send(s, p)) {
        usb_ncm_complete_parked(s, &s->in);
    }
    /* room again, after a send or a fault's drop */
    usb_ncm_flush_rx(s);
}

static void usb_ncm_wakeup_bh(void *opaque)
{
    USBNcmState *s = opaque;

    /* no DMA while the VM is stopped: the flags wait for it to run */
    if (!s->dev.attached || !runstate_is_running()) {
        return;
    }
    if (s->wake_notify) {
        s->wake_notify = false;
        if (s->notify_nakd) {
            s->notify_nakd = false;
            usb_wakeup(s->ep_notify, 0);
        }
    }
    if (s->wake_bulk_in) {
        s->wake_bulk_in = false;
        usb_ncm_in_kick(s);
    }
}

static void usb_ncm_schedule_wakeup(USBNcmState *s, bool bulk_in,
                                    bool notify)
{
    s->wake_bulk_in |= bulk_in;
    s->wake_notify |= notify;
    replay_bh_schedule_event(s->wakeup_bh);
}

static void usb_ncm_flush_rx(USBNcmState *s)
{
    if (s->nic) {
        qemu_flush_queued_packets(qemu_get_queue(s->nic));
    }
}

/* Bulk OUT */

static void usb_ncm_emit(void *opaque, const uint8_t *frame, size_t len)
{
    USBNcmState *s = opaque;

    qemu_send_packet(qemu_get_queue(s->nic), frame, len);
}

static void usb_ncm_out_process(USBNcmState *s, USBPacket *p)
{
    uint32_t avail, copied;
    uint8_t *dst;

    s->packet_stats.out_deferred_packets += s->out_draining;
    if (p->iov.niov == 1 &&
        ncm_function_out_direct(&s->fn, p->iov.iov[0].iov_base, p->iov.size,
                                p->ep->max_packet_size, usb_ncm_emit, s)) {
        usb_packet_skip(p, p->iov.size);
        return;
    }
    dst = ncm_function_out_space(&s->fn, &avail);

    copied = MIN(p->iov.size, avail);
    usb_packet_copy(p, dst, copied);
    if (copied < p->iov.size) {
        usb_packet_skip(p, p->iov.size - copied);
    }
    ncm_function_out_packet(&s->fn, p->iov.size, copied,
                            p->ep->max_packet_size, usb_ncm_emit, s);
}

/*
 * Read and complete the parked OUT packet, and with it every OUT packet
 * queued behind it: usb_packet_complete() hands those to
 * usb_ncm_bulk_out() while out_draining is set.
 */
static void usb_ncm_out_drain(USBNcmState *s)
{
    if (!s->out.parked || s->out_draining) {
        return;
    }
    if (s->handing_back) {
        s->packet_stats.packets_handed_back++;
        trace_usb_ncm_hand_back(s->fn.cfg.name, NCM_EP_BULK_OUT,
                                s->out.parked->iov.size);
    }
    s->out_draining = true;
    usb_ncm_out_process(s, s->out.parked);
    usb_ncm_complete_parked(s, &s->out);
    s->out_draining = false;
}

static void usb_ncm_out_bh(void *opaque)
{
    USBNcmState *s = opaque;

    if (s->dev.attached && !usb_ncm_fault_busy(s) && runstate_is_running()) {
        usb_ep_run_queue(s->out.ep);
        usb_ncm_out_drain(s);
    }
}

/*
 * The host's doorbell write runs in its vCPU thread: parse the NTB and
 * hand its datagrams to the netdev (slirp's TCP, a socket write...) in a
 * bottom half instead, so that the main loop does that work while the vCPU
 * goes on running the guest, as virtio-net's ioeventfd does.
 */
static void usb_ncm_bulk_out(USBNcmState *s, USBPacket *p)
{
    bool fresh = p->state == USB_PACKET_SETUP;
    bool busy = usb_ncm_fault_busy(s) && !s->handing_back;

    if (busy) {
        if (fresh) {
            s->out.nakd = true;
            p->status = USB_RET_NAK;
        } else if (!s->out.parked) {
            usb_ncm_park(&s->out, p, false);    /* until the busy time ends */
        }
        /* else: cannot happen (the parked packet heads the queue) */
        return;
    }
    if (s->handing_back || s->out_draining || !s->deferred_out ||
        !s->may_park) {
        usb_ncm_out_process(s, p);
        return;
    }
    /* the queue was empty, or it would not be fresh: keep the order */
    usb_ncm_out_drain(s);
    usb_ncm_park(&s->out, p, false);
    replay_bh_schedule_event(s->out_bh);
}

static void usb_ncm_cancel_packet(USBDevice *dev, USBPacket *p)
{
    USBNcmState *s = USB_NCM_BASE(dev);

    if (p == s->in.parked) {
        /* what was built in its buffer goes out in the next one */
        ncm_function_in_detach(&s->fn);
        s->in.parked = NULL;
        usb_ncm_in_coalesce_end(s);
        trace_usb_ncm_in_cancelled(s->fn.cfg.name, p->iov.size);
        usb_ncm_schedule_wakeup(s, true, false);
    }
    if (p == s->out.parked) {
        /* the host took its transfer back before the device read it */
        s->out.parked = NULL;
        trace_usb_ncm_out_cancelled(s->fn.cfg.name, p->iov.size);
        replay_bh_schedule_event(s->out_bh);
    }
}

/* Device */

static void usb_ncm_handle_reset(USBDevice *dev)
{
    USBNcmState *s = USB_NCM_BASE(dev);

    trace_usb_ncm_reset(s->fn.cfg.name);
    s->func_remote_wakeup = false;
    usb_ncm_in_coalesce_forget(s);
    usb_ncm_hand_back(s);
    /* nothing is parked now; the speed may have changed with the port */
    s->may_park = usb_ncm_controller_lets_packets_wait(s);
    /*
     * The function starts over with the data path off: usb_device_reset()
     * unconfigures the device after this (USB 2.0 9.1.1.3) without a
     * set_interface callback.
     */
    ncm_function_reset(&s->fn);
    usb_ncm_flush_rx(s);
}

/* After usb_desc_ep_init(): usb_ncm_handle_control() handed back first. */
static void usb_ncm_set_interface(USBDevice *dev, int iface,
                                  int alt_old, int alt_new)
{
    USBNcmState *s = USB_NCM_BASE(dev);

    if (iface != NCM_IF_DATA) {
        return;
    }
    ncm_function_set_data_alt(&s->fn, alt_new);
    usb_ncm_in_coalesce_forget(s);
    if (alt_new) {
        usb_ncm_schedule_wakeup(s, false, true);
    }
    usb_ncm_flush_rx(s);
}

/*
 * At super speed, USB 3.2 9.4.5 and 9.4.9: GET_STATUS of the first
 * interface of the function (function remote wake capable, enabled) and
 * SET_FEATURE / CLEAR_FEATURE(FUNCTION_SUSPEND) to it, whose options byte
 * (the high byte of wIndex) enables function remote wake.  A function that
 * cannot wake the host stalls the request to enable it.  Returns whether
 * the request was one of these (and @p has its outcome).
 */
#define USB_INTRF_FUNC_SUSPEND      0
#define USB_INTRF_FUNC_SUSPEND_RW   0x02
#define USB_INTRF_STAT_FUNC_RW_CAP  0x01
#define USB_INTRF_STAT_FUNC_RW      0x02

static bool usb_ncm_function_suspend(USBNcmState *s, USBPacket *p,
                                     int request, int value, int index,
                                     int length, uint8_t *data)
{
    bool set = request == (InterfaceOutRequest | USB_REQ_SET_FEATURE);

    if (s->dev.speed != USB_SPEED_SUPER || (index & 0xff) != NCM_IF_CONTROL ||
        !s->dev.configuration) {
        return false;
    }
    if (request == (InterfaceRequest | USB_REQ_GET_STATUS) && value == 0 &&
        length >= 2) {
        data[0] = (s->remote_wakeup ? USB_INTRF_STAT_FUNC_RW_CAP : 0) |
                  (s->func_remote_wakeup ? USB_INTRF_STAT_FUNC_RW : 0);
        data[1] = 0;
        p->actual_length = 2;
        return true;
    }
    if ((!set && request != (InterfaceOutRequest | USB_REQ_CLEAR_FEATURE)) ||
        value != USB_INTRF_FUNC_SUSPEND) {
        return false;
    }
    if (set && (index >> 8) & USB_INTRF_FUNC_SUSPEND_RW) {
        if (!s->remote_wakeup) {
            return false;               /* stalled and counted */
        }
        s->func_remote_wakeup = true;
    } else {
        s->func_remote_wakeup = false;
    }
    /*
     * usb_wakeup() knows only DEVICE_REMOTE_WAKEUP, which a super speed
     * host never sends (USB 3.2 9.4.5): it sees function remote wake as
     * that.  The one function of the device is the whole device, so
     * GET_STATUS(device) reporting it too is what it means.
     */
    s->dev.remote_wakeup = s->func_remote_wakeup;
    p->actual_length = 0;
    return true;
}

static void usb_ncm_handle_control(USBDevice *dev, USBPacket *p, int request,
                                   int value, int index, int length,
                                   uint8_t *data)
{
    USBNcmState *s = USB_NCM_BASE(dev);
    bool set_config = request == (DeviceOutRequest |
                                  USB_REQ_SET_CONFIGURATION);
    bool set_iface = request == (InterfaceOutRequest |
                                 USB_REQ_SET_INTERFACE);
    int old_alt = set_iface && index >= 0 && index < USB_MAX_INTERFACES ?
                  dev->altsetting[index] : -1;
    int ret;

    if (set_config || set_iface) {
        /* usb_desc_ep_init() empties every endpoint queue: rule 2 */
        usb_ncm_hand_back(s);
    }
    ret = usb_desc_handle_control(dev, p, request, value, index, length, data);
    if (ret >= 0) {
        if (set_config) {
            /* a new configuration (or none) starts with the data path off */
            ncm_function_reset(&s->fn);
            usb_ncm_flush_rx(s);
        } else if (set_iface && old_alt == value) {
            /*
             * The alternate setting in force, selected again: QEMU's core
             * calls set_interface only for another one, but the request
             * resets the interface's endpoints all the same (USB 2.0
             * 9.4.10), so the host starts its next transfer afresh; the
             * function must too (NCM 1.0 7.2), or it would join that
             * transfer to the NTB it had half received or half sent.
             */
            usb_ncm_set_interface(dev, index, old_alt, value);
        }
        return;
    }

    if (request == (EndpointOutRequest | USB_REQ_CLEAR_FEATURE) &&
        value == 0) {
        /* ENDPOINT_HALT: nothing is halted inside the model */
        p->actual_length = 0;
        return;
    }
    if (usb_ncm_function_suspend(s, p, request, value, index, length,
                                 data)) {
        return;
    }
    /* the rest is the function's: it stalls (and counts) what it rejects */
    ret = ncm_function_control(&s->fn, request, value, index, length, data);
    if (ret < 0) {
        p->status = USB_RET_STALL;
        return;
    }
    p->actual_length = ret;
    /* a smaller input size may have dropped what was queued */
    usb_ncm_flush_rx(s);
    usb_ncm_schedule_wakeup(s, true, false);
}

static void usb_ncm_notify_in(USBNcmState *s, USBPacket *p)
{
    uint8_t buf[CDC_NOTIFY_SPEED_CHANGE_LEN];
    uint32_t len;

    len = ncm_function_notify_next(&s->fn, buf, MIN(p->iov.size,
                                                    sizeof(buf)));
    if (!len) {
        s->notify_nakd = true;
        p->status = USB_RET_NAK;
        return;
    }
    usb_packet_copy(p, buf, len);
}

static void usb_ncm_handle_data(USBDevice *dev, USBPacket *p)
{
    USBNcmState *s = USB_NCM_BASE(dev);

    if (p->pid == USB_TOKEN_IN && p->ep->nr == NCM_EP_NOTIFY) {
        usb_ncm_notify_in(s, p);
        return;
    }
    if (!s->fn.data_active && !s->handing_back) {
        qemu_log_mask(LOG_GUEST_ERROR,
                      "usb-ncm: data transfer on ep %d while the data "
                      "interface is in alt 0\n", p->ep->nr);
        p->status = USB_RET_STALL;
        return;
    }
    if (p->pid == USB_TOKEN_IN && p->ep->nr == NCM_EP_BULK_IN) {
        usb_ncm_bulk_in(s, p);
    } else if (p->pid == USB_TOKEN_OUT && p->ep->nr == NCM_EP_BULK_OUT) {
        usb_ncm_bulk_out(s, p);
    } else {
        qemu_log_mask(LOG_GUEST_ERROR,
                      "usb-ncm: transfer to unknown endpoint %d pid 0x%x\n",
                      p->ep->nr, p->pid);
        p->status = USB_RET_STALL;
    }
}

/* Net client */

static bool usb_ncm_can_receive(NetClientState *nc)
{
    USBNcmState *s = qemu_get_nic_opaque(nc);

    return ncm_function_rx_can_queue(&s->fn);
}

static ssize_t usb_ncm_receive(NetClientState *nc, const uint8_t *buf,
                               size_t size)
{
    USBNcmState *s = qemu_get_nic_opaque(nc);

    /*
     * The host stopped polling (a suspended device has no transfers
     * waiting): a frame wakes it, if it allowed remote wakeup.  The port
     * ignores this unless it is suspended.  usb_wakeup(), as dev-hid.c
     * uses it, on the interrupt endpoint, which the host reads first
     * after a resume; it resumes the port only when dev.remote_wakeup is
     * set, which usb_ncm_function_suspend() keeps in step with USB 3
     * function remote wake.
     */
    if (s->remote_wakeup && s->dev.remote_wakeup && !s->in.parked) {
        usb_wakeup(s->ep_notify, 0);
    }
    switch (ncm_function_rx(&s->fn, buf, size)) {
    case NCM_RX_QUEUED:
        s->packet_stats.rx_frames_taken++;
        usb_ncm_schedule_wakeup(s, true, false);
        return size;
    case NCM_RX_BUSY:
        usb_ncm_schedule_wakeup(s, true, false);
        return 0;
    case NCM_RX_DROPPED:
    default:
        s->packet_stats.rx_frames_taken++;
        /*
         * Taken and dropped.  For a frame of no bytes (filter-redirector
         * passes one from its chardev straight to the queue) the size
         * would be 0, which says "not now" (net/queue.c): the frame, and
         * every frame after it, would stay queued for good.
         */
        return size ? size : -1;
    }
}

static void usb_ncm_update_link(USBNcmState *s)
{
    bool up = !s->nic || !qemu_get_queue(s->nic)->link_down;
    bool held = s->fault && s->fault->link_down(s->fault_opaque);

    ncm_function_set_link(&s->fn, up && !held);
}

static void usb_ncm_link_status_changed(NetClientState *nc)
{
    USBNcmState *s = qemu_get_nic_opaque(nc);

    trace_usb_ncm_link(s->fn.cfg.name, !nc->link_down);
    usb_ncm_update_link(s);
    usb_ncm_schedule_wakeup(s, false, true);
}

static NetClientInfo usb_ncm_net_info = {
    .type = NET_CLIENT_DRIVER_NIC,
    .size = sizeof(NICState),
    .can_receive = usb_ncm_can_receive,
    .receive = usb_ncm_receive,
    .link_status_changed = usb_ncm_link_status_changed,
};

/* x-stats: the function's counters and the glue's, as one */

#define USB_NCM_FN_STAT(f) { #f, true, offsetof(NcmCounters, f) },
#define USB_NCM_PACKET_STAT(f) \
    { #f, false, offsetof(USBNcmState, packet_stats.f) },

static const struct {
    const char *name;
    bool function;                  /* in NcmCounters, else USBNcmState */
    size_t offset;                  /* of a uint64_t */
} usb_ncm_stat_fields[] = {
    NCM_FUNCTION_COUNTERS(USB_NCM_FN_STAT)
    USB_NCM_PACKET_COUNTERS(USB_NCM_PACKET_STAT)
};

static void usb_ncm_get_stats(Object *obj, Visitor *v, const char *name,
                              void *opaque, Error **errp)
{
    USBNcmState *s = USB_NCM_BASE(obj);
    NcmCounters *c = s->fn.stats;
    uint64_t total = 0;
    size_t i;
    bool ok;

    if (!visit_start_struct(v, name, NULL, 0, errp)) {
        return;
    }
    ok = true;
    for (i = 0; ok && i < ARRAY_SIZE(usb_ncm_stat_fields); i++) {
        uint8_t *base = usb_ncm_stat_fields[i].function ? (uint8_t *)c
                                                        : (uint8_t *)s;
        uint64_t *field = (uint64_t *)(base + usb_ncm_stat_fields[i].offset);

        ok = visit_type_uint64(v, usb_ncm_stat_fields[i].name, field, errp);
    }
    if (ok) {
        ok = visit_start_struct(v, "out_parse_errors", NULL, 0, errp);
    }
    if (ok) {
        for (i = NCM_PARSE_OK + 1; ok && i < NCM_PARSE_ERROR__MAX; i++) {
            total += c->out_parse_errors[i];
            ok = visit_type_uint64(v, ncm_parse_error_name(i),
                                   &c->out_parse_errors[i], errp);
        }
        ok = ok && visit_type_uint64(v, "total", &total, errp);
        ok = ok && visit_check_struct(v, errp);
        visit_end_struct(v, NULL);
    }
    ok = ok && visit_check_struct(v, errp);
    visit_end_struct(v, NULL);
}

/*
 * TYPE_USB_NCM_FAULT_TARGET: what a fault injector (ncm-fault.c) may do
 * to the device.  The device keeps no fault state but the replug it is
 * in; the injector answers the function's NcmFaultHooks and says whether
 * the link is held down (usb_ncm_update_link()) or the endpoints are busy
 * (usb_ncm_fault_busy()).
 */

static bool usb_ncm_fault_attach(Object *obj, const UsbNcmFaultInjector *inj,
                                 void *opaque, Error **errp)
{
    USBNcmState *s = USB_NCM_BASE(obj);

    if (inj && !DEVICE(obj)->realized) {
        error_setg(errp, "%s is not realized yet",
                   object_get_typename(obj));
        return false;
    }
    if (inj && s->fault) {
        error_setg(errp, "%s has a fault injector already", s->fn.cfg.name);
        return false;
    }
    s->fault = inj;
    s->fault_opaque = opaque;
    ncm_function_set_fault_hooks(&s->fn, inj ? &inj->fn : NULL, opaque);
    return true;
}

static const char *usb_ncm_fault_name(Object *obj)
{
    return USB_NCM_BASE(obj)->fn.cfg.name;
}

static void usb_ncm_fault_link_changed(Object *obj)
{
    USBNcmState *s = USB_NCM_BASE(obj);

    usb_ncm_update_link(s);
    usb_ncm_schedule_wakeup(s, false, true);
    if (s->fn.link_up) {
        usb_ncm_flush_rx(s);
    }
}

static void usb_ncm_fault_busy_ended(Object *obj)
{
    USBNcmState *s = USB_NCM_BASE(obj);

    if (s->dev.attached) {
        usb_ncm_wakeup_nakd(&s->out);
    }
    replay_bh_schedule_event(s->out_bh);
    usb_ncm_schedule_wakeup(s, true, false);
}

/*
 * Re-enumeration: the function drops off the bus, as a dock's firmware
 * reset or a failed U1/U2 exit does, and comes back @ms later
 */
static void usb_ncm_fault_replug(Object *obj, uint32_t ms)
{
    USBNcmState *s = USB_NCM_BASE(obj);

    if (ms && s->dev.attached) {
        s->packet_stats.replugs++;
        trace_usb_ncm_replug(s->fn.cfg.name, 0, ms);
        usb_device_detach(&s->dev);
        /* what the firmware knew is gone with it */
        ncm_function_reset(&s->fn);
        usb_ncm_flush_rx(s);
    }
    if (ms || s->replug_down) {
        s->replug_down = true;
        timer_mod(s->replug_timer,
                  qemu_clock_get_ms(QEMU_CLOCK_VIRTUAL) + ms);
    }
}

/* how long a device loaded off the bus stays off, as a replug */
#define USB_NCM_REPLUG_MS 200

static void usb_ncm_replug_timer(void *opaque)
{
    USBNcmState *s = opaque;
    Error *err = NULL;

    s->replug_down = false;
    if (!s->dev.attached) {
        usb_device_attach(&s->dev, &err);
        if (err) {
            /* the port went away meanwhile: nothing to come back to */
            warn_report_err(err);
        } else {
            trace_usb_ncm_replug(s->fn.cfg.name, 1, 0);
        }
    }
    if (s->fault) {
        s->fault->replugged(s->fault_opaque);
    }
}

/* Realize */

#define NCM_IN_COALESCE_US_MAX 100000

/*
 * A string descriptor is UTF-16 text of at most 126 code units: bLength is
 * a byte, 2 + 2 * 126 = 254.  usb_desc_string() encodes UTF-8 and cuts
 * what does not fit; rather than cut, a string property that is not
 * UTF-8 or does not fit is refused, naming it.
 */
#define USB_NCM_STRING_UNITS_MAX 126

static bool usb_ncm_check_string(const char *prop, const char *value,
                                 Error **errp)
{
    const char *p;
    size_t units = 0;

    if (!value) {
        return true;
    }
    if (!g_utf8_validate(value, -1, NULL)) {
        error_setg(errp, "%s is not valid UTF-8: a USB string descriptor "
                   "holds UTF-16 text, at most %d code units", prop,
                   USB_NCM_STRING_UNITS_MAX);
        return false;
    }
    for (p = value; *p; p = g_utf8_next_char(p)) {
        units += g_utf8_get_char(p) > 0xffff ? 2 : 1;
    }
    if (units > USB_NCM_STRING_UNITS_MAX) {
        error_setg(errp, "%s is %zu UTF-16 code units long: a USB string "
                   "descriptor holds at most %d", prop, units,
                   USB_NCM_STRING_UNITS_MAX);
        return false;
    }
    return true;
}

/* The function checks its own configuration; these are the glue's. */
static bool usb_ncm_check_properties(USBNcmState *s, Error **errp)
{
    g_autofree char *why = ncm_function_check_config(&s->fn.cfg);

    if (why) {
        error_setg(errp, "%s", why);
        return false;
    }
    if (!usb_ncm_check_string("manufacturer", s->manufacturer, errp) ||
        !usb_ncm_check_string("product", s->product, errp) ||
        !usb_ncm_check_string("serial", s->dev.serial, errp)) {
        return false;
    }
    if (s->in_coalesce.max_us > NCM_IN_COALESCE_US_MAX) {
        error_setg(errp, "in-coalesce-us %u is above %u (100 ms): an NTB "
                   "kept that long stalls TCP", s->in_coalesce.max_us,
                   NCM_IN_COALESCE_US_MAX);
        return false;
    }
    if (s->bcd_cdc != 0x0110 && s->bcd_cdc != 0x0120) {
        error_setg(errp, "bcd-cdc 0x%04x: use 0x0110 or 0x0120 (CDC 1.10, "
                   "1.20)", s->bcd_cdc);
        return false;
    }
    return true;
}

/*
 * Rule 3 of "Who holds which USB packet", asked of the port: park only at
 * high speed and above.  Below it the controller may be QEMU's OHCI,
 * which keeps one asynchronous packet for the whole controller (a parked
 * bulk IN would stop every other endpoint, and the next OUT TD overwrites
 * the buffer the parked packet points at), and the device cannot tell:
 * an EHCI hands a full-speed device to a companion, a UHCI or an OHCI.
 * So at full and low speed the device NAKs on every controller, UHCI
 * included, which costs it only the in-place NTB build.  The speed can
 * change with the port's owner: this is asked again at every bus reset.
 */
static bool usb_ncm_controller_lets_packets_wait(USBNcmState *s)
{
    if (s->park_packets != ON_OFF_AUTO_AUTO) {
        return s->park_packets == ON_OFF_AUTO_ON;
    }
    return !s->dev.attached || s->dev.speed >= USB_SPEED_HIGH;
}

/* zlp: how the firmware finds the end of an OUT transfer */
static const char *const usb_ncm_zlp_names[] = {
    [NCM_ZLP_AUTO] = "auto",
    [NCM_ZLP_REQUIRED] = "required",
    [USB_NCM_ZLP_PROFILE] = "profile",
};

/*
 * profile= and zlp= take a name: string properties checked here, as
 * hw/usb/ccid-card-emulated.c does with backend=, so that a bad one fails
 * realize naming the property and the values it takes.
 */
static bool usb_ncm_parse_name(const char *prop, const char *value,
                               const char *const *names, int count,
                               int *result, Error **errp)
{
    g_autoptr(GString) all = g_string_new(NULL);
    int i;

    for (i = 0; i < count; i++) {
        if (!strcmp(value, names[i])) {
            *result = i;
            return true;
        }
        g_string_append_printf(all, "%s%s", i ? ", " : "", names[i]);
    }
    error_setg(errp, "%s: unknown value '%s'; use one of %s", prop, value,
               all->str);
    return false;
}

/* Properties */

/*
 * A property, what it is (-device usb-ncm-dl,help, NULL: described by
 * usb_ncm_class_set_props()), and for a profile property (profile_size
 * not 0) where its value is in USBNcmProfile and the default that means
 * "the profile's".
 */
typedef struct USBNcmPropertyDef {
    Property prop;
    const char *help;
    size_t profile_offset;
    size_t profile_size;
    uint32_t unset;
} USBNcmPropertyDef;

#define USB_NCM_PROP(define, name, field, help, dflt) \
    { define(name, USBNcmState, field, dflt), help },
#define USB_NCM_PROFILE_PROP(define, name, pfield, sfield, unset, help) \
    { define(name, USBNcmState, sfield, unset), help, \
      offsetof(USBNcmProfile, pfield), sizeof_field(USBNcmProfile, pfield) + \
      QEMU_BUILD_BUG_ON_ZERO(sizeof_field(USBNcmProfile, pfield) != \
                             sizeof_field(USBNcmState, sfield)), unset },
/* DEFINE_PROP_STRING, with a default as the others have: NULL */
#define USB_NCM_PROP_STRING(name, state, field, unset) \
    DEFINE_PROP_STRING(name, state, field)

static const USBNcmPropertyDef usb_ncm_property_defs[] = {
    { DEFINE_PROP_MACADDR("mac", USBNcmState, conf.macaddr) },
    { DEFINE_PROP_NETDEV("netdev", USBNcmState, conf.peers) },
    USB_NCM_PROPS(USB_NCM_PROP)
    USB_NCM_PROFILE_PROPS(USB_NCM_PROFILE_PROP)
    { DEFINE_PROP_ON_OFF_AUTO("ntb32", USBNcmState, ntb32,
                              ON_OFF_AUTO_AUTO) },
    /* names, checked at realize (usb_ncm_parse_name()) */
    { DEFINE_PROP_STRING("zlp", USBNcmState, zlp_name) },
    { DEFINE_PROP_STRING("profile", USBNcmState, profile_name) },
};

#undef USB_NCM_PROP
#undef USB_NCM_PROFILE_PROP

/* Every property left at its "the profile's" default takes its value */
static void usb_ncm_apply_profile(USBNcmState *s)
{
    const USBNcmProfile *p = &usb_ncm_profiles[s->profile];
    size_t i;

    for (i = 0; i < ARRAY_SIZE(usb_ncm_property_defs); i++) {
        const USBNcmPropertyDef *d = &usb_ncm_property_defs[i];
        void *field = (uint8_t *)s + d->prop.offset;

        if (d->profile_size &&
            ldn_he_p(field, d->profile_size) == d->unset) {
            stn_he_p(field, d->profile_size,
                     ldn_he_p((const uint8_t *)p + d->profile_offset,
                              d->profile_size));
        }
    }
    if (s->ntb32 == ON_OFF_AUTO_AUTO) {
        s->ntb32 = p->ntb32 ? ON_OFF_AUTO_ON : ON_OFF_AUTO_OFF;
    }
    if (s->zlp == USB_NCM_ZLP_PROFILE) {
        s->zlp = p->zlp;
    }
    s->fn.cfg.zlp = s->zlp;
}

static void usb_ncm_realize(USBDevice *dev, Error **errp)
{
    USBNcmState *s = USB_NCM_BASE(dev);
    const USBNcmVariant *variant = USB_NCM_BASE_GET_CLASS(s)->variant;
    const USBNcmProfile *profile;
    uint8_t *mac;

    if (!usb_ncm_parse_name("profile", s->profile_name ?:
                            usb_ncm_profile_names[
                                USB_NCM_BASE_GET_CLASS(s)->default_profile],
                            usb_ncm_profile_names, NCM_PROFILE__MAX,
                            &s->profile, errp) ||
        !usb_ncm_parse_name("zlp", s->zlp_name ?: "profile",
                            usb_ncm_zlp_names, ARRAY_SIZE(usb_ncm_zlp_names),
                            &s->zlp, errp)) {
        return;
    }
    profile = &usb_ncm_profiles[s->profile];
    usb_ncm_apply_profile(s);
    if (!usb_ncm_check_properties(s, errp)) {
        return;
    }
    if (!s->vendor_id) {
        s->vendor_id = profile->vendor_id ?: variant->vendor_id;
    }
    if (!s->product_id) {
        s->product_id = profile->product_id ?: variant->product_id;
    }

    qemu_macaddr_default_if_unset(&s->conf.macaddr);
    mac = s->conf.macaddr.a;

    usb_ncm_build_descriptors(&s->descs, &s->fn.cfg, &(USBNcmIdentity) {
                                  .vendor_id = s->vendor_id,
                                  .product_id = s->product_id,
                                  .bcd_cdc = s->bcd_cdc,
                                  .remote_wakeup = s->remote_wakeup,
                              });
    dev->usb_desc = &s->descs.desc;
    usb_desc_create_serial(dev);
    usb_desc_init(dev);
    snprintf(s->mac_string, sizeof(s->mac_string),
             "%02x%02x%02x%02x%02x%02x",
             mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]);
    usb_desc_set_string(dev, STR_MAC, s->mac_string);
    usb_desc_set_string(dev, STR_MANUFACTURER,
                        s->manufacturer ?: profile->manufacturer ?:
                        variant->manufacturer);
    usb_desc_set_string(dev, STR_PRODUCT,
                        s->product ?: profile->product ?: variant->product);

    s->fn.cfg.ntb_formats = NCM_NTB_FORMAT_16 |
                         (s->ntb32 == ON_OFF_AUTO_ON ? NCM_NTB_FORMAT_32 : 0);
    memcpy(s->fn.cfg.mac, mac, sizeof(s->fn.cfg.mac));
    s->fn.cfg.link_speed_bps = 1000 * 1000 * 1000;
    g_free(s->trace_name);
    s->trace_name = DEVICE(s)->id ? g_strdup(DEVICE(s)->id) :
                    g_strdup_printf("usb-ncm@%s", dev->port ? dev->port->path
                                                            : "?");
    s->fn.cfg.name = s->trace_name;
    ncm_function_init(&s->fn, &s->fn.cfg);

    s->ep_notify = usb_ep_get(dev, USB_TOKEN_IN, NCM_EP_NOTIFY);
    s->in.ep = usb_ep_get(dev, USB_TOKEN_IN, NCM_EP_BULK_IN);
    s->out.ep = usb_ep_get(dev, USB_TOKEN_OUT, NCM_EP_BULK_OUT);
    s->may_park = usb_ncm_controller_lets_packets_wait(s);
    /*
     * Both bottom halves are scheduled through replay_bh_schedule_event():
     * what they do reaches the guest (wakeups, completions, frames), so
     * under record/replay they must run at the recorded instruction.
     */
    s->wakeup_bh = qemu_bh_new_guarded(usb_ncm_wakeup_bh, s,
                                       &DEVICE(dev)->mem_reentrancy_guard);
    s->out_bh = qemu_bh_new_guarded(usb_ncm_out_bh, s,
                                    &DEVICE(dev)->mem_reentrancy_guard);
    s->in_coalesce.timer = timer_new_ns(QEMU_CLOCK_VIRTUAL,
                                        usb_ncm_in_coalesce_timer, s);
    s->replug_timer = timer_new_ms(QEMU_CLOCK_VIRTUAL, usb_ncm_replug_timer,
                                   s);
    s->vmstate_change = qemu_add_vm_change_state_handler(
        usb_ncm_vm_state_change, s);

    s->nic = qemu_new_nic(&usb_ncm_net_info, &s->conf,
                          object_get_typename(OBJECT(s)), DEVICE(dev)->id,
                          &DEVICE(dev)->mem_reentrancy_guard, s);
    qemu_format_nic_info_str(qemu_get_queue(s->nic), mac);
    usb_ncm_update_link(s);
}

static void usb_ncm_unrealize(USBDevice *dev)
{
    USBNcmState *s = USB_NCM_BASE(dev);

    qemu_bh_delete(s->wakeup_bh);
    s->wakeup_bh = NULL;
    qemu_bh_delete(s->out_bh);
    s->out_bh = NULL;
    qemu_del_vm_change_state_handler(s->vmstate_change);
    timer_free(s->in_coalesce.timer);
    if (s->fault) {
        const UsbNcmFaultInjector *fault = s->fault;

        ncm_function_set_fault_hooks(&s->fn, NULL, NULL);
        s->fault = NULL;
        fault->detached(s->fault_opaque);
    }
    timer_free(s->replug_timer);
    g_free(s->trace_name);
    s->trace_name = NULL;
    s->in.parked = NULL;            /* the detach cancelled them */
    s->out.parked = NULL;
    qemu_del_nic(s->nic);
    s->nic = NULL;
    ncm_function_cleanup(&s->fn);
}

static void usb_ncm_instance_init(Object *obj)
{
    USBNcmState *s = USB_NCM_BASE(obj);

    device_add_bootindex_property(obj, &s->conf.bootindex, "bootindex",
                                  "/ethernet-phy@0", DEVICE(obj));
    object_property_add(obj, "x-stats", "UsbNcmStats", usb_ncm_get_stats,
                        NULL, NULL, NULL);
    object_property_set_description(obj, "x-stats",
                                    "the device's counters (read-only; for "
                                    "tests and debugging)");
}

/*
 * Migration: the USB side.  The function describes its own state
 * (VMSTATE_NCM_FUNCTION, ncm-function-vmstate.c); what is here is what
 * the USB core does not carry, and the configuration in the form streams
 * had before the core carried it.  Debug counters and fault injection are
 * no state of a real device and stay out of the stream: while a fault
 * is active, the injector blocks migration (ncm-fault.c).
 */

static int usb_ncm_pre_save(void *opaque)
{
    USBNcmState *s = opaque;
    int i;

    /*
     * As the core has them (USBDevice/configuration), also off the bus:
     * usb_detach() leaves them, and the function's state goes with them;
     * it comes back unconfigured when the port resets it.
     */
    s->mig.configuration = s->dev.configuration;
    for (i = 0; i < NCM_IF_COUNT; i++) {
        s->mig.altsetting[i] = s->dev.altsetting[i];
    }
    return 0;
}

static int usb_ncm_pre_load(void *opaque)
{
    USBNcmState *s = opaque;

    /* the debug counters (x-stats) do not migrate: from zero again */
    memset(&s->packet_stats, 0, sizeof(s->packet_stats));
    /* what the host was learnt to keep queued, unless the stream says */
    s->in_coalesce.host_queue = 0;
    s->in_coalesce.since_ns = 0;
    return 0;
}

/*
 * The USB core restores the configuration and alternate settings from
 * its own subsection (USBDevice/configuration, hw/usb/bus.c).  A stream
 * from a source whose core did not send them has this device's copy
 * only, which the core then puts in place the same way; when both came,
 * they must agree.
 */
static const char *usb_ncm_load_usb_config(USBNcmState *s)
{
    int i;

    if (s->dev.configuration == 0 && s->mig.configuration != 0) {
        Error *err = NULL;
        int alts[NCM_IF_COUNT];

        for (i = 0; i < NCM_IF_COUNT; i++) {
            alts[i] = s->mig.altsetting[i];
        }
        if (usb_desc_load_config(&s->dev, s->mig.configuration, alts,
                                 NCM_IF_COUNT, &err) < 0) {
            error_report("usb-ncm: mig.configuration: %s",
                         error_get_pretty(err));
            error_free(err);
            return "configuration or alternate setting out of range";
        }
    }
    if (s->dev.configuration != s->mig.configuration) {
        return "mig.configuration disagrees with USBDevice's";
    }
    for (i = 0; i < NCM_IF_COUNT; i++) {
        if (s->dev.altsetting[i] != s->mig.altsetting[i]) {
            return "mig.altsetting disagrees with USBDevice's";
        }
    }
    return NULL;
}

/*
 * The USBDevice part of the stream is the core's (hw/usb/bus.c checks
 * its ranges); what only this device can tell is whether it agrees with
 * the rest of the state.
 */
static const char *usb_ncm_check_migrated_usb(USBNcmState *s)
{
    if (s->dev.state == USB_STATE_ATTACHED && s->mig.configuration != 0) {
        /* configured without the reset that makes a device addressable */
        return "USBDevice.state is 'attached' but the device is configured";
    }
    return NULL;
}

/* After the function's own post_load accepted its part of the stream */
static int usb_ncm_post_load(void *opaque, int version_id)
{
    USBNcmState *s = opaque;
    const char *why;

    timer_del(s->in_coalesce.timer);    /* the wakeup looks again */
    why = usb_ncm_check_migrated_usb(s);
    if (!why) {
        why = usb_ncm_load_usb_config(s);
    }
    /*
     * Off the bus, the device comes back through a port reset, which
     * starts the function over whatever it was: a replug resets the
     * function while the core keeps the configuration until that reset.
     */
    if (!s->dev.attached) {
        ncm_function_reset(&s->fn);
    } else if (!why && s->fn.data_active !=
               (s->dev.configuration == 1 &&
                s->dev.altsetting[NCM_IF_DATA] == 1)) {
        why = "data interface state disagrees with its alternate setting";
    }
    if (why) {
        error_report("usb-ncm: refusing the migrated state: %s", why);
        return -EINVAL;
    }
    usb_ncm_update_link(s);
    s->may_park = usb_ncm_controller_lets_packets_wait(s);
    /*
     * A device off the bus (a replug fault; the source blocks migration
     * then, so a hostile or broken stream) was loaded detached, and
     * hw/usb/bus.c told its port: it comes back as after a replug, or the
     * port stays empty for good.
     */
    if (!s->dev.attached) {
        usb_ncm_fault_replug(OBJECT(s), USB_NCM_REPLUG_MS);
    }
    /*
     * Whatever the controller waits for, wake it once: a migration's
     * destination does not know which transfers the source had NAKed.
     * Not under record/replay: a snapshot loaded there (the replay's
     * first, reverse debugging's) is one the recording saved and went on
     * from unwoken, and the events a wakeup queues would be matched in
     * place of the recording's own.
     */
    if (replay_mode == REPLAY_MODE_NONE) {
        s->in.nakd = s->out.nakd = s->notify_nakd = true;
        usb_ncm_schedule_wakeup(s, true, true);
        replay_bh_schedule_event(s->out_bh);
    }
    return 0;
}

static void usb_ncm_vm_state_change(void *opaque, bool running,
                                    RunState state)
{
    USBNcmState *s = opaque;

    if (running) {
        replay_bh_schedule_event(s->wakeup_bh);
        replay_bh_schedule_event(s->out_bh);
    }
}

static bool usb_ncm_func_remote_wakeup_needed(void *opaque)
{
    USBNcmState *s = opaque;

    return s->func_remote_wakeup;
}

static const VMStateDescription vmstate_usb_ncm_func_remote_wakeup = {
    .name = "usb-ncm/func-remote-wakeup",
    .version_id = 1,
    .minimum_version_id = 1,
    .needed = usb_ncm_func_remote_wakeup_needed,
    .fields = (const VMStateField[]) {
        VMSTATE_BOOL(func_remote_wakeup, USBNcmState),
        VMSTATE_END_OF_LIST()
    },
};

/*
 * IN coalescing learns how many transfers the host keeps queued, and
 * when it started keeping the NTB it builds: the same guest goes on after
 * a migration, and without these the destination would answer its
 * transfers as a new host's until it learnt them again.
 */
static bool usb_ncm_in_coalesce_needed(void *opaque)
{
    USBNcmState *s = opaque;

    return s->in_coalesce.host_queue || s->in_coalesce.since_ns;
}

static int usb_ncm_in_coalesce_post_load(void *opaque, int version_id)
{
    USBNcmState *s = opaque;
    USBNcmInCoalesce *c = &s->in_coalesce;

    if (c->host_queue > NCM_IN_QUEUE_COUNT_MAX || c->since_ns < 0 ||
        c->since_ns > qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL)) {
        error_report("usb-ncm %s: migrated in-coalesce state out of range "
                     "(host_queue %u, since_ns %" PRId64 ")",
                     s->fn.cfg.name, c->host_queue, c->since_ns);
        return -EINVAL;
    }
    return 0;
}

static const VMStateDescription vmstate_usb_ncm_in_coalesce = {
    .name = "usb-ncm/in-coalesce",
    .version_id = 1,
    .minimum_version_id = 1,
    .needed = usb_ncm_in_coalesce_needed,
    .post_load = usb_ncm_in_coalesce_post_load,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT32(in_coalesce.host_queue, USBNcmState),
        VMSTATE_INT64(in_coalesce.since_ns, USBNcmState),
        VMSTATE_END_OF_LIST()
    },
};

static const VMStateDescription vmstate_usb_ncm = {
    .name = "usb-ncm",
    .version_id = 1,
    .minimum_version_id = 1,
    .pre_save = usb_ncm_pre_save,
    .pre_load = usb_ncm_pre_load,
    .post_load = usb_ncm_post_load,
    .fields = (const VMStateField[]) {
        VMSTATE_USB_DEVICE(dev, USBNcmState),
        VMSTATE_INT32(mig.configuration, USBNcmState),
        VMSTATE_INT32_ARRAY(mig.altsetting, USBNcmState, NCM_IF_COUNT),
        VMSTATE_NCM_FUNCTION(fn, USBNcmState),
        VMSTATE_END_OF_LIST()
    },
    .subsections = (const VMStateDescription * const []) {
        &vmstate_usb_ncm_func_remote_wakeup,
        &vmstate_usb_ncm_in_coalesce,
        NULL
    },
};

static void usb_ncm_describe(ObjectClass *klass, const char *name,
                             const char *what, const char *unset,
                             const char *value, const char *profile)
{
    g_autofree char *text = g_strdup_printf("%s; %s: the profile's (%s "
                                            "with profile=%s)",
                                            what, unset, value, profile);

    object_class_property_set_description(klass, name, text);
}

static void usb_ncm_describe_num(ObjectClass *klass, const char *name,
                                 const char *what, uint64_t unset,
                                 uint64_t value, const char *profile)
{
    g_autofree char *unset_str = g_strdup_printf("%" PRIu64, unset);
    g_autofree char *value_str = value < 10 ?
        g_strdup_printf("%" PRIu64, value) :
        g_strdup_printf("%" PRIu64 " = 0x%" PRIx64, value, value);

    usb_ncm_describe(klass, name, what, unset_str, value_str, profile);
}

/*
 * The properties and their descriptions, with @profile as profile='s
 * default: what each profile property is with it.  Each variant has its
 * own ObjectProperty for each, so that -device ...,help can say what its
 * default profile gives; the Property array is the same.
 */
static void usb_ncm_class_set_props(ObjectClass *klass,
                                    USBNcmProfileId profile)
{
    static Property props[ARRAY_SIZE(usb_ncm_property_defs)];
    const USBNcmProfile *p = &usb_ncm_profiles[profile];
    const char *pname = usb_ncm_profile_names[profile];
    g_autoptr(GString) profile_help = g_string_new(
        "descriptor and capability values of a real NCM function: ");
    size_t i;

    for (i = 0; i < ARRAY_SIZE(props); i++) {
        props[i] = usb_ncm_property_defs[i].prop;
    }
    device_class_set_props_n(DEVICE_CLASS(klass), props, ARRAY_SIZE(props));
    for (i = 0; i < ARRAY_SIZE(usb_ncm_property_defs); i++) {
        const USBNcmPropertyDef *d = &usb_ncm_property_defs[i];

        if (d->profile_size) {
            usb_ncm_describe_num(klass, d->prop.name, d->help, d->unset,
                                 ldn_he_p((const uint8_t *)p +
                                          d->profile_offset,
                                          d->profile_size),
                                 pname);
        } else if (d->help) {
            object_class_property_set_description(klass, d->prop.name,
                                                  d->help);
        }
    }
    usb_ncm_describe(klass, "ntb32", "advertise NTB32 as well as NTB16",
                     "auto", p->ntb32 ? "on" : "off", pname);

    USB_NCM_BASE_CLASS(klass)->default_profile = profile;
    usb_ncm_describe(klass, "zlp", "end of an OUT transfer: auto (NCM "
                     "1.0) or required (short packet or ZLP only, "
                     "DisplayLink firmware)", "profile",
                     usb_ncm_zlp_names[p->zlp], pname);
    for (i = 0; i < NCM_PROFILE__MAX; i++) {
        g_string_append_printf(profile_help, "%s%s", i ? ", " : "",
                               usb_ncm_profile_names[i]);
    }
    g_string_append_printf(profile_help, " (default %s); a property given "
                           "as well wins", pname);
    object_class_property_set_description(klass, "profile",
                                          profile_help->str);
}

static void usb_ncm_base_class_init(ObjectClass *klass,
                                    NcmClassInitData *data)
{
    DeviceClass *dc = DEVICE_CLASS(klass);
    USBDeviceClass *uc = USB_DEVICE_CLASS(klass);
    UsbNcmFaultTargetClass *fc = USB_NCM_FAULT_TARGET_CLASS(klass);

    fc->attach = usb_ncm_fault_attach;
    fc->name = usb_ncm_fault_name;
    fc->link_changed = usb_ncm_fault_link_changed;
    fc->busy_ended = usb_ncm_fault_busy_ended;
    fc->replug = usb_ncm_fault_replug;
    uc->realize = usb_ncm_realize;
    uc->unrealize = usb_ncm_unrealize;
    uc->handle_attach = usb_desc_attach;
    uc->handle_reset = usb_ncm_handle_reset;
    uc->handle_control = usb_ncm_handle_control;
    uc->handle_data = usb_ncm_handle_data;
    uc->set_interface = usb_ncm_set_interface;
    uc->cancel_packet = usb_ncm_cancel_packet;
    set_bit(DEVICE_CATEGORY_NETWORK, dc->categories);
    dc->fw_name = "network";
    dc->vmsd = &vmstate_usb_ncm;
    /* an NTB cut at 256 bytes shows its headers and no datagram */
    uc->pcap_snaplen = USB_PCAP_SNAPLEN_MAX;
}

/* usb-ncm: NCM 1.0 delimiting; directed, broadcast and all multicast */
static void usb_ncm_class_init(ObjectClass *klass, NcmClassInitData *data)
{
    DeviceClass *dc = DEVICE_CLASS(klass);
    USBDeviceClass *uc = USB_DEVICE_CLASS(klass);

    USB_NCM_BASE_CLASS(klass)->variant = &usb_ncm_variant;
    uc->product_desc = "QEMU USB NCM Ethernet";
    dc->desc = "USB CDC-NCM Ethernet adapter";
    usb_ncm_class_set_props(klass, NCM_PROFILE_GENERIC);
}

/*
 * usb-ncm-dl: ZLP-required firmware that passes only directed and
 * broadcast frames until the host sets a filter.
 */
static void usb_ncm_dl_class_init(ObjectClass *klass, NcmClassInitData *data)
{
    DeviceClass *dc = DEVICE_CLASS(klass);
    USBDeviceClass *uc = USB_DEVICE_CLASS(klass);

    USB_NCM_BASE_CLASS(klass)->variant = &usb_ncm_dl_variant;
    uc->product_desc = "USB-NCM-DL Giga Ethernet";
    dc->desc = "DisplayLink-style USB CDC-NCM Ethernet (64 KiB NTBs, "
               "ZLP-required firmware)";
    usb_ncm_class_set_props(klass, NCM_PROFILE_DISPLAYLINK);
}

static const TypeInfo usb_ncm_types[] = {
    {
        .name = TYPE_USB_NCM_FAULT_TARGET,
        .parent = TYPE_INTERFACE,
        .class_size = sizeof(UsbNcmFaultTargetClass),
    }, {
        .name = TYPE_USB_NCM_BASE,
        .parent = TYPE_USB_DEVICE,
        .instance_size = sizeof(USBNcmState),
        .instance_init = usb_ncm_instance_init,
        .class_size = sizeof(USBNcmClass),
        .class_init = usb_ncm_base_class_init,
        .abstract = true,
        .interfaces = (InterfaceInfo[]) {
            { TYPE_USB_NCM_FAULT_TARGET },
            { }
        },
    }, {
        .name = TYPE_USB_NCM,
        .parent = TYPE_USB_NCM_BASE,
        .class_init = usb_ncm_class_init,
    }, {
        /* the same function, presented as a DisplayLink dock's NIC */
        .name = TYPE_USB_NCM_DL,
        .parent = TYPE_USB_NCM_BASE,
        .class_init = usb_ncm_dl_class_init,
    },
};

DEFINE_TYPES(usb_ncm_types)
