/*
 * Fault injection for usb-ncm and usb-ncm-dl: the usb-ncm-fault object
 *
 *   -object usb-ncm-fault,id=f0,device=ncm0
 *   { "execute": "qom-set", "arguments": { "path": "/objects/f0",
 *     "property": "link-down-ms", "value": 1500 } }
 *
 * Test hooks for host driver developers: link down, busy endpoints,
 * dropped or corrupted IN NTBs, re-enumeration.  The device knows none
 * of them: it implements TYPE_USB_NCM_FAULT_TARGET (ncm-fault-target.h)
 * and this object attaches to it, the first time a fault is set (the
 * object may be created before the device, with -object, or after it,
 * with object-add).  A build without CONFIG_USB_NCM_FAULT has the device
 * and no fault injection.
 *
 * Every property is a fault (its description starts with "fault:"; one
 * set to anything but 0 or "none" blocks migration until it is over) or
 * a parameter of one ("parameter:"); tests iterate them with
 * qom-list-properties, so that a new fault cannot miss its blocker test.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qapi/visitor.h"
#include "qemu/main-loop.h"
#include "qemu/module.h"
#include "qemu/timer.h"
#include "qom/object_interfaces.h"
#include "hw/qdev-core.h"
#include "migration/blocker.h"
#include "system/replay.h"
#include "hw/usb/ncm-compat.h"
#include "hw/usb/ncm-fault.h"
#include "hw/usb/ncm-fault-target.h"
#include "trace.h"

OBJECT_DECLARE_SIMPLE_TYPE(UsbNcmFault, USB_NCM_FAULT)

const char *const usb_ncm_fault_names[NCM_FAULT__MAX] = {
    [NCM_FAULT_LINK_DOWN_MS] = "link-down-ms",
    [NCM_FAULT_BUSY_MS] = "busy-ms",
    [NCM_FAULT_DROP_IN_EVERY] = "drop-in-every",
    [NCM_FAULT_CORRUPT_COUNT] = "corrupt-count",
    [NCM_FAULT_REPLUG_MS] = "replug-ms",
    [NCM_FAULT_REPLUG_EVERY_MS] = "replug-every-ms",
    [NCM_FAULT_REPLUG_SEED] = "replug-seed",
    [NCM_FAULT_AT_IN_NTB] = "at-in-ntb",
};

static const char *const usb_ncm_fault_descriptions[NCM_FAULT__MAX] = {
    [NCM_FAULT_LINK_DOWN_MS] =
        "fault: NETWORK_CONNECTION(0) now and back after N ms; reads 1 "
        "while down; 0 ends it",
    [NCM_FAULT_BUSY_MS] =
        "fault: both bulk endpoints NAK for N ms; reads 1 while busy; "
        "0 ends it",
    [NCM_FAULT_DROP_IN_EVERY] =
        "fault: drop IN NTB number N, 2N, 3N...; 0 turns it off",
    [NCM_FAULT_CORRUPT_COUNT] =
        "parameter: how many IN NTBs (or notifications) corrupt-in "
        "corrupts; reads how many are still to come",
    [NCM_FAULT_REPLUG_MS] =
        "fault: off the bus now, back after N ms (and how long each "
        "replug-every-ms replug lasts, 200 by default); reads 1 while "
        "off; 0 brings it back at once",
    [NCM_FAULT_REPLUG_EVERY_MS] =
        "fault: replug every N ms, with up to N/4 of seeded jitter; 0 "
        "stops",
    [NCM_FAULT_REPLUG_SEED] =
        "parameter: the seed of replug-every-ms's jitter (1)",
    [NCM_FAULT_AT_IN_NTB] =
        "parameter: N: the changes that follow wait for the device's Nth "
        "IN NTB from now and apply there, a point record/replay "
        "reproduces; reads the IN NTB's number counted from the attach; "
        "0: they apply at once, and those still waiting are dropped",
};

/*
 * Changes queued while a replay event is due to apply them, or waiting
 * for an IN NTB (at-in-ntb)
 */
#define NCM_FAULT_PENDING_MAX 16

typedef struct UsbNcmFaultChange {
    UsbNcmFaultProp which;
    uint32_t value;                 /* ... the NcmInCorruption for it */
    uint32_t at_in_ntb;             /* 0: apply_bh applies it */
} UsbNcmFaultChange;

struct UsbNcmFault {
    Object parent_obj;

    char *device;                   /* property: id or QOM path */
    Object *dev;                    /* attached to it; NULL: not yet */
    UsbNcmFaultTargetClass *target;

    bool link_down;                 /* forced down on top of the netdev */
    bool busy;                      /* bulk endpoints NAK */
    uint32_t drop_in_every;         /* 0: off; N: drop IN NTB N, 2N, ... */
    uint32_t in_ntb_counter;
    uint32_t in_ntbs;               /* IN NTBs since the attach */
    uint32_t at_in_ntb;             /* the changes that follow wait for it */
    NcmInCorruption corrupt;
    uint32_t corrupt_remaining;
    QEMUTimer *link_timer;
    QEMUTimer *busy_timer;
    /* re-enumeration: the device is off the bus for replug_ms */
    QEMUTimer *replug_timer;        /* the next replug-every-ms replug */
    uint32_t replug_ms;
    uint32_t replug_every_ms;
    uint32_t replug_seed;
    bool replug_down;
    Error *blocker;                 /* installed while a fault is active */
    /*
     * Under record/replay a change from the monitor is not applied in
     * the monitor's command but queued here and applied in apply_bh, a
     * replay event.  The command runs wherever the host's timing puts it
     * between the events the log holds (a packet from the netdev that
     * came in while the VM was stopped, say), and the replay cannot put
     * it back there; the bottom half runs where the log says.  A replay
     * that stopped at the recorded instruction count (replay-break) and
     * set the same property there would queue a matching event.
     *
     * Stopping the VM in a recording at a point the host's timing picks
     * can itself leave the replay out of step (a clock warp cut short),
     * so a recording does not stop: it sets at-in-ntb first, and its
     * changes wait for that IN NTB, which comes at the same instruction
     * in the replay, where the same changes were queued before the first
     * instruction.
     */
    QEMUBH *apply_bh;               /* while attached */
    UsbNcmFaultChange pending[NCM_FAULT_PENDING_MAX];
    unsigned npending;
};

static const char *usb_ncm_fault_id(UsbNcmFault *f)
{
    return object_get_canonical_path_component(OBJECT(f)) ?: "?";
}

static const char *usb_ncm_fault_dev_name(UsbNcmFault *f)
{
    return f->dev ? f->target->name(f->dev) : f->device;
}

/*
 * Fault injection is no state of a real device and does not migrate:
 * while a fault is active (any fault property reads other than 0, or a
 * corruption is still to come), migration is blocked.
 */
static bool usb_ncm_fault_active(UsbNcmFault *f)
{
    return f->link_down || f->busy || f->drop_in_every ||
           (f->corrupt != NCM_CORRUPT_NONE && f->corrupt_remaining) ||
           f->replug_down || f->replug_every_ms || f->npending;
}

/* Before a fault is set: block migration, or fail as migration runs */
static bool usb_ncm_fault_block(UsbNcmFault *f, Error **errp)
{
    if (f->blocker) {
        return true;
    }
    error_setg(&f->blocker, "usb-ncm-fault %s: fault injection on %s is "
               "active; it does not migrate", usb_ncm_fault_id(f),
               usb_ncm_fault_dev_name(f));
    return migrate_add_blocker(&f->blocker, errp) >= 0;
}

static void usb_ncm_fault_update(UsbNcmFault *f)
{
    if (f->blocker && !usb_ncm_fault_active(f)) {
        migrate_del_blocker(&f->blocker);
    }
}

/* What the device asks (UsbNcmFaultInjector) */

static bool usb_ncm_fault_hook_busy(void *opaque)
{
    UsbNcmFault *f = opaque;

    return f->busy;
}

static bool usb_ncm_fault_hook_in_ntb(void *opaque, NcmInCorruption *how)
{
    UsbNcmFault *f = opaque;
    bool due = false;
    unsigned i;

    /*
     * The changes waiting for this NTB go to apply_bh: applied here they
     * would change the link or replug the device under the function that
     * is building the NTB
     */
    f->in_ntbs++;
    for (i = 0; i < f->npending; i++) {
        if (f->pending[i].at_in_ntb == f->in_ntbs) {
            f->pending[i].at_in_ntb = 0;
            due = true;
        }
    }
    if (due) {
        replay_bh_schedule_event(f->apply_bh);
    }
    f->in_ntb_counter++;
    if (f->drop_in_every && f->in_ntb_counter % f->drop_in_every == 0) {
        return true;
    }
    if (f->corrupt != NCM_CORRUPT_NONE &&
        f->corrupt != NCM_CORRUPT_SHORT_NOTIFY && f->corrupt_remaining) {
        f->corrupt_remaining--;
        *how = f->corrupt;
        usb_ncm_fault_update(f);    /* that may have been the last */
    }
    return false;
}

static bool usb_ncm_fault_hook_short_notify(void *opaque)
{
    UsbNcmFault *f = opaque;

    if (f->corrupt == NCM_CORRUPT_SHORT_NOTIFY && f->corrupt_remaining) {
        f->corrupt_remaining--;
        usb_ncm_fault_update(f);
        return true;
    }
    return false;
}

static bool usb_ncm_fault_hook_link_down(void *opaque)
{
    UsbNcmFault *f = opaque;

    return f->link_down;
}

static void usb_ncm_replug_schedule(UsbNcmFault *f, int64_t delay_ms)
{
    timer_mod(f->replug_timer,
              qemu_clock_get_ms(QEMU_CLOCK_VIRTUAL) + delay_ms);
}

/*
 * Back on the bus; with replug_every_ms the next replug comes with a
 * jitter of up to a quarter of the period from a seeded generator, so
 * that a run replays.
 */
static void usb_ncm_fault_hook_replugged(void *opaque)
{
    UsbNcmFault *f = opaque;

    f->replug_down = false;
    if (f->replug_every_ms) {
        uint32_t jitter = f->replug_every_ms / 4 + 1;

        f->replug_seed = f->replug_seed * 1103515245 + 12345;
        usb_ncm_replug_schedule(f, f->replug_every_ms - jitter / 2 +
                                (f->replug_seed >> 8) % jitter);
    }
    usb_ncm_fault_update(f);
}

/* Every fault off, with the device gone or going */
static void usb_ncm_fault_forget(UsbNcmFault *f)
{
    timer_del(f->link_timer);
    timer_del(f->busy_timer);
    timer_del(f->replug_timer);
    f->link_down = f->busy = f->replug_down = false;
    f->drop_in_every = f->replug_every_ms = 0;
    f->corrupt = NCM_CORRUPT_NONE;
    f->corrupt_remaining = 0;
    f->npending = 0;
    f->at_in_ntb = 0;
    if (f->apply_bh) {
        qemu_bh_delete(f->apply_bh);
        f->apply_bh = NULL;
    }
    if (f->blocker) {
        migrate_del_blocker(&f->blocker);
    }
    f->dev = NULL;
    f->target = NULL;
}

static void usb_ncm_fault_hook_detached(void *opaque)
{
    usb_ncm_fault_forget(opaque);
}

static const UsbNcmFaultInjector usb_ncm_fault_injector = {
    .fn = {
        .busy = usb_ncm_fault_hook_busy,
        .in_ntb = usb_ncm_fault_hook_in_ntb,
        .short_notify = usb_ncm_fault_hook_short_notify,
    },
    .link_down = usb_ncm_fault_hook_link_down,
    .replugged = usb_ncm_fault_hook_replugged,
    .detached = usb_ncm_fault_hook_detached,
};

static void usb_ncm_fault_apply_bh(void *opaque);

/* An id names a device in /machine/peripheral; else a (partial) path */
static Object *usb_ncm_fault_resolve(const char *device, bool *ambiguous)
{
    g_autofree char *path = g_strdup_printf("/machine/peripheral/%s",
                                            device);
    Object *dev = NULL;

    if (device[0] != '/') {
        dev = object_resolve_path_type(path, TYPE_USB_NCM_FAULT_TARGET,
                                       NULL);
    }
    return dev ?: object_resolve_path_type(device, TYPE_USB_NCM_FAULT_TARGET,
                                           ambiguous);
}

/* Find the device and attach, unless attached already */
static bool usb_ncm_fault_attach(UsbNcmFault *f, Error **errp)
{
    bool ambiguous = false;
    Object *dev;

    if (f->dev) {
        return true;
    }
    if (!f->device) {
        error_setg(errp, "usb-ncm-fault %s: no device; set device=ID",
                   usb_ncm_fault_id(f));
        return false;
    }
    dev = usb_ncm_fault_resolve(f->device, &ambiguous);
    if (!dev) {
        error_setg(errp, "usb-ncm-fault %s: %s '%s'", usb_ncm_fault_id(f),
                   ambiguous ? "more than one usb-ncm device matches"
                             : "no usb-ncm device", f->device);
        return false;
    }
    f->target = USB_NCM_FAULT_TARGET_GET_CLASS(dev);
    if (!f->target->attach(dev, &usb_ncm_fault_injector, f, errp)) {
        f->target = NULL;
        return false;
    }
    f->dev = dev;
    f->in_ntb_counter = 0;
    f->in_ntbs = 0;
    f->apply_bh = qemu_bh_new_guarded(usb_ncm_fault_apply_bh, f,
                                      &DEVICE(dev)->mem_reentrancy_guard);
    return true;
}

static void usb_ncm_fault_link_restore(void *opaque)
{
    UsbNcmFault *f = opaque;

    f->link_down = false;
    f->target->link_changed(f->dev);
    usb_ncm_fault_update(f);
}

static void usb_ncm_fault_busy_end(void *opaque)
{
    UsbNcmFault *f = opaque;

    f->busy = false;
    f->target->busy_ended(f->dev);
    usb_ncm_fault_update(f);
}

static void usb_ncm_fault_replug_timer(void *opaque)
{
    UsbNcmFault *f = opaque;

    f->replug_down = true;
    f->target->replug(f->dev, f->replug_ms);
}

static void usb_ncm_fault_set(UsbNcmFault *f, UsbNcmFaultProp which,
                              uint32_t value)
{
    int64_t now = qemu_clock_get_ms(QEMU_CLOCK_VIRTUAL);

    switch (which) {
    case NCM_FAULT_LINK_DOWN_MS:
        f->link_down = value != 0;
        if (value) {
            timer_mod(f->link_timer, now + value);
        } else {
            timer_del(f->link_timer);
        }
        f->target->link_changed(f->dev);
        break;
    case NCM_FAULT_BUSY_MS:
        f->busy = value != 0;
        if (value) {
            timer_mod(f->busy_timer, now + value);
        } else {
            timer_del(f->busy_timer);
            f->target->busy_ended(f->dev);
        }
        break;
    case NCM_FAULT_DROP_IN_EVERY:
        f->drop_in_every = value;
        f->in_ntb_counter = 0;
        break;
    case NCM_FAULT_CORRUPT_COUNT:
        f->corrupt_remaining = value;
        break;
    case NCM_FAULT_CORRUPT_IN:
        f->corrupt = value;
        f->corrupt_remaining = MAX(f->corrupt_remaining, 1);
        break;
    case NCM_FAULT_REPLUG_MS:
        if (value) {
            f->replug_ms = value;
            f->replug_down = true;
            timer_del(f->replug_timer);
            f->target->replug(f->dev, value);
        } else if (f->replug_down) {
            f->target->replug(f->dev, 0);       /* back at once */
        }
        break;
    case NCM_FAULT_REPLUG_EVERY_MS:
        f->replug_every_ms = value;
        if (!value) {
            timer_del(f->replug_timer);
        } else if (!f->replug_down) {
            usb_ncm_replug_schedule(f, value);
        }
        break;
    case NCM_FAULT_REPLUG_SEED:
        f->replug_seed = value;
        break;
    default:                        /* at-in-ntb is no change to apply */
        g_assert_not_reached();
    }
}

static uint32_t usb_ncm_fault_get(UsbNcmFault *f, UsbNcmFaultProp which)
{
    switch (which) {
    case NCM_FAULT_LINK_DOWN_MS:
        return f->link_down;
    case NCM_FAULT_BUSY_MS:
        return f->busy;
    case NCM_FAULT_DROP_IN_EVERY:
        return f->drop_in_every;
    case NCM_FAULT_CORRUPT_COUNT:
        return f->corrupt_remaining;
    case NCM_FAULT_REPLUG_MS:
        return f->replug_down;
    case NCM_FAULT_REPLUG_EVERY_MS:
        return f->replug_every_ms;
    case NCM_FAULT_REPLUG_SEED:
        return f->replug_seed;
    case NCM_FAULT_AT_IN_NTB:
        return f->at_in_ntb;
    default:
        g_assert_not_reached();
    }
}

static const char *usb_ncm_fault_prop_name(UsbNcmFaultProp which)
{
    return which == NCM_FAULT_CORRUPT_IN ? NCM_FAULT_CORRUPT_IN_NAME
                                         : usb_ncm_fault_names[which];
}

static void usb_ncm_fault_apply(UsbNcmFault *f, UsbNcmFaultProp which,
                                uint32_t value)
{
    if (!f->dev) {
        return;                     /* the device went away meanwhile */
    }
    usb_ncm_fault_set(f, which, value);
    trace_usb_ncm_fault(f->target->name(f->dev),
                        usb_ncm_fault_prop_name(which), value);
    usb_ncm_fault_update(f);
}

/*
 * Take the pending changes that are due (@due true: none waits for an IN
 * NTB any more) or those still waiting (false) out of the queue, in the
 * order they were made, into @taken (NULL: dropped); how many
 */
static unsigned usb_ncm_fault_take(UsbNcmFault *f, bool due,
                                   UsbNcmFaultChange *taken)
{
    unsigned i, left = 0, n = 0;

    for (i = 0; i < f->npending; i++) {
        if (!f->pending[i].at_in_ntb != due) {
            f->pending[left++] = f->pending[i];
        } else {
            if (taken) {
                taken[n] = f->pending[i];
            }
            n++;
        }
    }
    f->npending = left;
    return n;
}

/* The changes due now, in the order they were made; the rest wait on */
static void usb_ncm_fault_apply_bh(void *opaque)
{
    UsbNcmFault *f = opaque;
    UsbNcmFaultChange due[NCM_FAULT_PENDING_MAX];
    unsigned i, ndue = usb_ncm_fault_take(f, true, due);

    for (i = 0; i < ndue; i++) {
        usb_ncm_fault_apply(f, due[i].which, due[i].value);
    }
    usb_ncm_fault_update(f);
}

/*
 * at-in-ntb: the changes that follow wait for the IN NTB @value from now
 * (0: none do, and those waiting are dropped).  Not a change itself: it
 * takes effect in the monitor's command, which is what lets a recording
 * set it while the VM runs; the replay sets the number it reads back,
 * counted from the attach, before the first instruction.
 */
static void usb_ncm_fault_set_at_in_ntb(UsbNcmFault *f, uint32_t value,
                                        Error **errp)
{
    if (!usb_ncm_fault_attach(f, errp)) {
        return;
    }
    if (value > UINT32_MAX - f->in_ntbs) {
        error_setg(errp, "usb-ncm-fault %s: at-in-ntb %u is past the IN NTB "
                   "count's range (%u sent)", usb_ncm_fault_id(f), value,
                   f->in_ntbs);
        return;
    }
    f->at_in_ntb = value ? f->in_ntbs + value : 0;
    if (value) {
        return;
    }
    usb_ncm_fault_take(f, false, NULL);
    usb_ncm_fault_update(f);
}

/*
 * A change from the monitor: attach if need be, block migration if it
 * starts a fault, and apply it now or at a recorded point (apply_bh)
 */
static void usb_ncm_fault_change(UsbNcmFault *f, UsbNcmFaultProp which,
                                 uint32_t value, Error **errp)
{
    if (which == NCM_FAULT_AT_IN_NTB) {
        usb_ncm_fault_set_at_in_ntb(f, value, errp);
        return;
    }
    if (!usb_ncm_fault_attach(f, errp)) {
        return;
    }
    if (f->at_in_ntb && f->at_in_ntb <= f->in_ntbs) {
        error_setg(errp, "usb-ncm-fault %s: IN NTB %u (at-in-ntb) has "
                   "passed, %u are sent; set at-in-ntb again",
                   usb_ncm_fault_id(f), f->at_in_ntb, f->in_ntbs);
        return;
    }
    /* a change that waits does not migrate either */
    if ((f->at_in_ntb || (value && which != NCM_FAULT_REPLUG_SEED)) &&
        !usb_ncm_fault_block(f, errp)) {
        return;
    }
    if (!f->at_in_ntb && !replay_events_enabled()) {
        usb_ncm_fault_apply(f, which, value);
        return;
    }
    if (f->npending == NCM_FAULT_PENDING_MAX) {
        error_setg(errp, "usb-ncm-fault %s: %u fault changes are already "
                   "waiting for the VM to run or for an IN NTB; continue it "
                   "or set at-in-ntb to 0 first",
                   usb_ncm_fault_id(f), f->npending);
        usb_ncm_fault_update(f);
        return;
    }
    f->pending[f->npending].which = which;
    f->pending[f->npending].value = value;
    f->pending[f->npending].at_in_ntb = f->at_in_ntb;
    f->npending++;
    if (!f->at_in_ntb) {
        replay_bh_schedule_event(f->apply_bh);
    }
}

/* @opaque: the UsbNcmFaultProp, as a pointer */
static void usb_ncm_fault_set_u32(Object *obj, Visitor *v, const char *name,
                                  void *opaque, Error **errp)
{
    uint32_t value;

    if (visit_type_uint32(v, name, &value, errp)) {
        usb_ncm_fault_change(USB_NCM_FAULT(obj), GPOINTER_TO_UINT(opaque),
                             value, errp);
    }
}

static void usb_ncm_fault_get_u32(Object *obj, Visitor *v, const char *name,
                                  void *opaque, Error **errp)
{
    uint32_t value = usb_ncm_fault_get(USB_NCM_FAULT(obj),
                                       GPOINTER_TO_UINT(opaque));

    visit_type_uint32(v, name, &value, errp);
}

static char *usb_ncm_fault_get_corrupt(Object *obj, Error **errp)
{
    return g_strdup(ncm_in_corruption_names[USB_NCM_FAULT(obj)->corrupt]);
}

static void usb_ncm_fault_set_corrupt(Object *obj, const char *value,
                                      Error **errp)
{
    g_autoptr(GString) names = g_string_new(NULL);
    int i;

    for (i = 0; i < NCM_CORRUPT__MAX; i++) {
        if (!strcmp(value, ncm_in_corruption_names[i])) {
            usb_ncm_fault_change(USB_NCM_FAULT(obj), NCM_FAULT_CORRUPT_IN,
                                 i, errp);
            return;
        }
        g_string_append_printf(names, "%s%s", i ? ", " : "",
                               ncm_in_corruption_names[i]);
    }
    error_setg(errp, "corrupt-in: unknown corruption '%s'; use one of %s",
               value, names->str);
}

static char *usb_ncm_fault_get_device(Object *obj, Error **errp)
{
    return g_strdup(USB_NCM_FAULT(obj)->device);
}

static void usb_ncm_fault_set_device(Object *obj, const char *value,
                                     Error **errp)
{
    UsbNcmFault *f = USB_NCM_FAULT(obj);

    if (f->dev) {
        if (usb_ncm_fault_active(f)) {
            error_setg(errp, "usb-ncm-fault %s: a fault is active on %s",
                       usb_ncm_fault_id(f), usb_ncm_fault_dev_name(f));
            return;
        }
        f->target->attach(f->dev, NULL, NULL, NULL);
        usb_ncm_fault_forget(f);
    }
    g_free(f->device);
    f->device = g_strdup(value);
}

/* Created after the device (object-add): attach now, else at first use */
static void usb_ncm_fault_complete(UserCreatable *uc, Error **errp)
{
    UsbNcmFault *f = USB_NCM_FAULT(uc);

    if (f->device && usb_ncm_fault_resolve(f->device, NULL)) {
        usb_ncm_fault_attach(f, errp);
    }
}

static void usb_ncm_fault_init(Object *obj)
{
    UsbNcmFault *f = USB_NCM_FAULT(obj);

    f->link_timer = timer_new_ms(QEMU_CLOCK_VIRTUAL,
                                 usb_ncm_fault_link_restore, f);
    f->busy_timer = timer_new_ms(QEMU_CLOCK_VIRTUAL, usb_ncm_fault_busy_end,
                                 f);
    f->replug_timer = timer_new_ms(QEMU_CLOCK_VIRTUAL,
                                   usb_ncm_fault_replug_timer, f);
    f->replug_ms = 200;
    f->replug_seed = 1;
}

/* object-del: every fault ends, the device is itself again */
static void usb_ncm_fault_finalize(Object *obj)
{
    UsbNcmFault *f = USB_NCM_FAULT(obj);

    if (f->dev) {
        if (f->link_down) {
            f->link_down = false;
            f->target->link_changed(f->dev);
        }
        if (f->busy) {
            f->busy = false;
            f->target->busy_ended(f->dev);
        }
        if (f->replug_down) {
            f->target->replug(f->dev, 0);
        }
        f->target->attach(f->dev, NULL, NULL, NULL);
    }
    usb_ncm_fault_forget(f);
    timer_free(f->link_timer);
    timer_free(f->busy_timer);
    timer_free(f->replug_timer);
    g_free(f->device);
}

static void usb_ncm_fault_class_init(ObjectClass *oc, NcmClassInitData *data)
{
    UserCreatableClass *ucc = USER_CREATABLE_CLASS(oc);
    size_t i;

    ucc->complete = usb_ncm_fault_complete;
    object_class_property_add_str(oc, "device", usb_ncm_fault_get_device,
                                  usb_ncm_fault_set_device);
    object_class_property_set_description(oc, "device",
        "the usb-ncm or usb-ncm-dl device: its id or QOM path");
    for (i = 0; i < NCM_FAULT__MAX; i++) {
        object_class_property_add(oc, usb_ncm_fault_names[i], "uint32",
                                  usb_ncm_fault_get_u32,
                                  usb_ncm_fault_set_u32, NULL,
                                  GUINT_TO_POINTER(i));
        object_class_property_set_description(oc,
            usb_ncm_fault_names[i], usb_ncm_fault_descriptions[i]);
    }
    object_class_property_add_str(oc, NCM_FAULT_CORRUPT_IN_NAME,
                                  usb_ncm_fault_get_corrupt,
                                  usb_ncm_fault_set_corrupt);
    object_class_property_set_description(oc, NCM_FAULT_CORRUPT_IN_NAME,
        "fault: corrupt the next corrupt-count IN NTBs (or notifications) "
        "in one way, by name; none turns it off");
}

static const TypeInfo usb_ncm_fault_info = {
    .name = TYPE_USB_NCM_FAULT,
    .parent = TYPE_OBJECT,
    .instance_size = sizeof(UsbNcmFault),
    .instance_init = usb_ncm_fault_init,
    .instance_finalize = usb_ncm_fault_finalize,
    .class_init = usb_ncm_fault_class_init,
    .interfaces = (InterfaceInfo[]) {
        { TYPE_USER_CREATABLE },
        { }
    },
};

static void usb_ncm_fault_register_types(void)
{
    type_register_static(&usb_ncm_fault_info);
}

type_init(usb_ncm_fault_register_types)
