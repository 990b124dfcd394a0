/*
 * QTest testcase for the USB CDC-NCM adapters usb-ncm-dl and usb-ncm
 *
 * The device sits on a qemu-xhci driven by libqos/xhci-driver.c, at super
 * speed or (with p3=0) high speed; its netdev is one end of a socketpair,
 * so the test writes the frames the device receives and reads the frames
 * it sends (each a 4-byte big-endian length and the frame).
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "qemu/timer.h"
#include "libqtest.h"
#include "libqos/libqos-pc.h"
#include "libqos/xhci-driver.h"
#include "libqos/pci-pc.h"
#include "qobject/qlist.h"
#include "qobject/qdict.h"
#include <poll.h>
#include <sys/ioctl.h>

#define NCM_MAC_STR             "52:54:00:12:34:56"
#define NCM_MAC_HEX             "525400123456"
#define XHCI_DEVFN              QPCI_DEVFN(4, 0)

/* CDC / NCM class requests */
#define REQ_SET_ETHERNET_MULTICAST_FILTERS  0x40
#define REQ_SET_ETHERNET_PACKET_FILTER      0x43
#define REQ_GET_ETHERNET_STATISTIC          0x44
#define REQ_GET_NTB_PARAMETERS              0x80
#define REQ_GET_NTB_FORMAT                  0x83
#define REQ_SET_NTB_FORMAT                  0x84
#define REQ_GET_NTB_INPUT_SIZE              0x85
#define REQ_SET_NTB_INPUT_SIZE              0x86
#define REQ_GET_MAX_DATAGRAM_SIZE           0x87
#define REQ_SET_CRC_MODE                    0x8a

#define USB_REQ_GET_STATUS          0x00
#define USB_REQ_SET_FEATURE         0x03
#define USB_REQ_GET_CONFIGURATION   0x08
#define USB_REQ_SET_CONFIGURATION   0x09
#define USB_REQ_GET_INTERFACE       0x0a
#define USB_REQ_SET_INTERFACE       0x0b

#define IF_CONTROL              0
#define IF_DATA                 1

#define RX_TIMEOUT_NS           (5 * NANOSECONDS_PER_SECOND)
#define SOCK_TIMEOUT_MS         5000

static const uint8_t ncm_mac[6] = { 0x52, 0x54, 0x00, 0x12, 0x34, 0x56 };
static const uint8_t peer_mac[6] = { 0x52, 0x54, 0x00, 0xaa, 0xbb, 0xcc };
static const uint8_t other_mac[6] = { 0x52, 0x54, 0x00, 0x99, 0x99, 0x99 };
static const uint8_t bcast_mac[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };

typedef struct NcmEnv NcmEnv;
typedef struct NcmCase NcmCase;

struct NcmCase {
    bool super;                 /* else high speed */
    const char *model;          /* usb-ncm-dl or usb-ncm */
    const char *props;          /* extra -device properties, or NULL */
    int arg;                    /* case-specific */
    const void *data;           /* case-specific, typed by the case */
    void (*fn)(NcmEnv *e, const NcmCase *c);
};

/* GET_NTB_PARAMETERS */
typedef struct NtbParams {
    uint16_t formats;
    uint32_t in_max;
    uint16_t in_divisor;
    uint16_t in_remainder;
    uint16_t in_alignment;
    uint32_t out_max;
    uint16_t out_divisor;
    uint16_t out_remainder;
    uint16_t out_alignment;
    uint16_t out_max_datagrams;
} NtbParams;

struct NcmEnv {
    const NcmCase *c;
    QOSState *qs;
    QTestState *qts;
    QPCIDevice *pdev;
    QXhci *xhci;
    QXhciDevice *dev;
    int port;
    int sock;
    uint8_t config[512];
    uint32_t config_len;
    QXhciEndpoint ep_notify;
    QXhciEndpoint ep_in;
    QXhciEndpoint ep_out;
    uint32_t mps;               /* bulk wMaxPacketSize */
    NtbParams p;
    bool ntb32;
    uint32_t in_size;           /* NTB input size in force */
    uint16_t rx_seq;            /* next expected IN wSequence */
    unsigned rx_ntbs;           /* IN NTBs parsed */
    uint64_t rx_bytes;          /* their bytes */
};

/* Frames */

static GByteArray *make_frame(const uint8_t *dst, uint32_t tag, size_t len)
{
    GByteArray *f = g_byte_array_sized_new(len);
    uint8_t hdr[18];
    size_t i;

    g_assert(len >= 14);
    memcpy(hdr, dst, 6);
    memcpy(hdr + 6, peer_mac, 6);
    stw_be_p(hdr + 12, 0x88b5);         /* local experimental ethertype */
    stl_be_p(hdr + 14, tag);
    g_byte_array_append(f, hdr, MIN(len, sizeof(hdr)));
    for (i = f->len; i < len; i++) {
        uint8_t b = tag * 7 + i;

        g_byte_array_append(f, &b, 1);
    }
    return f;
}

static GPtrArray *frames_new(void)
{
    return g_ptr_array_new_with_free_func((GDestroyNotify)g_byte_array_unref);
}

static void frames_add(GPtrArray *a, const uint8_t *dst, uint32_t tag,
                       size_t len)
{
    g_ptr_array_add(a, make_frame(dst, tag, len));
}

static void frames_assert_equal(GPtrArray *got, GPtrArray *want)
{
    unsigned i;

    for (i = 0; i < MIN(got->len, want->len); i++) {
        GByteArray *g = g_ptr_array_index(got, i);
        GByteArray *w = g_ptr_array_index(want, i);

        if (g->len != w->len || memcmp(g->data, w->data, w->len)) {
            g_test_message("frame %u of %u differs: got %u bytes, wanted %u",
                           i, want->len, g->len, w->len);
        }
        g_assert_cmpmem(g->data, g->len, w->data, w->len);
    }
    g_assert_cmpuint(got->len, ==, want->len);
}

/* The socket side of the netdev */

static void sock_write_all(NcmEnv *e, const uint8_t *buf, size_t len)
{
    gint64 deadline = g_get_monotonic_time() + 60 * G_USEC_PER_SEC;
    size_t off = 0;

    while (off < len) {
        ssize_t n = send(e->sock, buf + off, len - off, MSG_DONTWAIT);

        if (n > 0) {
            off += n;
            continue;
        }
        g_assert(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
        g_assert(g_get_monotonic_time() < deadline);
        /* let QEMU's main loop read from its end */
        qxhci_step(e->xhci);
    }
}

static void sock_send_frames(NcmEnv *e, GPtrArray *frames)
{
    g_autoptr(GByteArray) buf = g_byte_array_new();
    unsigned i;

    for (i = 0; i < frames->len; i++) {
        GByteArray *f = g_ptr_array_index(frames, i);
        uint8_t len[4];

        stl_be_p(len, f->len);
        g_byte_array_append(buf, len, 4);
        g_byte_array_append(buf, f->data, f->len);
    }
    sock_write_all(e, buf->data, buf->len);
}

/* Bytes written to the socket that QEMU has not read yet, or -1. */
static int sock_unread(NcmEnv *e)
{
#ifdef TIOCOUTQ
    int n;

    /* SIOCOUTQ on Linux: bytes the peer has not read */
    if (ioctl(e->sock, TIOCOUTQ, &n) == 0) {
        return n;
    }
#endif
    return -1;
}

/* Let QEMU take in what the test wrote, as far as it is willing to. */
static void sock_settle(NcmEnv *e)
{
    int last = -2, same = 0, i;

    for (i = 0; i < 2000 && same < 20; i++) {
        int n = sock_unread(e);

        if (n == 0) {
            break;
        }
        same = n == last ? same + 1 : 0;
        last = n;
        qxhci_step(e->xhci);
    }
    /* and give the device's bottom halves a few more iterations */
    for (i = 0; i < 5; i++) {
        qxhci_step(e->xhci);
    }
}

static bool sock_read_exact(NcmEnv *e, uint8_t *buf, size_t len,
                            int timeout_ms, bool started)
{
    gint64 deadline = g_get_monotonic_time() +
                      (gint64)timeout_ms * G_TIME_SPAN_MILLISECOND;
    size_t off = 0;

    while (off < len) {
        struct pollfd pfd = { .fd = e->sock, .events = POLLIN };
        gint64 left = MAX(deadline - g_get_monotonic_time(), 0);
        ssize_t n;

        if (poll(&pfd, 1, left / 1000) <= 0) {
            if (left > 0) {
                continue;
            }
            g_assert(!started && off == 0);
            return false;
        }
        n = recv(e->sock, buf + off, len - off, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            continue;
        }
        g_assert_cmpint(n, >, 0);
        off += n;
    }
    return true;
}

/*
 * Next frame QEMU sent, or NULL if none came within @timeout_ms.  The
 * RARP frames QEMU announces a NIC with after a migration are not the
 * device's: they are skipped.
 */
static GByteArray *sock_recv_frame(NcmEnv *e, int timeout_ms)
{
    uint8_t hdr[4];
    GByteArray *f;
    uint32_t len;

    for (;;) {
        if (!sock_read_exact(e, hdr, 4, timeout_ms, false)) {
            return NULL;
        }
        len = ldl_be_p(hdr);
        g_assert_cmpuint(len, <=, 65536);
        f = g_byte_array_sized_new(len);
        g_byte_array_set_size(f, len);
        sock_read_exact(e, f->data, len, SOCK_TIMEOUT_MS, true);
        if (len < 14 || lduw_be_p(f->data + 12) != 0x8035) {
            return f;
        }
        g_byte_array_unref(f);
    }
}

static void sock_expect_frames(NcmEnv *e, GPtrArray *want)
{
    g_autoptr(GPtrArray) got = frames_new();
    unsigned i;

    for (i = 0; i < want->len; i++) {
        GByteArray *f = sock_recv_frame(e, SOCK_TIMEOUT_MS);

        if (!f) {
            g_test_message("only %u of %u frames reached the socket",
                           i, want->len);
            break;
        }
        g_ptr_array_add(got, f);
    }
    frames_assert_equal(got, want);
}

static void sock_expect_silence(NcmEnv *e, int timeout_ms)
{
    g_autoptr(GByteArray) f = sock_recv_frame(e, timeout_ms);
    uint32_t unexpected_frame_bytes = f ? f->len : 0;

    if (f) {
        g_test_message("unexpected %u-byte frame on the socket", f->len);
    }
    g_assert_cmpuint(unexpected_frame_bytes, ==, 0);
}

/* NTB building (host to device) */

typedef struct NtbLayout {
    bool ntb32;
    uint16_t ndp_alignment;
    uint16_t divisor;
    uint16_t remainder;
} NtbLayout;

static NtbLayout out_layout(NcmEnv *e)
{
    NtbLayout l = {
        .ntb32 = e->ntb32,
        .ndp_alignment = e->p.out_alignment,
        .divisor = e->p.out_divisor,
        .remainder = e->p.out_remainder,
    };
    return l;
}

static uint32_t align_up(uint32_t v, uint32_t a)
{
    return a > 1 ? ROUND_UP(v, a) : v;
}

static void put_field(uint8_t *p, bool ntb32, uint32_t v)
{
    if (ntb32) {
        stl_le_p(p, v);
    } else {
        stw_le_p(p, v);
    }
}

/*
 * NTH, then one NDP, then the datagrams placed at offsets with
 * offset % divisor == remainder.  Returns the NTB; wBlockLength is its
 * length.
 */
static GByteArray *ntb_build(const NtbLayout *l, GPtrArray *frames,
                             uint16_t seq)
{
    GByteArray *ntb = g_byte_array_new();
    unsigned fs = l->ntb32 ? 4 : 2;
    uint32_t nth_len = l->ntb32 ? 16 : 12;
    uint32_t ndp_hdr = l->ntb32 ? 16 : 8;
    uint32_t ndp_min = l->ntb32 ? 32 : 16;
    uint32_t n = frames->len;
    uint32_t ndp = align_up(nth_len, MAX(l->ndp_alignment, 4));
    uint32_t ndp_len = MAX(ndp_hdr + (n + 1) * 2 * fs, ndp_min);
    uint32_t pos = ndp + ndp_len, div = MAX(l->divisor, 1);
    uint8_t *entry;
    unsigned i;

    g_byte_array_set_size(ntb, pos);
    memset(ntb->data, 0, pos);
    for (i = 0; i < n; i++) {
        GByteArray *f = g_ptr_array_index(frames, i);
        uint32_t off = pos + ((l->remainder % div) + div - pos % div) % div;

        g_byte_array_set_size(ntb, off);
        memset(ntb->data + pos, 0, off - pos);
        g_byte_array_append(ntb, f->data, f->len);
        entry = ntb->data + ndp + ndp_hdr + i * 2 * fs;
        put_field(entry, l->ntb32, off);
        put_field(entry + fs, l->ntb32, f->len);
        pos = off + f->len;
    }
    memcpy(ntb->data, l->ntb32 ? "ncmh" : "NCMH", 4);
    stw_le_p(ntb->data + 4, nth_len);
    stw_le_p(ntb->data + 6, seq);
    put_field(ntb->data + 8, l->ntb32, ntb->len);
    put_field(ntb->data + (l->ntb32 ? 12 : 10), l->ntb32, ndp);
    memcpy(ntb->data + ndp, l->ntb32 ? "ncm0" : "NCM0", 4);
    stw_le_p(ntb->data + ndp + 4, ndp_len);
    return ntb;
}

/* Zero-pad @ntb to @len bytes inside the block (NTB16 64 KiB: length 0). */
static void ntb_pad_to(GByteArray *ntb, bool ntb32, uint32_t len)
{
    uint32_t old = ntb->len;

    g_assert_cmpuint(len, >=, old);
    g_byte_array_set_size(ntb, len);
    memset(ntb->data + old, 0, len - old);
    put_field(ntb->data + 8, ntb32, !ntb32 && len > 0xffff ? 0 : len);
}

/* As many @frame_len-byte frames as fit an NTB of exactly @len bytes. */
static GByteArray *ntb_build_filled(NcmEnv *e, uint32_t len,
                                    uint32_t frame_len, uint32_t tag,
                                    GPtrArray *frames)
{
    NtbLayout l = out_layout(e);
    GByteArray *ntb = NULL;

    for (;;) {
        GByteArray *next;

        frames_add(frames, bcast_mac, tag + frames->len, frame_len);
        next = ntb_build(&l, frames, 0);
        if (next->len > len) {
            g_byte_array_unref(next);
            g_ptr_array_remove_index(frames, frames->len - 1);
            break;
        }
        if (ntb) {
            g_byte_array_unref(ntb);
        }
        ntb = next;
    }
    g_assert(ntb && frames->len > 0);
    ntb_pad_to(ntb, l.ntb32, len);
    return ntb;
}

/* Device */

static char *firmware_args(void)
{
    const char *dirs = g_getenv("USB_NCM_QTEST_FIRMWARE");
    g_auto(GStrv) v = g_strsplit(dirs ? dirs :
                                 "/usr/share/seabios:/usr/share/qemu",
                                 ":", -1);
    GString *s = g_string_new("");
    int i;

    for (i = 0; v[i]; i++) {
        if (*v[i] && g_file_test(v[i], G_FILE_TEST_IS_DIR)) {
            g_string_append_printf(s, " -L %s", v[i]);
        }
    }
    return g_string_free(s, false);
}

static int class_in(NcmEnv *e, uint8_t req, uint16_t value, void *buf,
                    uint16_t len, uint32_t *actual)
{
    return qxhci_control(e->dev, 0xa1, req, value, IF_CONTROL, buf, len,
                         actual);
}

static int class_out(NcmEnv *e, uint8_t req, uint16_t value,
                     const void *buf, uint16_t len)
{
    return qxhci_control(e->dev, 0x21, req, value, IF_CONTROL, (void *)buf,
                         len, NULL);
}

static void read_ntb_parameters(NcmEnv *e, NtbParams *p, uint8_t *raw)
{
    uint8_t b[28];
    uint32_t actual = 0;

    g_assert_cmpint(class_in(e, REQ_GET_NTB_PARAMETERS, 0, b, sizeof(b),
                             &actual), ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(actual, ==, 28);
    g_assert_cmpuint(lduw_le_p(b), ==, 28);
    p->formats = lduw_le_p(b + 2);
    p->in_max = ldl_le_p(b + 4);
    p->in_divisor = lduw_le_p(b + 8);
    p->in_remainder = lduw_le_p(b + 10);
    p->in_alignment = lduw_le_p(b + 12);
    p->out_max = ldl_le_p(b + 16);
    p->out_divisor = lduw_le_p(b + 20);
    p->out_remainder = lduw_le_p(b + 22);
    p->out_alignment = lduw_le_p(b + 24);
    p->out_max_datagrams = lduw_le_p(b + 26);
    if (raw) {
        memcpy(raw, b, sizeof(b));
    }
}

/* Enumerate like a host driver: descriptors, endpoints, configuration. */
static void ncm_enumerate(NcmEnv *e)
{
    QXhciEndpoint eps[4];
    uint32_t actual = 0;
    int n;

    e->dev = qxhci_device_enumerate(e->xhci, e->port);
    g_assert(e->dev);
    g_assert_cmpint(e->dev->speed, ==, e->c->super ? QXHCI_SPEED_SUPER :
                    QXHCI_SPEED_HIGH);

    g_assert_cmpint(qxhci_get_descriptor(e->dev, 2, 0, 0, e->config, 9,
                                         &actual), ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(actual, ==, 9);
    e->config_len = lduw_le_p(e->config + 2);
    g_assert_cmpuint(e->config_len, <=, sizeof(e->config));
    g_assert_cmpint(qxhci_get_descriptor(e->dev, 2, 0, 0, e->config,
                                         e->config_len, &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(actual, ==, e->config_len);

    n = qxhci_config_find_endpoints(e->config, e->config_len, IF_CONTROL, 0,
                                    eps, ARRAY_SIZE(eps));
    g_assert_cmpint(n, ==, 1);
    e->ep_notify = eps[0];
    g_assert_cmpint(qxhci_config_find_endpoints(e->config, e->config_len,
                                                IF_DATA, 0, eps,
                                                ARRAY_SIZE(eps)), ==, 0);
    n = qxhci_config_find_endpoints(e->config, e->config_len, IF_DATA, 1,
                                    eps, ARRAY_SIZE(eps));
    g_assert_cmpint(n, ==, 2);
    e->ep_in = (eps[0].address & 0x80) ? eps[0] : eps[1];
    e->ep_out = (eps[0].address & 0x80) ? eps[1] : eps[0];
    g_assert(e->ep_in.address & 0x80);
    g_assert(!(e->ep_out.address & 0x80));
    e->mps = e->ep_out.max_packet & 0x7ff;

    g_assert_cmpint(qxhci_configure_endpoints(e->dev, &e->ep_notify, 1,
                                              NULL, 0),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpint(qxhci_control(e->dev, 0x00, USB_REQ_SET_CONFIGURATION,
                                  1, 0, NULL, 0, NULL),
                    ==, QXHCI_CC_SUCCESS);
    read_ntb_parameters(e, &e->p, NULL);
    e->ntb32 = false;
    e->in_size = e->p.in_max;
    e->rx_seq = 0;
}

static void ncm_set_alt(NcmEnv *e, int alt)
{
    uint8_t drop[2] = { e->ep_in.address, e->ep_out.address };
    QXhciEndpoint add[2] = { e->ep_in, e->ep_out };

    if (alt) {
        g_assert_cmpint(qxhci_configure_endpoints(e->dev, add, 2, NULL, 0),
                        ==, QXHCI_CC_SUCCESS);
    }
    g_assert_cmpint(qxhci_control(e->dev, 0x01, USB_REQ_SET_INTERFACE, alt,
                                  IF_DATA, NULL, 0, NULL),
                    ==, QXHCI_CC_SUCCESS);
    if (!alt) {
        g_assert_cmpint(qxhci_configure_endpoints(e->dev, NULL, 0, drop, 2),
                        ==, QXHCI_CC_SUCCESS);
        /* NCM 1.0 7.2: back to the defaults */
        e->ntb32 = false;
        e->in_size = e->p.in_max;
    }
    e->rx_seq = 0;
}

static NcmEnv *ncm_start(const NcmCase *c)
{
    NcmEnv *e = g_new0(NcmEnv, 1);
    g_autofree char *fw = firmware_args();
    QXhciOptions opts = {
        /* small rings, so that every case wraps them */
        .cmd_ring_trbs = 8,
        .event_ring_trbs = 32,
        .xfer_ring_trbs = 16,
        .max_slots = 8,
    };
    int sv[2];

    e->c = c;
    g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), ==, 0);
    e->qs = qtest_pc_boot("-nodefaults%s -netdev socket,id=n0,fd=%d "
                          "-device qemu-xhci,id=xhci,addr=04.0%s "
                          "-device %s,id=ncm0,bus=xhci.0,netdev=n0,"
                          "mac=" NCM_MAC_STR "%s%s",
                          fw, sv[1], c->super ? "" : ",p3=0", c->model,
                          c->props ? "," : "", c->props ? c->props : "");
    close(sv[1]);
    e->sock = sv[0];
    e->qts = e->qs->qts;
    e->pdev = qpci_device_find(e->qs->pcibus, XHCI_DEVFN);
    g_assert(e->pdev);
    e->xhci = qxhci_new(e->qts, e->pdev, &e->qs->alloc, &opts);
    e->port = qxhci_find_connected_port(e->xhci);
    g_assert_cmpint(e->port, >, 0);
    ncm_enumerate(e);
    return e;
}

static void ncm_stop(NcmEnv *e)
{
    qxhci_free(e->xhci);
    g_free(e->pdev);
    close(e->sock);
    qtest_shutdown(e->qs);
    g_free(e);
}

static void assert_alive(NcmEnv *e)
{
    QDict *rsp = qtest_qmp(e->qts, "{'execute': 'query-status'}");

    g_assert(qdict_haskey(rsp, "return"));
    qobject_unref(rsp);
}

/* Data path helpers */

static void out_td(NcmEnv *e, const uint8_t *data, uint32_t len)
{
    uint32_t actual = 0;
    int cc;

    cc = qxhci_transfer_sync(e->dev, e->ep_out.address, (void *)data, len,
                             &actual, RX_TIMEOUT_NS);
    g_assert_cmpint(cc, ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(actual, ==, len);
}

/* One OUT transfer, ended by a ZLP when it is an exact multiple. */
static void ncm_send(NcmEnv *e, const uint8_t *data, uint32_t len)
{
    out_td(e, data, len);
    if (len && len % e->mps == 0) {
        out_td(e, NULL, 0);
    }
}

static void ncm_send_frames(NcmEnv *e, GPtrArray *frames)
{
    NtbLayout l = out_layout(e);
    g_autoptr(GByteArray) ntb = ntb_build(&l, frames, 0);

    ncm_send(e, ntb->data, ntb->len);
}

/* A valid NTB after whatever came before must come out alone and whole */
static void ncm_check_marker(NcmEnv *e, uint32_t tag)
{
    g_autoptr(GPtrArray) marker = frames_new();

    frames_add(marker, bcast_mac, tag, 60);
    frames_add(marker, peer_mac, tag + 1, 1000);
    frames_add(marker, other_mac, tag + 2, 1514);
    ncm_send_frames(e, marker);
    sock_expect_frames(e, marker);
    sock_expect_silence(e, 20);
}

static uint32_t get_field(const uint8_t *p, bool ntb32)
{
    return ntb32 ? ldl_le_p(p) : lduw_le_p(p);
}

/* Check one IN NTB strictly and append its datagrams to @out. */
static void ntb_parse_in(NcmEnv *e, const uint8_t *b, uint32_t len,
                         uint32_t max_len, GPtrArray *out)
{
    bool n32 = e->ntb32;
    unsigned fs = n32 ? 4 : 2;
    uint32_t nth_len = n32 ? 16 : 12, ndp_hdr = n32 ? 16 : 8;
    uint32_t ndp_min = n32 ? 32 : 16;
    uint32_t block, ndp, ndp_len, entry;
    unsigned count = 0;
    bool terminated = false;

    g_assert_cmpuint(len, <=, max_len);
    g_assert_cmpuint(len, >=, nth_len + ndp_min);
    g_assert_cmpmem(b, 4, n32 ? "ncmh" : "NCMH", 4);
    g_assert_cmpuint(lduw_le_p(b + 4), ==, nth_len);
    g_assert_cmpuint(lduw_le_p(b + 6), ==, e->rx_seq);
    e->rx_seq++;
    block = get_field(b + 8, n32);
    if (!n32 && block == 0) {
        block = len;            /* a 64 KiB NTB16 */
    }
    g_assert_cmpuint(block, ==, len);
    ndp = get_field(b + (n32 ? 12 : 10), n32);
    g_assert_cmpuint(ndp % e->p.in_alignment, ==, 0);
    g_assert_cmpuint(ndp, >=, nth_len);
    g_assert_cmpuint(ndp + ndp_hdr, <=, block);
    g_assert_cmpmem(b + ndp, 4, n32 ? "ncm0" : "NCM0", 4);
    ndp_len = lduw_le_p(b + ndp + 4);
    g_assert_cmpuint(ndp_len, >=, ndp_min);
    g_assert_cmpuint((ndp_len - ndp_hdr) % (2 * fs), ==, 0);
    g_assert_cmpuint(ndp + ndp_len, <=, block);
    g_assert_cmpuint(get_field(b + ndp + (n32 ? 8 : 6), n32), ==, 0);

    for (entry = ndp + ndp_hdr; entry < ndp + ndp_len; entry += 2 * fs) {
        uint32_t off = get_field(b + entry, n32);
        uint32_t dlen = get_field(b + entry + fs, n32);
        GByteArray *f;

        if (!off || !dlen) {
            terminated = true;
            break;
        }
        g_assert_cmpuint(off % e->p.in_divisor, ==, e->p.in_remainder);
        g_assert_cmpuint(off, >=, nth_len);
        g_assert_cmpuint(dlen, >=, 14);
        g_assert_cmpuint(dlen, <=, block - off);
        g_assert(off + dlen <= ndp || off >= ndp + ndp_len);
        f = g_byte_array_sized_new(dlen);
        g_byte_array_append(f, b + off, dlen);
        g_ptr_array_add(out, f);
        count++;
    }
    g_assert(terminated);
    g_assert_cmpuint(count, >, 0);
    e->rx_ntbs++;
    e->rx_bytes += len;
}

/*
 * Poll bulk IN with @td_len-byte TDs until @n datagrams came; every NTB
 * must fit @max_ntb bytes.
 */
static GPtrArray *ncm_receive(NcmEnv *e, unsigned n, uint32_t td_len,
                              uint32_t max_ntb)
{
    GPtrArray *got = frames_new();
    g_autofree uint8_t *buf = g_malloc(td_len);

    while (got->len < n) {
        QXhciTransfer *t = qxhci_submit(e->dev, e->ep_in.address, NULL,
                                        td_len);

        if (!qxhci_wait(t, RX_TIMEOUT_NS)) {
            g_test_message("bulk IN: only %u of %u frames arrived",
                           got->len, n);
            qxhci_transfer_free(t);
            g_assert_not_reached();
        }
        g_assert(t->cc == QXHCI_CC_SUCCESS ||
                 t->cc == QXHCI_CC_SHORT_PACKET);
        qxhci_transfer_read(t, buf);
        ntb_parse_in(e, buf, t->actual, max_ntb, got);
        qxhci_transfer_free(t);
    }
    return got;
}

static void ncm_expect_rx(NcmEnv *e, GPtrArray *want)
{
    g_autoptr(GPtrArray) got = ncm_receive(e, want->len, e->p.in_max,
                                           e->in_size);

    frames_assert_equal(got, want);
}

/* Bulk IN must stay NAK'd: nothing queued for the host. */
static void ncm_expect_no_rx(NcmEnv *e)
{
    uint8_t buf[64];

    g_assert_cmpint(qxhci_transfer_sync(e->dev, e->ep_in.address, buf,
                                        sizeof(buf), NULL,
                                        50 * 1000 * 1000),
                    ==, QXHCI_CC_TIMEOUT);
}

/* One notification, or 0 bytes when none came within @timeout_ns. */
static uint32_t notify_read(NcmEnv *e, uint8_t *buf, int64_t timeout_ns)
{
    uint32_t actual = 0;
    int cc;

    cc = qxhci_transfer_sync(e->dev, e->ep_notify.address, buf, 16,
                             &actual, timeout_ns);
    if (cc == QXHCI_CC_TIMEOUT) {
        return 0;
    }
    g_assert(cc == QXHCI_CC_SUCCESS || cc == QXHCI_CC_SHORT_PACKET);
    return actual;
}

static void expect_speed_change(const uint8_t *b, uint32_t len)
{
    static const uint8_t want[16] = {
        0xa1, 0x2a, 0x00, 0x00, IF_CONTROL, 0x00, 0x08, 0x00,
        0x00, 0xca, 0x9a, 0x3b, 0x00, 0xca, 0x9a, 0x3b,   /* 1 Gbit/s */
    };

    g_assert_cmpmem(b, len, want, sizeof(want));
}

static void expect_connection(const uint8_t *b, uint32_t len, bool up)
{
    const uint8_t want[8] = {
        0xa1, 0x00, up, 0x00, IF_CONTROL, 0x00, 0x00, 0x00,
    };

    g_assert_cmpmem(b, len, want, sizeof(want));
}

static void set_link(NcmEnv *e, bool up)
{
    qtest_qmp_assert_success(e->qts, "{'execute': 'set_link', 'arguments':"
                             " {'name': 'ncm0', 'up': %i}}", up);
}

/* Counters and fault injection, through QOM */

#define NCM_QOM_PATH            "/machine/peripheral/ncm0"
#define MS                      (1000 * 1000LL)

static QDict *qom_get(NcmEnv *e, const char *prop)
{
    QDict *rsp = qtest_qmp(e->qts, "{'execute': 'qom-get', 'arguments': "
                           "{'path': %s, 'property': %s}}",
                           NCM_QOM_PATH, prop);

    if (!qdict_haskey(rsp, "return")) {
        g_test_message("qom-get %s failed", prop);
    }
    g_assert(qdict_haskey(rsp, "return"));
    return rsp;
}

static int64_t qom_get_int(NcmEnv *e, const char *prop)
{
    QDict *rsp = qom_get(e, prop);
    int64_t v = qdict_get_int(rsp, "return");

    qobject_unref(rsp);
    return v;
}

static char *qom_get_str(NcmEnv *e, const char *prop)
{
    QDict *rsp = qom_get(e, prop);
    char *v = g_strdup(qdict_get_str(rsp, "return"));

    qobject_unref(rsp);
    return v;
}

/* Every counter of the "x-stats" property */
static QDict *ncm_stats(NcmEnv *e)
{
    QDict *rsp = qom_get(e, "x-stats");
    QDict *stats = qdict_get_qdict(rsp, "return");

    g_assert(stats);
    qobject_ref(stats);
    qobject_unref(rsp);
    return stats;
}

/* How much counter @name grew from @before to @after */
static uint64_t stat_delta(QDict *before, QDict *after, const char *name)
{
    if (!qdict_haskey(after, name)) {
        g_test_message("stats has no counter %s", name);
    }
    g_assert(qdict_haskey(before, name) && qdict_haskey(after, name));
    return qdict_get_int(after, name) - qdict_get_int(before, name);
}

static void assert_stat_delta(QDict *before, QDict *after, const char *name,
                              uint64_t want)
{
    uint64_t got = stat_delta(before, after, name);

    if (got != want) {
        g_test_message("stats %s grew by %" PRIu64 ", expected %" PRIu64,
                       name, got, want);
    }
    g_assert_cmpuint(got, ==, want);
}

/*
 * out_parse_errors: class @name and "total" grew by @n, every other class
 * stayed put.  @name NULL: nothing grew.
 */
static void assert_parse_errors(QDict *before, QDict *after,
                                const char *name, uint64_t n)
{
    QDict *b = qdict_get_qdict(before, "out_parse_errors");
    QDict *a = qdict_get_qdict(after, "out_parse_errors");
    const QDictEntry *ent;

    g_assert(a && b);
    g_assert(qdict_haskey(a, "total"));
    if (name && !qdict_haskey(a, name)) {
        g_test_message("out_parse_errors has no class %s", name);
    }
    g_assert(!name || qdict_haskey(a, name));
    for (ent = qdict_first(a); ent; ent = qdict_next(a, ent)) {
        const char *key = qdict_entry_key(ent);
        bool grows = name && (!strcmp(key, name) || !strcmp(key, "total"));
        uint64_t got;

        g_assert(qdict_haskey(b, key));
        got = qdict_get_int(a, key) - qdict_get_int(b, key);
        if (got != (grows ? n : 0)) {
            g_test_message("out_parse_errors.%s grew by %" PRIu64
                           ", expected %" PRIu64, key, got, grows ? n : 0);
        }
        g_assert_cmpuint(got, ==, grows ? n : 0);
    }
}

static void fault_set(NcmEnv *e, const char *prop, uint32_t value)
{
    qtest_qmp_assert_success(e->qts, "{'execute': 'qom-set', 'arguments': "
                             "{'path': %s, 'property': %s, 'value': %u}}",
                             NCM_QOM_PATH, prop, value);
}

static void fault_corrupt(NcmEnv *e, const char *how)
{
    qtest_qmp_assert_success(e->qts, "{'execute': 'qom-set', 'arguments': "
                             "{'path': %s, 'property': 'x-fault-corrupt-in', "
                             "'value': %s}}", NCM_QOM_PATH, how);
}

/* Virtual time in ns (clock_step refuses a step of 0, so step by 1 ns) */
static int64_t clock_ns(NcmEnv *e)
{
    return qtest_clock_step(e->qts, 1);
}

/* Cases: descriptors and class requests */

static const uint8_t *find_cs_desc(NcmEnv *e, uint8_t subtype)
{
    uint32_t pos = 0;

    while (pos + 3 <= e->config_len && e->config[pos] >= 2) {
        if (e->config[pos + 1] == 0x24 && e->config[pos + 2] == subtype) {
            return e->config + pos;
        }
        pos += e->config[pos];
    }
    return NULL;
}

static char *get_string(NcmEnv *e, uint8_t index)
{
    uint8_t b[255];
    uint32_t actual = 0;
    GString *s = g_string_new("");
    uint32_t i;

    g_assert_cmpint(qxhci_get_descriptor(e->dev, 3, index, 0x0409, b,
                                         sizeof(b), &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(actual, >=, 2);
    g_assert_cmpuint(b[0], ==, actual);
    g_assert_cmpuint(b[1], ==, 3);
    for (i = 2; i + 1 < actual; i += 2) {
        g_assert_cmpuint(b[i + 1], ==, 0);
        g_string_append_c(s, b[i]);
    }
    return g_string_free(s, false);
}

static void test_descriptors(NcmEnv *e, const NcmCase *c)
{
    bool dl = !strcmp(c->model, "usb-ncm-dl");
    bool ss = c->super;
    uint16_t vid = dl ? 0x17e9 : 0x46f4, pid = dl ? 0x6000 : 0x0010;
    const uint8_t device[18] = {
        0x12, 0x01, ss ? 0x20 : 0x00, ss ? 0x03 : 0x02,
        0xef, 0x02, 0x01, ss ? 9 : 64,
        vid & 0xff, vid >> 8, pid & 0xff, pid >> 8,
        0x00, 0x01, 1, 2, 3, 1,
    };
    const uint8_t ep_notify[] = { 7, 5, 0x85, 3, 16, 0, 9 };
    const uint8_t ss_notify[] = { 6, 0x30, 0, 0, 16, 0 };
    const uint8_t ep_in[] = { 7, 5, 0x87, 2, 0, ss ? 4 : 2, 0 };
    const uint8_t ep_out[] = { 7, 5, 0x06, 2, 0, ss ? 4 : 2, 0 };
    const uint8_t ss_bulk[] = { 6, 0x30, 15, 0, 0, 0 };
    const uint8_t head[] = {
        9, 2, 0, 0, 2, 1, 0, 0xe0, 0,       /* config: remote wakeup */
        8, 0x0b, 0, 2, 0x02, 0x0d, 0x00, 5,         /* IAD */
        9, 4, 0, 0, 1, 0x02, 0x0d, 0x00, 5,         /* control iface */
        5, 0x24, 0x00, 0x20, 0x01,                  /* header, CDC 1.20 */
        5, 0x24, 0x06, 0, 1,                        /* union */
        13, 0x24, 0x0f, 4, 0, 0, 0, 0, 0xea, 0x05, 0, 0, 0, /* ethernet */
        6, 0x24, 0x1a, 0x00, 0x01, 0x0b,            /* NCM 1.00, caps */
    };
    const uint8_t data0[] = { 9, 4, 1, 0, 0, 0x0a, 0x00, 0x01, 6 };
    const uint8_t data1[] = { 9, 4, 1, 1, 2, 0x0a, 0x00, 0x01, 6 };
    const uint8_t bos[] = {
        5, 0x0f, 22, 0, 2,
        7, 0x10, 0x02, 0x02, 0, 0, 0,               /* USB 2.0 ext, LPM */
        10, 0x10, 0x03, 0, 0x0e, 0, 1, 0x0a, 0x20, 0, /* SuperSpeed */
    };
    const uint8_t qualifier[10] = {
        10, 6, 0x00, 0x02, 0xef, 0x02, 0x01, 64, 1, 0,
    };
    g_autoptr(GByteArray) want = g_byte_array_new();
    g_autofree char *mac = NULL;
    g_autofree char *manufacturer = NULL;
    g_autofree char *product = NULL;
    uint8_t b[256];
    uint32_t actual = 0;
    const uint8_t *eth;

    g_assert_cmpint(qxhci_get_descriptor(e->dev, 1, 0, 0, b, sizeof(b),
                                         &actual), ==, QXHCI_CC_SUCCESS);
    g_assert_cmpmem(b, actual, device, sizeof(device));

    g_byte_array_append(want, head, sizeof(head));
    g_byte_array_append(want, ep_notify, sizeof(ep_notify));
    if (ss) {
        g_byte_array_append(want, ss_notify, sizeof(ss_notify));
    }
    g_byte_array_append(want, data0, sizeof(data0));
    g_byte_array_append(want, data1, sizeof(data1));
    g_byte_array_append(want, ep_in, sizeof(ep_in));
    if (ss) {
        g_byte_array_append(want, ss_bulk, sizeof(ss_bulk));
    }
    g_byte_array_append(want, ep_out, sizeof(ep_out));
    if (ss) {
        g_byte_array_append(want, ss_bulk, sizeof(ss_bulk));
    }
    stw_le_p(want->data + 2, want->len);
    g_assert_cmpmem(e->config, e->config_len, want->data, want->len);

    /* a short read gets the first bytes only */
    g_assert_cmpint(qxhci_get_descriptor(e->dev, 2, 0, 0, b, 9, &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpmem(b, actual, want->data, 9);

    if (ss) {
        g_assert_cmpint(qxhci_get_descriptor(e->dev, 0x0f, 0, 0, b,
                                             sizeof(b), &actual),
                        ==, QXHCI_CC_SUCCESS);
        g_assert_cmpmem(b, actual, bos, sizeof(bos));
    } else {
        g_assert_cmpint(qxhci_get_descriptor(e->dev, 6, 0, 0, b,
                                             sizeof(b), &actual),
                        ==, QXHCI_CC_SUCCESS);
        g_assert_cmpmem(b, actual, qualifier, sizeof(qualifier));
    }

    g_assert_cmpint(qxhci_get_descriptor(e->dev, 3, 0, 0, b, sizeof(b),
                                         &actual), ==, QXHCI_CC_SUCCESS);
    g_assert_cmpmem(b, actual, ((const uint8_t[]) { 4, 3, 0x09, 0x04 }), 4);

    /* iMACAddress names the string that carries the MAC */
    eth = find_cs_desc(e, 0x0f);
    g_assert(eth);
    mac = get_string(e, eth[3]);
    g_assert_cmpstr(mac, ==, NCM_MAC_HEX);
    manufacturer = get_string(e, 1);
    product = get_string(e, 2);
    g_assert_cmpstr(manufacturer, ==, dl ? "DisplayLink" : "QEMU");
    g_assert_cmpstr(product, ==, dl ? "USB-NCM-DL Giga Ethernet" :
                    "QEMU USB NCM Ethernet");

    g_assert_cmpint(qxhci_control(e->dev, 0x80, USB_REQ_GET_CONFIGURATION,
                                  0, 0, b, 1, &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(actual, ==, 1);
    g_assert_cmpuint(b[0], ==, 1);
    g_assert_cmpint(qxhci_control(e->dev, 0x81, USB_REQ_GET_INTERFACE,
                                  0, IF_DATA, b, 1, &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(b[0], ==, 0);
    ncm_set_alt(e, 1);
    g_assert_cmpint(qxhci_control(e->dev, 0x81, USB_REQ_GET_INTERFACE,
                                  0, IF_DATA, b, 1, &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(b[0], ==, 1);
}

static void test_ntb_parameters_default(NcmEnv *e, const NcmCase *c)
{
    static const uint8_t want[28] = {
        28, 0, 0x03, 0,                 /* NTB16 and NTB32 */
        0x00, 0x00, 0x01, 0x00,         /* dwNtbInMaxSize 65536 */
        4, 0, 0, 0, 4, 0,               /* in divisor, remainder, align */
        0, 0,
        0x00, 0x00, 0x01, 0x00,         /* dwNtbOutMaxSize 65536 */
        4, 0, 0, 0, 4, 0,               /* out divisor, remainder, align */
        64, 0,                          /* wNtbOutMaxDatagrams */
    };
    uint8_t b[28];
    uint32_t actual = 0;

    read_ntb_parameters(e, &e->p, b);
    g_assert_cmpmem(b, sizeof(b), want, sizeof(want));

    /* wLength shorter than the structure: the start of it */
    g_assert_cmpint(class_in(e, REQ_GET_NTB_PARAMETERS, 0, b, 8, &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpmem(b, actual, want, 8);

    /* the same in alt 1 */
    ncm_set_alt(e, 1);
    read_ntb_parameters(e, &e->p, b);
    g_assert_cmpmem(b, sizeof(b), want, sizeof(want));
}

#define CUSTOM_PROPS "ntb-in-max-size=16384,ntb-out-max-size=32768," \
    "ntb-in-divisor=8,ntb-in-remainder=2,ntb-in-alignment=8," \
    "ntb-out-divisor=16,ntb-out-remainder=6,ntb-out-alignment=16," \
    "ntb-out-max-datagrams=40,ntb32=off,max-segment-size=9014"

static void test_ntb_parameters_custom(NcmEnv *e, const NcmCase *c)
{
    static const uint8_t want[28] = {
        28, 0, 0x01, 0,                 /* NTB16 only */
        0x00, 0x40, 0x00, 0x00,         /* dwNtbInMaxSize 16384 */
        8, 0, 2, 0, 8, 0,
        0, 0,
        0x00, 0x80, 0x00, 0x00,         /* dwNtbOutMaxSize 32768 */
        16, 0, 6, 0, 16, 0,
        40, 0,
    };
    g_autoptr(GPtrArray) tx = frames_new();
    g_autoptr(GPtrArray) rx = frames_new();
    const uint8_t *eth;
    uint8_t b[28];
    uint32_t actual = 0, i;

    read_ntb_parameters(e, &e->p, b);
    g_assert_cmpmem(b, sizeof(b), want, sizeof(want));
    eth = find_cs_desc(e, 0x0f);
    g_assert(eth);
    g_assert_cmpuint(lduw_le_p(eth + 8), ==, 9014);

    g_assert_cmpint(class_in(e, REQ_GET_NTB_INPUT_SIZE, 0, b, 4, &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(ldl_le_p(b), ==, 16384);
    g_assert_cmpint(class_in(e, REQ_GET_MAX_DATAGRAM_SIZE, 0, b, 2,
                             &actual), ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(lduw_le_p(b), ==, 9014);
    /* NTB32 is not advertised, so it cannot be selected */
    g_assert_cmpint(class_out(e, REQ_SET_NTB_FORMAT, 1, NULL, 0),
                    ==, QXHCI_CC_STALL);

    /* both directions honour the layout and the jumbo segment size */
    ncm_set_alt(e, 1);
    for (i = 0; i < 7; i++) {
        frames_add(tx, bcast_mac, 100 + i, i == 3 ? 9014 : 61 + i * 97);
        frames_add(rx, i & 1 ? ncm_mac : bcast_mac, 200 + i,
                   i == 5 ? 9014 : 63 + i * 131);
    }
    ncm_send_frames(e, tx);
    sock_expect_frames(e, tx);
    sock_send_frames(e, rx);
    ncm_expect_rx(e, rx);
}

static void test_ntb_input_size(NcmEnv *e, const NcmCase *c)
{
    uint8_t b[8];
    uint32_t actual = 0;

    g_assert_cmpint(class_in(e, REQ_GET_NTB_INPUT_SIZE, 0, b, 4, &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(actual, ==, 4);
    g_assert_cmpuint(ldl_le_p(b), ==, e->p.in_max);

    stl_le_p(b, 4096);
    g_assert_cmpint(class_out(e, REQ_SET_NTB_INPUT_SIZE, 0, b, 4),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpint(class_in(e, REQ_GET_NTB_INPUT_SIZE, 0, b, 4, &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(ldl_le_p(b), ==, 4096);

    /* below the NCM minimum, above dwNtbInMaxSize, bad lengths */
    stl_le_p(b, 2047);
    g_assert_cmpint(class_out(e, REQ_SET_NTB_INPUT_SIZE, 0, b, 4),
                    ==, QXHCI_CC_STALL);
    stl_le_p(b, e->p.in_max + 1);
    g_assert_cmpint(class_out(e, REQ_SET_NTB_INPUT_SIZE, 0, b, 4),
                    ==, QXHCI_CC_STALL);
    stl_le_p(b, 8192);
    stl_le_p(b + 4, 8);
    /* the 8-byte form is not advertised (bmNetworkCapabilities bit 5) */
    g_assert_cmpint(class_out(e, REQ_SET_NTB_INPUT_SIZE, 0, b, 8),
                    ==, QXHCI_CC_STALL);
    g_assert_cmpint(class_out(e, REQ_SET_NTB_INPUT_SIZE, 0, b, 2),
                    ==, QXHCI_CC_STALL);
    g_assert_cmpint(class_in(e, REQ_GET_NTB_INPUT_SIZE, 0, b, 4, &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(ldl_le_p(b), ==, 4096);

    /* the minimum itself, and again in alt 1 */
    ncm_set_alt(e, 1);
    stl_le_p(b, 2048);
    g_assert_cmpint(class_out(e, REQ_SET_NTB_INPUT_SIZE, 0, b, 4),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpint(class_in(e, REQ_GET_NTB_INPUT_SIZE, 0, b, 8, &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(actual, ==, 4);
    g_assert_cmpuint(ldl_le_p(b), ==, 2048);
}

static void test_ntb_format(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) tx = frames_new();
    g_autoptr(GPtrArray) rx = frames_new();
    uint8_t b[2];
    uint32_t actual = 0, i;

    g_assert_cmpint(class_in(e, REQ_GET_NTB_FORMAT, 0, b, 2, &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(actual, ==, 2);
    g_assert_cmpuint(lduw_le_p(b), ==, 0);
    g_assert_cmpint(class_out(e, REQ_SET_NTB_FORMAT, 2, NULL, 0),
                    ==, QXHCI_CC_STALL);
    g_assert_cmpint(class_out(e, REQ_SET_NTB_FORMAT, 1, NULL, 0),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpint(class_in(e, REQ_GET_NTB_FORMAT, 0, b, 2, &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(lduw_le_p(b), ==, 1);

    ncm_set_alt(e, 1);
    e->ntb32 = true;
    /* the format cannot change while the data interface is up */
    g_assert_cmpint(class_out(e, REQ_SET_NTB_FORMAT, 0, NULL, 0),
                    ==, QXHCI_CC_STALL);
    g_assert_cmpint(class_in(e, REQ_GET_NTB_FORMAT, 0, b, 2, &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(lduw_le_p(b), ==, 1);

    for (i = 0; i < 5; i++) {
        frames_add(tx, bcast_mac, 300 + i, 60 + i * 300);
        frames_add(rx, ncm_mac, 400 + i, 1514 - i * 300);
    }
    ncm_send_frames(e, tx);
    sock_expect_frames(e, tx);
    sock_send_frames(e, rx);
    ncm_expect_rx(e, rx);

    /* an NTB16 is now malformed */
    e->ntb32 = false;
    ncm_send_frames(e, tx);
    sock_expect_silence(e, 20);
    e->ntb32 = true;
    ncm_check_marker(e, 500);
}

static void test_unsupported_request(NcmEnv *e, const NcmCase *c)
{
    static const struct {
        uint8_t type, request;
        uint16_t value, index, length;
    } reqs[] = {
        { 0xa1, REQ_GET_ETHERNET_STATISTIC, 1, IF_CONTROL, 4 },
        { 0x21, REQ_SET_CRC_MODE, 0, IF_CONTROL, 0 },
        { 0x21, REQ_SET_ETHERNET_MULTICAST_FILTERS, 1, IF_CONTROL, 6 },
        { 0x21, REQ_SET_ETHERNET_PACKET_FILTER, 0x20, IF_CONTROL, 0 },
        { 0xa1, REQ_GET_NTB_PARAMETERS, 1, IF_CONTROL, 28 },
        { 0xa1, REQ_GET_NTB_PARAMETERS, 0, IF_DATA, 28 },
        { 0xa1, 0x7f, 0, IF_CONTROL, 8 },
        { 0xc0, 0x01, 0, 0, 8 },
        { 0x40, 0x02, 0, 0, 0 },
    };
    uint8_t b[64] = { 0 };
    unsigned i;

    for (i = 0; i < ARRAY_SIZE(reqs); i++) {
        NtbParams p;
        int cc;

        cc = qxhci_control(e->dev, reqs[i].type, reqs[i].request,
                           reqs[i].value, reqs[i].index, b, reqs[i].length,
                           NULL);
        if (cc != QXHCI_CC_STALL) {
            g_test_message("request %02x/%02x value %u index %u: cc %d",
                           reqs[i].type, reqs[i].request, reqs[i].value,
                           reqs[i].index, cc);
        }
        g_assert_cmpint(cc, ==, QXHCI_CC_STALL);
        /* the default endpoint works again */
        read_ntb_parameters(e, &p, NULL);
        g_assert_cmpuint(p.in_max, ==, e->p.in_max);
        if (i == 3) {
            ncm_set_alt(e, 1);
        }
    }
    ncm_check_marker(e, 600);
    {
        g_autoptr(GPtrArray) rx = frames_new();

        frames_add(rx, ncm_mac, 610, 100);
        sock_send_frames(e, rx);
        ncm_expect_rx(e, rx);
    }
}

/* Cases: data interface and notifications */

static void test_alt_reset(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) stale_rx = frames_new();
    g_autoptr(GPtrArray) stale_tx = frames_new();
    g_autoptr(GPtrArray) rx = frames_new();
    g_autoptr(GPtrArray) first = frames_new();
    g_autoptr(GByteArray) ntb = NULL;
    NtbLayout l;
    uint8_t b[4];
    uint32_t actual = 0, i;

    /* negotiate in alt 0, then use it in alt 1 */
    g_assert_cmpint(class_out(e, REQ_SET_NTB_FORMAT, 1, NULL, 0),
                    ==, QXHCI_CC_SUCCESS);
    stl_le_p(b, 4096);
    g_assert_cmpint(class_out(e, REQ_SET_NTB_INPUT_SIZE, 0, b, 4),
                    ==, QXHCI_CC_SUCCESS);
    ncm_set_alt(e, 1);
    e->ntb32 = true;
    e->in_size = 4096;
    frames_add(first, ncm_mac, 700, 200);
    sock_send_frames(e, first);
    ncm_expect_rx(e, first);

    /* leave state behind in both directions */
    for (i = 0; i < 3; i++) {
        frames_add(stale_rx, bcast_mac, 710 + i, 300);
    }
    sock_send_frames(e, stale_rx);
    sock_settle(e);
    for (i = 0; i < 8; i++) {
        frames_add(stale_tx, bcast_mac, 720 + i, 1000);
    }
    l = out_layout(e);
    ntb = ntb_build(&l, stale_tx, 0);
    g_assert_cmpuint(ntb->len, >, 2 * e->mps);
    out_td(e, ntb->data, 2 * e->mps);       /* no terminator yet */
    sock_expect_silence(e, 20);

    /* alt 0 resets everything negotiated and drops what was queued */
    ncm_set_alt(e, 0);
    g_assert_cmpint(class_in(e, REQ_GET_NTB_FORMAT, 0, b, 2, &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(lduw_le_p(b), ==, 0);
    g_assert_cmpint(class_in(e, REQ_GET_NTB_INPUT_SIZE, 0, b, 4, &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(ldl_le_p(b), ==, e->p.in_max);
    ncm_set_alt(e, 1);

    /* the old NTB's head is gone: a new NTB stands alone */
    ncm_check_marker(e, 730);
    /* the queued frames are gone and the sequence starts over */
    frames_add(rx, ncm_mac, 740, 100);
    frames_add(rx, bcast_mac, 741, 1514);
    sock_send_frames(e, rx);
    ncm_expect_rx(e, rx);
    g_assert_cmpuint(e->rx_seq, ==, 1);
    ncm_expect_no_rx(e);
}

static void test_notify_alt(NcmEnv *e, const NcmCase *c)
{
    uint8_t b[16];
    uint32_t n;
    int round;

    /* nothing while the data interface is off */
    g_assert_cmpuint(notify_read(e, b, 100 * 1000 * 1000), ==, 0);
    for (round = 0; round < 2; round++) {
        ncm_set_alt(e, 1);
        n = notify_read(e, b, RX_TIMEOUT_NS);
        expect_speed_change(b, n);
        n = notify_read(e, b, RX_TIMEOUT_NS);
        expect_connection(b, n, true);
        g_assert_cmpuint(notify_read(e, b, 200 * 1000 * 1000), ==, 0);
        ncm_set_alt(e, 0);
        g_assert_cmpuint(notify_read(e, b, 100 * 1000 * 1000), ==, 0);
    }
}

static void test_notify_link(NcmEnv *e, const NcmCase *c)
{
    QXhciTransfer *t;
    uint8_t b[16];
    uint32_t n;

    ncm_set_alt(e, 1);
    expect_speed_change(b, notify_read(e, b, RX_TIMEOUT_NS));
    expect_connection(b, notify_read(e, b, RX_TIMEOUT_NS), true);

    /* a notification TD waits, NAK'd, until the link goes down */
    t = qxhci_submit(e->dev, e->ep_notify.address, NULL, 16);
    g_assert(!qxhci_wait(t, 100 * 1000 * 1000));
    set_link(e, false);
    g_assert(qxhci_wait(t, RX_TIMEOUT_NS));
    qxhci_transfer_read(t, b);
    expect_connection(b, t->actual, false);
    qxhci_transfer_free(t);
    g_assert_cmpuint(notify_read(e, b, 100 * 1000 * 1000), ==, 0);

    set_link(e, true);
    n = notify_read(e, b, RX_TIMEOUT_NS);
    expect_speed_change(b, n);
    n = notify_read(e, b, RX_TIMEOUT_NS);
    expect_connection(b, n, true);
    g_assert_cmpuint(notify_read(e, b, 100 * 1000 * 1000), ==, 0);

    /* and the data path still works */
    ncm_check_marker(e, 800);
}

/* Cases: host to device */

static void test_tx_datagrams(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) tx = frames_new();
    unsigned n = c->arg ? c->arg : e->p.out_max_datagrams;
    unsigned i;

    ncm_set_alt(e, 1);
    for (i = 0; i < n; i++) {
        size_t len = n == 40 ? 1514 - (i % 3) : 60 + (i * 131) % 900;

        frames_add(tx, i % 3 ? bcast_mac : other_mac, 1000 + i, len);
    }
    ncm_send_frames(e, tx);
    sock_expect_frames(e, tx);
    sock_expect_silence(e, 20);
    ncm_check_marker(e, 1100);
}

static void test_tx_64k(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) tx = frames_new();
    g_autoptr(GByteArray) ntb = NULL;

    ncm_set_alt(e, 1);
    ntb = ntb_build_filled(e, 65536, 1514, 1200, tx);
    g_assert_cmpuint(lduw_le_p(ntb->data + 8), ==, 0);
    g_assert_cmpuint(ntb->len % e->mps, ==, 0);
    out_td(e, ntb->data, ntb->len);
    if (!strcmp(c->model, "usb-ncm-dl")) {
        /* ZLP-required firmware: nothing until the transfer ends */
        sock_expect_silence(e, 50);
        out_td(e, NULL, 0);
        sock_expect_frames(e, tx);
    } else {
        /* NCM 1.0: dwNtbOutMaxSize bytes end the transfer by themselves */
        sock_expect_frames(e, tx);
        out_td(e, NULL, 0);
    }
    sock_expect_silence(e, 20);
    ncm_check_marker(e, 1300);
}

static void test_tx_split(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) tx = frames_new();
    g_autoptr(GByteArray) ntb = NULL;
    uint32_t len = 4 * e->mps + 300;

    ncm_set_alt(e, 1);
    ntb = ntb_build_filled(e, len, 700, 1400, tx);
    g_assert_cmpuint(tx->len, >=, 2);
    out_td(e, ntb->data, 2 * e->mps);
    out_td(e, ntb->data + 2 * e->mps, 2 * e->mps);
    sock_expect_silence(e, 20);
    out_td(e, ntb->data + 4 * e->mps, 300);
    sock_expect_frames(e, tx);
    sock_expect_silence(e, 20);
    ncm_check_marker(e, 1500);
}

static void test_tx_exact_multiple(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) tx = frames_new();
    g_autoptr(GByteArray) ntb = NULL;
    bool dl = !strcmp(c->model, "usb-ncm-dl");

    ncm_set_alt(e, 1);
    ntb = ntb_build_filled(e, 3 * e->mps, 500, 1600, tx);
    out_td(e, ntb->data, e->mps);
    out_td(e, ntb->data + e->mps, 2 * e->mps);
    if (dl) {
        sock_expect_silence(e, 50);
    } else {
        /* wBlockLength has arrived: NCM 1.0 needs no terminator */
        sock_expect_frames(e, tx);
    }
    out_td(e, NULL, 0);
    if (dl) {
        sock_expect_frames(e, tx);
    }
    sock_expect_silence(e, 20);
    ncm_check_marker(e, 1700);
}

/* CVE-2024-27405: a trailing 1-byte zero pad must not cost the NTB */
static void test_tx_windows_pad(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) tx = frames_new();
    g_autoptr(GByteArray) ntb = NULL;
    NtbLayout l;
    uint8_t zero = 0;
    unsigned i;

    ncm_set_alt(e, 1);
    for (i = 0; i < 4; i++) {
        frames_add(tx, bcast_mac, 1800 + i, 100 + i * 200);
    }
    l = out_layout(e);
    ntb = ntb_build(&l, tx, 0);
    g_byte_array_append(ntb, &zero, 1);
    ncm_send(e, ntb->data, ntb->len);
    sock_expect_frames(e, tx);
    sock_expect_silence(e, 20);
    ncm_check_marker(e, 1900);
}

/* Cases: device to host */

static void test_rx_frames(NcmEnv *e, const NcmCase *c)
{
    static const uint16_t sizes[] = {
        14, 60, 61, 62, 63, 64, 65, 127, 128, 511, 512, 513, 1023, 1024,
        1025, 1500, 1513, 1514,
    };
    g_autoptr(GPtrArray) inject = frames_new();
    g_autoptr(GPtrArray) want = frames_new();
    unsigned i;

    ncm_set_alt(e, 1);
    for (i = 0; i < ARRAY_SIZE(sizes); i++) {
        const uint8_t *dst = i % 2 ? ncm_mac : bcast_mac;

        frames_add(inject, dst, 2000 + i, sizes[i]);
        frames_add(want, dst, 2000 + i, sizes[i]);
        if (i == 4) {
            /* filtered: another station's unicast, an oversized frame */
            frames_add(inject, other_mac, 2100, 200);
            frames_add(inject, ncm_mac, 2101, 1515);
        }
    }
    sock_send_frames(e, inject);
    ncm_expect_rx(e, want);
    ncm_expect_no_rx(e);
}

static void test_rx_input_size(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) rx = frames_new();
    g_autoptr(GPtrArray) got = NULL;
    uint8_t b[4];
    unsigned i, ntbs;

    stl_le_p(b, 4096);
    g_assert_cmpint(class_out(e, REQ_SET_NTB_INPUT_SIZE, 0, b, 4),
                    ==, QXHCI_CC_SUCCESS);
    ncm_set_alt(e, 1);
    for (i = 0; i < 60; i++) {
        frames_add(rx, ncm_mac, 2200 + i, 700 + (i * 97) % 815);
    }
    sock_send_frames(e, rx);
    sock_settle(e);
    /* IN TDs much larger than the input size: the device must stop */
    got = ncm_receive(e, rx->len, e->p.in_max, 4096);
    frames_assert_equal(got, rx);
    g_assert_cmpuint(e->rx_ntbs, >=, 60 * 700 / 4096);

    /* a smaller size set in alt 1 applies to the next NTBs */
    stl_le_p(b, 2048);
    g_assert_cmpint(class_out(e, REQ_SET_NTB_INPUT_SIZE, 0, b, 4),
                    ==, QXHCI_CC_SUCCESS);
    g_ptr_array_set_size(rx, 0);
    for (i = 0; i < 20; i++) {
        frames_add(rx, bcast_mac, 2300 + i, 600 + i * 40);
    }
    sock_send_frames(e, rx);
    sock_settle(e);
    ntbs = e->rx_ntbs;
    g_ptr_array_unref(got);
    got = ncm_receive(e, rx->len, e->p.in_max, 2048);
    frames_assert_equal(got, rx);
    g_assert_cmpuint(e->rx_ntbs - ntbs, >=, 20 * 600 / 2048);
}

static void test_rx_backlog(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) rx = frames_new();
    g_autoptr(GPtrArray) got = NULL;
    unsigned i;

    ncm_set_alt(e, 1);
    for (i = 0; i < 1000; i++) {
        frames_add(rx, i % 5 ? ncm_mac : bcast_mac, 10000 + i, 60 + i % 64);
    }
    /* all written while nobody polls bulk IN */
    sock_send_frames(e, rx);
    sock_settle(e);
    got = ncm_receive(e, rx->len, e->p.in_max, e->in_size);
    frames_assert_equal(got, rx);
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

/* Parse what a completed IN TD holds (no NTB when it came back empty). */
static void in_td_parse(NcmEnv *e, QXhciTransfer *t, uint32_t max_ntb,
                        GPtrArray *got)
{
    g_autofree uint8_t *buf = g_malloc(MAX(t->length, 1));

    g_assert(t->done);
    g_assert(t->cc == QXHCI_CC_SUCCESS || t->cc == QXHCI_CC_SHORT_PACKET);
    if (t->actual) {
        qxhci_transfer_read(t, buf);
        ntb_parse_in(e, buf, t->actual, max_ntb, got);
    }
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
        in_td_parse(e, t, e->in_size, got);
        qxhci_transfer_free(t);
    }
}

static void test_rx_direct(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) rx = frames_new();
    g_autoptr(GPtrArray) got = frames_new();
    g_autoptr(QDict) before = NULL;
    g_autoptr(QDict) after = NULL;
    QXhciTransfer *t;
    unsigned i;

    ncm_set_alt(e, 1);
    before = ncm_stats(e);
    t = in_park(e, e->p.in_max, 0);
    for (i = 0; i < 5; i++) {
        frames_add(rx, i % 2 ? ncm_mac : bcast_mac, 11000 + i, 60 + i * 150);
    }
    sock_send_frames(e, rx);
    g_assert(qxhci_wait(t, RX_TIMEOUT_NS));
    in_td_parse(e, t, e->in_size, got);
    qxhci_transfer_free(t);
    g_assert_cmpuint(e->rx_ntbs, ==, 1);
    frames_assert_equal(got, rx);
    ncm_expect_no_rx(e);

    after = ncm_stats(e);
    assert_stat_delta(before, after, "in_direct_ntbs", 1);
    assert_stat_delta(before, after, "in_ntbs", 1);
    assert_stat_delta(before, after, "in_datagrams", rx->len);
    assert_stat_delta(before, after, "in_bytes", e->rx_bytes);
    assert_stat_delta(before, after, "in_flushed_datagrams", 0);
}

static void test_rx_copy(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) rx = frames_new();
    g_autoptr(GPtrArray) got = NULL;
    g_autoptr(QDict) before = NULL;
    g_autoptr(QDict) after = NULL;
    unsigned i;

    ncm_set_alt(e, 1);
    before = ncm_stats(e);
    for (i = 0; i < 5; i++) {
        frames_add(rx, i % 2 ? ncm_mac : bcast_mac, 11100 + i, 60 + i * 150);
    }
    sock_send_frames(e, rx);
    sock_settle(e);
    got = ncm_receive(e, rx->len, e->p.in_max, e->in_size);
    frames_assert_equal(got, rx);
    g_assert_cmpuint(e->rx_ntbs, ==, 1);
    ncm_expect_no_rx(e);

    after = ncm_stats(e);
    assert_stat_delta(before, after, "in_direct_ntbs", 0);
    assert_stat_delta(before, after, "in_ntbs", 1);
    assert_stat_delta(before, after, "in_datagrams", rx->len);
    assert_stat_delta(before, after, "in_flushed_datagrams", 0);
}

static void test_rx_direct_input_size(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) rx = frames_new();
    g_autoptr(GPtrArray) got = frames_new();
    g_autoptr(GPtrArray) rest = NULL;
    g_autoptr(QDict) before = NULL;
    g_autoptr(QDict) after = NULL;
    QXhciTransfer *t;
    uint8_t b[4];
    unsigned i;

    ncm_set_alt(e, 1);
    before = ncm_stats(e);
    t = in_park(e, 65536, 0);
    stl_le_p(b, 4096);
    g_assert_cmpint(class_out(e, REQ_SET_NTB_INPUT_SIZE, 0, b, 4),
                    ==, QXHCI_CC_SUCCESS);
    e->in_size = 4096;
    for (i = 0; i < 20; i++) {
        frames_add(rx, i % 3 ? ncm_mac : bcast_mac, 11200 + i,
                   600 + i * 47);
    }
    sock_send_frames(e, rx);
    g_assert(qxhci_wait(t, RX_TIMEOUT_NS));
    in_td_parse(e, t, 4096, got);
    qxhci_transfer_free(t);
    g_assert_cmpuint(got->len, >, 0);
    g_assert_cmpuint(got->len, <, rx->len);
    rest = ncm_receive(e, rx->len - got->len, 65536, 4096);
    for (i = 0; i < rest->len; i++) {
        g_ptr_array_add(got, g_byte_array_ref(g_ptr_array_index(rest, i)));
    }
    frames_assert_equal(got, rx);
    ncm_expect_no_rx(e);

    after = ncm_stats(e);
    g_assert_cmpuint(stat_delta(before, after, "in_direct_ntbs"), >=, 1);
    assert_stat_delta(before, after, "in_ntbs", e->rx_ntbs);
    assert_stat_delta(before, after, "in_datagrams", rx->len);
    assert_stat_delta(before, after, "in_flushed_datagrams", 0);
}

enum {
    CANCEL_STOP_ENDPOINT,
    CANCEL_ALT_0,
    CANCEL_PORT_RESET,
    CANCEL_CONTROL_SET_INTERFACE,   /* SET_INTERFACE on the control iface */
};

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
 * Take a parked bulk IN TD away the way case @c->arg says, keep what it
 * received in @got, let QEMU read what is left on the socket, and bring
 * the data interface back.
 */
static void in_cancel_parked(NcmEnv *e, const NcmCase *c, QXhciTransfer *t,
                             GPtrArray *got, bool busy)
{
    switch (c->arg) {
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
        break;
    case CANCEL_CONTROL_SET_INTERFACE:
        /* the data interface stays in alt 1; the core resets endpoints */
        g_assert_cmpint(qxhci_control(e->dev, 0x01, USB_REQ_SET_INTERFACE,
                                      0, IF_CONTROL, NULL, 0, NULL),
                        ==, QXHCI_CC_SUCCESS);
        break;
    }
    if (busy) {
        fault_set(e, "x-fault-busy-ms", 0);
    }
    qxhci_poll(e->xhci);
    if (t->done && t->actual) {
        in_td_parse(e, t, e->in_size, got);
    }
    if (c->arg == CANCEL_PORT_RESET) {
        qxhci_device_free(e->dev);
        e->dev = NULL;
        t->dev = NULL;
    }
    qxhci_transfer_free(t);
    sock_settle(e);
    assert_alive(e);
    if (c->arg == CANCEL_PORT_RESET) {
        ncm_enumerate(e);
    }
    if (c->arg == CANCEL_ALT_0 || c->arg == CANCEL_PORT_RESET) {
        ncm_set_alt(e, 1);
    }
}

static void test_rx_parked_cancel(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) rx = frames_new();
    g_autoptr(GPtrArray) got = frames_new();
    QDict *before, *after;
    QXhciTransfer *t;
    uint64_t flushed, inactive;
    unsigned i;

    ncm_set_alt(e, 1);

    /* nothing written yet: the TD goes away, nothing is lost */
    before = ncm_stats(e);
    t = in_park(e, e->p.in_max, 0);
    in_cancel_parked(e, c, t, got, false);
    g_assert_cmpuint(got->len, ==, 0);
    after = ncm_stats(e);
    assert_stat_delta(before, after, "in_flushed_datagrams", 0);
    assert_stat_delta(before, after, "in_ntbs", 0);
    qobject_unref(before);
    qobject_unref(after);

    /*
     * Frames written into the parked TD, not completed (the device is
     * busy): when the TD goes away they move to the device's own buffer
     * and come in the next TD; a reset of the data path (alt 0, port
     * reset) drops exactly those, and says so.
     */
    before = ncm_stats(e);
    t = in_park(e, e->p.in_max, 0);
    fault_set(e, "x-fault-busy-ms", 1000000);
    for (i = 0; i < 4; i++) {
        frames_add(rx, i % 2 ? ncm_mac : bcast_mac, 11300 + i, 200 + i * 90);
    }
    sock_send_frames(e, rx);
    sock_settle(e);
    g_assert(!t->done);
    in_cancel_parked(e, c, t, got, true);
    g_assert_cmpuint(got->len, ==, 0);
    in_drain(e, got);
    after = ncm_stats(e);
    assert_stat_delta(before, after, "in_rescued_datagrams", rx->len);
    if (c->arg == CANCEL_ALT_0 || c->arg == CANCEL_PORT_RESET) {
        g_assert_cmpuint(got->len, ==, 0);
        assert_stat_delta(before, after, "in_flushed_datagrams", rx->len);
        assert_stat_delta(before, after, "in_ntbs", 0);
    } else {
        frames_assert_equal(got, rx);
        assert_stat_delta(before, after, "in_flushed_datagrams", 0);
        assert_stat_delta(before, after, "in_datagrams", rx->len);
    }
    g_ptr_array_set_size(got, 0);
    qobject_unref(before);
    qobject_unref(after);

    /* frames on their way as the TD goes: each arrives or is counted */
    g_ptr_array_set_size(rx, 0);
    before = ncm_stats(e);
    t = in_park(e, e->p.in_max, 0);
    for (i = 0; i < 8; i++) {
        frames_add(rx, i % 2 ? ncm_mac : bcast_mac, 11400 + i, 200 + i * 90);
    }
    sock_send_frames(e, rx);
    in_cancel_parked(e, c, t, got, false);
    in_drain(e, got);
    frames_assert_subsequence(got, rx);
    after = ncm_stats(e);
    flushed = stat_delta(before, after, "in_flushed_datagrams");
    inactive = stat_delta(before, after, "rx_inactive_drops");
    g_test_message("%u frames received, %" PRIu64 " flushed, %" PRIu64
                   " dropped while inactive", got->len, flushed, inactive);
    g_assert_cmpuint(got->len + flushed + inactive, ==, rx->len);
    assert_stat_delta(before, after, "in_datagrams", got->len);
    if (c->arg == CANCEL_STOP_ENDPOINT ||
        c->arg == CANCEL_CONTROL_SET_INTERFACE) {
        g_assert_cmpuint(inactive, ==, 0);
    }
    qobject_unref(before);
    qobject_unref(after);

    /* a new TD receives new frames, the one-copy way again */
    g_ptr_array_set_size(rx, 0);
    g_ptr_array_set_size(got, 0);
    before = ncm_stats(e);
    t = in_park(e, e->p.in_max, 0);
    for (i = 0; i < 4; i++) {
        frames_add(rx, ncm_mac, 11500 + i, 300 + i * 200);
    }
    sock_send_frames(e, rx);
    g_assert(qxhci_wait(t, RX_TIMEOUT_NS));
    in_td_parse(e, t, e->in_size, got);
    qxhci_transfer_free(t);
    frames_assert_equal(got, rx);
    after = ncm_stats(e);
    assert_stat_delta(before, after, "in_direct_ntbs", 1);
    assert_stat_delta(before, after, "in_ntbs", 1);
    assert_stat_delta(before, after, "in_flushed_datagrams", 0);
    qobject_unref(before);
    qobject_unref(after);
    ncm_expect_no_rx(e);
}

static void test_rx_direct_small_first(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) rx = frames_new();
    g_autoptr(GPtrArray) got = frames_new();
    g_autoptr(QDict) before = NULL;
    g_autoptr(QDict) after = NULL;
    QXhciTransfer *t;
    unsigned i;

    ncm_set_alt(e, 1);
    before = ncm_stats(e);
    for (i = 0; i < 20; i++) {
        frames_add(rx, i % 2 ? ncm_mac : bcast_mac, 11600 + i, 800 + i * 31);
    }
    t = in_park(e, 65536, 4096);
    g_assert_cmpuint(t->ntrbs, >=, 2);
    g_assert_cmpuint(t->trb_len[0], ==, 4096);
    sock_send_frames(e, rx);
    while (got->len < rx->len) {
        g_autoptr(QDict) s0 = ncm_stats(e);
        g_autoptr(QDict) s1 = NULL;
        unsigned ntbs = e->rx_ntbs;

        if (!t) {
            t = qxhci_submit_split(e->dev, e->ep_in.address, NULL, 65536,
                                   4096);
        }
        g_assert(qxhci_wait(t, RX_TIMEOUT_NS));
        in_td_parse(e, t, e->in_size, got);
        g_assert_cmpuint(e->rx_ntbs, ==, ntbs + 1);
        s1 = ncm_stats(e);
        if (!ntbs || stat_delta(s0, s1, "in_direct_ntbs")) {
            /* built in place: the NTB never leaves the first piece */
            g_assert_cmpuint(t->actual, <=, 4096);
        }
        qxhci_transfer_free(t);
        t = NULL;
    }
    frames_assert_equal(got, rx);
    ncm_expect_no_rx(e);
    after = ncm_stats(e);
    g_assert_cmpuint(stat_delta(before, after, "in_direct_ntbs"), >=, 1);
    assert_stat_delta(before, after, "in_ntbs", e->rx_ntbs);
    assert_stat_delta(before, after, "in_datagrams", rx->len);
    assert_stat_delta(before, after, "in_flushed_datagrams", 0);
}

/* Malformed OUT NTBs, one per NcmParseError class */

enum {
    BAD_NTH_TRUNCATED,
    BAD_NTH_SIGNATURE,
    BAD_NTH_HEADER_LEN,
    BAD_BLOCK_TOO_SHORT,
    BAD_BLOCK_PAST_TRANSFER,
    BAD_BLOCK_TOO_LONG,
    BAD_NDP_ALIGNMENT,
    BAD_NDP_BOUNDS,
    BAD_NDP_PAST_BLOCK,
    BAD_NDP_SIGNATURE,
    BAD_NDP_LENGTH,
    BAD_NDP_AT_END,
    BAD_NDP_UNTERMINATED,
    BAD_NDP_CHAIN_LOOP,
    BAD_NDP_CHAIN_TOO_LONG,
    BAD_DATAGRAM_BOUNDS,
    BAD_DATAGRAM_WRAP,
    BAD_DATAGRAM_PAST_BLOCK,
    BAD_DATAGRAM_TOO_SHORT,
    BAD_DATAGRAM_TOO_LONG,
    BAD_TOO_MANY_DATAGRAMS,
    BAD_NTB32_BLOCK_LEN_0,
    BAD__MAX,
};

/* Each with the out_parse_errors class it must count in */
static const struct {
    const char *name;
    const char *error;
    const char *props;
} bad_cases[BAD__MAX] = {
    [BAD_NTH_TRUNCATED] = { "nth-truncated", "nth-truncated" },
    [BAD_NTH_SIGNATURE] = { "nth-signature", "nth-signature" },
    [BAD_NTH_HEADER_LEN] = { "nth-header-length", "nth-header-length" },
    [BAD_BLOCK_TOO_SHORT] = { "block-too-short", "block-too-short" },
    [BAD_BLOCK_PAST_TRANSFER] = { "block-past-transfer",
                                  "block-past-transfer" },
    [BAD_BLOCK_TOO_LONG] = { "block-too-long", "block-too-long",
                             "ntb-out-max-size=16384" },
    [BAD_NDP_ALIGNMENT] = { "ndp-alignment", "ndp-alignment" },
    [BAD_NDP_BOUNDS] = { "ndp-bounds", "ndp-bounds" },
    [BAD_NDP_PAST_BLOCK] = { "ndp-past-block", "ndp-bounds" },
    [BAD_NDP_SIGNATURE] = { "ndp-signature", "ndp-signature" },
    [BAD_NDP_LENGTH] = { "ndp-length", "ndp-length" },
    /* the header fits, its wLength does not */
    [BAD_NDP_AT_END] = { "ndp-at-end", "ndp-length" },
    [BAD_NDP_UNTERMINATED] = { "ndp-unterminated", "ndp-unterminated" },
    [BAD_NDP_CHAIN_LOOP] = { "ndp-chain-loop", "ndp-chain-loop" },
    [BAD_NDP_CHAIN_TOO_LONG] = { "ndp-chain-too-long",
                                 "ndp-chain-too-long" },
    [BAD_DATAGRAM_BOUNDS] = { "datagram-bounds", "datagram-bounds" },
    [BAD_DATAGRAM_WRAP] = { "datagram-length-wraps", "datagram-bounds" },
    [BAD_DATAGRAM_PAST_BLOCK] = { "datagram-past-block", "datagram-bounds" },
    [BAD_DATAGRAM_TOO_SHORT] = { "datagram-too-short", "datagram-too-short" },
    [BAD_DATAGRAM_TOO_LONG] = { "datagram-too-long", "datagram-too-long" },
    [BAD_TOO_MANY_DATAGRAMS] = { "too-many-datagrams",
                                 "too-many-datagrams" },
    /* NTB32 has no "length from the transfer": 0 is just too short */
    [BAD_NTB32_BLOCK_LEN_0] = { "ntb32-block-length-0", "block-too-short" },
};

/* 17 NDPs, each pointing to the next, the first with a valid datagram */
static GByteArray *ntb_ndp_chain(unsigned ndps)
{
    g_autoptr(GByteArray) f = make_frame(bcast_mac, 3000, 100);
    GByteArray *ntb = g_byte_array_new();
    uint32_t dg = 12 + ndps * 16;
    unsigned i;

    g_byte_array_set_size(ntb, dg + f->len);
    memset(ntb->data, 0, ntb->len);
    memcpy(ntb->data + dg, f->data, f->len);
    memcpy(ntb->data, "NCMH", 4);
    stw_le_p(ntb->data + 4, 12);
    stw_le_p(ntb->data + 8, ntb->len);
    stw_le_p(ntb->data + 10, 12);
    for (i = 0; i < ndps; i++) {
        uint8_t *ndp = ntb->data + 12 + i * 16;

        memcpy(ndp, "NCM0", 4);
        stw_le_p(ndp + 4, 16);
        stw_le_p(ndp + 6, i + 1 < ndps ? 12 + (i + 1) * 16 : 0);
        if (i == 0) {
            stw_le_p(ndp + 8, dg);
            stw_le_p(ndp + 10, f->len);
        }
    }
    return ntb;
}

static GByteArray *ntb_malformed(NcmEnv *e, int which)
{
    g_autoptr(GPtrArray) frames = frames_new();
    NtbLayout l = out_layout(e);
    GByteArray *ntb;
    uint8_t *b;
    unsigned i;

    if (which == BAD_NDP_CHAIN_TOO_LONG) {
        return ntb_ndp_chain(17);
    }
    if (which == BAD_TOO_MANY_DATAGRAMS) {
        for (i = 0; i <= e->p.out_max_datagrams; i++) {
            frames_add(frames, bcast_mac, 3100 + i, 60);
        }
        return ntb_build(&l, frames, 0);
    }
    frames_add(frames, bcast_mac, 3200, 100);
    frames_add(frames, bcast_mac, 3201,
               which == BAD_DATAGRAM_TOO_LONG ? 1515 : 100);
    ntb = ntb_build(&l, frames, 0);
    b = ntb->data;
    if (which == BAD_NTB32_BLOCK_LEN_0) {
        /* CVE-2024-35825: NTB32 has no "length from the transfer" */
        g_assert(l.ntb32);
        stl_le_p(b + 8, 0);
        return ntb;
    }
    /* NTH at 0, NDP at 12 (20 bytes), datagrams at 32 and 132 */
    g_assert(!l.ntb32);
    g_assert_cmpuint(lduw_le_p(b + 10), ==, 12);
    g_assert_cmpuint(lduw_le_p(b + 12 + 8), ==, 32);
    g_assert_cmpuint(lduw_le_p(b + 12 + 12), ==, 132);

    switch (which) {
    case BAD_NTH_TRUNCATED:
        g_byte_array_set_size(ntb, 10);
        break;
    case BAD_NTH_SIGNATURE:
        b[3] = 'X';
        break;
    case BAD_NTH_HEADER_LEN:
        stw_le_p(b + 4, 16);
        break;
    case BAD_BLOCK_TOO_SHORT:
        /* CVE-2026-31617: shorter than NTH + NDP */
        stw_le_p(b + 8, 20);
        break;
    case BAD_BLOCK_PAST_TRANSFER:
        stw_le_p(b + 8, ntb->len + 100);
        break;
    case BAD_BLOCK_TOO_LONG:
        g_assert_cmpuint(e->p.out_max, ==, 16384);
        ntb_pad_to(ntb, false, 20000);
        break;
    case BAD_NDP_ALIGNMENT:
        stw_le_p(b + 10, 14);
        break;
    case BAD_NDP_BOUNDS:
        stw_le_p(b + 10, 4);            /* inside the NTH */
        break;
    case BAD_NDP_PAST_BLOCK:
        stw_le_p(b + 10, ntb->len - 4);
        break;
    case BAD_NDP_SIGNATURE:
        b[12 + 3] = '1';                /* NCM1: CRC, never enabled */
        break;
    case BAD_NDP_LENGTH:
        stw_le_p(b + 12 + 4, 0x11);
        break;
    case BAD_NDP_AT_END:
        /* CVE-2026-23448: header fits, entries run past the block */
        memcpy(b + ntb->len - 8, b + 12, 8);
        stw_le_p(b + 10, ntb->len - 8);
        break;
    case BAD_NDP_UNTERMINATED:
        stw_le_p(b + 12 + 4, 16);       /* two entries, no null one */
        break;
    case BAD_NDP_CHAIN_LOOP:
        stw_le_p(b + 12 + 6, 12);
        break;
    case BAD_DATAGRAM_BOUNDS:
        /* CVE-2022-48938: index near 0xfff0 */
        stw_le_p(b + 12 + 12, 0xfff0);
        stw_le_p(b + 12 + 14, 0x20);
        break;
    case BAD_DATAGRAM_WRAP:
        stw_le_p(b + 12 + 14, 0xfff0);  /* index + length wraps 16 bits */
        break;
    case BAD_DATAGRAM_PAST_BLOCK:
        /* a plausible length that still ends outside the block */
        stw_le_p(b + 12 + 14, 1000);
        break;
    case BAD_DATAGRAM_TOO_SHORT:
        stw_le_p(b + 12 + 14, 10);
        break;
    case BAD_DATAGRAM_TOO_LONG:
        break;
    default:
        g_assert_not_reached();
    }
    return ntb;
}

static void test_malformed(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GByteArray) ntb = NULL;
    g_autoptr(QDict) before = NULL;
    g_autoptr(QDict) after = NULL;

    if (c->arg == BAD_NTB32_BLOCK_LEN_0) {
        g_assert_cmpint(class_out(e, REQ_SET_NTB_FORMAT, 1, NULL, 0),
                        ==, QXHCI_CC_SUCCESS);
    }
    ncm_set_alt(e, 1);
    e->ntb32 = c->arg == BAD_NTB32_BLOCK_LEN_0;
    ntb = ntb_malformed(e, c->arg);
    before = ncm_stats(e);
    ncm_send(e, ntb->data, ntb->len);
    /* not a single datagram of a malformed NTB leaves the device */
    sock_expect_silence(e, 20);
    after = ncm_stats(e);
    /* counted once, in its own class */
    assert_parse_errors(before, after, bad_cases[c->arg].error, 1);
    assert_stat_delta(before, after, "out_ntbs", 0);
    assert_stat_delta(before, after, "out_datagrams", 0);
    assert_stat_delta(before, after, "out_bytes", 0);
    assert_stat_delta(before, after, "out_merged_transfers", 0);
    assert_alive(e);
    ncm_check_marker(e, 3300);
    /* twice in a row, and back to back with a valid one */
    ncm_send(e, ntb->data, ntb->len);
    ncm_check_marker(e, 3400);
    assert_alive(e);
    qobject_unref(after);
    after = ncm_stats(e);
    assert_parse_errors(before, after, bad_cases[c->arg].error, 2);
    assert_stat_delta(before, after, "out_ntbs", 2);
    assert_stat_delta(before, after, "out_datagrams", 6);
}

/* Cases: surprise removal and reset */

static void test_device_del(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) rx = frames_new();
    g_autoptr(GPtrArray) tx = frames_new();
    g_autoptr(GByteArray) ntb = NULL;
    QXhciTransfer *in, *notify;
    NtbLayout l;
    unsigned i;

    ncm_set_alt(e, 1);
    ncm_check_marker(e, 4000);
    /* traffic in flight: IN NTBs queued, an OUT NTB half sent, TDs wait */
    for (i = 0; i < 100; i++) {
        frames_add(rx, ncm_mac, 4100 + i, 1000);
    }
    sock_send_frames(e, rx);
    for (i = 0; i < 10; i++) {
        frames_add(tx, bcast_mac, 4500 + i, 1000);
    }
    l = out_layout(e);
    ntb = ntb_build(&l, tx, 0);
    out_td(e, ntb->data, 2 * e->mps);
    notify = qxhci_submit(e->dev, e->ep_notify.address, NULL, 16);
    in = qxhci_submit(e->dev, e->ep_in.address, NULL, 2048);
    qxhci_step(e->xhci);

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
    sock_send_frames(e, rx);
    sock_settle(e);
    assert_alive(e);
    qtest_qmp_device_add(e->qts, c->model, "ncm1",
                         "{'bus': 'xhci.0', 'netdev': 'n0', "
                         "'mac': '" NCM_MAC_STR "'}");
    e->port = qxhci_find_connected_port(e->xhci);
    g_assert_cmpint(e->port, >, 0);
    ncm_enumerate(e);
    ncm_set_alt(e, 1);
    ncm_check_marker(e, 4600);
    g_ptr_array_set_size(rx, 0);
    frames_add(rx, ncm_mac, 4700, 500);
    sock_send_frames(e, rx);
    ncm_expect_rx(e, rx);
}

static void test_port_reset(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) tx = frames_new();
    g_autoptr(GPtrArray) rx = frames_new();
    g_autoptr(GByteArray) ntb = NULL;
    NtbLayout l;
    uint8_t b[4];
    uint32_t actual = 0;
    unsigned i;

    stl_le_p(b, 4096);
    g_assert_cmpint(class_out(e, REQ_SET_NTB_INPUT_SIZE, 0, b, 4),
                    ==, QXHCI_CC_SUCCESS);
    ncm_set_alt(e, 1);
    for (i = 0; i < 10; i++) {
        frames_add(tx, bcast_mac, 5000 + i, 1000);
    }
    l = out_layout(e);
    ntb = ntb_build(&l, tx, 0);
    /* half an NTB, then the port resets */
    out_td(e, ntb->data, 2 * e->mps);
    g_assert_cmpint(qxhci_port_reset(e->xhci, e->port), ==,
                    c->super ? QXHCI_SPEED_SUPER : QXHCI_SPEED_HIGH);
    qxhci_device_free(e->dev);
    e->dev = NULL;
    ncm_enumerate(e);

    /* back to power-on defaults */
    g_assert_cmpint(class_in(e, REQ_GET_NTB_INPUT_SIZE, 0, b, 4, &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(ldl_le_p(b), ==, e->p.in_max);
    ncm_set_alt(e, 1);
    /* the rest of the interrupted NTB is just a malformed transfer */
    ncm_send(e, ntb->data + 2 * e->mps, ntb->len - 2 * e->mps);
    sock_expect_silence(e, 20);
    ncm_check_marker(e, 5100);
    frames_add(rx, ncm_mac, 5200, 1514);
    sock_send_frames(e, rx);
    ncm_expect_rx(e, rx);
}

/* The driver's rings go round many times; transfers stay correct. */
static void test_ring_wrap(NcmEnv *e, const NcmCase *c)
{
    unsigned i;

    ncm_set_alt(e, 1);
    for (i = 0; i < 40; i++) {
        g_autoptr(GPtrArray) f = frames_new();

        frames_add(f, bcast_mac, 6000 + i, 60 + i * 37);
        ncm_send_frames(e, f);
        sock_expect_frames(e, f);
        sock_send_frames(e, f);
        ncm_expect_rx(e, f);
        if (i % 4 == 0) {
            g_assert_cmpint(qxhci_cmd_noop(e->xhci), ==, QXHCI_CC_SUCCESS);
        }
    }
    g_assert_cmpuint(qxhci_event_ring_wraps(e->xhci), >, 0);
    g_assert_cmpuint(qxhci_cmd_ring_wraps(e->xhci), >, 0);
}

/* Cases: the zlp=required merge rule (issue 6) */

#define MERGE_ZLP       1       /* a ZLP between the two transfers */
#define MERGE_64K       2       /* first NTB: wBlockLength 0, 64 KiB */

/*
 * An NTB of an exact multiple of wMaxPacketSize in one transfer, then a
 * short NTB in another.  Without a ZLP between them, ZLP-required
 * firmware sees one transfer and uses only its first NTB; NCM 1.0
 * delimits them by wBlockLength (or dwNtbOutMaxSize) and loses nothing.
 */
static void test_merge(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) first = frames_new();
    g_autoptr(GPtrArray) second = frames_new();
    g_autoptr(GPtrArray) want = frames_new();
    g_autoptr(GByteArray) a = NULL;
    g_autoptr(GByteArray) b = NULL;
    g_autoptr(QDict) before = NULL;
    g_autoptr(QDict) after = NULL;
    bool required = !strcmp(c->model, "usb-ncm-dl");
    bool zlp = c->arg & MERGE_ZLP, big = c->arg & MERGE_64K;
    bool merged = required && !zlp;
    uint32_t len = big ? e->p.out_max : (c->super ? 3 : 4) * e->mps;
    NtbLayout l;
    unsigned i;

    ncm_set_alt(e, 1);
    l = out_layout(e);
    a = ntb_build_filled(e, len, big ? 1514 : 500, 7000, first);
    g_assert_cmpuint(a->len, ==, len);
    g_assert_cmpuint(a->len % e->mps, ==, 0);
    /* 2048 (high) or 3072 (super) in wBlockLength, or 0 for 64 KiB */
    g_assert_cmpuint(lduw_le_p(a->data + 8), ==, big ? 0 : len);
    frames_add(second, bcast_mac, 7100, 100);
    frames_add(second, peer_mac, 7101, 300);
    frames_add(second, other_mac, 7102, 701);
    b = ntb_build(&l, second, 1);
    g_assert_cmpuint(b->len % e->mps, !=, 0);

    before = ncm_stats(e);
    out_td(e, a->data, a->len);
    if (merged) {
        /* the firmware still waits for the end of the transfer */
        sock_expect_silence(e, 20);
    }
    if (zlp) {
        out_td(e, NULL, 0);
    }
    out_td(e, b->data, b->len);

    for (i = 0; i < first->len; i++) {
        g_ptr_array_add(want, g_byte_array_ref(g_ptr_array_index(first, i)));
    }
    for (i = 0; !merged && i < second->len; i++) {
        g_ptr_array_add(want, g_byte_array_ref(g_ptr_array_index(second,
                                                                 i)));
    }
    sock_expect_frames(e, want);
    sock_expect_silence(e, 50);

    after = ncm_stats(e);
    assert_stat_delta(before, after, "out_merged_transfers", merged);
    assert_stat_delta(before, after, "out_merge_lost_datagrams",
                      merged ? second->len : 0);
    assert_stat_delta(before, after, "out_ntbs", merged ? 1 : 2);
    assert_stat_delta(before, after, "out_datagrams", want->len);
    assert_stat_delta(before, after, "out_zlps", zlp);
    assert_stat_delta(before, after, "out_overflow_bytes", 0);
    assert_parse_errors(before, after, NULL, 0);
    ncm_check_marker(e, 7200);
}

/* Cases: counters */

static void test_counters(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) tx1 = frames_new();
    g_autoptr(GPtrArray) tx2 = frames_new();
    g_autoptr(GPtrArray) rx = frames_new();
    g_autoptr(GPtrArray) inject = frames_new();
    g_autoptr(GByteArray) ntb = NULL;
    g_autoptr(QDict) before = NULL;
    g_autoptr(QDict) after = NULL;
    uint64_t tx_bytes = 0, rx_bytes0;
    unsigned i, rx_ntbs0;

    ncm_set_alt(e, 1);
    before = ncm_stats(e);

    /* a short transfer, then an exact multiple ended by a ZLP */
    frames_add(tx1, bcast_mac, 7300, 60);
    frames_add(tx1, peer_mac, 7301, 777);
    frames_add(tx1, other_mac, 7302, 1514);
    ntb = ntb_build_filled(e, 2 * e->mps, 200, 7400, tx2);
    ncm_send_frames(e, tx1);
    sock_expect_frames(e, tx1);
    ncm_send(e, ntb->data, ntb->len);
    sock_expect_frames(e, tx2);
    for (i = 0; i < tx1->len; i++) {
        tx_bytes += ((GByteArray *)g_ptr_array_index(tx1, i))->len;
    }
    for (i = 0; i < tx2->len; i++) {
        tx_bytes += ((GByteArray *)g_ptr_array_index(tx2, i))->len;
    }

    /* five frames in, one filtered, one too long */
    for (i = 0; i < 5; i++) {
        frames_add(inject, i % 2 ? ncm_mac : bcast_mac, 7500 + i,
                   100 + i * 300);
        frames_add(rx, i % 2 ? ncm_mac : bcast_mac, 7500 + i, 100 + i * 300);
        if (i == 2) {
            frames_add(inject, other_mac, 7600, 200);
            frames_add(inject, ncm_mac, 7601, 1515);
        }
    }
    rx_ntbs0 = e->rx_ntbs;
    rx_bytes0 = e->rx_bytes;
    sock_send_frames(e, inject);
    ncm_expect_rx(e, rx);
    ncm_expect_no_rx(e);

    after = ncm_stats(e);
    assert_stat_delta(before, after, "out_transfers", 2);
    /* two NTBs and the ZLP, read by the bottom half unless told not to */
    assert_stat_delta(before, after, "out_deferred_packets", c->arg ? 0 : 3);
    assert_stat_delta(before, after, "out_ntbs", 2);
    assert_stat_delta(before, after, "out_datagrams", tx1->len + tx2->len);
    assert_stat_delta(before, after, "out_bytes", tx_bytes);
    assert_stat_delta(before, after, "out_zlps", 1);
    assert_stat_delta(before, after, "out_merged_transfers", 0);
    assert_stat_delta(before, after, "in_ntbs", e->rx_ntbs - rx_ntbs0);
    assert_stat_delta(before, after, "in_datagrams", rx->len);
    assert_stat_delta(before, after, "in_bytes", e->rx_bytes - rx_bytes0);
    assert_stat_delta(before, after, "rx_filtered", 1);
    assert_stat_delta(before, after, "rx_oversize", 1);
    assert_stat_delta(before, after, "link_down_drops", 0);
    assert_stat_delta(before, after, "in_flushed_datagrams", 0);
    assert_parse_errors(before, after, NULL, 0);
    g_assert_cmpuint(e->rx_ntbs - rx_ntbs0, >=, 1);
}

/* Cases: fault injection */

static void test_fault_link_down(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) rx = frames_new();
    g_autoptr(GPtrArray) tx = frames_new();
    g_autoptr(GPtrArray) rx2 = frames_new();
    g_autoptr(QDict) before = NULL;
    g_autoptr(QDict) down = NULL;
    g_autoptr(QDict) after = NULL;
    bool end_early = c->arg;
    const int64_t n_ms = 1000;
    int64_t t0, now;
    uint8_t b[16];
    unsigned i;

    ncm_set_alt(e, 1);
    expect_speed_change(b, notify_read(e, b, RX_TIMEOUT_NS));
    expect_connection(b, notify_read(e, b, RX_TIMEOUT_NS), true);
    ncm_check_marker(e, 8000);

    before = ncm_stats(e);
    t0 = clock_ns(e);
    fault_set(e, "x-fault-link-down-ms", n_ms);
    expect_connection(b, notify_read(e, b, RX_TIMEOUT_NS), false);
    g_assert_cmpint(qom_get_int(e, "x-fault-link-down-ms"), !=, 0);

    /* frames from the network do not reach the host... */
    for (i = 0; i < 3; i++) {
        frames_add(rx, i % 2 ? ncm_mac : bcast_mac, 8100 + i, 200 + i * 100);
    }
    sock_send_frames(e, rx);
    sock_settle(e);
    ncm_expect_no_rx(e);
    /* ...nor the host's frames the network */
    for (i = 0; i < 4; i++) {
        frames_add(tx, bcast_mac, 8200 + i, 300 + i * 100);
    }
    ncm_send_frames(e, tx);
    sock_expect_silence(e, 50);
    down = ncm_stats(e);
    assert_stat_delta(before, down, "link_down_drops", rx->len + tx->len);
    assert_stat_delta(before, down, "out_datagrams", 0);
    assert_stat_delta(before, down, "in_datagrams", 0);
    assert_stat_delta(before, down, "in_ntbs", 0);
    g_assert_cmpuint(notify_read(e, b, 100 * MS), ==, 0);

    now = clock_ns(e);
    g_assert_cmpint(now - t0, <, (n_ms - 2) * MS);
    if (end_early) {
        /* 0 ends the fault now */
        fault_set(e, "x-fault-link-down-ms", 0);
    } else {
        /* still down just before N ms... */
        qtest_clock_step(e->qts, t0 + (n_ms - 2) * MS - now);
        g_assert_cmpuint(notify_read(e, b, 0), ==, 0);
        /* ...and up again once they have passed */
        now = clock_ns(e);
        qtest_clock_step(e->qts, t0 + (n_ms + 1) * MS - now);
    }
    expect_speed_change(b, notify_read(e, b, RX_TIMEOUT_NS));
    expect_connection(b, notify_read(e, b, RX_TIMEOUT_NS), true);
    g_assert_cmpuint(notify_read(e, b, 100 * MS), ==, 0);
    g_assert_cmpint(qom_get_int(e, "x-fault-link-down-ms"), ==, 0);
    if (end_early) {
        /* the timer that would have ended it is gone */
        now = clock_ns(e);
        if (now < t0 + (n_ms + 1) * MS) {
            qtest_clock_step(e->qts, t0 + (n_ms + 1) * MS - now);
        }
        g_assert_cmpuint(notify_read(e, b, 10 * MS), ==, 0);
    }

    /* traffic flows again; what was dropped stays dropped */
    ncm_check_marker(e, 8300);
    frames_add(rx2, ncm_mac, 8400, 100);
    frames_add(rx2, bcast_mac, 8401, 1514);
    sock_send_frames(e, rx2);
    ncm_expect_rx(e, rx2);
    ncm_expect_no_rx(e);
    after = ncm_stats(e);
    assert_stat_delta(down, after, "link_down_drops", 0);
    assert_stat_delta(down, after, "in_datagrams", rx2->len);
}

static void test_fault_busy(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) tx = frames_new();
    g_autoptr(GPtrArray) rx = frames_new();
    g_autoptr(GPtrArray) got = frames_new();
    g_autoptr(GByteArray) ntb = NULL;
    g_autoptr(QDict) before = NULL;
    g_autoptr(QDict) after = NULL;
    g_autofree uint8_t *buf = g_malloc(e->p.in_max);
    const int64_t n_ms = 300;
    QXhciTransfer *out, *in;
    NtbLayout l;
    int64_t t0;
    unsigned i;

    ncm_set_alt(e, 1);
    ncm_check_marker(e, 8500);
    for (i = 0; i < 5; i++) {
        frames_add(tx, bcast_mac, 8600 + i, 100 + i * 250);
        frames_add(rx, i % 2 ? ncm_mac : bcast_mac, 8700 + i, 1514 - i * 250);
    }
    l = out_layout(e);
    ntb = ntb_build(&l, tx, 0);
    g_assert_cmpuint(ntb->len % e->mps, !=, 0);

    before = ncm_stats(e);
    t0 = clock_ns(e);
    fault_set(e, "x-fault-busy-ms", n_ms);
    g_assert_cmpint(qom_get_int(e, "x-fault-busy-ms"), !=, 0);
    out = qxhci_submit(e->dev, e->ep_out.address, ntb->data, ntb->len);
    in = qxhci_submit(e->dev, e->ep_in.address, NULL, e->p.in_max);
    sock_send_frames(e, rx);
    sock_settle(e);

    /* both endpoints NAK while the firmware is busy */
    g_assert(!qxhci_wait(out, 100 * MS));
    g_assert(!in->done);
    g_assert_cmpint(clock_ns(e) - t0, <, (n_ms - 1) * MS);
    sock_expect_silence(e, 20);

    /* then both transfers complete, and nothing was lost */
    g_assert(qxhci_wait(out, 2 * n_ms * MS));
    g_assert_cmpint(clock_ns(e) - t0, >=, (n_ms - 1) * MS);
    g_assert_cmpint(out->cc, ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(out->actual, ==, ntb->len);
    qxhci_transfer_free(out);
    sock_expect_frames(e, tx);
    g_assert(qxhci_wait(in, RX_TIMEOUT_NS));
    g_assert(in->cc == QXHCI_CC_SUCCESS || in->cc == QXHCI_CC_SHORT_PACKET);
    qxhci_transfer_read(in, buf);
    ntb_parse_in(e, buf, in->actual, e->in_size, got);
    qxhci_transfer_free(in);
    frames_assert_equal(got, rx);
    g_assert_cmpint(qom_get_int(e, "x-fault-busy-ms"), ==, 0);

    after = ncm_stats(e);
    assert_stat_delta(before, after, "out_datagrams", tx->len);
    assert_stat_delta(before, after, "in_datagrams", rx->len);
    assert_stat_delta(before, after, "in_flushed_datagrams", 0);
    assert_stat_delta(before, after, "link_down_drops", 0);
    ncm_check_marker(e, 8800);
}

static void test_fault_drop_in(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(QDict) before = NULL;
    g_autoptr(QDict) after = NULL;
    unsigned i, j, delivered = 0, dropped = 0;

    ncm_set_alt(e, 1);
    before = ncm_stats(e);
    fault_set(e, "x-fault-drop-in-every", 2);
    g_assert_cmpint(qom_get_int(e, "x-fault-drop-in-every"), ==, 2);
    /* one burst, one NTB; the 2nd and 4th are dropped, then no more */
    for (i = 0; i < 6; i++) {
        g_autoptr(GPtrArray) burst = frames_new();

        if (i == 4) {
            fault_set(e, "x-fault-drop-in-every", 0);
        }
        for (j = 0; j < 3; j++) {
            frames_add(burst, j % 2 ? ncm_mac : bcast_mac,
                       8900 + i * 10 + j, 100 + j * 400 + i);
        }
        sock_send_frames(e, burst);
        sock_settle(e);
        if (i == 1 || i == 3) {
            ncm_expect_no_rx(e);
            e->rx_seq++;        /* the lost NTB had its wSequence */
            dropped += burst->len;
        } else {
            ncm_expect_rx(e, burst);
            delivered += burst->len;
        }
    }
    ncm_expect_no_rx(e);
    after = ncm_stats(e);
    assert_stat_delta(before, after, "fault_dropped_in_ntbs", 2);
    assert_stat_delta(before, after, "in_ntbs", 4);
    assert_stat_delta(before, after, "in_datagrams", delivered);
    assert_stat_delta(before, after, "in_flushed_datagrams", dropped);
}

enum {
    CORRUPT_NDP_AT_END,
    CORRUPT_DATAGRAM_WRAP,
    CORRUPT_NDP_LOOP,
    CORRUPT_BLOCK_LEN,
    CORRUPT_SHORT_NOTIFY,
    CORRUPT__MAX,
    CORRUPT_NTB32 = 0x100,      /* flag: with NTB32 selected */
};

static const char *const corrupt_names[CORRUPT__MAX] = {
    [CORRUPT_NDP_AT_END] = "ndp-at-end",
    [CORRUPT_DATAGRAM_WRAP] = "datagram-offset-wrap",
    [CORRUPT_NDP_LOOP] = "ndp-chain-loop",
    [CORRUPT_BLOCK_LEN] = "block-length-over-input-size",
    [CORRUPT_SHORT_NOTIFY] = "short-notification",
};

/*
 * The IN NTB the device builds from @frames: NTH, the datagrams at
 * wNdpInDivisor/wNdpInPayloadRemainder offsets, then the NDP.
 */
static GByteArray *in_ntb_expected(NcmEnv *e, GPtrArray *frames,
                                   uint16_t seq)
{
    bool n32 = e->ntb32;
    unsigned fs = n32 ? 4 : 2;
    uint32_t nth_len = n32 ? 16 : 12, ndp_hdr = n32 ? 16 : 8;
    uint32_t ndp_min = n32 ? 32 : 16;
    uint32_t div = e->p.in_divisor, n = frames->len;
    uint32_t pos = nth_len, ndp, ndp_len, total, i;
    g_autofree uint32_t *offs = g_new(uint32_t, n);
    GByteArray *ntb = g_byte_array_new();

    g_byte_array_set_size(ntb, nth_len);
    for (i = 0; i < n; i++) {
        GByteArray *f = g_ptr_array_index(frames, i);

        offs[i] = pos + ((e->p.in_remainder % div) + div - pos % div) % div;
        g_byte_array_set_size(ntb, offs[i]);
        memset(ntb->data + pos, 0, offs[i] - pos);
        g_byte_array_append(ntb, f->data, f->len);
        pos = offs[i] + f->len;
    }
    ndp = align_up(pos, MAX(e->p.in_alignment, 4));
    ndp_len = MAX(ndp_hdr + (n + 1) * 2 * fs, ndp_min);
    total = ndp + ndp_len;
    g_byte_array_set_size(ntb, total);
    memset(ntb->data + pos, 0, total - pos);
    memcpy(ntb->data + ndp, n32 ? "ncm0" : "NCM0", 4);
    stw_le_p(ntb->data + ndp + 4, ndp_len);
    for (i = 0; i < n; i++) {
        GByteArray *f = g_ptr_array_index(frames, i);
        uint8_t *entry = ntb->data + ndp + ndp_hdr + i * 2 * fs;

        put_field(entry, n32, offs[i]);
        put_field(entry + fs, n32, f->len);
    }
    memset(ntb->data, 0, nth_len);
    memcpy(ntb->data, n32 ? "ncmh" : "NCMH", 4);
    stw_le_p(ntb->data + 4, nth_len);
    stw_le_p(ntb->data + 6, seq);
    put_field(ntb->data + 8, n32, !n32 && total > 0xffff ? 0 : total);
    put_field(ntb->data + (n32 ? 12 : 10), n32, ndp);
    return ntb;
}

/* One IN TD of dwNtbInMaxSize bytes: the next NTB as it came */
static GByteArray *in_read_raw(NcmEnv *e)
{
    QXhciTransfer *t = qxhci_submit(e->dev, e->ep_in.address, NULL,
                                    e->p.in_max);
    GByteArray *b = g_byte_array_new();

    g_assert(qxhci_wait(t, RX_TIMEOUT_NS));
    g_assert(t->cc == QXHCI_CC_SUCCESS || t->cc == QXHCI_CC_SHORT_PACKET);
    g_byte_array_set_size(b, t->actual);
    qxhci_transfer_read(t, b->data);
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
    uint32_t ndp = get_field(want->data + ndp_index_off, n32);
    uint32_t end = ROUND_DOWN(want->len - 8, 4);
    uint32_t block;
    uint8_t *g = got->data;

    g_assert_cmpuint(got->len, ==, want->len);
    switch (how) {
    case CORRUPT_NDP_AT_END:
        /* wNdpIndex: a valid-looking NDP header in the last 8 bytes */
        g_assert_cmpuint(get_field(g + ndp_index_off, n32), ==, end);
        g_assert_cmpuint(end, >=, got->len - 8);
        g_assert_cmpmem(g + end, 4, n32 ? "ncm0" : "NCM0", 4);
        g_assert_cmpuint(lduw_le_p(g + end + 4), ==, n32 ? 32 : 16);
        g_assert_cmpuint(lduw_le_p(g + end + 6), ==, 0);
        /* whose entries run past the block */
        g_assert_cmpuint(end + lduw_le_p(g + end + 4), >, got->len);
        memcpy(want->data + end, n32 ? "ncm0" : "NCM0", 4);
        stw_le_p(want->data + end + 4, n32 ? 32 : 16);
        stw_le_p(want->data + end + 6, 0);
        put_field(want->data + ndp_index_off, n32, end);
        break;
    case CORRUPT_DATAGRAM_WRAP:
        /* the NDP stays where it was; its first entry wraps */
        g_assert_cmpuint(get_field(g + ndp_index_off, n32), ==, ndp);
        g_assert_cmpuint(get_field(g + ndp + ndp_hdr, n32), ==,
                         n32 ? 0xfffffff0 : 0xfff0);
        g_assert_cmpuint(get_field(g + ndp + ndp_hdr + (n32 ? 4 : 2), n32),
                         ==, 0x20);
        put_field(want->data + ndp + ndp_hdr, n32, n32 ? 0xfffffff0 : 0xfff0);
        put_field(want->data + ndp + ndp_hdr + (n32 ? 4 : 2), n32, 0x20);
        break;
    case CORRUPT_NDP_LOOP:
        /* wNextNdpIndex: the NDP's own offset */
        g_assert_cmpuint(get_field(g + ndp_index_off, n32), ==, ndp);
        g_assert_cmpuint(get_field(g + ndp + (n32 ? 8 : 6), n32), ==, ndp);
        put_field(want->data + ndp + (n32 ? 8 : 6), n32, ndp);
        break;
    case CORRUPT_BLOCK_LEN:
        /* the NTB input size plus 4, as far as NTB16 can say it */
        block = n32 ? e->in_size + 4 : MIN(e->in_size + 4, 0xffff);
        g_assert_cmpuint(get_field(g + 8, n32), ==, block);
        g_assert_cmpuint(block, >, got->len);
        put_field(want->data + 8, n32, block);
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
    g_autoptr(GPtrArray) clean = frames_new();
    g_autoptr(QDict) before = ncm_stats(e);
    g_autoptr(QDict) after = NULL;
    g_autofree char *now = NULL;
    unsigned i;

    if (count > 1) {
        fault_set(e, "x-fault-corrupt-count", count);
    }
    fault_corrupt(e, name);
    now = qom_get_str(e, "x-fault-corrupt-in");
    g_assert_cmpstr(now, ==, name);
    g_assert_cmpint(qom_get_int(e, "x-fault-corrupt-count"), ==, count);

    for (i = 0; i < count; i++) {
        g_autoptr(GPtrArray) frames = frames_new();
        g_autoptr(GByteArray) got = NULL;
        g_autoptr(GByteArray) want = NULL;

        frames_add(frames, bcast_mac, tag + i * 10, 60 + i);
        frames_add(frames, ncm_mac, tag + i * 10 + 1, 1000);
        frames_add(frames, bcast_mac, tag + i * 10 + 2, 1514);
        sock_send_frames(e, frames);
        sock_settle(e);
        got = in_read_raw(e);
        want = in_ntb_expected(e, frames, e->rx_seq++);
        check_corrupted(e, got, want, how);
    }
    g_assert_cmpint(qom_get_int(e, "x-fault-corrupt-count"), ==, 0);

    /* the next one is clean */
    frames_add(clean, ncm_mac, tag + 100, 200);
    frames_add(clean, bcast_mac, tag + 101, 1514);
    sock_send_frames(e, clean);
    ncm_expect_rx(e, clean);
    after = ncm_stats(e);
    assert_stat_delta(before, after, "fault_corrupted_in_ntbs", count);
    assert_stat_delta(before, after, "in_ntbs", count + 1);
}

static void test_fault_corrupt(NcmEnv *e, const NcmCase *c)
{
    int how = c->arg & 0xff;
    bool n32 = c->arg & CORRUPT_NTB32;
    uint8_t b[4];

    if (n32) {
        g_assert_cmpint(class_out(e, REQ_SET_NTB_FORMAT, 1, NULL, 0),
                        ==, QXHCI_CC_SUCCESS);
    }
    ncm_set_alt(e, 1);
    e->ntb32 = n32;
    g_assert_cmpint(qom_get_int(e, "x-fault-corrupt-count"), ==, 0);
    corrupt_rounds(e, how, 1, 9000);
    if (how == CORRUPT_BLOCK_LEN) {
        /* the input size the host set, not dwNtbInMaxSize */
        stl_le_p(b, 4096);
        g_assert_cmpint(class_out(e, REQ_SET_NTB_INPUT_SIZE, 0, b, 4),
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
    g_autoptr(GPtrArray) rx = frames_new();
    g_autoptr(QDict) before = NULL;
    g_autoptr(QDict) after = NULL;
    uint8_t b[16];
    uint32_t n;

    ncm_set_alt(e, 1);
    expect_speed_change(b, notify_read(e, b, RX_TIMEOUT_NS));
    expect_connection(b, notify_read(e, b, RX_TIMEOUT_NS), true);
    before = ncm_stats(e);
    fault_corrupt(e, "short-notification");

    /* NETWORK_CONNECTION(0), cut to 4 bytes */
    set_link(e, false);
    n = notify_read(e, b, RX_TIMEOUT_NS);
    g_assert_cmpmem(b, n, cut, sizeof(cut));
    g_assert_cmpuint(notify_read(e, b, 100 * MS), ==, 0);
    g_assert_cmpint(qom_get_int(e, "x-fault-corrupt-count"), ==, 0);

    /* the next ones are whole */
    set_link(e, true);
    expect_speed_change(b, notify_read(e, b, RX_TIMEOUT_NS));
    expect_connection(b, notify_read(e, b, RX_TIMEOUT_NS), true);
    g_assert_cmpuint(notify_read(e, b, 100 * MS), ==, 0);

    /* and IN NTBs are not touched */
    frames_add(rx, ncm_mac, 9600, 300);
    frames_add(rx, bcast_mac, 9601, 1514);
    sock_send_frames(e, rx);
    ncm_expect_rx(e, rx);
    after = ncm_stats(e);
    assert_stat_delta(before, after, "notifications", 3);
    assert_stat_delta(before, after, "fault_corrupted_in_ntbs", 0);
    ncm_check_marker(e, 9700);
}

static void test_fault_corrupt_invalid(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) rx = frames_new();
    g_autoptr(QDict) before = NULL;
    g_autoptr(QDict) after = NULL;
    g_autofree char *now = NULL;
    static const char *const bad[] = {
        "no-such-corruption", "", "NDP-AT-END", "ndp-at-end ",
    };
    unsigned i;

    ncm_set_alt(e, 1);
    before = ncm_stats(e);
    for (i = 0; i < ARRAY_SIZE(bad); i++) {
        QDict *rsp = qtest_qmp(e->qts, "{'execute': 'qom-set', 'arguments': "
                               "{'path': %s, 'property': 'x-fault-corrupt-in',"
                               " 'value': %s}}", NCM_QOM_PATH, bad[i]);
        QDict *err = qdict_get_qdict(rsp, "error");

        if (!err) {
            g_test_message("qom-set fault-corrupt-in '%s' was accepted",
                           bad[i]);
        }
        g_assert(err);
        g_assert(strstr(qdict_get_str(err, "desc"), "x-fault-corrupt-in"));
        qobject_unref(rsp);
    }
    now = qom_get_str(e, "x-fault-corrupt-in");
    g_assert_cmpstr(now, ==, "none");
    g_assert_cmpint(qom_get_int(e, "x-fault-corrupt-count"), ==, 0);

    /* nothing armed: the next NTB is clean */
    frames_add(rx, ncm_mac, 9800, 300);
    sock_send_frames(e, rx);
    ncm_expect_rx(e, rx);
    after = ncm_stats(e);
    assert_stat_delta(before, after, "fault_corrupted_in_ntbs", 0);
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
    [QEV_FAULT_BUSY] = "x-fault-busy-ms",
};

/* Bulk IN TD sizes, in queue order: big, then small and odd ones */
static const uint32_t queue_in_sizes[] = { 65536, 512, 16384, 1 };
static const unsigned queue_in_counts[] = { 0, 1, 2, 4 };
static const unsigned queue_out_counts[] = { 0, 1, 2 };

typedef struct QueueCase {
    QueueEvent event;
} QueueCase;

static void ncm_set_configuration(NcmEnv *e, int value)
{
    g_assert_cmpint(qxhci_control(e->dev, 0x00, USB_REQ_SET_CONFIGURATION,
                                  value, 0, NULL, 0, NULL),
                    ==, QXHCI_CC_SUCCESS);
}

/* The adapter again, as a host finds it after a reset or a replug */
static void ncm_reenumerate(NcmEnv *e)
{
    if (e->dev) {
        qxhci_device_free(e->dev);
    }
    e->dev = NULL;
    e->port = qxhci_find_connected_port(e->xhci);
    g_assert_cmpint(e->port, >, 0);
    ncm_enumerate(e);
}

/* Both directions work: an OUT NTB and an IN NTB through queued TDs. */
/*
 * Two IN TDs wait: @first's frames go into the first as one NTB, the
 * second waits on until @second's come (in an NTB of at most @max2).
 */
static void in_fill_in_turn(NcmEnv *e, QXhciTransfer **t, GPtrArray *first,
                            GPtrArray *second, uint32_t max2)
{
    g_autoptr(GPtrArray) got = frames_new();
    unsigned i;

    sock_send_frames(e, first);
    g_assert(qxhci_wait(t[0], RX_TIMEOUT_NS));
    in_td_parse(e, t[0], e->in_size, got);
    frames_assert_equal(got, first);
    for (i = 0; i < 10; i++) {
        qxhci_step(e->xhci);
    }
    g_assert(!t[1]->done);
    g_ptr_array_set_size(got, 0);
    sock_send_frames(e, second);
    g_assert(qxhci_wait(t[1], RX_TIMEOUT_NS));
    in_td_parse(e, t[1], max2, got);
    frames_assert_equal(got, second);
}

static void queue_check_traffic(NcmEnv *e, uint32_t tag)
{
    g_autoptr(GPtrArray) rx = frames_new();
    g_autoptr(GPtrArray) rx2 = frames_new();
    QXhciTransfer *t[2];
    unsigned i;

    ncm_check_marker(e, tag);
    /* two IN TDs at once: the first takes the NTB, the second waits */
    qxhci_hold_doorbells(e->dev, true);
    for (i = 0; i < 2; i++) {
        t[i] = qxhci_submit(e->dev, e->ep_in.address, NULL, e->p.in_max);
    }
    qxhci_hold_doorbells(e->dev, false);
    qxhci_ring_doorbell(e->dev, e->ep_in.address);
    frames_add(rx, ncm_mac, tag + 10, 700);
    frames_add(rx2, bcast_mac, tag + 11, 1514);
    in_fill_in_turn(e, t, rx, rx2, e->in_size);
    qxhci_transfer_free(t[0]);
    qxhci_transfer_free(t[1]);
}

/* One event met by @n_in IN and @n_out OUT TDs queued at once. */
static void queue_round(NcmEnv *e, QueueEvent ev, unsigned n_in,
                        unsigned n_out, uint32_t tag)
{
    g_autoptr(GPtrArray) tx = frames_new();
    g_autoptr(GPtrArray) sent = frames_new();
    g_autoptr(GPtrArray) busy_rx = frames_new();
    QXhciTransfer *in[ARRAY_SIZE(queue_in_sizes)];
    QXhciTransfer *out[4];
    NtbLayout l = out_layout(e);
    unsigned i, out_done = 0;
    bool gone = false;

    g_test_message("event %s with %u IN and %u OUT TDs queued",
                   queue_event_names[ev], n_in, n_out);
    qxhci_hold_doorbells(e->dev, true);
    for (i = 0; i < n_out; i++) {
        g_autoptr(GPtrArray) one = frames_new();
        g_autoptr(GByteArray) ntb = NULL;

        frames_add(one, bcast_mac, tag + i, 301 + i * 64);
        frames_add(tx, bcast_mac, tag + i, 301 + i * 64);
        ntb = ntb_build(&l, one, i);
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
        fault_set(e, "x-fault-busy-ms", 1000000);
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
        g_assert_cmpint(qxhci_control(e->dev, 0x01, USB_REQ_SET_INTERFACE,
                                      1, IF_DATA, NULL, 0, NULL),
                        ==, QXHCI_CC_SUCCESS);
        break;
    case QEV_SET_CONFIGURATION_0:
    case QEV_SET_CONFIGURATION_1:
        ncm_set_configuration(e, ev == QEV_SET_CONFIGURATION_1);
        break;
    case QEV_PORT_RESET:
        g_assert_cmpint(qxhci_port_reset(e->xhci, e->port), ==,
                        e->c->super ? QXHCI_SPEED_SUPER : QXHCI_SPEED_HIGH);
        break;
    case QEV_STOP_ENDPOINT:
        g_assert_cmpint(qxhci_endpoint_cancel(e->dev, e->ep_in.address),
                        ==, QXHCI_CC_SUCCESS);
        g_assert_cmpint(qxhci_endpoint_cancel(e->dev, e->ep_out.address),
                        ==, QXHCI_CC_SUCCESS);
        break;
    case QEV_DEVICE_DEL:
        qtest_qmp_device_del(e->qts, "ncm0");
        g_assert_cmpint(qxhci_take_port_events(e->xhci, e->port), >, 0);
        g_assert(e->dev->gone);
        gone = true;
        break;
    case QEV_FAULT_BUSY:
        if (n_in) {
            frames_add(busy_rx, ncm_mac, tag + 50, 900);
            sock_send_frames(e, busy_rx);
            sock_settle(e);
        }
        fault_set(e, "x-fault-busy-ms", 0);
        break;
    default:
        g_assert_not_reached();
    }
    assert_alive(e);

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
            g_assert(qxhci_wait(out[i], RX_TIMEOUT_NS));
            g_assert_cmpint(out[i]->cc, ==, QXHCI_CC_SUCCESS);
        }
        out_done = n_out;
    }
    if (ev == QEV_SET_INTERFACE_0 || ev == QEV_SET_INTERFACE_1 ||
        ev == QEV_SET_CONFIGURATION_0 || ev == QEV_SET_CONFIGURATION_1 ||
        ev == QEV_PORT_RESET) {
        /* handed back: IN TDs empty, OUT TDs read first */
        for (i = 0; i < n_in; i++) {
            g_assert(in[i]->done);
            g_assert_cmpuint(in[i]->actual, ==, 0);
        }
        g_assert_cmpuint(out_done, ==, n_out);
    }
    if (ev == QEV_FAULT_BUSY && n_in) {
        /* the frame that came while busy went into the first IN TD */
        g_autoptr(GPtrArray) got = frames_new();

        g_assert(qxhci_wait(in[0], RX_TIMEOUT_NS));
        in_td_parse(e, in[0], e->in_size, got);
        frames_assert_equal(got, busy_rx);
    }
    for (i = 0; i < n_out; i++) {
        GByteArray *f = g_ptr_array_index(tx, i);

        if (i >= out_done) {
            break;
        }
        g_ptr_array_add(sent, g_byte_array_ref(f));
    }
    sock_expect_frames(e, sent);
    sock_expect_silence(e, 20);

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
    assert_alive(e);

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
        g_assert_cmpint(qxhci_control(e->dev, 0x01, USB_REQ_SET_INTERFACE,
                                      1, IF_DATA, NULL, 0, NULL),
                        ==, QXHCI_CC_SUCCESS);
        e->rx_seq = 0;
        break;
    default:
        break;
    }
    queue_check_traffic(e, tag + 100);
}

static void test_queue(NcmEnv *e, const NcmCase *c)
{
    const QueueCase *q = c->data;
    g_autoptr(QDict) before = NULL;
    g_autoptr(QDict) after = NULL;
    unsigned i, j, n = 0;

    ncm_set_alt(e, 1);
    before = ncm_stats(e);
    for (i = 0; i < ARRAY_SIZE(queue_in_counts); i++) {
        for (j = 0; j < ARRAY_SIZE(queue_out_counts); j++) {
            queue_round(e, q->event, queue_in_counts[i],
                        queue_out_counts[j], 20000 + n++ * 200);
        }
    }
    if (q->event != QEV_DEVICE_DEL) {
        after = ncm_stats(e);
        assert_stat_delta(before, after, "bad_requests", 0);
        assert_stat_delta(before, after, "out_overflow_bytes", 0);
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
    g_autoptr(GPtrArray) rx = frames_new();
    g_autoptr(GPtrArray) got = frames_new();
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
        frames_add(rx, bcast_mac, 30000, 60);
        frames_add(got, ncm_mac, 30001, 98);
        in_fill_in_turn(e, t, rx, got, 512);
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
        g_assert_cmpint(qxhci_control(e->dev, 0x01, USB_REQ_SET_INTERFACE,
                                      1, IF_DATA, NULL, 0, NULL),
                        ==, QXHCI_CC_SUCCESS);
        e->rx_seq = 0;
        break;
    }
    qxhci_transfer_free(t[0]);
    qxhci_transfer_free(t[1]);
    assert_alive(e);
    queue_check_traffic(e, 30100);
}

/*
 * Frames whose IN NTB (as the device builds it) is exactly @len bytes.
 * The device takes another frame only while a largest one would still
 * fit, so when there are several the last is a largest one.
 */
static GPtrArray *frames_for_ntb_len(NcmEnv *e, uint32_t len, uint32_t tag)
{
    GPtrArray *f = frames_new();
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
        frames_add(f, bcast_mac, tag, first);
        for (i = 1; i < n; i++) {
            frames_add(f, i % 2 ? ncm_mac : bcast_mac, tag + i,
                       i == n - 1 ? 1514 : each);
        }
        ntb = in_ntb_expected(e, f, 0);
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
    g_autoptr(GPtrArray) more = frames_new();
    g_autoptr(GPtrArray) got = frames_new();
    g_autoptr(GByteArray) ntb = g_byte_array_new();
    g_autoptr(QDict) before = NULL;
    g_autoptr(QDict) after = NULL;
    QXhciTransfer *t[3];
    bool zlp = *z == ZLP_PACKET_TDS || *z == ZLP_FILLED_TD;

    if (*z == ZLP_INPUT_SIZE) {
        uint8_t b[4];

        stl_le_p(b, 4096);
        g_assert_cmpint(class_out(e, REQ_SET_NTB_INPUT_SIZE, 0, b, 4),
                        ==, QXHCI_CC_SUCCESS);
        e->in_size = 4096;
    }
    ncm_set_alt(e, 1);
    rx = frames_for_ntb_len(e, ntb_len, 31000);
    before = ncm_stats(e);
    qxhci_hold_doorbells(e->dev, true);
    for (i = 0; i < n_td; i++) {
        t[i] = qxhci_submit(e->dev, e->ep_in.address, NULL, td_len);
    }
    qxhci_hold_doorbells(e->dev, false);
    qxhci_ring_doorbell(e->dev, e->ep_in.address);
    g_test_message("first TD in %u TRBs, first %u bytes", t[0]->ntrbs,
                   t[0]->trb_len[0]);
    sock_send_frames(e, rx);
    for (i = 0; i < n_td - 1; i++) {
        g_autofree uint8_t *buf = g_malloc(td_len);

        g_assert(qxhci_wait(t[i], RX_TIMEOUT_NS));
        qxhci_transfer_read(t[i], buf);
        g_byte_array_append(ntb, buf, t[i]->actual);
    }
    g_assert_cmpuint(ntb->len, ==, ntb_len);
    ntb_parse_in(e, ntb->data, ntb->len, e->in_size, got);
    frames_assert_equal(got, rx);
    for (i = 0; i < 10; i++) {
        qxhci_step(e->xhci);
    }
    after = ncm_stats(e);
    if (zlp) {
        g_assert(t[n_td - 1]->done);
        g_assert_cmpuint(t[n_td - 1]->actual, ==, 0);
        assert_stat_delta(before, after, "in_zlps", 1);
    } else {
        /* no empty transfer: the last TD waits for the next NTB */
        g_assert(!t[n_td - 1]->done);
        assert_stat_delta(before, after, "in_zlps", 0);
        frames_add(more, ncm_mac, 31100, 400);
        sock_send_frames(e, more);
        g_assert(qxhci_wait(t[n_td - 1], RX_TIMEOUT_NS));
        g_ptr_array_set_size(got, 0);
        in_td_parse(e, t[n_td - 1], e->in_size, got);
        frames_assert_equal(got, more);
    }
    if (*z == ZLP_FILLED_TD) {
        assert_stat_delta(before, after, "in_direct_ntbs", 1);
    }
    for (i = 0; i < n_td; i++) {
        qxhci_transfer_free(t[i]);
    }
    queue_check_traffic(e, 31200);
}

/*
 * A smaller input size drops what was queued for the old one; frames the
 * netdev held back meanwhile must flow again at once.
 */
static void test_rx_input_size_flush(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) rx = frames_new();
    g_autoptr(GPtrArray) got = NULL;
    g_autoptr(GPtrArray) next = frames_new();
    g_autoptr(QDict) before = NULL;
    g_autoptr(QDict) after = NULL;
    uint64_t flushed, backlog;
    uint8_t b[4];
    unsigned i;

    ncm_set_alt(e, 1);
    before = ncm_stats(e);
    for (i = 0; i < 100; i++) {
        frames_add(rx, ncm_mac, 32000 + i, 1000);
    }
    sock_send_frames(e, rx);
    sock_settle(e);
    stl_le_p(b, 2048);
    g_assert_cmpint(class_out(e, REQ_SET_NTB_INPUT_SIZE, 0, b, 4),
                    ==, QXHCI_CC_SUCCESS);
    e->in_size = 2048;
    sock_settle(e);
    after = ncm_stats(e);
    flushed = stat_delta(before, after, "in_flushed_datagrams");
    g_assert_cmpuint(flushed, >, 0);
    backlog = rx->len - flushed;
    g_test_message("%" PRIu64 " flushed, %" PRIu64 " still to come",
                   flushed, backlog);
    got = ncm_receive(e, backlog, e->p.in_max, 2048);
    for (i = 0; i < backlog; i++) {
        g_ptr_array_add(next, g_byte_array_ref(
                            g_ptr_array_index(rx, flushed + i)));
    }
    frames_assert_equal(got, next);
    ncm_expect_no_rx(e);
}

/*
 * A host buffer smaller than the largest frame is not built into; a
 * jumbo frame then goes out through it in pieces and RX stays alive.
 */
static void test_rx_jumbo_small_td(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) rx = frames_new();
    g_autoptr(GPtrArray) got = frames_new();
    g_autoptr(GByteArray) ntb = g_byte_array_new();
    g_autofree uint8_t *buf = g_malloc(65536);
    QXhciTransfer *t;

    ncm_set_alt(e, 1);
    t = in_park(e, 2048, 0);
    frames_add(rx, ncm_mac, 33000, 8000);
    sock_send_frames(e, rx);
    g_assert(qxhci_wait(t, RX_TIMEOUT_NS));
    g_assert_cmpuint(t->actual, ==, 2048);
    qxhci_transfer_read(t, buf);
    g_byte_array_append(ntb, buf, t->actual);
    qxhci_transfer_free(t);
    t = qxhci_submit(e->dev, e->ep_in.address, NULL, 65536);
    g_assert(qxhci_wait(t, RX_TIMEOUT_NS));
    qxhci_transfer_read(t, buf);
    g_byte_array_append(ntb, buf, t->actual);
    qxhci_transfer_free(t);
    ntb_parse_in(e, ntb->data, ntb->len, e->in_size, got);
    frames_assert_equal(got, rx);
    queue_check_traffic(e, 33100);
}

/*
 * A host buffer that ends inside a packet, with more of the NTB to come:
 * a real function sends a full packet and the host sees babble.  The NTB
 * is lost, counted and reported; after the host resets the endpoint the
 * next NTB comes whole.
 */
static void test_rx_babble(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) rx = frames_new();
    g_autoptr(QDict) before = NULL;
    g_autoptr(QDict) after = NULL;
    QXhciTransfer *t;

    ncm_set_alt(e, 1);
    before = ncm_stats(e);
    t = in_park(e, 100, 0);
    frames_add(rx, ncm_mac, 38000, 500);
    sock_send_frames(e, rx);
    g_assert(qxhci_wait(t, RX_TIMEOUT_NS));
    g_assert_cmpint(t->cc, ==, QXHCI_CC_BABBLE);
    qxhci_transfer_free(t);
    after = ncm_stats(e);
    assert_stat_delta(before, after, "in_babbles", 1);
    assert_stat_delta(before, after, "in_flushed_datagrams", 1);
    /* the halted endpoint is reset; the lost NTB left a sequence gap */
    g_assert_cmpint(qxhci_endpoint_cancel(e->dev, e->ep_in.address), ==,
                    QXHCI_CC_SUCCESS);
    e->rx_seq++;
    queue_check_traffic(e, 38100);
}

/*
 * Re-enumeration fault: off the bus now, back after N ms (once, then
 * periodically); the host finds it again and traffic resumes.
 */
static void replug_wait_back(NcmEnv *e)
{
    int64_t deadline = clock_ns(e) + 5000 * MS;

    while (!(qxhci_portsc(e->xhci, e->port) & 1)) {
        g_assert_cmpint(clock_ns(e), <, deadline);
        qxhci_step(e->xhci);
    }
    qxhci_device_free(e->dev);
    e->dev = NULL;
    ncm_reenumerate(e);
    ncm_set_alt(e, 1);
}

static void test_fault_replug(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(QDict) before = NULL;
    g_autoptr(QDict) after = NULL;
    int64_t t0;
    unsigned i, events;

    ncm_set_alt(e, 1);
    ncm_check_marker(e, 39000);
    before = ncm_stats(e);
    t0 = clock_ns(e);
    fault_set(e, "x-fault-replug-ms", 300);
    g_assert_cmpint(qxhci_take_port_events(e->xhci, e->port), >, 0);
    g_assert(e->dev->gone);
    g_assert_cmpint(qom_get_int(e, "x-fault-replug-ms"), ==, 1);
    for (i = 0; i < 100 && clock_ns(e) - t0 < 250 * MS; i++) {
        qxhci_step(e->xhci);
        g_assert(!(qxhci_portsc(e->xhci, e->port) & 1));
    }
    replug_wait_back(e);
    g_assert_cmpint(clock_ns(e) - t0, >=, 300 * MS);
    g_assert_cmpint(qom_get_int(e, "x-fault-replug-ms"), ==, 0);
    queue_check_traffic(e, 39100);
    after = ncm_stats(e);
    assert_stat_delta(before, after, "replugs", 1);

    /* periodic: every 400 ms +- 50 down for 100 ms, for 2 s */
    fault_set(e, "x-fault-replug-ms", 0);
    fault_set(e, "x-fault-replug-seed", 7);
    qxhci_take_port_events(e->xhci, e->port);
    qtest_qmp_assert_success(e->qts, "{'execute': 'qom-set', 'arguments': "
                             "{'path': %s, 'property': 'x-fault-replug-ms',"
                             " 'value': 100}}", NCM_QOM_PATH);
    replug_wait_back(e);
    fault_set(e, "x-fault-replug-every-ms", 400);
    t0 = clock_ns(e);
    while (clock_ns(e) - t0 < 2000 * MS) {
        qxhci_step(e->xhci);
    }
    fault_set(e, "x-fault-replug-every-ms", 0);
    events = qxhci_take_port_events(e->xhci, e->port);
    g_test_message("%u port status changes in 2 s of periodic replugs",
                   events);
    g_assert_cmpuint(events, >=, 6);
    replug_wait_back(e);
    queue_check_traffic(e, 39200);
    after = ncm_stats(e);
    g_assert_cmpuint(stat_delta(before, after, "replugs"), >=, 5);
}

/*
 * The filter at power-on: usb-ncm-dl passes only directed and broadcast
 * frames until the host sets one, usb-ncm all multicast as well.
 */
static void test_power_on_filter(NcmEnv *e, const NcmCase *c)
{
    static const uint8_t mcast[6] = { 0x33, 0x33, 0, 0, 0, 1 };
    bool dl = !strcmp(c->model, "usb-ncm-dl");
    g_autoptr(GPtrArray) rx = frames_new();
    g_autoptr(GPtrArray) want = frames_new();
    g_autoptr(QDict) before = NULL;
    g_autoptr(QDict) after = NULL;

    ncm_set_alt(e, 1);
    before = ncm_stats(e);
    frames_add(rx, mcast, 40000, 86);
    frames_add(rx, bcast_mac, 40001, 60);
    sock_send_frames(e, rx);
    frames_add(want, dl ? bcast_mac : mcast, dl ? 40001 : 40000,
               dl ? 60 : 86);
    if (!dl) {
        frames_add(want, bcast_mac, 40001, 60);
    }
    ncm_expect_rx(e, want);
    after = ncm_stats(e);
    assert_stat_delta(before, after, "rx_filtered", dl ? 1 : 0);

    /* once the host asks for all multicast, it comes */
    g_assert_cmpint(class_out(e, REQ_SET_ETHERNET_PACKET_FILTER, 0x0e, NULL,
                              0), ==, QXHCI_CC_SUCCESS);
    g_ptr_array_set_size(rx, 0);
    frames_add(rx, mcast, 40002, 86);
    sock_send_frames(e, rx);
    ncm_expect_rx(e, rx);
}

/* GET_STATUS of the control interface (USB 3: function remote wake) */
static uint16_t intf_status(NcmEnv *e)
{
    uint8_t b[2] = { 0xff, 0xff };
    uint32_t actual = 0;

    g_assert_cmpint(qxhci_control(e->dev, 0x81, USB_REQ_GET_STATUS, 0,
                                  IF_CONTROL, b, 2, &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(actual, ==, 2);
    return lduw_le_p(b);
}

/* SET_FEATURE(FUNCTION_SUSPEND) with @options (0x01 LP, 0x02 RW) */
static int func_suspend(NcmEnv *e, uint8_t options)
{
    return qxhci_control(e->dev, 0x01, USB_REQ_SET_FEATURE, 0,
                         options << 8 | IF_CONTROL, NULL, 0, NULL);
}

/*
 * Suspend the port (U3), send a frame from the netdev and give the device
 * 300 ms of virtual time to resume the port; returns the link state then.
 */
static int suspend_and_send(NcmEnv *e, uint32_t tag)
{
    g_autoptr(GPtrArray) rx = frames_new();
    int64_t t0;
    int pls;

    qxhci_port_set_link_state(e->xhci, e->port, QXHCI_PLS_U3);
    g_assert_cmpint(qxhci_port_link_state(e->xhci, e->port), ==,
                    QXHCI_PLS_U3);
    qxhci_take_port_events(e->xhci, e->port);
    frames_add(rx, ncm_mac, tag, 100);
    sock_send_frames(e, rx);
    t0 = clock_ns(e);
    do {
        qxhci_step(e->xhci);
        pls = qxhci_port_link_state(e->xhci, e->port);
    } while (pls == QXHCI_PLS_U3 && clock_ns(e) - t0 < 300 * MS);
    return pls;
}

/* Back to U0 after @pls; the frame sent while suspended comes in then */
static void resume_and_receive(NcmEnv *e, uint32_t tag, int pls)
{
    g_autoptr(GPtrArray) rx = frames_new();

    if (pls == QXHCI_PLS_RESUME) {
        /* the device woke the port: a port status change came with it */
        g_assert_cmpint(qxhci_take_port_events(e->xhci, e->port), >, 0);
    }
    qxhci_port_set_link_state(e->xhci, e->port, QXHCI_PLS_U0);
    g_assert_cmpint(qxhci_port_link_state(e->xhci, e->port), ==,
                    QXHCI_PLS_U0);
    frames_add(rx, ncm_mac, tag, 100);
    ncm_expect_rx(e, rx);
}

/*
 * Remote wakeup at super speed (USB 3.2 9.4.5, 9.4.9): the control
 * interface reports function remote wake capable in GET_STATUS; the host
 * enables it with SET_FEATURE(FUNCTION_SUSPEND, RW | LP), as Linux's
 * usb_enable_remote_wakeup() does at super speed (it never sends
 * DEVICE_REMOTE_WAKEUP there), and suspends the port; then a frame from
 * the netdev must resume the port.  Disabled again (options 0), the frame
 * waits for the host.  c->arg 0 is remote-wakeup=off: not capable, the
 * request to enable stalls, no frame wakes the port.
 */
static void test_function_remote_wake(NcmEnv *e, const NcmCase *c)
{
    bool rw = c->arg;
    int pls;

    ncm_set_alt(e, 1);
    g_assert_cmphex(intf_status(e), ==, rw ? 0x01 : 0x00);
    g_assert_cmpint(func_suspend(e, 0x03), ==,
                    rw ? QXHCI_CC_SUCCESS : QXHCI_CC_STALL);
    g_assert_cmphex(intf_status(e), ==, rw ? 0x03 : 0x00);
    pls = suspend_and_send(e, 43000);
    g_assert_cmpint(pls, ==, rw ? QXHCI_PLS_RESUME : QXHCI_PLS_U3);
    resume_and_receive(e, 43000, pls);

    /* function remote wake disabled: the frame waits for the host */
    g_assert_cmpint(func_suspend(e, 0x00), ==, QXHCI_CC_SUCCESS);
    g_assert_cmphex(intf_status(e), ==, rw ? 0x01 : 0x00);
    pls = suspend_and_send(e, 43001);
    g_assert_cmpint(pls, ==, QXHCI_PLS_U3);
    resume_and_receive(e, 43001, pls);
    ncm_check_marker(e, 43100);
}

/* SET_CONFIGURATION(0) turns the data interface off with the rest. */
static void test_set_configuration_0(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(GPtrArray) rx = frames_new();
    g_autoptr(QDict) before = NULL;
    g_autoptr(QDict) after = NULL;
    uint8_t byte = 0;

    ncm_set_alt(e, 1);
    ncm_set_configuration(e, 0);
    before = ncm_stats(e);
    frames_add(rx, ncm_mac, 34000, 500);
    sock_send_frames(e, rx);
    sock_settle(e);
    g_assert_cmpint(qxhci_transfer_sync(e->dev, e->ep_out.address, &byte, 1,
                                        NULL, RX_TIMEOUT_NS),
                    ==, QXHCI_CC_STALL);
    after = ncm_stats(e);
    assert_stat_delta(before, after, "rx_inactive_drops", 1);
    g_assert_cmpint(qxhci_endpoint_cancel(e->dev, e->ep_out.address), ==,
                    QXHCI_CC_SUCCESS);
    ncm_set_configuration(e, 1);
    g_assert_cmpint(qxhci_control(e->dev, 0x01, USB_REQ_SET_INTERFACE,
                                  1, IF_DATA, NULL, 0, NULL),
                    ==, QXHCI_CC_SUCCESS);
    e->rx_seq = 0;
    queue_check_traffic(e, 34100);
}

/*
 * x-park-packets=off: the OHCI way, every empty bulk IN NAKs and OUT is
 * read at once; data still flows both ways through queued TDs.
 */
static void test_nak_mode(NcmEnv *e, const NcmCase *c)
{
    g_autoptr(QDict) before = NULL;
    g_autoptr(QDict) after = NULL;

    ncm_set_alt(e, 1);
    before = ncm_stats(e);
    queue_check_traffic(e, 35000);
    after = ncm_stats(e);
    assert_stat_delta(before, after, "in_parked", 0);
    g_assert_cmpuint(stat_delta(before, after, "in_naks"), >, 0);
    assert_stat_delta(before, after, "out_deferred_packets", 0);
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
} MigCase;

static QDict *migrate_status(QTestState *qts)
{
    QDict *rsp = qtest_qmp(qts, "{'execute': 'query-migrate'}");
    QDict *ret = qdict_get_qdict(rsp, "return");

    g_assert(ret);
    qobject_ref(ret);
    qobject_unref(rsp);
    return ret;
}

/* Poll query-migrate on @qts until it says completed or failed. */
static bool migrate_wait(QTestState *qts)
{
    gint64 deadline = g_get_monotonic_time() + 60 * G_USEC_PER_SEC;

    for (;;) {
        g_autoptr(QDict) st = migrate_status(qts);
        const char *status = qdict_get_try_str(st, "status");

        if (status && !strcmp(status, "completed")) {
            return true;
        }
        if (status && !strcmp(status, "failed")) {
            g_test_message("migration failed: %s",
                           qdict_get_try_str(st, "error-desc") ?: "?");
            return false;
        }
        g_assert(g_get_monotonic_time() < deadline);
        g_usleep(10 * 1000);
    }
}

/*
 * Save the machine to @file and stop the source; start a destination
 * with @props for the adapter and load it there.  Returns the
 * destination, or NULL (and it is gone) when it refused the state.
 */
static QTestState *migrate_via_file(NcmEnv *e, const char *file,
                                    const char *props, int *sock)
{
    g_autofree char *fw = firmware_args();
    g_autofree char *uri = g_strdup_printf("exec:cat > %s", file);
    g_autofree char *in = g_strdup_printf("exec:cat %s", file);
    QTestState *dst;
    int sv[2];
    bool ok;

    qtest_qmp_assert_success(e->qts, "{'execute': 'migrate', 'arguments': "
                             "{'uri': %s}}", uri);
    g_assert(migrate_wait(e->qts));

    g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), ==, 0);
    dst = qtest_initf("-nodefaults%s -netdev socket,id=n0,fd=%d "
                      "-device qemu-xhci,id=xhci,addr=04.0%s "
                      "-device %s,id=ncm0,bus=xhci.0,netdev=n0,"
                      "mac=" NCM_MAC_STR "%s%s -incoming defer",
                      fw, sv[1], e->c->super ? "" : ",p3=0", e->c->model,
                      props ? "," : "", props ? props : "");
    close(sv[1]);
    qtest_qmp_assert_success(dst, "{'execute': 'migrate-incoming', "
                             "'arguments': {'uri': %s, "
                             "'exit-on-error': false}}", in);
    ok = migrate_wait(dst);
    if (!ok) {
        close(sv[0]);
        qtest_quit(dst);
        return NULL;
    }
    *sock = sv[0];
    return dst;
}

/* The test goes on with the destination: QEMU, netdev socket, driver. */
static void ncm_follow_migration(NcmEnv *e, QTestState *dst, int sock)
{
    qtest_quit(e->qts);
    close(e->sock);
    e->sock = sock;
    e->qts = dst;
    e->qs->qts = dst;
    qpci_free_pc(e->qs->pcibus);
    e->qs->pcibus = qpci_new_pc(dst, &e->qs->alloc);
    g_free(e->pdev);
    e->pdev = qpci_device_find(e->qs->pcibus, XHCI_DEVFN);
    g_assert(e->pdev);
    qxhci_migrated(e->xhci, dst, e->pdev);
}

static void test_migrate(NcmEnv *e, const NcmCase *c)
{
    const MigCase *m = c->data;
    g_autoptr(GPtrArray) rx = frames_new();
    g_autoptr(GPtrArray) got = frames_new();
    g_autoptr(GPtrArray) tx = frames_new();
    g_autoptr(GByteArray) ntb = NULL;
    g_autoptr(QDict) before = NULL;
    g_autoptr(QDict) after = NULL;
    g_autofree char *file = g_strdup_printf("%s/usb-ncm-mig-%d",
                                            g_get_tmp_dir(), getpid());
    const char *dst_props = NULL;
    QXhciTransfer *in[2];
    QTestState *dst;
    NtbLayout l;
    uint8_t b[4];
    uint32_t actual = 0, half;
    int sock = -1;
    unsigned i;

    /* negotiated state that differs from the defaults */
    g_assert_cmpint(class_out(e, REQ_SET_NTB_FORMAT, 1, NULL, 0), ==,
                    QXHCI_CC_SUCCESS);
    e->ntb32 = true;
    stl_le_p(b, 16384);
    g_assert_cmpint(class_out(e, REQ_SET_NTB_INPUT_SIZE, 0, b, 4), ==,
                    QXHCI_CC_SUCCESS);
    e->in_size = 16384;
    ncm_set_alt(e, 1);
    e->ntb32 = true;
    e->in_size = 16384;
    frames_add(rx, ncm_mac, 36000, 300);
    sock_send_frames(e, rx);
    ncm_expect_rx(e, rx);
    g_ptr_array_set_size(rx, 0);

    /* an OUT transfer half way: two full packets, no end yet */
    for (i = 0; i < 3; i++) {
        frames_add(tx, bcast_mac, 36100 + i, 600 + i * 100);
    }
    l = out_layout(e);
    ntb = ntb_build(&l, tx, 1);
    half = 2 * e->mps;
    g_assert_cmpuint(ntb->len, >, half);
    if (*m == MIG_REFUSE_OUT_BUFFER) {
        /* more than a zlp=auto device's 64 KiB buffer holds */
        g_autofree uint8_t *zeros = g_malloc0(32768);

        for (i = 0; i < 3; i++) {
            out_td(e, zeros, 32768);
        }
        dst_props = "zlp=auto";
    } else {
        out_td(e, ntb->data, half);
    }

    /*
     * An IN NTB under construction in the host's waiting TD (built in
     * place), held there by the busy fault.
     */
    qxhci_hold_doorbells(e->dev, true);
    for (i = 0; i < 2; i++) {
        in[i] = qxhci_submit(e->dev, e->ep_in.address, NULL, 16384);
    }
    qxhci_hold_doorbells(e->dev, false);
    qxhci_ring_doorbell(e->dev, e->ep_in.address);
    for (i = 0; i < 5; i++) {
        qxhci_step(e->xhci);
    }
    fault_set(e, "x-fault-busy-ms", 300);
    for (i = 0; i < 3; i++) {
        frames_add(rx, i % 2 ? ncm_mac : bcast_mac, 36200 + i,
                   *m == MIG_REFUSE_INPUT_SIZE ? 1514 : 200 + i * 300);
    }
    if (*m == MIG_REFUSE_INPUT_SIZE) {
        dst_props = "ntb-in-max-size=4096";
    }
    sock_send_frames(e, rx);
    sock_settle(e);
    g_assert(!in[0]->done);
    before = ncm_stats(e);

    dst = migrate_via_file(e, file, dst_props, &sock);
    unlink(file);
    if (*m != MIG_MID_TRANSFER) {
        /* refused, and said so; the source is stopped but alive */
        g_assert(!dst);
        assert_alive(e);
        qxhci_transfer_free(in[0]);
        qxhci_transfer_free(in[1]);
        qtest_qmp_assert_success(e->qts, "{'execute': 'cont'}");
        return;
    }
    g_assert(dst);
    ncm_follow_migration(e, dst, sock);

    /* the NTB under construction arrives whole, in sequence, as NTB32 */
    g_assert(qxhci_wait(in[0], RX_TIMEOUT_NS));
    in_td_parse(e, in[0], 16384, got);
    frames_assert_equal(got, rx);
    qxhci_transfer_free(in[0]);
    /* the second TD waits on */
    for (i = 0; i < 5; i++) {
        qxhci_step(e->xhci);
    }
    g_assert(!in[1]->done);
    qxhci_transfer_free(in[1]);

    /* the OUT transfer goes on where it was */
    ncm_send(e, ntb->data + half, ntb->len - half);
    sock_expect_frames(e, tx);

    /* what was negotiated is still in force */
    g_assert_cmpint(class_in(e, REQ_GET_NTB_INPUT_SIZE, 0, b, 4, &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(ldl_le_p(b), ==, 16384);
    g_assert_cmpint(class_in(e, REQ_GET_NTB_FORMAT, 0, b, 2, &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(lduw_le_p(b), ==, 1);
    after = ncm_stats(e);
    /* saving took them out of the source's TD; the destination sent them */
    assert_stat_delta(before, after, "in_rescued_datagrams", rx->len);
    assert_stat_delta(before, after, "in_ntbs", 1);
    assert_stat_delta(before, after, "out_datagrams", tx->len);
    assert_stat_delta(before, after, "in_flushed_datagrams", 0);
    queue_check_traffic(e, 36300);
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
    g_autoptr(GPtrArray) rx = frames_new();
    g_autoptr(GPtrArray) got = frames_new();
    g_autoptr(GPtrArray) tx = frames_new();
    g_autoptr(QDict) before = NULL;
    g_autoptr(QDict) after = NULL;
    g_autofree char *file = g_strdup_printf("%s/usb-ncm-mig-q-%d",
                                            g_get_tmp_dir(), getpid());
    QXhciTransfer *in[3];
    QTestState *dst;
    int sock = -1;
    unsigned i;

    ncm_set_alt(e, 1);
    qxhci_hold_doorbells(e->dev, true);
    for (i = 0; i < 3; i++) {
        in[i] = qxhci_submit(e->dev, e->ep_in.address, NULL, e->p.in_max);
    }
    qxhci_hold_doorbells(e->dev, false);
    qxhci_ring_doorbell(e->dev, e->ep_in.address);
    frames_add(rx, ncm_mac, 36400, 700);
    sock_send_frames(e, rx);
    g_assert(qxhci_wait(in[0], RX_TIMEOUT_NS));
    in_td_parse(e, in[0], e->in_size, got);
    frames_assert_equal(got, rx);
    qxhci_transfer_free(in[0]);
    frames_add(tx, bcast_mac, 36401, 900);
    ncm_send_frames(e, tx);
    sock_expect_frames(e, tx);
    for (i = 0; i < 5; i++) {
        qxhci_step(e->xhci);
    }
    g_assert(!in[1]->done && !in[2]->done);
    before = ncm_stats(e);

    dst = migrate_via_file(e, file, NULL, &sock);
    unlink(file);
    g_assert(dst);
    ncm_follow_migration(e, dst, sock);

    /* the parked TD, then the queued one, take the next NTBs */
    for (i = 1; i < 3; i++) {
        g_ptr_array_set_size(rx, 0);
        g_ptr_array_set_size(got, 0);
        frames_add(rx, i == 1 ? bcast_mac : ncm_mac, 36401 + i, 600 * i);
        sock_send_frames(e, rx);
        g_assert(qxhci_wait(in[i], RX_TIMEOUT_NS));
        in_td_parse(e, in[i], e->in_size, got);
        frames_assert_equal(got, rx);
        qxhci_transfer_free(in[i]);
    }
    /* the first frame out of the destination is the next one sent */
    g_ptr_array_set_size(tx, 0);
    frames_add(tx, bcast_mac, 36404, 1000);
    ncm_send_frames(e, tx);
    sock_expect_frames(e, tx);
    after = ncm_stats(e);
    assert_stat_delta(before, after, "in_ntbs", 2);
    assert_stat_delta(before, after, "out_datagrams", 1);
    queue_check_traffic(e, 36500);
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
    g_autoptr(GPtrArray) rx = frames_new();
    g_autoptr(QDict) saved = NULL;
    g_autoptr(QDict) now = NULL;
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
    g_assert_cmpint(class_out(e, REQ_SET_NTB_INPUT_SIZE, 0, b, 4), ==,
                    QXHCI_CC_SUCCESS);
    e->in_size = 8192;
    ncm_set_alt(e, 1);
    e->in_size = 8192;
    frames_add(rx, ncm_mac, 37000, 500);
    sock_send_frames(e, rx);
    ncm_expect_rx(e, rx);
    fault_set(e, "x-fault-drop-in-every", 7);
    saved = ncm_stats(e);

    qtest_qmp_assert_success(e->qts, "{'execute': 'snapshot-save', "
                             "'arguments': {'job-id': 's0', 'tag': 'ncm', "
                             "'vmstate': 'disk0', 'devices': ['disk0']}}");
    g_assert(qmp_job_wait(e->qts, "s0"));

    /* change what the snapshot holds, without touching the rings */
    fault_set(e, "x-fault-drop-in-every", 0);
    set_link(e, false);
    set_link(e, true);

    qtest_qmp_assert_success(e->qts, "{'execute': 'snapshot-load', "
                             "'arguments': {'job-id': 'l0', 'tag': 'ncm', "
                             "'vmstate': 'disk0', 'devices': ['disk0']}}");
    g_assert(qmp_job_wait(e->qts, "l0"));
    unlink(img);

    g_assert_cmpint(qom_get_int(e, "x-fault-drop-in-every"), ==, 7);
    now = ncm_stats(e);
    assert_stat_delta(saved, now, "in_ntbs", 0);
    assert_stat_delta(saved, now, "notifications", 0);
    g_assert_cmpint(class_in(e, REQ_GET_NTB_INPUT_SIZE, 0, b, 4, &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(ldl_le_p(b), ==, 8192);
    fault_set(e, "x-fault-drop-in-every", 0);
    /* and the data path picks up where the snapshot left it */
    g_ptr_array_set_size(rx, 0);
    frames_add(rx, ncm_mac, 37001, 800);
    sock_send_frames(e, rx);
    ncm_expect_rx(e, rx);
    ncm_check_marker(e, 37100);
}

/* Registration */

static void run_case(const void *data)
{
    const NcmCase *c = data;
    NcmEnv *e = ncm_start(c);

    c->fn(e, c);
    sock_expect_silence(e, 0);
    assert_alive(e);
    ncm_stop(e);
}

static NcmCase *add_case_data(bool super, const char *model,
                              const char *name,
                              void (*fn)(NcmEnv *e, const NcmCase *c),
                              const void *data, const char *props)
{
    NcmCase *c = g_new0(NcmCase, 1);
    g_autofree char *path = NULL;

    c->super = super;
    c->model = model;
    c->props = props;
    c->data = data;
    c->fn = fn;
    path = g_strdup_printf("/usb-ncm-dl/%s/%s%s%s", super ? "super" : "high",
                           strcmp(model, "usb-ncm-dl") ? model : "",
                           strcmp(model, "usb-ncm-dl") ? "/" : "", name);
    qtest_add_data_func(path, c, run_case);
    return c;
}

static void add_case(bool super, const char *model, const char *name,
                     void (*fn)(NcmEnv *e, const NcmCase *c), int arg,
                     const char *props)
{
    add_case_data(super, model, name, fn, NULL, props)->arg = arg;
}

static void add_migration_cases(bool ss)
{
    static const MigCase cases[] = {
        MIG_MID_TRANSFER, MIG_REFUSE_INPUT_SIZE, MIG_REFUSE_OUT_BUFFER,
    };
    static const char *const names[] = {
        "migrate/mid-transfer", "migrate/refused/input-size",
        "migrate/refused/out-buffer",
    };
    unsigned i;

    for (i = 0; i < ARRAY_SIZE(cases); i++) {
        add_case_data(ss, "usb-ncm-dl", names[i], test_migrate, &cases[i],
                      NULL);
    }
    add_case_data(ss, "usb-ncm-dl", "savevm-loadvm", test_savevm, NULL,
                  NULL);
    add_case_data(ss, "usb-ncm-dl", "migrate/queued-in-tds",
                  test_migrate_queued_tds, NULL, NULL);
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
    static const ZlpCase zlps[] = {
        ZLP_PACKET_TDS, ZLP_FILLED_TD, ZLP_SHORT_TD, ZLP_INPUT_SIZE,
    };
    static const char *const zlp_names[] = {
        "zlp/ntb-over-packet-sized-tds", "zlp/ntb-fills-td",
        "zlp/none-when-td-ends-short", "zlp/none-at-input-size",
    };
    const char *dl = "usb-ncm-dl";
    bool slow = g_test_slow();
    unsigned i;

    for (i = 0; i < QEV__MAX; i++) {
        g_autofree char *name = g_strdup_printf("queue/%s",
                                                queue_event_names[i]);
        g_autofree char *nak = g_strdup_printf("queue/nak-mode/%s",
                                               queue_event_names[i]);

        if (ss || slow) {
            add_case_data(ss, dl, name, test_queue, &events[i], NULL);
        }
        if (slow) {
            add_case_data(ss, dl, nak, test_queue, &events[i],
                          "x-park-packets=off");
            add_case_data(ss, "usb-ncm", name, test_queue, &events[i], NULL);
        }
    }
    for (i = 0; i < ARRAY_SIZE(aborts); i++) {
        g_autofree char *name = g_strdup_printf("queue/%s", abort_names[i]);

        add_case_data(ss, dl, name, test_queue_abort, &aborts[i], NULL);
    }
    for (i = 0; i < ARRAY_SIZE(zlps); i++) {
        g_autofree char *nak = g_strdup_printf("%s/nak-mode", zlp_names[i]);

        add_case_data(ss, dl, zlp_names[i], test_zlp, &zlps[i], NULL);
        if (zlps[i] == ZLP_PACKET_TDS || slow) {
            add_case_data(ss, dl, nak, test_zlp, &zlps[i],
                          "x-park-packets=off");
        }
    }
    add_case_data(ss, dl, "rx/input-size-drop-restarts-rx",
                  test_rx_input_size_flush, NULL, NULL);
    add_case_data(ss, dl, "rx/jumbo-frame-small-td", test_rx_jumbo_small_td,
                  NULL, "max-segment-size=8192");
    add_case_data(ss, dl, "rx/babble-buffer-ends-inside-packet",
                  test_rx_babble, NULL, NULL);
    add_case_data(ss, dl, "fault/replug", test_fault_replug, NULL, NULL);
    add_case_data(ss, dl, "power-on-filter", test_power_on_filter, NULL,
                  NULL);
    add_case_data(ss, "usb-ncm", "power-on-filter", test_power_on_filter,
                  NULL, NULL);
    if (ss) {
        add_case(ss, dl, "remote-wake/function-suspend",
                 test_function_remote_wake, 1, NULL);
        add_case(ss, dl, "remote-wake/off", test_function_remote_wake, 0,
                 "remote-wakeup=off");
    }
    add_case_data(ss, dl, "set-configuration-0-data-off",
                  test_set_configuration_0, NULL, NULL);
    add_case_data(ss, dl, "nak-mode/traffic", test_nak_mode, NULL,
                  "x-park-packets=off");
    add_migration_cases(ss);
}

static void add_speed(bool ss)
{
    static const char *const models[] = { "usb-ncm-dl", "usb-ncm" };
    const char *dl = "usb-ncm-dl";
    unsigned m, i;

    add_case(ss, dl, "ntb-parameters/default", test_ntb_parameters_default,
             0, NULL);
    add_case(ss, dl, "ntb-parameters/custom", test_ntb_parameters_custom,
             0, CUSTOM_PROPS);
    add_case(ss, dl, "ntb-input-size", test_ntb_input_size, 0, NULL);
    add_case(ss, dl, "ntb-format", test_ntb_format, 0, NULL);
    add_case(ss, dl, "unsupported-request-stalls", test_unsupported_request,
             0, NULL);
    add_case(ss, dl, "alt-setting/resets-data-state", test_alt_reset, 0,
             NULL);
    add_case(ss, dl, "notify/after-alt-setting", test_notify_alt, 0, NULL);
    add_case(ss, dl, "notify/set-link", test_notify_link, 0, NULL);
    add_case(ss, dl, "tx/1-datagram", test_tx_datagrams, 1, NULL);
    add_case(ss, dl, "tx/40-datagrams", test_tx_datagrams, 40, NULL);
    add_case(ss, dl, "tx/max-datagrams", test_tx_datagrams, 0, NULL);
    add_case(ss, dl, "tx/windows-pad", test_tx_windows_pad, 0, NULL);
    add_case(ss, dl, "rx/input-size-limit", test_rx_input_size, 0, NULL);
    add_case(ss, dl, "rx/backlog-1000", test_rx_backlog, 0, NULL);
    add_case(ss, dl, "xhci/ring-wrap", test_ring_wrap, 0, NULL);
    add_queue_cases(ss);
    add_case(ss, dl, "fault/link-down-ms", test_fault_link_down, 0, NULL);
    add_case(ss, dl, "fault/link-down-ms-0-ends-early", test_fault_link_down,
             1, NULL);
    add_case(ss, dl, "fault/busy-ms", test_fault_busy, 0, NULL);
    add_case(ss, dl, "fault/drop-in-every-2", test_fault_drop_in, 0, NULL);
    for (i = 0; i < CORRUPT_SHORT_NOTIFY; i++) {
        g_autofree char *name = g_strdup_printf("fault/corrupt-in/%s",
                                                corrupt_names[i]);
        g_autofree char *name32 = g_strdup_printf("fault/corrupt-in/ntb32/%s",
                                                  corrupt_names[i]);

        add_case(ss, dl, name, test_fault_corrupt, i, NULL);
        add_case(ss, dl, name32, test_fault_corrupt, i | CORRUPT_NTB32, NULL);
    }
    add_case(ss, dl, "fault/corrupt-in/short-notification",
             test_fault_short_notify, 0, NULL);
    add_case(ss, dl, "fault/corrupt-count-2", test_fault_corrupt_count, 0,
             NULL);
    add_case(ss, dl, "fault/corrupt-in/invalid-name-rejected",
             test_fault_corrupt_invalid, 0, NULL);
    for (m = 0; m < ARRAY_SIZE(models); m++) {
        add_case(ss, models[m], "descriptors", test_descriptors, 0, NULL);
        add_case(ss, models[m], "tx/64k-ntb", test_tx_64k, 0, NULL);
        add_case(ss, models[m], "tx/split-ntb", test_tx_split, 0, NULL);
        add_case(ss, models[m], "tx/exact-multiple", test_tx_exact_multiple,
                 0, NULL);
        add_case(ss, models[m], "rx/frames", test_rx_frames, 0, NULL);
        add_case(ss, models[m], "rx/direct-into-waiting-transfer",
                 test_rx_direct, 0, NULL);
        add_case(ss, models[m], "rx/copy-when-no-transfer-waiting",
                 test_rx_copy, 0, NULL);
        add_case(ss, models[m], "rx/direct-respects-input-size",
                 test_rx_direct_input_size, 0, NULL);
        add_case(ss, models[m], "rx/parked-transfer-cancelled/stop-endpoint",
                 test_rx_parked_cancel, CANCEL_STOP_ENDPOINT, NULL);
        add_case(ss, models[m], "rx/parked-transfer-cancelled/alt-0",
                 test_rx_parked_cancel, CANCEL_ALT_0, NULL);
        add_case(ss, models[m], "rx/parked-transfer-cancelled/port-reset",
                 test_rx_parked_cancel, CANCEL_PORT_RESET, NULL);
        add_case(ss, models[m],
                 "rx/parked-transfer-cancelled/control-set-interface",
                 test_rx_parked_cancel, CANCEL_CONTROL_SET_INTERFACE, NULL);
        add_case(ss, models[m], "rx/direct-small-first-segment",
                 test_rx_direct_small_first, 0, NULL);
        add_case(ss, models[m], "device-del", test_device_del, 0, NULL);
        add_case(ss, models[m], "port-reset-mid-ntb", test_port_reset, 0,
                 NULL);
        add_case(ss, models[m], "counters/tx-rx", test_counters, 0, NULL);
        add_case(ss, models[m], "counters/tx-rx-in-vcpu-thread",
                 test_counters, 1, "x-deferred-out=off");
        add_case(ss, models[m], "merge/exact-multiple-no-zlp", test_merge,
                 0, NULL);
        add_case(ss, models[m], "merge/exact-multiple-zlp", test_merge,
                 MERGE_ZLP, NULL);
        add_case(ss, models[m], "merge/64k-block-length-0-no-zlp",
                 test_merge, MERGE_64K, NULL);
        add_case(ss, models[m], "merge/64k-block-length-0-zlp", test_merge,
                 MERGE_64K | MERGE_ZLP, NULL);
        for (i = 0; i < BAD__MAX; i++) {
            g_autofree char *name = g_strdup_printf("malformed/%s",
                                                    bad_cases[i].name);

            add_case(ss, models[m], name, test_malformed, i,
                     bad_cases[i].props);
        }
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    if (!qtest_has_device("qemu-xhci") ||
        !qtest_has_device("usb-ncm-dl")) {
        g_test_message("qemu-xhci or usb-ncm-dl not available");
        return g_test_run();
    }
    add_speed(true);
    add_speed(false);
    return g_test_run();
}
