/*
 * usb-ncm-dl qtest: lifecycle (queued transfers across resets,
 * alternate settings, configuration, hot-unplug; NAK mode; migration)
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "fixture.h"

/* Cases: surprise removal and reset */

static void test_device_del(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) rx = ncm_frames_new();
    g_autoptr(GPtrArray) tx = ncm_frames_new();
    g_autoptr(GByteArray) ntb = NULL;
    QXhciTransfer *in, *notify;
    NcmHostLayout l;
    unsigned i;

    ncm_set_alt(e, 1);
    ncm_check_marker(e, 4000);
    /* traffic in flight: IN NTBs queued, an OUT NTB half sent, TDs wait */
    for (i = 0; i < 100; i++) {
        ncm_frames_add(rx, ncm_mac, 4100 + i, 1000);
    }
    ncm_sock_send_frames(e, rx);
    for (i = 0; i < 10; i++) {
        ncm_frames_add(tx, ncm_bcast_mac, 4500 + i, 1000);
    }
    l = ncm_out_layout(e);
    ntb = ncm_ntb_build(&l, tx, 0);
    ncm_out_td(e, ntb->data, 2 * e->mps);
    notify = qxhci_submit(e->dev, e->ep_notify.address, NULL, 16);
    in = qxhci_submit(e->dev, e->ep_in.address, NULL, 2048);
    qxhci_step(e->xhci);

    ncm_migrate_each_stop(e, "device_del");
    qtest_qmp_device_del(e->qts, "ncm0");
    g_assert_cmpint(qxhci_take_port_events(e->xhci, e->port), >, 0);
    g_assert(!(qxhci_portsc(e->xhci, e->port) & 1));
    g_assert(e->dev->gone);
    qxhci_wait(in, 10 * 1000 * 1000);
    qxhci_wait(notify, 10 * 1000 * 1000);
    g_assert(in->done && notify->done);
    qxhci_transfer_free(in);
    qxhci_transfer_free(notify);
    qxhci_device_free(e->dev);
    e->dev = NULL;

    /* frames for nobody, then a new adapter on the same netdev */
    ncm_sock_send_frames(e, rx);
    ncm_sock_settle(e);
    ncm_assert_alive(e);
    qtest_qmp_device_add(e->qts, c->model, "ncm1",
                         "{'bus': 'xhci.0', 'netdev': 'n0', "
                         "'mac': '" NCM_MAC_STR "'}");
    e->port = qxhci_find_connected_port(e->xhci);
    g_assert_cmpint(e->port, >, 0);
    ncm_enumerate(e);
    ncm_set_alt(e, 1);
    ncm_check_marker(e, 4600);
    ncm_check_rx_frame(e, 4700, 500);
}

static void test_port_reset(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) tx = ncm_frames_new();
    g_autoptr(GByteArray) ntb = NULL;
    NcmHostLayout l;
    uint8_t b[4];
    uint32_t actual = 0;
    unsigned i;

    stl_le_p(b, 4096);
    g_assert_cmpint(ncm_class_out(e, NCM_SET_NTB_INPUT_SIZE, 0, b, 4),
                    ==, QXHCI_CC_SUCCESS);
    ncm_set_alt(e, 1);
    for (i = 0; i < 10; i++) {
        ncm_frames_add(tx, ncm_bcast_mac, 5000 + i, 1000);
    }
    l = ncm_out_layout(e);
    ntb = ncm_ntb_build(&l, tx, 0);
    /* half an NTB, then the port resets */
    ncm_out_td(e, ntb->data, 2 * e->mps);
    g_assert_cmpint(qxhci_port_reset(e->xhci, e->port), ==,
                    c->super ? QXHCI_SPEED_SUPER : QXHCI_SPEED_HIGH);
    qxhci_device_free(e->dev);
    e->dev = NULL;
    ncm_enumerate(e);

    /* back to power-on defaults */
    g_assert_cmpint(ncm_class_in(e, NCM_GET_NTB_INPUT_SIZE, 0, b, 4,
                                 &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(ldl_le_p(b), ==, e->p.in_max);
    ncm_set_alt(e, 1);
    /* the rest of the interrupted NTB is just a malformed transfer */
    ncm_send(e, ntb->data + 2 * e->mps, ntb->len - 2 * e->mps);
    ncm_sock_expect_silence(e, 20);
    ncm_check_marker(e, 5100);
    ncm_check_rx_frame(e, 5200, 1514);
}

/*
 * A port reset leaves the device unconfigured (USB 2.0 9.1.1.3), but
 * QEMU's USB core keeps the USBDevice's configuration and alternate
 * settings until the next SET_CONFIGURATION.  Migrated before the guest
 * enumerates it again, the source saved configuration 1 and alternate
 * setting 1 with the data interface off, which the destination refused
 * ("data interface state disagrees with its alternate setting"): found
 * by usb-ncm-dl-fuzz's "migrate here" (PORTSC.PR, then a migration).
 */
static void test_migrate_after_port_reset(NcmEnv *e, const NcmCase *c)
{
    g_autofree char *file = g_strdup_printf("%s/usb-ncm-mig-pr-%d",
                                            g_get_tmp_dir(), getpid());
    QTestState *dst;
    int sock = -1;

    ncm_set_alt(e, 1);
    g_assert_cmpint(qxhci_port_reset(e->xhci, e->port), ==,
                    c->super ? QXHCI_SPEED_SUPER : QXHCI_SPEED_HIGH);
    dst = ncm_migrate_via_file(e, file, NULL, &sock);
    unlink(file);
    g_assert(dst);
    ncm_follow_migration(e, dst, sock);
    qxhci_device_free(e->dev);
    e->dev = NULL;
    ncm_enumerate(e);
    ncm_set_alt(e, 1);
    ncm_check_rx_frame(e, 36900, 800);
}

/* The driver's rings go round many times; transfers stay correct. */
static void test_ring_wrap(NcmEnv *e, const NcmCase *c)
{
    unsigned i;

    ncm_set_alt(e, 1);
    for (i = 0; i < 40; i++) {
        g_autoptr(GPtrArray) f = ncm_frames_new();

        ncm_frames_add(f, ncm_bcast_mac, 6000 + i, 60 + i * 37);
        ncm_send_frames(e, f);
        ncm_sock_expect_frames(e, f);
        ncm_sock_send_frames(e, f);
        ncm_expect_rx(e, f);
        if (i % 4 == 0) {
            g_assert_cmpint(qxhci_cmd_noop(e->xhci), ==, QXHCI_CC_SUCCESS);
        }
    }
    g_assert_cmpuint(qxhci_event_ring_wraps(e->xhci), >, 0);
    g_assert_cmpuint(qxhci_cmd_ring_wraps(e->xhci), >, 0);
}

/*
 * Several TDs per endpoint.  A guest queues as many as it likes (Linux's
 * usbnet keeps several bulk IN URBs in flight), and resets, alternate
 * settings, configurations, Stop Endpoint, unplugging and the busy fault
 * may meet them at any point.  Whatever happens, QEMU lives, every TD
 * completes or is cancelled, every OUT TD the device completed reached
 * the netdev exactly once, and the device goes on working.
 */

typedef enum QueueEvent {
    QEV_NONE,
    QEV_SET_INTERFACE_0,
    QEV_SET_INTERFACE_1,
    QEV_SET_CONFIGURATION_0,
    QEV_SET_CONFIGURATION_1,
    QEV_PORT_RESET,
    QEV_STOP_ENDPOINT,
    QEV_DEVICE_DEL,
    QEV_FAULT_BUSY,
    QEV__MAX,
} QueueEvent;

static const char *const queue_event_names[QEV__MAX] = {
    [QEV_NONE] = "none",
    [QEV_SET_INTERFACE_0] = "set-interface-0",
    [QEV_SET_INTERFACE_1] = "set-interface-1",
    [QEV_SET_CONFIGURATION_0] = "set-configuration-0",
    [QEV_SET_CONFIGURATION_1] = "set-configuration-1",
    [QEV_PORT_RESET] = "port-reset",
    [QEV_STOP_ENDPOINT] = "stop-endpoint",
    [QEV_DEVICE_DEL] = "device-del",
    [QEV_FAULT_BUSY] = "fault-busy-ms",
};

/* Bulk IN TD sizes, in queue order: big, then small and odd ones */
static const uint32_t queue_in_sizes[] = { 65536, 512, 16384, 1 };
static const unsigned queue_in_counts[] = { 0, 1, 2, 4 };
static const unsigned queue_out_counts[] = { 0, 1, 2 };

typedef struct QueueCase {
    QueueEvent event;
} QueueCase;

/* One event met by @n_in IN and @n_out OUT TDs queued at once. */
static void queue_round(NcmEnv *e, QueueEvent ev, unsigned n_in,
                        unsigned n_out, uint32_t tag)
{
    g_autoptr(GPtrArray) tx = ncm_frames_new();
    g_autoptr(GPtrArray) sent = ncm_frames_new();
    g_autoptr(GPtrArray) busy_rx = ncm_frames_new();
    QXhciTransfer *in[ARRAY_SIZE(queue_in_sizes)];
    QXhciTransfer *out[4];
    NcmHostLayout l = ncm_out_layout(e);
    unsigned i, out_done = 0;
    bool gone = false;
    bool parks = ncm_parks_packets(e);

    g_test_message("event %s with %u IN and %u OUT TDs queued",
                   queue_event_names[ev], n_in, n_out);
    qxhci_hold_doorbells(e->dev, true);
    for (i = 0; i < n_out; i++) {
        g_autoptr(GPtrArray) one = ncm_frames_new();
        g_autoptr(GByteArray) ntb = NULL;

        ncm_frames_add(one, ncm_bcast_mac, tag + i, 301 + i * 64);
        ncm_frames_add(tx, ncm_bcast_mac, tag + i, 301 + i * 64);
        ntb = ncm_ntb_build(&l, one, i);
        g_assert_cmpuint(ntb->len % e->mps, !=, 0);
        out[i] = qxhci_submit(e->dev, e->ep_out.address, ntb->data,
                              ntb->len);
    }
    for (i = 0; i < n_in; i++) {
        in[i] = qxhci_submit(e->dev, e->ep_in.address, NULL,
                             queue_in_sizes[i]);
    }
    qxhci_hold_doorbells(e->dev, false);
    if (ev == QEV_FAULT_BUSY) {
        ncm_fault_set(e, "busy-ms", 1000000);
    }
    if (n_in) {
        qxhci_ring_doorbell(e->dev, e->ep_in.address);
    }
    if (n_out) {
        qxhci_ring_doorbell(e->dev, e->ep_out.address);
    }

    switch (ev) {
    case QEV_NONE:
        break;
    case QEV_SET_INTERFACE_0:
        ncm_set_alt(e, 0);
        break;
    case QEV_SET_INTERFACE_1:
        g_assert_cmpint(qxhci_control(e->dev, 0x01, QXHCI_REQ_SET_INTERFACE,
                                      1, NCM_IF_DATA, NULL, 0, NULL),
                        ==, QXHCI_CC_SUCCESS);
        /* the setting in force again: the data path starts afresh (F23) */
        e->rx_seq = 0;
        ncm_function_reset(e, false);
        break;
    case QEV_SET_CONFIGURATION_0:
    case QEV_SET_CONFIGURATION_1:
        ncm_set_configuration(e, ev == QEV_SET_CONFIGURATION_1);
        break;
    case QEV_PORT_RESET:
        g_assert_cmpint(qxhci_port_reset(e->xhci, e->port), ==,
                        e->c->super ? QXHCI_SPEED_SUPER : QXHCI_SPEED_HIGH);
        ncm_function_reset(e, true);
        break;
    case QEV_STOP_ENDPOINT:
        g_assert_cmpint(qxhci_endpoint_cancel(e->dev, e->ep_in.address),
                        ==, QXHCI_CC_SUCCESS);
        g_assert_cmpint(qxhci_endpoint_cancel(e->dev, e->ep_out.address),
                        ==, QXHCI_CC_SUCCESS);
        break;
    case QEV_DEVICE_DEL:
        ncm_migrate_each_stop(e, "device_del");
        qtest_qmp_device_del(e->qts, "ncm0");
        g_assert_cmpint(qxhci_take_port_events(e->xhci, e->port), >, 0);
        g_assert(e->dev->gone);
        gone = true;
        break;
    case QEV_FAULT_BUSY:
        if (n_in) {
            ncm_frames_add(busy_rx, ncm_mac, tag + 50, 900);
            ncm_sock_send_frames(e, busy_rx);
            ncm_sock_settle(e);
        }
        ncm_fault_set(e, "busy-ms", 0);
        break;
    default:
        g_assert_not_reached();
    }
    ncm_assert_alive(e);

    /* every TD: completed now, or waiting in a way Stop Endpoint ends */
    for (i = 0; i < 10; i++) {
        qxhci_step(e->xhci);
    }
    for (i = 0; i < n_out; i++) {
        if (out[i]->done && out[i]->cc == QXHCI_CC_SUCCESS) {
            g_assert_cmpuint(out_done, ==, i);      /* in order */
            out_done++;
        }
    }
    if (!gone && (ev == QEV_NONE || ev == QEV_FAULT_BUSY)) {
        /* nothing took the OUT TDs away: all of them complete */
        for (i = 0; i < n_out; i++) {
            g_assert(qxhci_wait(out[i], NCM_RX_TIMEOUT_NS));
            g_assert_cmpint(out[i]->cc, ==, QXHCI_CC_SUCCESS);
        }
        out_done = n_out;
    }
    if (ev == QEV_SET_INTERFACE_0 || ev == QEV_SET_INTERFACE_1 ||
        ev == QEV_SET_CONFIGURATION_0 || ev == QEV_SET_CONFIGURATION_1 ||
        ev == QEV_PORT_RESET) {
        /*
         * Handed back: the IN TDs the device held complete empty, OUT TDs
         * are read first.  In NAK mode the device holds none: an IN TD the
         * controller keeps retrying may still wait (as on hardware, the
         * host's TD outlives the request or reset until the host cancels
         * it), but none completes with data from before the event.
         */
        for (i = 0; i < n_in; i++) {
            g_assert(in[i]->done || !parks);
            g_assert_cmpuint(in[i]->done ? in[i]->actual : 0, ==, 0);
        }
        g_assert_cmpuint(out_done, ==, n_out);
    }
    if (ev == QEV_FAULT_BUSY && n_in) {
        /* the frame that came while busy went into the first IN TD */
        g_autoptr(GPtrArray) got = ncm_frames_new();

        g_assert(qxhci_wait(in[0], NCM_RX_TIMEOUT_NS));
        ncm_in_td_parse(e, in[0], e->in_size, got);
        ncm_frames_assert_equal(got, busy_rx);
    }
    for (i = 0; i < n_out; i++) {
        GByteArray *f = g_ptr_array_index(tx, i);

        if (i >= out_done) {
            break;
        }
        g_ptr_array_add(sent, g_byte_array_ref(f));
    }
    ncm_sock_expect_frames(e, sent);
    ncm_sock_expect_silence(e, 20);

    if (gone || ev == QEV_PORT_RESET) {
        /* the slot goes; its TDs with it */
        qxhci_device_free(e->dev);
        e->dev = NULL;
    }
    /* what is still queued is cancelled with Stop Endpoint */
    for (i = 0; i < n_in; i++) {
        qxhci_transfer_free(in[i]);
    }
    for (i = 0; i < n_out; i++) {
        qxhci_transfer_free(out[i]);
    }
    ncm_assert_alive(e);

    /* back to a working data interface */
    switch (ev) {
    case QEV_DEVICE_DEL:
        qtest_qmp_device_add(e->qts, e->c->model, "ncm0",
                             "{'bus': 'xhci.0', 'netdev': 'n0', "
                             "'mac': '" NCM_MAC_STR "'}");
        ncm_reenumerate(e);
        ncm_set_alt(e, 1);
        break;
    case QEV_PORT_RESET:
        ncm_reenumerate(e);
        ncm_set_alt(e, 1);
        break;
    case QEV_SET_INTERFACE_0:
        ncm_set_alt(e, 1);
        break;
    case QEV_SET_CONFIGURATION_0:
    case QEV_SET_CONFIGURATION_1:
        /* the endpoints' xHCI contexts stay; the device starts afresh */
        ncm_set_configuration(e, 1);
        g_assert_cmpint(qxhci_control(e->dev, 0x01, QXHCI_REQ_SET_INTERFACE,
                                      1, NCM_IF_DATA, NULL, 0, NULL),
                        ==, QXHCI_CC_SUCCESS);
        e->rx_seq = 0;
        ncm_function_reset(e, false);
        break;
    default:
        break;
    }
    ncm_queue_check_traffic(e, tag + 100);
}

static void test_queue(NcmEnv *e, const NcmCase *c)
{
    const QueueCase *q = c->data;
    unsigned i, j, n = 0;

    ncm_set_alt(e, 1);
    ncm_mark(e);
    for (i = 0; i < ARRAY_SIZE(queue_in_counts); i++) {
        for (j = 0; j < ARRAY_SIZE(queue_out_counts); j++) {
            queue_round(e, q->event, queue_in_counts[i],
                        queue_out_counts[j], 20000 + n++ * 200);
        }
    }
    if (q->event != QEV_DEVICE_DEL) {
        ncm_assert_deltas(e, { "bad_requests", 0 },
                          { "out_overflow_bytes", 0 });
    }
}

/* The three sequences that aborted QEMU, as a usbfs program sent them */
typedef enum QueueAbort {
    ABORT_SMALL_TD_BEHIND_PARKED,   /* 64 KiB parked, 512 queued, a frame */
    ABORT_SET_INTERFACE,            /* two 64 KiB queued, SET_INTERFACE 0 */
    ABORT_SET_CONFIGURATION,        /* two 64 KiB queued, SET_CONFIG 1 */
} QueueAbort;

static void test_queue_abort(NcmEnv *e, const NcmCase *c)
{
    const QueueAbort *how = c->data;
    g_autoptr(GPtrArray) rx = ncm_frames_new();
    g_autoptr(GPtrArray) got = ncm_frames_new();
    QXhciTransfer *t[2];
    unsigned i;

    ncm_set_alt(e, 1);
    qxhci_hold_doorbells(e->dev, true);
    t[0] = qxhci_submit(e->dev, e->ep_in.address, NULL, 65536);
    t[1] = qxhci_submit(e->dev, e->ep_in.address, NULL,
                        *how == ABORT_SMALL_TD_BEHIND_PARKED ? 512 : 65536);
    qxhci_hold_doorbells(e->dev, false);
    qxhci_ring_doorbell(e->dev, e->ep_in.address);
    for (i = 0; i < 5; i++) {
        qxhci_step(e->xhci);
    }
    switch (*how) {
    case ABORT_SMALL_TD_BEHIND_PARKED:
        /* an ARP request; the small TD waits for the next NTB */
        ncm_frames_add(rx, ncm_bcast_mac, 30000, 60);
        ncm_frames_add(got, ncm_mac, 30001, 98);
        ncm_in_fill_in_turn(e, t, rx, got, 512);
        break;
    case ABORT_SET_INTERFACE:
        ncm_set_alt(e, 0);
        g_assert(t[0]->done && t[1]->done);
        g_assert_cmpuint(t[0]->actual + t[1]->actual, ==, 0);
        ncm_set_alt(e, 1);
        break;
    case ABORT_SET_CONFIGURATION:
        ncm_set_configuration(e, 1);
        g_assert(t[0]->done && t[1]->done);
        g_assert_cmpuint(t[0]->actual + t[1]->actual, ==, 0);
        g_assert_cmpint(qxhci_control(e->dev, 0x01, QXHCI_REQ_SET_INTERFACE,
                                      1, NCM_IF_DATA, NULL, 0, NULL),
                        ==, QXHCI_CC_SUCCESS);
        e->rx_seq = 0;
        ncm_function_reset(e, false);
        break;
    }
    qxhci_transfer_free(t[0]);
    qxhci_transfer_free(t[1]);
    ncm_assert_alive(e);
    ncm_queue_check_traffic(e, 30100);
}

/*
 * x-park-packets=off: the OHCI way, every empty bulk IN NAKs and OUT is
 * read at once; data still flows both ways through queued TDs.
 */
static void test_nak_mode(NcmEnv *e, const NcmCase *c)
{
    ncm_set_alt(e, 1);
    ncm_mark(e);
    ncm_queue_check_traffic(e, 35000);
    ncm_assert_deltas(e, { "in_parked", 0 });
    g_assert_cmpuint(ncm_delta(e, "in_naks"), >, 0);
    ncm_assert_deltas(e, { "out_deferred_packets", 0 });
}

/*
 * Migration.  The machine goes to a file and comes back in a new QEMU
 * (as virtio-net-failover-test does); the xHCI driver follows it there
 * with its rings and pending TDs.
 */

typedef enum MigCase {
    MIG_MID_TRANSFER,       /* same device: state and data carry over */
    MIG_REFUSE_INPUT_SIZE,  /* destination's ntb-in-max-size too small */
    MIG_REFUSE_OUT_BUFFER,  /* destination's OUT buffer too small */
    MIG_REFUSE_DATAGRAMS,   /* the stream's IN builder holds 1025 */
} MigCase;

/*
 * The IN builder's count of datagrams in a saved stream, edited to one
 * more than the builder's NCM_MAX_DATAGRAMS: the count precedes the
 * NDP offset and the (offset, length) pairs, found by the lengths
 * @lens[0..@n) of the datagrams it holds.
 */
static void mig_edit_in_datagrams(const char *file, const uint32_t *lens,
                                  unsigned n)
{
    g_autofree char *buf = NULL;
    uint8_t *b;
    gsize len, i;
    unsigned j;

    g_assert(g_file_get_contents(file, &buf, &len, NULL));
    b = (uint8_t *)buf;
    for (i = 12; i + 8 * n <= len; i++) {
        for (j = 0; j < n && ldl_be_p(b + i + 8 * j) == lens[j]; j++) {
            continue;
        }
        if (j == n && ldl_be_p(b + i - 12) == n) {
            break;
        }
    }
    g_assert_cmpuint(i + 8 * n, <=, len);
    stl_be_p(b + i - 12, 1025);
    g_assert(g_file_set_contents(file, buf, len, NULL));
}

static void test_migrate(NcmEnv *e, const NcmCase *c)
{
    const MigCase *m = c->data;
    g_autoptr(GPtrArray) rx = ncm_frames_new();
    g_autoptr(GPtrArray) got = ncm_frames_new();
    g_autoptr(GPtrArray) tx = ncm_frames_new();
    g_autoptr(GByteArray) ntb = NULL;
    g_autofree char *file = g_strdup_printf("%s/usb-ncm-mig-%d",
                                            g_get_tmp_dir(), getpid());
    const char *dst_props = NULL;
    g_autoptr(GPtrArray) first = ncm_frames_new();
    g_autoptr(QDict) src_stats = NULL;
    QXhciTransfer *in[3];
    QTestState *dst;
    NcmHostLayout l;
    uint8_t b[4];
    uint32_t actual = 0, half;
    int sock = -1;
    unsigned i;

    /* negotiated state that differs from the defaults */
    g_assert_cmpint(ncm_class_out(e, NCM_SET_NTB_FORMAT, 1, NULL, 0), ==,
                    QXHCI_CC_SUCCESS);
    e->ntb32 = true;
    stl_le_p(b, 16384);
    g_assert_cmpint(ncm_class_out(e, NCM_SET_NTB_INPUT_SIZE, 0, b, 4), ==,
                    QXHCI_CC_SUCCESS);
    e->in_size = 16384;
    ncm_set_alt(e, 1);
    e->ntb32 = true;
    e->in_size = 16384;
    ncm_check_rx_frame(e, 36000, 300);

    /* an OUT transfer half way: two full packets, no end yet */
    for (i = 0; i < 3; i++) {
        ncm_frames_add(tx, ncm_bcast_mac, 36100 + i, 600 + i * 100);
    }
    l = ncm_out_layout(e);
    ntb = ncm_ntb_build(&l, tx, 1);
    half = 2 * e->mps;
    g_assert_cmpuint(ntb->len, >, half);
    if (*m == MIG_REFUSE_OUT_BUFFER) {
        /* more than a zlp=auto device's 64 KiB buffer holds */
        g_autofree uint8_t *zeros = g_malloc0(32768);

        for (i = 0; i < 3; i++) {
            ncm_out_td(e, zeros, 32768);
        }
        dst_props = "zlp=auto";
    } else {
        ncm_out_td(e, ntb->data, half);
    }

    /*
     * An IN NTB under construction in the host's waiting TD (built in
     * place), kept there by IN coalescing (in-coalesce-us=200, the
     * default): three TDs queued, the first takes a frame at once, and
     * with two left the host is busy, so the next NTB waits for more.
     * The virtual clock does not move before the migration.
     */
    ncm_in_submit_queued(e, in, 3, 16384);
    ncm_frames_add(first, ncm_mac, 36150, 300);
    ncm_sock_send_frames(e, first);
    g_assert(qxhci_wait(in[0], NCM_RX_TIMEOUT_NS));
    ncm_in_td_parse(e, in[0], 16384, got);
    ncm_frames_assert_equal(got, first);
    qxhci_transfer_free(in[0]);
    g_ptr_array_set_size(got, 0);
    for (i = 0; i < 3; i++) {
        ncm_frames_add(rx, i % 2 ? ncm_mac : ncm_bcast_mac, 36200 + i,
                       *m == MIG_REFUSE_INPUT_SIZE ? 1514 : 200 + i * 300);
    }
    if (*m == MIG_REFUSE_INPUT_SIZE) {
        dst_props = "ntb-in-max-size=4096";
    } else if (*m == MIG_MID_TRANSFER) {
        /* the destination's host differs: no NTB is kept there */
        dst_props = "in-coalesce-us=0";
    }
    ncm_sock_send_frames(e, rx);
    ncm_sock_settle_by(e, 1);               /* 1 ns a step: kept */
    g_assert(!in[1]->done);
    ncm_mark(e);

    if (*m == MIG_REFUSE_DATAGRAMS) {
        uint32_t lens[3];

        for (i = 0; i < 3; i++) {
            lens[i] = ((GByteArray *)g_ptr_array_index(rx, i))->len;
        }
        ncm_migrate_save(e, file);
        mig_edit_in_datagrams(file, lens, 3);
        dst = ncm_migrate_load(e, file, NULL, &sock);
    } else {
        dst = ncm_migrate_via_file(e, file, dst_props, &sock);
    }
    unlink(file);
    if (*m != MIG_MID_TRANSFER) {
        /* refused, and said so; the source is stopped but alive */
        g_assert(!dst);
        ncm_assert_alive(e);
        qxhci_transfer_free(in[1]);
        qxhci_transfer_free(in[2]);
        qtest_qmp_assert_success(e->qts, "{'execute': 'cont'}");
        return;
    }
    g_assert(dst);
    /* saving took the datagrams out of the source's TD */
    ncm_assert_deltas(e, { "in_rescued_datagrams", rx->len });
    src_stats = ncm_stats(e);
    ncm_follow_migration(e, dst, sock);
    /* what follows reads the destination's own counters */
    ncm_migrate_each_stop(e, "the case's own migration");
    /* the counters GET_ETHERNET_STATISTIC reports came along */
    ncm_assert_eth_stats_kept(e, src_stats);
    /* the debug counters did not: they start from zero */
    g_assert_cmpint(ncm_qom_get_stat(e, "in_rescued_datagrams"), ==, 0);
    ncm_mark(e);

    /* the NTB under construction arrives whole, in sequence, as NTB32 */
    g_assert(qxhci_wait(in[1], NCM_RX_TIMEOUT_NS));
    ncm_in_td_parse(e, in[1], 16384, got);
    ncm_frames_assert_equal(got, rx);
    qxhci_transfer_free(in[1]);
    /* the third TD waits on */
    for (i = 0; i < 5; i++) {
        qxhci_step(e->xhci);
    }
    g_assert(!in[2]->done);
    /* and takes the next frame */
    g_ptr_array_set_size(first, 0);
    g_ptr_array_set_size(got, 0);
    ncm_frames_add(first, ncm_mac, 36160, 400);
    ncm_sock_send_frames(e, first);
    g_assert(qxhci_wait(in[2], NCM_RX_TIMEOUT_NS));
    ncm_in_td_parse(e, in[2], 16384, got);
    ncm_frames_assert_equal(got, first);
    qxhci_transfer_free(in[2]);

    /* the OUT transfer goes on where it was */
    ncm_send(e, ntb->data + half, ntb->len - half);
    ncm_sock_expect_frames(e, tx);

    /* what was negotiated is still in force */
    g_assert_cmpint(ncm_class_in(e, NCM_GET_NTB_INPUT_SIZE, 0, b, 4,
                                 &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(ldl_le_p(b), ==, 16384);
    g_assert_cmpint(ncm_class_in(e, NCM_GET_NTB_FORMAT, 0, b, 2, &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(lduw_le_p(b), ==, 1);
    /* the destination sent them (its counters start at the migration) */
    g_assert_cmpint(ncm_qom_get_stat(e, "in_ntbs"), ==, 2);
    ncm_assert_deltas(e, { "out_datagrams", tx->len },
                      { "in_flushed_datagrams", 0 });
    ncm_queue_check_traffic(e, 36300);
}

/*
 * A stream is untrusted input, the USBDevice part that QEMU's USB core
 * writes for the device included: a saved stream is edited in place and
 * the destination must refuse it, naming the field, or use it safely.
 */
typedef enum MigEdit {
    MIG_EDIT_USB_STATE,         /* USBDevice.state: no such state */
    MIG_EDIT_USB_SETUP_LEN,     /* control data stage beyond data_buf */
    MIG_EDIT_USB_SETUP_INDEX,   /* setup_index past setup_len */
    MIG_EDIT_USB_SETUP_STATE,   /* no such control stage */
    MIG_EDIT_USB_ATTACHED,      /* configured, yet never reset */
    MIG_EDIT__MAX,              /* the edits above are refused */
    /* off the bus while the port has it: loaded as detached */
    MIG_EDIT_USB_NOTATTACHED = MIG_EDIT__MAX,
} MigEdit;

static const char *const mig_edit_names[MIG_EDIT__MAX] = {
    [MIG_EDIT_USB_STATE] = "usb-state",
    [MIG_EDIT_USB_SETUP_LEN] = "usb-setup-len",
    [MIG_EDIT_USB_SETUP_INDEX] = "usb-setup-index",
    [MIG_EDIT_USB_SETUP_STATE] = "usb-setup-state",
    [MIG_EDIT_USB_ATTACHED] = "usb-attached-configured",
};

/* USBDevice fields at the start of the usb-ncm section (hw/usb/bus.c) */
enum {
    USBDEV_ADDR = 0,
    USBDEV_STATE = 1,
    USBDEV_REMOTE_WAKEUP = 5,
    USBDEV_SETUP_STATE = 9,
    USBDEV_SETUP_LEN = 13,
    USBDEV_SETUP_INDEX = 17,
    USBDEV_SETUP_BUF = 21,
    USBDEV_LEN = 29,
};

/*
 * Offset of the first field of the usb-ncm section: its header ends with
 * the idstr ".../usb-ncm", instance 0 and version 1 (savevm.c).
 */
static size_t mig_find_section(const uint8_t *b, size_t len)
{
    static const uint8_t tail[] = "/usb-ncm\0\0\0\0\0\0\0\1";
    const size_t n = sizeof(tail) - 1;
    size_t i;

    for (i = 0; i + n + USBDEV_LEN <= len; i++) {
        if (!memcmp(b + i, tail, n)) {
            return i + n;
        }
    }
    g_assert_not_reached();
}

static void mig_edit(const char *file, MigEdit edit)
{
    g_autofree char *buf = NULL;
    gsize len;
    uint8_t *b, *u;
    size_t at;

    g_assert(g_file_get_contents(file, &buf, &len, NULL));
    b = (uint8_t *)buf;
    at = mig_find_section(b, len);
    u = b + at;
    /* what the source wrote: an addressed device, no control transfer */
    g_assert_cmpuint(ldl_be_p(u + USBDEV_STATE), ==, 3);
    switch (edit) {
    case MIG_EDIT_USB_STATE:
        stl_be_p(u + USBDEV_STATE, 7);
        break;
    case MIG_EDIT_USB_SETUP_LEN:
        /* an IN data stage of 32 KiB: do_token_in() would read past */
        stl_be_p(u + USBDEV_SETUP_STATE, 2);
        stl_be_p(u + USBDEV_SETUP_LEN, 32768);
        stl_be_p(u + USBDEV_SETUP_INDEX, 4096);
        u[USBDEV_SETUP_BUF] = 0x80;
        break;
    case MIG_EDIT_USB_SETUP_INDEX:
        stl_be_p(u + USBDEV_SETUP_STATE, 2);
        stl_be_p(u + USBDEV_SETUP_LEN, 64);
        stl_be_p(u + USBDEV_SETUP_INDEX, 0x7ffff000);
        break;
    case MIG_EDIT_USB_SETUP_STATE:
        stl_be_p(u + USBDEV_SETUP_STATE, 0x4000);
        break;
    case MIG_EDIT_USB_ATTACHED:
        stl_be_p(u + USBDEV_STATE, 1);
        break;
    case MIG_EDIT_USB_NOTATTACHED:
        stl_be_p(u + USBDEV_STATE, 0);
        break;
    default:
        g_assert_not_reached();
    }
    g_assert(g_file_set_contents(file, buf, len, NULL));
}

static void test_migrate_edited(NcmEnv *e, const NcmCase *c)
{
    const MigEdit *edit = c->data;
    g_autofree char *file = g_strdup_printf("%s/usb-ncm-mig-e-%d",
                                            g_get_tmp_dir(), getpid());
    QTestState *dst;
    int sock = -1;

    ncm_set_alt(e, 1);
    ncm_check_rx_frame(e, 36500, 300);
    ncm_migrate_save(e, file);
    mig_edit(file, *edit);
    dst = ncm_migrate_load(e, file, NULL, &sock);
    unlink(file);
    /* refused, and said so; the source is stopped but alive */
    g_assert(!dst);
    ncm_assert_alive(e);
    qtest_qmp_assert_success(e->qts, "{'execute': 'cont'}");
    ncm_check_rx_frame(e, 36501, 300);
}

/*
 * A stream that says the device was never reset ('attached') while the
 * controller has it addressed loads (nothing in it is out of range, and
 * an unconfigured device has nothing to disagree with), but its first
 * transfer must not abort QEMU: the core answers as for a device that is
 * not there, and a port reset brings it back.
 */
static void test_migrate_attached(NcmEnv *e, const NcmCase *c)
{
    g_autofree char *file = g_strdup_printf("%s/usb-ncm-mig-a-%d",
                                            g_get_tmp_dir(), getpid());
    uint8_t desc[18];
    uint32_t actual = 0;
    QTestState *dst;
    int sock = -1;

    ncm_set_configuration(e, 0);
    ncm_migrate_save(e, file);
    mig_edit(file, MIG_EDIT_USB_ATTACHED);
    dst = ncm_migrate_load(e, file, NULL, &sock);
    unlink(file);
    g_assert(dst);
    ncm_follow_migration(e, dst, sock);

    g_assert_cmpint(ncm_get_descriptor(e, 1, 0, 0, desc, sizeof(desc),
                                       &actual), !=, QXHCI_CC_SUCCESS);
    ncm_assert_alive(e);
    ncm_reenumerate(e);
    ncm_set_alt(e, 1);
    ncm_queue_check_traffic(e, 36800);
}

/*
 * A stream whose USBDevice.state says 'notattached' (off the bus) while
 * the controller's port, from the same stream, still has the device: it
 * loads as a device off the bus, so the controller must say so too.
 * Before, the controller kept the port connected and skipped the
 * detached device: the guest's transfers never completed and it never
 * saw why.  Now the guest sees the port empty, its transfers end with
 * it, and the device comes back as after a replug.
 */
static void test_migrate_notattached(NcmEnv *e, const NcmCase *c)
{
    g_autofree char *file = g_strdup_printf("%s/usb-ncm-mig-n-%d",
                                            g_get_tmp_dir(), getpid());
    QXhciTransfer *t;
    int64_t deadline;
    QTestState *dst;
    int sock = -1;

    ncm_set_alt(e, 1);
    ncm_check_marker(e, 36900);
    ncm_migrate_save(e, file);
    mig_edit(file, MIG_EDIT_USB_NOTATTACHED);
    dst = ncm_migrate_load(e, file, NULL, &sock);
    unlink(file);
    g_assert(dst);
    ncm_follow_migration(e, dst, sock);

    /* GET_DESCRIPTOR(device): ends within 100 ms, one way or the other */
    t = qxhci_control_submit(e->dev, 0x80, QXHCI_REQ_GET_DESCRIPTOR, 0x0100,
                             0, NULL, 18);
    g_assert(t);
    deadline = ncm_clock_ns(e) + 100 * NCM_MS;
    while (!t->done) {
        g_assert_cmpint(ncm_clock_ns(e), <, deadline);
        qxhci_step(e->xhci);
    }
    g_test_message("the transfer ended with %d", t->cc);
    g_assert(e->dev->gone);
    g_assert_cmpint(t->cc, ==, QXHCI_CC_CANCELLED);
    g_assert(!(qxhci_portsc(e->xhci, e->port) & 1));
    g_assert_cmpint(qxhci_take_port_events(e->xhci, e->port), >, 0);
    qxhci_transfer_free(t);

    deadline = ncm_clock_ns(e) + 5000 * NCM_MS;
    while (!(qxhci_portsc(e->xhci, e->port) & 1)) {
        g_assert_cmpint(ncm_clock_ns(e), <, deadline);
        qxhci_step(e->xhci);
    }
    ncm_reenumerate(e);
    ncm_set_alt(e, 1);
    ncm_queue_check_traffic(e, 37000);
}

/*
 * Fault injection does not migrate: while a fault is active, migration
 * is blocked (the migrate command fails, naming it); once it has ended,
 * by its timer, by being set to 0 or, for a corruption, by the last
 * corrupted NTB going out, the machine migrates and traffic resumes.
 */
typedef enum MigFault {
    MIG_FAULT_LINK_DOWN,
    MIG_FAULT_BUSY,
    MIG_FAULT_DROP_IN,
    MIG_FAULT_CORRUPT,
    MIG_FAULT_REPLUG,
    MIG_FAULT__MAX,
} MigFault;

static const char *const mig_fault_names[MIG_FAULT__MAX] = {
    [MIG_FAULT_LINK_DOWN] = "link-down",
    [MIG_FAULT_BUSY] = "busy",
    [MIG_FAULT_DROP_IN] = "drop-in",
    [MIG_FAULT_CORRUPT] = "corrupt",
    [MIG_FAULT_REPLUG] = "replug",
};

/*
 * Every fault the build has blocks migration while it is active, and a
 * parameter of one does not by itself.  The list is QEMU's own: the
 * properties of the usb-ncm-fault type, each described as a "fault:" or
 * a "parameter:", so that a new fault cannot miss this test.  A fault
 * that is a number is set to 60000 (ms, or NTBs), one that is a name to
 * the first name but "none" that the property's error lists.
 */
static void test_migrate_every_fault_blocks(NcmEnv *e, const NcmCase *c)
{
    QDict *rsp;
    const QListEntry *ent;
    unsigned nfaults = 0, nparams = 0;

    ncm_set_alt(e, 1);
    ncm_fault_object(e);
    ncm_migrate_assert_unblocked(e);
    rsp = qtest_qmp(e->qts, "{'execute': 'qom-list-properties', "
                    "'arguments': {'typename': 'usb-ncm-fault'}}");
    g_assert(qdict_haskey(rsp, "return"));
    QLIST_FOREACH_ENTRY(qdict_get_qlist(rsp, "return"), ent) {
        QDict *prop = qobject_to(QDict, qlist_entry_obj(ent));
        const char *name = qdict_get_str(prop, "name");
        const char *type = qdict_get_str(prop, "type");
        const char *desc = qdict_get_try_str(prop, "description") ?: "";
        bool fault = g_str_has_prefix(desc, "fault:");

        if (!strcmp(name, "type") || !strcmp(name, "device")) {
            continue;
        }
        if (!fault && !g_str_has_prefix(desc, "parameter:")) {
            g_test_message("usb-ncm-fault property %s says neither "
                           "'fault:' nor 'parameter:'", name);
            g_assert_not_reached();
        }
        g_test_message("%s %s (%s)", fault ? "fault" : "parameter", name,
                       type);
        if (!strcmp(type, "uint32")) {
            int64_t was = ncm_fault_get_int(e, name);

            ncm_fault_set(e, name, 60000);
            if (fault) {
                ncm_migrate_assert_blocked(e);
                ncm_fault_set(e, name, 0);
            } else {
                ncm_migrate_assert_unblocked(e);
                ncm_fault_set(e, name, was);
            }
        } else {
            QDict *r, *err;
            g_auto(GStrv) names = NULL;
            const char *list;

            g_assert_cmpstr(type, ==, "string");
            g_assert(fault);
            r = qtest_qmp(e->qts, "{'execute': 'qom-set', 'arguments': "
                          "{'path': %s, 'property': %s, 'value': '?'}}",
                          NCM_FAULT_PATH, name);
            err = qdict_get_qdict(r, "error");
            g_assert(err);
            list = strstr(qdict_get_str(err, "desc"), "use one of ");
            g_assert(list);
            names = g_strsplit(list + strlen("use one of "), ", ", -1);
            g_assert_cmpstr(names[0], ==, "none");
            g_assert(names[1]);
            qobject_unref(r);
            qtest_qmp_assert_success(e->qts, "{'execute': 'qom-set', "
                                     "'arguments': {'path': %s, "
                                     "'property': %s, 'value': %s}}",
                                     NCM_FAULT_PATH, name, names[1]);
            ncm_migrate_assert_blocked(e);
            qtest_qmp_assert_success(e->qts, "{'execute': 'qom-set', "
                                     "'arguments': {'path': %s, "
                                     "'property': %s, 'value': 'none'}}",
                                     NCM_FAULT_PATH, name);
        }
        /* what ends at once ends at the next tick (a replug's return) */
        ncm_step(e, NCM_MS);
        ncm_migrate_assert_unblocked(e);
        nfaults += fault;
        nparams += !fault;
    }
    qobject_unref(rsp);
    g_test_message("%u faults, %u parameters", nfaults, nparams);
    g_assert_cmpuint(nfaults, >=, 6);
}

static void test_migrate_fault_blocks(NcmEnv *e, const NcmCase *c)
{
    const MigFault *f = c->data;
    g_autofree char *file = g_strdup_printf("%s/usb-ncm-mig-f-%d",
                                            g_get_tmp_dir(), getpid());
    g_autoptr(GPtrArray) one = ncm_frames_new();
    QXhciTransfer *t;
    int64_t deadline;
    QTestState *dst;
    int sock = -1;

    ncm_set_alt(e, 1);
    ncm_check_rx_frame(e, 36600, 300);
    switch (*f) {
    case MIG_FAULT_LINK_DOWN:
        ncm_fault_set(e, "link-down-ms", 50);
        ncm_migrate_assert_blocked(e);
        ncm_step(e, 60 * NCM_MS);           /* its timer ends it */
        break;
    case MIG_FAULT_BUSY:
        ncm_fault_set(e, "busy-ms", 50);
        ncm_migrate_assert_blocked(e);
        ncm_step(e, 60 * NCM_MS);
        break;
    case MIG_FAULT_DROP_IN:
        ncm_fault_set(e, "drop-in-every", 3);
        ncm_migrate_assert_blocked(e);
        ncm_fault_set(e, "drop-in-every", 0);
        break;
    case MIG_FAULT_CORRUPT:
        ncm_fault_corrupt(e, "ndp-at-end");     /* one NTB */
        ncm_migrate_assert_blocked(e);
        t = qxhci_submit(e->dev, e->ep_in.address, NULL, e->in_size);
        ncm_frames_add(one, ncm_mac, 36601, 300);
        ncm_sock_send_frames(e, one);
        g_assert(qxhci_wait(t, NCM_RX_TIMEOUT_NS));
        {
            g_autofree uint8_t *buf = g_malloc(MAX(t->length, 1));

            qxhci_transfer_read(t, buf);
            ncm_oracle_catches(e, buf, t->actual, t->length);
        }
        qxhci_transfer_free(t);
        e->rx_seq++;                        /* not parsed: corrupted */
        g_assert_cmpint(ncm_fault_get_int(e, "corrupt-count"), ==, 0);
        break;
    case MIG_FAULT_REPLUG:
        ncm_fault_set(e, "replug-ms", 60000);
        g_assert_cmpint(qxhci_take_port_events(e->xhci, e->port), >, 0);
        ncm_migrate_assert_blocked(e);
        ncm_fault_set(e, "replug-ms", 0);   /* back at once */
        deadline = ncm_clock_ns(e) + 5000 * NCM_MS;
        while (!(qxhci_portsc(e->xhci, e->port) & 1)) {
            g_assert_cmpint(ncm_clock_ns(e), <, deadline);
            qxhci_step(e->xhci);
        }
        ncm_reenumerate(e);
        ncm_set_alt(e, 1);
        break;
    default:
        g_assert_not_reached();
    }

    dst = ncm_migrate_via_file(e, file, NULL, &sock);
    unlink(file);
    g_assert(dst);
    ncm_follow_migration(e, dst, sock);
    ncm_queue_check_traffic(e, 36700);
}

/*
 * Migration with IN TDs the controller fetched and has not finished: the
 * first of three completes before the migration, which leaves the second
 * parked in the device and the third queued behind it.  The endpoint
 * context must name the parked one (the ring's own dequeue pointer is
 * past all three), or the destination never runs either.  OUT data the
 * source read goes out once: none of it again from the destination.
 */
static void test_migrate_queued_tds(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) rx = ncm_frames_new();
    g_autoptr(GPtrArray) got = ncm_frames_new();
    g_autoptr(GPtrArray) tx = ncm_frames_new();
    g_autofree char *file = g_strdup_printf("%s/usb-ncm-mig-q-%d",
                                            g_get_tmp_dir(), getpid());
    QXhciTransfer *in[3];
    QTestState *dst;
    int sock = -1;
    unsigned i;

    ncm_set_alt(e, 1);
    ncm_in_submit_queued(e, in, 3, e->p.in_max);
    ncm_frames_add(rx, ncm_mac, 36400, 700);
    ncm_sock_send_frames(e, rx);
    g_assert(qxhci_wait(in[0], NCM_RX_TIMEOUT_NS));
    ncm_in_td_parse(e, in[0], e->in_size, got);
    ncm_frames_assert_equal(got, rx);
    qxhci_transfer_free(in[0]);
    ncm_frames_add(tx, ncm_bcast_mac, 36401, 900);
    ncm_send_frames(e, tx);
    ncm_sock_expect_frames(e, tx);
    for (i = 0; i < 5; i++) {
        qxhci_step(e->xhci);
    }
    g_assert(!in[1]->done && !in[2]->done);

    dst = ncm_migrate_via_file(e, file, NULL, &sock);
    unlink(file);
    g_assert(dst);
    ncm_follow_migration(e, dst, sock);
    ncm_mark(e);        /* the debug counters start from zero there */

    /* the parked TD, then the queued one, take the next NTBs */
    for (i = 1; i < 3; i++) {
        g_ptr_array_set_size(rx, 0);
        g_ptr_array_set_size(got, 0);
        ncm_frames_add(rx, i == 1 ? ncm_bcast_mac : ncm_mac, 36401 + i,
                       600 * i);
        ncm_sock_send_frames(e, rx);
        g_assert(qxhci_wait(in[i], NCM_RX_TIMEOUT_NS));
        ncm_in_td_parse(e, in[i], e->in_size, got);
        ncm_frames_assert_equal(got, rx);
        qxhci_transfer_free(in[i]);
    }
    /* the first frame out of the destination is the next one sent */
    g_ptr_array_set_size(tx, 0);
    ncm_frames_add(tx, ncm_bcast_mac, 36404, 1000);
    ncm_send_frames(e, tx);
    ncm_sock_expect_frames(e, tx);
    ncm_assert_deltas(e, { "in_ntbs", 2 }, { "out_datagrams", 1 });
    ncm_queue_check_traffic(e, 36500);
}

/*
 * savevm / loadvm (snapshot-save / snapshot-load) on a qcow2 image made
 * through QMP: the adapter's state comes back as it was saved.
 */
static bool qmp_job_wait(QTestState *qts, const char *id)
{
    gint64 deadline = g_get_monotonic_time() + 60 * G_USEC_PER_SEC;

    for (;;) {
        QDict *rsp = qtest_qmp(qts, "{'execute': 'query-jobs'}");
        QList *jobs = qdict_get_qlist(rsp, "return");
        const QListEntry *entry;
        bool done = false, ok = true;

        QLIST_FOREACH_ENTRY(jobs, entry) {
            QDict *j = qobject_to(QDict, qlist_entry_obj(entry));

            if (!strcmp(qdict_get_str(j, "id"), id) &&
                !strcmp(qdict_get_str(j, "status"), "concluded")) {
                done = true;
                if (qdict_haskey(j, "error")) {
                    g_test_message("job %s: %s", id,
                                   qdict_get_str(j, "error"));
                    ok = false;
                }
            }
        }
        qobject_unref(rsp);
        if (done) {
            qtest_qmp_assert_success(qts, "{'execute': 'job-dismiss', "
                                     "'arguments': {'id': %s}}", id);
            return ok;
        }
        g_assert(g_get_monotonic_time() < deadline);
        g_usleep(10 * 1000);
    }
}

static void test_savevm(NcmEnv *e, const NcmCase *c)
{
    g_autofree char *img = g_strdup_printf("%s/usb-ncm-snap-%d.qcow2",
                                           g_get_tmp_dir(), getpid());
    g_autoptr(GPtrArray) late = ncm_frames_new();
    QDict *rsp;
    uint8_t b[4];
    uint32_t actual = 0;

    rsp = qtest_qmp(e->qts, "{'execute': 'blockdev-create', 'arguments': "
                    "{'job-id': 'c0', 'options': {'driver': 'file', "
                    "'filename': %s, 'size': 0}}}", img);
    if (!qdict_haskey(rsp, "return")) {
        qobject_unref(rsp);
        g_test_skip("this QEMU cannot create image files");
        return;
    }
    qobject_unref(rsp);
    g_assert(qmp_job_wait(e->qts, "c0"));
    ncm_migrate_each_stop(e, "blockdev-add");
    qtest_qmp_assert_success(e->qts, "{'execute': 'blockdev-add', "
                             "'arguments': {'driver': 'file', "
                             "'node-name': 'f0', 'filename': %s}}", img);
    rsp = qtest_qmp(e->qts, "{'execute': 'blockdev-create', 'arguments': "
                    "{'job-id': 'c1', 'options': {'driver': 'qcow2', "
                    "'file': 'f0', 'size': 1048576}}}");
    if (!qdict_haskey(rsp, "return")) {
        qobject_unref(rsp);
        unlink(img);
        g_test_skip("this QEMU has no qcow2");
        return;
    }
    qobject_unref(rsp);
    g_assert(qmp_job_wait(e->qts, "c1"));
    qtest_qmp_assert_success(e->qts, "{'execute': 'blockdev-add', "
                             "'arguments': {'driver': 'qcow2', "
                             "'node-name': 'disk0', 'file': 'f0'}}");

    stl_le_p(b, 8192);
    g_assert_cmpint(ncm_class_out(e, NCM_SET_NTB_INPUT_SIZE, 0, b, 4), ==,
                    QXHCI_CC_SUCCESS);
    e->in_size = 8192;
    ncm_set_alt(e, 1);
    e->in_size = 8192;
    ncm_check_rx_frame(e, 37000, 500);

    /* a fault does not migrate: it blocks the snapshot */
    ncm_fault_set(e, "drop-in-every", 7);
    qtest_qmp_assert_success(e->qts, "{'execute': 'snapshot-save', "
                             "'arguments': {'job-id': 's1', 'tag': 'nf', "
                             "'vmstate': 'disk0', 'devices': ['disk0']}}");
    g_assert(!qmp_job_wait(e->qts, "s1"));
    ncm_fault_set(e, "drop-in-every", 0);
    ncm_mark(e);

    qtest_qmp_assert_success(e->qts, "{'execute': 'snapshot-save', "
                             "'arguments': {'job-id': 's0', 'tag': 'ncm', "
                             "'vmstate': 'disk0', 'devices': ['disk0']}}");
    g_assert(qmp_job_wait(e->qts, "s0"));

    /*
     * change what the snapshot holds, without touching the rings: a
     * frame into the NTB under construction (no IN TD waits) and the link
     */
    g_ptr_array_set_size(late, 0);
    ncm_frames_add(late, ncm_bcast_mac, 37050, 400);
    ncm_sock_send_frames(e, late);
    ncm_sock_settle(e);
    g_assert_cmpuint(ncm_delta(e, "in_broadcast_frames"), ==, 1);
    ncm_set_link(e, false);
    ncm_set_link(e, true);

    qtest_qmp_assert_success(e->qts, "{'execute': 'snapshot-load', "
                             "'arguments': {'job-id': 'l0', 'tag': 'ncm', "
                             "'vmstate': 'disk0', 'devices': ['disk0']}}");
    g_assert(qmp_job_wait(e->qts, "l0"));
    unlink(img);

    /* the statistics are the snapshot's again; the frame is gone */
    ncm_assert_deltas(e, { "in_broadcast_frames", 0 },
                      { "in_broadcast_bytes", 0 });
    g_assert_cmpint(ncm_class_in(e, NCM_GET_NTB_INPUT_SIZE, 0, b, 4,
                                 &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(ldl_le_p(b), ==, 8192);
    /* and the data path picks up where the snapshot left it */
    ncm_check_rx_frame(e, 37001, 800);
    ncm_check_marker(e, 37100);
}

/* Several TDs per endpoint; the whole cross product only with -m slow */
static void add_queue_cases(bool ss)
{
    static const QueueCase events[QEV__MAX] = {
        [QEV_NONE] = { QEV_NONE },
        [QEV_SET_INTERFACE_0] = { QEV_SET_INTERFACE_0 },
        [QEV_SET_INTERFACE_1] = { QEV_SET_INTERFACE_1 },
        [QEV_SET_CONFIGURATION_0] = { QEV_SET_CONFIGURATION_0 },
        [QEV_SET_CONFIGURATION_1] = { QEV_SET_CONFIGURATION_1 },
        [QEV_PORT_RESET] = { QEV_PORT_RESET },
        [QEV_STOP_ENDPOINT] = { QEV_STOP_ENDPOINT },
        [QEV_DEVICE_DEL] = { QEV_DEVICE_DEL },
        [QEV_FAULT_BUSY] = { QEV_FAULT_BUSY },
    };
    static const QueueAbort aborts[] = {
        ABORT_SMALL_TD_BEHIND_PARKED, ABORT_SET_INTERFACE,
        ABORT_SET_CONFIGURATION,
    };
    static const char *const abort_names[] = {
        "small-td-behind-parked-then-frame", "two-64k-then-set-interface-0",
        "two-64k-then-set-configuration-1",
    };
    bool slow = g_test_slow();
    unsigned i;

    for (i = 0; i < QEV__MAX; i++) {
        g_autofree char *name = g_strdup_printf("queue/%s",
                                                queue_event_names[i]);
        g_autofree char *nak = g_strdup_printf("queue/nak-mode/%s",
                                               queue_event_names[i]);

        if (ss || slow) {
            ncm_add_case(ss, NCM_DL, name, test_queue, &events[i], NULL);
        }
        if (slow) {
            ncm_add_case(ss, NCM_DL, nak, test_queue, &events[i],
                         "x-park-packets=off");
            ncm_add_case(ss, NCM_GENERIC, name, test_queue, &events[i],
                         NULL);
        }
    }
    for (i = 0; i < ARRAY_SIZE(aborts); i++) {
        g_autofree char *name = g_strdup_printf("queue/%s", abort_names[i]);

        ncm_add_case(ss, NCM_DL, name, test_queue_abort, &aborts[i], NULL);
    }
}

/*
 * Requests while a bulk transfer is half done, and migrations there
 * (issue 36): one OUT NTB sent a packet per TD, or one IN NTB read a
 * packet per TD.  After its first packet the host sends a class or
 * standard request and the machine migrates; at every later packet
 * boundary it migrates again.  The destination must take every stream
 * the source saved (ncm_migrate_via_file() returns it) and the
 * transfer goes on there: the NTB's frames come out whole, or, after a
 * request that starts the data path afresh (SET_INTERFACE, NCM 1.0 7.2;
 * SET_CONFIGURATION), the host abandons the transfer, takes alternate
 * setting 1 again and traffic flows both ways.
 */
typedef enum MidKind {
    MID_CLASS_OUT,          /* a class request with a data stage to it */
    MID_CLASS_IN,           /* ... from it */
    MID_STANDARD,           /* a standard request (@type, @req, @value) */
    MID_SET_ALT_0,          /* SET_INTERFACE(data, 0), then 1 again */
    MID_SET_ALT_1,          /* SET_INTERFACE(data, 1) while at 1 */
    MID_SET_CONFIG,         /* SET_CONFIGURATION(1) while configured */
} MidKind;

typedef struct MidReq {
    const char *name;
    MidKind kind;
    uint8_t type;           /* MID_STANDARD: bmRequestType */
    uint8_t req;
    uint16_t value;
    uint16_t len;           /* the data stage */
    bool on_ep;             /* wIndex: the transfer's endpoint */
    /* SET_NTB_INPUT_SIZE: this size (0: the one in force) ... */
    uint32_t in_size;
    /* ... and, in its 8-byte form, wNtbInMaxDatagrams */
    uint16_t in_datagrams;
} MidReq;

/* USB 2.0 9.4, table 9-6 */
#define MID_ENDPOINT_HALT       0

static const MidReq mid_reqs[] = {
    { "set-multicast-filters", MID_CLASS_OUT, 0,
      CDC_SET_ETHERNET_MULTICAST_FILTERS, 1, CDC_MC_ADDRESS_LEN },
    { "set-pm-pattern-filter", MID_CLASS_OUT, 0,
      CDC_SET_ETHERNET_PM_PATTERN_FILTER, 1, 8 },
    { "get-pm-pattern-filter", MID_CLASS_IN, 0,
      CDC_GET_ETHERNET_PM_PATTERN_FILTER, 0, 2 },
    { "set-packet-filter", MID_CLASS_OUT, 0, CDC_SET_ETHERNET_PACKET_FILTER,
      CDC_FILTER_DIRECTED | CDC_FILTER_BROADCAST | CDC_FILTER_MULTICAST, 0 },
    { "get-statistic", MID_CLASS_IN, 0, CDC_GET_ETHERNET_STATISTIC,
      CDC_STAT_XMIT_OK, 4 },
    { "get-ntb-parameters", MID_CLASS_IN, 0, NCM_GET_NTB_PARAMETERS, 0,
      NCM_NTB_PARAMETERS_LEN },
    { "get-net-address", MID_CLASS_IN, 0, NCM_GET_NET_ADDRESS, 0, 6 },
    { "set-net-address", MID_CLASS_OUT, 0, NCM_SET_NET_ADDRESS, 0, 6 },
    { "get-ntb-format", MID_CLASS_IN, 0, NCM_GET_NTB_FORMAT, 0, 2 },
    { "set-ntb-format", MID_CLASS_OUT, 0, NCM_SET_NTB_FORMAT,
      NCM_NTB_FORMAT_SELECT_16, 0 },
    { "get-ntb-input-size", MID_CLASS_IN, 0, NCM_GET_NTB_INPUT_SIZE, 0, 4 },
    { "set-ntb-input-size", MID_CLASS_OUT, 0, NCM_SET_NTB_INPUT_SIZE, 0, 4 },
    /*
     * Smaller than the NTB on its way out, which keeps its size and its
     * datagrams (Linux sends these when cdc_ncm's rx_max is written in
     * sysfs while traffic runs): a source in that state once saved a
     * stream its destination refused as outside the NTB's limits
     */
    { "set-ntb-input-size-smaller", MID_CLASS_OUT, 0, NCM_SET_NTB_INPUT_SIZE,
      0, 4, .in_size = NCM_NTB_MIN_SIZE },
    { "set-ntb-input-size-one-datagram", MID_CLASS_OUT, 0,
      NCM_SET_NTB_INPUT_SIZE, 0, 8, .in_size = NCM_NTB_MIN_SIZE,
      .in_datagrams = 1 },
    { "get-max-datagram-size", MID_CLASS_IN, 0, NCM_GET_MAX_DATAGRAM_SIZE, 0,
      2 },
    { "set-max-datagram-size", MID_CLASS_OUT, 0, NCM_SET_MAX_DATAGRAM_SIZE, 0,
      2 },
    { "get-crc-mode", MID_CLASS_IN, 0, NCM_GET_CRC_MODE, 0, 2 },
    { "set-crc-mode", MID_CLASS_OUT, 0, NCM_SET_CRC_MODE,
      NCM_CRC_NOT_APPENDED, 0 },
    { "get-status-device", MID_STANDARD, 0x80, QXHCI_REQ_GET_STATUS, 0, 2 },
    { "get-status-interface", MID_STANDARD, 0x81, QXHCI_REQ_GET_STATUS, 0,
      2 },
    { "get-status-endpoint", MID_STANDARD, 0x82, QXHCI_REQ_GET_STATUS, 0, 2,
      true },
    { "clear-feature-endpoint-halt", MID_STANDARD, 0x02,
      QXHCI_REQ_CLEAR_FEATURE, MID_ENDPOINT_HALT, 0, true },
    { "get-configuration", MID_STANDARD, 0x80, QXHCI_REQ_GET_CONFIGURATION,
      0, 1 },
    { "get-interface", MID_STANDARD, 0x81, QXHCI_REQ_GET_INTERFACE, 0, 1 },
    { "set-interface-0", MID_SET_ALT_0 },
    { "set-interface-1", MID_SET_ALT_1 },
    { "set-configuration", MID_SET_CONFIG },
};

typedef struct MidCase {
    const MidReq *r;
    bool in;                /* else OUT */
} MidCase;

static bool mid_restarts(const MidReq *r)
{
    return r->kind == MID_SET_ALT_0 || r->kind == MID_SET_ALT_1 ||
           r->kind == MID_SET_CONFIG;
}

static void mid_migrate(NcmEnv *e, unsigned boundary)
{
    g_autofree char *file = g_strdup_printf("%s/usb-ncm-mid-%d",
                                            g_get_tmp_dir(), getpid());
    QTestState *dst;
    int sock = -1;

    dst = ncm_migrate_via_file(e, file, NULL, &sock);
    unlink(file);
    if (!dst) {
        g_test_message("after packet %u: the destination refused what the "
                       "source saved", boundary);
    }
    g_assert(dst);
    ncm_follow_migration(e, dst, sock);
}

/* The request, at the first packet boundary of a transfer on @ep */
static void mid_request(NcmEnv *e, const MidReq *r, uint8_t ep)
{
    uint8_t buf[64] = { 0 };
    int cc;

    switch (r->kind) {
    case MID_CLASS_OUT:
        if (r->req == CDC_SET_ETHERNET_MULTICAST_FILTERS) {
            memcpy(buf, "\x01\x00\x5e\x00\x00\x01", CDC_MC_ADDRESS_LEN);
        } else if (r->req == NCM_SET_NET_ADDRESS) {
            memcpy(buf, ncm_mac, sizeof(ncm_mac));
        } else if (r->req == NCM_SET_NTB_INPUT_SIZE) {
            /* the NTB being sent stays as it is, whatever the size */
            stl_le_p(buf, r->in_size ? r->in_size : e->in_size);
            stw_le_p(buf + 4, r->in_datagrams);
        } else if (r->req == NCM_SET_MAX_DATAGRAM_SIZE) {
            uint32_t got = 0;

            if (ncm_class_in(e, NCM_GET_MAX_DATAGRAM_SIZE, 0, buf, 2,
                             &got) != QXHCI_CC_SUCCESS) {
                stw_le_p(buf, 1514);
            }
        }
        cc = ncm_class_out(e, r->req, r->value, buf, r->len);
        break;
    case MID_CLASS_IN:
        cc = ncm_class_in(e, r->req, r->value, buf, r->len, NULL);
        break;
    case MID_STANDARD:
        cc = qxhci_control(e->dev, r->type, r->req, r->value,
                           r->on_ep ? ep : NCM_IF_DATA, buf, r->len, NULL);
        break;
    case MID_SET_ALT_0:
        ncm_set_alt(e, 0);
        cc = QXHCI_CC_SUCCESS;
        break;
    case MID_SET_ALT_1:
        ncm_set_alt(e, 1);
        cc = QXHCI_CC_SUCCESS;
        break;
    default:
        ncm_set_configuration(e, 1);
        cc = QXHCI_CC_SUCCESS;
        break;
    }
    /* some stall at alternate setting 1 (NCM 1.0 6.2): either will do */
    g_test_message("%s after the first packet: completion code %d", r->name,
                   cc);
    g_assert(cc == QXHCI_CC_SUCCESS || cc == QXHCI_CC_SHORT_PACKET ||
             cc == QXHCI_CC_STALL);
}

/* Back to alternate setting 1 after a request that left it */
static void mid_resume(NcmEnv *e, const MidReq *r)
{
    if (r->kind == MID_SET_ALT_0 || r->kind == MID_SET_CONFIG) {
        ncm_set_alt(e, 1);
    }
}

static void test_mid_out(NcmEnv *e, const MidReq *r)
{
    g_autoptr(GPtrArray) frames = ncm_frames_new();
    g_autoptr(GByteArray) ntb = NULL;
    NcmHostLayout l;
    uint32_t n, k;

    ncm_frames_add(frames, ncm_peer_mac, 38100, 1000);
    ncm_frames_add(frames, ncm_bcast_mac, 38101, 1000);
    ncm_frames_add(frames, ncm_other_mac, 38102, 1000);
    l = ncm_out_layout(e);
    ntb = ncm_ntb_build(&l, frames, 0);
    n = DIV_ROUND_UP(ntb->len, e->mps);
    g_assert_cmpuint(n, >=, 3);
    for (k = 0; k < n; k++) {
        uint32_t off = k * e->mps;

        ncm_out_td(e, ntb->data + off, MIN(e->mps, ntb->len - off));
        if (k + 1 == n) {
            break;
        }
        /* half done: nothing has come out of the device yet */
        ncm_sock_expect_silence(e, 5);
        if (k == 0) {
            mid_request(e, r, e->ep_out.address);
        }
        mid_migrate(e, k + 1);
        if (k == 0 && mid_restarts(r)) {
            /* the host abandons the transfer the device dropped */
            mid_resume(e, r);
            ncm_check_marker(e, 38110);
            return;
        }
    }
    if (ntb->len % e->mps == 0) {
        ncm_out_td(e, NULL, 0);
    }
    ncm_sock_expect_frames(e, frames);
    ncm_sock_expect_silence(e, 20);
    ncm_check_marker(e, 38110);
}

static void test_mid_in(NcmEnv *e, const MidReq *r)
{
    g_autoptr(GPtrArray) frames = ncm_frames_new();
    g_autoptr(GPtrArray) got = ncm_frames_new();
    g_autoptr(GByteArray) ntb = g_byte_array_new();
    g_autofree uint8_t *buf = g_malloc(e->mps);
    /*
     * What the request at the first boundary sets, held back from the
     * oracle until the NTB on its way out ends: that NTB keeps what it
     * was built with
     */
    typeof(e->neg) neg_after = e->neg;
    bool neg_deferred = false;
    unsigned k;

    ncm_frames_add(frames, ncm_mac, 38200, 1000);
    ncm_frames_add(frames, ncm_mac, 38201, 1000);
    ncm_frames_add(frames, ncm_mac, 38202, 1000);
    ncm_sock_send_frames(e, frames);
    ncm_sock_settle(e);
    for (k = 0; got->len < frames->len; k++) {
        QXhciTransfer *t = qxhci_submit(e->dev, e->ep_in.address, NULL,
                                        e->mps);

        g_assert(qxhci_wait(t, NCM_RX_TIMEOUT_NS));
        g_assert(t->cc == QXHCI_CC_SUCCESS || t->cc == QXHCI_CC_SHORT_PACKET);
        qxhci_transfer_read(t, buf);
        ncm_oracle_in(e, buf, t->actual, e->mps);
        g_byte_array_append(ntb, buf, t->actual);
        if (t->actual < e->mps) {
            /* a short packet ends the NTB */
            ncm_ntb_parse_in(e, ntb->data, ntb->len, e->in_size, got);
            g_byte_array_set_size(ntb, 0);
            qxhci_transfer_free(t);
            if (neg_deferred) {
                /* what the request set holds from the next NTB on */
                e->neg = neg_after;
                neg_deferred = false;
            }
            continue;
        }
        qxhci_transfer_free(t);
        /* an NTB half sent: a request at its first boundary, migrations */
        if (k == 0) {
            typeof(e->neg) neg_before = e->neg;

            mid_request(e, r, e->ep_in.address);
            neg_after = e->neg;
            neg_deferred = !mid_restarts(r);
            if (neg_deferred) {
                e->neg = neg_before;
            }
        }
        mid_migrate(e, k + 1);
        if (k == 0 && mid_restarts(r)) {
            /* the NTB being sent went with the data path's reset */
            mid_resume(e, r);
            ncm_check_rx_frame(e, 38210, 800);
            ncm_check_marker(e, 38220);
            return;
        }
    }
    g_assert_cmpuint(k, >=, 3);
    ncm_frames_assert_equal(got, frames);
    ncm_check_rx_frame(e, 38210, 800);
    ncm_check_marker(e, 38220);
}

static void test_mid_transfer(NcmEnv *e, const NcmCase *c)
{
    const MidCase *m = c->data;

    ncm_set_alt(e, 1);
    if (m->in) {
        test_mid_in(e, m->r);
    } else {
        test_mid_out(e, m->r);
    }
}

static void add_mid_transfer_cases(bool ss)
{
    /*
     * The cases' data, one per speed, request and direction: static, so
     * that a case ncm_add_case() leaves out (high speed without -m slow)
     * leaks nothing
     */
    static MidCase cases[2][ARRAY_SIZE(mid_reqs)][2];
    unsigned i, d;

    for (i = 0; i < ARRAY_SIZE(mid_reqs); i++) {
        for (d = 0; d < 2; d++) {
            MidCase *m = &cases[ss][i][d];
            g_autofree char *name = g_strdup_printf("mid-transfer/%s/%s",
                                                    d ? "in" : "out",
                                                    mid_reqs[i].name);

            m->r = &mid_reqs[i];
            m->in = d;
            ncm_add_case(ss, NCM_DL, name, test_mid_transfer, m, NULL);
        }
    }
}

void ncm_add_lifecycle_cases(bool ss)
{
    static const char *const models[] = { NCM_DL, NCM_GENERIC };
    static const MigCase migrations[] = {
        MIG_MID_TRANSFER, MIG_REFUSE_INPUT_SIZE, MIG_REFUSE_OUT_BUFFER,
        MIG_REFUSE_DATAGRAMS,
    };
    static const char *const migration_names[] = {
        "migrate/mid-transfer", "migrate/refused/input-size",
        "migrate/refused/out-buffer", "migrate/refused/in-datagrams",
    };
    unsigned m, i;

    ncm_add_case(ss, NCM_DL, "xhci/ring-wrap", test_ring_wrap, NULL, NULL);
    add_queue_cases(ss);
    ncm_add_case(ss, NCM_DL, "nak-mode/traffic", test_nak_mode, NULL,
                 "x-park-packets=off");
    for (i = 0; i < ARRAY_SIZE(migrations); i++) {
        ncm_add_case(ss, NCM_DL, migration_names[i], test_migrate,
                     &migrations[i], NULL);
    }
    for (i = 0; i < MIG_EDIT__MAX; i++) {
        static const MigEdit edits[MIG_EDIT__MAX] = {
            MIG_EDIT_USB_STATE, MIG_EDIT_USB_SETUP_LEN,
            MIG_EDIT_USB_SETUP_INDEX, MIG_EDIT_USB_SETUP_STATE,
            MIG_EDIT_USB_ATTACHED,
        };
        g_autofree char *name = g_strdup_printf("migrate/refused/%s",
                                                mig_edit_names[i]);

        ncm_add_case(ss, NCM_DL, name, test_migrate_edited, &edits[i],
                     NULL);
    }
    ncm_add_case(ss, NCM_DL, "migrate/usb-attached-unconfigured",
                 test_migrate_attached, NULL, NULL);
    ncm_add_case(ss, NCM_DL, "migrate/blocked-by-every-fault",
                 test_migrate_every_fault_blocks, NULL, NULL);
    for (i = 0; i < MIG_FAULT__MAX; i++) {
        static const MigFault faults[MIG_FAULT__MAX] = {
            MIG_FAULT_LINK_DOWN, MIG_FAULT_BUSY, MIG_FAULT_DROP_IN,
            MIG_FAULT_CORRUPT, MIG_FAULT_REPLUG,
        };
        g_autofree char *name = g_strdup_printf("migrate/blocked-by-fault/%s",
                                                mig_fault_names[i]);

        ncm_add_case(ss, NCM_DL, name, test_migrate_fault_blocks, &faults[i],
                     NULL);
    }
    ncm_add_case(ss, NCM_DL, "migrate/usb-notattached-connected",
                 test_migrate_notattached, NULL, NULL);
    ncm_add_case(ss, NCM_DL, "savevm-loadvm", test_savevm, NULL, NULL);
    ncm_add_case(ss, NCM_DL, "migrate/queued-in-tds",
                 test_migrate_queued_tds, NULL, NULL);
    ncm_add_case(ss, NCM_DL, "migrate/after-port-reset",
                 test_migrate_after_port_reset, NULL, NULL);
    add_mid_transfer_cases(ss);
    for (m = 0; m < ARRAY_SIZE(models); m++) {
        ncm_add_case(ss, models[m], "device-del", test_device_del, NULL,
                     NULL);
        ncm_add_case(ss, models[m], "port-reset-mid-ntb", test_port_reset,
                     NULL, NULL);
    }
}
