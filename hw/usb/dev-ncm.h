/*
 * USB CDC-NCM Ethernet adapter (usb-ncm-dl, usb-ncm): identities,
 * profiles and descriptors
 *
 * Between dev-ncm.c, the glue, and dev-ncm-desc.c, the profiles and the
 * descriptors.  The device's state (USBNcmState) is dev-ncm.c's alone.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_USB_DEV_NCM_H
#define HW_USB_DEV_NCM_H

#include "hw/usb.h"
#include "hw/usb/ncm-function.h"
#include "desc.h"

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

/*
 * profile=: descriptor and capability values that go together, after a
 * real NCM function; docs/system/devices/usb-ncm.rst says where each
 * value comes from.  A property set on the command line (or with
 * -global) wins over the profile's value: see USB_NCM_PROFILE_PROPS
 * in dev-ncm.c.
 */
typedef enum USBNcmProfileId {
    NCM_PROFILE_DISPLAYLINK,
    NCM_PROFILE_GENERIC,
    NCM_PROFILE_RTL8156,
    NCM_PROFILE_F_NCM,
    NCM_PROFILE_MINIMAL,
    NCM_PROFILE__MAX,
} USBNcmProfileId;

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

/* What the descriptors say of the device beyond the function's NcmConfig */
typedef struct USBNcmIdentity {
    uint16_t vendor_id;
    uint16_t product_id;
    uint16_t bcd_cdc;
    bool remote_wakeup;
} USBNcmIdentity;

extern const USBNcmVariant usb_ncm_variant;
extern const USBNcmVariant usb_ncm_dl_variant;

/*
 * Fill @d from the device's identity (ids, bcdCDC, remote wakeup) and the
 * function's configuration (segment size, capabilities, filters,
 * statistics).
 */
void usb_ncm_build_descriptors(USBNcmDescriptors *d, const NcmConfig *cfg,
                               const USBNcmIdentity *id);
extern const char *const usb_ncm_profile_names[NCM_PROFILE__MAX];

#endif /* HW_USB_DEV_NCM_H */
