/*
 * USB CDC-NCM Ethernet adapter (usb-ncm-dl, usb-ncm): the device's state
 *
 * Private to hw/usb/dev-ncm*.c: dev-ncm.c is the glue between the USB
 * core, the net client and the function, dev-ncm-desc.c the profiles and
 * the descriptors, dev-ncm-faults.c x-stats and fault injection.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_USB_DEV_NCM_H
#define HW_USB_DEV_NCM_H

#include "hw/usb.h"
#include "net/net.h"
#include "qom/object.h"
#include "hw/usb/ncm-function.h"
#include "desc.h"

#define TYPE_USB_NCM_BASE   "usb-ncm-base"
#define TYPE_USB_NCM        "usb-ncm"
#define TYPE_USB_NCM_DL     "usb-ncm-dl"

OBJECT_DECLARE_TYPE(USBNcmState, USBNcmClass, USB_NCM_BASE)

typedef struct USBNcmFaults USBNcmFaults;

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
    int default_profile;            /* USBNcmProfileId, without profile= */
};

/*
 * profile=: descriptor and capability values that go together, after a
 * real NCM function; docs/system/devices/usb-ncm.rst says where each
 * value comes from.  A property set on the command line (or with
 * -global) wins over the profile's value: see USB_NCM_PROFILE_PROPS.
 */
typedef enum USBNcmProfileId {
    NCM_PROFILE_DISPLAYLINK,
    NCM_PROFILE_GENERIC,
    NCM_PROFILE_RTL8156,
    NCM_PROFILE_F_NCM,
    NCM_PROFILE_MINIMAL,
    NCM_PROFILE__MAX,
} USBNcmProfileId;

/*
 * The numeric properties a profile supplies: name, field of
 * USBNcmProfile, field of USBNcmState, the default, which means "the
 * profile's" (it is no valid value of the property: realize replaces it
 * with the profile's), and what the property is.  Their DEFINE_PROP_*
 * (usb_ncm_profile_properties[] in dev-ncm.c) have the same defaults.
 * ntb32 (OnOffAuto, auto) and zlp (unset or "profile") do the same.
 */
#define USB_NCM_PROFILE_PROPS(X) \
    X("ntb-in-max-size", ntb_in_max_size, \
      fn.cfg.ntb_in_max_size, 0, "dwNtbInMaxSize, 2048..65536") \
    X("ntb-out-max-size", ntb_out_max_size, \
      fn.cfg.ntb_out_max_size, 0, "dwNtbOutMaxSize, 2048..65536") \
    X("ntb-out-max-datagrams", \
      out_max_datagrams, fn.cfg.out_max_datagrams, UINT16_MAX, \
      "wNtbOutMaxDatagrams, 0 (no limit)..1024") \
    X("in-datagrams-per-ntb", in_datagrams, \
      fn.cfg.in_max_datagrams, UINT16_MAX, \
      "the firmware's own limit of datagrams per IN NTB, 0 (none)..1024") \
    X("max-segment-size", max_segment_size, \
      fn.cfg.max_segment_size, 0, \
      "wMaxSegmentSize (largest frame), from 1514") \
    X("power-on-filter", power_on_filter, \
      fn.cfg.power_on_filter, UINT16_MAX, \
      "packet filter until the host sets one: CDC bits, 0x01 " \
      "promiscuous, 0x02 all multicast, 0x04 directed, 0x08 broadcast, " \
      "0x10 multicast") \
    X("network-capabilities", caps, \
      fn.cfg.network_caps, UINT8_MAX, \
      "bmNetworkCapabilities: 0x01 packet filter, 0x02 net address, " \
      "0x08 max datagram size, 0x10 CRC mode, 0x20 8-byte NTB input " \
      "size") \
    X("multicast-filters", mc_filters, \
      fn.cfg.mc_filters, UINT16_MAX, \
      "wNumberMCFilters: filters 0..256, +0x8000 for imperfect (hash) " \
      "filtering") \
    X("ethernet-statistics", eth_stats, \
      fn.cfg.eth_stats, UINT32_MAX, \
      "bmEthernetStatistics: bit N-1 for GET_ETHERNET_STATISTIC " \
      "selector N, 1..17") \
    X("bcd-cdc", bcd_cdc, bcd_cdc, 0, \
      "bcdCDC of the header descriptor, 0x0110 or 0x0120")

/* zlp=profile: the profile's NcmZlpPolicy */
#define USB_NCM_ZLP_PROFILE     (NCM_ZLP_REQUIRED + 1)

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

extern const USBNcmProfile usb_ncm_profiles[NCM_PROFILE__MAX];


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
    /* x-fault-*: dev-ncm-faults.c's, opaque here; NULL until realize */
    USBNcmFaults *faults;
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

extern const USBNcmVariant usb_ncm_variant;
extern const USBNcmVariant usb_ncm_dl_variant;

/*
 * Fill s->descs from the properties (ids, bcdCDC, remote wakeup) and the
 * function's configuration (s->fn.cfg: segment size, capabilities,
 * filters, statistics).
 */
void usb_ncm_build_descriptors(USBNcmState *s);
/* dev-ncm.c, for the other parts of the device */
void usb_ncm_schedule_wakeup(USBNcmState *s, bool bulk_in, bool notify);
void usb_ncm_flush_rx(USBNcmState *s);
/* a NAK'd endpoint's controller waits for a wakeup: give it one */
void usb_ncm_wakeup_nakd(USBNcmBulk *b);
/* the link the host sees: the netdev's, unless a fault holds it down */
void usb_ncm_update_link(USBNcmState *s);

/*
 * dev-ncm-faults.c: x-stats and x-fault-*.  It alone touches
 * USBNcmFaults (every fault value, its timers, the replug state and the
 * migration blocker); the rest of the device asks through these, and
 * the function through the NcmFaultHooks installed at realize.
 */
void usb_ncm_add_debug_props(Object *obj);
void usb_ncm_faults_realize(USBNcmState *s);
void usb_ncm_faults_unrealize(USBNcmState *s);
/* x-fault-busy-ms is running: the bulk endpoints NAK */
bool usb_ncm_faults_busy(USBNcmState *s);
/* x-fault-link-down-ms is running */
bool usb_ncm_faults_link_down(USBNcmState *s);
/*
 * Migration is blocked while a fault is active; a corruption count runs
 * out on its own, so the IN paths call this to lift the block then.
 */
void usb_ncm_faults_update(USBNcmState *s);
/* A device loaded off the bus comes back as after a replug */
void usb_ncm_faults_post_load(USBNcmState *s);

/* Every property left at its "the profile's" default takes its value */
void usb_ncm_apply_profile(USBNcmState *s);
extern const char *const usb_ncm_profile_names[NCM_PROFILE__MAX];

#endif /* HW_USB_DEV_NCM_H */
