/*
 * usb-ncm-dl qtest: xHCI streams on a device that has none
 *
 * The device's SuperSpeed Endpoint Companion descriptors give its bulk
 * endpoints no streams (MaxStreams 0).  A guest may still ask the xHCI
 * for them: Configure Endpoint with MaxPStreams > 0, LSA and a Stream
 * Context Array in the endpoint context, TDs on the streams' rings and
 * doorbells with a Stream ID.  Before patches/0019 the controller took
 * that, and the USB core hands stream packets to the device even while
 * another packet of the endpoint is in flight: the deferred OUT
 * completion then completed the parked packet inside the controller's
 * kick, and QEMU aborted in xhci_kick_epctx() (Assertion
 * '!epctx->kick_active').  Now Configure Endpoint fails with a Resource
 * Error, the endpoints stay disabled, the doorbells find nothing to run,
 * and the device goes on working once the guest configures the
 * endpoints without streams.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "fixture.h"

/* MaxPStreams 1: a Primary Stream Context Array of 2 << 1 entries */
#define ST_MAX_PSTREAMS         1
#define ST_NR_PSTREAMS          (2u << ST_MAX_PSTREAMS)
#define ST_RING_TRBS            16
#define ST_TD_LEN               256

#define ST_TRB_NORMAL           1
#define ST_TRB_LINK             6
#define ST_TRB_CONFIGURE_EP     12
#define ST_TRB_STOP_EP          15
#define ST_TRB_SET_TR_DEQUEUE   16
#define ST_TRB_C                (1u << 0)
#define ST_TRB_LINK_TC          (1u << 1)
#define ST_TRB_ISP              (1u << 2)
#define ST_TRB_IOC              (1u << 5)
#define ST_TRB_EV_TRANSFER      32

typedef struct StreamSeq {
    bool out;                   /* streams on bulk OUT */
    bool in;                    /* streams on bulk IN */
    unsigned tds;               /* TDs queued on each stream 1..3 */
    bool batch;                 /* every doorbell before any clock step */
    unsigned nbells;
    uint16_t bells[6];          /* doorbell Stream IDs, in order */
} StreamSeq;

/* One endpoint's stream rings, as the guest laid them out */
typedef struct StreamEp {
    uint8_t address;
    unsigned dci;
    uint64_t sca;               /* Stream Context Array */
    uint64_t ring[ST_NR_PSTREAMS];
    unsigned enq[ST_NR_PSTREAMS];
} StreamEp;

typedef struct StreamEnv {
    NcmEnv *e;
    StreamEp ep[2];
    unsigned nep;
    unsigned events;            /* Transfer Events for TDs on a stream */
} StreamEnv;

static unsigned st_dci(uint8_t address)
{
    return (address & 0x0f) * 2 + ((address & 0x80) ? 1 : 0);
}

static uint64_t st_zalloc(NcmEnv *e, size_t size)
{
    uint64_t addr = guest_alloc(&e->qs->alloc, size);

    g_assert(addr);
    qtest_memset(e->qts, addr, 0, size);
    return addr;
}

static void st_write_trb(NcmEnv *e, uint64_t addr, uint64_t param,
                         uint32_t status, uint32_t control)
{
    uint8_t trb[16];

    stq_le_p(trb, param);
    stl_le_p(trb + 8, status);
    stl_le_p(trb + 12, control);
    qtest_memwrite(e->qts, addr, trb, sizeof(trb));
}

static void st_write_dw(NcmEnv *e, uint64_t addr, const uint32_t *dw, int n)
{
    uint8_t buf[64];
    int i;

    for (i = 0; i < n; i++) {
        stl_le_p(buf + 4 * i, dw[i]);
    }
    qtest_memwrite(e->qts, addr, buf, 4 * n);
}

static void st_read_dw(NcmEnv *e, uint64_t addr, uint32_t *dw, int n)
{
    uint8_t buf[64];
    int i;

    qtest_memread(e->qts, addr, buf, 4 * n);
    for (i = 0; i < n; i++) {
        dw[i] = ldl_le_p(buf + 4 * i);
    }
}

/* Stream Context Array: entry 0 reserved, each other a primary ring */
static void st_layout(NcmEnv *e, StreamEp *sep, uint8_t address)
{
    unsigned s;

    sep->address = address;
    sep->dci = st_dci(address);
    sep->sca = st_zalloc(e, 16 * ST_NR_PSTREAMS);
    for (s = 1; s < ST_NR_PSTREAMS; s++) {
        uint32_t ctx[4] = { 0 };

        sep->ring[s] = st_zalloc(e, 16 * ST_RING_TRBS);
        sep->enq[s] = 0;
        st_write_trb(e, sep->ring[s] + 16 * (ST_RING_TRBS - 1),
                     sep->ring[s], 0, ST_TRB_LINK << 10 | ST_TRB_LINK_TC |
                     ST_TRB_C);
        /* SCT 1: primary TRB ring; DCS 1 */
        ctx[0] = (uint32_t)sep->ring[s] | 1u << 1 | 1;
        ctx[1] = sep->ring[s] >> 32;
        st_write_dw(e, sep->sca + 16 * s, ctx, 4);
    }
}

static bool st_is_stream_trb(StreamEnv *se, uint64_t ptr)
{
    unsigned i, s;

    for (i = 0; i < se->nep; i++) {
        for (s = 1; s < ST_NR_PSTREAMS; s++) {
            if (ptr >= se->ep[i].ring[s] &&
                ptr < se->ep[i].ring[s] + 16 * ST_RING_TRBS) {
                return true;
            }
        }
    }
    return false;
}

static void st_event(void *opaque, uint64_t ptr, uint32_t status,
                     uint32_t control)
{
    StreamEnv *se = opaque;

    if (((control >> 10) & 0x3f) == ST_TRB_EV_TRANSFER &&
        st_is_stream_trb(se, ptr)) {
        g_test_message("transfer event on a stream ring: cc %u",
                       status >> 24);
        se->events++;
    }
}

/*
 * Configure Endpoint adding the bulk endpoints of @seq with streams: the
 * contexts a driver that ignores MaxStreams 0 would write.
 */
static int st_configure(StreamEnv *se, const StreamSeq *seq)
{
    NcmEnv *e = se->e;
    unsigned csz = qxhci_ctx_size(e->xhci);
    uint64_t ictx = st_zalloc(e, 33 * csz);
    uint32_t dw[5];
    unsigned i, max_dci = 0;
    int cc;

    se->nep = 0;
    if (seq->out) {
        st_layout(e, &se->ep[se->nep++], e->ep_out.address);
    }
    if (seq->in) {
        st_layout(e, &se->ep[se->nep++], e->ep_in.address);
    }
    memset(dw, 0, sizeof(dw));
    dw[1] = 1;                              /* A0: the slot context */
    for (i = 0; i < se->nep; i++) {
        const QXhciEndpoint *ep = se->ep[i].address & 0x80 ? &e->ep_in :
                                  &e->ep_out;
        uint32_t ep_dw[5] = { 0 };
        bool in = ep->address & 0x80;

        dw[1] |= 1u << se->ep[i].dci;
        max_dci = MAX(max_dci, se->ep[i].dci);
        ep_dw[0] = ST_MAX_PSTREAMS << 10 | 1u << 15;       /* LSA */
        ep_dw[1] = 3u << 1 | (in ? 6u : 2u) << 3 |
                   (uint32_t)ep->max_burst << 8 |
                   (uint32_t)(ep->max_packet & 0x7ff) << 16;
        ep_dw[2] = (uint32_t)se->ep[i].sca;
        ep_dw[3] = se->ep[i].sca >> 32;
        ep_dw[4] = 3072;
        st_write_dw(e, ictx + (1 + se->ep[i].dci) * csz, ep_dw, 5);
    }
    st_write_dw(e, ictx, dw, 2);
    /* the slot context as it is, with Context Entries covering ours */
    st_read_dw(e, e->dev->out_ctx, dw, 4);
    if (((dw[0] >> 27) & 0x1f) < max_dci) {
        dw[0] = (dw[0] & ~(0x1fu << 27)) | max_dci << 27;
    }
    dw[3] = 0;
    st_write_dw(e, ictx + csz, dw, 4);
    cc = qxhci_cmd_raw(e->xhci, ictx, 0, ST_TRB_CONFIGURE_EP << 10 |
                       (uint32_t)e->dev->slot << 24, NULL);
    guest_free(&e->qs->alloc, ictx);
    return cc;
}

/* Queue one TD on stream @s of @sep (OUT: a small NTB, ended short). */
static void st_queue_td(StreamEnv *se, StreamEp *sep, unsigned s,
                        uint32_t tag)
{
    NcmEnv *e = se->e;
    bool in = sep->address & 0x80;
    uint64_t buf = st_zalloc(e, ST_TD_LEN);
    uint32_t len = ST_TD_LEN;

    g_assert_cmpuint(sep->enq[s], <, ST_RING_TRBS - 1);
    if (!in) {
        g_autoptr(GPtrArray) tx = ncm_frames_new();
        g_autoptr(GByteArray) ntb = NULL;
        NcmHostLayout l = ncm_out_layout(e);

        ncm_frames_add(tx, ncm_other_mac, tag, 100);
        ntb = ncm_ntb_build(&l, tx, tag);
        g_assert_cmpuint(ntb->len, <, ST_TD_LEN);
        qtest_memwrite(e->qts, buf, ntb->data, ntb->len);
        len = ntb->len;
    }
    st_write_trb(e, sep->ring[s] + 16 * sep->enq[s]++, buf, len,
                 ST_TRB_NORMAL << 10 | ST_TRB_IOC | (in ? ST_TRB_ISP : 0) |
                 ST_TRB_C);
}

static void test_streams(NcmEnv *e, const NcmCase *c)
{
    const StreamSeq *seq = c->data;
    StreamEnv se = { .e = e };
    uint32_t dw[5];
    unsigned i, k, s, tag = 4000;
    int cc;

    qxhci_set_event_hook(e->xhci, st_event, &se);
    cc = st_configure(&se, seq);
    g_test_message("Configure Endpoint with streams: cc %d", cc);
    /* the data interface on, as a driver selects it after configuring */
    g_assert_cmpint(qxhci_control(e->dev, 0x01, QXHCI_REQ_SET_INTERFACE, 1,
                                  NCM_IF_DATA, NULL, 0, NULL),
                    ==, QXHCI_CC_SUCCESS);
    ncm_function_reset(e, false);

    for (i = 0; i < se.nep; i++) {
        for (s = 1; s < ST_NR_PSTREAMS; s++) {
            for (k = 0; k < seq->tds; k++) {
                st_queue_td(&se, &se.ep[i], s, tag++);
            }
        }
    }
    for (k = 0; k < seq->nbells; k++) {
        for (i = 0; i < se.nep; i++) {
            qxhci_ring_doorbell_stream(e->dev, se.ep[i].address,
                                       seq->bells[k]);
        }
        if (!seq->batch) {
            ncm_step(e, 0);
        }
    }
    for (k = 0; k < 20; k++) {
        ncm_step(e, 0);
    }
    ncm_assert_alive(e);

    /* refused, and nothing of it ran */
    g_assert_cmpint(cc, ==, QXHCI_CC_RESOURCE_ERROR);
    for (i = 0; i < se.nep; i++) {
        st_read_dw(e, e->dev->out_ctx + se.ep[i].dci * qxhci_ctx_size(e->xhci),
                   dw, 1);
        g_assert_cmpuint(dw[0] & 7, ==, 0);             /* Disabled */
    }
    g_assert_cmpuint(se.events, ==, 0);
    ncm_sock_expect_silence(e, 20);
    qxhci_set_event_hook(e->xhci, NULL, NULL);

    /* the device as it was: the endpoints without streams work */
    ncm_set_alt(e, 1);
    ncm_queue_check_traffic(e, 4100);
}

/*
 * The same context from guest memory: the guest rewrites the output
 * context of its bulk OUT endpoint (the controller's, but in guest RAM)
 * with MaxPStreams, LSA and a Stream Context Array, and the machine
 * migrates.  The destination rebuilds its endpoints from that context,
 * before the device's state is loaded, so it takes the streams; it must
 * not run them, nor move their rings (Set TR Dequeue Pointer with Stream
 * ID 0, which QEMU 10.2 asserts against, and 1), also with the device off
 * the bus.
 */
static void test_streams_migrated(NcmEnv *e, const NcmCase *c)
{
    g_autofree char *file = g_strdup_printf("%s/usb-ncm-mig-st-%d",
                                            g_get_tmp_dir(), getpid());
    StreamEnv se = { .e = e };
    uint64_t octx;
    uint32_t dw[4];
    QTestState *dst;
    unsigned k;
    int sock = -1;

    ncm_set_alt(e, 1);
    ncm_check_marker(e, 4200);
    se.nep = 1;
    st_layout(e, &se.ep[0], e->ep_out.address);
    for (k = 0; k < 2; k++) {
        st_queue_td(&se, &se.ep[0], 1, 4300 + k);
    }
    octx = e->dev->out_ctx + se.ep[0].dci * qxhci_ctx_size(e->xhci);
    st_read_dw(e, octx, dw, 4);
    g_assert_cmpuint(dw[0] & 7, ==, 1);                 /* Running */
    dw[0] |= ST_MAX_PSTREAMS << 10 | 1u << 15;
    dw[2] = (uint32_t)se.ep[0].sca;
    dw[3] = se.ep[0].sca >> 32;
    st_write_dw(e, octx, dw, 4);

    dst = ncm_migrate_via_file(e, file, NULL, &sock);
    unlink(file);
    g_assert(dst);
    ncm_follow_migration(e, dst, sock);
    qxhci_set_event_hook(e->xhci, st_event, &se);
    for (k = 0; k < 2; k++) {
        qxhci_ring_doorbell_stream(e->dev, e->ep_out.address, 1);
        ncm_step(e, 0);
    }
    for (k = 0; k < 20; k++) {
        ncm_step(e, 0);
    }
    /* nor does Set TR Dequeue Pointer take a stream of it */
    g_assert_cmpint(qxhci_cmd_raw(e->xhci, 0, 0, ST_TRB_STOP_EP << 10 |
                                  se.ep[0].dci << 16 |
                                  (uint32_t)e->dev->slot << 24, NULL),
                    ==, QXHCI_CC_SUCCESS);
    for (k = 0; k < 2; k++) {
        g_assert_cmpint(qxhci_cmd_raw(e->xhci, se.ep[0].ring[1] | 1,
                                      k << 16, ST_TRB_SET_TR_DEQUEUE << 10 |
                                      se.ep[0].dci << 16 |
                                      (uint32_t)e->dev->slot << 24, NULL),
                        ==, QXHCI_CC_INVALID_STREAM_TYPE);
    }
    ncm_assert_alive(e);
    g_assert_cmpuint(se.events, ==, 0);
    ncm_sock_expect_silence(e, 20);
    qxhci_set_event_hook(e->xhci, NULL, NULL);

    /*
     * With the device off the bus its endpoint is gone, and nothing
     * refuses the streams: Stream ID 0 must come back as a Stream ID
     * error, where QEMU 10.2.2's xhci_find_stream() asserts (finding F25,
     * patches/0031)
     */
    ncm_fault_set(e, "replug-ms", 1000);
    g_assert_cmpint(qxhci_take_port_events(e->xhci, e->port), >, 0);
    g_assert_cmpint(qxhci_cmd_raw(e->xhci, se.ep[0].ring[1] | 1, 0,
                                  ST_TRB_SET_TR_DEQUEUE << 10 |
                                  se.ep[0].dci << 16 |
                                  (uint32_t)e->dev->slot << 24, NULL),
                    ==, QXHCI_CC_INVALID_STREAM_ID);
    ncm_assert_alive(e);
    ncm_fault_set(e, "replug-ms", 0);                   /* back at once */
    ncm_replug_wait_back(e);

    /* enumerated again, without streams, the endpoint works */
    ncm_queue_check_traffic(e, 4400);
}

#define ST_TRB_ISOCH            5
#define ST_TRB_SIA              (1u << 31)
#define ST_EP_ISOCH_IN          5
#define ST_EP_INTR_IN           7

/*
 * Drop the device's interrupt IN endpoint (notifications) and add it back
 * as an endpoint of type @ep_type with Endpoint Context Interval @interval
 * and a fresh one-segment ring, which is returned
 */
static uint64_t st_reconfigure_notify_ep(NcmEnv *e, unsigned ep_type,
                                         uint8_t interval)
{
    unsigned csz = qxhci_ctx_size(e->xhci);
    unsigned dci = st_dci(e->ep_notify.address);
    uint64_t ictx = st_zalloc(e, 33 * csz);
    uint64_t ring = st_zalloc(e, 16 * ST_RING_TRBS);
    uint32_t dw[5] = { 0 }, ep_dw[5] = { 0 };
    int cc;

    st_write_trb(e, ring + 16 * (ST_RING_TRBS - 1), ring, 0,
                 ST_TRB_LINK << 10 | ST_TRB_LINK_TC | ST_TRB_C);
    dw[0] = 1u << dci;
    dw[1] = 1 | 1u << dci;
    st_write_dw(e, ictx, dw, 2);
    ep_dw[0] = (uint32_t)interval << 16;
    ep_dw[1] = ep_type << 3 |
               (uint32_t)(e->ep_notify.max_packet & 0x7ff) << 16;
    ep_dw[2] = (uint32_t)ring | 1;                  /* DCS */
    ep_dw[3] = ring >> 32;
    ep_dw[4] = 64;
    st_write_dw(e, ictx + (1 + dci) * csz, ep_dw, 5);
    st_read_dw(e, e->dev->out_ctx, dw, 4);
    dw[3] = 0;
    st_write_dw(e, ictx + csz, dw, 4);
    cc = qxhci_cmd_raw(e->xhci, ictx, 0, ST_TRB_CONFIGURE_EP << 10 |
                       (uint32_t)e->dev->slot << 24, NULL);
    guest_free(&e->qs->alloc, ictx);
    g_assert_cmpint(cc, ==, QXHCI_CC_SUCCESS);
    return ring;
}

/* The notification endpoint as the device describes it, and traffic */
static void st_restore_notify_ep(NcmEnv *e)
{
    uint8_t drop[1] = { e->ep_notify.address };

    g_assert_cmpint(qxhci_configure_endpoints(e->dev, NULL, 0, drop, 1), ==,
                    QXHCI_CC_SUCCESS);
    g_assert_cmpint(qxhci_configure_endpoints(e->dev, &e->ep_notify, 1,
                                              NULL, 0), ==,
                    QXHCI_CC_SUCCESS);
    ncm_set_alt(e, 1);
    ncm_queue_check_traffic(e, 4200);
}

/*
 * An isochronous endpoint context on an endpoint that is not one: the
 * guest configures the device's interrupt IN endpoint (notifications) as
 * Isoch IN, queues an Isoch TD with Start Isoch ASAP and rings its
 * doorbell twice.  The device NAKs a notification read while it has none,
 * as an interrupt endpoint does; QEMU's xHCI asserted that an isochronous
 * retry is never NAKed and aborted (finding F16, hcd-xhci.c
 * xhci_kick_epctx: Assertion 'xfer->packet.status != USB_RET_NAK').
 * patches/0022 retries it as any NAKed TD.
 */
static void test_iso_context_on_interrupt_ep(NcmEnv *e, const NcmCase *c)
{
    uint64_t ring = st_reconfigure_notify_ep(e, ST_EP_ISOCH_IN, 0);
    uint64_t buf = st_zalloc(e, 64);
    int i;

    /* one Isoch TD, as soon as possible; nothing to notify yet */
    st_write_trb(e, ring, buf, 16, ST_TRB_ISOCH << 10 | ST_TRB_SIA |
                 ST_TRB_IOC | ST_TRB_ISP | ST_TRB_C);
    for (i = 0; i < 2; i++) {
        qxhci_ring_doorbell(e->dev, e->ep_notify.address);
        ncm_step(e, 1000 * 1000);
    }
    ncm_assert_alive(e);
    st_restore_notify_ep(e);
}

/*
 * An interrupt endpoint context whose Interval is out of its range (xHCI
 * 1.2 6.2.3.6: 0-15 for interrupt endpoints; the field is 8 bits): QEMU
 * 10.2.2's xhci_init_epctx() shifts 1 by it unchecked, undefined for 229
 * (finding F24, UBSan "shift exponent 229 is too large for 32-bit type
 * int", found by usb-ncm-dl-fuzz).  patches/0031 caps the exponent as
 * QEMU 10.0.13 does; the endpoint then polls rarely, and nothing breaks.
 * Every shift from 16 up is out of range; 31 and 32 are the last that fit
 * and the first that does not.
 */
static void test_interrupt_ep_interval_out_of_range(NcmEnv *e,
                                                    const NcmCase *c)
{
    static const uint8_t intervals[] = { 16, 31, 32, 229, 255 };
    unsigned i;

    for (i = 0; i < ARRAY_SIZE(intervals); i++) {
        uint64_t ring = st_reconfigure_notify_ep(e, ST_EP_INTR_IN,
                                                 intervals[i]);
        uint64_t buf = st_zalloc(e, 64);

        st_write_trb(e, ring, buf, 16, ST_TRB_NORMAL << 10 | ST_TRB_IOC |
                     ST_TRB_ISP | ST_TRB_C);
        qxhci_ring_doorbell(e->dev, e->ep_notify.address);
        ncm_step(e, 1000 * 1000);
        ncm_assert_alive(e);
    }
    st_restore_notify_ep(e);
}

void ncm_add_stream_cases(bool ss)
{
    static const StreamSeq seqs[] = {
        /* two TDs on stream 1, one doorbell */
        { .out = true, .tds = 2, .nbells = 1, .bells = { 1 } },
        /* one TD each on streams 1 and 2, both doorbells at once */
        { .out = true, .tds = 1, .batch = true, .nbells = 2,
          .bells = { 1, 2 } },
        /* three TDs on each of streams 1..3, a doorbell each */
        { .out = true, .tds = 3, .nbells = 3, .bells = { 1, 2, 3 } },
        /* Stream ID 0 is reserved */
        { .out = true, .tds = 1, .nbells = 1, .bells = { 0 } },
        /* one TD, one doorbell */
        { .out = true, .tds = 1, .nbells = 1, .bells = { 1 } },
        /* past the array, and the largest Stream ID */
        { .out = true, .tds = 1, .nbells = 2,
          .bells = { ST_NR_PSTREAMS, 0xffff } },
        /* IN, and both directions, every stream at once */
        { .in = true, .tds = 2, .batch = true, .nbells = 3,
          .bells = { 1, 2, 3 } },
        { .out = true, .in = true, .tds = 2, .batch = true, .nbells = 4,
          .bells = { 1, 2, 3, 1 } },
    };
    static const char *const names[] = {
        "streams/out-one-doorbell", "streams/out-two-doorbells-batched",
        "streams/out-several-tds", "streams/out-stream-0",
        "streams/out-stream-1", "streams/out-out-of-range",
        "streams/in", "streams/in-out",
    };
    unsigned i;

    QEMU_BUILD_BUG_ON(ARRAY_SIZE(seqs) != ARRAY_SIZE(names));
    ncm_add_case(ss, NCM_DL, "xhci/iso-context-on-interrupt-ep",
                 test_iso_context_on_interrupt_ep, NULL, NULL);
    ncm_add_case(ss, NCM_DL, "xhci/interrupt-ep-interval-out-of-range",
                 test_interrupt_ep_interval_out_of_range, NULL, NULL);
    if (!ss) {
        return;     /* streams are SuperSpeed's */
    }
    for (i = 0; i < ARRAY_SIZE(seqs); i++) {
        ncm_add_case(ss, NCM_DL, names[i], test_streams, &seqs[i], NULL);
    }
    ncm_add_case(ss, NCM_DL, "streams/migrated-context",
                 test_streams_migrated, NULL, NULL);
}
