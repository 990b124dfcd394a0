/*
 * usb-ncm-dl fuzz targets behind UHCI, OHCI and EHCI (with UHCI
 * companions): each controller's own schedules from the input
 *
 * usb-ncm-dl-uhci-fuzz, usb-ncm-dl-ohci-fuzz and usb-ncm-dl-ehci-fuzz
 * start the controller (its frame list or HCCA, empty list heads), reset
 * the device's port and address and configure the device with control
 * transfers, then read the input as a sequence of operations a guest
 * driver performs: control transfers, bulk OUT (raw bytes, well-formed
 * NTBs, wMaxPacketSize multiples, zero-length) and bulk IN transfers of
 * any length split into TD chains, interrupt IN on the periodic schedule,
 * TDs with every field from the input, port register writes (reset,
 * enable, suspend, resume, power, the change bits; EHCI's port owner,
 * which hands the port to a UHCI companion, and CONFIGFLAG), raw writes
 * of the operational registers, clock steps and frames from the netdev.
 * UHCI: QH and TD lists off the frame list; OHCI: control, bulk and
 * interrupt ED lists with general TDs; EHCI: async QH ring and periodic
 * interrupt QHs with qTD chains, and the companion UHCI's schedule for a
 * port that was handed over.  The operations do not wait for completions
 * (what the controller and the device make of a schedule is the point);
 * the NCM oracle (ncm-oracle.c) reads back what completed: every
 * GET_DESCRIPTOR reply and, from alternate setting 1 on, every bulk IN
 * TD, until an operation it cannot follow (oracle_follows()).
 *
 * Each input runs in the process and starts from a controller reset
 * through the controller's registers, the device's port reset and its
 * enumeration (hcd_begin()); the machine is reset every
 * USB_NCM_FUZZ_RESET_EVERY inputs or when the device did not answer its
 * enumeration (hcd_end()).  With USB_NCM_FUZZ_FORK=1 an input runs in a
 * child forked from a parent in which the device is already configured
 * (usb_ncm_dl_fork.c).
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"

#include "qemu/bswap.h"
#include "qemu/main-loop.h"
#include "hw/usb.h"
#include "hw/usb/cdc-ncm.h"
#include "tests/qtest/libqtest.h"
#include "tests/qtest/libqos/libqos-malloc.h"
#include "tests/qtest/libqos/malloc-pc.h"
#include "tests/qtest/libqos/pci-pc.h"
#include "fuzz.h"
#include "usb_ncm_dl_fork.h"
#include "usb_ncm_dl_input.h"
#include "tests/qtest/usb-ncm-dl/ncm-oracle.h"

/* The device's endpoints (hw/usb/dev-ncm.h) and the address it is given */
#define EP_NOTIFY           5
#define EP_OUT              6
#define EP_IN               7
#define DEV_ADDR            1
#define IF_CONTROL          0
#define IF_DATA             1

#define MAX_OPS             192
#define MAX_TDS             48          /* per chain */
#define FRAME_NS            (1000 * 1000)

enum { PID_SETUP, PID_OUT, PID_IN };

/* One TD of a chain; @raw words replace the controller's own fields */
typedef struct HcdTd {
    uint8_t pid;
    uint8_t addr;
    uint8_t ep;
    bool toggle;
    uint32_t len;
    uint64_t buf;
} HcdTd;

/* A UHCI: the target's own, or one of EHCI's companions */
typedef struct Uhci {
    QPCIDevice *pdev;
    QPCIBar bar;
    uint64_t frames;
    uint64_t tail;      /* last QH on the frame list's chain */
    unsigned qhs;
} Uhci;

/* Where a queued TD is, and the bytes it may take: to read it back */
typedef struct HcdRef {
    uint64_t td;
    uint64_t buf;
    uint32_t len;
} HcdRef;

/* A queued chain, read back TD by TD as they complete */
typedef struct HcdChain {
    HcdRef r[MAX_TDS];
    unsigned n;
    unsigned next;          /* the first TD not read back yet */
    bool uhci;              /* UHCI TDs (a companion's, on EHCI) */
    bool short_ends;        /* a short TD ends it (UHCI: SPD) */
    bool ended, error;
} HcdChain;

enum { TD_ACTIVE, TD_DONE, TD_ERROR };

typedef struct Hcd Hcd;

typedef struct HcdKind {
    const char *name;
    const char *devices;        /* -device arguments, %d: the netdev fd */
    uint8_t devfn;
    uint8_t bar;                /* the BAR of its registers */
    unsigned companions;        /* UHCI companions at 1d.0, 1d.1, ... */
    unsigned bulk_mps;          /* the device's bulk wMaxPacketSize */
    unsigned td_max;            /* bytes one TD (qTD) may take */
    void (*start)(Hcd *h);
    /*
     * queue a chain on the list of @ep (0: control, 5: periodic); @c
     * (if not NULL) is where its TDs are, n = 0 if none was queued
     */
    void (*queue)(Hcd *h, const HcdTd *tds, unsigned n, const uint32_t *raw,
                  HcdChain *c);
    /* a TD's state; TD_DONE: @actual, the bytes it moved */
    int (*td_state)(Hcd *h, const HcdRef *r, uint32_t *actual);
    void (*port)(Hcd *h, uint8_t op, uint16_t arg);
    void (*reg)(Hcd *h, uint8_t off, uint32_t val);
} HcdKind;

struct Hcd {
    const HcdKind *k;
    QTestState *qts;
    QGuestAllocator alloc;
    QPCIBus *bus;
    QPCIDevice *pdev;
    QPCIBar bar;
    Uhci uhci;                  /* UHCI target: the controller */
    Uhci comp[3];               /* EHCI target: its companions */
    bool on_comp;               /* this operation is for a companion */
    uint32_t op;                /* EHCI: operational register offset */
    uint64_t sched;             /* OHCI HCCA, EHCI periodic frame list */
    uint64_t head[3];           /* OHCI: control, bulk, interrupt EDs */
    uint64_t tail[3];           /* EHCI: async head QH, periodic QH */
    unsigned lists;
    uint8_t addr;
    bool answered;              /* the device answered its enumeration */
    /*
     * The NCM oracle: every GET_DESCRIPTOR reply to the device's address
     * (desc_on) and, from alternate setting 1 on (oracle_in), every bulk
     * IN TD on the device's data endpoint, until an operation the oracle
     * cannot follow; one IN chain followed at a time (@in): with two
     * outstanding, which one the device answers first is the
     * controller's business (EHCI walks the newest first), not the
     * oracle's.
     */
    uint8_t dev_addr;           /* the address the device was given */
    bool desc_on;
    bool oracle_in;
    NcmOracleParams params;
    HcdChain ctl;               /* the last control transfer to it */
    HcdChain desc;              /* a GET_DESCRIPTOR's data stage */
    bool desc_pending;
    uint16_t desc_value, desc_len;
    HcdChain in;                /* the bulk IN chain followed */
};

static NcmOracle *oracle;

static int sockfds[2] = { -1, -1 };

/*
 * The controllers' PCI functions and BARs, mapped once per machine reset
 * (sizing a BAR rebuilds the memory topology, twice): a controller reset
 * leaves them as they are.  [0]: the target's controller, [1..3]: EHCI's
 * UHCI companions.
 */
static struct {
    QPCIBus *bus;
    QPCIDevice *pdev[4];
    QPCIBar bar[4];
} pci_kept;


/* Time and memory */

static void sock_drain(void)
{
    uint8_t buf[4096];

    while (recv(sockfds[0], buf, sizeof(buf), MSG_DONTWAIT) > 0) {
        continue;
    }
}

static void frames(Hcd *h, unsigned n)
{
    unsigned i;

    for (i = 0; i < n; i++) {
        qtest_clock_step(h->qts, FRAME_NS);
        flush_events(h->qts);
        sock_drain();
    }
}

/*
 * @n frames in one clock step, for the setup's waits on a controller
 * with nothing queued: the frame timers run all the same, the main loop
 * once at the end (frames() runs it after every frame, for the inputs)
 */
static void frames_idle(Hcd *h, unsigned n)
{
    qtest_clock_step(h->qts, (int64_t)n * FRAME_NS);
    flush_events(h->qts);
    sock_drain();
}

static uint64_t zalloc(Hcd *h, size_t size)
{
    uint64_t a = guest_alloc(&h->alloc, MAX(size, 1));

    qtest_memset(h->qts, a, 0, MAX(size, 1));
    return a;
}

static void wl(Hcd *h, uint64_t a, uint32_t v)
{
    qtest_writel(h->qts, a, v);
}

static uint32_t rl(Hcd *h, uint64_t a)
{
    return qtest_readl(h->qts, a);
}

/* UHCI (UHCI 1.1, 2 and 3) */

#define UHCI_CMD            0x00
#define UHCI_FRNUM          0x06
#define UHCI_FLBASE         0x08
#define UHCI_SOF            0x0c
#define UHCI_PORTSC(n)      (0x10 + 2 * (n))
#define UHCI_PORT_PE        (1 << 2)
#define UHCI_PORT_RD        (1 << 6)
#define UHCI_PORT_PR        (1 << 9)
#define UHCI_PORT_SUSP      (1 << 12)
#define UHCI_T              1
#define UHCI_Q              2
#define UHCI_VF             4

/* A frame list of 1024 entries, all @entry: one write, not 1024 */
static void frame_list(Hcd *h, uint64_t list, uint32_t entry)
{
    uint32_t l[1024];
    unsigned i;

    for (i = 0; i < ARRAY_SIZE(l); i++) {
        l[i] = cpu_to_le32(entry);
    }
    qtest_memwrite(h->qts, list, l, sizeof(l));
}

static void uhci_start(Hcd *h, Uhci *u)
{
    uint64_t qh;

    qpci_io_writew(u->pdev, u->bar, UHCI_CMD, 2);      /* HCRESET */
    frames_idle(h, 1);
    u->frames = guest_alloc(&h->alloc, 4096);
    qh = zalloc(h, 16);
    wl(h, qh, UHCI_T);
    wl(h, qh + 4, UHCI_T);
    frame_list(h, u->frames, qh | UHCI_Q);
    u->tail = qh;
    u->qhs = 0;
    qpci_io_writel(u->pdev, u->bar, UHCI_FLBASE, u->frames);
    qpci_io_writew(u->pdev, u->bar, UHCI_FRNUM, 0);
    qpci_io_writeb(u->pdev, u->bar, UHCI_SOF, 64);
    qpci_io_writew(u->pdev, u->bar, UHCI_CMD, 0xc1);   /* RS, CF, MAXP */
}

static void uhci_port_reset(Hcd *h, Uhci *u, int port,
                            void (*wait)(Hcd *h, unsigned n))
{
    qpci_io_writew(u->pdev, u->bar, UHCI_PORTSC(port), UHCI_PORT_PR);
    wait(h, 50);
    qpci_io_writew(u->pdev, u->bar, UHCI_PORTSC(port), 0);
    wait(h, 1);
    qpci_io_writew(u->pdev, u->bar, UHCI_PORTSC(port), UHCI_PORT_PE);
    wait(h, 10);
}

static void uhci_queue(Hcd *h, Uhci *u, const HcdTd *tds, unsigned n,
                       const uint32_t *raw, HcdChain *c)
{
    static const uint8_t pids[] = { 0x2d, 0xe1, 0x69 };
    uint64_t qh, td = 0, first = 0, prev = 0;
    unsigned i;

    if (c) {
        *c = (HcdChain){ .uhci = true, .short_ends = true };
    }
    if (u->qhs++ > 128) {
        return;
    }
    for (i = 0; i < n; i++) {
        uint32_t len = MIN(tds[i].len, 1023);
        uint32_t ctl = 1u << 23 | 3u << 27 |
                       (tds[i].pid == PID_IN ? 1u << 29 : 0) |
                       (i == n - 1 ? 1u << 24 : 0);
        uint32_t tok = pids[tds[i].pid % 3] | tds[i].addr << 8 |
                       (tds[i].ep & 0xf) << 15 | tds[i].toggle << 19 |
                       (len ? len - 1 : 0x7ff) << 21;

        td = zalloc(h, 16);
        if (raw) {
            ctl = raw[0];
            tok = raw[1];
        }
        wl(h, td, UHCI_T);
        wl(h, td + 4, ctl);
        wl(h, td + 8, tok);
        wl(h, td + 12, tds[i].buf);
        if (c) {
            c->r[c->n++] = (HcdRef){ td, tds[i].buf, len };
        }
        if (prev) {
            wl(h, prev, td | (raw ? raw[2] & 6 : UHCI_VF));
        } else {
            first = td;
        }
        prev = td;
    }
    qh = zalloc(h, 16);
    wl(h, qh, UHCI_T);
    wl(h, qh + 4, first ? first : UHCI_T);
    wl(h, u->tail, qh | UHCI_Q);
    u->tail = qh;
}

static int uhci_td_state(Hcd *h, const HcdRef *r, uint32_t *actual)
{
    uint32_t ctl = rl(h, r->td + 4);

    if (ctl & 1u << 23) {
        return TD_ACTIVE;
    }
    /* stalled, data buffer error, babble, CRC/time-out, bitstuff */
    if (ctl & 0x760000) {
        return TD_ERROR;
    }
    *actual = MIN(((ctl & 0x7ff) + 1) & 0x7ff, r->len);
    return TD_DONE;
}

static void uhci_port(Hcd *h, Uhci *u, uint8_t op, uint16_t arg)
{
    int port = (op >> 4) & 1;
    uint16_t v = qpci_io_readw(u->pdev, u->bar, UHCI_PORTSC(port)) & ~0xau;

    switch (op % 8) {
    case 0:
        uhci_port_reset(h, u, port, frames);
        return;
    case 1:
        v = arg;
        break;
    case 2:
        v &= ~UHCI_PORT_PE;
        break;
    case 3:
        v |= UHCI_PORT_PE;
        break;
    case 4:
        v |= UHCI_PORT_SUSP;
        break;
    case 5:
        v = (v & ~UHCI_PORT_SUSP) | UHCI_PORT_RD;
        break;
    case 6:
        v |= 0xa;                                   /* CSC, PEC */
        break;
    default:
        v |= UHCI_PORT_PR;
        break;
    }
    qpci_io_writew(u->pdev, u->bar, UHCI_PORTSC(port), v);
    frames(h, 1 + arg % 20);
}

static void uhci_reg(Hcd *h, Uhci *u, uint8_t off, uint32_t val)
{
    off %= 0x14;
    if (off == UHCI_FLBASE) {
        qpci_io_writel(u->pdev, u->bar, off, val);
    } else if (off == UHCI_SOF) {
        qpci_io_writeb(u->pdev, u->bar, off, val);
    } else {
        qpci_io_writew(u->pdev, u->bar, off & ~1, val);
    }
    frames(h, 1);
}

static void uk_start(Hcd *h)
{
    h->uhci.pdev = h->pdev;
    h->uhci.bar = h->bar;
    uhci_start(h, &h->uhci);
    uhci_port_reset(h, &h->uhci, 0, frames_idle);
}

static void uk_queue(Hcd *h, const HcdTd *tds, unsigned n,
                     const uint32_t *raw, HcdChain *c)
{
    uhci_queue(h, &h->uhci, tds, n, raw, c);
}

static void uk_port(Hcd *h, uint8_t op, uint16_t arg)
{
    uhci_port(h, &h->uhci, op, arg);
}

static void uk_reg(Hcd *h, uint8_t off, uint32_t val)
{
    uhci_reg(h, &h->uhci, off, val);
}

/* OHCI (OHCI 1.0a, 7) */

#define OHCI_CONTROL        0x04
#define OHCI_CMDSTATUS      0x08
#define OHCI_HCCA           0x18
#define OHCI_CTRL_HEAD      0x20
#define OHCI_BULK_HEAD      0x28
#define OHCI_FMINTERVAL     0x34
#define OHCI_PERIODICSTART  0x40
#define OHCI_RHSTATUS       0x50
#define OHCI_RHPORT(n)      (0x54 + 4 * (n))
#define OHCI_ED_SKIP        (1 << 14)

static void ohci_w(Hcd *h, uint32_t off, uint32_t v)
{
    qpci_io_writel(h->pdev, h->bar, off, v);
}

static uint64_t ohci_ed(Hcd *h, uint32_t dw0, uint64_t head, uint64_t tail)
{
    uint64_t ed = zalloc(h, 16);

    wl(h, ed, dw0);
    wl(h, ed + 4, tail);
    wl(h, ed + 8, head);
    return ed;
}

static void ok_start(Hcd *h)
{
    unsigned i;

    /* USBRESET resets the root hub too (HCR alone leaves the ports) */
    ohci_w(h, OHCI_CONTROL, 0);
    ohci_w(h, OHCI_CMDSTATUS, 1);                       /* HCR */
    frames_idle(h, 1);
    h->sched = guest_alloc(&h->alloc, 256);
    qtest_memset(h->qts, h->sched, 0, 256);
    for (i = 0; i < 3; i++) {
        h->head[i] = ohci_ed(h, OHCI_ED_SKIP, 0, 0);
        h->tail[i] = h->head[i];
    }
    for (i = 0; i < 32; i++) {
        wl(h, h->sched + 4 * i, h->head[2]);
    }
    ohci_w(h, OHCI_HCCA, h->sched);
    ohci_w(h, OHCI_CTRL_HEAD, h->head[0]);
    ohci_w(h, OHCI_BULK_HEAD, h->head[1]);
    ohci_w(h, OHCI_FMINTERVAL, 0x27782edf);
    ohci_w(h, OHCI_PERIODICSTART, 0x2a2f);
    /* operational; control, bulk and periodic lists; CBSR 4:1 */
    ohci_w(h, OHCI_CONTROL, 2 << 6 | 1 << 5 | 1 << 4 | 1 << 2 | 3);
    ohci_w(h, OHCI_RHSTATUS, 1 << 16);                  /* LPSC */
    ohci_w(h, OHCI_RHPORT(0), 1 << 8);                  /* PPS */
    frames_idle(h, 2);
    ohci_w(h, OHCI_RHPORT(0), 1 << 4);                  /* PRS */
    frames_idle(h, 20);
    ohci_w(h, OHCI_RHPORT(0), 1 << 1 | 0x1f0000);       /* PES, changes */
    frames_idle(h, 2);
}

static void ok_queue(Hcd *h, const HcdTd *tds, unsigned n,
                     const uint32_t *raw, HcdChain *c)
{
    unsigned list = tds[0].ep == 0 ? 0 : tds[0].ep == EP_NOTIFY ? 2 : 1;
    uint32_t mps = list == 0 ? 64 : h->k->bulk_mps;
    uint64_t dummy = zalloc(h, 16), first = dummy, prev = 0, td, ed;
    uint32_t dw0;
    unsigned i;

    if (c) {
        *c = (HcdChain){ .n = 0 };
    }
    if (h->lists++ > 128) {
        return;
    }
    for (i = 0; i < n; i++) {
        uint32_t len = MIN(tds[i].len, 8192);

        dw0 = 0xfu << 28 | 2u << 24 | (uint32_t)tds[i].toggle << 24 |
              7u << 21 | (uint32_t)(tds[i].pid % 3) << 19 |
              (tds[i].pid == PID_IN ? 1u << 18 : 0);
        td = zalloc(h, 16);
        wl(h, td, raw ? raw[0] : dw0);
        wl(h, td + 4, len ? tds[i].buf : 0);
        wl(h, td + 8, dummy);
        wl(h, td + 12, len ? tds[i].buf + len - 1 : 0);
        if (c) {
            c->r[c->n++] = (HcdRef){ td, tds[i].buf, len };
        }
        if (prev) {
            wl(h, prev + 8, td);
        } else {
            first = td;
        }
        prev = td;
    }
    dw0 = tds[0].addr | (tds[0].ep & 0xf) << 7 | mps << 16;
    ed = ohci_ed(h, raw ? raw[1] : dw0, first, dummy);
    wl(h, h->tail[list] + 12, ed);
    h->tail[list] = ed;
    ohci_w(h, OHCI_CMDSTATUS, list == 0 ? 1 << 1 : 1 << 2); /* CLF, BLF */
}

static int ohci_td_state(Hcd *h, const HcdRef *r, uint32_t *actual)
{
    unsigned cc = rl(h, r->td) >> 28;
    uint32_t cbp;

    if (cc >= 0xe) {
        return TD_ACTIVE;                               /* not accessed */
    }
    if (cc) {
        return TD_ERROR;
    }
    /* CurrentBufferPointer: 0 once the TD's buffer is full */
    cbp = rl(h, r->td + 4);
    *actual = !cbp ? r->len : MIN(cbp - (uint32_t)r->buf, r->len);
    return TD_DONE;
}

static void ok_port(Hcd *h, uint8_t op, uint16_t arg)
{
    static const uint32_t bits[] = {
        1 << 4,         /* PRS: reset */
        1 << 1,         /* PES: enable */
        1 << 0,         /* CCS: ClearPortEnable */
        1 << 2,         /* PSS: suspend */
        1 << 3,         /* POCI: ClearSuspendStatus, resume */
        1 << 8,         /* PPS: power */
        1 << 9,         /* LSDA: ClearPortPower */
        0x1f0000,       /* the change bits */
    };
    int port = (op >> 4) % 3;

    ohci_w(h, OHCI_RHPORT(port), op & 0x80 ? arg | (uint32_t)arg << 16 :
                                 bits[op % 8]);
    frames(h, 1 + arg % 20);
}

static void ok_reg(Hcd *h, uint8_t off, uint32_t val)
{
    ohci_w(h, (off % 0x60) & ~3, val);
    frames(h, 1);
}

/* EHCI (EHCI 1.0, 2.3, 3.5, 3.6, 4.8 and 4.10) with UHCI companions */

#define EHCI_USBCMD         0x00
#define EHCI_USBSTS         0x04
#define EHCI_PERIODIC       0x14
#define EHCI_ASYNC          0x18
#define EHCI_CONFIGFLAG     0x40
#define EHCI_PORTSC(n)      (0x44 + 4 * (n))
#define EHCI_PORT_PED       (1 << 2)
#define EHCI_PORT_FPR       (1 << 6)
#define EHCI_PORT_SUSP      (1 << 7)
#define EHCI_PORT_PR        (1 << 8)
#define EHCI_PORT_PP        (1 << 12)
#define EHCI_PORT_PO        (1 << 13)
#define EHCI_PORT_RWC       0x2a
#define EHCI_QH             2
#define EHCI_T              1

static void ehci_w(Hcd *h, uint32_t off, uint32_t v)
{
    qpci_io_writel(h->pdev, h->bar, h->op + off, v);
}

static uint32_t ehci_r(Hcd *h, uint32_t off)
{
    return qpci_io_readl(h->pdev, h->bar, h->op + off);
}

static void ehci_port_reset(Hcd *h, int port,
                            void (*wait)(Hcd *h, unsigned n))
{
    ehci_w(h, EHCI_PORTSC(port), EHCI_PORT_PP | EHCI_PORT_PR);
    wait(h, 50);
    ehci_w(h, EHCI_PORTSC(port), EHCI_PORT_PP);
    wait(h, 5);
}

static uint64_t ehci_qh(Hcd *h, uint32_t horiz, uint32_t dw1, uint32_t dw2,
                        uint64_t qtd)
{
    uint64_t qh = zalloc(h, 64);

    wl(h, qh, horiz);
    wl(h, qh + 4, dw1);
    wl(h, qh + 8, dw2);
    wl(h, qh + 16, qtd ? qtd : EHCI_T);
    wl(h, qh + 20, EHCI_T);
    return qh;
}

static void ek_start(Hcd *h)
{
    uint64_t qh;
    unsigned i;

    for (i = 0; i < 3; i++) {
        h->comp[i].pdev = pci_kept.pdev[1 + i];
        h->comp[i].bar = pci_kept.bar[1 + i];
        uhci_start(h, &h->comp[i]);
    }
    h->op = qpci_io_readb(h->pdev, h->bar, 0);
    ehci_w(h, EHCI_USBCMD, 2);                          /* HCRESET */
    frames_idle(h, 1);
    /* the async ring's head: H, never active */
    qh = zalloc(h, 64);
    wl(h, qh, qh | EHCI_QH);
    wl(h, qh + 4, 1 << 15 | 2 << 12);
    wl(h, qh + 16, EHCI_T);
    wl(h, qh + 20, EHCI_T);
    wl(h, qh + 24, 0x40);                               /* halted */
    h->tail[0] = qh;
    /* the periodic schedule: every frame to one empty interrupt QH */
    h->tail[1] = ehci_qh(h, EHCI_T, 2 << 12, 1u << 30 | 1, 0);
    h->sched = guest_alloc(&h->alloc, 4096);
    frame_list(h, h->sched, h->tail[1] | EHCI_QH);
    ehci_w(h, EHCI_PERIODIC, h->sched);
    ehci_w(h, EHCI_ASYNC, qh);
    ehci_w(h, EHCI_USBCMD, 1 << 16 | 1 << 5 | 1 << 4 | 1); /* ASE PSE RS */
    ehci_w(h, EHCI_CONFIGFLAG, 1);
    frames_idle(h, 2);
    ehci_port_reset(h, 0, frames_idle);
}

static void ek_queue(Hcd *h, const HcdTd *tds, unsigned n,
                     const uint32_t *raw, HcdChain *c)
{
    uint64_t first = 0, prev = 0, qtd, qh, after;
    bool periodic = tds[0].ep == EP_NOTIFY;
    uint32_t mps = tds[0].ep == 0 ? 64 : h->k->bulk_mps;
    uint32_t dw1, dw2;
    unsigned i, p;

    if (h->on_comp) {
        /* the companion the device's port was handed to */
        uhci_queue(h, &h->comp[0], tds, n, raw, c);
        return;
    }
    if (c) {
        *c = (HcdChain){ .n = 0 };
    }
    if (h->lists++ > 128) {
        return;
    }
    for (i = 0; i < n; i++) {
        uint32_t len = MIN(tds[i].len, 5 * 4096 - (tds[i].buf & 0xfff));
        uint32_t tok = (uint32_t)tds[i].toggle << 31 | len << 16 |
                       (i == n - 1 ? 1u << 15 : 0) | 3u << 10 |
                       (uint32_t)(tds[i].pid == PID_SETUP ? 2 :
                                  tds[i].pid == PID_IN ? 1 : 0) << 8 | 0x80;

        qtd = zalloc(h, 32);
        wl(h, qtd, EHCI_T);
        wl(h, qtd + 4, EHCI_T);
        wl(h, qtd + 8, raw ? raw[0] : tok);
        for (p = 0; p < 5; p++) {
            wl(h, qtd + 12 + 4 * p, (tds[i].buf & ~0xfffull) + p * 4096 +
                                    (p ? 0 : tds[i].buf & 0xfff));
        }
        if (c) {
            c->r[c->n++] = (HcdRef){ qtd, tds[i].buf, len };
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
    wl(h, after, qh | EHCI_QH);
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
        ehci_w(h, EHCI_USBCMD, ehci_r(h, EHCI_USBCMD) | 1 << 6);
        flush_events(h->qts);
        ehci_w(h, EHCI_USBSTS, 1 << 5);
    }
}

static int ehci_td_state(Hcd *h, const HcdRef *r, uint32_t *actual)
{
    uint32_t tok = rl(h, r->td + 8);

    if (tok & 0x80) {
        return TD_ACTIVE;
    }
    /* halted, data buffer error, babble, transaction error */
    if (tok & 0x78) {
        return TD_ERROR;
    }
    *actual = r->len - MIN((tok >> 16) & 0x7fff, r->len);
    return TD_DONE;
}

static void ek_port(Hcd *h, uint8_t op, uint16_t arg)
{
    int port = (op >> 4) % 6;
    uint32_t v;

    if (h->on_comp) {
        uhci_port(h, &h->comp[0], op, arg);
        return;
    }
    v = ehci_r(h, EHCI_PORTSC(port)) & ~EHCI_PORT_RWC;
    switch (op % 10) {
    case 0:
        ehci_port_reset(h, port, frames);
        return;
    case 1:
        v = arg | (uint32_t)arg << 16;
        break;
    case 2:
        v &= ~EHCI_PORT_PED;
        break;
    case 3:
        v |= EHCI_PORT_SUSP;
        break;
    case 4:
        v |= EHCI_PORT_FPR;
        break;
    case 5:
        v |= EHCI_PORT_PO;                  /* to the companion */
        break;
    case 6:
        v &= ~EHCI_PORT_PO;                 /* back */
        break;
    case 7:
        v ^= EHCI_PORT_PP;
        break;
    case 8:
        v |= EHCI_PORT_RWC;
        break;
    default:
        ehci_w(h, EHCI_CONFIGFLAG, arg & 1);
        frames(h, 2);
        return;
    }
    ehci_w(h, EHCI_PORTSC(port), v);
    frames(h, 1 + arg % 20);
}

static void ek_reg(Hcd *h, uint8_t off, uint32_t val)
{
    if (h->on_comp) {
        uhci_reg(h, &h->comp[0], off, val);
        return;
    }
    ehci_w(h, (off % 0x48) & ~3, val);
    frames(h, 1);
}

/* Reading back what completed, and the NCM oracle */

static int td_state(Hcd *h, const HcdChain *c, const HcdRef *r,
                    uint32_t *actual)
{
    return c->uhci ? uhci_td_state(h, r, actual) :
                     h->k->td_state(h, r, actual);
}

typedef void HcdTdFn(Hcd *h, const HcdRef *r, uint32_t actual,
                     void *opaque);

/*
 * Hand the TDs of @c that completed since the last call to @fn, in their
 * order.  False while the chain has TDs still to complete.
 */
static bool chain_poll(Hcd *h, HcdChain *c, HcdTdFn *fn, void *opaque)
{
    while (!c->ended && c->next < c->n) {
        const HcdRef *r = &c->r[c->next];
        uint32_t actual = 0;
        int st = td_state(h, c, r, &actual);

        if (st == TD_ACTIVE) {
            return false;
        }
        if (st == TD_ERROR) {
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

/* A violation is a finding: abort, and libFuzzer saves the input */
static void oracle_failed(Hcd *h, const char *what, const char *why)
{
    fprintf(stderr, "usb-ncm-dl-%s-fuzz: NCM oracle: %s: %s\n",
            h->k->name, what, why);
    abort();
}

/* A GET_DESCRIPTOR's data stage: its bytes up to the first short TD */
static void desc_td(Hcd *h, const HcdRef *r, uint32_t actual, void *opaque)
{
    uint32_t *total = opaque;

    *total += actual;
}

static void desc_poll(Hcd *h)
{
    g_autofree uint8_t *buf = NULL;
    uint32_t total = 0;
    char why[256] = "";

    if (!h->desc_pending) {
        return;
    }
    h->desc.next = 0;
    h->desc.ended = false;
    if (!chain_poll(h, &h->desc, desc_td, &total)) {
        return;
    }
    h->desc_pending = false;
    if (h->desc.error || !h->desc.n) {
        return;
    }
    total = MIN(total, h->desc_len);
    buf = g_malloc(MAX(total, 1));
    qtest_memread(h->qts, h->desc.r[0].buf, buf, total);
    if (!ncm_oracle_descriptor(h->desc_value >> 8, h->desc_value & 0xff,
                               h->desc_len, buf, total, why, sizeof(why))) {
        oracle_failed(h, "GET_DESCRIPTOR", why);
    }
    ncm_fuzz_counters()->oracle_desc++;
}

/* One completed bulk IN TD: a transfer of its own to the oracle */
static void in_td(Hcd *h, const HcdRef *r, uint32_t actual, void *opaque)
{
    g_autofree uint8_t *buf = g_malloc(MAX(actual, 1));
    char why[256] = "";

    qtest_memread(h->qts, r->buf, buf, actual);
    if (!ncm_oracle_in_transfer(oracle, &h->params, buf, actual, r->len,
                                why, sizeof(why))) {
        oracle_failed(h, "bulk IN transfer", why);
    }
    ncm_fuzz_counters()->oracle_in++;
}

/* False while the IN chain followed has TDs to complete */
static bool in_poll(Hcd *h)
{
    if (!h->oracle_in || !h->in.n) {
        return true;
    }
    if (!chain_poll(h, &h->in, in_td, NULL)) {
        return false;
    }
    if (h->in.error) {
        /* a transfer error: the stream is no longer the oracle's */
        h->oracle_in = false;
    }
    return true;
}

/* What completed until now is checked; nothing after it */
static void oracle_stop(Hcd *h)
{
    in_poll(h);
    desc_poll(h);
    h->oracle_in = false;
    h->desc_on = false;
    h->desc_pending = false;
}

/* What every controller's target does with the device */

/*
 * A control transfer: SETUP, its data stage in TDs of @mps, status.  A
 * GET_DESCRIPTOR to the device's address is checked once its data stage
 * completed, if no other control transfer to the device was outstanding.
 */
static uint64_t control(Hcd *h, uint8_t addr, uint8_t type, uint8_t req,
                        uint16_t value, uint16_t index, const uint8_t *data,
                        uint16_t len)
{
    HcdTd tds[MAX_TDS];
    uint8_t setup[8];
    uint64_t buf = zalloc(h, 8 + MAX(len, 1));
    unsigned n = 0, off;
    bool track = !h->on_comp && addr == h->dev_addr;
    bool idle = track && chain_poll(h, &h->ctl, NULL, NULL);
    HcdChain c;

    setup[0] = type;
    setup[1] = req;
    stw_le_p(setup + 2, value);
    stw_le_p(setup + 4, index);
    stw_le_p(setup + 6, len);
    qtest_memwrite(h->qts, buf, setup, 8);
    if (data && len && !(type & 0x80)) {
        qtest_memwrite(h->qts, buf + 8, data, len);
    }
    tds[n++] = (HcdTd){ PID_SETUP, addr, 0, false, 8, buf };
    for (off = 0; off < len && n < MAX_TDS - 1; off += 64) {
        tds[n] = (HcdTd){ type & 0x80 ? PID_IN : PID_OUT, addr, 0,
                          !(n & 1), MIN(64u, len - off), buf + 8 + off };
        n++;
    }
    tds[n++] = (HcdTd){ (type & 0x80) && len ? PID_OUT : PID_IN, addr, 0,
                        true, 0, buf };
    h->k->queue(h, tds, n, NULL, &c);
    if (!track || !c.n) {
        return buf;
    }
    h->ctl = c;
    if (idle && h->desc_on && type == USB_DIR_IN &&
        req == USB_REQ_GET_DESCRIPTOR && len &&
        !h->desc_pending) {
        /* the data stage: the TDs between SETUP and status */
        h->desc = (HcdChain){ .n = c.n - 2, .uhci = c.uhci,
                              .short_ends = true };
        memcpy(h->desc.r, c.r + 1, (c.n - 2) * sizeof(c.r[0]));
        h->desc_pending = true;
        h->desc_value = value;
        h->desc_len = len;
    }
    return buf;
}

/* Wait for the last control transfer to the device, a frame at a time */
static bool control_wait(Hcd *h, unsigned max_frames)
{
    unsigned i;

    for (i = 0; i < max_frames && !chain_poll(h, &h->ctl, NULL, NULL); i++) {
        frames(h, 1);
    }
    desc_poll(h);
    return h->ctl.ended && !h->ctl.error && h->ctl.n;
}

/*
 * Address, configure and select the data interface's alternate setting
 * 1, each request waited for (20 frames at most); false if the device did
 * not answer.  The oracle follows the IN stream from there, with the
 * power-on defaults (NTB16, no CRC, the largest IN NTB) GET_NTB_PARAMETERS
 * reports.
 */
static bool enumerate(Hcd *h)
{
    uint64_t b;

    h->desc_on = true;
    h->dev_addr = 0;
    control(h, 0, USB_DIR_IN, USB_REQ_GET_DESCRIPTOR, 0x100, 0, NULL, 18);
    if (!control_wait(h, 20)) {
        return false;
    }
    control(h, 0, USB_RECIP_DEVICE, USB_REQ_SET_ADDRESS, DEV_ADDR, 0, NULL,
            0);
    if (!control_wait(h, 20)) {
        return false;
    }
    h->addr = h->dev_addr = DEV_ADDR;
    control(h, DEV_ADDR, USB_RECIP_DEVICE, USB_REQ_SET_CONFIGURATION, 1, 0,
            NULL, 0);
    if (!control_wait(h, 20)) {
        return false;
    }
    control(h, DEV_ADDR, USB_RECIP_INTERFACE, USB_REQ_SET_INTERFACE, 1,
            IF_DATA, NULL, 0);
    if (!control_wait(h, 20)) {
        return false;
    }
    b = control(h, DEV_ADDR, USB_DIR_IN | USB_TYPE_CLASS | USB_RECIP_INTERFACE,
                NCM_GET_NTB_PARAMETERS, 0, IF_CONTROL, NULL, 28);
    if (!control_wait(h, 20)) {
        return false;
    }
    b += 8;
    if (!oracle) {
        oracle = ncm_oracle_new();
    }
    ncm_oracle_reset(oracle);
    h->params = (NcmOracleParams) {
        .in_max_size = qtest_readl(h->qts, b + 4),
        .in_divisor = qtest_readw(h->qts, b + 8),
        .in_remainder = qtest_readw(h->qts, b + 10),
        .in_alignment = qtest_readw(h->qts, b + 12),
        .max_packet = h->k->bulk_mps,
    };
    h->oracle_in = true;
    return true;
}

/* A chain of TDs of @len bytes in all on @ep, split at the TD size */
static void bulk(Hcd *h, uint8_t pid, uint8_t ep, const uint8_t *data,
                 uint32_t len, uint32_t td_len, bool toggle, HcdChain *c)
{
    HcdTd tds[MAX_TDS];
    uint64_t buf = zalloc(h, len);
    unsigned n = 0;
    uint32_t off = 0;

    if (data && len) {
        qtest_memwrite(h->qts, buf, data, len);
    }
    td_len = MAX(td_len, 1);
    do {
        uint32_t l = MIN(td_len, len - off);

        tds[n] = (HcdTd){ pid, h->addr, ep, toggle ^ (n & 1), l, buf + off };
        n++;
        off += l;
    } while (off < len && n < MAX_TDS);
    h->k->queue(h, tds, n, NULL, c);
}

/* An NTB16 of one to four datagrams from the input, well formed */
static GByteArray *build_ntb(FuzzIn *in, uint16_t seq)
{
    /* the NDP at 16, the datagrams 4-aligned, as Linux's cdc_ncm does */
    NcmHostLayout l = { .ndp_alignment = 16, .divisor = 4 };

    return in_ntb(in, &l, in_u8(in) % 4 + 1, seq);
}

enum {
    HOP_CONTROL,
    HOP_BULK_OUT,
    HOP_BULK_IN,
    HOP_INTR_IN,
    HOP_RAW_TD,
    HOP_PORT,
    HOP_REG,
    HOP_CLOCK,
    HOP_FRAME,
    HOP_WAIT,
    HOP_ADDRESS,
    HOP__MAX
};

static void hop_control(Hcd *h, FuzzIn *in)
{
    uint8_t type = in_u8(in), req = in_u8(in);
    uint16_t value = in_u16(in), index = in_u16(in), len = in_u16(in) % 1024;
    g_autofree uint8_t *buf = g_malloc0(MAX(len, 1));

    if (!(type & 0x80)) {
        in_fill(in, buf, len, len);
    }
    control(h, h->addr, type, req, value, index, buf, len);
    frames(h, 2);
}

static void hop_bulk_out(Hcd *h, FuzzIn *in)
{
    uint8_t kind = in_u8(in);
    uint16_t arg = in_u16(in);
    g_autoptr(GByteArray) ntb = NULL;
    g_autofree uint8_t *buf = NULL;
    uint32_t len, mps = h->k->bulk_mps, td = h->k->td_max;
    static uint16_t seq;

    switch (kind % 6) {
    case 0:
    case 1:
        ntb = build_ntb(in, seq++);
        if (kind % 6 == 1) {
            /* padded to a wMaxPacketSize multiple: a ZLP ends it */
            g_byte_array_set_size(ntb, ROUND_UP(ntb->len, mps));
        }
        bulk(h, PID_OUT, EP_OUT, ntb->data, ntb->len,
             kind & 0x80 ? mps : td, false, NULL);
        if (ntb->len % mps == 0) {
            bulk(h, PID_OUT, EP_OUT, NULL, 0, 0, false, NULL);
        }
        break;
    case 2:
        bulk(h, PID_OUT, EP_OUT, NULL, 0, 0, kind & 0x80, NULL);
        break;
    case 3:
        len = mps * (1 + arg % 32);
        buf = g_malloc(len);
        in_fill(in, buf, len, 256);
        bulk(h, PID_OUT, EP_OUT, buf, len, kind & 0x80 ? mps : td, false,
             NULL);
        break;
    default:
        len = arg % 16384;
        buf = g_malloc(MAX(len, 1));
        in_fill(in, buf, len, 256);
        bulk(h, PID_OUT, EP_OUT, buf, len, kind & 0x80 ? mps : arg % td + 1,
             kind & 0x40, NULL);
        break;
    }
    frames(h, 1 + (kind >> 4) % 4);
}

static void hop_bulk_in(Hcd *h, FuzzIn *in)
{
    uint8_t kind = in_u8(in);
    uint16_t arg = in_u16(in);
    uint32_t mps = h->k->bulk_mps;
    uint32_t len = kind & 0x80 ? arg % 16384 : mps * (1 + arg % 32);
    bool follow = h->oracle_in && !h->on_comp && h->addr == h->dev_addr;
    HcdChain c;

    if (follow && !in_poll(h)) {
        /* two chains outstanding: which one gets the next NTB is open */
        h->oracle_in = follow = false;
    }
    if (h->oracle_in && !follow) {
        /*
         * A chain the oracle does not follow (queued with the companion
         * bit, which a controller without companions ignores, or at
         * another address) may still reach the device and take part of
         * an NTB: the chains after it no longer start at an NTB (F21)
         */
        in_poll(h);
        h->oracle_in = false;
    }
    bulk(h, PID_IN, EP_IN, NULL, len, kind & 0x40 ? mps : h->k->td_max,
         kind & 0x20, &c);
    if (follow && h->oracle_in) {
        h->in = c;
    }
    frames(h, 1 + kind % 8);
}

static void hop_intr_in(Hcd *h, FuzzIn *in)
{
    bulk(h, PID_IN, EP_NOTIFY, NULL, in_u8(in) % 64, 64, false, NULL);
    frames(h, 2);
}

/* TDs whose controller words come from the input, on any endpoint */
static void hop_raw_td(Hcd *h, FuzzIn *in)
{
    uint8_t sel = in_u8(in);
    uint32_t raw[3] = { in_u32(in), in_u32(in), in_u32(in) };
    uint16_t len = in_u16(in) % 4096;
    HcdTd tds[4];
    uint64_t buf = zalloc(h, len);
    unsigned i, n = sel % 4 + 1;

    for (i = 0; i < n; i++) {
        tds[i] = (HcdTd){ (sel >> 2) % 3, h->addr, (sel >> 4) % 8, i & 1,
                          len, buf };
    }
    h->k->queue(h, tds, n, raw, NULL);
    frames(h, 2);
}

static void hop_port(Hcd *h, FuzzIn *in)
{
    uint8_t op = in_u8(in);

    h->k->port(h, op, in_u16(in));
}

static void hop_reg(Hcd *h, FuzzIn *in)
{
    uint8_t off = in_u8(in);

    h->k->reg(h, off, in_u32(in));
}

static void hop_clock(Hcd *h, FuzzIn *in)
{
    qtest_clock_step(h->qts, ((int64_t)in_u16(in) + 1) * 10000);
    flush_events(h->qts);
    sock_drain();
}

static void hop_frame(Hcd *h, FuzzIn *in)
{
    uint8_t kind = in_u8(in);
    uint32_t len = 14 + in_u16(in) % 1501;
    g_autofree uint8_t *buf = g_malloc(len + 4);
    ssize_t n;

    stl_be_p(buf, len);
    in_fill(in, buf + 4, len, 64);
    if (!(kind & 0x40)) {
        memcpy(buf + 4, kind & 1 ? "\xff\xff\xff\xff\xff\xff" :
               "\x52\x54\x00\x12\x34\x56", 6);
    }
    n = send(sockfds[0], buf, len + 4, MSG_DONTWAIT);
    (void)n;
    flush_events(h->qts);
}

static void hop_wait(Hcd *h, FuzzIn *in)
{
    frames(h, 1 + in_u8(in) % 64);
}

/* The address later operations use (and SET_ADDRESS to it, with bit 7) */
static void hop_address(Hcd *h, FuzzIn *in)
{
    uint8_t v = in_u8(in);

    if (v & 0x80) {
        control(h, h->addr, USB_RECIP_DEVICE, USB_REQ_SET_ADDRESS, v & 0x7f, 0,
                NULL, 0);
        frames(h, 5);
    }
    h->addr = v & 0x7f;
}

/*
 * Operations after which the oracle still knows what the IN stream is:
 * bulk transfers, frames, waiting, and control transfers with a
 * device-to-host data stage (requests that read); @in is where the
 * operation's bytes start.  Raw TDs, port and register writes and
 * SET_ADDRESS are not.
 */
static bool oracle_follows(unsigned op, const FuzzIn *in)
{
    uint8_t b0 = in->len ? in->p[0] : 0;

    switch (op) {
    case HOP_CONTROL:
        return b0 & 0x80;
    case HOP_ADDRESS:
        return !(b0 & 0x80);
    case HOP_BULK_OUT:
    case HOP_BULK_IN:
    case HOP_INTR_IN:
    case HOP_CLOCK:
    case HOP_FRAME:
    case HOP_WAIT:
        return true;
    default:
        return false;
    }
}

static void hcd_run(Hcd *h, FuzzIn *in)
{
    static void (*const ops[HOP__MAX])(Hcd *, FuzzIn *) = {
        [HOP_CONTROL] = hop_control,
        [HOP_BULK_OUT] = hop_bulk_out,
        [HOP_BULK_IN] = hop_bulk_in,
        [HOP_INTR_IN] = hop_intr_in,
        [HOP_RAW_TD] = hop_raw_td,
        [HOP_PORT] = hop_port,
        [HOP_REG] = hop_reg,
        [HOP_CLOCK] = hop_clock,
        [HOP_FRAME] = hop_frame,
        [HOP_WAIT] = hop_wait,
        [HOP_ADDRESS] = hop_address,
    };
    int n = 0, i;

    while (in->len && n++ < MAX_OPS) {
        uint8_t op = in_u8(in);

        /* EHCI: bit 7 addresses the companion UHCI of ports 1 and 2 */
        h->on_comp = op & 0x80;
        if (!oracle_follows((op & 0x7f) % HOP__MAX, in)) {
            oracle_stop(h);
        }
        ops[(op & 0x7f) % HOP__MAX](h, in);
        flush_events(h->qts);
        sock_drain();
        in_poll(h);
        desc_poll(h);
    }
    frames(h, 4);
    /* a chain the device has begun to answer: its end, a while at most */
    for (i = 0; i < 16; i++) {
        in_poll(h);
        desc_poll(h);
        if (!h->desc_pending &&
            (!h->oracle_in || h->in.ended || !h->in.next)) {
            break;
        }
        frames(h, 1);
    }
}

/* Setting up, forking, running */

static Hcd base;

/* After a machine reset: find the controllers, map their BARs */
static void pci_keep(const HcdKind *k, QTestState *s)
{
    unsigned i;

    pci_kept.bus = qpci_new_pc(s, NULL);
    for (i = 0; i <= k->companions; i++) {
        QPCIDevice *d = qpci_device_find(pci_kept.bus, i ?
                                         QPCI_DEVFN(0x1d, i - 1) : k->devfn);

        g_assert(d);
        qpci_device_enable(d);
        pci_kept.pdev[i] = d;
        /* a UHCI companion's registers are in BAR 4 */
        pci_kept.bar[i] = qpci_iomap(d, i ? 4 : k->bar, NULL);
    }
}

static void pci_forget(void)
{
    unsigned i;

    for (i = 0; i < ARRAY_SIZE(pci_kept.pdev); i++) {
        g_free(pci_kept.pdev[i]);
        pci_kept.pdev[i] = NULL;
    }
    qpci_free_pc(pci_kept.bus);
    pci_kept.bus = NULL;
}

/*
 * Start the controller through its own reset register (UHCI
 * USBCMD.HCRESET, OHCI HcControl USBRESET and HcCommandStatus.HCR, EHCI
 * USBCMD.HCRESET and its companions' HCRESET), reset the device's port
 * and enumerate the device.  False: the device did not answer its first
 * GET_DESCRIPTOR (the controller or the device stopped answering).
 */
static bool hcd_begin(Hcd *h, const HcdKind *k, QTestState *s)
{
    memset(h, 0, sizeof(*h));
    h->k = k;
    h->qts = s;
    sock_drain();
    pc_alloc_init(&h->alloc, s, 0);
    if (!pci_kept.bus) {
        pci_keep(k, s);
    }
    h->bus = pci_kept.bus;
    h->pdev = pci_kept.pdev[0];
    h->bar = pci_kept.bar[0];
    k->start(h);
    h->answered = enumerate(h);
    flush_events(s);
    sock_drain();
    return h->answered;
}

static void machine_reset(QTestState *s)
{
    pci_forget();
    fuzz_reset(s);
    ncm_fuzz_counters()->machine_resets++;
}

/*
 * Inputs between two machine resets: USB_NCM_FUZZ_RESET_EVERY (64 unless
 * set; 1 resets the machine after every input, as the targets did before)
 * as for usb-ncm-dl-fuzz.  In between, the next input starts where a
 * guest whose driver reloads starts: hcd_begin() resets the controller
 * through its register, which resets its root hub's ports, and the
 * device's port.  An input cannot set anything else that such a reset
 * leaves behind (no usb-ncm-fault, no link, no migration here).
 */
static void hcd_end(Hcd *h)
{
    static unsigned since_reset;

    alloc_destroy(&h->alloc);
    sock_drain();
    if (h->answered && ++since_reset < ncm_fuzz_reset_every()) {
        flush_events(h->qts);
        ncm_fuzz_counters()->light_resets++;
        return;
    }
    since_reset = 0;
    machine_reset(h->qts);
}

typedef struct HcdChild {
    FuzzIn in;
} HcdChild;

static void hcd_child(void *opaque)
{
    HcdChild *c = opaque;

    hcd_run(&base, &c->in);
}

static void sock_flush_both(void)
{
    uint8_t buf[4096];

    sock_drain();
    while (recv(sockfds[1], buf, sizeof(buf), MSG_DONTWAIT) > 0) {
        continue;
    }
}

static void hcd_fuzz(const HcdKind *k, QTestState *s, const unsigned char *data,
                     size_t size)
{
    HcdChild c = { { data, size } };
    Hcd h;

    if (!ncm_fork_enabled()) {
        if (!hcd_begin(&h, k, s)) {
            /* the last input left a controller that does not answer */
            alloc_destroy(&h.alloc);
            machine_reset(s);
            hcd_begin(&h, k, s);
        }
        hcd_run(&h, &c.in);
        hcd_end(&h);
        return;
    }
    if (!base.k) {
        hcd_begin(&base, k, s);
        sock_flush_both();
    }
    ncm_fork_run(hcd_child, &c);
    sock_flush_both();
}

static const HcdKind hcd_uhci = {
    .name = "uhci",
    .devices = " -device piix3-usb-uhci,id=uhci,addr=04.0"
               " -device usb-ncm-dl,bus=uhci.0,port=1,netdev=n0",
    .devfn = QPCI_DEVFN(4, 0),
    .bar = 4,
    .bulk_mps = 64,
    .td_max = 64,
    .start = uk_start,
    .queue = uk_queue,
    .td_state = uhci_td_state,
    .port = uk_port,
    .reg = uk_reg,
};

static const HcdKind hcd_ohci = {
    .name = "ohci",
    .devices = " -device pci-ohci,id=ohci,addr=04.0"
               " -device usb-ncm-dl,bus=ohci.0,port=1,netdev=n0",
    .devfn = QPCI_DEVFN(4, 0),
    .bulk_mps = 64,
    .td_max = 8192,
    .start = ok_start,
    .queue = ok_queue,
    .td_state = ohci_td_state,
    .port = ok_port,
    .reg = ok_reg,
};

static const HcdKind hcd_ehci = {
    .name = "ehci",
    .devices = " -device ich9-usb-ehci1,id=ehci,addr=1d.7,multifunction=on"
               " -device ich9-usb-uhci1,masterbus=ehci.0,firstport=0,"
               "addr=1d.0,multifunction=on"
               " -device ich9-usb-uhci2,masterbus=ehci.0,firstport=2,"
               "addr=1d.1,multifunction=on"
               " -device ich9-usb-uhci3,masterbus=ehci.0,firstport=4,"
               "addr=1d.2,multifunction=on"
               " -device usb-ncm-dl,bus=ehci.0,port=1,netdev=n0",
    .devfn = QPCI_DEVFN(0x1d, 7),
    .companions = 3,
    .bulk_mps = 512,
    .td_max = 16384,
    .start = ek_start,
    .queue = ek_queue,
    .td_state = ehci_td_state,
    .port = ek_port,
    .reg = ek_reg,
};

static void uhci_fuzz(QTestState *s, const unsigned char *d, size_t n)
{
    hcd_fuzz(&hcd_uhci, s, d, n);
}

static void ohci_fuzz(QTestState *s, const unsigned char *d, size_t n)
{
    hcd_fuzz(&hcd_ohci, s, d, n);
}

static void ehci_fuzz(QTestState *s, const unsigned char *d, size_t n)
{
    hcd_fuzz(&hcd_ehci, s, d, n);
}

static GString *hcd_cmdline(const HcdKind *k)
{
    const char *dirs = g_getenv("USB_NCM_QTEST_FIRMWARE");
    g_auto(GStrv) v = g_strsplit(dirs ? dirs :
                                 "/usr/share/seabios:/usr/share/qemu",
                                 ":", -1);
    GString *cmd = g_string_new(TARGET_NAME);
    int i;

    g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM, 0, sockfds), ==, 0);
    g_unix_set_fd_nonblocking(sockfds[0], true, NULL);
    for (i = 0; v[i]; i++) {
        if (*v[i] && g_file_test(v[i], G_FILE_TEST_IS_DIR)) {
            g_string_append_printf(cmd, " -L %s", v[i]);
        }
    }
    g_string_append_printf(cmd, " -machine pc,accel=qtest -m 128M"
                           " -display none -nodefaults"
                           " -netdev socket,id=n0,fd=%d%s ",
                           sockfds[1], k->devices);
    return cmd;
}

static GString *uhci_cmdline(FuzzTarget *t)
{
    return hcd_cmdline(&hcd_uhci);
}

static GString *ohci_cmdline(FuzzTarget *t)
{
    return hcd_cmdline(&hcd_ohci);
}

static GString *ehci_cmdline(FuzzTarget *t)
{
    return hcd_cmdline(&hcd_ehci);
}

static void register_usb_ncm_dl_hcd_fuzz_targets(void)
{
    fuzz_add_target(&(FuzzTarget){
        .name = "usb-ncm-dl-uhci-fuzz",
        .description = "Fuzz usb-ncm-dl behind piix3-usb-uhci with QH/TD "
                       "schedules, port and register writes",
        .get_init_cmdline = uhci_cmdline,
        .fuzz = uhci_fuzz,
    });
    fuzz_add_target(&(FuzzTarget){
        .name = "usb-ncm-dl-ohci-fuzz",
        .description = "Fuzz usb-ncm-dl behind pci-ohci with ED/TD lists, "
                       "port and register writes",
        .get_init_cmdline = ohci_cmdline,
        .fuzz = ohci_fuzz,
    });
    fuzz_add_target(&(FuzzTarget){
        .name = "usb-ncm-dl-ehci-fuzz",
        .description = "Fuzz usb-ncm-dl behind ich9-usb-ehci1 and its UHCI "
                       "companions with async and periodic qTD schedules, "
                       "port handover and register writes",
        .get_init_cmdline = ehci_cmdline,
        .fuzz = ehci_fuzz,
    });
}

fuzz_target_init(register_usb_ncm_dl_hcd_fuzz_targets);
