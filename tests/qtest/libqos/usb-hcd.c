/*
 * libqos UHCI, OHCI and EHCI drivers
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "usb-hcd.h"

/* Chains one start queues at most, so that an input cannot fill memory */
#define QHCD_MAX_CHAINS     128

#define QUHCI_T             1
#define QUHCI_Q             2
#define QUHCI_VF            4
#define QEHCI_QH            2
#define QEHCI_T             1

static void run_main_loop(QHcd *h)
{
    if (h->run_main_loop) {
        h->run_main_loop(h);
    }
}

void qhcd_frames(QHcd *h, unsigned n)
{
    unsigned i;

    for (i = 0; i < n; i++) {
        qtest_clock_step(h->qts, QHCD_FRAME_NS);
        run_main_loop(h);
    }
}

void qhcd_frames_idle(QHcd *h, unsigned n)
{
    qtest_clock_step(h->qts, (int64_t)n * QHCD_FRAME_NS);
    run_main_loop(h);
}

static void wait_frames(QHcd *h, unsigned n, bool idle)
{
    if (idle) {
        qhcd_frames_idle(h, n);
    } else {
        qhcd_frames(h, n);
    }
}

uint64_t qhcd_zalloc(QHcd *h, size_t size)
{
    uint64_t a = guest_alloc(h->alloc, MAX(size, 1));

    qtest_memset(h->qts, a, 0, MAX(size, 1));
    return a;
}

static void wl(QHcd *h, uint64_t a, uint32_t v)
{
    qtest_writel(h->qts, a, v);
}

static uint32_t rl(QHcd *h, uint64_t a)
{
    return qtest_readl(h->qts, a);
}

/* A frame list of 1024 entries, all @entry: one write, not 1024 */
static void frame_list(QHcd *h, uint64_t list, uint32_t entry)
{
    uint32_t l[1024];
    unsigned i;

    for (i = 0; i < ARRAY_SIZE(l); i++) {
        l[i] = cpu_to_le32(entry);
    }
    qtest_memwrite(h->qts, list, l, sizeof(l));
}

/* UHCI (UHCI 1.1, 2 and 3) */

void quhci_start(QHcd *h, QUhci *u)
{
    uint64_t qh;

    qpci_io_writew(u->pdev, u->bar, QUHCI_CMD, 2);     /* HCRESET */
    qhcd_frames_idle(h, 1);
    u->frames = guest_alloc(h->alloc, 4096);
    qh = qhcd_zalloc(h, 16);
    wl(h, qh, QUHCI_T);
    wl(h, qh + 4, QUHCI_T);
    frame_list(h, u->frames, qh | QUHCI_Q);
    u->tail = qh;
    u->qhs = 0;
    qpci_io_writel(u->pdev, u->bar, QUHCI_FLBASE, u->frames);
    qpci_io_writew(u->pdev, u->bar, QUHCI_FRNUM, 0);
    qpci_io_writeb(u->pdev, u->bar, QUHCI_SOF, 64);
    qpci_io_writew(u->pdev, u->bar, QUHCI_CMD, 0xc1);  /* RS, CF, MAXP */
}

void quhci_port_reset(QHcd *h, QUhci *u, int port, bool idle)
{
    qpci_io_writew(u->pdev, u->bar, QUHCI_PORTSC(port), QUHCI_PORT_PR);
    wait_frames(h, 50, idle);
    qpci_io_writew(u->pdev, u->bar, QUHCI_PORTSC(port), 0);
    wait_frames(h, 1, idle);
    qpci_io_writew(u->pdev, u->bar, QUHCI_PORTSC(port), QUHCI_PORT_PE);
    wait_frames(h, 10, idle);
}

static void uhci_queue(QHcd *h, QUhci *u, const QHcdTd *tds, unsigned n,
                       const uint32_t *raw, QHcdChain *c)
{
    static const uint8_t pids[] = { 0x2d, 0xe1, 0x69 };
    uint64_t qh, td = 0, first = 0, prev = 0;
    unsigned i;

    if (c) {
        *c = (QHcdChain){ .uhci = true, .short_ends = true };
    }
    if (u->qhs++ > QHCD_MAX_CHAINS) {
        return;
    }
    for (i = 0; i < n; i++) {
        uint32_t len = MIN(tds[i].len, 1023);
        uint32_t ctl = 1u << 23 | 3u << 27 |
                       (tds[i].pid == QHCD_PID_IN ? 1u << 29 : 0) |
                       (i == n - 1 ? 1u << 24 : 0);
        uint32_t tok = pids[tds[i].pid % 3] | tds[i].addr << 8 |
                       (tds[i].ep & 0xf) << 15 | tds[i].toggle << 19 |
                       (len ? len - 1 : 0x7ff) << 21;

        td = qhcd_zalloc(h, 16);
        if (raw) {
            ctl = raw[0];
            tok = raw[1];
        }
        wl(h, td, QUHCI_T);
        wl(h, td + 4, ctl);
        wl(h, td + 8, tok);
        wl(h, td + 12, tds[i].buf);
        if (c) {
            c->r[c->n++] = (QHcdRef){ td, tds[i].buf, len };
        }
        if (prev) {
            wl(h, prev, td | (raw ? raw[2] & 6 : QUHCI_VF));
        } else {
            first = td;
        }
        prev = td;
    }
    qh = qhcd_zalloc(h, 16);
    wl(h, qh, QUHCI_T);
    wl(h, qh + 4, first ? first : QUHCI_T);
    wl(h, u->tail, qh | QUHCI_Q);
    u->tail = qh;
}

static int uhci_td_state(QHcd *h, const QHcdRef *r, uint32_t *actual)
{
    uint32_t ctl = rl(h, r->td + 4);

    if (ctl & 1u << 23) {
        return QHCD_TD_ACTIVE;
    }
    /* stalled, data buffer error, babble, CRC/time-out, bitstuff */
    if (ctl & 0x760000) {
        return QHCD_TD_ERROR;
    }
    *actual = MIN(((ctl & 0x7ff) + 1) & 0x7ff, r->len);
    return QHCD_TD_DONE;
}

/* OHCI (OHCI 1.0a, 7) */

void qohci_write(QHcd *h, uint32_t off, uint32_t v)
{
    qpci_io_writel(h->pdev, h->bar, off, v);
}

uint32_t qohci_read(QHcd *h, uint32_t off)
{
    return qpci_io_readl(h->pdev, h->bar, off);
}

uint64_t qohci_ed(QHcd *h, uint32_t dw0, uint64_t head, uint64_t tail)
{
    uint64_t ed = qhcd_zalloc(h, 16);

    wl(h, ed, dw0);
    wl(h, ed + 4, tail);
    wl(h, ed + 8, head);
    return ed;
}

static void ohci_start(QHcd *h)
{
    unsigned i;

    /* USBRESET resets the root hub too (HCR alone leaves the ports) */
    qohci_write(h, QOHCI_CONTROL, 0);
    qohci_write(h, QOHCI_CMDSTATUS, 1);                 /* HCR */
    qhcd_frames_idle(h, 1);
    h->sched = guest_alloc(h->alloc, 256);
    qtest_memset(h->qts, h->sched, 0, 256);
    for (i = 0; i < 3; i++) {
        h->head[i] = qohci_ed(h, QOHCI_ED_SKIP, 0, 0);
        h->tail[i] = h->head[i];
    }
    for (i = 0; i < 32; i++) {
        wl(h, h->sched + 4 * i, h->head[2]);
    }
    qohci_write(h, QOHCI_HCCA, h->sched);
    qohci_write(h, QOHCI_CTRL_HEAD, h->head[0]);
    qohci_write(h, QOHCI_BULK_HEAD, h->head[1]);
    qohci_write(h, QOHCI_FMINTERVAL, 0x27782edf);
    qohci_write(h, QOHCI_PERIODICSTART, 0x2a2f);
    /* operational; control, bulk and periodic lists; CBSR 4:1 */
    qohci_write(h, QOHCI_CONTROL, 2 << 6 | 1 << 5 | 1 << 4 | 1 << 2 | 3);
    qohci_write(h, QOHCI_RHSTATUS, 1 << 16);            /* LPSC */
    qohci_write(h, QOHCI_RHPORT(0), 1 << 8);            /* PPS */
    qhcd_frames_idle(h, 2);
    qohci_write(h, QOHCI_RHPORT(0), 1 << 4);            /* PRS */
    qhcd_frames_idle(h, 20);
    qohci_write(h, QOHCI_RHPORT(0), 1 << 1 | 0x1f0000); /* PES, changes */
    qhcd_frames_idle(h, 2);
}

static void ohci_queue(QHcd *h, QHcdList list, const QHcdTd *tds,
                       unsigned n, const uint32_t *raw, QHcdChain *c)
{
    uint32_t mps = list == QHCD_LIST_CONTROL ? 64 : h->bulk_mps;
    uint64_t dummy = qhcd_zalloc(h, 16), first = dummy, prev = 0, td, ed;
    uint32_t dw0;
    unsigned i;

    if (c) {
        *c = (QHcdChain){ .n = 0 };
    }
    if (h->lists++ > QHCD_MAX_CHAINS) {
        return;
    }
    for (i = 0; i < n; i++) {
        uint32_t len = MIN(tds[i].len, 8192);

        dw0 = 0xfu << 28 | 2u << 24 | (uint32_t)tds[i].toggle << 24 |
              7u << 21 | (uint32_t)(tds[i].pid % 3) << 19 |
              (tds[i].pid == QHCD_PID_IN ? 1u << 18 : 0);
        td = qhcd_zalloc(h, 16);
        wl(h, td, raw ? raw[0] : dw0);
        wl(h, td + 4, len ? tds[i].buf : 0);
        wl(h, td + 8, dummy);
        wl(h, td + 12, len ? tds[i].buf + len - 1 : 0);
        if (c) {
            c->r[c->n++] = (QHcdRef){ td, tds[i].buf, len };
        }
        if (prev) {
            wl(h, prev + 8, td);
        } else {
            first = td;
        }
        prev = td;
    }
    dw0 = tds[0].addr | (tds[0].ep & 0xf) << 7 | mps << 16;
    ed = qohci_ed(h, raw ? raw[1] : dw0, first, dummy);
    wl(h, h->tail[list] + 12, ed);
    h->tail[list] = ed;
    /* CLF, BLF */
    qohci_write(h, QOHCI_CMDSTATUS,
                list == QHCD_LIST_CONTROL ? 1 << 1 : 1 << 2);
}

static int ohci_td_state(QHcd *h, const QHcdRef *r, uint32_t *actual)
{
    unsigned cc = rl(h, r->td) >> 28;
    uint32_t cbp;

    if (cc >= 0xe) {
        return QHCD_TD_ACTIVE;                          /* not accessed */
    }
    if (cc) {
        return QHCD_TD_ERROR;
    }
    /* CurrentBufferPointer: 0 once the TD's buffer is full */
    cbp = rl(h, r->td + 4);
    if (cbp && ((rl(h, r->td) >> 19) & 3) != 2) {
        /*
         * An OUT (or SETUP) TD goes a packet at a time, and QEMU writes
         * condition code 0 back after each packet of one it has not
         * retired: only its buffer, all sent, says it is done
         */
        return QHCD_TD_ACTIVE;
    }
    *actual = !cbp ? r->len : MIN(cbp - (uint32_t)r->buf, r->len);
    return QHCD_TD_DONE;
}

/* EHCI (EHCI 1.0, 2.3, 3.5, 3.6, 4.8 and 4.10) with UHCI companions */

void qehci_write(QHcd *h, uint32_t off, uint32_t v)
{
    qpci_io_writel(h->pdev, h->bar, h->op + off, v);
}

uint32_t qehci_read(QHcd *h, uint32_t off)
{
    return qpci_io_readl(h->pdev, h->bar, h->op + off);
}

void qehci_port_reset(QHcd *h, int port, bool idle)
{
    qehci_write(h, QEHCI_PORTSC(port), QEHCI_PORT_PP | QEHCI_PORT_PR);
    wait_frames(h, 50, idle);
    qehci_write(h, QEHCI_PORTSC(port), QEHCI_PORT_PP);
    wait_frames(h, 5, idle);
}

static uint64_t ehci_qh(QHcd *h, uint32_t horiz, uint32_t dw1, uint32_t dw2,
                        uint64_t qtd)
{
    uint64_t qh = qhcd_zalloc(h, 64);

    wl(h, qh, horiz);
    wl(h, qh + 4, dw1);
    wl(h, qh + 8, dw2);
    wl(h, qh + 16, qtd ? qtd : QEHCI_T);
    wl(h, qh + 20, QEHCI_T);
    return qh;
}

static void ehci_start(QHcd *h)
{
    uint64_t qh;
    unsigned i;

    for (i = 0; i < h->companions; i++) {
        quhci_start(h, &h->comp[i]);
    }
    h->op = qpci_io_readb(h->pdev, h->bar, 0);
    qehci_write(h, QEHCI_USBCMD, 2);                    /* HCRESET */
    qhcd_frames_idle(h, 1);
    /* the async ring's head: H, never active */
    qh = qhcd_zalloc(h, 64);
    wl(h, qh, qh | QEHCI_QH);
    wl(h, qh + 4, 1 << 15 | 2 << 12);
    wl(h, qh + 16, QEHCI_T);
    wl(h, qh + 20, QEHCI_T);
    wl(h, qh + 24, 0x40);                               /* halted */
    h->tail[0] = qh;
    /* the periodic schedule: every frame to one empty interrupt QH */
    h->tail[1] = ehci_qh(h, QEHCI_T, 2 << 12, 1u << 30 | 1, 0);
    h->sched = guest_alloc(h->alloc, 4096);
    frame_list(h, h->sched, h->tail[1] | QEHCI_QH);
    qehci_write(h, QEHCI_PERIODIC, h->sched);
    qehci_write(h, QEHCI_ASYNC, qh);
    /* ASE PSE RS */
    qehci_write(h, QEHCI_USBCMD, 1 << 16 | 1 << 5 | 1 << 4 | 1);
    qehci_write(h, QEHCI_CONFIGFLAG, 1);
    qhcd_frames_idle(h, 2);
    qehci_port_reset(h, 0, true);
}

static void ehci_queue(QHcd *h, QHcdList list, const QHcdTd *tds,
                       unsigned n, const uint32_t *raw, QHcdChain *c)
{
    uint64_t first = 0, prev = 0, qtd, qh, after;
    bool periodic = list == QHCD_LIST_INTERRUPT;
    uint32_t mps = list == QHCD_LIST_CONTROL ? 64 : h->bulk_mps;
    uint32_t dw1, dw2;
    unsigned i, p;

    if (c) {
        *c = (QHcdChain){ .n = 0 };
    }
    if (h->lists++ > QHCD_MAX_CHAINS) {
        return;
    }
    for (i = 0; i < n; i++) {
        uint32_t len = MIN(tds[i].len, 5 * 4096 - (tds[i].buf & 0xfff));
        uint32_t tok = (uint32_t)tds[i].toggle << 31 | len << 16 |
                       (i == n - 1 ? 1u << 15 : 0) | 3u << 10 |
                       (uint32_t)(tds[i].pid == QHCD_PID_SETUP ? 2 :
                                  tds[i].pid == QHCD_PID_IN ? 1 : 0) << 8 |
                       0x80;

        qtd = qhcd_zalloc(h, 32);
        wl(h, qtd, QEHCI_T);
        wl(h, qtd + 4, QEHCI_T);
        wl(h, qtd + 8, raw ? raw[0] : tok);
        for (p = 0; p < 5; p++) {
            wl(h, qtd + 12 + 4 * p, (tds[i].buf & ~0xfffull) + p * 4096 +
                                    (p ? 0 : tds[i].buf & 0xfff));
        }
        if (c) {
            c->r[c->n++] = (QHcdRef){ qtd, tds[i].buf, len };
        }
        if (prev) {
            wl(h, prev, qtd);
        } else {
            first = qtd;
        }
        prev = qtd;
    }
    dw1 = tds[0].addr | (tds[0].ep & 0xf) << 8 | 2 << 12 | 1 << 14 |
          mps << 16;
    dw2 = 1u << 30 | (periodic ? 1 : 0);
    if (raw) {
        dw1 = raw[1];
        dw2 = raw[2];
    }
    /* in after the list's head (async) or its last QH (periodic) */
    after = periodic ? h->tail[1] : h->tail[0];
    qh = ehci_qh(h, rl(h, after), dw1, dw2, first);
    wl(h, after, qh | QEHCI_QH);
    if (periodic) {
        h->tail[1] = qh;
    } else {
        /*
         * Ring the async advance doorbell (USBCMD.IAAD): QEMU's EHCI walks
         * an idle async schedule only every (stepdown + 1) frames, up to
         * 512, and walks it now for the doorbell.  Without it the
         * enumeration's four requests waited for one walk, which took
         * them newest first: the device was never addressed.  The
         * interrupt it raises is acknowledged at once, as a driver's
         * handler does: with USBSTS.IAA set the async schedule stops.
         */
        qehci_write(h, QEHCI_USBCMD, qehci_read(h, QEHCI_USBCMD) | 1 << 6);
        run_main_loop(h);
        qehci_write(h, QEHCI_USBSTS, 1 << 5);
    }
}

static int ehci_td_state(QHcd *h, const QHcdRef *r, uint32_t *actual)
{
    uint32_t tok = rl(h, r->td + 8);

    if (tok & 0x80) {
        return QHCD_TD_ACTIVE;
    }
    /* halted, data buffer error, babble, transaction error */
    if (tok & 0x78) {
        return QHCD_TD_ERROR;
    }
    *actual = r->len - MIN((tok >> 16) & 0x7fff, r->len);
    return QHCD_TD_DONE;
}

/* Any controller */

void qhcd_start(QHcd *h)
{
    h->lists = 0;
    switch (h->type) {
    case QHCD_UHCI:
        h->uhci.pdev = h->pdev;
        h->uhci.bar = h->bar;
        quhci_start(h, &h->uhci);
        quhci_port_reset(h, &h->uhci, 0, true);
        break;
    case QHCD_OHCI:
        ohci_start(h);
        break;
    case QHCD_EHCI:
        ehci_start(h);
        break;
    }
}

void qhcd_queue(QHcd *h, QHcdList list, const QHcdTd *tds, unsigned n,
                const uint32_t *raw, QHcdChain *c)
{
    switch (h->type) {
    case QHCD_UHCI:
        uhci_queue(h, &h->uhci, tds, n, raw, c);
        break;
    case QHCD_OHCI:
        ohci_queue(h, list, tds, n, raw, c);
        break;
    case QHCD_EHCI:
        if (h->on_comp) {
            /* the companion the device's port was handed to */
            uhci_queue(h, &h->comp[0], tds, n, raw, c);
        } else {
            ehci_queue(h, list, tds, n, raw, c);
        }
        break;
    }
}

void qhcd_control(QHcd *h, uint8_t addr, const uint8_t *setup, uint64_t buf,
                  QHcdChain *c)
{
    QHcdTd tds[QHCD_MAX_TDS];
    bool in = setup[0] & 0x80;
    uint16_t len = lduw_le_p(setup + 6);
    unsigned n = 0, off;

    qtest_memwrite(h->qts, buf, setup, 8);
    tds[n++] = (QHcdTd){ QHCD_PID_SETUP, addr, 0, false, 8, buf };
    for (off = 0; off < len && n < QHCD_MAX_TDS - 1; off += 64) {
        tds[n] = (QHcdTd){ in ? QHCD_PID_IN : QHCD_PID_OUT, addr, 0, n & 1,
                           MIN(64u, len - off), buf + 8 + off };
        n++;
    }
    tds[n++] = (QHcdTd){ in && len ? QHCD_PID_OUT : QHCD_PID_IN, addr, 0,
                         true, 0, buf };
    qhcd_queue(h, QHCD_LIST_CONTROL, tds, n, NULL, c);
}

int qhcd_td_state(QHcd *h, const QHcdChain *c, const QHcdRef *r,
                  uint32_t *actual)
{
    if (c->uhci) {
        return uhci_td_state(h, r, actual);
    }
    return h->type == QHCD_OHCI ? ohci_td_state(h, r, actual) :
                                  ehci_td_state(h, r, actual);
}

bool qhcd_chain_poll(QHcd *h, QHcdChain *c, QHcdTdFn *fn, void *opaque)
{
    while (!c->ended && c->next < c->n) {
        const QHcdRef *r = &c->r[c->next];
        uint32_t actual = 0;
        int st = qhcd_td_state(h, c, r, &actual);

        if (st == QHCD_TD_ACTIVE) {
            return false;
        }
        if (st == QHCD_TD_ERROR) {
            c->error = true;
            break;
        }
        c->next++;
        if (fn) {
            fn(h, r, actual, opaque);
        }
        if (c->short_ends && actual < r->len) {
            break;
        }
    }
    c->ended = true;
    return true;
}
