/*
 * USB CDC-NCM Ethernet adapter (usb-ncm-dl, usb-ncm): identities, profiles
 * and descriptors
 *
 * What the device says it is: the two variants' identities, the profiles
 * (the values of real NCM functions) and the descriptors for each speed,
 * built per instance from the properties.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "dev-ncm.h"

/* docs/system/devices/usb-ncm.rst says where each value comes from */
const USBNcmProfile usb_ncm_profiles[NCM_PROFILE__MAX] = {
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

const char *const usb_ncm_profile_names[NCM_PROFILE__MAX] = {
    [NCM_PROFILE_DISPLAYLINK] = "displaylink",
    [NCM_PROFILE_GENERIC] = "generic",
    [NCM_PROFILE_RTL8156] = "rtl8156",
    [NCM_PROFILE_F_NCM] = "f_ncm",
    [NCM_PROFILE_MINIMAL] = "minimal",
};

/* all 256 indexes: the core reads str[index] for any string a host asks */
static const USBDescStrings usb_ncm_strings = {
    [STR_MANUFACTURER] = "QEMU",
    [STR_PRODUCT] = "QEMU USB NCM Ethernet",
    [STR_SERIALNUMBER] = "1",
    [STR_MAC] = "400102030405",
    [STR_CONTROL] = "CDC Network Control Model",
    [STR_DATA] = "CDC NCM Data",
};

const USBNcmVariant usb_ncm_variant = {
    .vendor_id = 0x46f4,        /* CRC16() of "QEMU" */
    .product_id = 0x0010,
    .manufacturer = "QEMU",
    .product = "QEMU USB NCM Ethernet",
};

const USBNcmVariant usb_ncm_dl_variant = {
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

void usb_ncm_build_descriptors(USBNcmDescriptors *d, const NcmConfig *cfg,
                               const USBNcmIdentity *id)
{
    uint8_t caps = cfg->network_caps;
    uint32_t stats = cfg->eth_stats;
    uint16_t mc = cfg->mc_filters;
    int sp;

    memcpy(d->header, (uint8_t[]) {
        5, CDC_CS_INTERFACE, CDC_DESC_HEADER,
        usb_lo(id->bcd_cdc), usb_hi(id->bcd_cdc),   /* bcdCDC */
    }, sizeof(d->header));
    memcpy(d->union_desc, (uint8_t[]) {
        5, CDC_CS_INTERFACE, CDC_DESC_UNION, NCM_IF_CONTROL, NCM_IF_DATA,
    }, sizeof(d->union_desc));
    memcpy(d->ethernet, (uint8_t[]) {
        13, CDC_CS_INTERFACE, CDC_DESC_ETHERNET, STR_MAC,
        stats, stats >> 8, stats >> 16, stats >> 24,  /* bmEthernetStatistics */
        usb_lo(cfg->max_segment_size), usb_hi(cfg->max_segment_size),
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
                            (id->remote_wakeup ? USB_CFG_ATT_WAKEUP : 0),
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
            .idVendor = id->vendor_id,
            .idProduct = id->product_id,
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
