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

#define USB_NCM_FN_STAT(f) { #f, offsetof(USBNcmState, fn.stats.f) },
#define USB_NCM_PACKET_STAT(f) { #f, offsetof(USBNcmState, packet_stats.f) },

/* x-stats: the function's counters and the glue's, as one */
static const struct {
    const char *name;
    size_t offset;                  /* of a uint64_t in USBNcmState */
} usb_ncm_stat_fields[] = {
    NCM_FUNCTION_COUNTERS(USB_NCM_FN_STAT)
    USB_NCM_PACKET_COUNTERS(USB_NCM_PACKET_STAT)
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
        uint64_t *field = (uint64_t *)((uint8_t *)s +
                                       usb_ncm_stat_fields[i].offset);

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
 * Fault injection is no state of a real device and does not migrate:
 * while a fault is active (any x-fault-* but x-fault-replug-seed reads
 * other than 0, or a corruption is still to come), migration is blocked.
 */
static bool usb_ncm_faults_active(USBNcmState *s)
{
    const NcmFaults *f = &s->fn.faults;

    return f->link_down || f->busy || f->drop_in_every ||
           (f->corrupt != NCM_CORRUPT_NONE && f->corrupt_remaining) ||
           s->replug_down || s->replug_every_ms;
}

/* Before a fault is set: block migration, or fail as migration runs */
static bool usb_ncm_faults_block(USBNcmState *s, Error **errp)
{
    if (s->fault_blocker) {
        return true;
    }
    error_setg(&s->fault_blocker, "usb-ncm %s: fault injection (x-fault-*) "
               "is active; it does not migrate", s->fn.cfg.name);
    return migrate_add_blocker(&s->fault_blocker, errp) >= 0;
}

void usb_ncm_faults_update(USBNcmState *s)
{
    if (s->fault_blocker && !usb_ncm_faults_active(s)) {
        migrate_del_blocker(&s->fault_blocker);
    }
}

static void usb_ncm_fault_link_restore(void *opaque)
{
    USBNcmState *s = opaque;

    ncm_function_set_fault_link_down(&s->fn, false);
    usb_ncm_schedule_wakeup(s, false, true);
    usb_ncm_flush_rx(s);
    usb_ncm_faults_update(s);
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
    usb_ncm_faults_update(s);
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

static void usb_ncm_fault_set(USBNcmState *s, USBNcmFault which,
                              uint32_t value)
{
    int64_t now = qemu_clock_get_ms(QEMU_CLOCK_VIRTUAL);

    switch (which) {
    case NCM_FAULT_LINK_DOWN_MS:
        ncm_function_set_fault_link_down(&s->fn, value != 0);
        usb_ncm_schedule_wakeup(s, false, true);
        if (value) {
            timer_mod(s->fault_link_timer, now + value);
        } else {
            timer_del(s->fault_link_timer);
            usb_ncm_flush_rx(s);
        }
        break;
    case NCM_FAULT_BUSY_MS:
        ncm_function_set_fault_busy(&s->fn, value != 0);
        if (value) {
            timer_mod(s->fault_busy_timer, now + value);
        } else {
            timer_del(s->fault_busy_timer);
            usb_ncm_fault_busy_end(s);
        }
        break;
    case NCM_FAULT_DROP_IN_EVERY:
        ncm_function_set_fault_drop_in_every(&s->fn, value);
        break;
    case NCM_FAULT_CORRUPT_COUNT:
        ncm_function_set_fault_corrupt(&s->fn, s->fn.faults.corrupt, value);
        break;
    case NCM_FAULT_REPLUG_MS:
        if (value) {
            s->replug_ms = value;
            usb_ncm_replug_detach(s);
        } else if (s->replug_down) {
            /* back at once */
            usb_ncm_replug_schedule(s, 0);
        }
        break;
    case NCM_FAULT_REPLUG_EVERY_MS:
        s->replug_every_ms = value;
        if (!value) {
            if (!s->replug_down) {
                timer_del(s->replug_timer);
            }
        } else if (!s->replug_down) {
            usb_ncm_replug_schedule(s, value);
        }
        break;
    case NCM_FAULT_REPLUG_SEED:
        s->replug_seed = value;
        break;
    default:
        g_assert_not_reached();
    }
}

static uint32_t usb_ncm_fault_get(USBNcmState *s, USBNcmFault which)
{
    switch (which) {
    case NCM_FAULT_LINK_DOWN_MS:
        return s->fn.faults.link_down;
    case NCM_FAULT_BUSY_MS:
        return s->fn.faults.busy;
    case NCM_FAULT_DROP_IN_EVERY:
        return s->fn.faults.drop_in_every;
    case NCM_FAULT_CORRUPT_COUNT:
        return s->fn.faults.corrupt_remaining;
    case NCM_FAULT_REPLUG_MS:
        return s->replug_down;
    case NCM_FAULT_REPLUG_EVERY_MS:
        return s->replug_every_ms;
    case NCM_FAULT_REPLUG_SEED:
        return s->replug_seed;
    default:
        g_assert_not_reached();
    }
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
    if (!s->wakeup_bh) {
        error_setg(errp, "%s can only be set on a realized device", name);
        return;
    }
    if (value && GPOINTER_TO_UINT(opaque) != NCM_FAULT_REPLUG_SEED &&
        !usb_ncm_faults_block(s, errp)) {
        return;
    }
    usb_ncm_fault_set(s, GPOINTER_TO_UINT(opaque), value);
    trace_usb_ncm_fault(s->fn.cfg.name, name, value);
    usb_ncm_faults_update(s);
}

static void usb_ncm_get_fault_u32(Object *obj, Visitor *v, const char *name,
                                  void *opaque, Error **errp)
{
    uint32_t value = usb_ncm_fault_get(USB_NCM_BASE(obj),
                                       GPOINTER_TO_UINT(opaque));

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
    g_autoptr(GString) names = g_string_new(NULL);
    int i;

    for (i = 0; i < NCM_CORRUPT__MAX; i++) {
        if (!strcmp(value, ncm_in_corruption_names[i])) {
            if (i != NCM_CORRUPT_NONE && !usb_ncm_faults_block(s, errp)) {
                return;
            }
            ncm_function_set_fault_corrupt(
                &s->fn, i, MAX(s->fn.faults.corrupt_remaining, 1));
            usb_ncm_faults_update(s);
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
    if (!s->dev.attached) {
        /*
         * The stream had the function off the bus (a hostile or broken
         * stream: the source blocks migration during a replug fault):
         * come back as a replug would, or the port stays empty for good.
         */
        s->replug_down = true;
        usb_ncm_replug_schedule(s, s->replug_ms);
        usb_ncm_faults_update(s);
    }
}

void usb_ncm_faults_realize(USBNcmState *s)
{
    s->fault_link_timer = timer_new_ms(QEMU_CLOCK_VIRTUAL,
                                       usb_ncm_fault_link_restore, s);
    s->fault_busy_timer = timer_new_ms(QEMU_CLOCK_VIRTUAL,
                                       usb_ncm_fault_busy_end, s);
    s->replug_timer = timer_new_ms(QEMU_CLOCK_VIRTUAL, usb_ncm_replug_timer,
                                   s);
    s->replug_ms = 200;
    s->replug_seed = 1;
}

void usb_ncm_faults_unrealize(USBNcmState *s)
{
    if (s->fault_blocker) {
        migrate_del_blocker(&s->fault_blocker);
    }
    timer_free(s->fault_link_timer);
    timer_free(s->fault_busy_timer);
    timer_free(s->replug_timer);
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
