/*
 * USB CDC-NCM Ethernet adapter (usb-ncm-dl, usb-ncm): x-stats and x-fault-*
 *
 * The test and debug interface, through qom-get and qom-set: the
 * counters of the function and of the glue as one x-stats, and fault
 * injection (link down, busy endpoints, dropped or corrupted IN NTBs,
 * re-enumeration).  None of it is needed to use the device.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qapi/visitor.h"
#include "qemu/error-report.h"
#include "qemu/main-loop.h"
#include "qemu/timer.h"
#include "migration/blocker.h"
#include "system/replay.h"
#include "dev-ncm.h"
#include "trace.h"

#define USB_NCM_FN_STAT(f) { #f, true, offsetof(NcmCounters, f) },
#define USB_NCM_PACKET_STAT(f) \
    { #f, false, offsetof(USBNcmState, packet_stats.f) },

/* x-stats: the function's counters and the glue's, as one */
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
 * Every fault's state, here only: dev-ncm.c asks through
 * usb_ncm_faults_*(), the function through its NcmFaultHooks.
 */
/* Changes queued while a replay event is due to apply them */
#define NCM_FAULT_PENDING_MAX 16

struct USBNcmFaults {
    USBNcmState *s;
    bool link_down;                 /* forced down on top of the netdev */
    bool busy;                      /* bulk endpoints NAK */
    uint32_t drop_in_every;         /* 0: off; N: drop IN NTB N, 2N, ... */
    uint32_t in_ntb_counter;
    NcmInCorruption corrupt;
    uint32_t corrupt_remaining;
    QEMUTimer *link_timer;
    QEMUTimer *busy_timer;
    /* re-enumeration: off the bus, back after replug_ms */
    QEMUTimer *replug_timer;
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
     * it back there; the bottom half runs where the log says.  The
     * replay sets the same property at the recorded instruction count
     * (replay-break), so that its event matches the recorded one.
     */
    QEMUBH *apply_bh;
    struct {
        unsigned which;             /* a USBNcmFault, or NCM_FAULT__MAX */
        uint32_t value;             /* ... the NcmInCorruption for it */
    } pending[NCM_FAULT_PENDING_MAX];
    unsigned npending;
};

/* What the function asks (NcmFaultHooks) */

static bool usb_ncm_fault_hook_busy(void *opaque)
{
    USBNcmFaults *f = opaque;

    return f->busy;
}

static bool usb_ncm_fault_hook_in_ntb(void *opaque, NcmInCorruption *how)
{
    USBNcmFaults *f = opaque;

    f->in_ntb_counter++;
    if (f->drop_in_every && f->in_ntb_counter % f->drop_in_every == 0) {
        return true;
    }
    if (f->corrupt != NCM_CORRUPT_NONE &&
        f->corrupt != NCM_CORRUPT_SHORT_NOTIFY && f->corrupt_remaining) {
        f->corrupt_remaining--;
        *how = f->corrupt;
    }
    return false;
}

static bool usb_ncm_fault_hook_short_notify(void *opaque)
{
    USBNcmFaults *f = opaque;

    if (f->corrupt == NCM_CORRUPT_SHORT_NOTIFY && f->corrupt_remaining) {
        f->corrupt_remaining--;
        return true;
    }
    return false;
}

static const NcmFaultHooks usb_ncm_fault_hooks = {
    .busy = usb_ncm_fault_hook_busy,
    .in_ntb = usb_ncm_fault_hook_in_ntb,
    .short_notify = usb_ncm_fault_hook_short_notify,
};

bool usb_ncm_faults_busy(USBNcmState *s)
{
    return s->faults && s->faults->busy;
}

bool usb_ncm_faults_link_down(USBNcmState *s)
{
    return s->faults && s->faults->link_down;
}

/*
 * Fault injection is no state of a real device and does not migrate:
 * while a fault is active (any x-fault-* but x-fault-replug-seed reads
 * other than 0, or a corruption is still to come), migration is blocked.
 */
static bool usb_ncm_faults_active(USBNcmFaults *f)
{
    return f->link_down || f->busy || f->drop_in_every ||
           (f->corrupt != NCM_CORRUPT_NONE && f->corrupt_remaining) ||
           f->replug_down || f->replug_every_ms;
}

/* Before a fault is set: block migration, or fail as migration runs */
static bool usb_ncm_faults_block(USBNcmFaults *f, Error **errp)
{
    if (f->blocker) {
        return true;
    }
    error_setg(&f->blocker, "usb-ncm %s: fault injection (x-fault-*) "
               "is active; it does not migrate", f->s->fn.cfg.name);
    return migrate_add_blocker(&f->blocker, errp) >= 0;
}

void usb_ncm_faults_update(USBNcmState *s)
{
    USBNcmFaults *f = s->faults;

    if (f && f->blocker && !usb_ncm_faults_active(f)) {
        migrate_del_blocker(&f->blocker);
    }
}

static void usb_ncm_fault_set_link_down(USBNcmFaults *f, bool down)
{
    f->link_down = down;
    usb_ncm_update_link(f->s);
}

static void usb_ncm_fault_link_restore(void *opaque)
{
    USBNcmFaults *f = opaque;
    USBNcmState *s = f->s;

    usb_ncm_fault_set_link_down(f, false);
    usb_ncm_schedule_wakeup(s, false, true);
    usb_ncm_flush_rx(s);
    usb_ncm_faults_update(s);
}

static void usb_ncm_fault_busy_end(void *opaque)
{
    USBNcmFaults *f = opaque;
    USBNcmState *s = f->s;

    f->busy = false;
    if (s->dev.attached) {
        usb_ncm_wakeup_nakd(&s->out);
    }
    replay_bh_schedule_event(s->out_bh);
    usb_ncm_schedule_wakeup(s, true, false);
    usb_ncm_faults_update(s);
}

/*
 * Re-enumeration fault: the function drops off the bus, as a dock's
 * firmware reset or a failed U1/U2 exit does, and comes back replug_ms
 * later; with replug_every_ms it happens again and again, with a jitter
 * of up to a quarter of the period from a seeded generator so that a run
 * replays.
 */
static void usb_ncm_replug_schedule(USBNcmFaults *f, int64_t delay_ms)
{
    timer_mod(f->replug_timer,
              qemu_clock_get_ms(QEMU_CLOCK_VIRTUAL) + delay_ms);
}

static void usb_ncm_replug_detach(USBNcmFaults *f)
{
    USBNcmState *s = f->s;

    if (s->dev.attached) {
        s->packet_stats.replugs++;
        trace_usb_ncm_replug(s->fn.cfg.name, 0, f->replug_ms);
        usb_device_detach(&s->dev);
        /* what the firmware knew is gone with it */
        ncm_function_reset(&s->fn);
        usb_ncm_flush_rx(s);
    }
    f->replug_down = true;
    usb_ncm_replug_schedule(f, f->replug_ms);
}

static void usb_ncm_replug_timer(void *opaque)
{
    USBNcmFaults *f = opaque;
    USBNcmState *s = f->s;
    Error *err = NULL;

    if (!f->replug_down) {
        usb_ncm_replug_detach(f);
        return;
    }
    f->replug_down = false;
    if (!s->dev.attached) {
        usb_device_attach(&s->dev, &err);
        if (err) {
            /* the port went away meanwhile: nothing to come back to */
            warn_report_err(err);
            return;
        }
        trace_usb_ncm_replug(s->fn.cfg.name, 1, 0);
    }
    if (f->replug_every_ms) {
        uint32_t jitter = f->replug_every_ms / 4 + 1;

        f->replug_seed = f->replug_seed * 1103515245 + 12345;
        usb_ncm_replug_schedule(f, f->replug_every_ms - jitter / 2 +
                                (f->replug_seed >> 8) % jitter);
    }
    usb_ncm_faults_update(s);
}

/* The x-fault-* properties that take a number, each written once */
typedef enum USBNcmFault {
    NCM_FAULT_LINK_DOWN_MS,
    NCM_FAULT_BUSY_MS,
    NCM_FAULT_DROP_IN_EVERY,
    NCM_FAULT_CORRUPT_COUNT,
    NCM_FAULT_REPLUG_MS,
    NCM_FAULT_REPLUG_EVERY_MS,
    NCM_FAULT_REPLUG_SEED,
    NCM_FAULT__MAX,
} USBNcmFault;

static const char *const usb_ncm_fault_names[NCM_FAULT__MAX] = {
    [NCM_FAULT_LINK_DOWN_MS] = "x-fault-link-down-ms",
    [NCM_FAULT_BUSY_MS] = "x-fault-busy-ms",
    [NCM_FAULT_DROP_IN_EVERY] = "x-fault-drop-in-every",
    [NCM_FAULT_CORRUPT_COUNT] = "x-fault-corrupt-count",
    [NCM_FAULT_REPLUG_MS] = "x-fault-replug-ms",
    [NCM_FAULT_REPLUG_EVERY_MS] = "x-fault-replug-every-ms",
    [NCM_FAULT_REPLUG_SEED] = "x-fault-replug-seed",
};

static void usb_ncm_fault_set(USBNcmFaults *f, USBNcmFault which,
                              uint32_t value)
{
    int64_t now = qemu_clock_get_ms(QEMU_CLOCK_VIRTUAL);

    switch (which) {
    case NCM_FAULT_LINK_DOWN_MS:
        usb_ncm_fault_set_link_down(f, value != 0);
        usb_ncm_schedule_wakeup(f->s, false, true);
        if (value) {
            timer_mod(f->link_timer, now + value);
        } else {
            timer_del(f->link_timer);
            usb_ncm_flush_rx(f->s);
        }
        break;
    case NCM_FAULT_BUSY_MS:
        f->busy = value != 0;
        if (value) {
            timer_mod(f->busy_timer, now + value);
        } else {
            timer_del(f->busy_timer);
            usb_ncm_fault_busy_end(f);
        }
        break;
    case NCM_FAULT_DROP_IN_EVERY:
        f->drop_in_every = value;
        f->in_ntb_counter = 0;
        break;
    case NCM_FAULT_CORRUPT_COUNT:
        f->corrupt_remaining = value;
        break;
    case NCM_FAULT_REPLUG_MS:
        if (value) {
            f->replug_ms = value;
            usb_ncm_replug_detach(f);
        } else if (f->replug_down) {
            /* back at once */
            usb_ncm_replug_schedule(f, 0);
        }
        break;
    case NCM_FAULT_REPLUG_EVERY_MS:
        f->replug_every_ms = value;
        if (!value) {
            if (!f->replug_down) {
                timer_del(f->replug_timer);
            }
        } else if (!f->replug_down) {
            usb_ncm_replug_schedule(f, value);
        }
        break;
    case NCM_FAULT_REPLUG_SEED:
        f->replug_seed = value;
        break;
    default:
        g_assert_not_reached();
    }
}

/* An unrealized device has no fault state: everything reads 0 */
static uint32_t usb_ncm_fault_get(USBNcmFaults *f, USBNcmFault which)
{
    if (!f) {
        return 0;
    }
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
    default:
        g_assert_not_reached();
    }
}

/* @which: a USBNcmFault, or NCM_FAULT__MAX for x-fault-corrupt-in */
static void usb_ncm_fault_apply(USBNcmFaults *f, unsigned which,
                                uint32_t value)
{
    if (which == NCM_FAULT__MAX) {
        f->corrupt = value;
        f->corrupt_remaining = MAX(f->corrupt_remaining, 1);
        trace_usb_ncm_fault(f->s->fn.cfg.name, "x-fault-corrupt-in", value);
    } else {
        usb_ncm_fault_set(f, which, value);
        trace_usb_ncm_fault(f->s->fn.cfg.name, usb_ncm_fault_names[which],
                            value);
    }
    usb_ncm_faults_update(f->s);
}

static void usb_ncm_fault_apply_bh(void *opaque)
{
    USBNcmFaults *f = opaque;
    unsigned i, n = f->npending;

    f->npending = 0;
    for (i = 0; i < n; i++) {
        usb_ncm_fault_apply(f, f->pending[i].which, f->pending[i].value);
    }
}

/* A change from the monitor: now, or at a recorded point (apply_bh) */
static void usb_ncm_fault_change(USBNcmFaults *f, unsigned which,
                                 uint32_t value, Error **errp)
{
    if (!replay_events_enabled()) {
        usb_ncm_fault_apply(f, which, value);
        return;
    }
    if (f->npending == NCM_FAULT_PENDING_MAX) {
        error_setg(errp, "usb-ncm %s: %u fault changes are already waiting "
                   "for the VM to run; continue it first", f->s->fn.cfg.name,
                   f->npending);
        return;
    }
    f->pending[f->npending].which = which;
    f->pending[f->npending].value = value;
    f->npending++;
    replay_bh_schedule_event(f->apply_bh);
}

/* @opaque: the USBNcmFault, as a pointer */
static void usb_ncm_set_fault_u32(Object *obj, Visitor *v, const char *name,
                                  void *opaque, Error **errp)
{
    USBNcmState *s = USB_NCM_BASE(obj);
    uint32_t value;

    if (!visit_type_uint32(v, name, &value, errp)) {
        return;
    }
    if (!s->faults) {
        error_setg(errp, "%s can only be set on a realized device", name);
        return;
    }
    if (value && GPOINTER_TO_UINT(opaque) != NCM_FAULT_REPLUG_SEED &&
        !usb_ncm_faults_block(s->faults, errp)) {
        return;
    }
    usb_ncm_fault_change(s->faults, GPOINTER_TO_UINT(opaque), value, errp);
}

static void usb_ncm_get_fault_u32(Object *obj, Visitor *v, const char *name,
                                  void *opaque, Error **errp)
{
    uint32_t value = usb_ncm_fault_get(USB_NCM_BASE(obj)->faults,
                                       GPOINTER_TO_UINT(opaque));

    visit_type_uint32(v, name, &value, errp);
}

static char *usb_ncm_get_fault_corrupt(Object *obj, Error **errp)
{
    USBNcmFaults *f = USB_NCM_BASE(obj)->faults;

    return g_strdup(ncm_in_corruption_names[f ? f->corrupt
                                              : NCM_CORRUPT_NONE]);
}

static void usb_ncm_set_fault_corrupt(Object *obj, const char *value,
                                      Error **errp)
{
    USBNcmState *s = USB_NCM_BASE(obj);
    USBNcmFaults *f = s->faults;
    g_autoptr(GString) names = g_string_new(NULL);
    int i;

    for (i = 0; i < NCM_CORRUPT__MAX; i++) {
        if (!strcmp(value, ncm_in_corruption_names[i])) {
            if (!f) {
                error_setg(errp, "x-fault-corrupt-in can only be set on a "
                           "realized device");
                return;
            }
            if (i != NCM_CORRUPT_NONE && !usb_ncm_faults_block(f, errp)) {
                return;
            }
            usb_ncm_fault_change(f, NCM_FAULT__MAX, i, errp);
            return;
        }
        g_string_append_printf(names, "%s%s", i ? ", " : "",
                               ncm_in_corruption_names[i]);
    }
    error_setg(errp, "x-fault-corrupt-in: unknown corruption '%s'; use one "
               "of %s", value, names->str);
}

void usb_ncm_faults_post_load(USBNcmState *s)
{
    USBNcmFaults *f = s->faults;

    if (!s->dev.attached) {
        /*
         * The stream had the function off the bus (a hostile or broken
         * stream: the source blocks migration during a replug fault):
         * come back as a replug would, or the port stays empty for good.
         */
        f->replug_down = true;
        usb_ncm_replug_schedule(f, f->replug_ms);
        usb_ncm_faults_update(s);
    }
}

void usb_ncm_faults_realize(USBNcmState *s)
{
    USBNcmFaults *f = g_new0(USBNcmFaults, 1);

    f->s = s;
    f->link_timer = timer_new_ms(QEMU_CLOCK_VIRTUAL,
                                 usb_ncm_fault_link_restore, f);
    f->busy_timer = timer_new_ms(QEMU_CLOCK_VIRTUAL, usb_ncm_fault_busy_end,
                                 f);
    f->replug_timer = timer_new_ms(QEMU_CLOCK_VIRTUAL, usb_ncm_replug_timer,
                                   f);
    f->apply_bh = qemu_bh_new_guarded(usb_ncm_fault_apply_bh, f,
                                      &DEVICE(s)->mem_reentrancy_guard);
    f->replug_ms = 200;
    f->replug_seed = 1;
    s->faults = f;
    ncm_function_set_fault_hooks(&s->fn, &usb_ncm_fault_hooks, f);
}

void usb_ncm_faults_unrealize(USBNcmState *s)
{
    USBNcmFaults *f = s->faults;

    if (!f) {
        return;
    }
    if (f->blocker) {
        migrate_del_blocker(&f->blocker);
    }
    timer_free(f->link_timer);
    timer_free(f->busy_timer);
    timer_free(f->replug_timer);
    qemu_bh_delete(f->apply_bh);
    ncm_function_set_fault_hooks(&s->fn, NULL, NULL);
    s->faults = NULL;
    g_free(f);
}

void usb_ncm_add_debug_props(Object *obj)
{
    size_t i;

    object_property_add(obj, "x-stats", "UsbNcmStats", usb_ncm_get_stats,
                        NULL, NULL, NULL);
    for (i = 0; i < NCM_FAULT__MAX; i++) {
        object_property_add(obj, usb_ncm_fault_names[i], "uint32",
                            usb_ncm_get_fault_u32, usb_ncm_set_fault_u32,
                            NULL, GUINT_TO_POINTER(i));
    }
    object_property_add_str(obj, "x-fault-corrupt-in",
                            usb_ncm_get_fault_corrupt,
                            usb_ncm_set_fault_corrupt);
}
