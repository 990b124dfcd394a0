/*
 * QTest fixture for the USB CDC-NCM adapters usb-ncm-dl and usb-ncm
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "fixture.h"
#include "hw/usb/ncm-eth-stats.h"
#include "libqos/malloc-pc.h"

#define SOCK_TIMEOUT_MS         5000

const uint8_t ncm_mac[6] = { 0x52, 0x54, 0x00, 0x12, 0x34, 0x56 };

const uint8_t ncm_peer_mac[6] = { 0x52, 0x54, 0x00, 0xaa, 0xbb, 0xcc };

const uint8_t ncm_other_mac[6] = { 0x52, 0x54, 0x00, 0x99, 0x99, 0x99 };

const uint8_t ncm_bcast_mac[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };

/* Frames */

GByteArray *ncm_make_frame(const uint8_t *dst, uint32_t tag, size_t len)
{
    GByteArray *f = g_byte_array_sized_new(len);
    uint8_t hdr[18];
    size_t i;

    g_assert(len >= 14);
    memcpy(hdr, dst, 6);
    memcpy(hdr + 6, ncm_peer_mac, 6);
    stw_be_p(hdr + 12, 0x88b5);         /* local experimental ethertype */
    stl_be_p(hdr + 14, tag);
    g_byte_array_append(f, hdr, MIN(len, sizeof(hdr)));
    for (i = f->len; i < len; i++) {
        uint8_t b = tag * 7 + i;

        g_byte_array_append(f, &b, 1);
    }
    return f;
}

GPtrArray *ncm_frames_new(void)
{
    return g_ptr_array_new_with_free_func((GDestroyNotify)g_byte_array_unref);
}

void ncm_frames_add(GPtrArray *a, const uint8_t *dst, uint32_t tag,
                    size_t len)
{
    g_ptr_array_add(a, ncm_make_frame(dst, tag, len));
}

void ncm_frames_assert_equal(GPtrArray *got, GPtrArray *want)
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

void ncm_sock_write_raw(NcmEnv *e, const uint8_t *buf, size_t len)
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

void ncm_sock_send_frames(NcmEnv *e, GPtrArray *frames)
{
    g_autoptr(GByteArray) buf = g_byte_array_new();
    g_autofree uint32_t *starts = g_new(uint32_t, frames->len + 1);
    unsigned i;

    for (i = 0; i < frames->len; i++) {
        GByteArray *f = g_ptr_array_index(frames, i);
        uint8_t len[4];

        starts[i] = buf->len;
        stl_be_p(len, f->len);
        g_byte_array_append(buf, len, 4);
        g_byte_array_append(buf, f->data, f->len);
    }
    ncm_migrate_note_sent(e, buf->data, buf->len, starts, frames->len);
    ncm_sock_write_raw(e, buf->data, buf->len);
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

/* One virtual-time step of @ns (0: the driver's 1 ms), then events. */
void ncm_step(NcmEnv *e, int64_t ns)
{
    if (ns) {
        qtest_clock_step(e->qts, ns);
        qxhci_poll(e->xhci);
    } else {
        qxhci_step(e->xhci);
    }
}

void ncm_sock_settle_by(NcmEnv *e, int64_t step_ns)
{
    int last = -2, same = 0, i;

    for (i = 0; i < 2000 && same < 20; i++) {
        int n = sock_unread(e);

        if (n == 0) {
            break;
        }
        same = n == last ? same + 1 : 0;
        last = n;
        ncm_step(e, step_ns);
    }
    /* and give the device's bottom halves a few more iterations */
    for (i = 0; i < 5; i++) {
        ncm_step(e, step_ns);
    }
}

/* Let QEMU take in what the test wrote, as far as it is willing to. */
void ncm_sock_settle(NcmEnv *e)
{
    ncm_sock_settle_by(e, 0);
}

static bool sock_read_exact(NcmEnv *e, uint8_t *buf, size_t len,
                            int timeout_ms, bool started)
{
    gint64 deadline = g_get_monotonic_time() +
                      (gint64)timeout_ms * G_TIME_SPAN_MILLISECOND;
    size_t off = ncm_migrate_take_carried(e, buf, len);

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

void ncm_sock_expect_frames(NcmEnv *e, GPtrArray *want)
{
    g_autoptr(GPtrArray) got = ncm_frames_new();
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
    ncm_frames_assert_equal(got, want);
}

void ncm_sock_expect_silence(NcmEnv *e, int timeout_ms)
{
    g_autoptr(GByteArray) f = sock_recv_frame(e, timeout_ms);
    uint32_t unexpected_frame_bytes = f ? f->len : 0;

    if (f) {
        g_test_message("unexpected %u-byte frame on the socket", f->len);
    }
    g_assert_cmpuint(unexpected_frame_bytes, ==, 0);
}

NcmHostLayout ncm_out_layout(NcmEnv *e)
{
    NcmHostLayout l = {
        .ntb32 = e->ntb32,
        .ndp_alignment = e->p.out_alignment,
        .divisor = e->p.out_divisor,
        .remainder = e->p.out_remainder,
    };
    return l;
}

NcmHostLayout ncm_in_layout(NcmEnv *e)
{
    NcmHostLayout l = {
        .ntb32 = e->ntb32,
        .ndp_last = true,
        .ndp_alignment = e->p.in_alignment,
        .divisor = e->p.in_divisor,
        .remainder = e->p.in_remainder,
    };
    return l;
}

/* As many @frame_len-byte frames as fit an NTB of exactly @len bytes. */
GByteArray *ncm_ntb_build_filled(NcmEnv *e, uint32_t len,
                                 uint32_t frame_len, uint32_t tag,
                                 GPtrArray *frames)
{
    NcmHostLayout l = ncm_out_layout(e);
    GByteArray *ntb = NULL;

    for (;;) {
        GByteArray *next;

        ncm_frames_add(frames, ncm_bcast_mac, tag + frames->len, frame_len);
        next = ncm_ntb_build(&l, frames, 0);
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
    ncm_ntb_pad_to(ntb, l.ntb32, len);
    return ntb;
}

/* Device */

char *ncm_firmware_args(void)
{
    return qxhci_firmware_args("USB_NCM_QTEST_FIRMWARE");
}

void ncm_hc_machine_start(NcmHcMachine *m, const char *hc,
                          const char *dev_opts)
{
    g_autofree char *fw = ncm_firmware_args();

    m->qts = qtest_initf("-nodefaults%s -netdev hubport,id=n0,hubid=0 "
                         "-device %s,addr=05.0 "
                         "-device usb-ncm-dl,%s,netdev=n0", fw, hc, dev_opts);
    pc_alloc_init(&m->alloc, m->qts, 0);
    m->bus = qpci_new_pc(m->qts, NULL);
    m->pdev = qpci_device_find(m->bus, QPCI_DEVFN(5, 0));
    g_assert(m->pdev);
    qpci_device_enable(m->pdev);
    /* a UHCI's registers are I/O ports in BAR 4 */
    m->bar = qpci_iomap(m->pdev, strstr(hc, "uhci") ? 4 : 0, NULL);
}

void ncm_hc_driver(NcmHcMachine *m, QHcd *h, QHcdType type)
{
    *h = (QHcd) {
        .type = type,
        .qts = m->qts,
        .alloc = &m->alloc,
        .pdev = m->pdev,
        .bar = m->bar,
        .bulk_mps = type == QHCD_EHCI ? 512 : 64,
    };
    qhcd_start(h);
}

void ncm_hc_machine_stop(NcmHcMachine *m)
{
    g_free(m->pdev);
    qpci_free_pc(m->bus);
    alloc_destroy(&m->alloc);
    qtest_quit(m->qts);
}

int ncm_class_in(NcmEnv *e, uint8_t req, uint16_t value, void *buf,
                 uint16_t len, uint32_t *actual)
{
    return qxhci_control(e->dev, 0xa1, req, value, NCM_IF_CONTROL, buf, len,
                         actual);
}

int ncm_class_out(NcmEnv *e, uint8_t req, uint16_t value,
                  const void *buf, uint16_t len)
{
    const uint8_t *b = buf;
    int cc = qxhci_control(e->dev, 0x21, req, value, NCM_IF_CONTROL,
                           (void *)buf, len, NULL);

    if (cc != QXHCI_CC_SUCCESS) {
        return cc;
    }
    /* what the oracle checks IN NTBs against (NCM 1.0 6.2.5, 6.2.7, 6.2.13) */
    switch (req) {
    case NCM_SET_NTB_FORMAT:
        e->neg.ntb32 = value == NCM_NTB_FORMAT_SELECT_32;
        break;
    case NCM_SET_CRC_MODE:
        e->neg.crc = value == NCM_CRC_APPENDED;
        break;
    case NCM_SET_NTB_INPUT_SIZE:
        if (len >= 4) {
            e->neg.in_size = ldl_le_p(b);
            e->neg.in_max_dgrams = len >= 8 ? lduw_le_p(b + 4) : 0;
        }
        break;
    default:
        break;
    }
    return cc;
}

/* The oracle */

static NcmOracleParams ncm_oracle_params(NcmEnv *e)
{
    NcmOracleParams p = {
        .ntb32 = e->neg.ntb32,
        .crc = e->neg.crc,
        .in_max_size = e->neg.in_size,
        .in_divisor = e->p.in_divisor,
        .in_remainder = e->p.in_remainder,
        .in_alignment = e->p.in_alignment,
        .in_max_datagrams = e->neg.in_max_dgrams,
        .max_packet = e->ep_in.max_packet & 0x7ff,
    };

    return p;
}

void ncm_oracle_in(NcmEnv *e, const uint8_t *buf, uint32_t len,
                   uint32_t requested)
{
    NcmOracleParams p = ncm_oracle_params(e);
    char why[256] = "";

    if (e->oracle_off) {
        return;
    }
    if (!ncm_oracle_in_transfer(e->oracle, &p, buf, len, requested, why,
                                sizeof(why))) {
        g_test_message("NCM oracle: bulk IN transfer of %u bytes "
                       "(buffer %u)", len, requested);
        g_assert_cmpstr(why, ==, "");
    }
}

void ncm_oracle_in_td(NcmEnv *e, QXhciTransfer *t)
{
    g_autofree uint8_t *buf = g_malloc(MAX(t->length, 1));

    g_assert(t->done);
    if (t->cc != QXHCI_CC_SUCCESS && t->cc != QXHCI_CC_SHORT_PACKET) {
        return;
    }
    qxhci_transfer_read(t, buf);
    ncm_oracle_in(e, buf, t->actual, t->length);
}

void ncm_oracle_catches(NcmEnv *e, const uint8_t *buf, uint32_t len,
                        uint32_t requested)
{
    NcmOracleParams p = ncm_oracle_params(e);
    char why[256] = "";

    if (ncm_oracle_in_transfer(e->oracle, &p, buf, len, requested, why,
                               sizeof(why))) {
        g_test_message("NCM oracle: let a corrupted IN NTB of %u bytes "
                       "through", len);
        g_assert_not_reached();
    }
    g_test_message("NCM oracle caught: %s", why);
}

void ncm_function_reset(NcmEnv *e, bool defaults)
{
    ncm_oracle_reset(e->oracle);
    if (defaults) {
        e->neg.ntb32 = false;
        e->neg.crc = false;
        e->neg.in_size = e->p.in_max;
        e->neg.in_max_dgrams = 0;
    }
}

void ncm_oracle_lost_ntb(NcmEnv *e)
{
    ncm_oracle_lost(e->oracle);
}

int ncm_get_descriptor(NcmEnv *e, uint8_t type, uint8_t index, uint16_t lang,
                       void *buf, uint16_t len, uint32_t *actual)
{
    uint32_t got = 0;
    char why[256] = "";
    int cc = qxhci_get_descriptor(e->dev, type, index, lang, buf, len, &got);

    if (cc == QXHCI_CC_SUCCESS &&
        !ncm_oracle_descriptor(type, index, len, buf, got, why,
                               sizeof(why))) {
        g_test_message("NCM oracle: GET_DESCRIPTOR(%u, %u, wLength %u) "
                       "returned %u bytes", type, index, len, got);
        g_assert_cmpstr(why, ==, "");
    }
    if (actual) {
        *actual = got;
    }
    return cc;
}

void ncm_read_ntb_parameters(NcmEnv *e, NcmNtbParams *p, uint8_t *raw)
{
    uint8_t b[28];
    uint32_t actual = 0;

    g_assert_cmpint(ncm_class_in(e, NCM_GET_NTB_PARAMETERS, 0, b, sizeof(b),
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
void ncm_enumerate(NcmEnv *e)
{
    QXhciEndpoint eps[4];
    const uint8_t *eth;
    uint8_t str[255];
    uint32_t actual = 0;
    int n;

    e->dev = qxhci_device_enumerate(e->xhci, e->port);
    g_assert(e->dev);
    g_assert_cmpint(e->dev->speed, ==, e->c->super ? QXHCI_SPEED_SUPER :
                    QXHCI_SPEED_HIGH);

    /* the device descriptor again, for the oracle (it learns the speed) */
    g_assert_cmpint(ncm_get_descriptor(e, 1, 0, 0, e->config, 18, &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpint(ncm_get_descriptor(e, 2, 0, 0, e->config, 9, &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(actual, ==, 9);
    e->config_len = lduw_le_p(e->config + 2);
    g_assert_cmpuint(e->config_len, <=, sizeof(e->config));
    g_assert_cmpint(ncm_get_descriptor(e, 2, 0, 0, e->config, e->config_len,
                                       &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(actual, ==, e->config_len);
    /* the LANGIDs and the MAC address string, as a host reads them */
    eth = ncm_find_cs_desc(e, CDC_DESC_ETHERNET);
    g_assert(eth);
    g_assert_cmpint(ncm_get_descriptor(e, 3, 0, 0, str, sizeof(str), &actual),
                    ==, QXHCI_CC_SUCCESS);
    g_assert_cmpint(ncm_get_descriptor(e, 3, eth[3], 0x0409, str,
                                       sizeof(str), &actual),
                    ==, QXHCI_CC_SUCCESS);

    n = qxhci_config_find_endpoints(e->config, e->config_len, NCM_IF_CONTROL, 0,
                                    eps, ARRAY_SIZE(eps));
    g_assert_cmpint(n, ==, 1);
    e->ep_notify = eps[0];
    g_assert_cmpint(qxhci_config_find_endpoints(e->config, e->config_len,
                                                NCM_IF_DATA, 0, eps,
                                                ARRAY_SIZE(eps)), ==, 0);
    n = qxhci_config_find_endpoints(e->config, e->config_len, NCM_IF_DATA, 1,
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
    g_assert_cmpint(qxhci_control(e->dev, 0x00, QXHCI_REQ_SET_CONFIGURATION,
                                  1, 0, NULL, 0, NULL),
                    ==, QXHCI_CC_SUCCESS);
    ncm_read_ntb_parameters(e, &e->p, NULL);
    e->ntb32 = false;
    e->in_size = e->p.in_max;
    e->rx_seq = 0;
    ncm_function_reset(e, true);
}

void ncm_set_alt(NcmEnv *e, int alt)
{
    uint8_t drop[2] = { e->ep_in.address, e->ep_out.address };
    QXhciEndpoint add[2] = { e->ep_in, e->ep_out };

    if (alt) {
        g_assert_cmpint(qxhci_configure_endpoints(e->dev, add, 2, NULL, 0),
                        ==, QXHCI_CC_SUCCESS);
    }
    g_assert_cmpint(qxhci_control(e->dev, 0x01, QXHCI_REQ_SET_INTERFACE, alt,
                                  NCM_IF_DATA, NULL, 0, NULL),
                    ==, QXHCI_CC_SUCCESS);
    if (!alt) {
        g_assert_cmpint(qxhci_configure_endpoints(e->dev, NULL, 0, drop, 2),
                        ==, QXHCI_CC_SUCCESS);
        /* NCM 1.0 7.2: back to the defaults */
        e->ntb32 = false;
        e->in_size = e->p.in_max;
    }
    e->rx_seq = 0;
    ncm_function_reset(e, !alt);
}

NcmEnv *ncm_start(const NcmCase *c)
{
    NcmEnv *e = g_new0(NcmEnv, 1);
    g_autofree char *fw = ncm_firmware_args();
    QXhciOptions opts = {
        /* small rings, so that every case wraps them */
        .cmd_ring_trbs = 8,
        .event_ring_trbs = 32,
        .xfer_ring_trbs = 16,
        .max_slots = 8,
    };
    /* a machine type both QEMUs of a cross-version migration know */
    const char *machine = g_getenv("NCM_QTEST_MACHINE");
    int sv[2];

    e->c = c;
    e->oracle = ncm_oracle_new();
    g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), ==, 0);
    e->qs = qtest_pc_boot("-nodefaults%s -netdev socket,id=n0,fd=%d "
                          "-device qemu-xhci,id=xhci,addr=04.0%s "
                          "-device %s,id=ncm0,bus=xhci.0,netdev=n0,"
                          "mac=" NCM_MAC_STR "%s%s%s%s",
                          fw, sv[1], c->super ? "" : ",p3=0", c->model,
                          c->props ? "," : "", c->props ? c->props : "",
                          machine ? " -machine " : "", machine ?: "");
    close(sv[1]);
    e->sock = sv[0];
    e->qts = e->qs->qts;
    e->pdev = qpci_device_find(e->qs->pcibus, NCM_XHCI_DEVFN);
    g_assert(e->pdev);
    e->xhci = qxhci_new(e->qts, e->pdev, &e->qs->alloc, &opts);
    e->port = qxhci_find_connected_port(e->xhci);
    g_assert_cmpint(e->port, >, 0);
    ncm_enumerate(e);
    return e;
}

void ncm_stop(NcmEnv *e)
{
    qxhci_free(e->xhci);
    g_free(e->pdev);
    close(e->sock);
    qtest_shutdown(e->qs);
    qobject_unref(e->mark);
    ncm_oracle_free(e->oracle);
    g_free(e->mig.props);
    g_free(e);
}

void ncm_assert_alive(NcmEnv *e)
{
    QDict *rsp = qtest_qmp(e->qts, "{'execute': 'query-status'}");

    g_assert(qdict_haskey(rsp, "return"));
    qobject_unref(rsp);
}

/* Data path helpers */

void ncm_out_td(NcmEnv *e, const uint8_t *data, uint32_t len)
{
    uint32_t actual = 0;
    int cc;

    cc = qxhci_transfer_sync(e->dev, e->ep_out.address, (void *)data, len,
                             &actual, NCM_RX_TIMEOUT_NS);
    g_assert_cmpint(cc, ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(actual, ==, len);
}

void ncm_in_submit_queued(NcmEnv *e, QXhciTransfer **t, unsigned n,
                          uint32_t len)
{
    unsigned i;

    qxhci_hold_doorbells(e->dev, true);
    for (i = 0; i < n; i++) {
        t[i] = qxhci_submit(e->dev, e->ep_in.address, NULL, len);
    }
    qxhci_hold_doorbells(e->dev, false);
    qxhci_ring_doorbell(e->dev, e->ep_in.address);
}

/* One OUT transfer, ended by a ZLP when it is an exact multiple. */
void ncm_send(NcmEnv *e, const uint8_t *data, uint32_t len)
{
    ncm_out_td(e, data, len);
    if (len && len % e->mps == 0) {
        ncm_out_td(e, NULL, 0);
    }
}

void ncm_send_frames(NcmEnv *e, GPtrArray *frames)
{
    NcmHostLayout l = ncm_out_layout(e);
    g_autoptr(GByteArray) ntb = ncm_ntb_build(&l, frames, 0);

    ncm_send(e, ntb->data, ntb->len);
}

/* A valid NTB after whatever came before must come out alone and whole */
void ncm_check_marker(NcmEnv *e, uint32_t tag)
{
    g_autoptr(GPtrArray) marker = ncm_frames_new();

    ncm_frames_add(marker, ncm_bcast_mac, tag, 60);
    ncm_frames_add(marker, ncm_peer_mac, tag + 1, 1000);
    ncm_frames_add(marker, ncm_other_mac, tag + 2, 1514);
    ncm_send_frames(e, marker);
    ncm_sock_expect_frames(e, marker);
    ncm_sock_expect_silence(e, 20);
}

/*
 * Check one IN NTB strictly (libqos/ncm-host.c's rules at the negotiated
 * placement, its wSequence the next one) and append its datagrams to @out.
 */
void ncm_ntb_parse_in(NcmEnv *e, const uint8_t *b, uint32_t len,
                      uint32_t max_len, GPtrArray *out)
{
    NcmHostLayout l = ncm_in_layout(e);
    char why[256];

    g_assert_cmpuint(len, <=, max_len);
    if (!ncm_ntb_parse(&l, b, len, out, why, sizeof(why))) {
        g_test_message("IN NTB of %u bytes: %s", len, why);
        g_assert_not_reached();
    }
    g_assert_cmpuint(lduw_le_p(b + 6), ==, e->rx_seq);
    e->rx_seq++;
    e->rx_ntbs++;
    e->rx_bytes += len;
}

/*
 * Poll bulk IN with @td_len-byte TDs until @n datagrams came; every NTB
 * must fit @max_ntb bytes.
 */
GPtrArray *ncm_receive(NcmEnv *e, unsigned n, uint32_t td_len,
                       uint32_t max_ntb)
{
    GPtrArray *got = ncm_frames_new();
    g_autofree uint8_t *buf = g_malloc(td_len);

    while (got->len < n) {
        QXhciTransfer *t = qxhci_submit(e->dev, e->ep_in.address, NULL,
                                        td_len);

        if (!qxhci_wait(t, NCM_RX_TIMEOUT_NS)) {
            g_test_message("bulk IN: only %u of %u frames arrived",
                           got->len, n);
            qxhci_transfer_free(t);
            g_assert_not_reached();
        }
        g_assert(t->cc == QXHCI_CC_SUCCESS ||
                 t->cc == QXHCI_CC_SHORT_PACKET);
        qxhci_transfer_read(t, buf);
        ncm_oracle_in(e, buf, t->actual, td_len);
        ncm_ntb_parse_in(e, buf, t->actual, max_ntb, got);
        qxhci_transfer_free(t);
    }
    return got;
}

void ncm_expect_rx(NcmEnv *e, GPtrArray *want)
{
    g_autoptr(GPtrArray) got = ncm_receive(e, want->len, e->p.in_max,
                                           e->in_size);

    ncm_frames_assert_equal(got, want);
}

/* One frame from the netdev to the adapter's address comes in whole. */
void ncm_check_rx_frame(NcmEnv *e, uint32_t tag, size_t len)
{
    g_autoptr(GPtrArray) rx = ncm_frames_new();

    ncm_frames_add(rx, ncm_mac, tag, len);
    ncm_sock_send_frames(e, rx);
    ncm_expect_rx(e, rx);
}

/* Bulk IN must stay NAK'd: nothing queued for the host. */
void ncm_expect_no_rx(NcmEnv *e)
{
    uint8_t buf[64];

    g_assert_cmpint(qxhci_transfer_sync(e->dev, e->ep_in.address, buf,
                                        sizeof(buf), NULL,
                                        50 * 1000 * 1000),
                    ==, QXHCI_CC_TIMEOUT);
}

/* One notification, or 0 bytes when none came within @timeout_ns. */
uint32_t ncm_notify_read(NcmEnv *e, uint8_t *buf, int64_t timeout_ns)
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

void ncm_expect_speed_change(const uint8_t *b, uint32_t len)
{
    static const uint8_t want[16] = {
        0xa1, 0x2a, 0x00, 0x00, NCM_IF_CONTROL, 0x00, 0x08, 0x00,
        0x00, 0xca, 0x9a, 0x3b, 0x00, 0xca, 0x9a, 0x3b,   /* 1 Gbit/s */
    };

    g_assert_cmpmem(b, len, want, sizeof(want));
}

void ncm_expect_connection(const uint8_t *b, uint32_t len, bool up)
{
    const uint8_t want[8] = {
        0xa1, 0x00, up, 0x00, NCM_IF_CONTROL, 0x00, 0x00, 0x00,
    };

    g_assert_cmpmem(b, len, want, sizeof(want));
}

void ncm_expect_link_up(NcmEnv *e)
{
    uint8_t b[16];

    ncm_expect_speed_change(b, ncm_notify_read(e, b, NCM_RX_TIMEOUT_NS));
    ncm_expect_connection(b, ncm_notify_read(e, b, NCM_RX_TIMEOUT_NS), true);
}

void ncm_set_link(NcmEnv *e, bool up)
{
    e->mig.link_down = !up;
    qtest_qmp_assert_success(e->qts, "{'execute': 'set_link', 'arguments':"
                             " {'name': 'ncm0', 'up': %i}}", up);
}

static QDict *qom_get_at(QTestState *qts, const char *path,
                         const char *prop)
{
    QDict *rsp = qtest_qmp(qts, "{'execute': 'qom-get', 'arguments': "
                           "{'path': %s, 'property': %s}}", path, prop);

    if (!qdict_haskey(rsp, "return")) {
        g_test_message("qom-get %s failed", prop);
    }
    g_assert(qdict_haskey(rsp, "return"));
    return rsp;
}

static QDict *qom_get_of(QTestState *qts, const char *prop)
{
    return qom_get_at(qts, NCM_QOM_PATH, prop);
}

static QDict *qom_get(NcmEnv *e, const char *prop)
{
    return qom_get_of(e->qts, prop);
}

int64_t ncm_qom_get_int(NcmEnv *e, const char *prop)
{
    QDict *rsp = qom_get(e, prop);
    int64_t v = qdict_get_int(rsp, "return");

    qobject_unref(rsp);
    return v;
}

char *ncm_qom_get_str(NcmEnv *e, const char *prop)
{
    QDict *rsp = qom_get(e, prop);
    char *v = g_strdup(qdict_get_str(rsp, "return"));

    qobject_unref(rsp);
    return v;
}

/*
 * Whether the device holds packets it cannot answer yet (parks them), or
 * NAKs them and the controller retries (x-park-packets=off, as on OHCI).
 */
bool ncm_parks_packets(NcmEnv *e)
{
    g_autofree char *v = ncm_qom_get_str(e, "x-park-packets");

    return strcmp(v, "off") != 0;
}

QDict *ncm_stats_raw(NcmEnv *e)
{
    return ncm_stats_raw_of(e->qts);
}

QDict *ncm_stats_raw_of(QTestState *qts)
{
    QDict *rsp = qom_get_of(qts, "x-stats");
    QDict *stats = qdict_get_qdict(rsp, "return");

    g_assert(stats);
    qobject_ref(stats);
    qobject_unref(rsp);
    return stats;
}

/* Every counter of the "x-stats" property, across migrate-each's moves */
QDict *ncm_stats(NcmEnv *e)
{
    QDict *stats = ncm_stats_raw(e);

    ncm_migrate_stats_adjust(e, stats);
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

/*
 * A mark and deltas against it: most cases take x-stats once before the
 * traffic they check and assert how far some counters grew after it.
 */
void ncm_mark(NcmEnv *e)
{
    qobject_unref(e->mark);
    e->mark = ncm_stats(e);
}

/* Every counter in @want grew by as much since the mark (one snapshot). */
void ncm_assert_deltas_n(NcmEnv *e, const NcmDelta *want, size_t n)
{
    g_autoptr(QDict) now = ncm_stats(e);
    size_t i;

    g_assert(e->mark);
    for (i = 0; i < n; i++) {
        uint64_t got = stat_delta(e->mark, now, want[i].name);

        if (got != want[i].delta) {
            g_test_message("stats %s grew by %" PRIu64 ", expected %" PRIu64,
                           want[i].name, got, want[i].delta);
        }
        g_assert_cmpuint(got, ==, want[i].delta);
    }
}

uint64_t ncm_delta(NcmEnv *e, const char *name)
{
    g_autoptr(QDict) now = ncm_stats(e);

    g_assert(e->mark);
    return stat_delta(e->mark, now, name);
}

/* The counters GET_ETHERNET_STATISTIC reports: what a migration keeps */
#define NCM_ETH_STAT_NAME(sel, counter) { #counter },
const NcmEthStatName ncm_eth_stat_names[] = {
    NCM_ETH_STAT_COUNTERS(NCM_ETH_STAT_NAME)
    { NULL }
};
#undef NCM_ETH_STAT_NAME

/* Each of them as in @before (a migration lost none of them) */
void ncm_assert_eth_stats_kept(NcmEnv *e, QDict *before)
{
    g_autoptr(QDict) now = ncm_stats(e);
    unsigned i, nonzero = 0;

    for (i = 0; ncm_eth_stat_names[i].name; i++) {
        const char *key = ncm_eth_stat_names[i].name;

        g_assert(qdict_haskey(now, key) && qdict_haskey(before, key));
        if (qdict_get_int(now, key) != qdict_get_int(before, key)) {
            g_test_message("counter %s went from %" PRId64 " to %" PRId64,
                           key, qdict_get_int(before, key),
                           qdict_get_int(now, key));
        }
        g_assert_cmpint(qdict_get_int(now, key), ==,
                        qdict_get_int(before, key));
        nonzero += qdict_get_int(now, key) != 0;
    }
    g_assert_cmpuint(nonzero, >, 0);        /* or it proves nothing */
}

int64_t ncm_qom_get_stat(NcmEnv *e, const char *name)
{
    g_autoptr(QDict) now = ncm_stats(e);

    g_assert(qdict_haskey(now, name));
    return qdict_get_int(now, name);
}

/*
 * out_parse_errors since the mark: class @name and "total" grew by @n,
 * every other class stayed put.  @name NULL: nothing grew.
 */
void ncm_assert_parse_errors(NcmEnv *e, const char *name, uint64_t n)
{
    g_autoptr(QDict) now = ncm_stats(e);
    QDict *b, *a;
    const QDictEntry *ent;

    g_assert(e->mark);
    b = qdict_get_qdict(e->mark, "out_parse_errors");
    a = qdict_get_qdict(now, "out_parse_errors");
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

/*
 * The usb-ncm-fault object of the machine the case runs on: created at
 * the first fault (object-add, after the device), also on a migration's
 * destination, which starts without one.
 */
void ncm_fault_object(NcmEnv *e)
{
    QDict *rsp = qtest_qmp(e->qts, "{'execute': 'qom-list', 'arguments': "
                           "{'path': %s}}", NCM_FAULT_PATH);

    if (qdict_haskey(rsp, "error")) {
        qtest_qmp_assert_success(e->qts, "{'execute': 'object-add', "
                                 "'arguments': {'qom-type': 'usb-ncm-fault', "
                                 "'id': %s, 'device': 'ncm0'}}",
                                 NCM_FAULT_PATH + strlen("/objects/"));
    }
    qobject_unref(rsp);
}

void ncm_fault_set(NcmEnv *e, const char *fault, uint32_t value)
{
    ncm_fault_object(e);
    qtest_qmp_assert_success(e->qts, "{'execute': 'qom-set', 'arguments': "
                             "{'path': %s, 'property': %s, 'value': %u}}",
                             NCM_FAULT_PATH, fault, value);
}

void ncm_fault_corrupt(NcmEnv *e, const char *how)
{
    ncm_fault_object(e);
    qtest_qmp_assert_success(e->qts, "{'execute': 'qom-set', 'arguments': "
                             "{'path': %s, 'property': 'corrupt-in', "
                             "'value': %s}}", NCM_FAULT_PATH, how);
}

int64_t ncm_fault_get_int(NcmEnv *e, const char *fault)
{
    QDict *rsp;
    int64_t v;

    ncm_fault_object(e);
    rsp = qom_get_at(e->qts, NCM_FAULT_PATH, fault);
    v = qdict_get_int(rsp, "return");
    qobject_unref(rsp);
    return v;
}

char *ncm_fault_get_str(NcmEnv *e, const char *fault)
{
    QDict *rsp;
    char *v;

    ncm_fault_object(e);
    rsp = qom_get_at(e->qts, NCM_FAULT_PATH, fault);
    v = g_strdup(qdict_get_str(rsp, "return"));
    qobject_unref(rsp);
    return v;
}

/* Virtual time in ns (clock_step refuses a step of 0, so step by 1 ns) */
int64_t ncm_clock_ns(NcmEnv *e)
{
    return qtest_clock_step(e->qts, 1);
}

/* Cases: descriptors and class requests */

const uint8_t *ncm_find_cs_desc(NcmEnv *e, uint8_t subtype)
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

char *ncm_get_string(NcmEnv *e, uint8_t index)
{
    uint8_t b[255];
    uint32_t actual = 0;
    GString *s = g_string_new("");
    uint32_t i;

    g_assert_cmpint(ncm_get_descriptor(e, 3, index, 0x0409, b, sizeof(b),
                                       &actual),
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

/* Parse what a completed IN TD holds (no NTB when it came back empty). */
void ncm_in_td_parse(NcmEnv *e, QXhciTransfer *t, uint32_t max_ntb,
                     GPtrArray *got)
{
    g_autofree uint8_t *buf = g_malloc(MAX(t->length, 1));

    g_assert(t->done);
    g_assert(t->cc == QXHCI_CC_SUCCESS || t->cc == QXHCI_CC_SHORT_PACKET);
    qxhci_transfer_read(t, buf);
    ncm_oracle_in(e, buf, t->actual, t->length);
    if (t->actual) {
        ncm_ntb_parse_in(e, buf, t->actual, max_ntb, got);
    }
}

/*
 * The IN NTB the device builds from @frames: NTH, the datagrams at
 * wNdpInDivisor/wNdpInPayloadRemainder offsets, then the NDP.
 */
GByteArray *ncm_in_ntb_expected(NcmEnv *e, GPtrArray *frames,
                                uint16_t seq)
{
    NcmHostLayout l = ncm_in_layout(e);

    return ncm_ntb_build(&l, frames, seq);
}

void ncm_set_configuration(NcmEnv *e, int value)
{
    g_assert_cmpint(qxhci_control(e->dev, 0x00, QXHCI_REQ_SET_CONFIGURATION,
                                  value, 0, NULL, 0, NULL),
                    ==, QXHCI_CC_SUCCESS);
    ncm_function_reset(e, true);
}

/* The adapter again, as a host finds it after a reset or a replug */
void ncm_reenumerate(NcmEnv *e)
{
    if (e->dev) {
        qxhci_device_free(e->dev);
    }
    e->dev = NULL;
    e->port = qxhci_find_connected_port(e->xhci);
    g_assert_cmpint(e->port, >, 0);
    ncm_enumerate(e);
}

/*
 * After a replug (usb-ncm-fault replug-ms): the port shows the adapter
 * again within 5 s of virtual time, the host enumerates it, data on
 */
void ncm_replug_wait_back(NcmEnv *e)
{
    int64_t deadline = ncm_clock_ns(e) + 5000 * NCM_MS;

    while (!(qxhci_portsc(e->xhci, e->port) & 1)) {
        g_assert_cmpint(ncm_clock_ns(e), <, deadline);
        qxhci_step(e->xhci);
    }
    ncm_reenumerate(e);
    ncm_set_alt(e, 1);
}

/* Both directions work: an OUT NTB and an IN NTB through queued TDs. */
/*
 * Two IN TDs wait: @first's frames go into the first as one NTB, the
 * second waits on until @second's come (in an NTB of at most @max2).
 */
void ncm_in_fill_in_turn(NcmEnv *e, QXhciTransfer **t, GPtrArray *first,
                         GPtrArray *second, uint32_t max2)
{
    g_autoptr(GPtrArray) got = ncm_frames_new();
    unsigned i;

    ncm_sock_send_frames(e, first);
    g_assert(qxhci_wait(t[0], NCM_RX_TIMEOUT_NS));
    ncm_in_td_parse(e, t[0], e->in_size, got);
    ncm_frames_assert_equal(got, first);
    for (i = 0; i < 10; i++) {
        qxhci_step(e->xhci);
    }
    g_assert(!t[1]->done);
    g_ptr_array_set_size(got, 0);
    ncm_sock_send_frames(e, second);
    g_assert(qxhci_wait(t[1], NCM_RX_TIMEOUT_NS));
    ncm_in_td_parse(e, t[1], max2, got);
    ncm_frames_assert_equal(got, second);
}

void ncm_queue_check_traffic(NcmEnv *e, uint32_t tag)
{
    g_autoptr(GPtrArray) rx = ncm_frames_new();
    g_autoptr(GPtrArray) rx2 = ncm_frames_new();
    QXhciTransfer *t[2];

    ncm_check_marker(e, tag);
    /* two IN TDs at once: the first takes the NTB, the second waits */
    ncm_in_submit_queued(e, t, 2, e->p.in_max);
    ncm_frames_add(rx, ncm_mac, tag + 10, 700);
    ncm_frames_add(rx2, ncm_bcast_mac, tag + 11, 1514);
    ncm_in_fill_in_turn(e, t, rx, rx2, e->in_size);
    qxhci_transfer_free(t[0]);
    qxhci_transfer_free(t[1]);
}

/* Cases */

static void run_case(const void *data)
{
    const NcmCase *c = data;
    NcmEnv *e = ncm_start(c);

    if (ncm_migrate_each_wanted()) {
        ncm_migrate_each_start(e);
    }
    c->fn(e, c);
    ncm_migrate_each_end(e);
    ncm_sock_expect_silence(e, 0);
    ncm_assert_alive(e);
    ncm_stop(e);
}

/*
 * Cases whose outcome does not depend on the packet size run at high
 * speed only with -m slow: the OUT NTB parser sees whole transfers, and
 * the IN faults corrupt whole NTBs.  Super speed runs them always.  So do
 * the mid-transfer cases for their time: at 512 bytes a packet a
 * transfer has twice the boundaries, each a migration.
 */
static bool ncm_case_is_slow(bool super, const char *name)
{
    return !super && (g_str_has_prefix(name, "malformed/") ||
                      g_str_has_prefix(name, "fault/corrupt") ||
                      g_str_has_prefix(name, "mid-transfer/"));
}

void ncm_add_case(bool super, const char *model, const char *name,
                  void (*fn)(NcmEnv *e, const NcmCase *c), const void *data,
                  const char *props)
{
    NcmCase *c;
    bool generic = strcmp(model, NCM_DL);
    g_autofree char *path = NULL;

    if (ncm_case_is_slow(super, name) && !g_test_slow()) {
        return;
    }
    c = g_new0(NcmCase, 1);
    c->super = super;
    c->model = model;
    c->props = props;
    c->data = data;
    c->fn = fn;
    path = g_strdup_printf("/usb-ncm-dl/%s/%s%s%s", super ? "super" : "high",
                           generic ? model : "", generic ? "/" : "", name);
    qtest_add_data_func(path, c, run_case);
}
