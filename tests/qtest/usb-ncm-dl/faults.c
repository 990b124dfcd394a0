/*
 * usb-ncm-dl qtest: fault injection (the usb-ncm-fault object: link
 * down, busy, dropped and corrupted IN NTBs, re-enumeration)
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "fixture.h"

/* Cases: fault injection */

static void test_fault_link_down(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) rx = ncm_frames_new();
    g_autoptr(GPtrArray) tx = ncm_frames_new();
    g_autoptr(GPtrArray) rx2 = ncm_frames_new();
    bool end_early = *(const bool *)c->data;
    const int64_t n_ms = 1000;
    int64_t t0, now;
    uint8_t b[16];
    unsigned i;

    ncm_set_alt(e, 1);
    ncm_expect_link_up(e);
    ncm_check_marker(e, 8000);

    ncm_mark(e);
    t0 = ncm_clock_ns(e);
    ncm_fault_set(e, "link-down-ms", n_ms);
    ncm_expect_connection(b, ncm_notify_read(e, b, NCM_RX_TIMEOUT_NS), false);
    g_assert_cmpint(ncm_fault_get_int(e, "link-down-ms"), !=, 0);

    /* frames from the network do not reach the host... */
    for (i = 0; i < 3; i++) {
        ncm_frames_add(rx, i % 2 ? ncm_mac : ncm_bcast_mac, 8100 + i,
                       200 + i * 100);
    }
    ncm_sock_send_frames(e, rx);
    ncm_sock_settle(e);
    ncm_expect_no_rx(e);
    /* ...nor the host's frames the network */
    for (i = 0; i < 4; i++) {
        ncm_frames_add(tx, ncm_bcast_mac, 8200 + i, 300 + i * 100);
    }
    ncm_send_frames(e, tx);
    ncm_sock_expect_silence(e, 50);
    ncm_assert_deltas(e, { "link_down_drops", rx->len + tx->len },
                      { "out_datagrams", 0 },
                      { "in_datagrams", 0 },
                      { "in_ntbs", 0 });
    g_assert_cmpuint(ncm_notify_read(e, b, 100 * NCM_MS), ==, 0);

    now = ncm_clock_ns(e);
    g_assert_cmpint(now - t0, <, (n_ms - 100) * NCM_MS);
    if (end_early) {
        /* 0 ends the fault now */
        ncm_fault_set(e, "link-down-ms", 0);
    } else {
        /* still down until just before N ms... */
        qtest_clock_step(e->qts, t0 + (n_ms - 100) * NCM_MS - now);
        g_assert_cmpuint(ncm_notify_read(e, b, NCM_NOTIFY_QUIET_NS), ==, 0);
        /* ...and up again once they have passed */
        now = ncm_clock_ns(e);
        qtest_clock_step(e->qts, t0 + (n_ms + 1) * NCM_MS - now);
    }
    ncm_expect_link_up(e);
    g_assert_cmpuint(ncm_notify_read(e, b, 100 * NCM_MS), ==, 0);
    g_assert_cmpint(ncm_fault_get_int(e, "link-down-ms"), ==, 0);
    if (end_early) {
        /* the timer that would have ended it is gone */
        now = ncm_clock_ns(e);
        if (now < t0 + (n_ms + 1) * NCM_MS) {
            qtest_clock_step(e->qts, t0 + (n_ms + 1) * NCM_MS - now);
        }
        g_assert_cmpuint(ncm_notify_read(e, b, NCM_NOTIFY_QUIET_NS), ==, 0);
    }

    /* traffic flows again; what was dropped stays dropped */
    ncm_check_marker(e, 8300);
    ncm_frames_add(rx2, ncm_mac, 8400, 100);
    ncm_frames_add(rx2, ncm_bcast_mac, 8401, 1514);
    ncm_sock_send_frames(e, rx2);
    ncm_expect_rx(e, rx2);
    ncm_expect_no_rx(e);
    /* since the mark: no drop after those of the outage, rx2 came in */
    ncm_assert_deltas(e, { "link_down_drops", rx->len + tx->len },
                      { "in_datagrams", rx2->len });
}

static void test_fault_busy(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) tx = ncm_frames_new();
    g_autoptr(GPtrArray) rx = ncm_frames_new();
    g_autoptr(GPtrArray) got = ncm_frames_new();
    g_autoptr(GByteArray) ntb = NULL;
    g_autofree uint8_t *buf = g_malloc(e->p.in_max);
    const int64_t n_ms = 300;
    QXhciTransfer *out, *in;
    NcmHostLayout l;
    int64_t t0;
    unsigned i;

    ncm_set_alt(e, 1);
    ncm_check_marker(e, 8500);
    for (i = 0; i < 5; i++) {
        ncm_frames_add(tx, ncm_bcast_mac, 8600 + i, 100 + i * 250);
        ncm_frames_add(rx, i % 2 ? ncm_mac : ncm_bcast_mac, 8700 + i,
                       1514 - i * 250);
    }
    l = ncm_out_layout(e);
    ntb = ncm_ntb_build(&l, tx, 0);
    g_assert_cmpuint(ntb->len % e->mps, !=, 0);

    ncm_mark(e);
    t0 = ncm_clock_ns(e);
    ncm_fault_set(e, "busy-ms", n_ms);
    g_assert_cmpint(ncm_fault_get_int(e, "busy-ms"), !=, 0);
    out = qxhci_submit(e->dev, e->ep_out.address, ntb->data, ntb->len);
    in = qxhci_submit(e->dev, e->ep_in.address, NULL, e->p.in_max);
    ncm_sock_send_frames(e, rx);
    ncm_sock_settle(e);

    /* both endpoints NAK while the firmware is busy */
    g_assert(!qxhci_wait(out, 100 * NCM_MS));
    g_assert(!in->done);
    g_assert_cmpint(ncm_clock_ns(e) - t0, <, (n_ms - 1) * NCM_MS);
    ncm_sock_expect_silence(e, 20);

    /* then both transfers complete, and nothing was lost */
    g_assert(qxhci_wait(out, 2 * n_ms * NCM_MS));
    g_assert_cmpint(ncm_clock_ns(e) - t0, >=, (n_ms - 1) * NCM_MS);
    g_assert_cmpint(out->cc, ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(out->actual, ==, ntb->len);
    qxhci_transfer_free(out);
    ncm_sock_expect_frames(e, tx);
    g_assert(qxhci_wait(in, NCM_RX_TIMEOUT_NS));
    g_assert(in->cc == QXHCI_CC_SUCCESS || in->cc == QXHCI_CC_SHORT_PACKET);
    qxhci_transfer_read(in, buf);
    ncm_oracle_in(e, buf, in->actual, in->length);
    ncm_ntb_parse_in(e, buf, in->actual, e->in_size, got);
    qxhci_transfer_free(in);
    ncm_frames_assert_equal(got, rx);
    g_assert_cmpint(ncm_fault_get_int(e, "busy-ms"), ==, 0);

    ncm_assert_deltas(e, { "out_datagrams", tx->len },
                      { "in_datagrams", rx->len },
                      { "in_flushed_datagrams", 0 }, { "link_down_drops", 0 });
    ncm_check_marker(e, 8800);
}

static void test_fault_drop_in(NcmEnv *e, const NcmCase *c)
{
    unsigned i, j, delivered = 0, dropped = 0;

    ncm_set_alt(e, 1);
    ncm_mark(e);
    ncm_fault_set(e, "drop-in-every", 2);
    g_assert_cmpint(ncm_fault_get_int(e, "drop-in-every"), ==, 2);
    /* one burst, one NTB; the 2nd and 4th are dropped, then no more */
    for (i = 0; i < 6; i++) {
        g_autoptr(GPtrArray) burst = ncm_frames_new();

        if (i == 4) {
            ncm_fault_set(e, "drop-in-every", 0);
        }
        for (j = 0; j < 3; j++) {
            ncm_frames_add(burst, j % 2 ? ncm_mac : ncm_bcast_mac,
                           8900 + i * 10 + j, 100 + j * 400 + i);
        }
        ncm_sock_send_frames(e, burst);
        ncm_sock_settle(e);
        if (i == 1 || i == 3) {
            ncm_expect_no_rx(e);
            e->rx_seq++;        /* the lost NTB had its wSequence */
            ncm_oracle_lost_ntb(e);
            dropped += burst->len;
        } else {
            ncm_expect_rx(e, burst);
            delivered += burst->len;
        }
    }
    ncm_expect_no_rx(e);
    ncm_assert_deltas(e, { "fault_dropped_in_ntbs", 2 }, { "in_ntbs", 4 },
                      { "in_datagrams", delivered },
                      { "in_flushed_datagrams", dropped });
}

enum {
    CORRUPT_NDP_AT_END,
    CORRUPT_DATAGRAM_WRAP,
    CORRUPT_NDP_LOOP,
    CORRUPT_BLOCK_LEN,
    CORRUPT_SHORT_NOTIFY,
    CORRUPT__MAX,
};

typedef struct CorruptCase {
    int how;
    bool ntb32;                 /* with NTB32 selected */
} CorruptCase;

static const char *const corrupt_names[CORRUPT__MAX] = {
    [CORRUPT_NDP_AT_END] = "ndp-at-end",
    [CORRUPT_DATAGRAM_WRAP] = "datagram-offset-wrap",
    [CORRUPT_NDP_LOOP] = "ndp-chain-loop",
    [CORRUPT_BLOCK_LEN] = "block-length-over-input-size",
    [CORRUPT_SHORT_NOTIFY] = "short-notification",
};

/* One IN TD of dwNtbInMaxSize bytes: the next NTB as it came */
static GByteArray *in_read_raw(NcmEnv *e)
{
    QXhciTransfer *t = qxhci_submit(e->dev, e->ep_in.address, NULL,
                                    e->p.in_max);
    GByteArray *b = g_byte_array_new();

    g_assert(qxhci_wait(t, NCM_RX_TIMEOUT_NS));
    g_assert(t->cc == QXHCI_CC_SUCCESS || t->cc == QXHCI_CC_SHORT_PACKET);
    g_byte_array_set_size(b, t->actual);
    qxhci_transfer_read(t, b->data);
    ncm_oracle_in(e, b->data, t->actual, t->length);
    qxhci_transfer_free(t);
    return b;
}

/*
 * Check @got against the clean NTB @want with corruption @how applied,
 * first field by field as the documentation states it, then byte for byte.
 */
static void check_corrupted(NcmEnv *e, GByteArray *got, GByteArray *want,
                            int how)
{
    bool n32 = e->ntb32;
    uint32_t ndp_index_off = n32 ? 12 : 10, ndp_hdr = n32 ? 16 : 8;
    uint32_t ndp = ncm_get_field(want->data + ndp_index_off, n32);
    uint32_t end = ROUND_DOWN(want->len - 8, 4);
    uint32_t block;
    uint8_t *g = got->data;

    g_assert_cmpuint(got->len, ==, want->len);
    switch (how) {
    case CORRUPT_NDP_AT_END:
        /* wNdpIndex: a valid-looking NDP header in the last 8 bytes */
        g_assert_cmpuint(ncm_get_field(g + ndp_index_off, n32), ==, end);
        g_assert_cmpuint(end, >=, got->len - 8);
        g_assert_cmpmem(g + end, 4, n32 ? "ncm0" : "NCM0", 4);
        g_assert_cmpuint(lduw_le_p(g + end + 4), ==, n32 ? 32 : 16);
        g_assert_cmpuint(lduw_le_p(g + end + 6), ==, 0);
        /* whose entries run past the block */
        g_assert_cmpuint(end + lduw_le_p(g + end + 4), >, got->len);
        memcpy(want->data + end, n32 ? "ncm0" : "NCM0", 4);
        stw_le_p(want->data + end + 4, n32 ? 32 : 16);
        stw_le_p(want->data + end + 6, 0);
        ncm_put_field(want->data + ndp_index_off, n32, end);
        break;
    case CORRUPT_DATAGRAM_WRAP:
        /* the NDP stays where it was; its first entry wraps */
        g_assert_cmpuint(ncm_get_field(g + ndp_index_off, n32), ==, ndp);
        g_assert_cmpuint(ncm_get_field(g + ndp + ndp_hdr, n32), ==,
                         n32 ? 0xfffffff0 : 0xfff0);
        g_assert_cmpuint(ncm_get_field(g + ndp + ndp_hdr + (n32 ? 4 : 2), n32),
                         ==, 0x20);
        ncm_put_field(want->data + ndp + ndp_hdr, n32,
                      n32 ? 0xfffffff0 : 0xfff0);
        ncm_put_field(want->data + ndp + ndp_hdr + (n32 ? 4 : 2), n32, 0x20);
        break;
    case CORRUPT_NDP_LOOP:
        /* wNextNdpIndex: the NDP's own offset */
        g_assert_cmpuint(ncm_get_field(g + ndp_index_off, n32), ==, ndp);
        g_assert_cmpuint(ncm_get_field(g + ndp + (n32 ? 8 : 6), n32), ==, ndp);
        ncm_put_field(want->data + ndp + (n32 ? 8 : 6), n32, ndp);
        break;
    case CORRUPT_BLOCK_LEN:
        /* the NTB input size plus 4, as far as NTB16 can say it */
        block = n32 ? e->in_size + 4 : MIN(e->in_size + 4, 0xffff);
        g_assert_cmpuint(ncm_get_field(g + 8, n32), ==, block);
        g_assert_cmpuint(block, >, got->len);
        ncm_put_field(want->data + 8, n32, block);
        break;
    default:
        g_assert_not_reached();
    }
    g_assert_cmpmem(got->data, got->len, want->data, want->len);
}

/* An IN NTB of @frames comes corrupted @count times, then clean. */
static void corrupt_rounds(NcmEnv *e, int how, unsigned count, uint32_t tag)
{
    const char *name = corrupt_names[how];
    g_autoptr(GPtrArray) clean = ncm_frames_new();
    g_autofree char *now = NULL;
    unsigned i;

    ncm_mark(e);
    if (count > 1) {
        ncm_fault_set(e, "corrupt-count", count);
    }
    ncm_fault_corrupt(e, name);
    /* corrupted on purpose: the oracle must refuse each (below) */
    e->oracle_off = true;
    now = ncm_fault_get_str(e, "corrupt-in");
    g_assert_cmpstr(now, ==, name);
    g_assert_cmpint(ncm_fault_get_int(e, "corrupt-count"), ==, count);

    for (i = 0; i < count; i++) {
        g_autoptr(GPtrArray) frames = ncm_frames_new();
        g_autoptr(GByteArray) got = NULL;
        g_autoptr(GByteArray) want = NULL;

        ncm_frames_add(frames, ncm_bcast_mac, tag + i * 10, 60 + i);
        ncm_frames_add(frames, ncm_mac, tag + i * 10 + 1, 1000);
        ncm_frames_add(frames, ncm_bcast_mac, tag + i * 10 + 2, 1514);
        ncm_sock_send_frames(e, frames);
        ncm_sock_settle(e);
        got = in_read_raw(e);
        /* the oracle must see what the corruption broke */
        ncm_oracle_catches(e, got->data, got->len, e->p.in_max);
        want = ncm_in_ntb_expected(e, frames, e->rx_seq++);
        check_corrupted(e, got, want, how);
    }
    g_assert_cmpint(ncm_fault_get_int(e, "corrupt-count"), ==, 0);
    e->oracle_off = false;

    /* the next one is clean */
    ncm_frames_add(clean, ncm_mac, tag + 100, 200);
    ncm_frames_add(clean, ncm_bcast_mac, tag + 101, 1514);
    ncm_sock_send_frames(e, clean);
    ncm_expect_rx(e, clean);
    ncm_assert_deltas(e, { "fault_corrupted_in_ntbs", count },
                      { "in_ntbs", count + 1 });
}

static void test_fault_corrupt(NcmEnv *e, const NcmCase *c)
{
    const CorruptCase *cc = c->data;
    int how = cc->how;
    bool n32 = cc->ntb32;
    uint8_t b[4];

    if (n32) {
        g_assert_cmpint(ncm_class_out(e, NCM_SET_NTB_FORMAT, 1, NULL, 0),
                        ==, QXHCI_CC_SUCCESS);
    }
    ncm_set_alt(e, 1);
    e->ntb32 = n32;
    g_assert_cmpint(ncm_fault_get_int(e, "corrupt-count"), ==, 0);
    corrupt_rounds(e, how, 1, 9000);
    if (how == CORRUPT_BLOCK_LEN) {
        /* the input size the host set, not dwNtbInMaxSize */
        stl_le_p(b, 4096);
        g_assert_cmpint(ncm_class_out(e, NCM_SET_NTB_INPUT_SIZE, 0, b, 4),
                        ==, QXHCI_CC_SUCCESS);
        e->in_size = 4096;
        corrupt_rounds(e, how, 1, 9200);
    }
    ncm_check_marker(e, 9400);
}

/* fault-corrupt-count=2: two NTBs in a row, then clean ones */
static void test_fault_corrupt_count(NcmEnv *e, const NcmCase *c)
{
    ncm_set_alt(e, 1);
    corrupt_rounds(e, CORRUPT_NDP_LOOP, 2, 9500);
}

static void test_fault_short_notify(NcmEnv *e, const NcmCase *c)
{
    static const uint8_t cut[4] = { 0xa1, 0x00, 0x00, 0x00 };
    g_autoptr(GPtrArray) rx = ncm_frames_new();
    uint8_t b[16];
    uint32_t n;

    ncm_set_alt(e, 1);
    ncm_expect_link_up(e);
    ncm_mark(e);
    ncm_fault_corrupt(e, "short-notification");

    /* NETWORK_CONNECTION(0), cut to 4 bytes */
    ncm_set_link(e, false);
    n = ncm_notify_read(e, b, NCM_RX_TIMEOUT_NS);
    g_assert_cmpmem(b, n, cut, sizeof(cut));
    g_assert_cmpuint(ncm_notify_read(e, b, 100 * NCM_MS), ==, 0);
    g_assert_cmpint(ncm_fault_get_int(e, "corrupt-count"), ==, 0);

    /* the next ones are whole */
    ncm_set_link(e, true);
    ncm_expect_link_up(e);
    g_assert_cmpuint(ncm_notify_read(e, b, 100 * NCM_MS), ==, 0);

    /* and IN NTBs are not touched */
    ncm_frames_add(rx, ncm_mac, 9600, 300);
    ncm_frames_add(rx, ncm_bcast_mac, 9601, 1514);
    ncm_sock_send_frames(e, rx);
    ncm_expect_rx(e, rx);
    ncm_assert_deltas(e, { "notifications", 3 },
                      { "fault_corrupted_in_ntbs", 0 });
    ncm_check_marker(e, 9700);
}

static void test_fault_corrupt_invalid(NcmEnv *e, const NcmCase *c)
{
    g_autofree char *now = NULL;
    static const char *const bad[] = {
        "no-such-corruption", "", "NDP-AT-END", "ndp-at-end ",
    };
    unsigned i;

    ncm_set_alt(e, 1);
    ncm_mark(e);
    ncm_fault_object(e);
    for (i = 0; i < ARRAY_SIZE(bad); i++) {
        QDict *rsp = qtest_qmp(e->qts, "{'execute': 'qom-set', 'arguments': "
                               "{'path': %s, 'property': 'corrupt-in',"
                               " 'value': %s}}", NCM_FAULT_PATH, bad[i]);
        QDict *err = qdict_get_qdict(rsp, "error");

        if (!err) {
            g_test_message("qom-set fault-corrupt-in '%s' was accepted",
                           bad[i]);
        }
        g_assert(err);
        g_assert(strstr(qdict_get_str(err, "desc"), "corrupt-in"));
        qobject_unref(rsp);
    }
    now = ncm_fault_get_str(e, "corrupt-in");
    g_assert_cmpstr(now, ==, "none");
    g_assert_cmpint(ncm_fault_get_int(e, "corrupt-count"), ==, 0);

    /* nothing armed: the next NTB is clean */
    ncm_check_rx_frame(e, 9800, 300);
    ncm_assert_deltas(e, { "fault_corrupted_in_ntbs", 0 });
}

/*
 * Re-enumeration fault: off the bus now, back after N ms (once, then
 * periodically); the host finds it again and traffic resumes.
 */
static void test_fault_replug(NcmEnv *e, const NcmCase *c)
{
    int64_t t0;
    unsigned i, events;

    ncm_set_alt(e, 1);
    ncm_check_marker(e, 39000);
    ncm_mark(e);
    t0 = ncm_clock_ns(e);
    ncm_fault_set(e, "replug-ms", 300);
    g_assert_cmpint(qxhci_take_port_events(e->xhci, e->port), >, 0);
    g_assert(e->dev->gone);
    g_assert_cmpint(ncm_fault_get_int(e, "replug-ms"), ==, 1);
    for (i = 0; i < 100 && ncm_clock_ns(e) - t0 < 250 * NCM_MS; i++) {
        qxhci_step(e->xhci);
        g_assert(!(qxhci_portsc(e->xhci, e->port) & 1));
    }
    ncm_replug_wait_back(e);
    g_assert_cmpint(ncm_clock_ns(e) - t0, >=, 300 * NCM_MS);
    g_assert_cmpint(ncm_fault_get_int(e, "replug-ms"), ==, 0);
    ncm_queue_check_traffic(e, 39100);
    ncm_assert_deltas(e, { "replugs", 1 });

    /* periodic: every 400 ms +- 50 down for 100 ms, for 2 s */
    ncm_fault_set(e, "replug-ms", 0);
    ncm_fault_set(e, "replug-seed", 7);
    qxhci_take_port_events(e->xhci, e->port);
    qtest_qmp_assert_success(e->qts, "{'execute': 'qom-set', 'arguments': "
                             "{'path': %s, 'property': 'replug-ms',"
                             " 'value': 100}}", NCM_FAULT_PATH);
    ncm_replug_wait_back(e);
    ncm_fault_set(e, "replug-every-ms", 400);
    t0 = ncm_clock_ns(e);
    while (ncm_clock_ns(e) - t0 < 2000 * NCM_MS) {
        qxhci_step(e->xhci);
    }
    ncm_fault_set(e, "replug-every-ms", 0);
    events = qxhci_take_port_events(e->xhci, e->port);
    g_test_message("%u port status changes in 2 s of periodic replugs",
                   events);
    g_assert_cmpuint(events, >=, 6);
    ncm_replug_wait_back(e);
    ncm_queue_check_traffic(e, 39200);
    g_assert_cmpuint(ncm_delta(e, "replugs"), >=, 5);
}

/* qom-set of a fault on the object @id: the error's text, or NULL */
static char *fault_try_set(NcmEnv *e, const char *id, const char *fault,
                           uint32_t value)
{
    g_autofree char *path = g_strdup_printf("/objects/%s", id);
    QDict *rsp = qtest_qmp(e->qts, "{'execute': 'qom-set', 'arguments': "
                           "{'path': %s, 'property': %s, 'value': %u}}",
                           path, fault, value);
    QDict *err = qdict_get_qdict(rsp, "error");
    char *why = err ? g_strdup(qdict_get_str(err, "desc")) : NULL;

    qobject_unref(rsp);
    return why;
}

static int64_t fault_get(NcmEnv *e, const char *id, const char *fault)
{
    g_autofree char *path = g_strdup_printf("/objects/%s", id);
    QDict *rsp = qtest_qmp(e->qts, "{'execute': 'qom-get', 'arguments': "
                           "{'path': %s, 'property': %s}}", path, fault);
    int64_t v = qdict_get_int(rsp, "return");

    qobject_unref(rsp);
    return v;
}

/*
 * The usb-ncm-fault object apart from the device: created before the
 * device it names (it looks the device up at the first fault), one per
 * device, detached when the device goes and attached to the next one of
 * that id; object-del ends its faults.
 */
static void test_fault_object(NcmEnv *e, const NcmCase *c)
{
    g_autofree char *why = NULL;
    uint8_t b[16];
    QDict *rsp;

    ncm_set_alt(e, 1);
    /* before the device: created, but a fault has nothing to act on */
    qtest_qmp_assert_success(e->qts, "{'execute': 'object-add', "
                             "'arguments': {'qom-type': 'usb-ncm-fault', "
                             "'id': 'f9', 'device': 'ncm9'}}");
    why = fault_try_set(e, "f9", "busy-ms", 100);
    g_assert(why && strstr(why, "no usb-ncm device 'ncm9'"));
    g_free(why);
    g_assert_cmpint(fault_get(e, "f9", "busy-ms"), ==, 0);

    /* hot-plugged: f9 attaches at its first fault */
    qtest_qmp_device_add(e->qts, c->model, "ncm9", "{'bus': 'xhci.0'}");
    g_assert_null(fault_try_set(e, "f9", "replug-seed", 5));
    g_assert_null(fault_try_set(e, "f9", "drop-in-every", 3));
    g_assert_cmpint(fault_get(e, "f9", "drop-in-every"), ==, 3);
    /* one injector per device */
    rsp = qtest_qmp(e->qts, "{'execute': 'object-add', 'arguments': "
                    "{'qom-type': 'usb-ncm-fault', 'id': 'f10', "
                    "'device': '/machine/peripheral/ncm9'}}");
    g_assert(qdict_haskey(rsp, "error"));
    g_assert(strstr(qdict_get_str(qdict_get_qdict(rsp, "error"), "desc"),
                    "has a fault injector already"));
    qobject_unref(rsp);

    /* the device goes: the faults with it, and nothing to attach to */
    qtest_qmp_device_del(e->qts, "ncm9");
    g_assert_cmpint(fault_get(e, "f9", "drop-in-every"), ==, 0);
    why = fault_try_set(e, "f9", "busy-ms", 100);
    g_assert(why && strstr(why, "ncm9"));

    /* a new device of that id: f9 attaches to it */
    qtest_qmp_device_add(e->qts, c->model, "ncm9", "{'bus': 'xhci.0'}");
    g_assert_null(fault_try_set(e, "f9", "replug-ms", 50));
    g_assert_cmpint(fault_get(e, "f9", "replug-ms"), ==, 1);
    ncm_step(e, 60 * NCM_MS);
    g_assert_cmpint(fault_get(e, "f9", "replug-ms"), ==, 0);
    g_assert_null(fault_try_set(e, "f9", "busy-ms", 1000000));
    qtest_qmp_assert_success(e->qts, "{'execute': 'object-del', "
                             "'arguments': {'id': 'f9'}}");
    qtest_qmp_device_del(e->qts, "ncm9");

    /*
     * ncm0 with its own object: a link held down for good comes back when
     * the object goes
     */
    ncm_expect_link_up(e);
    ncm_check_marker(e, 9900);
    ncm_fault_set(e, "link-down-ms", 1000000);
    ncm_expect_connection(b, ncm_notify_read(e, b, NCM_RX_TIMEOUT_NS), false);
    g_assert_cmpint(ncm_fault_get_int(e, "link-down-ms"), ==, 1);
    qtest_qmp_assert_success(e->qts, "{'execute': 'object-del', "
                             "'arguments': {'id': %s}}",
                             NCM_FAULT_PATH + strlen("/objects/"));
    ncm_expect_link_up(e);
    ncm_check_marker(e, 9910);
}

/*
 * at-in-ntb: faults that wait for an IN NTB, the point a record/replay
 * harness sets them at (tests/guest/replay-qmp.py): nothing happens
 * before that NTB, the fault comes right after it, a number that has
 * passed is refused, a change waiting blocks migration, and 0 drops
 * what is still waiting (and its blocker)
 */
static void test_fault_at_in_ntb(NcmEnv *e, const NcmCase *c)
{
    const char *id = NCM_FAULT_PATH + strlen("/objects/");
    g_autofree char *why = NULL;
    int64_t at;
    uint8_t b[16];
    unsigned i;

    ncm_set_alt(e, 1);
    ncm_expect_link_up(e);
    ncm_check_marker(e, 9920);
    ncm_mark(e);

    /* link-down-ms=100000 waits for the third IN NTB from now */
    ncm_fault_set(e, "at-in-ntb", 3);
    at = ncm_fault_get_int(e, "at-in-ntb");
    g_assert_cmpint(at, >=, 3);
    ncm_migrate_assert_unblocked(e);
    ncm_fault_set(e, "link-down-ms", 100000);
    g_assert_cmpint(ncm_fault_get_int(e, "link-down-ms"), ==, 0);
    /* a change that waits does not migrate */
    ncm_migrate_assert_blocked(e);
    for (i = 0; i < 3; i++) {
        g_autoptr(GPtrArray) one = ncm_frames_new();

        ncm_frames_add(one, ncm_mac, 9930 + i, 200 + i * 100);
        ncm_sock_send_frames(e, one);
        ncm_sock_settle(e);
        /* the NTB the fault waited for is still delivered */
        ncm_expect_rx(e, one);
        if (i < 2) {
            g_assert_cmpint(ncm_fault_get_int(e, "link-down-ms"), ==, 0);
            g_assert_cmpuint(ncm_notify_read(e, b, NCM_NOTIFY_QUIET_NS), ==,
                             0);
        }
    }
    ncm_expect_connection(b, ncm_notify_read(e, b, NCM_RX_TIMEOUT_NS), false);
    g_assert_cmpint(ncm_fault_get_int(e, "link-down-ms"), ==, 1);
    /* at-in-ntb stays: the next change would wait for the same NTB */
    g_assert_cmpint(ncm_fault_get_int(e, "at-in-ntb"), ==, at);
    why = fault_try_set(e, id, "busy-ms", 100);
    g_assert(why && strstr(why, "has passed"));

    /* 0: changes apply at once again */
    ncm_fault_set(e, "at-in-ntb", 0);
    ncm_fault_set(e, "link-down-ms", 0);
    ncm_expect_link_up(e);

    /* and what still waits when at-in-ntb goes to 0 never comes */
    ncm_migrate_assert_unblocked(e);
    ncm_fault_set(e, "at-in-ntb", 1);
    ncm_fault_set(e, "link-down-ms", 100000);
    ncm_migrate_assert_blocked(e);
    ncm_fault_set(e, "at-in-ntb", 0);
    ncm_migrate_assert_unblocked(e);
    ncm_check_marker(e, 9940);
    ncm_check_marker(e, 9941);
    g_assert_cmpuint(ncm_notify_read(e, b, NCM_NOTIFY_QUIET_NS), ==, 0);
    g_assert_cmpint(ncm_fault_get_int(e, "link-down-ms"), ==, 0);
    ncm_assert_deltas(e, { "link_down_drops", 0 });
}

void ncm_add_fault_cases(bool ss)
{
    static const bool ends_early[] = { false, true };
    static CorruptCase corrupt[CORRUPT_SHORT_NOTIFY][2];
    unsigned i, n32;

    ncm_add_case(ss, NCM_DL, "fault/link-down-ms", test_fault_link_down,
                 &ends_early[0], NULL);
    ncm_add_case(ss, NCM_DL, "fault/link-down-ms-0-ends-early",
                 test_fault_link_down, &ends_early[1], NULL);
    ncm_add_case(ss, NCM_DL, "fault/busy-ms", test_fault_busy, NULL, NULL);
    ncm_add_case(ss, NCM_DL, "fault/drop-in-every-2", test_fault_drop_in,
                 NULL, NULL);
    for (i = 0; i < CORRUPT_SHORT_NOTIFY; i++) {
        for (n32 = 0; n32 < 2; n32++) {
            g_autofree char *name = g_strdup_printf("fault/corrupt-in/%s%s",
                                                    n32 ? "ntb32/" : "",
                                                    corrupt_names[i]);

            corrupt[i][n32] = (CorruptCase) { .how = i, .ntb32 = n32 };
            ncm_add_case(ss, NCM_DL, name, test_fault_corrupt,
                         &corrupt[i][n32], NULL);
        }
    }
    ncm_add_case(ss, NCM_DL, "fault/corrupt-in/short-notification",
                 test_fault_short_notify, NULL, NULL);
    ncm_add_case(ss, NCM_DL, "fault/corrupt-count-2",
                 test_fault_corrupt_count, NULL, NULL);
    ncm_add_case(ss, NCM_DL, "fault/corrupt-in/invalid-name-rejected",
                 test_fault_corrupt_invalid, NULL, NULL);
    ncm_add_case(ss, NCM_DL, "fault/replug", test_fault_replug, NULL, NULL);
    ncm_add_case(ss, NCM_DL, "fault/object", test_fault_object, NULL, NULL);
    ncm_add_case(ss, NCM_DL, "fault/at-in-ntb", test_fault_at_in_ntb, NULL,
                 NULL);
}
