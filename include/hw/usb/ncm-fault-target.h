/*
 * USB CDC-NCM Ethernet adapter (usb-ncm-dl, usb-ncm): the hook interface
 * a fault injector uses
 *
 * The device implements TYPE_USB_NCM_FAULT_TARGET and knows no fault by
 * name.  An injector (the usb-ncm-fault object, hw/usb/ncm-fault.c) finds
 * the device by its id or QOM path, attaches with the interface's
 * attach(), and from then on:
 *
 * - the device asks the injector (UsbNcmFaultInjector): the function's
 *   NcmFaultHooks (busy, drop or corrupt an IN NTB, shorten a
 *   notification), whether the link is held down, and it tells the
 *   injector when it is back on the bus after a replug and when it goes
 *   away (unrealize: the injector is detached then);
 * - the injector acts on the device through the interface's methods.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_USB_NCM_FAULT_TARGET_H
#define HW_USB_NCM_FAULT_TARGET_H

#include "qom/object.h"
#include "hw/usb/ncm-function.h"

#define TYPE_USB_NCM_FAULT_TARGET "usb-ncm-fault-target"

typedef struct UsbNcmFaultTargetClass UsbNcmFaultTargetClass;
DECLARE_CLASS_CHECKERS(UsbNcmFaultTargetClass, USB_NCM_FAULT_TARGET,
                       TYPE_USB_NCM_FAULT_TARGET)

/* What the device asks of the injector attached to it (@opaque its own) */
typedef struct UsbNcmFaultInjector {
    /*
     * Installed in the function (ncm_function_set_fault_hooks()); the
     * device also NAKs both bulk endpoints while fn.busy() says so.
     */
    NcmFaultHooks fn;
    /* the link is held down, whatever the netdev says */
    bool (*link_down)(void *opaque);
    /* the device is back on the bus after replug() */
    void (*replugged)(void *opaque);
    /* the device is being unrealized and has detached the injector */
    void (*detached)(void *opaque);
} UsbNcmFaultInjector;

struct UsbNcmFaultTargetClass {
    InterfaceClass parent_class;

    /*
     * Attach @inj (NULL: detach).  Fails on a device that is not
     * realized or that has another injector.
     */
    bool (*attach)(Object *dev, const UsbNcmFaultInjector *inj, void *opaque,
                   Error **errp);
    /* the device's name in traces and messages */
    const char *(*name)(Object *dev);
    /* link_down() changed: the device tells the host and reads frames */
    void (*link_changed)(Object *dev);
    /* fn.busy() went false: the endpoints that were NAK'd are woken */
    void (*busy_ended)(Object *dev);
    /*
     * Off the bus now (a USB detach; the function's state is gone) and
     * back after @ms of virtual time; 0 brings an absent device back at
     * once.  Either way replugged() follows when it is back.
     */
    void (*replug)(Object *dev, uint32_t ms);
};

#endif /* HW_USB_NCM_FAULT_TARGET_H */
