/*
 * usb-ncm-dl qtest: device to host (IN NTBs, parked and cancelled
 * transfers, input size, ZLPs, babble)
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "fixture.h"

/* Cases: device to host */

static void test_rx_frames(NcmEnv *e, const NcmCase *c)
{
    static const uint16_t sizes[] = {
        14, 60, 61, 62, 63, 64, 65, 127, 128, 511, 512, 513, 1023, 1024,
        1025, 1500, 1513, 1514,
    };
    g_autoptr(GPtrArray) inject = ncm_frames_new();
    g_autoptr(GPtrArray) want = ncm_frames_new();
    unsigned i;

    ncm_set_alt(e, 1);
    for (i = 0; i < ARRAY_SIZE(sizes); i++) {
        const uint8_t *dst = i % 2 ? ncm_mac : ncm_bcast_mac;

        ncm_frames_add(inject, dst, 2000 + i, sizes[i]);
        ncm_frames_add(want, dst, 2000 + i, sizes[i]);
        if (i == 4) {
            /* filtered: another station's unicast, an oversized frame */
            ncm_frames_add(inject, ncm_other_mac, 2100, 200);
            ncm_frames_add(inject, ncm_mac, 2101, 1515);
        }
    }
    ncm_sock_send_frames(e, inject);
    ncm_expect_rx(e, want);
    ncm_expect_no_rx(e);
}

static void test_rx_input_size(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) rx = ncm_frames_new();
    g_autoptr(GPtrArray) got = NULL;
    uint8_t b[4];
    unsigned i, ntbs;

    stl_le_p(b, 4096);
    g_assert_cmpint(ncm_class_out(e, NCM_SET_NTB_INPUT_SIZE, 0, b, 4),
                    ==, QXHCI_CC_SUCCESS);
    ncm_set_alt(e, 1);
    for (i = 0; i < 60; i++) {
        ncm_frames_add(rx, ncm_mac, 2200 + i, 700 + (i * 97) % 815);
    }
    ncm_sock_send_frames(e, rx);
    ncm_sock_settle(e);
    /* IN TDs much larger than the input size: the device must stop */
    got = ncm_receive(e, rx->len, e->p.in_max, 4096);
    ncm_frames_assert_equal(got, rx);
    g_assert_cmpuint(e->rx_ntbs, >=, 60 * 700 / 4096);

    /* a smaller size set in alt 1 applies to the next NTBs */
    stl_le_p(b, 2048);
    g_assert_cmpint(ncm_class_out(e, NCM_SET_NTB_INPUT_SIZE, 0, b, 4),
                    ==, QXHCI_CC_SUCCESS);
    g_ptr_array_set_size(rx, 0);
    for (i = 0; i < 20; i++) {
        ncm_frames_add(rx, ncm_bcast_mac, 2300 + i, 600 + i * 40);
    }
    ncm_sock_send_frames(e, rx);
    ncm_sock_settle(e);
    ntbs = e->rx_ntbs;
    g_ptr_array_unref(got);
    got = ncm_receive(e, rx->len, e->p.in_max, 2048);
    ncm_frames_assert_equal(got, rx);
    g_assert_cmpuint(e->rx_ntbs - ntbs, >=, 20 * 600 / 2048);
}

static void test_rx_backlog(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) rx = ncm_frames_new();
    g_autoptr(GPtrArray) got = NULL;
    unsigned i;

    ncm_set_alt(e, 1);
    for (i = 0; i < 1000; i++) {
        ncm_frames_add(rx, i % 5 ? ncm_mac : ncm_bcast_mac, 10000 + i,
                       60 + i % 64);
    }
    /* all written while nobody polls bulk IN */
    ncm_sock_send_frames(e, rx);
    ncm_sock_settle(e);
    got = ncm_receive(e, rx->len, e->p.in_max, e->in_size);
    ncm_frames_assert_equal(got, rx);
    g_assert_cmpuint(e->rx_ntbs, >=, 2);
    ncm_expect_no_rx(e);
}

/* Cases: the one-copy IN path (NTBs built in a parked host buffer) */

#define RX_QUIET_NS             (50 * 1000 * 1000)

/* A bulk IN TD that must stay parked: a few clock steps, no event. */
static QXhciTransfer *in_park(NcmEnv *e, uint32_t len, uint32_t first_len)
{
    QXhciTransfer *t = qxhci_submit_split(e->dev, e->ep_in.address, NULL,
                                          len, first_len);
    unsigned i;

    for (i = 0; i < 10; i++) {
        qxhci_step(e->xhci);
    }
    if (t->done) {
        g_test_message("bulk IN TD completed with nothing queued: cc %d, "
                       "%u bytes", t->cc, t->actual);
    }
    g_assert(!t->done);
    return t;
}

/*
 * Cases: IN coalescing (in-coalesce-us=200).  The host queues three IN TDs;
 * while fewer are queued it is busy with NTBs it has, and the NTB in the
 * parked TD keeps taking datagrams.
 */

static void in_drain(NcmEnv *e, GPtrArray *got);

#define COALESCE_NS             (200 * 1000)
#define COALESCE_POLL_NS        (50 * 1000)

/* @t completed with exactly @want, in one NTB */
static void in_td_expect(NcmEnv *e, QXhciTransfer *t, GPtrArray *want)
{
    g_autoptr(GPtrArray) got = ncm_frames_new();
    unsigned ntbs = e->rx_ntbs;

    g_assert(t->done);
    ncm_in_td_parse(e, t, e->in_size, got);
    g_assert_cmpuint(e->rx_ntbs, ==, ntbs + 1);
    ncm_frames_assert_equal(got, want);
    qxhci_transfer_free(t);
}

/* One frame of @len bytes, which @t must bring (within the limit). */
static void in_one_frame(NcmEnv *e, QXhciTransfer *t, uint32_t tag,
                         size_t len)
{
    g_autoptr(GPtrArray) f = ncm_frames_new();

    ncm_frames_add(f, ncm_mac, tag, len);
    ncm_sock_send_frames(e, f);
    g_assert(qxhci_wait(t, NCM_RX_TIMEOUT_NS));
    in_td_expect(e, t, f);
}

/*
 * One frame of @len bytes into @b and to the device, taken in without
 * virtual time passing but @ns; @t must still be waiting (kept).
 */
static void coalesce_kept(NcmEnv *e, QXhciTransfer *t, GPtrArray *b,
                          uint32_t tag, size_t len, int64_t ns)
{
    g_autoptr(GPtrArray) f = ncm_frames_new();

    ncm_frames_add(f, ncm_mac, tag, len);
    ncm_sock_send_frames(e, f);
    g_ptr_array_add(b, g_ptr_array_steal_index(f, 0));
    ncm_sock_settle_by(e, 1);
    ncm_step(e, ns);
    g_assert(!t->done);
}

/* Three TDs queued; the first frame goes at once (the host waits). */
static void coalesce_start(NcmEnv *e, QXhciTransfer **t, uint32_t tag)
{
    g_autoptr(GPtrArray) a = ncm_frames_new();

    ncm_set_alt(e, 1);
    ncm_in_submit_queued(e, t, 3, e->p.in_max);
    ncm_frames_add(a, ncm_mac, tag, 300);
    ncm_sock_send_frames(e, a);
    ncm_sock_settle_by(e, 1);
    ncm_step(e, 1);
    in_td_expect(e, t[0], a);
    ncm_mark(e);
}

static void test_rx_coalesce(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) b = ncm_frames_new();
    QXhciTransfer *t[4];

    coalesce_start(e, t, 13000);
    /* two of three queued: the host is busy, the NTB keeps taking */
    coalesce_kept(e, t[1], b, 13001, 400, COALESCE_POLL_NS / 2);
    coalesce_kept(e, t[1], b, 13002, 1514, COALESCE_POLL_NS / 2 - 1000);
    /* the host is back (three queued again): both go, in one NTB */
    t[3] = qxhci_submit(e->dev, e->ep_in.address, NULL, e->p.in_max);
    ncm_step(e, COALESCE_POLL_NS);
    in_td_expect(e, t[1], b);
    ncm_assert_deltas(e, { "in_coalesced", 1 }, { "in_coalesce_timeouts", 0 },
                      { "in_ntbs", 1 }, { "in_datagrams", 2 });
    /* the last two TDs take what comes, within the limit */
    in_one_frame(e, t[2], 13003, 60);
    in_one_frame(e, t[3], 13004, 61);
    ncm_expect_no_rx(e);
}

/*
 * The host does not come back: the NTB goes at in-coalesce-us, and the
 * device learns that the host keeps fewer TDs queued now.
 */
static void test_rx_coalesce_timeout(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) b = ncm_frames_new();
    QXhciTransfer *t[3];
    int64_t waited;

    coalesce_start(e, t, 13100);
    coalesce_kept(e, t[1], b, 13101, 800, 1);
    for (waited = 0; !t[1]->done; waited += COALESCE_POLL_NS) {
        g_assert_cmpint(waited, <=, COALESCE_NS + COALESCE_POLL_NS);
        ncm_step(e, COALESCE_POLL_NS);
    }
    g_assert_cmpint(waited, >=, COALESCE_NS);
    in_td_expect(e, t[1], b);
    ncm_assert_deltas(e, { "in_coalesced", 1 }, { "in_coalesce_timeouts", 1 });
    /* the last TD: the host keeps two queued now, so it waits again */
    in_one_frame(e, t[2], 13102, 90);
    ncm_expect_no_rx(e);
}

/* A full NTB goes at once, kept or not; the rest starts the next. */
static void test_rx_coalesce_full(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) b = ncm_frames_new();
    g_autoptr(GPtrArray) got = ncm_frames_new();
    QXhciTransfer *t[3];
    unsigned i, n = e->in_size / 1514 + 2;

    coalesce_start(e, t, 13200);
    for (i = 0; i < n; i++) {
        ncm_frames_add(b, ncm_mac, 13201 + i, 1514);
    }
    ncm_sock_send_frames(e, b);
    ncm_sock_settle_by(e, 1);
    ncm_step(e, 1);
    g_assert(t[1]->done);
    ncm_in_td_parse(e, t[1], e->in_size, got);
    g_assert_cmpuint(got->len, <, n);
    qxhci_transfer_free(t[1]);
    g_assert(qxhci_wait(t[2], NCM_RX_TIMEOUT_NS));
    ncm_in_td_parse(e, t[2], e->in_size, got);
    qxhci_transfer_free(t[2]);
    in_drain(e, got);
    ncm_frames_assert_equal(got, b);
    ncm_assert_deltas(e, { "in_datagrams", n }, { "in_flushed_datagrams", 0 });
}

/*
 * The host takes the data interface to alt 0 while an NTB is kept: the
 * TDs come back, and traffic after alt 1 flows as on a fresh device.
 */
static void test_rx_coalesce_alt_change(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) b = ncm_frames_new();
    QXhciTransfer *t[3];

    coalesce_start(e, t, 13300);
    coalesce_kept(e, t[1], b, 13301, 500, 1);
    ncm_set_alt(e, 0);
    g_assert(qxhci_wait(t[1], NCM_RX_TIMEOUT_NS));
    g_assert(qxhci_wait(t[2], NCM_RX_TIMEOUT_NS));
    g_assert_cmpuint(t[1]->actual, ==, 0);
    g_assert_cmpuint(t[2]->actual, ==, 0);
    qxhci_transfer_free(t[1]);
    qxhci_transfer_free(t[2]);
    ncm_set_alt(e, 1);
    ncm_queue_check_traffic(e, 13310);
}

/* Bulk IN until a TD stays NAK'd: everything the device still holds. */
static void in_drain(NcmEnv *e, GPtrArray *got)
{
    for (;;) {
        QXhciTransfer *t = qxhci_submit(e->dev, e->ep_in.address, NULL,
                                        e->p.in_max);

        if (!qxhci_wait(t, RX_QUIET_NS)) {
            qxhci_transfer_free(t);
            return;
        }
        ncm_in_td_parse(e, t, e->in_size, got);
        qxhci_transfer_free(t);
    }
}

static void test_rx_direct(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) rx = ncm_frames_new();
    g_autoptr(GPtrArray) got = ncm_frames_new();
    QXhciTransfer *t;
    unsigned i;

    ncm_set_alt(e, 1);
    ncm_mark(e);
    t = in_park(e, e->p.in_max, 0);
    for (i = 0; i < 5; i++) {
        ncm_frames_add(rx, i % 2 ? ncm_mac : ncm_bcast_mac, 11000 + i,
                       60 + i * 150);
    }
    ncm_sock_send_frames(e, rx);
    g_assert(qxhci_wait(t, NCM_RX_TIMEOUT_NS));
    ncm_in_td_parse(e, t, e->in_size, got);
    qxhci_transfer_free(t);
    g_assert_cmpuint(e->rx_ntbs, ==, 1);
    ncm_frames_assert_equal(got, rx);
    ncm_expect_no_rx(e);

    ncm_assert_deltas(e, { "in_direct_ntbs", 1 }, { "in_ntbs", 1 },
                      { "in_datagrams", rx->len }, { "in_bytes", e->rx_bytes },
                      { "in_flushed_datagrams", 0 });
}

static void test_rx_copy(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) rx = ncm_frames_new();
    g_autoptr(GPtrArray) got = NULL;
    unsigned i;

    ncm_set_alt(e, 1);
    ncm_mark(e);
    for (i = 0; i < 5; i++) {
        ncm_frames_add(rx, i % 2 ? ncm_mac : ncm_bcast_mac, 11100 + i,
                       60 + i * 150);
    }
    ncm_sock_send_frames(e, rx);
    ncm_sock_settle(e);
    got = ncm_receive(e, rx->len, e->p.in_max, e->in_size);
    ncm_frames_assert_equal(got, rx);
    g_assert_cmpuint(e->rx_ntbs, ==, 1);
    ncm_expect_no_rx(e);

    ncm_assert_deltas(e, { "in_direct_ntbs", 0 }, { "in_ntbs", 1 },
                      { "in_datagrams", rx->len },
                      { "in_flushed_datagrams", 0 });
}

static void test_rx_direct_input_size(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) rx = ncm_frames_new();
    g_autoptr(GPtrArray) got = ncm_frames_new();
    g_autoptr(GPtrArray) rest = NULL;
    QXhciTransfer *t;
    uint8_t b[4];
    unsigned i;

    ncm_set_alt(e, 1);
    ncm_mark(e);
    t = in_park(e, 65536, 0);
    stl_le_p(b, 4096);
    g_assert_cmpint(ncm_class_out(e, NCM_SET_NTB_INPUT_SIZE, 0, b, 4),
                    ==, QXHCI_CC_SUCCESS);
    e->in_size = 4096;
    for (i = 0; i < 20; i++) {
        ncm_frames_add(rx, i % 3 ? ncm_mac : ncm_bcast_mac, 11200 + i,
                       600 + i * 47);
    }
    ncm_sock_send_frames(e, rx);
    g_assert(qxhci_wait(t, NCM_RX_TIMEOUT_NS));
    ncm_in_td_parse(e, t, 4096, got);
    qxhci_transfer_free(t);
    g_assert_cmpuint(got->len, >, 0);
    g_assert_cmpuint(got->len, <, rx->len);
    rest = ncm_receive(e, rx->len - got->len, 65536, 4096);
    for (i = 0; i < rest->len; i++) {
        g_ptr_array_add(got, g_byte_array_ref(g_ptr_array_index(rest, i)));
    }
    ncm_frames_assert_equal(got, rx);
    ncm_expect_no_rx(e);

    g_assert_cmpuint(ncm_delta(e, "in_direct_ntbs"), >=, 1);
    ncm_assert_deltas(e, { "in_ntbs", e->rx_ntbs },
                      { "in_datagrams", rx->len },
                      { "in_flushed_datagrams", 0 });
}

typedef enum CancelHow {
    CANCEL_STOP_ENDPOINT,
    CANCEL_ALT_0,
    CANCEL_PORT_RESET,
    CANCEL_CONTROL_SET_INTERFACE,   /* SET_INTERFACE on the control iface */
} CancelHow;

/* Is every frame of @got in @all, in the same order? */
static void frames_assert_subsequence(GPtrArray *got, GPtrArray *all)
{
    unsigned i, j = 0;

    for (i = 0; i < got->len; i++) {
        GByteArray *g = g_ptr_array_index(got, i);
        bool found = false;

        while (j < all->len && !found) {
            GByteArray *a = g_ptr_array_index(all, j++);

            found = a->len == g->len && !memcmp(a->data, g->data, g->len);
        }
        if (!found) {
            g_test_message("received frame %u of %u is not one of the "
                           "injected frames, in order", i, got->len);
        }
        g_assert(found);
    }
}

/*
 * Take a parked bulk IN TD away the way case @c (a CancelHow) says,
 * keep what it received in @got, let QEMU read what is left on the
 * socket, and bring the data interface back.
 */
static void in_cancel_parked(NcmEnv *e, const NcmCase *c, QXhciTransfer *t,
                             GPtrArray *got, bool busy)
{
    const CancelHow *how = c->data;

    switch (*how) {
    case CANCEL_STOP_ENDPOINT:
        g_assert_cmpint(qxhci_endpoint_cancel(e->dev, e->ep_in.address), ==,
                        QXHCI_CC_SUCCESS);
        break;
    case CANCEL_ALT_0:
        ncm_set_alt(e, 0);
        break;
    case CANCEL_PORT_RESET:
        g_assert_cmpint(qxhci_port_reset(e->xhci, e->port), ==,
                        c->super ? QXHCI_SPEED_SUPER : QXHCI_SPEED_HIGH);
        ncm_function_reset(e, true);
        break;
    case CANCEL_CONTROL_SET_INTERFACE:
        /* the data interface stays in alt 1; the core resets endpoints */
        g_assert_cmpint(qxhci_control(e->dev, 0x01, QXHCI_REQ_SET_INTERFACE,
                                      0, NCM_IF_CONTROL, NULL, 0, NULL),
                        ==, QXHCI_CC_SUCCESS);
        break;
    }
    if (busy) {
        ncm_fault_set(e, "busy-ms", 0);
    }
    qxhci_poll(e->xhci);
    if (t->done && t->actual) {
        ncm_in_td_parse(e, t, e->in_size, got);
    }
    if (*how == CANCEL_PORT_RESET) {
        qxhci_device_free(e->dev);
        e->dev = NULL;
        t->dev = NULL;
    }
    qxhci_transfer_free(t);
    ncm_sock_settle(e);
    ncm_assert_alive(e);
    if (*how == CANCEL_PORT_RESET) {
        ncm_enumerate(e);
    }
    if (*how == CANCEL_ALT_0 || *how == CANCEL_PORT_RESET) {
        ncm_set_alt(e, 1);
    }
}

static void test_rx_parked_cancel(NcmEnv *e, const NcmCase *c)
{
    const CancelHow *how = c->data;
    g_autoptr(GPtrArray) rx = ncm_frames_new();
    g_autoptr(GPtrArray) got = ncm_frames_new();
    QXhciTransfer *t;
    uint64_t flushed, inactive;
    unsigned i;

    ncm_set_alt(e, 1);

    /* nothing written yet: the TD goes away, nothing is lost */
    ncm_mark(e);
    t = in_park(e, e->p.in_max, 0);
    in_cancel_parked(e, c, t, got, false);
    g_assert_cmpuint(got->len, ==, 0);
    ncm_assert_deltas(e, { "in_flushed_datagrams", 0 }, { "in_ntbs", 0 });

    /*
     * Frames written into the parked TD, not completed (the device is
     * busy): when the TD goes away they move to the device's own buffer
     * and come in the next TD; a reset of the data path (alt 0, port
     * reset) drops exactly those, and says so.
     */
    ncm_mark(e);
    t = in_park(e, e->p.in_max, 0);
    ncm_fault_set(e, "busy-ms", 1000000);
    for (i = 0; i < 4; i++) {
        ncm_frames_add(rx, i % 2 ? ncm_mac : ncm_bcast_mac, 11300 + i,
                       200 + i * 90);
    }
    ncm_sock_send_frames(e, rx);
    ncm_sock_settle(e);
    g_assert(!t->done);
    in_cancel_parked(e, c, t, got, true);
    g_assert_cmpuint(got->len, ==, 0);
    in_drain(e, got);
    if (*how == CANCEL_ALT_0 || *how == CANCEL_PORT_RESET) {
        ncm_assert_deltas(e, { "in_rescued_datagrams", rx->len },
                          { "in_flushed_datagrams", rx->len },
                          { "in_ntbs", 0 });
        g_assert_cmpuint(got->len, ==, 0);
    } else {
        ncm_assert_deltas(e, { "in_rescued_datagrams", rx->len },
                          { "in_flushed_datagrams", 0 },
                          { "in_datagrams", rx->len });
        ncm_frames_assert_equal(got, rx);
    }
    g_ptr_array_set_size(got, 0);

    /* frames on their way as the TD goes: each arrives or is counted */
    g_ptr_array_set_size(rx, 0);
    ncm_mark(e);
    t = in_park(e, e->p.in_max, 0);
    for (i = 0; i < 8; i++) {
        ncm_frames_add(rx, i % 2 ? ncm_mac : ncm_bcast_mac, 11400 + i,
                       200 + i * 90);
    }
    ncm_sock_send_frames(e, rx);
    in_cancel_parked(e, c, t, got, false);
    in_drain(e, got);
    frames_assert_subsequence(got, rx);
    flushed = ncm_delta(e, "in_flushed_datagrams");
    inactive = ncm_delta(e, "rx_inactive_drops");
    g_test_message("%u frames received, %" PRIu64 " flushed, %" PRIu64
                   " dropped while inactive", got->len, flushed, inactive);
    g_assert_cmpuint(got->len + flushed + inactive, ==, rx->len);
    ncm_assert_deltas(e, { "in_flushed_datagrams", flushed },
                      { "rx_inactive_drops", inactive },
                      { "in_datagrams", got->len });
    if (*how == CANCEL_STOP_ENDPOINT ||
        *how == CANCEL_CONTROL_SET_INTERFACE) {
        g_assert_cmpuint(inactive, ==, 0);
    }

    /* a new TD receives new frames, the one-copy way again */
    g_ptr_array_set_size(rx, 0);
    g_ptr_array_set_size(got, 0);
    ncm_mark(e);
    t = in_park(e, e->p.in_max, 0);
    for (i = 0; i < 4; i++) {
        ncm_frames_add(rx, ncm_mac, 11500 + i, 300 + i * 200);
    }
    ncm_sock_send_frames(e, rx);
    g_assert(qxhci_wait(t, NCM_RX_TIMEOUT_NS));
    ncm_in_td_parse(e, t, e->in_size, got);
    qxhci_transfer_free(t);
    ncm_frames_assert_equal(got, rx);
    ncm_assert_deltas(e, { "in_direct_ntbs", 1 }, { "in_ntbs", 1 },
                      { "in_flushed_datagrams", 0 });
    ncm_expect_no_rx(e);
}

static void test_rx_direct_small_first(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) rx = ncm_frames_new();
    g_autoptr(GPtrArray) got = ncm_frames_new();
    QXhciTransfer *t;
    unsigned i;

    ncm_set_alt(e, 1);
    ncm_mark(e);
    for (i = 0; i < 20; i++) {
        ncm_frames_add(rx, i % 2 ? ncm_mac : ncm_bcast_mac, 11600 + i,
                       800 + i * 31);
    }
    t = in_park(e, 65536, 4096);
    g_assert_cmpuint(t->ntrbs, >=, 2);
    g_assert_cmpuint(t->trb_len[0], ==, 4096);
    ncm_sock_send_frames(e, rx);
    while (got->len < rx->len) {
        uint64_t direct = ncm_delta(e, "in_direct_ntbs");
        unsigned ntbs = e->rx_ntbs;

        if (!t) {
            t = qxhci_submit_split(e->dev, e->ep_in.address, NULL, 65536,
                                   4096);
        }
        g_assert(qxhci_wait(t, NCM_RX_TIMEOUT_NS));
        ncm_in_td_parse(e, t, e->in_size, got);
        g_assert_cmpuint(e->rx_ntbs, ==, ntbs + 1);
        if (!ntbs || ncm_delta(e, "in_direct_ntbs") != direct) {
            /* built in place: the NTB never leaves the first piece */
            g_assert_cmpuint(t->actual, <=, 4096);
        }
        qxhci_transfer_free(t);
        t = NULL;
    }
    ncm_frames_assert_equal(got, rx);
    ncm_expect_no_rx(e);
    g_assert_cmpuint(ncm_delta(e, "in_direct_ntbs"), >=, 1);
    ncm_assert_deltas(e, { "in_ntbs", e->rx_ntbs },
                      { "in_datagrams", rx->len },
                      { "in_flushed_datagrams", 0 });
}

/*
 * Frames whose IN NTB (as the device builds it) is exactly @len bytes.
 * The device takes another frame only while a largest one would still
 * fit, so when there are several the last is a largest one.
 */
static GPtrArray *frames_for_ntb_len(NcmEnv *e, uint32_t len, uint32_t tag)
{
    GPtrArray *f = ncm_frames_new();
    g_autoptr(GByteArray) ntb = NULL;
    uint32_t n = 1, first, each = 0, i;
    int64_t diff;

    g_assert(!e->ntb32 && len % 4 == 0);
    if (len - 12 - 16 > 1514) {
        n = 2 + (len - 1516 - 12 - 40) / 1400;
        each = ROUND_DOWN((len - 12 - 1516 - 8 - (n + 1) * 4) / (n - 1), 4);
    }
    first = n == 1 ? len - 12 - 16 : each;
    for (;;) {
        g_ptr_array_set_size(f, 0);
        ncm_frames_add(f, ncm_bcast_mac, tag, first);
        for (i = 1; i < n; i++) {
            ncm_frames_add(f, i % 2 ? ncm_mac : ncm_bcast_mac, tag + i,
                           i == n - 1 ? 1514 : each);
        }
        ntb = ncm_in_ntb_expected(e, f, 0);
        diff = (int64_t)len - ntb->len;
        g_clear_pointer(&ntb, g_byte_array_unref);
        if (!diff) {
            return f;
        }
        g_assert_cmpint(first + diff, >=, 60);
        g_assert_cmpint(first + diff, <=, 1514);
        first += diff;
    }
}

typedef enum ZlpCase {
    ZLP_PACKET_TDS,         /* NTB of 2 x mps over mps-sized TDs: ZLP */
    ZLP_FILLED_TD,          /* NTB fills a 4 KiB TD exactly: ZLP */
    ZLP_SHORT_TD,           /* NTB 2 x mps in a bigger TD: ends short */
    ZLP_INPUT_SIZE,         /* NTB exactly the input size: no ZLP */
} ZlpCase;

/*
 * USB 2.0 5.8.3 / NCM 1.0 3.2.2: an IN NTB that ends exactly at a packet
 * boundary of the host's transfer, shorter than the input size, is
 * followed by a ZLP; otherwise no zero-length transfer is sent.
 */
static void test_zlp(NcmEnv *e, const NcmCase *c)
{
    const ZlpCase *z = c->data;
    uint32_t ntb_len = *z == ZLP_FILLED_TD || *z == ZLP_INPUT_SIZE ?
                       4096 : 2 * e->mps;
    uint32_t td_len = *z == ZLP_PACKET_TDS ? e->mps : 4096;
    unsigned n_td = *z == ZLP_PACKET_TDS ? 3 : 2, i;
    g_autoptr(GPtrArray) rx = NULL;
    g_autoptr(GPtrArray) more = ncm_frames_new();
    g_autoptr(GPtrArray) got = ncm_frames_new();
    g_autoptr(GByteArray) ntb = g_byte_array_new();
    QXhciTransfer *t[3];
    bool zlp = *z == ZLP_PACKET_TDS || *z == ZLP_FILLED_TD;

    if (*z == ZLP_INPUT_SIZE) {
        uint8_t b[4];

        stl_le_p(b, 4096);
        g_assert_cmpint(ncm_class_out(e, NCM_SET_NTB_INPUT_SIZE, 0, b, 4),
                        ==, QXHCI_CC_SUCCESS);
        e->in_size = 4096;
    }
    ncm_set_alt(e, 1);
    rx = frames_for_ntb_len(e, ntb_len, 31000);
    ncm_mark(e);
    ncm_in_submit_queued(e, t, n_td, td_len);
    g_test_message("first TD in %u TRBs, first %u bytes", t[0]->ntrbs,
                   t[0]->trb_len[0]);
    ncm_sock_send_frames(e, rx);
    for (i = 0; i < n_td - 1; i++) {
        g_autofree uint8_t *buf = g_malloc(td_len);

        g_assert(qxhci_wait(t[i], NCM_RX_TIMEOUT_NS));
        qxhci_transfer_read(t[i], buf);
        ncm_oracle_in(e, buf, t[i]->actual, td_len);
        g_byte_array_append(ntb, buf, t[i]->actual);
    }
    g_assert_cmpuint(ntb->len, ==, ntb_len);
    ncm_ntb_parse_in(e, ntb->data, ntb->len, e->in_size, got);
    ncm_frames_assert_equal(got, rx);
    for (i = 0; i < 10; i++) {
        qxhci_step(e->xhci);
    }
    if (*z == ZLP_FILLED_TD) {
        /* built in the TD the device held; in NAK mode it holds none */
        ncm_assert_deltas(e, { "in_zlps", 1 },
                          { "in_direct_ntbs", ncm_parks_packets(e) ? 1 : 0 });
    } else {
        ncm_assert_deltas(e, { "in_zlps", zlp ? 1 : 0 });
    }
    if (zlp) {
        g_assert(t[n_td - 1]->done);
        g_assert_cmpuint(t[n_td - 1]->actual, ==, 0);
        ncm_oracle_in_td(e, t[n_td - 1]);
    } else {
        /* no empty transfer: the last TD waits for the next NTB */
        g_assert(!t[n_td - 1]->done);
        ncm_frames_add(more, ncm_mac, 31100, 400);
        ncm_sock_send_frames(e, more);
        g_assert(qxhci_wait(t[n_td - 1], NCM_RX_TIMEOUT_NS));
        g_ptr_array_set_size(got, 0);
        ncm_in_td_parse(e, t[n_td - 1], e->in_size, got);
        ncm_frames_assert_equal(got, more);
    }
    for (i = 0; i < n_td; i++) {
        qxhci_transfer_free(t[i]);
    }
    ncm_queue_check_traffic(e, 31200);
}

/*
 * NCM 1.0 3.2.1: an NTB16 whose wBlockLength is 0 ends with a short packet
 * and its transfer "must still be shorter than dwNtbInMaxSize".  At the
 * 64 KiB input size, frames that would fill an NTB16 of exactly 65536
 * bytes must come in NTBs the oracle accepts (no 64 KiB NTB16 ended by
 * size with wBlockLength 0), through 64 KiB TDs as Linux queues them.
 */
static void test_rx_ntb16_64k(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) rx = NULL;
    g_autoptr(GPtrArray) got = NULL;

    uint32_t n, first, i;

    g_assert_cmpuint(e->p.in_max, ==, 65536);
    ncm_set_alt(e, 1);
    /* a first frame of @first bytes, then largest ones: 65536 in all */
    for (n = 2; !rx; n++) {
        for (first = 60; first <= 1514 && !rx; first++) {
            g_autoptr(GPtrArray) f = ncm_frames_new();
            g_autoptr(GByteArray) ntb = NULL;

            ncm_frames_add(f, ncm_bcast_mac, 39000, first);
            for (i = 1; i < n; i++) {
                ncm_frames_add(f, ncm_mac, 39000 + i, 1514);
            }
            ntb = ncm_in_ntb_expected(e, f, 0);
            if (ntb->len == 65536) {
                rx = g_steal_pointer(&f);
            }
            g_assert_cmpuint(ntb->len, <=, 65536 + 1520);
        }
    }
    g_test_message("%u frames, the first of %u bytes", rx->len,
                   (unsigned)((GByteArray *)g_ptr_array_index(rx, 0))->len);
    ncm_sock_send_frames(e, rx);
    ncm_sock_settle(e);
    got = ncm_receive(e, rx->len, 65536, e->in_size);
    ncm_frames_assert_equal(got, rx);
    ncm_queue_check_traffic(e, 39500);
}

/*
 * A smaller input size drops what was queued for the old one; frames the
 * netdev held back meanwhile must flow again at once.
 */
static void test_rx_input_size_flush(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) rx = ncm_frames_new();
    g_autoptr(GPtrArray) got = NULL;
    g_autoptr(GPtrArray) next = ncm_frames_new();
    uint64_t flushed, backlog;
    uint8_t b[4];
    unsigned i;

    ncm_set_alt(e, 1);
    ncm_mark(e);
    for (i = 0; i < 100; i++) {
        ncm_frames_add(rx, ncm_mac, 32000 + i, 1000);
    }
    ncm_sock_send_frames(e, rx);
    ncm_sock_settle(e);
    stl_le_p(b, 2048);
    g_assert_cmpint(ncm_class_out(e, NCM_SET_NTB_INPUT_SIZE, 0, b, 4),
                    ==, QXHCI_CC_SUCCESS);
    e->in_size = 2048;
    ncm_sock_settle(e);
    flushed = ncm_delta(e, "in_flushed_datagrams");
    g_assert_cmpuint(flushed, >, 0);
    backlog = rx->len - flushed;
    g_test_message("%" PRIu64 " flushed, %" PRIu64 " still to come",
                   flushed, backlog);
    got = ncm_receive(e, backlog, e->p.in_max, 2048);
    for (i = 0; i < backlog; i++) {
        g_ptr_array_add(next, g_byte_array_ref(
                            g_ptr_array_index(rx, flushed + i)));
    }
    ncm_frames_assert_equal(got, next);
    ncm_expect_no_rx(e);
}

/*
 * A host buffer smaller than the largest frame is not built into; a
 * jumbo frame then goes out through it in pieces and RX stays alive.
 */
static void test_rx_jumbo_small_td(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) rx = ncm_frames_new();
    g_autoptr(GPtrArray) got = ncm_frames_new();
    g_autoptr(GByteArray) ntb = g_byte_array_new();
    g_autofree uint8_t *buf = g_malloc(65536);
    QXhciTransfer *t;

    ncm_set_alt(e, 1);
    t = in_park(e, 2048, 0);
    ncm_frames_add(rx, ncm_mac, 33000, 8000);
    ncm_sock_send_frames(e, rx);
    g_assert(qxhci_wait(t, NCM_RX_TIMEOUT_NS));
    g_assert_cmpuint(t->actual, ==, 2048);
    qxhci_transfer_read(t, buf);
    ncm_oracle_in(e, buf, t->actual, 2048);
    g_byte_array_append(ntb, buf, t->actual);
    qxhci_transfer_free(t);
    t = qxhci_submit(e->dev, e->ep_in.address, NULL, 65536);
    g_assert(qxhci_wait(t, NCM_RX_TIMEOUT_NS));
    qxhci_transfer_read(t, buf);
    ncm_oracle_in(e, buf, t->actual, 65536);
    g_byte_array_append(ntb, buf, t->actual);
    qxhci_transfer_free(t);
    ncm_ntb_parse_in(e, ntb->data, ntb->len, e->in_size, got);
    ncm_frames_assert_equal(got, rx);
    ncm_queue_check_traffic(e, 33100);
}

/*
 * A host buffer that ends inside a packet, with more of the NTB to come:
 * a real function sends a full packet and the host sees babble.  The NTB
 * is lost, counted and reported; after the host resets the endpoint the
 * next NTB comes whole.
 */
static void test_rx_babble(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) rx = ncm_frames_new();
    QXhciTransfer *t;

    ncm_set_alt(e, 1);
    ncm_mark(e);
    t = in_park(e, 100, 0);
    ncm_frames_add(rx, ncm_mac, 38000, 500);
    ncm_sock_send_frames(e, rx);
    g_assert(qxhci_wait(t, NCM_RX_TIMEOUT_NS));
    g_assert_cmpint(t->cc, ==, QXHCI_CC_BABBLE);
    qxhci_transfer_free(t);
    ncm_assert_deltas(e, { "in_babbles", 1 }, { "in_flushed_datagrams", 1 });
    /* the halted endpoint is reset; the lost NTB left a sequence gap */
    g_assert_cmpint(qxhci_endpoint_cancel(e->dev, e->ep_in.address), ==,
                    QXHCI_CC_SUCCESS);
    e->rx_seq++;
    ncm_oracle_lost_ntb(e);
    ncm_queue_check_traffic(e, 38100);
}

/*
 * A frame of no bytes from another NIC on the same hub: usb-net in CDC
 * ECM mode sends one for a zero-length bulk OUT packet of its guest.  The
 * hub's port returned the size it took, 0, which the net layer reads as
 * "not now": the empty frame, and every frame usb-net sent after it,
 * stayed queued for good, and none reached usb-ncm-dl (F30; the net layer
 * refuses the frame now, patches/0039).  The frame usb-net sends next
 * must arrive in an IN NTB.
 */
#define USB_DT_CONFIG_DESC  2           /* USB 2.0 table 9-5 */
#define HUB_NTB_MAX         65536       /* usb-ncm-dl's IN NTBs */

static void test_hub_empty_frame(void)
{
    /* qemu-xhci's USB 2 ports only: each device on the port it names */
    QXhciMachine *m = qxhci_machine_start("USB_NCM_QTEST_FIRMWARE",
        "-global qemu-xhci.p3=0 "
        "-netdev hubport,id=h0,hubid=0 -netdev hubport,id=h1,hubid=0 "
        "-device usb-ncm-dl,id=ncm0,bus=xhci.0,port=1,netdev=h0,"
        "mac=" NCM_MAC_STR " "
        "-device usb-net,bus=xhci.0,port=2,netdev=h1");
    uint8_t config[256], frame[60], *ntb = g_malloc0(HUB_NTB_MAX);
    QXhciEndpoint eps[4], ncm_in, net_out;
    QXhciDevice *net = NULL;
    QXhciTransfer *t;
    uint32_t len = 0;
    int port, n;

    /* usb-ncm-dl on port 1: configured, data interface at setting 1 */
    g_assert_cmpint(qxhci_get_descriptor(m->dev, USB_DT_CONFIG_DESC, 0, 0,
                                         config, sizeof(config), &len), ==,
                    QXHCI_CC_SUCCESS);
    n = qxhci_config_find_endpoints(config, len, 1, 1, eps, 4);
    g_assert_cmpint(n, ==, 2);
    ncm_in = eps[0].address & 0x80 ? eps[0] : eps[1];
    g_assert_cmpint(qxhci_configure_endpoints(m->dev, eps, 2, NULL, 0), ==,
                    QXHCI_CC_SUCCESS);
    qxhci_set_configuration(m->dev, 1);
    g_assert_cmpint(qxhci_control(m->dev, 0x01, QXHCI_REQ_SET_INTERFACE, 1, 1,
                                  NULL, 0, NULL), ==, QXHCI_CC_SUCCESS);

    /* usb-net on the other port: CDC ECM (configuration 1), setting 1 */
    for (port = 1; port <= qxhci_max_ports(m->xhci) && !net; port++) {
        if (port != m->port && (qxhci_portsc(m->xhci, port) & 1)) {
            net = qxhci_device_enumerate(m->xhci, port);
        }
    }
    g_assert(net);
    /* (its configuration descriptor 0 is RNDIS, value 2; 1 is CDC ECM) */
    g_assert_cmpint(qxhci_get_descriptor(net, USB_DT_CONFIG_DESC, 1, 0,
                                         config, sizeof(config), &len), ==,
                    QXHCI_CC_SUCCESS);
    n = qxhci_config_find_endpoints(config, len, 1, 1, eps, 4);
    g_assert_cmpint(n, ==, 2);
    net_out = eps[0].address & 0x80 ? eps[1] : eps[0];
    g_assert_cmpint(qxhci_configure_endpoints(net, eps, 2, NULL, 0), ==,
                    QXHCI_CC_SUCCESS);
    qxhci_set_configuration(net, 1);
    g_assert_cmpint(qxhci_control(net, 0x01, QXHCI_REQ_SET_INTERFACE, 1, 1,
                                  NULL, 0, NULL), ==, QXHCI_CC_SUCCESS);

    /* a zero-length packet, then a broadcast frame of 60 bytes */
    g_assert_cmpint(qxhci_transfer_sync(net, net_out.address, NULL, 0, NULL,
                                        NANOSECONDS_PER_SECOND), ==,
                    QXHCI_CC_SUCCESS);
    memset(frame, 0xff, 6);
    memcpy(frame + 6, "\x52\x54\x00\xaa\xbb\xcc", 6);
    stw_be_p(frame + 12, 0x88b5);
    memset(frame + 14, 0x5a, sizeof(frame) - 14);
    g_assert_cmpint(qxhci_transfer_sync(net, net_out.address, frame,
                                        sizeof(frame), NULL,
                                        NANOSECONDS_PER_SECOND), ==,
                    QXHCI_CC_SUCCESS);

    /* the frame reaches usb-ncm-dl's host in an NTB */
    t = qxhci_submit(m->dev, ncm_in.address, NULL, HUB_NTB_MAX);
    g_assert(t);
    g_assert_true(qxhci_wait(t, 2 * NANOSECONDS_PER_SECOND));
    g_assert_true(t->cc == QXHCI_CC_SUCCESS ||
                  t->cc == QXHCI_CC_SHORT_PACKET);
    qxhci_transfer_read(t, ntb);
    g_assert_nonnull(memmem(ntb, t->actual, frame, sizeof(frame)));
    qxhci_transfer_free(t);

    qxhci_device_free(net);
    g_free(ntb);
    qxhci_machine_stop(m);
}

void ncm_add_rx_cases(bool ss)
{
    static const char *const models[] = { NCM_DL, NCM_GENERIC };
    static const CancelHow cancels[] = {
        CANCEL_STOP_ENDPOINT, CANCEL_ALT_0, CANCEL_PORT_RESET,
        CANCEL_CONTROL_SET_INTERFACE,
    };
    static const char *const cancel_names[] = {
        "rx/parked-transfer-cancelled/stop-endpoint",
        "rx/parked-transfer-cancelled/alt-0",
        "rx/parked-transfer-cancelled/port-reset",
        "rx/parked-transfer-cancelled/control-set-interface",
    };
    static const ZlpCase zlps[] = {
        ZLP_PACKET_TDS, ZLP_FILLED_TD, ZLP_SHORT_TD, ZLP_INPUT_SIZE,
    };
    static const struct {
        const char *name;
        void (*fn)(NcmEnv *e, const NcmCase *c);
    } coalesce[] = {
        { "rx/coalesce/keeps-ntb-while-host-busy", test_rx_coalesce },
        { "rx/coalesce/sent-at-limit", test_rx_coalesce_timeout },
        { "rx/coalesce/full-ntb-goes-at-once", test_rx_coalesce_full },
        { "rx/coalesce/alt-0-while-kept", test_rx_coalesce_alt_change },
    };
    static const char *const zlp_names[] = {
        "zlp/ntb-over-packet-sized-tds", "zlp/ntb-fills-td",
        "zlp/none-when-td-ends-short", "zlp/none-at-input-size",
    };
    unsigned m, i;

    ncm_add_case(ss, NCM_DL, "rx/input-size-limit", test_rx_input_size, NULL,
                 NULL);
    ncm_add_case(ss, NCM_DL, "rx/backlog-1000", test_rx_backlog, NULL, NULL);
    for (i = 0; i < ARRAY_SIZE(zlps); i++) {
        g_autofree char *nak = g_strdup_printf("%s/nak-mode", zlp_names[i]);

        ncm_add_case(ss, NCM_DL, zlp_names[i], test_zlp, &zlps[i], NULL);
        if (zlps[i] == ZLP_PACKET_TDS || g_test_slow()) {
            ncm_add_case(ss, NCM_DL, nak, test_zlp, &zlps[i],
                         "x-park-packets=off");
        }
    }
    ncm_add_case(ss, NCM_DL, "rx/input-size-drop-restarts-rx",
                 test_rx_input_size_flush, NULL, NULL);
    ncm_add_case(ss, NCM_DL, "rx/jumbo-frame-small-td",
                 test_rx_jumbo_small_td, NULL, "max-segment-size=8192");
    ncm_add_case(ss, NCM_DL, "rx/ntb16-at-64k-input-size", test_rx_ntb16_64k,
                 NULL, NULL);
    ncm_add_case(ss, NCM_DL, "rx/babble-buffer-ends-inside-packet",
                 test_rx_babble, NULL, NULL);
    for (i = 0; i < ARRAY_SIZE(coalesce); i++) {
        ncm_add_case(ss, NCM_DL, coalesce[i].name, coalesce[i].fn, NULL,
                     "in-coalesce-us=200");
    }
    for (m = 0; m < ARRAY_SIZE(models); m++) {
        ncm_add_case(ss, models[m], "rx/frames", test_rx_frames, NULL, NULL);
        ncm_add_case(ss, models[m], "rx/direct-into-waiting-transfer",
                     test_rx_direct, NULL, NULL);
        ncm_add_case(ss, models[m], "rx/copy-when-no-transfer-waiting",
                     test_rx_copy, NULL, NULL);
        ncm_add_case(ss, models[m], "rx/direct-respects-input-size",
                     test_rx_direct_input_size, NULL, NULL);
        for (i = 0; i < ARRAY_SIZE(cancels); i++) {
            ncm_add_case(ss, models[m], cancel_names[i],
                         test_rx_parked_cancel, &cancels[i], NULL);
        }
        ncm_add_case(ss, models[m], "rx/direct-small-first-segment",
                     test_rx_direct_small_first, NULL, NULL);
    }
    if (!ss && qtest_has_device("usb-net")) {
        /* a machine of its own, once: no fixture, no speed of its own */
        qtest_add_func("/usb-ncm-dl/hub/empty-frame", test_hub_empty_frame);
    }
}
