/*
 * USB CDC-NCM Ethernet adapter (usb-ncm-dl, usb-ncm)
 *
 * QEMU glue: descriptors, USB packets, the net client and properties.  The
 * protocol lives in ncm-function.c and the NTB codec in ncm-ntb.c.
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
#include "hw/core/qdev-prop-internal.h"
#include "hw/usb.h"
#include "migration/qemu-file-types.h"
#include "migration/vmstate.h"
#include "net/net.h"
#include "system/replay.h"
#include "system/runstate.h"
#include "system/system.h"
#include "qom/object.h"
#include "desc.h"
#include "hw/usb/ncm-compat.h"
#include "hw/usb/ncm-function.h"
#include "trace.h"

#define TYPE_USB_NCM_BASE   "usb-ncm-base"
#define TYPE_USB_NCM        "usb-ncm"
#define TYPE_USB_NCM_DL     "usb-ncm-dl"

OBJECT_DECLARE_TYPE(USBNcmState, USBNcmClass, USB_NCM_BASE)

enum {
    NCM_IF_CONTROL = 0,
    NCM_IF_DATA = 1,
    NCM_IF_COUNT = 2,
};

/* Endpoint numbers of the DisplayLink NCM function the model follows */
enum {
    NCM_EP_NOTIFY = 5,
    NCM_EP_BULK_OUT = 6,
    NCM_EP_BULK_IN = 7,
};

enum {
    STR_MANUFACTURER = 1,
    STR_PRODUCT,
    STR_SERIALNUMBER,
    STR_MAC,
    STR_CONTROL,
    STR_DATA,
};

enum {
    NCM_SPEED_FULL,
    NCM_SPEED_HIGH,
    NCM_SPEED_SUPER,
    NCM_SPEED__MAX,
};

/* Per-variant defaults; every one of them can be overridden by a property */
typedef struct USBNcmVariant {
    uint16_t vendor_id;
    uint16_t product_id;
    const char *manufacturer;
    const char *product;
} USBNcmVariant;

struct USBNcmClass {
    USBDeviceClass parent_class;
    const USBNcmVariant *variant;
};

/*
 * profile=: descriptor and capability values that go together, after a
 * real NCM function; docs/system/devices/usb-ncm.rst says where each
 * value comes from.  A property set on the command line (or with
 * -global) wins over the profile's value.
 */
typedef enum USBNcmProfileId {
    NCM_PROFILE_DISPLAYLINK,
    NCM_PROFILE_GENERIC,
    NCM_PROFILE_RTL8156,
    NCM_PROFILE_F_NCM,
    NCM_PROFILE_MINIMAL,
    NCM_PROFILE__MAX,
} USBNcmProfileId;

/* The properties a profile sets, in USBNcmState.explicit_props order */
typedef enum USBNcmProfileProp {
    NCM_PP_NTB_IN_MAX,
    NCM_PP_NTB_OUT_MAX,
    NCM_PP_OUT_MAX_DATAGRAMS,
    NCM_PP_IN_DATAGRAMS,
    NCM_PP_MAX_SEGMENT,
    NCM_PP_NTB32,
    NCM_PP_ZLP,
    NCM_PP_POWER_ON_FILTER,
    NCM_PP_CAPS,
    NCM_PP_MC_FILTERS,
    NCM_PP_ETH_STATS,
    NCM_PP_BCD_CDC,
    NCM_PP__MAX,
} USBNcmProfileProp;

static const char *const usb_ncm_profile_props[NCM_PP__MAX] = {
    [NCM_PP_NTB_IN_MAX] = "ntb-in-max-size",
    [NCM_PP_NTB_OUT_MAX] = "ntb-out-max-size",
    [NCM_PP_OUT_MAX_DATAGRAMS] = "ntb-out-max-datagrams",
    [NCM_PP_IN_DATAGRAMS] = "in-datagrams-per-ntb",
    [NCM_PP_MAX_SEGMENT] = "max-segment-size",
    [NCM_PP_NTB32] = "ntb32",
    [NCM_PP_ZLP] = "zlp",
    [NCM_PP_POWER_ON_FILTER] = "power-on-filter",
    [NCM_PP_CAPS] = "network-capabilities",
    [NCM_PP_MC_FILTERS] = "multicast-filters",
    [NCM_PP_ETH_STATS] = "ethernet-statistics",
    [NCM_PP_BCD_CDC] = "bcd-cdc",
};

typedef struct USBNcmProfile {
    uint16_t vendor_id;             /* 0: the variant's */
    uint16_t product_id;
    const char *manufacturer;       /* NULL: the variant's */
    const char *product;
    uint32_t ntb_in_max_size;
    uint32_t ntb_out_max_size;
    uint16_t out_max_datagrams;
    uint16_t in_datagrams;
    uint16_t max_segment_size;
    bool ntb32;
    NcmZlpPolicy zlp;
    uint16_t power_on_filter;
    uint8_t caps;
    uint16_t mc_filters;
    uint32_t eth_stats;
    uint16_t bcd_cdc;
} USBNcmProfile;

#define NCM_CAPS_BASE   (NCM_CAP_PACKET_FILTER | NCM_CAP_NET_ADDRESS | \
                         NCM_CAP_MAX_DATAGRAM_SIZE)

static const USBNcmProfile usb_ncm_profiles[NCM_PROFILE__MAX] = {
    [NCM_PROFILE_DISPLAYLINK] = {
        .ntb_in_max_size = 65536, .ntb_out_max_size = 65536,
        .out_max_datagrams = 64, .max_segment_size = 1514, .ntb32 = true,
        .zlp = NCM_ZLP_REQUIRED,
        .power_on_filter = CDC_FILTER_DIRECTED | CDC_FILTER_BROADCAST,
        .caps = NCM_CAPS_BASE, .bcd_cdc = 0x0120,
    },
    [NCM_PROFILE_GENERIC] = {
        .ntb_in_max_size = 65536, .ntb_out_max_size = 65536,
        .out_max_datagrams = 64, .max_segment_size = 1514, .ntb32 = true,
        .zlp = NCM_ZLP_AUTO,
        .power_on_filter = CDC_FILTER_DIRECTED | CDC_FILTER_BROADCAST |
                           CDC_FILTER_ALL_MULTICAST,
        .caps = NCM_CAPS_BASE, .bcd_cdc = 0x0120,
    },
    [NCM_PROFILE_RTL8156] = {
        .vendor_id = 0x0bda, .product_id = 0x8156,
        .manufacturer = "Realtek", .product = "USB 10/100/1G/2.5G LAN",
        .ntb_in_max_size = 16384, .ntb_out_max_size = 16384,
        .out_max_datagrams = 40, .max_segment_size = 1518, .ntb32 = false,
        .zlp = NCM_ZLP_AUTO,
        .power_on_filter = CDC_FILTER_DIRECTED | CDC_FILTER_BROADCAST |
                           CDC_FILTER_ALL_MULTICAST,
        .caps = NCM_CAPS_BASE | NCM_CAP_NTB_INPUT_SIZE_8,      /* 0x2b */
        .mc_filters = CDC_MC_FILTERS_IMPERFECT,                 /* 0x8000 */
        .eth_stats = NCM_ETH_STATS_SUPPORTED, .bcd_cdc = 0x0110,
    },
    [NCM_PROFILE_F_NCM] = {
        .vendor_id = 0x0525, .product_id = 0xa4a1,
        .manufacturer = "Linux", .product = "NCM Gadget",
        .ntb_in_max_size = 16384, .ntb_out_max_size = 16384,
        .out_max_datagrams = 0, .in_datagrams = 32,
        .max_segment_size = 1514, .ntb32 = true, .zlp = NCM_ZLP_AUTO,
        .power_on_filter = CDC_FILTER_DIRECTED | CDC_FILTER_BROADCAST |
                           CDC_FILTER_ALL_MULTICAST,
        .caps = NCM_CAP_PACKET_FILTER | NCM_CAP_CRC_MODE,       /* 0x11 */
        .bcd_cdc = 0x0110,
    },
    [NCM_PROFILE_MINIMAL] = {
        .ntb_in_max_size = 4096, .ntb_out_max_size = 4096,
        .out_max_datagrams = 1, .in_datagrams = 1,
        .max_segment_size = 1514, .ntb32 = false, .zlp = NCM_ZLP_AUTO,
        .power_on_filter = CDC_FILTER_DIRECTED | CDC_FILTER_BROADCAST |
                           CDC_FILTER_ALL_MULTICAST,
        .caps = 0, .bcd_cdc = 0x0110,
    },
};

/*
 * Descriptors are built per instance because properties change the ids,
 * wMaxSegmentSize and bmNetworkCapabilities.
 */
typedef struct USBNcmDescriptors {
    USBDesc desc;
    USBDescDevice device[NCM_SPEED__MAX];
    USBDescConfig config[NCM_SPEED__MAX];
    USBDescIfaceAssoc iad[NCM_SPEED__MAX];
    USBDescIface ifaces[NCM_SPEED__MAX][3];
    USBDescEndpoint notify_ep[NCM_SPEED__MAX];
    USBDescEndpoint bulk_eps[NCM_SPEED__MAX][2];
    USBDescOther functional[4];
    uint8_t header[5];
    uint8_t union_desc[5];
    uint8_t ethernet[13];
    uint8_t ncm[6];
} USBNcmDescriptors;

/*
 * What happens to USB packets, which only the glue sees (the function
 * counts what happens to NTBs, datagrams and requests); x-stats shows
 * both sets as one.
 */
typedef struct USBNcmPacketCounters {
    uint64_t in_naks;
    uint64_t in_parked;             /* IN packets held for the next NTB */
    uint64_t out_deferred_packets;  /* OUT packets read in a bottom half */
    uint64_t packets_handed_back;   /* completed empty by a reset/alt */
    uint64_t packets_adopted;       /* queued behind a cancelled packet */
    uint64_t replugs;               /* fault: dropped off the bus */
    uint64_t in_coalesced;          /* IN NTBs kept for more datagrams */
    uint64_t in_coalesce_timeouts;  /* ... until in-coalesce-us passed */
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
    bool ntb32;
    bool deferred_out;
    bool remote_wakeup;
    /*
     * USB 3 function remote wake, enabled by SET_FEATURE(FUNCTION_SUSPEND)
     * to the control interface (at super speed the host enables remote
     * wakeup this way, not with DEVICE_REMOTE_WAKEUP)
     */
    bool func_remote_wakeup;
    OnOffAuto park_packets;
    int profile;                    /* USBNcmProfileId */
    uint32_t explicit_props;        /* 1 << USBNcmProfileProp: given */
    uint8_t caps_prop;              /* network-capabilities */
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
    QEMUTimer *fault_link_timer;
    QEMUTimer *fault_busy_timer;
    /* re-enumeration fault: off the bus, back after replug_ms */
    QEMUTimer *replug_timer;
    uint32_t replug_ms;
    uint32_t replug_every_ms;
    uint32_t replug_seed;
    bool replug_down;
    VMChangeStateEntry *vmstate_change;
    /* what migration carries in another form than the function keeps */
    struct {
        bool ntb32;
        uint32_t corrupt;
        uint32_t in_bytes;
        int32_t configuration;
        int32_t altsetting[NCM_IF_COUNT];
        bool loading;               /* replaying the USB configuration */
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

static const char *const usb_ncm_strings[] = {
    [STR_MANUFACTURER] = "QEMU",
    [STR_PRODUCT] = "QEMU USB NCM Ethernet",
    [STR_SERIALNUMBER] = "1",
    [STR_MAC] = "400102030405",
    [STR_CONTROL] = "CDC Network Control Model",
    [STR_DATA] = "CDC NCM Data",
};

static const USBNcmVariant usb_ncm_variant = {
    .vendor_id = 0x46f4,        /* CRC16() of "QEMU" */
    .product_id = 0x0010,
    .manufacturer = "QEMU",
    .product = "QEMU USB NCM Ethernet",
};

static const USBNcmVariant usb_ncm_dl_variant = {
    .vendor_id = 0x17e9,        /* DisplayLink */
    .product_id = 0x6000,
    .manufacturer = "DisplayLink",
    .product = "USB-NCM-DL Giga Ethernet",
};

typedef struct USBNcmSpeed {
    uint16_t bcd_usb;
    uint8_t max_packet0;
    uint16_t bulk_packet;
    uint8_t bulk_burst;
    uint8_t notify_interval;
} USBNcmSpeed;

static const USBNcmSpeed usb_ncm_speeds[NCM_SPEED__MAX] = {
    [NCM_SPEED_FULL] = { 0x0200, 64, 64, 0, 32 },
    [NCM_SPEED_HIGH] = { 0x0200, 64, 512, 0, 9 },
    [NCM_SPEED_SUPER] = { 0x0320, 9, 1024, 15, 9 },
};

#define NCM_NOTIFY_PACKET   16

static void usb_ncm_build_descriptors(USBNcmState *s, uint8_t caps)
{
    USBNcmDescriptors *d = &s->descs;
    uint32_t stats = s->fn.cfg.eth_stats;
    uint16_t mc = s->fn.cfg.mc_filters;
    int sp;

    memcpy(d->header, (uint8_t[]) {
        5, CDC_CS_INTERFACE, CDC_DESC_HEADER,
        usb_lo(s->bcd_cdc), usb_hi(s->bcd_cdc),     /* bcdCDC */
    }, sizeof(d->header));
    memcpy(d->union_desc, (uint8_t[]) {
        5, CDC_CS_INTERFACE, CDC_DESC_UNION, NCM_IF_CONTROL, NCM_IF_DATA,
    }, sizeof(d->union_desc));
    memcpy(d->ethernet, (uint8_t[]) {
        13, CDC_CS_INTERFACE, CDC_DESC_ETHERNET, STR_MAC,
        stats, stats >> 8, stats >> 16, stats >> 24,  /* bmEthernetStatistics */
        usb_lo(s->fn.cfg.max_segment_size), usb_hi(s->fn.cfg.max_segment_size),
        usb_lo(mc), usb_hi(mc),                 /* wNumberMCFilters */
        0,                                      /* bNumberPowerFilters */
    }, sizeof(d->ethernet));
    memcpy(d->ncm, (uint8_t[]) {
        6, CDC_CS_INTERFACE, CDC_DESC_NCM, 0x00, 0x01, caps,
    }, sizeof(d->ncm));
    d->functional[0].data = d->header;
    d->functional[1].data = d->union_desc;
    d->functional[2].data = d->ethernet;
    d->functional[3].data = d->ncm;

    for (sp = 0; sp < NCM_SPEED__MAX; sp++) {
        const USBNcmSpeed *speed = &usb_ncm_speeds[sp];

        d->notify_ep[sp] = (USBDescEndpoint) {
            .bEndpointAddress = USB_DIR_IN | NCM_EP_NOTIFY,
            .bmAttributes = USB_ENDPOINT_XFER_INT,
            .wMaxPacketSize = NCM_NOTIFY_PACKET,
            .bInterval = speed->notify_interval,
            .wBytesPerInterval = NCM_NOTIFY_PACKET,
        };
        d->bulk_eps[sp][0] = (USBDescEndpoint) {
            .bEndpointAddress = USB_DIR_IN | NCM_EP_BULK_IN,
            .bmAttributes = USB_ENDPOINT_XFER_BULK,
            .wMaxPacketSize = speed->bulk_packet,
            .bMaxBurst = speed->bulk_burst,
        };
        d->bulk_eps[sp][1] = (USBDescEndpoint) {
            .bEndpointAddress = USB_DIR_OUT | NCM_EP_BULK_OUT,
            .bmAttributes = USB_ENDPOINT_XFER_BULK,
            .wMaxPacketSize = speed->bulk_packet,
            .bMaxBurst = speed->bulk_burst,
        };
        d->ifaces[sp][0] = (USBDescIface) {
            .bInterfaceNumber = NCM_IF_CONTROL,
            .bNumEndpoints = 1,
            .bInterfaceClass = CDC_CLASS_COMM,
            .bInterfaceSubClass = CDC_SUBCLASS_NCM,
            .bInterfaceProtocol = CDC_PROTO_NONE,
            .iInterface = STR_CONTROL,
            .ndesc = ARRAY_SIZE(d->functional),
            .descs = d->functional,
            .eps = &d->notify_ep[sp],
        };
        d->ifaces[sp][1] = (USBDescIface) {
            .bInterfaceNumber = NCM_IF_DATA,
            .bAlternateSetting = 0,
            .bNumEndpoints = 0,
            .bInterfaceClass = CDC_CLASS_DATA,
            .bInterfaceProtocol = CDC_PROTO_NTB,
            .iInterface = STR_DATA,
        };
        d->ifaces[sp][2] = (USBDescIface) {
            .bInterfaceNumber = NCM_IF_DATA,
            .bAlternateSetting = 1,
            .bNumEndpoints = 2,
            .bInterfaceClass = CDC_CLASS_DATA,
            .bInterfaceProtocol = CDC_PROTO_NTB,
            .iInterface = STR_DATA,
            .eps = d->bulk_eps[sp],
        };
        d->iad[sp] = (USBDescIfaceAssoc) {
            .bFirstInterface = NCM_IF_CONTROL,
            .bInterfaceCount = NCM_IF_COUNT,
            .bFunctionClass = CDC_CLASS_COMM,
            .bFunctionSubClass = CDC_SUBCLASS_NCM,
            .bFunctionProtocol = CDC_PROTO_NONE,
            .iFunction = STR_CONTROL,
            .nif = 3,
            .ifs = d->ifaces[sp],
        };
        d->config[sp] = (USBDescConfig) {
            .bNumInterfaces = NCM_IF_COUNT,
            .bConfigurationValue = 1,
            .bmAttributes = USB_CFG_ATT_ONE | USB_CFG_ATT_SELFPOWER |
                            (s->remote_wakeup ? USB_CFG_ATT_WAKEUP : 0),
            .bMaxPower = 0,
            .nif_groups = 1,
            .if_groups = &d->iad[sp],
        };
        d->device[sp] = (USBDescDevice) {
            .bcdUSB = speed->bcd_usb,
            /* composite with IAD, as the DisplayLink docks are */
            .bDeviceClass = 0xef,  /* miscellaneous */
            .bDeviceSubClass = 0x02,
            .bDeviceProtocol = 0x01,
            .bMaxPacketSize0 = speed->max_packet0,
            .bNumConfigurations = 1,
            .confs = &d->config[sp],
        };
    }
    d->device[NCM_SPEED_FULL].bcdUSB = 0x0200;

    d->desc = (USBDesc) {
        .id = {
            .idVendor = s->vendor_id,
            .idProduct = s->product_id,
            .bcdDevice = 0x0100,
            .iManufacturer = STR_MANUFACTURER,
            .iProduct = STR_PRODUCT,
            .iSerialNumber = STR_SERIALNUMBER,
        },
        .full = &d->device[NCM_SPEED_FULL],
        .high = &d->device[NCM_SPEED_HIGH],
        .super = &d->device[NCM_SPEED_SUPER],
        .str = usb_ncm_strings,
    };
}

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
 *    (usb_ncm_controller_lets_packets_wait()): not OHCI, which runs one
 *    asynchronous packet per controller and reuses its buffer for the next
 *    TD.  There bulk IN NAKs and OUT is read at once.  Behind an EHCI
 *    the answer changes with the port's owner, so it is asked again at
 *    every bus reset.
 */

static bool usb_ncm_controller_lets_packets_wait(USBNcmState *s);
static void usb_ncm_flush_rx(USBNcmState *s);
static void usb_ncm_out_drain(USBNcmState *s);
static void usb_ncm_in_coalesce_end(USBNcmState *s);
static void usb_ncm_in_coalesce_forget(USBNcmState *s);
static void usb_ncm_schedule_wakeup(USBNcmState *s, bool bulk_in,
                                    bool notify);
static void usb_ncm_vm_state_change(void *opaque, bool running,
                                    RunState state);

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

/*
 * When the host cancels the parked packet, the packets it queued behind
 * stay in ep->queue, and the core runs them only when a parked packet
 * completes: the first one becomes the parked packet.
 */
static bool usb_ncm_adopt(USBNcmState *s, USBNcmBulk *b)
{
    USBPacket *p = QTAILQ_FIRST(&b->ep->queue);

    if (b->parked || !p || p->state != USB_PACKET_QUEUED) {
        return false;
    }
    usb_packet_set_state(p, USB_PACKET_ASYNC);
    b->parked = p;
    s->packet_stats.packets_adopted++;
    trace_usb_ncm_adopt(s->fn.cfg.name, p->ep->nr, p->iov.size);
    return true;
}

/* Rule 2: give back every packet of both bulk endpoints. */
static void usb_ncm_hand_back(USBNcmState *s)
{
    if (s->handing_back) {
        return;
    }
    s->handing_back = true;
    /* the host sent its OUT data before the request: read it first */
    usb_ncm_adopt(s, &s->out);
    usb_ncm_out_drain(s);
    usb_ncm_adopt(s, &s->in);
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
    if (s->in.parked || (fresh && (s->fn.faults.busy || !s->may_park))) {
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
 * A kept NTB goes after this long at most: in interleaved A/B runs on tap
 * 200 us won 17-25 % of 1-stream TCP both ways and stayed within the
 * boots' spread with 4 streams and on slirp, where 1000 us lost 12-16 %
 * (docs/performance.md; two runs apart in time differed by only 2 %).
 */
#define NCM_IN_COALESCE_US_DEFAULT 200
/* Re-check a kept NTB this often: the host queues transfers silently. */
#define NCM_IN_COALESCE_POLL_NS (50 * SCALE_US)
/* Counting queued IN packets stops here: more says the same. */
#define NCM_IN_QUEUE_COUNT_MAX 64

static uint32_t usb_ncm_in_host_queue(USBNcmState *s)
{
    USBPacket *p;
    uint32_t n = 0;

    QTAILQ_FOREACH(p, &s->in.ep->queue, queue) {
        if (++n == NCM_IN_QUEUE_COUNT_MAX) {
            break;
        }
    }
    return n;
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

    if (usb_ncm_adopt(s, &s->in)) {
        usb_ncm_in_attach(s, s->in.parked);
    }
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

static void usb_ncm_schedule_wakeup(USBNcmState *s, bool bulk_in, bool notify)
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

    if (s->dev.attached && !s->fn.faults.busy && runstate_is_running()) {
        usb_ncm_adopt(s, &s->out);
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
    bool busy = s->fn.faults.busy && !s->handing_back;

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
    ncm_function_reset(&s->fn);
    usb_ncm_flush_rx(s);
}

/* After usb_desc_ep_init(): usb_ncm_handle_control() handed back first. */
static void usb_ncm_set_interface(USBDevice *dev, int iface,
                                  int alt_old, int alt_new)
{
    USBNcmState *s = USB_NCM_BASE(dev);

    if (iface != NCM_IF_DATA || s->mig.loading) {
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
    int ret;

    if (set_config ||
        request == (InterfaceOutRequest | USB_REQ_SET_INTERFACE)) {
        /* usb_desc_ep_init() empties every endpoint queue: rule 2 */
        usb_ncm_hand_back(s);
    }
    ret = usb_desc_handle_control(dev, p, request, value, index, length, data);
    if (ret >= 0) {
        if (set_config) {
            /* a new configuration (or none) starts with the data path off */
            ncm_function_reset(&s->fn);
            usb_ncm_flush_rx(s);
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
     * ignores this unless it is suspended.
     */
    if (s->remote_wakeup &&
        (s->dev.remote_wakeup || s->func_remote_wakeup) && !s->in.parked &&
        s->dev.port && s->dev.port->ops->wakeup) {
        s->dev.port->ops->wakeup(s->dev.port);
    }
    switch (ncm_function_rx(&s->fn, buf, size)) {
    case NCM_RX_QUEUED:
        usb_ncm_schedule_wakeup(s, true, false);
        return size;
    case NCM_RX_BUSY:
        usb_ncm_schedule_wakeup(s, true, false);
        return 0;
    case NCM_RX_DROPPED:
    default:
        return size;
    }
}

static void usb_ncm_link_status_changed(NetClientState *nc)
{
    USBNcmState *s = qemu_get_nic_opaque(nc);

    trace_usb_ncm_link(s->fn.cfg.name, !nc->link_down);
    ncm_function_set_link(&s->fn, !nc->link_down);
    usb_ncm_schedule_wakeup(s, false, true);
}

/* Statistics and fault injection, through qom-get / qom-set */

#define NCM_STAT(field) { #field, offsetof(NcmCounters, field), false }
#define NCM_PACKET_STAT(field) \
    { #field, offsetof(USBNcmPacketCounters, field), true }

static const struct {
    const char *name;
    size_t offset;
    bool packet;                    /* in USBNcmPacketCounters */
} usb_ncm_stat_fields[] = {
    NCM_STAT(out_transfers), NCM_STAT(out_direct_transfers),
    NCM_PACKET_STAT(out_deferred_packets),
    NCM_STAT(out_ntbs), NCM_STAT(out_datagrams),
    NCM_STAT(out_bytes), NCM_STAT(out_zlps), NCM_STAT(out_overflow_bytes),
    NCM_STAT(out_merged_transfers), NCM_STAT(out_merge_lost_datagrams),
    NCM_STAT(in_ntbs), NCM_STAT(in_direct_ntbs), NCM_STAT(in_datagrams),
    NCM_STAT(in_bytes),
    NCM_PACKET_STAT(in_naks), NCM_STAT(in_zlps), NCM_STAT(in_babbles),
    NCM_PACKET_STAT(in_parked),
    NCM_PACKET_STAT(in_coalesced),
    NCM_PACKET_STAT(in_coalesce_timeouts),
    NCM_STAT(in_rescued_datagrams), NCM_PACKET_STAT(packets_handed_back),
    NCM_PACKET_STAT(packets_adopted), NCM_STAT(rx_backpressure),
    NCM_STAT(rx_filtered), NCM_STAT(rx_oversize), NCM_STAT(rx_inactive_drops),
    NCM_STAT(in_flushed_datagrams), NCM_STAT(bad_requests),
    NCM_STAT(notifications), NCM_STAT(link_down_drops),
    NCM_STAT(fault_dropped_in_ntbs), NCM_STAT(fault_corrupted_in_ntbs),
    NCM_PACKET_STAT(replugs),
    NCM_STAT(input_size_requests_4), NCM_STAT(input_size_requests_8),
    NCM_STAT(crc_mode_requests), NCM_STAT(mc_filter_requests),
    NCM_STAT(mc_filter_rejects), NCM_STAT(statistic_requests),
    NCM_STAT(out_crc_datagrams), NCM_STAT(out_crc_errors),
    NCM_STAT(in_crc_ntbs),
    NCM_STAT(out_directed_frames), NCM_STAT(out_directed_bytes),
    NCM_STAT(out_multicast_frames), NCM_STAT(out_multicast_bytes),
    NCM_STAT(out_broadcast_frames), NCM_STAT(out_broadcast_bytes),
    NCM_STAT(in_directed_frames), NCM_STAT(in_directed_bytes),
    NCM_STAT(in_multicast_frames), NCM_STAT(in_multicast_bytes),
    NCM_STAT(in_broadcast_frames), NCM_STAT(in_broadcast_bytes),
};

static void usb_ncm_get_stats(Object *obj, Visitor *v, const char *name,
                              void *opaque, Error **errp)
{
    USBNcmState *s = USB_NCM_BASE(obj);
    NcmCounters *c = &s->fn.stats;
    uint64_t total = 0;
    size_t i;
    bool ok;

    if (!visit_start_struct(v, name, NULL, 0, errp)) {
        return;
    }
    ok = true;
    for (i = 0; ok && i < ARRAY_SIZE(usb_ncm_stat_fields); i++) {
        uint8_t *base = usb_ncm_stat_fields[i].packet ?
                        (uint8_t *)&s->packet_stats : (uint8_t *)c;
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

static void usb_ncm_fault_link_restore(void *opaque)
{
    USBNcmState *s = opaque;

    ncm_function_set_fault_link_down(&s->fn, false);
    usb_ncm_schedule_wakeup(s, false, true);
    usb_ncm_flush_rx(s);
}

static void usb_ncm_fault_busy_end(void *opaque)
{
    USBNcmState *s = opaque;

    ncm_function_set_fault_busy(&s->fn, false);
    if (s->dev.attached) {
        usb_ncm_wakeup_nakd(&s->out);
    }
    replay_bh_schedule_event(s->out_bh);
    usb_ncm_schedule_wakeup(s, true, false);
}

/*
 * Re-enumeration fault: the function drops off the bus, as a dock's
 * firmware reset or a failed U1/U2 exit does, and comes back replug_ms
 * later; with replug_every_ms it happens again and again, with a jitter
 * of up to a quarter of the period from a seeded generator so that a run
 * replays.
 */
static void usb_ncm_replug_schedule(USBNcmState *s, int64_t delay_ms)
{
    timer_mod(s->replug_timer,
              qemu_clock_get_ms(QEMU_CLOCK_VIRTUAL) + delay_ms);
}

static void usb_ncm_replug_detach(USBNcmState *s)
{
    if (s->dev.attached) {
        s->packet_stats.replugs++;
        trace_usb_ncm_replug(s->fn.cfg.name, 0, s->replug_ms);
        usb_device_detach(&s->dev);
        /* what the firmware knew is gone with it */
        ncm_function_reset(&s->fn);
        usb_ncm_flush_rx(s);
    }
    s->replug_down = true;
    usb_ncm_replug_schedule(s, s->replug_ms);
}

static void usb_ncm_replug_timer(void *opaque)
{
    USBNcmState *s = opaque;
    Error *err = NULL;

    if (!s->replug_down) {
        usb_ncm_replug_detach(s);
        return;
    }
    s->replug_down = false;
    if (!s->dev.attached) {
        usb_device_attach(&s->dev, &err);
        if (err) {
            /* the port went away meanwhile: nothing to come back to */
            warn_report_err(err);
            return;
        }
        trace_usb_ncm_replug(s->fn.cfg.name, 1, 0);
    }
    if (s->replug_every_ms) {
        uint32_t jitter = s->replug_every_ms / 4 + 1;

        s->replug_seed = s->replug_seed * 1103515245 + 12345;
        usb_ncm_replug_schedule(s, s->replug_every_ms - jitter / 2 +
                                (s->replug_seed >> 8) % jitter);
    }
}

static void usb_ncm_set_fault_u32(Object *obj, Visitor *v, const char *name,
                                  void *opaque, Error **errp)
{
    USBNcmState *s = USB_NCM_BASE(obj);
    int64_t now = qemu_clock_get_ms(QEMU_CLOCK_VIRTUAL);
    uint32_t value;

    if (!visit_type_uint32(v, name, &value, errp)) {
        return;
    }
    if (!s->wakeup_bh) {
        error_setg(errp, "%s can only be set on a realized device", name);
        return;
    }
    if (!strcmp(name, "x-fault-link-down-ms")) {
        ncm_function_set_fault_link_down(&s->fn, value != 0);
        usb_ncm_schedule_wakeup(s, false, true);
        if (value) {
            timer_mod(s->fault_link_timer, now + value);
        } else {
            timer_del(s->fault_link_timer);
            usb_ncm_flush_rx(s);
        }
    } else if (!strcmp(name, "x-fault-busy-ms")) {
        ncm_function_set_fault_busy(&s->fn, value != 0);
        if (value) {
            timer_mod(s->fault_busy_timer, now + value);
        } else {
            timer_del(s->fault_busy_timer);
            usb_ncm_fault_busy_end(s);
        }
    } else if (!strcmp(name, "x-fault-drop-in-every")) {
        ncm_function_set_fault_drop_in_every(&s->fn, value);
    } else if (!strcmp(name, "x-fault-corrupt-count")) {
        ncm_function_set_fault_corrupt(&s->fn, s->fn.faults.corrupt, value);
    } else if (!strcmp(name, "x-fault-replug-ms")) {
        if (value) {
            s->replug_ms = value;
            usb_ncm_replug_detach(s);
        } else if (s->replug_down) {
            /* back at once */
            usb_ncm_replug_schedule(s, 0);
        }
    } else if (!strcmp(name, "x-fault-replug-every-ms")) {
        s->replug_every_ms = value;
        if (!value) {
            if (!s->replug_down) {
                timer_del(s->replug_timer);
            }
        } else if (!s->replug_down) {
            usb_ncm_replug_schedule(s, value);
        }
    } else if (!strcmp(name, "x-fault-replug-seed")) {
        s->replug_seed = value;
    }
    trace_usb_ncm_fault(s->fn.cfg.name, name, value);
}

static void usb_ncm_get_fault_u32(Object *obj, Visitor *v, const char *name,
                                  void *opaque, Error **errp)
{
    USBNcmState *s = USB_NCM_BASE(obj);
    uint32_t value = 0;

    if (!strcmp(name, "x-fault-link-down-ms")) {
        value = s->fn.faults.link_down;
    } else if (!strcmp(name, "x-fault-busy-ms")) {
        value = s->fn.faults.busy;
    } else if (!strcmp(name, "x-fault-drop-in-every")) {
        value = s->fn.faults.drop_in_every;
    } else if (!strcmp(name, "x-fault-corrupt-count")) {
        value = s->fn.faults.corrupt_remaining;
    } else if (!strcmp(name, "x-fault-replug-ms")) {
        value = s->replug_down;
    } else if (!strcmp(name, "x-fault-replug-every-ms")) {
        value = s->replug_every_ms;
    } else if (!strcmp(name, "x-fault-replug-seed")) {
        value = s->replug_seed;
    }
    visit_type_uint32(v, name, &value, errp);
}

static char *usb_ncm_get_fault_corrupt(Object *obj, Error **errp)
{
    USBNcmState *s = USB_NCM_BASE(obj);

    return g_strdup(ncm_in_corruption_names[s->fn.faults.corrupt]);
}

static void usb_ncm_set_fault_corrupt(Object *obj, const char *value,
                                      Error **errp)
{
    USBNcmState *s = USB_NCM_BASE(obj);
    int i;

    for (i = 0; i < NCM_CORRUPT__MAX; i++) {
        if (!strcmp(value, ncm_in_corruption_names[i])) {
            ncm_function_set_fault_corrupt(
                &s->fn, i, MAX(s->fn.faults.corrupt_remaining, 1));
            return;
        }
    }
    error_setg(errp, "x-fault-corrupt-in: unknown corruption '%s'; use none, "
               "ndp-at-end, datagram-offset-wrap, ndp-chain-loop, "
               "block-length-over-input-size or short-notification", value);
}

static NetClientInfo usb_ncm_net_info = {
    .type = NET_CLIENT_DRIVER_NIC,
    .size = sizeof(NICState),
    .can_receive = usb_ncm_can_receive,
    .receive = usb_ncm_receive,
    .link_status_changed = usb_ncm_link_status_changed,
};

/* Realize */

static bool usb_ncm_is_pow2_in(uint32_t v, uint32_t lo, uint32_t hi)
{
    return v >= lo && v <= hi && !(v & (v - 1));
}

#define NCM_IN_COALESCE_US_MAX 100000

static bool usb_ncm_check_properties(USBNcmState *s, Error **errp)
{
    uint32_t smallest_ntb = MIN(s->fn.cfg.ntb_in_max_size,
                                s->fn.cfg.ntb_out_max_size);

    if (s->in_coalesce.max_us > NCM_IN_COALESCE_US_MAX) {
        error_setg(errp, "in-coalesce-us %u is above %u (100 ms): an NTB "
                   "kept that long stalls TCP", s->in_coalesce.max_us,
                   NCM_IN_COALESCE_US_MAX);
        return false;
    }

    if (s->fn.cfg.ntb_in_max_size < NCM_NTB_MIN_SIZE ||
        s->fn.cfg.ntb_in_max_size > NCM_NTB16_MAX_SIZE) {
        error_setg(errp, "ntb-in-max-size %u is outside %u..%u (NCM 1.0 "
                   "minimum, NTB16 maximum)", s->fn.cfg.ntb_in_max_size,
                   NCM_NTB_MIN_SIZE, NCM_NTB16_MAX_SIZE);
        return false;
    }
    if (s->fn.cfg.ntb_out_max_size < NCM_NTB_MIN_SIZE ||
        s->fn.cfg.ntb_out_max_size > NCM_NTB16_MAX_SIZE) {
        error_setg(errp, "ntb-out-max-size %u is outside %u..%u (NCM 1.0 "
                   "minimum, NTB16 maximum)", s->fn.cfg.ntb_out_max_size,
                   NCM_NTB_MIN_SIZE, NCM_NTB16_MAX_SIZE);
        return false;
    }
    if (!usb_ncm_is_pow2_in(s->fn.cfg.in_divisor, 4, 4096) ||
        !usb_ncm_is_pow2_in(s->fn.cfg.out_divisor, 4, 4096)) {
        error_setg(errp, "ntb-in-divisor and ntb-out-divisor must be powers "
                   "of two in 4..4096 (got %u and %u)",
                   s->fn.cfg.in_divisor, s->fn.cfg.out_divisor);
        return false;
    }
    if (s->fn.cfg.in_remainder >= s->fn.cfg.in_divisor ||
        s->fn.cfg.out_remainder >= s->fn.cfg.out_divisor) {
        error_setg(errp, "ntb-in-remainder and ntb-out-remainder must be "
                   "smaller than their divisors (got %u and %u)",
                   s->fn.cfg.in_remainder, s->fn.cfg.out_remainder);
        return false;
    }
    if (!usb_ncm_is_pow2_in(s->fn.cfg.in_alignment, 4, 4096) ||
        !usb_ncm_is_pow2_in(s->fn.cfg.out_alignment, 4, 4096)) {
        error_setg(errp, "ntb-in-alignment and ntb-out-alignment must be "
                   "powers of two in 4..4096 (got %u and %u)",
                   s->fn.cfg.in_alignment, s->fn.cfg.out_alignment);
        return false;
    }
    if (s->fn.cfg.out_max_datagrams > NCM_MAX_DATAGRAMS) {
        error_setg(errp, "ntb-out-max-datagrams must be in 0..%u, 0 for no "
                   "limit (got %u)", NCM_MAX_DATAGRAMS,
                   s->fn.cfg.out_max_datagrams);
        return false;
    }
    if (s->fn.cfg.in_max_datagrams > NCM_MAX_DATAGRAMS) {
        error_setg(errp, "in-datagrams-per-ntb must be in 0..%u, 0 for no "
                   "limit (got %u)", NCM_MAX_DATAGRAMS,
                   s->fn.cfg.in_max_datagrams);
        return false;
    }
    if (s->caps_prop & ~(NCM_CAPS_BASE | NCM_CAP_CRC_MODE |
                         NCM_CAP_NTB_INPUT_SIZE_8)) {
        error_setg(errp, "network-capabilities 0x%02x: the model offers "
                   "bits 0, 1, 3, 4 and 5 only (0x3b; bit 2, encapsulated "
                   "commands, is not implemented, bits 6-7 are reserved)",
                   s->caps_prop);
        return false;
    }
    if ((s->fn.cfg.mc_filters & CDC_MC_FILTERS_COUNT_MASK) >
        NCM_MAX_MC_FILTERS) {
        error_setg(errp, "multicast-filters 0x%04x: at most %u filters "
                   "(bit 15 selects imperfect filtering)",
                   s->fn.cfg.mc_filters, NCM_MAX_MC_FILTERS);
        return false;
    }
    if (s->fn.cfg.eth_stats & ~NCM_ETH_STATS_SUPPORTED) {
        error_setg(errp, "ethernet-statistics 0x%08x: the model counts "
                   "feature selectors 1..17 only (mask 0x%08x)",
                   s->fn.cfg.eth_stats, NCM_ETH_STATS_SUPPORTED);
        return false;
    }
    if (s->bcd_cdc != 0x0110 && s->bcd_cdc != 0x0120) {
        error_setg(errp, "bcd-cdc 0x%04x: use 0x0110 or 0x0120 (CDC 1.10, "
                   "1.20)", s->bcd_cdc);
        return false;
    }
    if (s->fn.cfg.power_on_filter & ~0x1f) {
        error_setg(errp, "power-on-filter 0x%x has bits beyond the five "
                   "CDC packet filter bits (0x1f)", s->fn.cfg.power_on_filter);
        return false;
    }
    if (s->fn.cfg.max_segment_size < 1514 ||
        s->fn.cfg.max_segment_size + 64 > smallest_ntb) {
        error_setg(errp, "max-segment-size %u must be at least 1514 and fit "
                   "an NTB of %u bytes with its headers",
                   s->fn.cfg.max_segment_size, smallest_ntb);
        return false;
    }
    return true;
}

/*
 * Rule 3 of "Who holds which USB packet".  QEMU's OHCI keeps one
 * asynchronous packet for the whole controller: a parked bulk IN would
 * stop every other endpoint, and the next OUT TD overwrites the buffer the
 * parked packet points at.
 */
static bool usb_ncm_controller_lets_packets_wait(USBNcmState *s)
{
    BusState *bus = s->dev.qdev.parent_bus;
    Object *hc = bus && bus->parent ? OBJECT(bus->parent) : NULL;

    if (s->park_packets != ON_OFF_AUTO_AUTO) {
        return s->park_packets == ON_OFF_AUTO_ON;
    }
    if (!hc) {
        return true;
    }
    if (object_dynamic_cast(hc, "pci-ohci") ||
        object_dynamic_cast(hc, "sysbus-ohci")) {
        return false;
    }
    /*
     * An EHCI hands a device below high speed to its companion, a UHCI or
     * an OHCI (which one, the device cannot tell), and the port can move
     * at run time: at those speeds, behave as for an OHCI.
     */
    if ((object_dynamic_cast(hc, "pci-ehci-usb") ||
         object_dynamic_cast(hc, "sysbus-ehci-usb")) &&
        s->dev.attached && s->dev.speed < USB_SPEED_HIGH) {
        return false;
    }
    return true;
}

/* The profile's values for every property that was not given */
static void usb_ncm_apply_profile(USBNcmState *s)
{
    const USBNcmProfile *p = &usb_ncm_profiles[s->profile];
    NcmConfig *c = &s->fn.cfg;

#define NCM_PROFILE_SET(which, field, value) do {                 \
        if (!(s->explicit_props & (1u << (which)))) {            \
            field = (value);                                      \
        }                                                         \
    } while (0)

    NCM_PROFILE_SET(NCM_PP_NTB_IN_MAX, c->ntb_in_max_size, p->ntb_in_max_size);
    NCM_PROFILE_SET(NCM_PP_NTB_OUT_MAX, c->ntb_out_max_size,
                    p->ntb_out_max_size);
    NCM_PROFILE_SET(NCM_PP_OUT_MAX_DATAGRAMS, c->out_max_datagrams,
                    p->out_max_datagrams);
    NCM_PROFILE_SET(NCM_PP_IN_DATAGRAMS, c->in_max_datagrams,
                    p->in_datagrams);
    NCM_PROFILE_SET(NCM_PP_MAX_SEGMENT, c->max_segment_size,
                    p->max_segment_size);
    NCM_PROFILE_SET(NCM_PP_NTB32, s->ntb32, p->ntb32);
    NCM_PROFILE_SET(NCM_PP_ZLP, c->zlp, p->zlp);
    NCM_PROFILE_SET(NCM_PP_POWER_ON_FILTER, c->power_on_filter,
                    p->power_on_filter);
    NCM_PROFILE_SET(NCM_PP_CAPS, s->caps_prop, p->caps);
    NCM_PROFILE_SET(NCM_PP_MC_FILTERS, c->mc_filters, p->mc_filters);
    NCM_PROFILE_SET(NCM_PP_ETH_STATS, c->eth_stats, p->eth_stats);
    NCM_PROFILE_SET(NCM_PP_BCD_CDC, s->bcd_cdc, p->bcd_cdc);
#undef NCM_PROFILE_SET
}

static void usb_ncm_realize(USBDevice *dev, Error **errp)
{
    USBNcmState *s = USB_NCM_BASE(dev);
    const USBNcmVariant *variant = USB_NCM_BASE_GET_CLASS(s)->variant;
    const USBNcmProfile *profile;
    uint8_t caps;
    uint8_t *mac;

    if (s->profile < 0 || s->profile >= NCM_PROFILE__MAX) {
        error_setg(errp, "unknown profile %d", s->profile);
        return;
    }
    profile = &usb_ncm_profiles[s->profile];
    usb_ncm_apply_profile(s);
    if (!usb_ncm_check_properties(s, errp)) {
        return;
    }
    caps = s->caps_prop;
    if (!s->vendor_id) {
        s->vendor_id = profile->vendor_id ?: variant->vendor_id;
    }
    if (!s->product_id) {
        s->product_id = profile->product_id ?: variant->product_id;
    }

    qemu_macaddr_default_if_unset(&s->conf.macaddr);
    mac = s->conf.macaddr.a;

    usb_ncm_build_descriptors(s, caps);
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

    s->fn.cfg.network_caps = caps;
    s->fn.cfg.ntb_formats = NCM_NTB_FORMAT_16 |
                         (s->ntb32 ? NCM_NTB_FORMAT_32 : 0);
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
    s->fault_link_timer = timer_new_ms(QEMU_CLOCK_VIRTUAL,
                                       usb_ncm_fault_link_restore, s);
    s->in_coalesce.timer = timer_new_ns(QEMU_CLOCK_VIRTUAL,
                                        usb_ncm_in_coalesce_timer, s);
    s->fault_busy_timer = timer_new_ms(QEMU_CLOCK_VIRTUAL,
                                       usb_ncm_fault_busy_end, s);
    s->replug_timer = timer_new_ms(QEMU_CLOCK_VIRTUAL, usb_ncm_replug_timer,
                                   s);
    s->replug_ms = 200;
    s->replug_seed = 1;
    s->vmstate_change = qemu_add_vm_change_state_handler(
        usb_ncm_vm_state_change, s);

    s->nic = qemu_new_nic(&usb_ncm_net_info, &s->conf,
                          object_get_typename(OBJECT(s)), DEVICE(dev)->id,
                          &DEVICE(dev)->mem_reentrancy_guard, s);
    qemu_format_nic_info_str(qemu_get_queue(s->nic), mac);
    ncm_function_set_link(&s->fn, !qemu_get_queue(s->nic)->link_down);
}

static void usb_ncm_unrealize(USBDevice *dev)
{
    USBNcmState *s = USB_NCM_BASE(dev);

    qemu_bh_delete(s->wakeup_bh);
    s->wakeup_bh = NULL;
    qemu_bh_delete(s->out_bh);
    s->out_bh = NULL;
    qemu_del_vm_change_state_handler(s->vmstate_change);
    timer_free(s->fault_link_timer);
    timer_free(s->fault_busy_timer);
    timer_free(s->in_coalesce.timer);
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

    static const char *const fault_u32[] = {
        "x-fault-link-down-ms", "x-fault-busy-ms", "x-fault-drop-in-every",
        "x-fault-corrupt-count", "x-fault-replug-ms",
        "x-fault-replug-every-ms", "x-fault-replug-seed",
    };
    size_t i;

    device_add_bootindex_property(obj, &s->conf.bootindex, "bootindex",
                                  "/ethernet-phy@0", DEVICE(obj));
    object_property_add(obj, "x-stats", "UsbNcmStats", usb_ncm_get_stats,
                        NULL, NULL, NULL);
    for (i = 0; i < ARRAY_SIZE(fault_u32); i++) {
        object_property_add(obj, fault_u32[i], "uint32",
                            usb_ncm_get_fault_u32, usb_ncm_set_fault_u32,
                            NULL, NULL);
    }
    object_property_add_str(obj, "x-fault-corrupt-in",
                            usb_ncm_get_fault_corrupt,
                            usb_ncm_set_fault_corrupt);
    /*
     * Property defaults were set before instance_init; what is set from
     * now on (-global, -device options, qom) was given explicitly.
     */
    s->explicit_props = 0;
}

/* Migration */

/*
 * The two byte buffers go as a length and the bytes; the length is
 * checked against the buffer before anything is written into it, since a
 * migration stream is untrusted input.
 */
static int usb_ncm_put_out_buf(QEMUFile *f, void *pv, size_t size,
                               const VMStateField *field, JSONWriter *vmdesc)
{
    USBNcmState *s = pv;

    qemu_put_be32(f, s->fn.out_len);
    qemu_put_buffer(f, s->fn.out_buf, s->fn.out_len);
    return 0;
}

static int usb_ncm_get_out_buf(QEMUFile *f, void *pv, size_t size,
                               const VMStateField *field)
{
    USBNcmState *s = pv;
    uint32_t len = qemu_get_be32(f);

    if (len > s->fn.out_buf_size) {
        error_report("usb-ncm: migrated OUT transfer of %u bytes does not "
                     "fit this device's %u-byte buffer", len,
                     s->fn.out_buf_size);
        return -EINVAL;
    }
    qemu_get_buffer(f, s->fn.out_buf, len);
    s->fn.out_len = len;
    return 0;
}

static int usb_ncm_put_in_buf(QEMUFile *f, void *pv, size_t size,
                              const VMStateField *field, JSONWriter *vmdesc)
{
    USBNcmState *s = pv;
    uint32_t len = ncm_function_in_bytes(&s->fn);

    qemu_put_be32(f, len);
    qemu_put_buffer(f, s->fn.in_buf, len);
    return 0;
}

static int usb_ncm_get_in_buf(QEMUFile *f, void *pv, size_t size,
                              const VMStateField *field)
{
    USBNcmState *s = pv;
    uint32_t len = qemu_get_be32(f);

    if (len > s->fn.cfg.ntb_in_max_size) {
        error_report("usb-ncm: migrated IN NTB of %u bytes does not fit "
                     "this device's %u-byte buffer (ntb-in-max-size)", len,
                     s->fn.cfg.ntb_in_max_size);
        return -EINVAL;
    }
    qemu_get_buffer(f, s->fn.in_buf, len);
    s->mig.in_bytes = len;
    return 0;
}

static const VMStateInfo vmstate_info_usb_ncm_out_buf = {
    .name = "usb-ncm-out-buffer",
    .get = usb_ncm_get_out_buf,
    .put = usb_ncm_put_out_buf,
};

static const VMStateInfo vmstate_info_usb_ncm_in_buf = {
    .name = "usb-ncm-in-buffer",
    .get = usb_ncm_get_in_buf,
    .put = usb_ncm_put_in_buf,
};

#define VMSTATE_USB_NCM_BUFFER(_name, _info) {                            \
    .name = (_name),                                                      \
    .info = &(_info),                                                     \
    .flags = VMS_SINGLE,                                                  \
    .offset = 0,                                                          \
}

static int usb_ncm_pre_save(void *opaque)
{
    USBNcmState *s = opaque;
    int i;

    /* the host re-sends its parked transfers to the destination */
    ncm_function_pre_save(&s->fn);
    s->mig.ntb32 = s->fn.format == &ncm_ntb32_format;
    s->mig.corrupt = s->fn.faults.corrupt;
    /* off the bus (a replug fault), it comes back unconfigured */
    s->mig.configuration = s->dev.attached ? s->dev.configuration : 0;
    for (i = 0; i < NCM_IF_COUNT; i++) {
        s->mig.altsetting[i] = s->dev.attached ? s->dev.altsetting[i] : 0;
    }
    return 0;
}

/*
 * The USB core does not migrate the configuration and alternate settings
 * (they decide the endpoints' types and packet sizes): replay them.
 */
static int usb_ncm_load_usb_config(USBNcmState *s)
{
    USBPacket p = { 0 };
    int i, ret = 0;

    if (s->mig.configuration != 0 && s->mig.configuration != 1) {
        return -1;
    }
    s->mig.loading = true;
    ret = usb_desc_handle_control(&s->dev, &p,
                                  DeviceOutRequest | USB_REQ_SET_CONFIGURATION,
                                  s->mig.configuration, 0, 0, NULL);
    for (i = 0; ret >= 0 && s->mig.configuration && i < NCM_IF_COUNT; i++) {
        if (s->mig.altsetting[i] < 0 || s->mig.altsetting[i] > 1) {
            ret = -1;
            break;
        }
        ret = usb_desc_handle_control(&s->dev, &p,
                                      InterfaceOutRequest |
                                      USB_REQ_SET_INTERFACE,
                                      s->mig.altsetting[i], i, 0, NULL);
    }
    s->mig.loading = false;
    return ret < 0 ? -1 : 0;
}

/*
 * An active fault ends when its timer fires: a stream that has one
 * without the other, or a timer beyond the longest x-fault-*-ms, would
 * leave the device NAKing (busy) or unplugged (link down) for good.
 */
static const char *usb_ncm_check_fault_timer(bool active, QEMUTimer *timer,
                                             const char *why)
{
    int64_t now = qemu_clock_get_ms(QEMU_CLOCK_VIRTUAL);

    if (!active) {
        return NULL;
    }
    if (!timer_pending(timer) ||
        timer_expire_time_ns(timer) / SCALE_MS > now + UINT32_MAX) {
        return why;
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
    return usb_ncm_check_fault_timer(s->fn.faults.busy, s->fault_busy_timer,
               "fn.faults.busy is set without a valid fault_busy_timer") ?:
           usb_ncm_check_fault_timer(s->fn.faults.link_down,
                                     s->fault_link_timer,
               "fn.faults.link_down is set without a valid "
               "fault_link_timer");
}

static int usb_ncm_post_load(void *opaque, int version_id)
{
    USBNcmState *s = opaque;
    const char *why;

    usb_ncm_in_coalesce_forget(s);      /* the destination's host */
    why = usb_ncm_check_migrated_usb(s);
    if (why) {
        error_report("usb-ncm: refusing the migrated state: %s", why);
        return -EINVAL;
    }
    s->fn.faults.corrupt = s->mig.corrupt < NCM_CORRUPT__MAX ?
                           s->mig.corrupt : NCM_CORRUPT__MAX;
    why = ncm_function_post_load(&s->fn, s->mig.ntb32, s->mig.in_bytes);
    if (!why && usb_ncm_load_usb_config(s) < 0) {
        why = "configuration or alternate setting out of range";
    }
    if (!why && s->fn.data_active !=
        (s->dev.configuration == 1 && s->dev.altsetting[NCM_IF_DATA] == 1)) {
        why = "data interface state disagrees with its alternate setting";
    }
    if (why) {
        error_report("usb-ncm: refusing the migrated state: %s", why);
        return -EINVAL;
    }
    ncm_function_set_link(&s->fn, !qemu_get_queue(s->nic)->link_down);
    s->may_park = usb_ncm_controller_lets_packets_wait(s);
    if (!s->dev.attached) {
        /*
         * The source had the function off the bus (a replug fault, whose
         * timer does not migrate): come back as it would have, or the
         * port stays empty for good.
         */
        s->replug_down = true;
        usb_ncm_replug_schedule(s, s->replug_ms);
    }
    /* whatever the controller waits for, wake it once */
    s->in.nakd = s->out.nakd = s->notify_nakd = true;
    usb_ncm_schedule_wakeup(s, true, true);
    replay_bh_schedule_event(s->out_bh);
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

static const VMStateDescription vmstate_usb_ncm_datagram = {
    .name = "usb-ncm/datagram",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT32(offset, NcmDatagram),
        VMSTATE_UINT32(len, NcmDatagram),
        VMSTATE_END_OF_LIST()
    },
};

#define VMSTATE_NCM_STAT(_f) VMSTATE_UINT64(fn.stats._f, USBNcmState)
#define VMSTATE_NCM_PACKET_STAT(_f) \
    VMSTATE_UINT64(packet_stats._f, USBNcmState)

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

/* NCM 1.0 state beyond the base requests: only when in use */
static bool usb_ncm_ext_needed(void *opaque)
{
    USBNcmState *s = opaque;

    return s->fn.crc_mode || s->fn.mc_count;
}

static const VMStateDescription vmstate_usb_ncm_ext = {
    .name = "usb-ncm/ncm-ext",
    .version_id = 1,
    .minimum_version_id = 1,
    .needed = usb_ncm_ext_needed,
    .fields = (const VMStateField[]) {
        VMSTATE_BOOL(fn.crc_mode, USBNcmState),
        VMSTATE_UINT16(fn.mc_count, USBNcmState),
        VMSTATE_UINT8_2DARRAY(fn.mc_addrs, USBNcmState, NCM_MAX_MC_FILTERS,
                              CDC_MC_ADDRESS_LEN),
        VMSTATE_END_OF_LIST()
    },
};

/*
 * The counters of the NCM 1.0 requests, CRC mode and the per-destination
 * statistics GET_ETHERNET_STATISTIC reports.  Always sent (the statistics
 * count from the first frame); a subsection, so that a QEMU that does not
 * know them refuses the stream instead of misreading it.
 */
static bool usb_ncm_ext_counters_needed(void *opaque)
{
    return true;
}

static bool usb_ncm_coalesce_counters_needed(void *opaque)
{
    USBNcmState *s = opaque;

    return s->packet_stats.in_coalesced || s->packet_stats.in_coalesce_timeouts;
}

/* Counts only: what a kept NTB holds migrates as any NTB (pre_save). */
static const VMStateDescription vmstate_usb_ncm_coalesce_counters = {
    .name = "usb-ncm/coalesce-counters",
    .version_id = 1,
    .minimum_version_id = 1,
    .needed = usb_ncm_coalesce_counters_needed,
    .fields = (const VMStateField[]) {
        VMSTATE_NCM_PACKET_STAT(in_coalesced),
        VMSTATE_NCM_PACKET_STAT(in_coalesce_timeouts),
        VMSTATE_END_OF_LIST()
    },
};

static const VMStateDescription vmstate_usb_ncm_ext_counters = {
    .name = "usb-ncm/ext-counters",
    .version_id = 1,
    .minimum_version_id = 1,
    .needed = usb_ncm_ext_counters_needed,
    .fields = (const VMStateField[]) {
        VMSTATE_NCM_STAT(input_size_requests_4),
        VMSTATE_NCM_STAT(input_size_requests_8),
        VMSTATE_NCM_STAT(crc_mode_requests),
        VMSTATE_NCM_STAT(mc_filter_requests),
        VMSTATE_NCM_STAT(mc_filter_rejects),
        VMSTATE_NCM_STAT(statistic_requests),
        VMSTATE_NCM_STAT(out_crc_datagrams),
        VMSTATE_NCM_STAT(out_crc_errors),
        VMSTATE_NCM_STAT(in_crc_ntbs),
        VMSTATE_NCM_STAT(out_directed_frames),
        VMSTATE_NCM_STAT(out_directed_bytes),
        VMSTATE_NCM_STAT(out_multicast_frames),
        VMSTATE_NCM_STAT(out_multicast_bytes),
        VMSTATE_NCM_STAT(out_broadcast_frames),
        VMSTATE_NCM_STAT(out_broadcast_bytes),
        VMSTATE_NCM_STAT(in_directed_frames),
        VMSTATE_NCM_STAT(in_directed_bytes),
        VMSTATE_NCM_STAT(in_multicast_frames),
        VMSTATE_NCM_STAT(in_multicast_bytes),
        VMSTATE_NCM_STAT(in_broadcast_frames),
        VMSTATE_NCM_STAT(in_broadcast_bytes),
        VMSTATE_END_OF_LIST()
    },
};

static const VMStateDescription vmstate_usb_ncm = {
    .name = "usb-ncm",
    .version_id = 1,
    .minimum_version_id = 1,
    .pre_save = usb_ncm_pre_save,
    .post_load = usb_ncm_post_load,
    .fields = (const VMStateField[]) {
        VMSTATE_USB_DEVICE(dev, USBNcmState),
        VMSTATE_INT32(mig.configuration, USBNcmState),
        VMSTATE_INT32_ARRAY(mig.altsetting, USBNcmState, NCM_IF_COUNT),
        /* negotiated */
        VMSTATE_BOOL(mig.ntb32, USBNcmState),
        VMSTATE_UINT32(fn.ntb_in_size, USBNcmState),
        VMSTATE_UINT16(fn.ntb_in_max_datagrams, USBNcmState),
        VMSTATE_UINT16(fn.max_datagram_size, USBNcmState),
        VMSTATE_UINT16(fn.packet_filter, USBNcmState),
        VMSTATE_UINT8_ARRAY(fn.net_address, USBNcmState, 6),
        VMSTATE_BOOL(fn.data_active, USBNcmState),
        VMSTATE_BOOL(fn.link_up, USBNcmState),
        /* OUT */
        VMSTATE_BOOL(fn.out_discarding, USBNcmState),
        /* IN */
        VMSTATE_UINT32(fn.in_builder.len, USBNcmState),
        VMSTATE_UINT32(fn.in_builder.n_datagrams, USBNcmState),
        VMSTATE_UINT32(fn.in_builder.ndp_offset, USBNcmState),
        VMSTATE_STRUCT_ARRAY(fn.in_builder.datagrams, USBNcmState,
                             NCM_MAX_DATAGRAMS, 1, vmstate_usb_ncm_datagram,
                             NcmDatagram),
        VMSTATE_UINT32(fn.in_ntb_len, USBNcmState),
        VMSTATE_UINT32(fn.in_send_off, USBNcmState),
        VMSTATE_UINT16(fn.in_sequence, USBNcmState),
        VMSTATE_BOOL(fn.in_zlp_owed, USBNcmState),
        /* interrupt endpoint */
        VMSTATE_UINT8(fn.notify_pending, USBNcmState),
        VMSTATE_UINT8_ARRAY(fn.notify_buf, USBNcmState,
                            CDC_NOTIFY_SPEED_CHANGE_LEN),
        VMSTATE_UINT8(fn.notify_len, USBNcmState),
        VMSTATE_UINT8(fn.notify_off, USBNcmState),
        /* faults */
        VMSTATE_UINT32(fn.faults.drop_in_every, USBNcmState),
        VMSTATE_UINT32(fn.faults.in_ntb_counter, USBNcmState),
        VMSTATE_UINT32(mig.corrupt, USBNcmState),
        VMSTATE_UINT32(fn.faults.corrupt_remaining, USBNcmState),
        VMSTATE_BOOL(fn.faults.link_down, USBNcmState),
        VMSTATE_BOOL(fn.faults.busy, USBNcmState),
        VMSTATE_TIMER_PTR(fault_link_timer, USBNcmState),
        VMSTATE_TIMER_PTR(fault_busy_timer, USBNcmState),
        /* counters */
        VMSTATE_NCM_STAT(out_transfers),
        VMSTATE_NCM_STAT(out_direct_transfers),
        VMSTATE_NCM_PACKET_STAT(out_deferred_packets),
        VMSTATE_NCM_STAT(out_ntbs),
        VMSTATE_NCM_STAT(out_datagrams),
        VMSTATE_NCM_STAT(out_bytes),
        VMSTATE_NCM_STAT(out_zlps),
        VMSTATE_UINT64_ARRAY(fn.stats.out_parse_errors, USBNcmState,
                             NCM_PARSE_ERROR__MAX),
        VMSTATE_NCM_STAT(out_overflow_bytes),
        VMSTATE_NCM_STAT(out_merged_transfers),
        VMSTATE_NCM_STAT(out_merge_lost_datagrams),
        VMSTATE_NCM_STAT(in_ntbs),
        VMSTATE_NCM_STAT(in_direct_ntbs),
        VMSTATE_NCM_STAT(in_datagrams),
        VMSTATE_NCM_STAT(in_bytes),
        VMSTATE_NCM_PACKET_STAT(in_naks),
        VMSTATE_NCM_STAT(in_zlps),
        VMSTATE_NCM_STAT(in_babbles),
        VMSTATE_NCM_PACKET_STAT(in_parked),
        VMSTATE_NCM_STAT(in_rescued_datagrams),
        VMSTATE_NCM_PACKET_STAT(packets_handed_back),
        VMSTATE_NCM_PACKET_STAT(packets_adopted),
        VMSTATE_NCM_STAT(rx_backpressure),
        VMSTATE_NCM_STAT(rx_filtered),
        VMSTATE_NCM_STAT(rx_oversize),
        VMSTATE_NCM_STAT(rx_inactive_drops),
        VMSTATE_NCM_STAT(in_flushed_datagrams),
        VMSTATE_NCM_STAT(bad_requests),
        VMSTATE_NCM_STAT(notifications),
        VMSTATE_NCM_STAT(link_down_drops),
        VMSTATE_NCM_STAT(fault_dropped_in_ntbs),
        VMSTATE_NCM_STAT(fault_corrupted_in_ntbs),
        VMSTATE_NCM_PACKET_STAT(replugs),
        /* the bytes, last: their lengths are checked as they come */
        VMSTATE_USB_NCM_BUFFER("out_buf", vmstate_info_usb_ncm_out_buf),
        VMSTATE_USB_NCM_BUFFER("in_buf", vmstate_info_usb_ncm_in_buf),
        VMSTATE_END_OF_LIST()
    },
    .subsections = (const VMStateDescription * const []) {
        &vmstate_usb_ncm_func_remote_wakeup,
        &vmstate_usb_ncm_ext,
        &vmstate_usb_ncm_ext_counters,
        &vmstate_usb_ncm_coalesce_counters,
        NULL
    },
};

/* zlp: how the firmware finds the end of an OUT transfer */
static const char *const usb_ncm_zlp_names[] = {
    [NCM_ZLP_AUTO] = "auto",
    [NCM_ZLP_REQUIRED] = "required",
};

static const QEnumLookup usb_ncm_zlp_lookup = {
    .array = usb_ncm_zlp_names,
    .size = ARRAY_SIZE(usb_ncm_zlp_names),
};

static const PropertyInfo usb_ncm_prop_zlp = {
    .type = "UsbNcmZlp",
    .description = "auto/required",
    .enum_table = &usb_ncm_zlp_lookup,
    .get = qdev_propinfo_get_enum,
    .set = qdev_propinfo_set_enum,
    .set_default_value = qdev_propinfo_set_default_value_enum,
};

/*
 * The properties a profile sets are of these types: the standard ones,
 * whose setter also notes that the property was given (see
 * usb_ncm_instance_init()).  Filled in by usb_ncm_base_class_init().
 */
static PropertyInfo usb_ncm_prop_given_u8;
static PropertyInfo usb_ncm_prop_given_u16;
static PropertyInfo usb_ncm_prop_given_u32;
static PropertyInfo usb_ncm_prop_given_bool;
static PropertyInfo usb_ncm_prop_given_zlp;

static void usb_ncm_note_given(Object *obj, const char *name)
{
    USBNcmState *s = USB_NCM_BASE(obj);
    int i;

    for (i = 0; i < NCM_PP__MAX; i++) {
        if (!strcmp(name, usb_ncm_profile_props[i])) {
            s->explicit_props |= 1u << i;
        }
    }
}

#define USB_NCM_GIVEN_SETTER(fn_name, base_set)                            \
static void fn_name(Object *obj, Visitor *v, const char *name,             \
                    void *opaque, Error **errp)                            \
{                                                                          \
    Error *err = NULL;                                                     \
                                                                           \
    (base_set)(obj, v, name, opaque, &err);                                \
    if (err) {                                                             \
        error_propagate(errp, err);                                        \
        return;                                                            \
    }                                                                      \
    usb_ncm_note_given(obj, name);                                         \
}

USB_NCM_GIVEN_SETTER(usb_ncm_set_given_u8, qdev_prop_uint8.set)
USB_NCM_GIVEN_SETTER(usb_ncm_set_given_u16, qdev_prop_uint16.set)
USB_NCM_GIVEN_SETTER(usb_ncm_set_given_u32, qdev_prop_uint32.set)
USB_NCM_GIVEN_SETTER(usb_ncm_set_given_bool, qdev_prop_bool.set)
USB_NCM_GIVEN_SETTER(usb_ncm_set_given_zlp, qdev_propinfo_set_enum)

static void usb_ncm_init_given_infos(void)
{
    usb_ncm_prop_given_u8 = qdev_prop_uint8;
    usb_ncm_prop_given_u8.set = usb_ncm_set_given_u8;
    usb_ncm_prop_given_u16 = qdev_prop_uint16;
    usb_ncm_prop_given_u16.set = usb_ncm_set_given_u16;
    usb_ncm_prop_given_u32 = qdev_prop_uint32;
    usb_ncm_prop_given_u32.set = usb_ncm_set_given_u32;
    usb_ncm_prop_given_bool = qdev_prop_bool;
    usb_ncm_prop_given_bool.set = usb_ncm_set_given_bool;
    usb_ncm_prop_given_zlp = usb_ncm_prop_zlp;
    usb_ncm_prop_given_zlp.set = usb_ncm_set_given_zlp;
}

#define DEFINE_PROP_GIVEN_U8(_n, _f, _d) \
    DEFINE_PROP_UNSIGNED(_n, USBNcmState, _f, _d, usb_ncm_prop_given_u8, \
                         uint8_t)
#define DEFINE_PROP_GIVEN_U16(_n, _f, _d) \
    DEFINE_PROP_UNSIGNED(_n, USBNcmState, _f, _d, usb_ncm_prop_given_u16, \
                         uint16_t)
#define DEFINE_PROP_GIVEN_U32(_n, _f, _d) \
    DEFINE_PROP_UNSIGNED(_n, USBNcmState, _f, _d, usb_ncm_prop_given_u32, \
                         uint32_t)
#define DEFINE_PROP_GIVEN_BOOL(_n, _f, _d) \
    DEFINE_PROP(_n, USBNcmState, _f, usb_ncm_prop_given_bool, bool, \
                .set_default = true, .defval.u = (bool)(_d))

/* profile: which real function the descriptors and capabilities follow */
static const char *const usb_ncm_profile_names[NCM_PROFILE__MAX] = {
    [NCM_PROFILE_DISPLAYLINK] = "displaylink",
    [NCM_PROFILE_GENERIC] = "generic",
    [NCM_PROFILE_RTL8156] = "rtl8156",
    [NCM_PROFILE_F_NCM] = "f_ncm",
    [NCM_PROFILE_MINIMAL] = "minimal",
};

static const QEnumLookup usb_ncm_profile_lookup = {
    .array = usb_ncm_profile_names,
    .size = ARRAY_SIZE(usb_ncm_profile_names),
};

static const PropertyInfo usb_ncm_prop_profile = {
    .type = "UsbNcmProfile",
    .description = "displaylink/generic/rtl8156/f_ncm/minimal",
    .enum_table = &usb_ncm_profile_lookup,
    .get = qdev_propinfo_get_enum,
    .set = qdev_propinfo_set_enum,
    .set_default_value = qdev_propinfo_set_default_value_enum,
};

/*
 * Both variants have these; each adds zlp, power-on-filter and profile
 * with its own default.  The defaults shown are the displaylink and
 * generic profiles' (they agree on these); another profile changes them
 * at realize unless given.
 */
static const Property usb_ncm_properties[] = {
    DEFINE_NIC_PROPERTIES(USBNcmState, conf),
    DEFINE_PROP_GIVEN_U32("ntb-in-max-size", fn.cfg.ntb_in_max_size,
                          NCM_NTB16_MAX_SIZE),
    DEFINE_PROP_GIVEN_U32("ntb-out-max-size", fn.cfg.ntb_out_max_size,
                          NCM_NTB16_MAX_SIZE),
    DEFINE_PROP_UINT16("ntb-in-divisor", USBNcmState, fn.cfg.in_divisor, 4),
    DEFINE_PROP_UINT16("ntb-in-remainder", USBNcmState, fn.cfg.in_remainder, 0),
    DEFINE_PROP_UINT16("ntb-in-alignment", USBNcmState, fn.cfg.in_alignment, 4),
    DEFINE_PROP_UINT16("ntb-out-divisor", USBNcmState, fn.cfg.out_divisor, 4),
    DEFINE_PROP_UINT16("ntb-out-remainder", USBNcmState,
                       fn.cfg.out_remainder, 0),
    DEFINE_PROP_UINT16("ntb-out-alignment", USBNcmState,
                       fn.cfg.out_alignment, 4),
    DEFINE_PROP_GIVEN_U16("ntb-out-max-datagrams", fn.cfg.out_max_datagrams,
                          64),
    DEFINE_PROP_GIVEN_U16("in-datagrams-per-ntb", fn.cfg.in_max_datagrams, 0),
    DEFINE_PROP_GIVEN_U16("max-segment-size", fn.cfg.max_segment_size, 1514),
    DEFINE_PROP_GIVEN_BOOL("ntb32", ntb32, true),
    DEFINE_PROP_GIVEN_U8("network-capabilities", caps_prop, NCM_CAPS_BASE),
    DEFINE_PROP_GIVEN_U16("multicast-filters", fn.cfg.mc_filters, 0),
    DEFINE_PROP_GIVEN_U32("ethernet-statistics", fn.cfg.eth_stats, 0),
    DEFINE_PROP_GIVEN_U16("bcd-cdc", bcd_cdc, 0x0120),
    DEFINE_PROP_BOOL("x-deferred-out", USBNcmState, deferred_out, true),
    DEFINE_PROP_UINT32("in-coalesce-us", USBNcmState, in_coalesce.max_us,
                       NCM_IN_COALESCE_US_DEFAULT),
    DEFINE_PROP_BOOL("remote-wakeup", USBNcmState, remote_wakeup, true),
    DEFINE_PROP_ON_OFF_AUTO("x-park-packets", USBNcmState, park_packets,
                            ON_OFF_AUTO_AUTO),
    DEFINE_PROP_UINT16("vendorid", USBNcmState, vendor_id, 0),
    DEFINE_PROP_UINT16("productid", USBNcmState, product_id, 0),
    DEFINE_PROP_STRING("manufacturer", USBNcmState, manufacturer),
    DEFINE_PROP_STRING("product", USBNcmState, product),
};

/* usb-ncm: NCM 1.0 delimiting; directed, broadcast and all multicast */
static const Property usb_ncm_own_properties[] = {
    DEFINE_PROP_SIGNED("zlp", USBNcmState, fn.cfg.zlp, NCM_ZLP_AUTO,
                       usb_ncm_prop_given_zlp, NcmZlpPolicy),
    DEFINE_PROP_GIVEN_U16("power-on-filter", fn.cfg.power_on_filter,
                          CDC_FILTER_DIRECTED | CDC_FILTER_BROADCAST |
                          CDC_FILTER_ALL_MULTICAST),
    DEFINE_PROP_SIGNED("profile", USBNcmState, profile, NCM_PROFILE_GENERIC,
                       usb_ncm_prop_profile, int),
};

/*
 * usb-ncm-dl: ZLP-required firmware that passes only directed and
 * broadcast frames until the host sets a filter.
 */
static const Property usb_ncm_dl_own_properties[] = {
    DEFINE_PROP_SIGNED("zlp", USBNcmState, fn.cfg.zlp, NCM_ZLP_REQUIRED,
                       usb_ncm_prop_given_zlp, NcmZlpPolicy),
    DEFINE_PROP_GIVEN_U16("power-on-filter", fn.cfg.power_on_filter,
                          CDC_FILTER_DIRECTED | CDC_FILTER_BROADCAST),
    DEFINE_PROP_SIGNED("profile", USBNcmState, profile,
                       NCM_PROFILE_DISPLAYLINK, usb_ncm_prop_profile, int),
};

static const char *const usb_ncm_property_help[][2] = {
    { "ntb-in-max-size", "dwNtbInMaxSize, 2048..65536" },
    { "ntb-out-max-size", "dwNtbOutMaxSize, 2048..65536" },
    { "ntb-in-divisor", "wNdpInDivisor, power of two 4..4096" },
    { "ntb-in-remainder", "wNdpInPayloadRemainder, below the divisor" },
    { "ntb-in-alignment", "wNdpInAlignment, power of two 4..4096" },
    { "ntb-out-divisor", "wNdpOutDivisor, power of two 4..4096" },
    { "ntb-out-remainder", "wNdpOutPayloadRemainder, below the divisor" },
    { "ntb-out-alignment", "wNdpOutAlignment, power of two 4..4096" },
    { "ntb-out-max-datagrams", "wNtbOutMaxDatagrams, 0 (no limit)..1024" },
    { "in-datagrams-per-ntb", "the firmware's own limit of datagrams per "
                              "IN NTB, 0 (none)..1024" },
    { "max-segment-size", "wMaxSegmentSize (largest frame), from 1514" },
    { "network-capabilities", "bmNetworkCapabilities: 0x01 packet filter, "
                              "0x02 net address, 0x08 max datagram size, "
                              "0x10 CRC mode, 0x20 8-byte NTB input size" },
    { "multicast-filters", "wNumberMCFilters: filters 0..256, +0x8000 "
                           "for imperfect (hash) filtering" },
    { "ethernet-statistics", "bmEthernetStatistics: bit N-1 for "
                             "GET_ETHERNET_STATISTIC selector N, 1..17" },
    { "bcd-cdc", "bcdCDC of the header descriptor, 0x0110 or 0x0120" },
    { "ntb32", "advertise NTB32 as well as NTB16" },
    { "x-deferred-out", "read bulk OUT in a bottom half (off: in the "
                        "vCPU thread, for comparison)" },
    { "in-coalesce-us", "while the host has fewer bulk IN transfers queued "
                        "than usual, an IN NTB keeps taking datagrams for "
                        "up to this long, 0 (off)..100000" },
    { "remote-wakeup", "advertise remote wakeup: a frame wakes a "
                       "suspended device" },
    { "x-park-packets", "hold bulk packets until there is data (auto: "
                        "not on OHCI, which allows one per controller)" },
    { "vendorid", "idVendor (0: the model's own)" },
    { "productid", "idProduct (0: the model's own)" },
    { "manufacturer", "manufacturer string" },
    { "product", "product string" },
};

/* the properties each variant has with its own default */
static void usb_ncm_describe_own_props(ObjectClass *klass)
{
    object_class_property_set_description(klass, "zlp",
        "end of an OUT transfer: auto (NCM 1.0) or required (short packet "
        "or ZLP only, DisplayLink firmware)");
    object_class_property_set_description(klass, "power-on-filter",
        "packet filter until the host sets one: CDC bits, 0x01 "
        "promiscuous, 0x02 all multicast, 0x04 directed, 0x08 broadcast, "
        "0x10 multicast");
    object_class_property_set_description(klass, "profile",
        "descriptor and capability values of a real NCM function: "
        "displaylink, generic, rtl8156, f_ncm, minimal; a property given "
        "as well wins");
}

static void usb_ncm_base_class_init(ObjectClass *klass,
                                    NcmClassInitData *data)
{
    DeviceClass *dc = DEVICE_CLASS(klass);
    USBDeviceClass *uc = USB_DEVICE_CLASS(klass);
    size_t i;

    usb_ncm_init_given_infos();
    uc->realize = usb_ncm_realize;
    uc->unrealize = usb_ncm_unrealize;
    uc->handle_attach = usb_desc_attach;
    uc->handle_reset = usb_ncm_handle_reset;
    uc->handle_control = usb_ncm_handle_control;
    uc->handle_data = usb_ncm_handle_data;
    uc->set_interface = usb_ncm_set_interface;
    uc->cancel_packet = usb_ncm_cancel_packet;
    /* an NTB cut at 256 bytes shows its headers and no datagram */
    uc->pcap_snaplen = USB_PCAP_SNAPLEN_MAX;
    set_bit(DEVICE_CATEGORY_NETWORK, dc->categories);
    dc->fw_name = "network";
    dc->vmsd = &vmstate_usb_ncm;
    device_class_set_props(dc, usb_ncm_properties);
    for (i = 0; i < ARRAY_SIZE(usb_ncm_property_help); i++) {
        object_class_property_set_description(klass,
                                              usb_ncm_property_help[i][0],
                                              usb_ncm_property_help[i][1]);
    }
}

static void usb_ncm_class_init(ObjectClass *klass, NcmClassInitData *data)
{
    DeviceClass *dc = DEVICE_CLASS(klass);
    USBDeviceClass *uc = USB_DEVICE_CLASS(klass);

    USB_NCM_BASE_CLASS(klass)->variant = &usb_ncm_variant;
    uc->product_desc = "QEMU USB NCM Ethernet";
    dc->desc = "USB CDC-NCM Ethernet adapter";
    device_class_set_props(dc, usb_ncm_own_properties);
    usb_ncm_describe_own_props(klass);
}

static void usb_ncm_dl_class_init(ObjectClass *klass, NcmClassInitData *data)
{
    DeviceClass *dc = DEVICE_CLASS(klass);
    USBDeviceClass *uc = USB_DEVICE_CLASS(klass);

    USB_NCM_BASE_CLASS(klass)->variant = &usb_ncm_dl_variant;
    uc->product_desc = "USB-NCM-DL Giga Ethernet";
    dc->desc = "DisplayLink-style USB CDC-NCM Ethernet (64 KiB NTBs, "
               "ZLP-required firmware)";
    device_class_set_props(dc, usb_ncm_dl_own_properties);
    usb_ncm_describe_own_props(klass);
}

static const TypeInfo usb_ncm_types[] = {
    {
        .name = TYPE_USB_NCM_BASE,
        .parent = TYPE_USB_DEVICE,
        .instance_size = sizeof(USBNcmState),
        .instance_init = usb_ncm_instance_init,
        .class_size = sizeof(USBNcmClass),
        .class_init = usb_ncm_base_class_init,
        .abstract = true,
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
