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
 * TD, until an operation it cannot follow (oracle_follows()).  The
 * controllers' drivers are libqos's (libqos/usb-hcd.c, which the qtests
 * use too); this file turns input bytes into their operations.
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
#include "tests/qtest/libqos/usb-hcd.h"
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

/*
 * The guest time the clock and wait operations of one input may use.
 * Without a bound, 192 clock steps of up to 655 ms each are two minutes
 * of guest time, every frame of which the controller model processes
 * (an EHCI input of that kind took 3.3 s of CPU).  One second is more
 * than any of the device's timers waits (a replug's 200 ms, at most
 * 100 ms of in-coalesce-us); the frames a transfer or request waits
 * for are not counted against it.
 */
#define CLOCK_BUDGET_NS     NANOSECONDS_PER_SECOND

typedef struct Hcd Hcd;

typedef struct HcdKind {
    const char *name;
    const char *devices;        /* -device arguments, %d: the netdev fd */
    uint8_t devfn;
    uint8_t bar;                /* the BAR of its registers */
    QHcdType type;
    unsigned companions;        /* UHCI companions at 1d.0, 1d.1, ... */
    unsigned bulk_mps;          /* the device's bulk wMaxPacketSize */
    unsigned td_max;            /* bytes one TD (qTD) may take */
    /* port and register writes from an operation's bytes */
    void (*port)(Hcd *h, uint8_t op, uint16_t arg);
    void (*reg)(Hcd *h, uint8_t off, uint32_t val);
} HcdKind;

struct Hcd {
    QHcd hc;                    /* the controller (libqos/usb-hcd.c) */
    const HcdKind *k;
    QGuestAllocator alloc;
    QPCIBus *bus;
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
    QHcdChain ctl;              /* the last control transfer to it */
    QHcdChain desc;             /* a GET_DESCRIPTOR's data stage */
    bool desc_pending;
    uint16_t desc_value, desc_len;
    QHcdChain in;               /* the bulk IN chain followed */
    int64_t clock_left_ns;      /* of CLOCK_BUDGET_NS, for this input */
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

/* The netdev's side, and the in-process main loop, after every step */
static void hcd_run_main_loop(QHcd *hc)
{
    flush_events(hc->qts);
    sock_drain();
}

static void frames(Hcd *h, unsigned n)
{
    qhcd_frames(&h->hc, n);
}

/*
 * Port and register writes from an operation's bytes, through the
 * controllers' drivers (libqos/usb-hcd.c)
 */

static void uhci_port(Hcd *h, QUhci *u, uint8_t op, uint16_t arg)
{
    int port = (op >> 4) & 1;
    uint16_t v = qpci_io_readw(u->pdev, u->bar, QUHCI_PORTSC(port)) & ~0xau;

    switch (op % 8) {
    case 0:
        quhci_port_reset(&h->hc, u, port, false);
        return;
    case 1:
        v = arg;
        break;
    case 2:
        v &= ~QUHCI_PORT_PE;
        break;
    case 3:
        v |= QUHCI_PORT_PE;
        break;
    case 4:
        v |= QUHCI_PORT_SUSP;
        break;
    case 5:
        v = (v & ~QUHCI_PORT_SUSP) | QUHCI_PORT_RD;
        break;
    case 6:
        v |= 0xa;                                   /* CSC, PEC */
        break;
    default:
        v |= QUHCI_PORT_PR;
        break;
    }
    qpci_io_writew(u->pdev, u->bar, QUHCI_PORTSC(port), v);
    frames(h, 1 + arg % 20);
}

static void uhci_reg(Hcd *h, QUhci *u, uint8_t off, uint32_t val)
{
    off %= 0x14;
    if (off == QUHCI_FLBASE) {
        qpci_io_writel(u->pdev, u->bar, off, val);
    } else if (off == QUHCI_SOF) {
        qpci_io_writeb(u->pdev, u->bar, off, val);
    } else {
        qpci_io_writew(u->pdev, u->bar, off & ~1, val);
    }
    frames(h, 1);
}

static void uk_port(Hcd *h, uint8_t op, uint16_t arg)
{
    uhci_port(h, &h->hc.uhci, op, arg);
}

static void uk_reg(Hcd *h, uint8_t off, uint32_t val)
{
    uhci_reg(h, &h->hc.uhci, off, val);
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

    qohci_write(&h->hc, QOHCI_RHPORT(port),
                op & 0x80 ? arg | (uint32_t)arg << 16 : bits[op % 8]);
    frames(h, 1 + arg % 20);
}

static void ok_reg(Hcd *h, uint8_t off, uint32_t val)
{
    qohci_write(&h->hc, (off % 0x60) & ~3, val);
    frames(h, 1);
}

static void ek_port(Hcd *h, uint8_t op, uint16_t arg)
{
    int port = (op >> 4) % 6;
    uint32_t v;

    if (h->hc.on_comp) {
        uhci_port(h, &h->hc.comp[0], op, arg);
        return;
    }
    v = qehci_read(&h->hc, QEHCI_PORTSC(port)) & ~QEHCI_PORT_RWC;
    switch (op % 10) {
    case 0:
        qehci_port_reset(&h->hc, port, false);
        return;
    case 1:
        v = arg | (uint32_t)arg << 16;
        break;
    case 2:
        v &= ~QEHCI_PORT_PED;
        break;
    case 3:
        v |= QEHCI_PORT_SUSP;
        break;
    case 4:
        v |= QEHCI_PORT_FPR;
        break;
    case 5:
        v |= QEHCI_PORT_PO;                 /* to the companion */
        break;
    case 6:
        v &= ~QEHCI_PORT_PO;                /* back */
        break;
    case 7:
        v ^= QEHCI_PORT_PP;
        break;
    case 8:
        v |= QEHCI_PORT_RWC;
        break;
    default:
        qehci_write(&h->hc, QEHCI_CONFIGFLAG, arg & 1);
        frames(h, 2);
        return;
    }
    qehci_write(&h->hc, QEHCI_PORTSC(port), v);
    frames(h, 1 + arg % 20);
}

static void ek_reg(Hcd *h, uint8_t off, uint32_t val)
{
    if (h->hc.on_comp) {
        uhci_reg(h, &h->hc.comp[0], off, val);
        return;
    }
    qehci_write(&h->hc, (off % 0x48) & ~3, val);
    frames(h, 1);
}

/*
 * The schedule an endpoint's chain goes on: the device's interrupt
 * endpoint on the periodic one
 */
static QHcdList ep_list(uint8_t ep)
{
    return ep == 0 ? QHCD_LIST_CONTROL :
           ep == EP_NOTIFY ? QHCD_LIST_INTERRUPT : QHCD_LIST_BULK;
}

static void queue(Hcd *h, const QHcdTd *tds, unsigned n, const uint32_t *raw,
                  QHcdChain *c)
{
    qhcd_queue(&h->hc, ep_list(tds[0].ep), tds, n, raw, c);
}

/* Reading back what completed, and the NCM oracle */

/* A violation is a finding: abort, and libFuzzer saves the input */
static void oracle_failed(Hcd *h, const char *what, const char *why)
{
    fprintf(stderr, "usb-ncm-dl-%s-fuzz: NCM oracle: %s: %s\n",
            h->k->name, what, why);
    abort();
}

/* A GET_DESCRIPTOR's data stage: its bytes up to the first short TD */
static void desc_td(QHcd *hc, const QHcdRef *r, uint32_t actual,
                    void *opaque)
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
    if (!qhcd_chain_poll(&h->hc, &h->desc, desc_td, &total)) {
        return;
    }
    h->desc_pending = false;
    if (h->desc.error || !h->desc.n) {
        return;
    }
    total = MIN(total, h->desc_len);
    buf = g_malloc(MAX(total, 1));
    qtest_memread(h->hc.qts, h->desc.r[0].buf, buf, total);
    if (!ncm_oracle_descriptor(h->desc_value >> 8, h->desc_value & 0xff,
                               h->desc_len, buf, total, why, sizeof(why))) {
        oracle_failed(h, "GET_DESCRIPTOR", why);
    }
    ncm_fuzz_counters()->oracle_desc++;
}

/* One completed bulk IN TD: a transfer of its own to the oracle */
static void in_td(QHcd *hc, const QHcdRef *r, uint32_t actual, void *opaque)
{
    Hcd *h = container_of(hc, Hcd, hc);
    g_autofree uint8_t *buf = g_malloc(MAX(actual, 1));
    char why[256] = "";

    qtest_memread(h->hc.qts, r->buf, buf, actual);
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
    if (!qhcd_chain_poll(&h->hc, &h->in, in_td, NULL)) {
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
    uint8_t setup[8];
    uint64_t buf = qhcd_zalloc(&h->hc, 8 + MAX(len, 1));
    bool track = !h->hc.on_comp && addr == h->dev_addr;
    bool idle = track && qhcd_chain_poll(&h->hc, &h->ctl, NULL, NULL);
    QHcdChain c;

    setup[0] = type;
    setup[1] = req;
    stw_le_p(setup + 2, value);
    stw_le_p(setup + 4, index);
    stw_le_p(setup + 6, len);
    if (data && len && !(type & 0x80)) {
        qtest_memwrite(h->hc.qts, buf + 8, data, len);
    }
    qhcd_control(&h->hc, addr, setup, buf, &c);
    if (!track || !c.n) {
        return buf;
    }
    h->ctl = c;
    if (idle && h->desc_on && type == USB_DIR_IN &&
        req == USB_REQ_GET_DESCRIPTOR && len &&
        !h->desc_pending) {
        /* the data stage: the TDs between SETUP and status */
        h->desc = (QHcdChain){ .n = c.n - 2, .uhci = c.uhci,
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

    for (i = 0; i < max_frames &&
                !qhcd_chain_poll(&h->hc, &h->ctl, NULL, NULL); i++) {
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
        .in_max_size = qtest_readl(h->hc.qts, b + 4),
        .in_divisor = qtest_readw(h->hc.qts, b + 8),
        .in_remainder = qtest_readw(h->hc.qts, b + 10),
        .in_alignment = qtest_readw(h->hc.qts, b + 12),
        .max_packet = h->k->bulk_mps,
    };
    h->oracle_in = true;
    return true;
}

/* A chain of TDs of @len bytes in all on @ep, split at the TD size */
static void bulk(Hcd *h, uint8_t pid, uint8_t ep, const uint8_t *data,
                 uint32_t len, uint32_t td_len, bool toggle, QHcdChain *c)
{
    QHcdTd tds[QHCD_MAX_TDS];
    uint64_t buf = qhcd_zalloc(&h->hc, len);
    unsigned n = 0;
    uint32_t off = 0;

    if (data && len) {
        qtest_memwrite(h->hc.qts, buf, data, len);
    }
    td_len = MAX(td_len, 1);
    do {
        uint32_t l = MIN(td_len, len - off);

        tds[n] = (QHcdTd){ pid, h->addr, ep, toggle ^ (n & 1), l, buf + off };
        n++;
        off += l;
    } while (off < len && n < QHCD_MAX_TDS);
    queue(h, tds, n, NULL, c);
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
        bulk(h, QHCD_PID_OUT, EP_OUT, ntb->data, ntb->len,
             kind & 0x80 ? mps : td, false, NULL);
        if (ntb->len % mps == 0) {
            bulk(h, QHCD_PID_OUT, EP_OUT, NULL, 0, 0, false, NULL);
        }
        break;
    case 2:
        bulk(h, QHCD_PID_OUT, EP_OUT, NULL, 0, 0, kind & 0x80, NULL);
        break;
    case 3:
        len = mps * (1 + arg % 32);
        buf = g_malloc(len);
        in_fill(in, buf, len, 256);
        bulk(h, QHCD_PID_OUT, EP_OUT, buf, len, kind & 0x80 ? mps : td, false,
             NULL);
        break;
    default:
        len = arg % 16384;
        buf = g_malloc(MAX(len, 1));
        in_fill(in, buf, len, 256);
        bulk(h, QHCD_PID_OUT, EP_OUT, buf, len,
             kind & 0x80 ? mps : arg % td + 1, kind & 0x40, NULL);
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
    bool follow = h->oracle_in && !h->hc.on_comp && h->addr == h->dev_addr;
    QHcdChain c;

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
    bulk(h, QHCD_PID_IN, EP_IN, NULL, len, kind & 0x40 ? mps : h->k->td_max,
         kind & 0x20, &c);
    if (follow && h->oracle_in) {
        h->in = c;
    }
    frames(h, 1 + kind % 8);
}

static void hop_intr_in(Hcd *h, FuzzIn *in)
{
    bulk(h, QHCD_PID_IN, EP_NOTIFY, NULL, in_u8(in) % 64, 64, false, NULL);
    frames(h, 2);
}

/* TDs whose controller words come from the input, on any endpoint */
static void hop_raw_td(Hcd *h, FuzzIn *in)
{
    uint8_t sel = in_u8(in);
    uint32_t raw[3] = { in_u32(in), in_u32(in), in_u32(in) };
    uint16_t len = in_u16(in) % 4096;
    QHcdTd tds[4];
    uint64_t buf = qhcd_zalloc(&h->hc, len);
    unsigned i, n = sel % 4 + 1;

    for (i = 0; i < n; i++) {
        tds[i] = (QHcdTd){ (sel >> 2) % 3, h->addr, (sel >> 4) % 8, i & 1,
                          len, buf };
    }
    queue(h, tds, n, raw, NULL);
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

/* @ns of this input's guest time, as much of it as is left */
static int64_t clock_take(Hcd *h, int64_t ns)
{
    ns = MIN(ns, h->clock_left_ns);
    h->clock_left_ns -= ns;
    return ns;
}

static void hop_clock(Hcd *h, FuzzIn *in)
{
    int64_t ns = clock_take(h, ((int64_t)in_u16(in) + 1) * 10000);

    if (ns) {
        qtest_clock_step(h->hc.qts, ns);
    }
    flush_events(h->hc.qts);
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
    flush_events(h->hc.qts);
}

static void hop_wait(Hcd *h, FuzzIn *in)
{
    unsigned n = 1 + in_u8(in) % 64;

    frames(h, clock_take(h, n * QHCD_FRAME_NS) / QHCD_FRAME_NS);
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

    h->clock_left_ns = CLOCK_BUDGET_NS;
    while (in->len && n++ < MAX_OPS) {
        uint8_t op = in_u8(in);

        /* EHCI: bit 7 addresses the companion UHCI of ports 1 and 2 */
        h->hc.on_comp = op & 0x80;
        if (!oracle_follows((op & 0x7f) % HOP__MAX, in)) {
            oracle_stop(h);
        }
        ops[(op & 0x7f) % HOP__MAX](h, in);
        flush_events(h->hc.qts);
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
    unsigned i;

    memset(h, 0, sizeof(*h));
    h->k = k;
    sock_drain();
    pc_alloc_init(&h->alloc, s, 0);
    if (!pci_kept.bus) {
        pci_keep(k, s);
    }
    h->bus = pci_kept.bus;
    h->hc = (QHcd) {
        .type = k->type,
        .qts = s,
        .alloc = &h->alloc,
        .pdev = pci_kept.pdev[0],
        .bar = pci_kept.bar[0],
        .companions = k->companions,
        .bulk_mps = k->bulk_mps,
        .run_main_loop = hcd_run_main_loop,
    };
    for (i = 0; i < k->companions; i++) {
        h->hc.comp[i].pdev = pci_kept.pdev[1 + i];
        h->hc.comp[i].bar = pci_kept.bar[1 + i];
    }
    qhcd_start(&h->hc);
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
        flush_events(h->hc.qts);
        ncm_fuzz_counters()->light_resets++;
        return;
    }
    since_reset = 0;
    machine_reset(h->hc.qts);
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
    .type = QHCD_UHCI,
    .bulk_mps = 64,
    .td_max = 64,
    .port = uk_port,
    .reg = uk_reg,
};

static const HcdKind hcd_ohci = {
    .name = "ohci",
    .devices = " -device pci-ohci,id=ohci,addr=04.0"
               " -device usb-ncm-dl,bus=ohci.0,port=1,netdev=n0",
    .devfn = QPCI_DEVFN(4, 0),
    .type = QHCD_OHCI,
    .bulk_mps = 64,
    .td_max = 8192,
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
    .type = QHCD_EHCI,
    .companions = 3,
    .bulk_mps = 512,
    .td_max = 16384,
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
