/*
 * Unit tests for the USB CDC-NCM function (hw/usb/ncm-function.c)
 *
 * The protocol state machine without a device or a machine: the OUT
 * delimiting and ZLP policy, the merge rule of ZLP-required firmware, the
 * IN builder policy (the ZLP after an exact-multiple NTB, the one-copy
 * buffer and what happens when it goes away), class-request state and
 * the checks a migration stream goes through.  OUT NTBs are made with the
 * codec's builder, which tests/unit/test-ncm-ntb.c checks on its own.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "qemu/log.h"
#include "qapi/error.h"
#include "hw/usb/ncm-function.h"

#define MPS             512
#define REQ_IN(r)       ((0xa1 << 8) | (r))
#define REQ_OUT(r)      ((0x21 << 8) | (r))

static const uint8_t dev_mac[6] = { 0x52, 0x54, 0x00, 0x12, 0x34, 0x56 };
static const uint8_t bcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };

typedef struct Fixture {
    NcmFunction f;
    GPtrArray *emitted;         /* frames the function handed the netdev */
    gint64 errors_before;       /* guest_errors_logged() at the start */
} Fixture;

/*
 * The function reports malformed input with
 * qemu_log_mask(LOG_GUEST_ERROR, ...); main() points QEMU's log at this
 * scratch file, so that a case checks the report by the file's growth.
 */
static char *guest_error_log;

static gint64 guest_errors_logged(void)
{
    struct stat st;

    g_assert_cmpint(stat(guest_error_log, &st), ==, 0);
    return st.st_size;
}

static NcmConfig config(NcmZlpPolicy zlp, uint16_t max_segment)
{
    NcmConfig c = {
        .ntb_in_max_size = 65536,
        .ntb_out_max_size = 65536,
        .in_divisor = 4,
        .in_alignment = 4,
        .out_divisor = 4,
        .out_alignment = 4,
        .out_max_datagrams = 64,
        .max_segment_size = max_segment,
        .network_caps = NCM_CAP_PACKET_FILTER | NCM_CAP_NET_ADDRESS |
                        NCM_CAP_MAX_DATAGRAM_SIZE,
        .ntb_formats = NCM_NTB_FORMAT_16 | NCM_NTB_FORMAT_32,
        .link_speed_bps = 1000000000,
        .zlp = zlp,
        .power_on_filter = CDC_FILTER_DIRECTED | CDC_FILTER_BROADCAST,
    };

    memcpy(c.mac, dev_mac, 6);
    return c;
}

static void emit(void *opaque, const uint8_t *frame, size_t len)
{
    Fixture *fx = opaque;
    GByteArray *b = g_byte_array_new();

    g_byte_array_append(b, frame, len);
    g_ptr_array_add(fx->emitted, b);
}

static void fixture_init(Fixture *fx, NcmZlpPolicy zlp, uint16_t max_seg)
{
    NcmConfig c = config(zlp, max_seg);

    ncm_function_init(&fx->f, &c);
    fx->emitted = g_ptr_array_new_with_free_func(
        (GDestroyNotify)g_byte_array_unref);
    fx->errors_before = guest_errors_logged();
}

static void fixture_free(Fixture *fx)
{
    ncm_function_cleanup(&fx->f);
    g_ptr_array_unref(fx->emitted);
}

static GByteArray *frame(const uint8_t *dst, uint32_t tag, uint32_t len)
{
    GByteArray *b = g_byte_array_sized_new(len);
    uint32_t i;

    g_byte_array_set_size(b, len);
    for (i = 0; i < len; i++) {
        b->data[i] = tag + i * 7;
    }
    memcpy(b->data, dst, 6);
    memcpy(b->data + 6, "\x52\x54\x00\xaa\xbb\xcc", 6);
    stw_le_p(b->data + 12, 0xb588);
    stl_le_p(b->data + 14, tag);
    return b;
}

/* An OUT NTB16 of @n frames (tags @tag...), zero-padded to @pad bytes. */
static GByteArray *out_ntb(uint32_t tag, unsigned n, uint32_t len,
                           uint32_t pad)
{
    NcmNtbLayout layout = {
        .max_len = 65536, .divisor = 4, .ndp_alignment = 4,
    };
    g_autofree NcmNtbBuilder *b = g_new0(NcmNtbBuilder, 1);
    GByteArray *ntb = g_byte_array_new();
    uint32_t used;
    unsigned i;

    g_byte_array_set_size(ntb, 65536);
    memset(ntb->data, 0, ntb->len);
    ncm_ntb_builder_init(b, &ncm_ntb16_format, &layout, ntb->data);
    for (i = 0; i < n; i++) {
        g_autoptr(GByteArray) fr = frame(bcast, tag + i, len);

        g_assert(ncm_ntb_builder_append(b, fr->data, fr->len));
    }
    used = ncm_ntb_builder_finish(b, tag);
    g_assert_cmpuint(used, >, 0);
    g_assert_cmpuint(pad ? pad : used, >=, used);
    g_byte_array_set_size(ntb, pad ? pad : used);
    stw_le_p(ntb->data + 8, ntb->len);
    return ntb;
}

/* The host sends @ntb as packets of MPS bytes, the last one shorter. */
static void send_packets(Fixture *fx, const GByteArray *ntb)
{
    uint32_t off = 0;

    while (off < ntb->len) {
        uint32_t n = MIN(MPS, ntb->len - off), avail;
        uint8_t *dst = ncm_function_out_space(&fx->f, &avail);

        g_assert_cmpuint(avail, >=, n);
        memcpy(dst, ntb->data + off, n);
        ncm_function_out_packet(&fx->f, n, n, MPS, emit, fx);
        off += n;
    }
}

static void send_zlp(Fixture *fx)
{
    uint32_t avail;

    ncm_function_out_space(&fx->f, &avail);
    ncm_function_out_packet(&fx->f, 0, 0, MPS, emit, fx);
}

static int control(Fixture *fx, int request, int value, int length,
                   uint8_t *data)
{
    return ncm_function_control(&fx->f, request, value, 0, length, data);
}

/* OUT: ZLP policy and the merge rule */

/*
 * Two exact-multiple NTBs without a ZLP between them: ZLP-required
 * firmware sees one transfer, uses the first NTB and loses the second's
 * datagrams (counted); NCM 1.0 delimiting takes both.
 */
static void test_out_merge(const void *opaque)
{
    NcmZlpPolicy zlp = GPOINTER_TO_INT(opaque);
    g_autoptr(GByteArray) a = out_ntb(100, 3, 200, 2 * MPS);
    g_autoptr(GByteArray) b = out_ntb(200, 2, 300, 2 * MPS);
    Fixture fx;

    fixture_init(&fx, zlp, 1514);
    ncm_function_set_data_alt(&fx.f, 1);
    send_packets(&fx, a);
    g_assert_cmpuint(fx.f.stats->out_transfers, ==, 0);
    send_packets(&fx, b);
    send_zlp(&fx);
    g_assert_cmpuint(fx.f.stats->out_zlps, ==, 1);
    if (zlp == NCM_ZLP_REQUIRED) {
        g_assert_cmpuint(fx.emitted->len, ==, 3);
        g_assert_cmpuint(fx.f.stats->out_merged_transfers, ==, 1);
        g_assert_cmpuint(fx.f.stats->out_merge_lost_datagrams, ==, 2);
        g_assert_cmpuint(fx.f.stats->out_transfers, ==, 1);
    } else {
        g_assert_cmpuint(fx.emitted->len, ==, 5);
        g_assert_cmpuint(fx.f.stats->out_merged_transfers, ==, 0);
        g_assert_cmpuint(fx.f.stats->out_ntbs, ==, 2);
    }
    fixture_free(&fx);
}

/* With a ZLP after each exact-multiple NTB nothing merges. */
static void test_out_zlp_separates(void)
{
    g_autoptr(GByteArray) a = out_ntb(100, 3, 200, 2 * MPS);
    g_autoptr(GByteArray) b = out_ntb(200, 2, 300, 2 * MPS);
    Fixture fx;

    fixture_init(&fx, NCM_ZLP_REQUIRED, 1514);
    ncm_function_set_data_alt(&fx.f, 1);
    send_packets(&fx, a);
    send_zlp(&fx);
    send_packets(&fx, b);
    send_zlp(&fx);
    g_assert_cmpuint(fx.emitted->len, ==, 5);
    g_assert_cmpuint(fx.f.stats->out_merged_transfers, ==, 0);
    g_assert_cmpuint(fx.f.stats->out_transfers, ==, 2);
    fixture_free(&fx);
}

/* A short-packet transfer is parsed where it lies; others are not. */
static void test_out_direct(void)
{
    g_autoptr(GByteArray) a = out_ntb(300, 4, 333, 0);
    g_autoptr(GByteArray) b = out_ntb(400, 1, 100, MPS);
    Fixture fx;

    fixture_init(&fx, NCM_ZLP_REQUIRED, 1514);
    ncm_function_set_data_alt(&fx.f, 1);
    g_assert_cmpuint(a->len % MPS, !=, 0);
    g_assert(ncm_function_out_direct(&fx.f, a->data, a->len, MPS, emit,
                                     &fx));
    g_assert_cmpuint(fx.emitted->len, ==, 4);
    g_assert(!ncm_function_out_direct(&fx.f, b->data, b->len, MPS, emit,
                                      &fx));
    g_assert_cmpuint(fx.f.stats->out_direct_transfers, ==, 1);
    fixture_free(&fx);
}

/* A malformed NTB is rejected, counted and reported; nothing leaks out. */
static void test_out_malformed(void)
{
    g_autoptr(GByteArray) a = out_ntb(500, 2, 100, 0);
    Fixture fx;

    fixture_init(&fx, NCM_ZLP_AUTO, 1514);
    ncm_function_set_data_alt(&fx.f, 1);
    a->data[0] = 'X';
    g_assert(ncm_function_out_direct(&fx.f, a->data, a->len, MPS, emit,
                                     &fx));
    g_assert_cmpuint(fx.emitted->len, ==, 0);
    g_assert_cmpuint(fx.f.stats->out_parse_errors[NCM_PARSE_NTH_SIGNATURE],
                     ==, 1);
    g_assert_cmpint(guest_errors_logged(), >, fx.errors_before);
    fixture_free(&fx);
}

/* IN: the builder policy and the ZLP after an exact multiple */

/* Hand @len bytes of the pending IN NTB over in packets of @room bytes. */
static GByteArray *take_in(Fixture *fx, uint32_t room, bool *zlp)
{
    GByteArray *got = g_byte_array_new();
    const uint8_t *src;
    uint32_t len;

    *zlp = false;
    while ((src = ncm_function_in_next(&fx->f, room, &len))) {
        if (!len) {
            *zlp = true;
            ncm_function_in_sent(&fx->f, 0, room, MPS);
            break;
        }
        g_byte_array_append(got, src, len);
        if (ncm_function_in_sent(&fx->f, len, room, MPS) &&
            !fx->f.in_zlp_owed) {
            break;
        }
    }
    return got;
}

static void rx(Fixture *fx, uint32_t tag, uint32_t len)
{
    g_autoptr(GByteArray) fr = frame(dev_mac, tag, len);

    g_assert_cmpint(ncm_function_rx(&fx->f, fr->data, fr->len), ==,
                    NCM_RX_QUEUED);
}

typedef struct ZlpCase {
    uint32_t frame_len;         /* the one frame of the NTB */
    uint32_t room;              /* the host's packets */
    uint32_t input_size;        /* 0: dwNtbInMaxSize */
    uint32_t ntb_len;
    bool zlp;
} ZlpCase;

static const ZlpCase zlp_cases[] = {
    /* 2 x MPS over MPS-sized packets: the transfer stays open */
    { 996, MPS, 0, 1024, true },
    /* the same NTB in a bigger packet ends short */
    { 996, 4096, 0, 1024, false },
    /* one byte less: the last packet is short */
    { 992, MPS, 0, 1020, false },
    /* a smaller input size, still above the NTB: the ZLP stays */
    { 996, MPS, 1024 * 2, 1024, true },
};

static void test_in_zlp(const void *opaque)
{
    const ZlpCase *z = opaque;
    g_autoptr(GByteArray) got = NULL;
    Fixture fx;
    bool zlp;

    fixture_init(&fx, NCM_ZLP_REQUIRED, 1514);
    if (z->input_size) {
        uint8_t b[4];

        stl_le_p(b, z->input_size);
        g_assert_cmpint(control(&fx, REQ_OUT(NCM_SET_NTB_INPUT_SIZE), 0, 4,
                                b), ==, 0);
    }
    ncm_function_set_data_alt(&fx.f, 1);
    rx(&fx, 1, z->frame_len);
    got = take_in(&fx, z->room, &zlp);
    g_assert_cmpuint(got->len, ==, z->ntb_len);
    g_assert_cmpint(zlp, ==, z->zlp);
    g_assert_cmpuint(fx.f.stats->in_zlps, ==, z->zlp);
    g_assert(!ncm_function_in_pending(&fx.f));
    fixture_free(&fx);
}

/* An NTB exactly the input size (2 KiB here) never gets a ZLP. */
static void test_in_no_zlp_at_input_size(void)
{
    g_autoptr(GByteArray) got = NULL;
    uint8_t b[4];
    Fixture fx;
    bool zlp;

    fixture_init(&fx, NCM_ZLP_REQUIRED, 1514);
    stl_le_p(b, 2048);
    g_assert_cmpint(control(&fx, REQ_OUT(NCM_SET_NTB_INPUT_SIZE), 0, 4, b),
                    ==, 0);
    ncm_function_set_data_alt(&fx.f, 1);
    rx(&fx, 1, 1514);           /* ends at 1526, next at 1528 */
    rx(&fx, 2, 500);            /* ends at 2028; NDP of 20 bytes: 2048 */
    got = take_in(&fx, MPS, &zlp);
    g_assert_cmpuint(got->len, ==, 2048);
    g_assert(!zlp);
    g_assert_cmpuint(fx.f.stats->in_zlps, ==, 0);
    fixture_free(&fx);
}

/* Parse @ntb with the codec; check the datagrams are @tags' frames. */
static void check_in_ntb(const GByteArray *ntb, const uint32_t *lens,
                         unsigned n)
{
    NcmParseLimits limits = {
        .max_ntb_len = 65536, .max_datagram_len = 9000,
        .max_datagrams = 64,
    };
    g_autofree NcmNtbView *view = g_new0(NcmNtbView, 1);
    unsigned i;

    g_assert_cmpint(ncm_ntb_parse_one(&ncm_ntb16_format, ntb->data,
                                      ntb->len, &limits, view),
                    ==, NCM_PARSE_OK);
    g_assert_cmpuint(view->n_datagrams, ==, n);
    for (i = 0; i < n; i++) {
        g_assert_cmpuint(view->datagrams[i].len, ==, lens[i]);
        g_assert_cmpuint(ldl_le_p(ntb->data + view->datagrams[i].offset +
                                  14), ==, 10 + i);
    }
}

/*
 * The one-copy buffer goes away (cancelled transfer, migration): what
 * was built in it moves to the function's own buffer and goes out next.
 */
static void test_in_attach_rescue(void)
{
    static const uint32_t lens[] = { 100, 1514, 60 };
    g_autofree uint8_t *host = g_malloc0(4096);
    g_autoptr(GByteArray) got = NULL;
    Fixture fx;
    unsigned i;
    bool zlp;

    fixture_init(&fx, NCM_ZLP_REQUIRED, 1514);
    ncm_function_set_data_alt(&fx.f, 1);
    g_assert(ncm_function_in_attach(&fx.f, host, 4096));
    for (i = 0; i < ARRAY_SIZE(lens); i++) {
        rx(&fx, 10 + i, lens[i]);
    }
    /* nothing leaves while the buffer is attached */
    g_assert(!ncm_function_in_pending(&fx.f));
    ncm_function_in_detach(&fx.f);
    memset(host, 0xee, 4096);   /* the host may reuse it at once */
    g_assert_cmpuint(fx.f.stats->in_rescued_datagrams, ==, 3);
    g_assert(ncm_function_in_pending(&fx.f));
    got = take_in(&fx, 65536, &zlp);
    check_in_ntb(got, lens, ARRAY_SIZE(lens));
    fixture_free(&fx);
}

/*
 * The one-copy path needs room for a largest datagram; a jumbo frame
 * that no longer fits an attached buffer moves the NTB out of it.
 */
static void test_in_attach_jumbo(void)
{
    g_autofree uint8_t *host = g_malloc0(16384);
    g_autoptr(GByteArray) got = NULL;
    static const uint32_t lens[] = { 8000 };
    uint8_t b[2];
    Fixture fx;
    bool zlp;

    fixture_init(&fx, NCM_ZLP_REQUIRED, 8192);
    ncm_function_set_data_alt(&fx.f, 1);
    g_assert(!ncm_function_in_attach(&fx.f, host, 2048));
    stw_le_p(b, 1514);
    g_assert_cmpint(control(&fx, REQ_OUT(NCM_SET_MAX_DATAGRAM_SIZE), 0, 2,
                            b), ==, 0);
    g_assert(ncm_function_in_attach(&fx.f, host, 2048));
    stw_le_p(b, 8192);
    g_assert_cmpint(control(&fx, REQ_OUT(NCM_SET_MAX_DATAGRAM_SIZE), 0, 2,
                            b), ==, 0);
    g_assert(ncm_function_rx_can_queue(&fx.f));
    rx(&fx, 10, 8000);
    g_assert(!fx.f.in_attached);
    got = take_in(&fx, 65536, &zlp);
    check_in_ntb(got, lens, 1);
    fixture_free(&fx);
}

/*
 * What IN coalescing asks before keeping an NTB: an attached NTB with
 * datagrams and room for a largest one more; not an empty one, not a
 * full one, not while the firmware is busy, not without a buffer.
 */
static bool busy_fault;

static bool busy_fault_busy(void *opaque)
{
    return busy_fault;
}

static bool busy_fault_in_ntb(void *opaque, NcmInCorruption *how)
{
    return false;
}

static bool busy_fault_short_notify(void *opaque)
{
    return false;
}

/* what usb-ncm-fault busy-ms does, through the function's hooks */
static const NcmFaultHooks busy_fault_hooks = {
    .busy = busy_fault_busy,
    .in_ntb = busy_fault_in_ntb,
    .short_notify = busy_fault_short_notify,
};

static void test_in_attach_has_room(void)
{
    g_autofree uint8_t *host = g_malloc0(4096);
    Fixture fx;

    fixture_init(&fx, NCM_ZLP_REQUIRED, 1514);
    ncm_function_set_data_alt(&fx.f, 1);
    g_assert(!ncm_function_in_attached_has_room(&fx.f));
    g_assert(ncm_function_in_attach(&fx.f, host, 4096));
    g_assert(!ncm_function_in_attached_has_room(&fx.f));     /* empty */
    rx(&fx, 10, 100);
    g_assert(ncm_function_in_attached_has_room(&fx.f));
    ncm_function_set_fault_hooks(&fx.f, &busy_fault_hooks, NULL);
    busy_fault = true;
    g_assert(!ncm_function_in_attached_has_room(&fx.f));
    busy_fault = false;
    /* 4096 bytes hold 100 + 1514 + 1514, not a fourth of 1514 */
    rx(&fx, 11, 1514);
    g_assert(ncm_function_in_attached_has_room(&fx.f));
    rx(&fx, 12, 1514);
    g_assert(fx.f.in_attached);
    g_assert(!ncm_function_in_attached_has_room(&fx.f));
    g_assert_cmpuint(ncm_function_in_attached_finish(&fx.f, 4096, 512), >,
                     0);
    g_assert(!ncm_function_in_attached_has_room(&fx.f));     /* detached */
    fixture_free(&fx);
}

/* A smaller input size drops what no longer fits; RX may go on. */
static void test_in_input_size_flush(void)
{
    uint8_t b[4];
    Fixture fx;
    unsigned i;

    fixture_init(&fx, NCM_ZLP_REQUIRED, 1514);
    ncm_function_set_data_alt(&fx.f, 1);
    for (i = 0; i < 10; i++) {
        rx(&fx, i, 1000);
    }
    stl_le_p(b, 2048);
    g_assert_cmpint(control(&fx, REQ_OUT(NCM_SET_NTB_INPUT_SIZE), 0, 4, b),
                    ==, 0);
    g_assert_cmpuint(fx.f.stats->in_flushed_datagrams, ==, 10);
    g_assert(ncm_function_rx_can_queue(&fx.f));
    fixture_free(&fx);
}

/* A buffer ending inside a packet with more NTB to come: babble. */
static void test_in_babble(void)
{
    Fixture fx;

    fixture_init(&fx, NCM_ZLP_REQUIRED, 1514);
    ncm_function_set_data_alt(&fx.f, 1);
    rx(&fx, 1, 500);
    /* a whole number of packets, or room for all of it: no babble */
    g_assert(!ncm_function_in_babble(&fx.f, MPS, MPS));
    g_assert(!ncm_function_in_babble(&fx.f, 1000, MPS));
    g_assert(ncm_function_in_babble(&fx.f, 100, MPS));
    g_assert_cmpuint(fx.f.stats->in_babbles, ==, 1);
    g_assert_cmpuint(fx.f.stats->in_flushed_datagrams, ==, 1);
    g_assert_cmpuint(fx.f.in_sequence, ==, 1);
    g_assert(!ncm_function_in_pending(&fx.f));
    g_assert_cmpint(guest_errors_logged(), >, fx.errors_before);
    fixture_free(&fx);
}

/* Until the host sets a filter, the one from the configuration holds. */
static void test_in_power_on_filter(void)
{
    static const uint8_t mcast[6] = { 0x33, 0x33, 0, 0, 0, 1 };
    g_autoptr(GByteArray) m = frame(mcast, 1, 86);
    Fixture fx;

    fixture_init(&fx, NCM_ZLP_REQUIRED, 1514);
    ncm_function_set_data_alt(&fx.f, 1);
    g_assert_cmpint(ncm_function_rx(&fx.f, m->data, m->len), ==,
                    NCM_RX_DROPPED);
    g_assert_cmpuint(fx.f.stats->rx_filtered, ==, 1);
    g_assert_cmpint(control(&fx, REQ_OUT(CDC_SET_ETHERNET_PACKET_FILTER),
                            CDC_FILTER_DIRECTED | CDC_FILTER_ALL_MULTICAST,
                            0, NULL), ==, 0);
    g_assert_cmpint(ncm_function_rx(&fx.f, m->data, m->len), ==,
                    NCM_RX_QUEUED);
    /* alt 0 puts the power-on filter back */
    ncm_function_set_data_alt(&fx.f, 0);
    ncm_function_set_data_alt(&fx.f, 1);
    g_assert_cmpint(ncm_function_rx(&fx.f, m->data, m->len), ==,
                    NCM_RX_DROPPED);
    fixture_free(&fx);
}

/* Class requests */

static void test_control_parameters(void)
{
    uint8_t d[28];
    Fixture fx;

    fixture_init(&fx, NCM_ZLP_REQUIRED, 1514);
    g_assert_cmpint(control(&fx, REQ_IN(NCM_GET_NTB_PARAMETERS), 0, 28, d),
                    ==, 28);
    g_assert_cmpuint(lduw_le_p(d), ==, 28);
    g_assert_cmpuint(lduw_le_p(d + 2), ==, 3);
    g_assert_cmpuint(ldl_le_p(d + 4), ==, 65536);
    g_assert_cmpuint(ldl_le_p(d + 16), ==, 65536);
    g_assert_cmpuint(lduw_le_p(d + 26), ==, 64);
    /* a short read gets the first bytes */
    g_assert_cmpint(control(&fx, REQ_IN(NCM_GET_NTB_PARAMETERS), 0, 8, d),
                    ==, 8);
    fixture_free(&fx);
}

typedef struct BadRequest {
    const char *name;
    int request;
    int value;
    int length;
    bool data_active;
} BadRequest;

static const BadRequest bad_requests[] = {
    { "set-ntb-format-while-active", REQ_OUT(NCM_SET_NTB_FORMAT), 1, 0,
      true },
    { "set-ntb-format-unknown", REQ_OUT(NCM_SET_NTB_FORMAT), 2, 0, false },
    { "set-input-size-3-bytes", REQ_OUT(NCM_SET_NTB_INPUT_SIZE), 0, 3,
      false },
    { "set-max-datagram-1-byte", REQ_OUT(NCM_SET_MAX_DATAGRAM_SIZE), 0, 1,
      false },
    { "set-net-address-while-active", REQ_OUT(NCM_SET_NET_ADDRESS), 0, 6,
      true },
    { "set-packet-filter-unknown-bits",
      REQ_OUT(CDC_SET_ETHERNET_PACKET_FILTER), 0x20, 0, false },
    { "unknown-request", REQ_IN(0x99), 0, 4, false },
    /* what the device's standard request handling leaves to the function */
    { "vendor-device-request", (0xc0 << 8) | 0x01, 0, 4, false },
    { "standard-endpoint-request", (0x02 << 8) | 0x03, 0, 0, false },
};

/* Stalled, counted, reported, and the state unchanged. */
static void test_control_bad(const void *opaque)
{
    const BadRequest *r = opaque;
    uint8_t d[8] = { 0 };
    Fixture fx;

    fixture_init(&fx, NCM_ZLP_REQUIRED, 1514);
    ncm_function_set_data_alt(&fx.f, r->data_active);
    g_assert_cmpint(control(&fx, r->request, r->value, r->length, d), ==,
                    -1);
    g_assert_cmpuint(fx.f.stats->bad_requests, ==, 1);
    g_assert_cmpint(guest_errors_logged(), >, fx.errors_before);
    g_assert(fx.f.format == &ncm_ntb16_format);
    g_assert_cmpuint(fx.f.ntb_in_size, ==, 65536);
    fixture_free(&fx);
}

static void test_control_input_size_bounds(void)
{
    uint8_t b[4];
    Fixture fx;

    fixture_init(&fx, NCM_ZLP_REQUIRED, 1514);
    stl_le_p(b, 2047);
    g_assert_cmpint(control(&fx, REQ_OUT(NCM_SET_NTB_INPUT_SIZE), 0, 4, b),
                    ==, -1);
    stl_le_p(b, 65537);
    g_assert_cmpint(control(&fx, REQ_OUT(NCM_SET_NTB_INPUT_SIZE), 0, 4, b),
                    ==, -1);
    stl_le_p(b, 2048);
    g_assert_cmpint(control(&fx, REQ_OUT(NCM_SET_NTB_INPUT_SIZE), 0, 4, b),
                    ==, 0);
    g_assert_cmpuint(fx.f.ntb_in_size, ==, 2048);
    g_assert_cmpuint(fx.f.stats->bad_requests, ==, 2);
    fixture_free(&fx);
}

/* NCM 1.0 7.2: alt 0 puts every negotiated value back. */
static void test_control_alt0_resets(void)
{
    uint8_t b[4];
    Fixture fx;

    fixture_init(&fx, NCM_ZLP_REQUIRED, 1514);
    g_assert_cmpint(control(&fx, REQ_OUT(NCM_SET_NTB_FORMAT), 1, 0, NULL),
                    ==, 0);
    stl_le_p(b, 4096);
    g_assert_cmpint(control(&fx, REQ_OUT(NCM_SET_NTB_INPUT_SIZE), 0, 4, b),
                    ==, 0);
    g_assert_cmpint(control(&fx, REQ_OUT(CDC_SET_ETHERNET_PACKET_FILTER),
                            0x1f, 0, NULL), ==, 0);
    ncm_function_set_data_alt(&fx.f, 1);
    g_assert(fx.f.format == &ncm_ntb32_format);
    ncm_function_set_data_alt(&fx.f, 0);
    g_assert(fx.f.format == &ncm_ntb16_format);
    g_assert_cmpuint(fx.f.ntb_in_size, ==, 65536);
    g_assert_cmpuint(fx.f.packet_filter, !=, 0x1f);
    g_assert(!fx.f.data_active);
    fixture_free(&fx);
}

/* NCM 1.0 requests beyond the base set */

static void fixture_init_cfg(Fixture *fx, const NcmConfig *c)
{
    ncm_function_init(&fx->f, c);
    fx->emitted = g_ptr_array_new_with_free_func(
        (GDestroyNotify)g_byte_array_unref);
    fx->errors_before = guest_errors_logged();
}

/* Datagrams per NDP of the IN NTB @ntb (NTB16) */
static unsigned in_ntb_datagrams(const GByteArray *ntb, bool crc)
{
    NcmParseLimits limits = {
        .max_ntb_len = 65536, .max_datagram_len = 9000, .crc = crc,
    };
    g_autofree NcmNtbView *view = g_new0(NcmNtbView, 1);

    g_assert_cmpint(ncm_ntb_parse_one(&ncm_ntb16_format, ntb->data,
                                      ntb->len, &limits, view),
                    ==, NCM_PARSE_OK);
    return view->n_datagrams;
}

/*
 * The 8-byte SET_NTB_INPUT_SIZE where D5 is not advertised, as FreeBSD's
 * if_cdce sends it: taken, since stalling it leaves IN NTBs larger than
 * the host's reads.
 */
static void test_control_input_size_8_unadvertised(void)
{
    NcmConfig c = config(NCM_ZLP_AUTO, 1514);
    uint8_t b[8] = { 0 };
    Fixture fx;

    g_assert_false(c.network_caps & NCM_CAP_NTB_INPUT_SIZE_8);
    fixture_init_cfg(&fx, &c);
    stl_le_p(b, 16384);
    stw_le_p(b + 4, 31);
    g_assert_cmpint(control(&fx, REQ_OUT(NCM_SET_NTB_INPUT_SIZE), 0, 8, b),
                    ==, 0);
    g_assert_cmpuint(fx.f.ntb_in_size, ==, 16384);
    g_assert_cmpuint(fx.f.ntb_in_max_datagrams, ==, 31);
    g_assert_cmpuint(fx.f.stats->input_size_requests_8, ==, 1);
    g_assert_cmpuint(fx.f.stats->bad_requests, ==, 0);
    /* the reply keeps the advertised 4-byte form */
    memset(b, 0, sizeof(b));
    g_assert_cmpint(control(&fx, REQ_IN(NCM_GET_NTB_INPUT_SIZE), 0, 8, b),
                    ==, 4);
    g_assert_cmpuint(ldl_le_p(b), ==, 16384);
    fixture_free(&fx);
}

/*
 * The 8-byte SET_NTB_INPUT_SIZE (bmNetworkCapabilities D5): its
 * wNtbInMaxDatagrams bounds every IN NTB; the 4-byte form is still
 * taken and means no limit; other lengths stall and are counted.
 */
static void test_control_input_size_8(void)
{
    NcmConfig c = config(NCM_ZLP_AUTO, 1514);
    static const int bad_lengths[] = { 0, 2, 5, 6, 7, 9, 12 };
    uint8_t b[12] = { 0 };
    Fixture fx;
    unsigned i;
    bool zlp;

    c.network_caps |= NCM_CAP_NTB_INPUT_SIZE_8;
    fixture_init_cfg(&fx, &c);
    stl_le_p(b, 8192);
    stw_le_p(b + 4, 3);
    stw_le_p(b + 6, 0xffff);        /* reserved: ignored */
    g_assert_cmpint(control(&fx, REQ_OUT(NCM_SET_NTB_INPUT_SIZE), 0, 8, b),
                    ==, 0);
    memset(b, 0, sizeof(b));
    g_assert_cmpint(control(&fx, REQ_IN(NCM_GET_NTB_INPUT_SIZE), 0, 8, b),
                    ==, 8);
    g_assert_cmpuint(ldl_le_p(b), ==, 8192);
    g_assert_cmpuint(lduw_le_p(b + 4), ==, 3);
    g_assert_cmpuint(lduw_le_p(b + 6), ==, 0);
    g_assert_cmpuint(fx.f.stats->input_size_requests_8, ==, 1);

    ncm_function_set_data_alt(&fx.f, 1);
    for (i = 0; i < 5; i++) {
        g_autoptr(GByteArray) fr = frame(dev_mac, i, 100);
        NcmRxResult r = ncm_function_rx(&fx.f, fr->data, fr->len);

        /* the fourth waits for the next NTB */
        g_assert_cmpint(r, ==, i == 3 ? NCM_RX_BUSY : NCM_RX_QUEUED);
        if (r == NCM_RX_BUSY) {
            g_autoptr(GByteArray) got = take_in(&fx, 65536, &zlp);

            g_assert_cmpuint(in_ntb_datagrams(got, false), ==, 3);
            g_assert_cmpint(ncm_function_rx(&fx.f, fr->data, fr->len), ==,
                            NCM_RX_QUEUED);
        }
    }
    {
        g_autoptr(GByteArray) got = take_in(&fx, 65536, &zlp);

        g_assert_cmpuint(in_ntb_datagrams(got, false), ==, 2);
    }

    /* the 4-byte form: no limit any more */
    stl_le_p(b, 8192);
    g_assert_cmpint(control(&fx, REQ_OUT(NCM_SET_NTB_INPUT_SIZE), 0, 4, b),
                    ==, 0);
    g_assert_cmpuint(fx.f.ntb_in_max_datagrams, ==, 0);
    g_assert_cmpuint(fx.f.stats->input_size_requests_4, ==, 1);
    for (i = 0; i < 6; i++) {
        rx(&fx, i, 100);
    }
    {
        g_autoptr(GByteArray) got = take_in(&fx, 65536, &zlp);

        g_assert_cmpuint(in_ntb_datagrams(got, false), ==, 6);
    }

    for (i = 0; i < ARRAY_SIZE(bad_lengths); i++) {
        g_assert_cmpint(control(&fx, REQ_OUT(NCM_SET_NTB_INPUT_SIZE), 0,
                                bad_lengths[i], b), ==, -1);
    }
    g_assert_cmpuint(fx.f.stats->bad_requests, ==, ARRAY_SIZE(bad_lengths));
    g_assert_cmpuint(fx.f.ntb_in_size, ==, 8192);
    g_assert_cmpint(guest_errors_logged(), >, fx.errors_before);
    fixture_free(&fx);
}

/* Lowering wNtbInMaxDatagrams below what is queued drops it, counted. */
static void test_in_max_datagrams_flush(void)
{
    NcmConfig c = config(NCM_ZLP_AUTO, 1514);
    uint8_t b[8] = { 0 };
    Fixture fx;
    unsigned i;

    c.network_caps |= NCM_CAP_NTB_INPUT_SIZE_8;
    fixture_init_cfg(&fx, &c);
    ncm_function_set_data_alt(&fx.f, 1);
    for (i = 0; i < 4; i++) {
        rx(&fx, i, 100);
    }
    stl_le_p(b, 65536);
    stw_le_p(b + 4, 2);
    g_assert_cmpint(control(&fx, REQ_OUT(NCM_SET_NTB_INPUT_SIZE), 0, 8, b),
                    ==, 0);
    g_assert_cmpuint(fx.f.stats->in_flushed_datagrams, ==, 4);
    g_assert_cmpuint(fx.f.in_builder.max_datagrams, ==, 2);
    fixture_free(&fx);
}

/* A firmware that sends one datagram per NTB, whatever the host allows */
static void test_in_firmware_one_per_ntb(void)
{
    NcmConfig c = config(NCM_ZLP_AUTO, 1514);
    Fixture fx;
    unsigned i;
    bool zlp;

    c.in_max_datagrams = 1;
    fixture_init_cfg(&fx, &c);
    ncm_function_set_data_alt(&fx.f, 1);
    for (i = 0; i < 3; i++) {
        g_autoptr(GByteArray) got = NULL;
        g_autoptr(GByteArray) fr = frame(dev_mac, i, 200);

        g_assert_cmpint(ncm_function_rx(&fx.f, fr->data, fr->len), ==,
                        NCM_RX_QUEUED);
        g_assert_cmpint(ncm_function_rx(&fx.f, fr->data, fr->len), ==,
                        NCM_RX_BUSY);
        g_assert(!ncm_function_rx_can_queue(&fx.f));
        got = take_in(&fx, 65536, &zlp);
        g_assert_cmpuint(in_ntb_datagrams(got, false), ==, 1);
    }
    g_assert_cmpuint(fx.f.stats->in_ntbs, ==, 3);
    fixture_free(&fx);
}

static const uint8_t mc_a[6] = { 0x01, 0x00, 0x5e, 0x00, 0x00, 0x01 };
static const uint8_t mc_b[6] = { 0x33, 0x33, 0x00, 0x00, 0x00, 0xfb };

static NcmRxResult rx_to(Fixture *fx, const uint8_t *dst)
{
    g_autoptr(GByteArray) fr = frame(dst, 1, 80);

    return ncm_function_rx(&fx->f, fr->data, fr->len);
}

static int set_mc(Fixture *fx, int n, int length, const uint8_t *list)
{
    return control(fx, REQ_OUT(CDC_SET_ETHERNET_MULTICAST_FILTERS), n,
                   length, (uint8_t *)list);
}

/*
 * A perfect filter of 4: PACKET_TYPE_MULTICAST passes the listed
 * addresses only, ALL_MULTICAST every one; malformed lists stall.
 */
static void test_mc_perfect(void)
{
    NcmConfig c = config(NCM_ZLP_AUTO, 1514);
    uint8_t list[5 * 6];
    Fixture fx;

    c.mc_filters = 4;
    fixture_init_cfg(&fx, &c);
    memcpy(list, mc_a, 6);
    memcpy(list + 6, "\x01\x00\x5e\x7f\xff\xfa", 6);
    g_assert_cmpint(set_mc(&fx, 2, 12, list), ==, 0);
    g_assert_cmpuint(fx.f.mc_count, ==, 2);
    g_assert_cmpint(control(&fx, REQ_OUT(CDC_SET_ETHERNET_PACKET_FILTER),
                            CDC_FILTER_DIRECTED | CDC_FILTER_MULTICAST, 0,
                            NULL), ==, 0);
    ncm_function_set_data_alt(&fx.f, 1);
    /* alt 1 keeps the list (alt 0 would clear it) */
    g_assert_cmpint(rx_to(&fx, mc_a), ==, NCM_RX_QUEUED);
    g_assert_cmpint(rx_to(&fx, mc_b), ==, NCM_RX_DROPPED);
    g_assert_cmpint(rx_to(&fx, bcast), ==, NCM_RX_DROPPED);
    g_assert_cmpuint(fx.f.stats->rx_filtered, ==, 2);
    g_assert_cmpint(control(&fx, REQ_OUT(CDC_SET_ETHERNET_PACKET_FILTER),
                            CDC_FILTER_DIRECTED | CDC_FILTER_ALL_MULTICAST,
                            0, NULL), ==, 0);
    g_assert_cmpint(rx_to(&fx, mc_b), ==, NCM_RX_QUEUED);
    g_assert_cmpint(control(&fx, REQ_OUT(CDC_SET_ETHERNET_PACKET_FILTER),
                            CDC_FILTER_DIRECTED, 0, NULL), ==, 0);
    g_assert_cmpint(rx_to(&fx, mc_a), ==, NCM_RX_DROPPED);

    /* bad lists: too many, length not 6 x wValue; the list stays */
    memset(list, 0x01, sizeof(list));
    g_assert_cmpint(set_mc(&fx, 5, 30, list), ==, -1);
    g_assert_cmpint(set_mc(&fx, 2, 11, list), ==, -1);
    g_assert_cmpint(set_mc(&fx, 2, 18, list), ==, -1);
    g_assert_cmpint(set_mc(&fx, 0, 6, list), ==, -1);
    g_assert_cmpuint(fx.f.stats->mc_filter_rejects, ==, 4);
    g_assert_cmpuint(fx.f.stats->bad_requests, ==, 4);
    g_assert_cmpuint(fx.f.mc_count, ==, 2);
    g_assert_cmpmem(fx.f.mc_addrs[0], 6, mc_a, 6);
    g_assert_cmpint(guest_errors_logged(), >, fx.errors_before);

    /* 0 clears it */
    g_assert_cmpint(control(&fx, REQ_OUT(CDC_SET_ETHERNET_PACKET_FILTER),
                            CDC_FILTER_MULTICAST, 0, NULL), ==, 0);
    g_assert_cmpint(set_mc(&fx, 0, 0, NULL), ==, 0);
    g_assert_cmpint(rx_to(&fx, mc_a), ==, NCM_RX_DROPPED);
    g_assert_cmpuint(fx.f.stats->mc_filter_requests, ==, 2);
    /* alt 0 forgets the list */
    g_assert_cmpint(set_mc(&fx, 1, 6, mc_a), ==, 0);
    ncm_function_set_data_alt(&fx.f, 0);
    g_assert_cmpuint(fx.f.mc_count, ==, 0);
    fixture_free(&fx);
}

/*
 * wNumberMCFilters D15: imperfect (hash) filtering.  An address in the
 * bin of a listed one passes although it is not listed; one in another
 * bin does not.
 */
static void test_mc_imperfect(void)
{
    NcmConfig c = config(NCM_ZLP_AUTO, 1514);
    uint8_t same[6], other[6];
    unsigned bin = ncm_mc_hash_bin(mc_a), i;
    bool found_same = false, found_other = false;
    Fixture fx;

    for (i = 0; i < 65536 && !(found_same && found_other); i++) {
        uint8_t m[6] = { 0x01, 0x00, 0x5e, 0x01, i >> 8, i };

        if (ncm_mc_hash_bin(m) == bin && !found_same) {
            memcpy(same, m, 6);
            found_same = true;
        } else if (ncm_mc_hash_bin(m) != bin && !found_other) {
            memcpy(other, m, 6);
            found_other = true;
        }
    }
    g_assert(found_same && found_other);

    c.mc_filters = CDC_MC_FILTERS_IMPERFECT | 8;
    fixture_init_cfg(&fx, &c);
    g_assert_cmpint(set_mc(&fx, 1, 6, mc_a), ==, 0);
    g_assert_cmpint(control(&fx, REQ_OUT(CDC_SET_ETHERNET_PACKET_FILTER),
                            CDC_FILTER_MULTICAST, 0, NULL), ==, 0);
    ncm_function_set_data_alt(&fx.f, 1);
    g_assert_cmpint(rx_to(&fx, mc_a), ==, NCM_RX_QUEUED);
    g_assert_cmpint(rx_to(&fx, same), ==, NCM_RX_QUEUED);
    g_assert_cmpint(rx_to(&fx, other), ==, NCM_RX_DROPPED);
    fixture_free(&fx);
}

/*
 * No filters advertised (the default): any list stalls, and
 * PACKET_TYPE_MULTICAST passes all multicast, the function cannot filter.
 */
static void test_mc_none_advertised(void)
{
    Fixture fx;

    fixture_init(&fx, NCM_ZLP_AUTO, 1514);
    g_assert_cmpint(set_mc(&fx, 1, 6, mc_a), ==, -1);
    g_assert_cmpuint(fx.f.stats->mc_filter_rejects, ==, 1);
    g_assert_cmpint(set_mc(&fx, 0, 0, NULL), ==, 0);
    g_assert_cmpint(control(&fx, REQ_OUT(CDC_SET_ETHERNET_PACKET_FILTER),
                            CDC_FILTER_MULTICAST, 0, NULL), ==, 0);
    ncm_function_set_data_alt(&fx.f, 1);
    g_assert_cmpint(rx_to(&fx, mc_b), ==, NCM_RX_QUEUED);
    fixture_free(&fx);
}

static uint32_t statistic(Fixture *fx, int selector)
{
    uint8_t b[4];

    g_assert_cmpint(control(fx, REQ_IN(CDC_GET_ETHERNET_STATISTIC), selector,
                            4, b), ==, 4);
    return ldl_le_p(b);
}

/* GET_ETHERNET_STATISTIC: the advertised counters, nothing else. */
/*
 * NCM_ETH_STATS_SUPPORTED is what NCM_ETH_STAT_COUNTERS lists, and RCV_OK;
 * each listed counter answers its own selector with its own value.
 */
static void test_ethernet_statistics_list(void)
{
    NcmCounters c = { 0 };
    uint32_t listed = CDC_STAT_BIT(CDC_STAT_RCV_OK);
    size_t i;

    for (i = 0; i < NCM_ETH_STATS_COUNT; i++) {
        const NcmEthStat *st = &ncm_eth_stats[i];

        g_assert_cmpuint(st->selector, >=, 1);
        g_assert_cmpuint(st->selector, <=, CDC_STAT__MAX);
        g_assert_false(listed & CDC_STAT_BIT(st->selector));
        listed |= CDC_STAT_BIT(st->selector);
        g_assert_cmpuint(st->offset + sizeof(uint64_t), <=, sizeof(c));
        *(uint64_t *)((uint8_t *)&c + st->offset) = 1000 + i;
    }
    g_assert_cmphex(listed, ==, NCM_ETH_STATS_SUPPORTED);
    for (i = 0; i < NCM_ETH_STATS_COUNT; i++) {
        g_assert_cmpuint(ncm_eth_stat_value(&c, &ncm_eth_stats[i]), ==,
                         1000 + i);
    }
}

static void test_ethernet_statistics(void)
{
    NcmConfig c = config(NCM_ZLP_AUTO, 1514);
    g_autoptr(GByteArray) ntb = out_ntb(10, 3, 200, 0);
    uint8_t b[4];
    Fixture fx;
    bool zlp;

    c.eth_stats = NCM_ETH_STATS_SUPPORTED & ~CDC_STAT_BIT(CDC_STAT_RCV_OK);
    fixture_init_cfg(&fx, &c);
    ncm_function_set_data_alt(&fx.f, 1);
    send_packets(&fx, ntb);             /* 3 broadcast frames of 200 */
    rx(&fx, 1, 100);
    rx(&fx, 2, 300);
    g_assert_cmpint(rx_to(&fx, mc_a), ==, NCM_RX_DROPPED);
    g_byte_array_unref(take_in(&fx, 65536, &zlp));

    g_assert_cmpuint(statistic(&fx, CDC_STAT_XMIT_OK), ==, 3);
    g_assert_cmpuint(statistic(&fx, CDC_STAT_BROADCAST_FRAMES_XMIT), ==, 3);
    g_assert_cmpuint(statistic(&fx, CDC_STAT_BROADCAST_BYTES_XMIT), ==, 600);
    g_assert_cmpuint(statistic(&fx, CDC_STAT_DIRECTED_FRAMES_XMIT), ==, 0);
    g_assert_cmpuint(statistic(&fx, CDC_STAT_DIRECTED_FRAMES_RCV), ==, 2);
    g_assert_cmpuint(statistic(&fx, CDC_STAT_DIRECTED_BYTES_RCV), ==, 400);
    g_assert_cmpuint(statistic(&fx, CDC_STAT_MULTICAST_FRAMES_RCV), ==, 0);
    g_assert_cmpuint(statistic(&fx, CDC_STAT_XMIT_ERROR), ==, 0);
    g_assert_cmpuint(fx.f.stats->statistic_requests, ==, 8);
    /* not advertised, out of range, too short */
    g_assert_cmpint(control(&fx, REQ_IN(CDC_GET_ETHERNET_STATISTIC),
                            CDC_STAT_RCV_OK, 4, b), ==, -1);
    g_assert_cmpint(control(&fx, REQ_IN(CDC_GET_ETHERNET_STATISTIC),
                            0, 4, b), ==, -1);
    g_assert_cmpint(control(&fx, REQ_IN(CDC_GET_ETHERNET_STATISTIC),
                            18, 4, b), ==, -1);
    g_assert_cmpint(control(&fx, REQ_IN(CDC_GET_ETHERNET_STATISTIC),
                            30, 4, b), ==, -1);
    g_assert_cmpint(control(&fx, REQ_IN(CDC_GET_ETHERNET_STATISTIC),
                            CDC_STAT_XMIT_OK, 2, b), ==, -1);
    g_assert_cmpuint(fx.f.stats->bad_requests, ==, 5);
    g_assert_cmpuint(fx.f.stats->statistic_requests, ==, 8);
    fixture_free(&fx);
}

/* An OUT NTB16 in CRC mode; datagram @bad gets a wrong CRC (-1: none) */
static GByteArray *out_ntb_crc(uint32_t tag, unsigned n, uint32_t len,
                               int bad)
{
    NcmNtbLayout layout = {
        .max_len = 65536, .divisor = 4, .ndp_alignment = 4, .crc = true,
    };
    g_autofree NcmNtbBuilder *b = g_new0(NcmNtbBuilder, 1);
    GByteArray *ntb = g_byte_array_new();
    uint32_t used;
    unsigned i;

    g_byte_array_set_size(ntb, 65536);
    ncm_ntb_builder_init(b, &ncm_ntb16_format, &layout, ntb->data);
    for (i = 0; i < n; i++) {
        g_autoptr(GByteArray) fr = frame(bcast, tag + i, len);

        g_assert(ncm_ntb_builder_append(b, fr->data, fr->len));
    }
    used = ncm_ntb_builder_finish(b, tag);
    if (bad >= 0) {
        ntb->data[b->datagrams[bad].offset + len] ^= 0x40;
    }
    g_byte_array_set_size(ntb, used);
    return ntb;
}

/*
 * CRC mode both ways: OUT datagrams are checked (a bad one is dropped,
 * counted and reported, the others pass), IN NTBs carry NCM1 NDPs and a
 * CRC per datagram.  Only in alt 0, only when advertised; alt 0 ends it.
 */
static void test_crc_mode(void)
{
    NcmConfig c = config(NCM_ZLP_AUTO, 1514);
    g_autoptr(GByteArray) good = out_ntb_crc(10, 3, 200, -1);
    g_autoptr(GByteArray) bad = out_ntb_crc(20, 3, 300, 1);
    g_autoptr(GByteArray) plain = out_ntb(30, 2, 100, 0);
    g_autoptr(GByteArray) in = NULL;
    g_autofree NcmNtbView *view = g_new0(NcmNtbView, 1);
    NcmParseLimits limits = {
        .max_ntb_len = 65536, .max_datagram_len = 1514, .crc = true,
    };
    uint8_t b[2];
    unsigned i;
    Fixture fx;
    bool zlp;

    c.network_caps |= NCM_CAP_CRC_MODE;
    fixture_init_cfg(&fx, &c);
    g_assert_cmpint(control(&fx, REQ_IN(NCM_GET_CRC_MODE), 0, 2, b), ==, 2);
    g_assert_cmpuint(lduw_le_p(b), ==, 0);
    g_assert_cmpint(control(&fx, REQ_OUT(NCM_SET_CRC_MODE), 2, 0, NULL),
                    ==, -1);
    g_assert_cmpint(control(&fx, REQ_OUT(NCM_SET_CRC_MODE), 1, 2, b),
                    ==, -1);
    g_assert_cmpint(control(&fx, REQ_OUT(NCM_SET_CRC_MODE), 1, 0, NULL),
                    ==, 0);
    g_assert_cmpint(control(&fx, REQ_IN(NCM_GET_CRC_MODE), 0, 2, b), ==, 2);
    g_assert_cmpuint(lduw_le_p(b), ==, 1);
    ncm_function_set_data_alt(&fx.f, 1);
    g_assert_cmpint(control(&fx, REQ_OUT(NCM_SET_CRC_MODE), 0, 0, NULL),
                    ==, -1);
    g_assert_cmpuint(fx.f.stats->bad_requests, ==, 3);
    g_assert(fx.f.crc_mode);

    /* OUT */
    g_assert(ncm_function_out_direct(&fx.f, good->data, good->len, MPS,
                                     emit, &fx));
    g_assert_cmpuint(fx.emitted->len, ==, 3);
    for (i = 0; i < 3; i++) {
        GByteArray *e = g_ptr_array_index(fx.emitted, i);

        /* the CRC stays behind */
        g_assert_cmpuint(e->len, ==, 200);
        g_assert_cmpuint(ldl_le_p(e->data + 14), ==, 10 + i);
    }
    send_packets(&fx, bad);
    g_assert_cmpuint(fx.emitted->len, ==, 5);
    g_assert_cmpuint(fx.f.stats->out_crc_errors, ==, 1);
    g_assert_cmpuint(fx.f.stats->out_crc_datagrams, ==, 5);
    g_assert_cmpuint(fx.f.stats->out_crc_errors, ==, 1);
    g_assert_cmpint(guest_errors_logged(), >, fx.errors_before);
    /* an NCM0 NDP in CRC mode */
    g_assert(ncm_function_out_direct(&fx.f, plain->data, plain->len, MPS,
                                     emit, &fx));
    g_assert_cmpuint(fx.emitted->len, ==, 5);
    g_assert_cmpuint(fx.f.stats->out_parse_errors[NCM_PARSE_NDP_SIGNATURE],
                     ==, 1);

    /* IN */
    rx(&fx, 1, 100);
    rx(&fx, 2, 1514);
    in = take_in(&fx, 65536, &zlp);
    g_assert_cmpint(ncm_ntb_parse_one(&ncm_ntb16_format, in->data, in->len,
                                      &limits, view), ==, NCM_PARSE_OK);
    g_assert_cmpuint(view->n_datagrams, ==, 2);
    for (i = 0; i < 2; i++) {
        g_assert(ncm_datagram_crc_ok(in->data + view->datagrams[i].offset,
                                     view->datagrams[i].len));
    }
    g_assert_cmpuint(view->datagrams[1].len, ==, 1514);
    g_assert_cmpuint(fx.f.stats->in_crc_ntbs, ==, 1);

    /* alt 0: back to no CRC */
    ncm_function_set_data_alt(&fx.f, 0);
    g_assert(!fx.f.crc_mode);
    ncm_function_set_data_alt(&fx.f, 1);
    rx(&fx, 3, 100);
    g_byte_array_unref(in);
    in = take_in(&fx, 65536, &zlp);
    g_assert_cmpuint(in_ntb_datagrams(in, false), ==, 1);
    fixture_free(&fx);
}

/* Without bmNetworkCapabilities D4 neither CRC request exists. */
static void test_crc_mode_not_offered(void)
{
    uint8_t b[2];
    Fixture fx;

    fixture_init(&fx, NCM_ZLP_AUTO, 1514);
    g_assert_cmpint(control(&fx, REQ_IN(NCM_GET_CRC_MODE), 0, 2, b), ==, -1);
    g_assert_cmpint(control(&fx, REQ_OUT(NCM_SET_CRC_MODE), 0, 0, NULL),
                    ==, -1);
    g_assert_cmpuint(fx.f.stats->bad_requests, ==, 2);
    g_assert(!fx.f.crc_mode);
    fixture_free(&fx);
}

/* Migration: every field from the stream is checked */

typedef struct MigCase {
    const char *name;
    void (*spoil)(NcmFunction *f);
    bool ntb32;
} MigCase;

static void spoil_none(NcmFunction *f)
{
}

static void spoil_input_size(NcmFunction *f)
{
    f->ntb_in_size = 131072;
}

static void spoil_datagram_size(NcmFunction *f)
{
    f->max_datagram_size = 9000;
}

static void spoil_filter(NcmFunction *f)
{
    f->packet_filter = 0x40;
}

static void spoil_n_datagrams(NcmFunction *f)
{
    f->in_builder.n_datagrams = NCM_MAX_DATAGRAMS + 1;
}

static void spoil_datagram(NcmFunction *f)
{
    f->in_builder.datagrams[0].offset = 0xfffffff0;
}

static void spoil_builder_len(NcmFunction *f)
{
    f->in_builder.len = 70000;
}

static void spoil_send_off(NcmFunction *f)
{
    f->in_ntb_len = 100;
    f->in_send_off = 200;
}

static void spoil_notify(NcmFunction *f)
{
    f->notify_len = 200;
}

static void spoil_crc_mode(NcmFunction *f)
{
    f->crc_mode = true;         /* the configuration does not offer it */
}

static void spoil_mc_count(NcmFunction *f)
{
    f->mc_count = 1;            /* no filters advertised */
}

static const MigCase mig_cases[] = {
    { "valid", spoil_none, false },
    { "valid-ntb32", spoil_none, true },
    { "input-size", spoil_input_size, false },
    { "datagram-size", spoil_datagram_size, false },
    { "filter", spoil_filter, false },
    { "n-datagrams", spoil_n_datagrams, false },
    { "datagram-offset", spoil_datagram, false },
    { "builder-len", spoil_builder_len, false },
    { "send-offset", spoil_send_off, false },
    { "notification", spoil_notify, false },
    { "crc-mode-not-offered", spoil_crc_mode, false },
    { "multicast-filters", spoil_mc_count, false },
};

static void test_migration_checks(const void *opaque)
{
    const MigCase *m = opaque;
    NcmConfig c = config(NCM_ZLP_REQUIRED, 1514);
    const char *why;
    Fixture fx;

    fixture_init(&fx, NCM_ZLP_REQUIRED, 1514);
    if (m->ntb32) {
        g_assert_cmpint(control(&fx, REQ_OUT(NCM_SET_NTB_FORMAT), 1, 0,
                                NULL), ==, 0);
    }
    ncm_function_set_data_alt(&fx.f, 1);
    rx(&fx, 1, 300);
    rx(&fx, 2, 400);
    ncm_function_pre_save(&fx.f);
    m->spoil(&fx.f);
    why = ncm_function_post_load(&fx.f, m->ntb32,
                                 ncm_function_in_bytes(&fx.f));
    if (m->spoil == spoil_none) {
        g_assert_null(why);
        g_assert_cmpuint(fx.f.in_builder.n_datagrams, ==, 2);
        /* an NTB16 stream's first datagram would sit inside an NTH32 */
        if (!m->ntb32) {
            g_assert_nonnull(ncm_function_post_load(
                &fx.f, true, ncm_function_in_bytes(&fx.f)));
        }
    } else {
        g_assert_nonnull(why);
    }
    /* a device without NTB32 refuses a stream that selected it */
    c.ntb_formats = NCM_NTB_FORMAT_16;
    fx.f.cfg = c;
    if (m->ntb32) {
        g_assert_nonnull(ncm_function_post_load(&fx.f, true, 0));
    }
    fixture_free(&fx);
}

/*
 * F28: an IN NTB half sent keeps the size and datagrams it was built with
 * when the host lowers both (8-byte SET_NTB_INPUT_SIZE); a migration then
 * must load, and the rest of the NTB go out whole.  Before the fix the load
 * held the NTB to the new limits and refused the source's own state.
 */
static void test_migration_in_flight_limits(void)
{
    uint8_t b[8];
    const uint8_t *src;
    uint32_t len, first;
    bool zlp;
    g_autoptr(GByteArray) rest = NULL;
    Fixture fx;

    fixture_init(&fx, NCM_ZLP_REQUIRED, 1514);
    ncm_function_set_data_alt(&fx.f, 1);
    rx(&fx, 1, 1000);
    rx(&fx, 2, 1000);
    rx(&fx, 3, 1000);
    src = ncm_function_in_next(&fx.f, MPS, &first);
    g_assert_nonnull(src);
    g_assert_cmpuint(first, ==, MPS);
    g_assert_false(ncm_function_in_sent(&fx.f, first, MPS, MPS));
    len = fx.f.in_ntb_len;
    g_assert_cmpuint(len, >, NCM_NTB_MIN_SIZE);

    stl_le_p(b, NCM_NTB_MIN_SIZE);
    stw_le_p(b + 4, 1);
    stw_le_p(b + 6, 0);
    g_assert_cmpint(control(&fx, REQ_OUT(NCM_SET_NTB_INPUT_SIZE), 0, 8, b),
                    ==, 0);
    ncm_function_pre_save(&fx.f);
    g_assert_null(ncm_function_post_load(&fx.f, false,
                                         ncm_function_in_bytes(&fx.f)));
    g_assert_cmpuint(fx.f.in_builder.n_datagrams, ==, 3);

    rest = take_in(&fx, MPS, &zlp);
    g_assert_cmpuint(first + rest->len, ==, len);
    /* and the next NTB is held to what the host asked */
    rx(&fx, 4, 1000);
    g_assert_cmpuint(fx.f.in_builder.max_datagrams, ==, 1);
    g_assert_cmpuint(fx.f.in_builder.layout.max_len, ==, NCM_NTB_MIN_SIZE);
    fixture_free(&fx);
}

/* ncm_function_check_config(): each limit, one value past it */
typedef struct CfgCase {
    const char *name;
    void (*spoil)(NcmConfig *c);
    const char *says;           /* in the message; NULL: accepted */
} CfgCase;

static void cfg_none(NcmConfig *c)
{
}

static void cfg_edges(NcmConfig *c)
{
    /* every value at the edge of its range, still accepted */
    c->ntb_in_max_size = NCM_NTB_MIN_SIZE;
    c->ntb_out_max_size = NCM_NTB16_MAX_SIZE;
    c->in_divisor = 4096;
    c->in_remainder = 4095;
    c->out_alignment = 4096;
    c->out_max_datagrams = NCM_MAX_DATAGRAMS;
    c->in_max_datagrams = NCM_MAX_DATAGRAMS;
    c->network_caps = NCM_CAPS_SUPPORTED;
    c->mc_filters = CDC_MC_FILTERS_IMPERFECT | NCM_MAX_MC_FILTERS;
    c->eth_stats = NCM_ETH_STATS_SUPPORTED;
    c->power_on_filter = 0x1f;
    c->max_segment_size = NCM_NTB_MIN_SIZE - 64;
}

static void cfg_in_small(NcmConfig *c)
{
    c->ntb_in_max_size = NCM_NTB_MIN_SIZE - 1;
}

static void cfg_out_large(NcmConfig *c)
{
    c->ntb_out_max_size = NCM_NTB16_MAX_SIZE + 1;
}

static void cfg_divisor(NcmConfig *c)
{
    c->out_divisor = 12;
}

static void cfg_remainder(NcmConfig *c)
{
    c->in_remainder = c->in_divisor;
}

static void cfg_alignment(NcmConfig *c)
{
    c->in_alignment = 2;
}

static void cfg_out_datagrams(NcmConfig *c)
{
    c->out_max_datagrams = NCM_MAX_DATAGRAMS + 1;
}

static void cfg_in_datagrams(NcmConfig *c)
{
    c->in_max_datagrams = NCM_MAX_DATAGRAMS + 1;
}

static void cfg_caps(NcmConfig *c)
{
    c->network_caps |= NCM_CAP_ENCAPSULATED;
}

static void cfg_mc_filters(NcmConfig *c)
{
    c->mc_filters = NCM_MAX_MC_FILTERS + 1;
}

static void cfg_eth_stats(NcmConfig *c)
{
    c->eth_stats = NCM_ETH_STATS_SUPPORTED + 1;
}

static void cfg_filter(NcmConfig *c)
{
    c->power_on_filter = 0x20;
}

static void cfg_segment_small(NcmConfig *c)
{
    c->max_segment_size = 1513;
}

static void cfg_segment_fits(NcmConfig *c)
{
    c->ntb_out_max_size = 2048;
    c->max_segment_size = 2048 - 63;
}

static const CfgCase cfg_cases[] = {
    { "defaults", cfg_none, NULL },
    { "edges", cfg_edges, NULL },
    { "ntb-in-max-size", cfg_in_small, "ntb-in-max-size 2047 is outside" },
    { "ntb-out-max-size", cfg_out_large, "ntb-out-max-size 65537 is outside" },
    { "divisor", cfg_divisor, "must be powers of two in 4..4096" },
    { "remainder", cfg_remainder, "smaller than their divisors" },
    { "alignment", cfg_alignment, "ntb-in-alignment and ntb-out-alignment" },
    { "out-datagrams", cfg_out_datagrams, "ntb-out-max-datagrams must be" },
    { "in-datagrams", cfg_in_datagrams, "in-datagrams-per-ntb must be" },
    { "capabilities", cfg_caps, "offers bits 0, 1, 3, 4 and 5 only" },
    { "multicast-filters", cfg_mc_filters, "at most 256 filters" },
    { "ethernet-statistics", cfg_eth_stats, "selectors 1..17 only" },
    { "power-on-filter", cfg_filter, "power-on-filter 0x20 has bits" },
    { "segment-small", cfg_segment_small, "max-segment-size 1513 must be" },
    { "segment-fits", cfg_segment_fits, "fit an NTB of 2048 bytes" },
};

static void test_check_config(const void *opaque)
{
    const CfgCase *t = opaque;
    NcmConfig c = config(NCM_ZLP_AUTO, 1514);
    g_autofree char *why = NULL;

    t->spoil(&c);
    why = ncm_function_check_config(&c);
    if (!t->says) {
        g_assert_null(why);
    } else {
        g_assert_nonnull(why);
        g_assert_nonnull(strstr(why, t->says));
    }
}

int main(int argc, char **argv)
{
    unsigned i;
    int fd, ret;

    g_test_init(&argc, &argv, NULL);
    fd = g_file_open_tmp("test-ncm-function-XXXXXX.log", &guest_error_log,
                         NULL);
    g_assert_cmpint(fd, >=, 0);
    close(fd);
    qemu_set_log_filename_flags(guest_error_log, LOG_GUEST_ERROR,
                                &error_abort);
    g_test_add_data_func("/ncm-function/out/merge/zlp-required",
                         GINT_TO_POINTER(NCM_ZLP_REQUIRED), test_out_merge);
    g_test_add_data_func("/ncm-function/out/merge/auto",
                         GINT_TO_POINTER(NCM_ZLP_AUTO), test_out_merge);
    g_test_add_func("/ncm-function/out/zlp-separates",
                    test_out_zlp_separates);
    g_test_add_func("/ncm-function/out/direct", test_out_direct);
    g_test_add_func("/ncm-function/out/malformed", test_out_malformed);
    for (i = 0; i < ARRAY_SIZE(zlp_cases); i++) {
        g_autofree char *path = g_strdup_printf(
            "/ncm-function/in/zlp/%u-byte-frame-%u-byte-packets-input-%u",
            zlp_cases[i].frame_len, zlp_cases[i].room,
            zlp_cases[i].input_size);

        g_test_add_data_func(path, &zlp_cases[i], test_in_zlp);
    }
    g_test_add_func("/ncm-function/in/zlp/none-at-input-size",
                    test_in_no_zlp_at_input_size);
    g_test_add_func("/ncm-function/in/attach/rescue", test_in_attach_rescue);
    g_test_add_func("/ncm-function/in/attach/jumbo", test_in_attach_jumbo);
    g_test_add_func("/ncm-function/in/attach/has-room",
                    test_in_attach_has_room);
    g_test_add_func("/ncm-function/in/babble", test_in_babble);
    g_test_add_func("/ncm-function/in/power-on-filter",
                    test_in_power_on_filter);
    g_test_add_func("/ncm-function/in/input-size-flush",
                    test_in_input_size_flush);
    g_test_add_func("/ncm-function/control/parameters",
                    test_control_parameters);
    g_test_add_func("/ncm-function/control/input-size-bounds",
                    test_control_input_size_bounds);
    g_test_add_func("/ncm-function/control/alt-0-resets",
                    test_control_alt0_resets);
    g_test_add_func("/ncm-function/control/input-size-8-bytes",
                    test_control_input_size_8);
    g_test_add_func("/ncm-function/control/input-size-8-bytes-unadvertised",
                    test_control_input_size_8_unadvertised);
    g_test_add_func("/ncm-function/in/max-datagrams-flush",
                    test_in_max_datagrams_flush);
    g_test_add_func("/ncm-function/in/firmware-one-datagram-per-ntb",
                    test_in_firmware_one_per_ntb);
    g_test_add_func("/ncm-function/multicast/perfect", test_mc_perfect);
    g_test_add_func("/ncm-function/multicast/imperfect", test_mc_imperfect);
    g_test_add_func("/ncm-function/multicast/none-advertised",
                    test_mc_none_advertised);
    g_test_add_func("/ncm-function/control/ethernet-statistics",
                    test_ethernet_statistics);
    g_test_add_func("/ncm-function/control/ethernet-statistics-list",
                    test_ethernet_statistics_list);
    g_test_add_func("/ncm-function/crc/both-ways", test_crc_mode);
    g_test_add_func("/ncm-function/crc/not-offered",
                    test_crc_mode_not_offered);
    for (i = 0; i < ARRAY_SIZE(bad_requests); i++) {
        g_autofree char *path = g_strdup_printf("/ncm-function/control/bad/%s",
                                                bad_requests[i].name);

        g_test_add_data_func(path, &bad_requests[i], test_control_bad);
    }
    for (i = 0; i < ARRAY_SIZE(mig_cases); i++) {
        g_autofree char *path = g_strdup_printf("/ncm-function/migration/%s",
                                                mig_cases[i].name);

        g_test_add_data_func(path, &mig_cases[i], test_migration_checks);
    }
    g_test_add_func("/ncm-function/migration/in-flight-keeps-its-limits",
                    test_migration_in_flight_limits);
    for (i = 0; i < ARRAY_SIZE(cfg_cases); i++) {
        g_autofree char *path = g_strdup_printf("/ncm-function/config/%s",
                                                cfg_cases[i].name);

        g_test_add_data_func(path, &cfg_cases[i], test_check_config);
    }
    ret = g_test_run();
    unlink(guest_error_log);
    g_free(guest_error_log);
    return ret;
}
