/*
 * usb-ncm-fault: the fault injection object's properties, by name
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_USB_NCM_FAULT_H
#define HW_USB_NCM_FAULT_H

#define TYPE_USB_NCM_FAULT "usb-ncm-fault"

/*
 * The object's properties that take a number, in the order it registers
 * them; the fuzz targets number them so (op_fault), and their corpus
 * generator reads this enum.  A new one goes before NCM_FAULT__MAX, with
 * its name in usb_ncm_fault_names[] (hw/usb/ncm-fault.c).
 */
typedef enum UsbNcmFaultProp {
    NCM_FAULT_LINK_DOWN_MS,
    NCM_FAULT_BUSY_MS,
    NCM_FAULT_DROP_IN_EVERY,
    NCM_FAULT_CORRUPT_COUNT,
    NCM_FAULT_REPLUG_MS,
    NCM_FAULT_REPLUG_EVERY_MS,
    NCM_FAULT_REPLUG_SEED,
    NCM_FAULT_AT_IN_NTB,
    NCM_FAULT__MAX,
    /* the string one, a name of ncm_in_corruption_names[] */
    NCM_FAULT_CORRUPT_IN = NCM_FAULT__MAX,
} UsbNcmFaultProp;

#define NCM_FAULT_CORRUPT_IN_NAME "corrupt-in"

/* The property names of the numbered ones */
extern const char *const usb_ncm_fault_names[NCM_FAULT__MAX];

#endif /* HW_USB_NCM_FAULT_H */
