/*
 * libqos xHCI driver: enumerate a USB device and move real transfers
 *
 * Register and TRB layouts follow the xHCI 1.2 specification; the fields
 * used are the ones hw/usb/hcd-xhci.c reads.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "qemu/host-utils.h"
#include "qemu/timer.h"
#include "../libqtest.h"
#include "xhci-driver.h"

/* Capability registers */
#define XHCI_CAPLENGTH          0x00
#define XHCI_HCSPARAMS1         0x04
#define XHCI_HCSPARAMS2         0x08
#define XHCI_HCCPARAMS1         0x10
#define XHCI_DBOFF              0x14
#define XHCI_RTSOFF             0x18

/* Operational registers */
#define XHCI_USBCMD             0x00
#define XHCI_USBSTS             0x04
#define XHCI_PAGESIZE           0x08
#define XHCI_CRCR_LO            0x18
#define XHCI_CRCR_HI            0x1c
#define XHCI_DCBAAP_LO          0x30
#define XHCI_DCBAAP_HI          0x34
#define XHCI_CONFIG             0x38
#define XHCI_PORTSC(n)          (0x400 + 0x10 * ((n) - 1))

#define USBCMD_RS               (1u << 0)
#define USBCMD_HCRST            (1u << 1)
#define USBSTS_HCH              (1u << 0)
#define USBSTS_HSE              (1u << 2)
#define USBSTS_CNR              (1u << 11)
#define USBSTS_HCE              (1u << 12)
#define CRCR_RCS                (1u << 0)

#define PORTSC_CCS              (1u << 0)
#define PORTSC_PED              (1u << 1)
#define PORTSC_PR               (1u << 4)
#define PORTSC_PP               (1u << 9)
#define PORTSC_PLS(v)           (((v) >> 5) & 0xf)
#define PORTSC_LWS              (1u << 16)
#define PORTSC_SPEED(v)         (((v) >> 10) & 0xf)
#define PORTSC_CSC              (1u << 17)
#define PORTSC_PEC              (1u << 18)
#define PORTSC_WRC              (1u << 19)
#define PORTSC_OCC              (1u << 20)
#define PORTSC_PRC              (1u << 21)
#define PORTSC_PLC              (1u << 22)
#define PORTSC_CEC              (1u << 23)
#define PORTSC_CHANGE_BITS      (PORTSC_CSC | PORTSC_PEC | PORTSC_WRC | \
                                 PORTSC_OCC | PORTSC_PRC | PORTSC_PLC | \
                                 PORTSC_CEC)

/* Runtime registers of interrupter 0 */
#define XHCI_IR0                0x20
#define XHCI_IMAN               0x00
#define XHCI_ERSTSZ             0x08
#define XHCI_ERSTBA_LO          0x10
#define XHCI_ERSTBA_HI          0x14
#define XHCI_ERDP_LO            0x18
#define XHCI_ERDP_HI            0x1c
#define ERDP_EHB                (1u << 3)

/* TRB types */
#define TRB_NORMAL              1
#define TRB_SETUP               2
#define TRB_DATA                3
#define TRB_STATUS              4
#define TRB_LINK                6
#define TRB_ENABLE_SLOT         9
#define TRB_DISABLE_SLOT        10
#define TRB_ADDRESS_DEVICE      11
#define TRB_CONFIGURE_EP        12
#define TRB_EVALUATE_CONTEXT    13
#define TRB_RESET_EP            14
#define TRB_STOP_EP             15
#define TRB_SET_TR_DEQUEUE      16
#define TRB_NOOP_CMD            23
#define TRB_EV_TRANSFER         32
#define TRB_EV_CMD_COMPLETE     33
#define TRB_EV_PORT_STATUS      34
#define TRB_EV_HOST_CONTROLLER  37

/* TRB control bits */
#define TRB_C                   (1u << 0)
#define TRB_LINK_TC             (1u << 1)
#define TRB_ISP                 (1u << 2)
#define TRB_CH                  (1u << 4)
#define TRB_IOC                 (1u << 5)
#define TRB_IDT                 (1u << 6)
#define TRB_DIR_IN              (1u << 16)
#define TRB_TYPE(t)             ((uint32_t)(t) << 10)
#define TRB_GET_TYPE(c)         (((c) >> 10) & 0x3f)
#define TRB_SLOT(s)             ((uint32_t)(s) << 24)
#define TRB_EP(dci)             ((uint32_t)(dci) << 16)
#define TRB_SETUP_TRT(t)        ((uint32_t)(t) << 16)

#define TRB_SIZE                16
#define TRB_MAX_BUFFER          0x10000

/* Endpoint types in the endpoint context */
#define EP_TYPE_CONTROL         4

struct QXhciRing {
    uint64_t base;
    unsigned size;              /* TRBs, the last of which is a Link TRB */
    unsigned enq;
    bool pcs;                   /* producer cycle state */
    bool chain;                 /* the last TRB written had CH set */
    unsigned used;              /* TRBs owned by TDs not completed */
    unsigned wraps;
};

struct QXhci {
    QTestState *qts;
    QPCIDevice *pdev;
    QPCIBar bar;
    QGuestAllocator *alloc;
    QXhciOptions opts;
    uint32_t op;
    uint32_t rt;
    uint32_t db;
    int max_ports;
    int max_slots;
    unsigned ctx_size;
    uint32_t page_size;

    uint64_t dcbaa;
    uint64_t scratch_array;
    unsigned n_scratch;
    uint64_t *scratch_pages;

    QXhciRing cmd;
    uint64_t cmd_ptr;           /* command being waited for */
    bool cmd_done;
    int cmd_cc;
    int cmd_slot;

    uint64_t erst;
    uint64_t er_base;
    unsigned er_size;
    unsigned er_deq;
    bool er_ccs;
    unsigned er_wraps;

    QXhciDevice *slots[256];
    int port_events[256];

    QXhciEventHook *event_hook;
    void *event_hook_opaque;
    QXhciCheckpoint *checkpoint;
    void *checkpoint_opaque;
};

static void checkpoint(QXhci *x)
{
    if (x->checkpoint) {
        x->checkpoint(x, x->checkpoint_opaque);
    }
}

/* Time */

static void clock_step(QXhci *x, int64_t ns)
{
    qtest_clock_step(x->qts, ns);
    if (x->opts.after_step) {
        x->opts.after_step(x->qts, x->opts.after_step_opaque);
    }
}

/* Registers */

static uint32_t cap_readl(QXhci *x, uint32_t off)
{
    return qpci_io_readl(x->pdev, x->bar, off);
}

static uint32_t op_readl(QXhci *x, uint32_t off)
{
    return qpci_io_readl(x->pdev, x->bar, x->op + off);
}

static void op_writel(QXhci *x, uint32_t off, uint32_t val)
{
    qpci_io_writel(x->pdev, x->bar, x->op + off, val);
}

static void ir0_writel(QXhci *x, uint32_t off, uint32_t val)
{
    qpci_io_writel(x->pdev, x->bar, x->rt + XHCI_IR0 + off, val);
}

static void doorbell(QXhci *x, int slot, uint32_t target)
{
    qpci_io_writel(x->pdev, x->bar, x->db + 4 * slot, target);
    checkpoint(x);
}

static uint64_t zalloc(QXhci *x, size_t size)
{
    uint64_t addr = guest_alloc(x->alloc, size);

    g_assert(addr);
    qtest_memset(x->qts, addr, 0, size);
    return addr;
}

static void write_u64(QXhci *x, uint64_t addr, uint64_t val)
{
    uint8_t b[8];

    stq_le_p(b, val);
    qtest_memwrite(x->qts, addr, b, sizeof(b));
}

/* Rings */

static void ring_write_trb(QXhci *x, uint64_t addr, uint64_t param,
                           uint32_t status, uint32_t control)
{
    uint8_t trb[TRB_SIZE];

    stq_le_p(trb, param);
    stl_le_p(trb + 8, status);
    stl_le_p(trb + 12, control);
    qtest_memwrite(x->qts, addr, trb, sizeof(trb));
}

static void ring_reset(QXhci *x, QXhciRing *r)
{
    qtest_memset(x->qts, r->base, 0, (size_t)r->size * TRB_SIZE);
    /* Link TRB back to the start; its cycle bit is set when reached */
    ring_write_trb(x, r->base + (uint64_t)(r->size - 1) * TRB_SIZE,
                   r->base, 0, TRB_TYPE(TRB_LINK) | TRB_LINK_TC);
    r->enq = 0;
    r->pcs = true;
    r->chain = false;
    r->used = 0;
}

static QXhciRing *ring_new(QXhci *x, unsigned size)
{
    QXhciRing *r = g_new0(QXhciRing, 1);

    g_assert(size >= 4);
    r->size = size;
    r->base = guest_alloc(x->alloc, (size_t)size * TRB_SIZE);
    g_assert(r->base);
    ring_reset(x, r);
    return r;
}

static void ring_free(QXhci *x, QXhciRing *r)
{
    if (r) {
        guest_free(x->alloc, r->base);
        g_free(r);
    }
}

static unsigned ring_free_trbs(QXhciRing *r)
{
    /* one slot is kept empty so that enqueue never meets dequeue */
    return r->size - 2 - r->used;
}

static uint64_t ring_enqueue_addr(QXhciRing *r)
{
    return r->base + (uint64_t)r->enq * TRB_SIZE;
}

/*
 * Write one TRB at the enqueue pointer, following the Link TRB first when
 * the ring is at its end.  With @hold, the TRB gets the wrong cycle bit so
 * that the controller does not start a TD before all of it is written;
 * ring_release() hands it over.
 */
static uint64_t ring_put(QXhci *x, QXhciRing *r, uint64_t param,
                         uint32_t status, uint32_t control, bool hold,
                         uint32_t *final_control)
{
    uint64_t addr;

    if (r->enq == r->size - 1) {
        uint32_t link = TRB_TYPE(TRB_LINK) | TRB_LINK_TC |
                        (r->chain ? TRB_CH : 0) | (r->pcs ? TRB_C : 0);

        ring_write_trb(x, ring_enqueue_addr(r), r->base, 0, link);
        r->pcs = !r->pcs;
        r->enq = 0;
        r->wraps++;
    }
    addr = ring_enqueue_addr(r);
    control |= r->pcs ? TRB_C : 0;
    if (final_control) {
        *final_control = control;
    }
    ring_write_trb(x, addr, param, status, hold ? control ^ TRB_C : control);
    r->chain = control & TRB_CH;
    r->enq++;
    return addr;
}

static void ring_release(QXhci *x, uint64_t addr, uint32_t control)
{
    qtest_writel(x->qts, addr + 12, control);
}

/* Events */

static QXhciTransfer *find_transfer(QXhciDevice *d, unsigned dci,
                                    uint64_t ptr, unsigned *index)
{
    GList *l;
    unsigned i;

    for (l = d->pending; l; l = l->next) {
        QXhciTransfer *t = l->data;

        if (t->dci != dci) {
            continue;
        }
        for (i = 0; i < t->ntrbs; i++) {
            if (t->trb_addr[i] == ptr) {
                *index = i;
                return t;
            }
        }
    }
    return NULL;
}

static void transfer_retire(QXhciTransfer *t, int cc)
{
    QXhciDevice *d = t->dev;

    t->done = true;
    t->cc = cc;
    if (d) {
        d->pending = g_list_remove(d->pending, t);
        if (d->rings[t->dci]) {
            g_assert(d->rings[t->dci]->used >= t->ntrbs);
            d->rings[t->dci]->used -= t->ntrbs;
        }
    }
}

static void handle_transfer_event(QXhci *x, uint64_t ptr, uint32_t status,
                                  uint32_t control)
{
    unsigned slot = control >> 24;
    unsigned dci = (control >> 16) & 0x1f;
    unsigned cc = status >> 24;
    uint32_t residual = status & 0xffffff;
    QXhciDevice *d = x->slots[slot];
    QXhciTransfer *t;
    unsigned i, k;

    if (!d) {
        return;
    }
    t = find_transfer(d, dci, ptr, &i);
    if (!t) {
        /* an event for a TD that was cancelled: nothing waits for it */
        return;
    }
    if (t->control) {
        bool status_stage = i == t->ntrbs - 1;

        if (cc == QXHCI_CC_SHORT_PACKET && !status_stage) {
            /* data stage ended short; the status stage event follows */
            t->short_seen = true;
            t->actual = t->data_len - MIN(residual, t->data_len);
            return;
        }
        if (cc == QXHCI_CC_SUCCESS && !status_stage) {
            t->actual = t->data_len;
            return;
        }
        if (cc == QXHCI_CC_SUCCESS && !t->short_seen) {
            t->actual = t->data_len;
        }
        transfer_retire(t, cc);
        return;
    }

    t->actual = 0;
    for (k = 0; k < i; k++) {
        t->actual += t->trb_len[k];
    }
    t->actual += t->trb_len[i] - MIN(residual, t->trb_len[i]);
    t->short_seen = cc == QXHCI_CC_SHORT_PACKET;
    transfer_retire(t, cc);
}

static void cancel_pending(QXhciDevice *d, unsigned dci);

/* A device that disappeared from its port takes its TDs with it. */
static void handle_port_event(QXhci *x, unsigned port)
{
    unsigned i;

    x->port_events[port]++;
    if (port < 1 || port > x->max_ports ||
        (op_readl(x, XHCI_PORTSC(port)) & PORTSC_CCS)) {
        return;
    }
    for (i = 0; i < ARRAY_SIZE(x->slots); i++) {
        QXhciDevice *d = x->slots[i];

        if (d && d->port == port && !d->gone) {
            d->gone = true;
            cancel_pending(d, 0);
        }
    }
}

static void handle_event(QXhci *x, uint64_t ptr, uint32_t status,
                         uint32_t control)
{
    if (x->event_hook) {
        x->event_hook(x->event_hook_opaque, ptr, status, control);
    }
    switch (TRB_GET_TYPE(control)) {
    case TRB_EV_TRANSFER:
        handle_transfer_event(x, ptr, status, control);
        break;
    case TRB_EV_CMD_COMPLETE:
        if (ptr == x->cmd_ptr) {
            x->cmd_done = true;
            x->cmd_cc = status >> 24;
            x->cmd_slot = control >> 24;
        }
        break;
    case TRB_EV_PORT_STATUS:
        handle_port_event(x, (ptr >> 24) & 0xff);
        break;
    case TRB_EV_HOST_CONTROLLER:
        g_test_message("xhci: host controller event, completion code %u",
                       status >> 24);
        break;
    default:
        break;
    }
}

static void update_erdp(QXhci *x)
{
    uint64_t erdp = x->er_base + (uint64_t)x->er_deq * TRB_SIZE;

    ir0_writel(x, XHCI_ERDP_HI, erdp >> 32);
    ir0_writel(x, XHCI_ERDP_LO, (uint32_t)erdp | ERDP_EHB);
}

int qxhci_poll(QXhci *x)
{
    int n = 0;

    for (;;) {
        uint8_t trb[TRB_SIZE];
        uint32_t control;

        qtest_memread(x->qts, x->er_base + (uint64_t)x->er_deq * TRB_SIZE,
                      trb, sizeof(trb));
        control = ldl_le_p(trb + 12);
        if (!!(control & TRB_C) != x->er_ccs) {
            break;
        }
        handle_event(x, ldq_le_p(trb), ldl_le_p(trb + 8), control);
        n++;
        if (++x->er_deq == x->er_size) {
            x->er_deq = 0;
            x->er_ccs = !x->er_ccs;
            x->er_wraps++;
        }
        if (n % 8 == 0) {
            update_erdp(x);
        }
    }
    if (n) {
        update_erdp(x);
    }
    return n;
}

void qxhci_step(QXhci *x)
{
    clock_step(x, x->opts.clock_step_ns);
    qxhci_poll(x);
}

/* Commands */

static int qxhci_command(QXhci *x, uint64_t param, uint32_t status,
                         uint32_t control, int *slot)
{
    int64_t waited = 0;

    g_assert(ring_free_trbs(&x->cmd) >= 1);
    x->cmd_done = false;
    x->cmd_ptr = ring_put(x, &x->cmd, param, status, control, false, NULL);
    doorbell(x, 0, 0);
    for (;;) {
        qxhci_poll(x);
        if (x->cmd_done || waited >= NANOSECONDS_PER_SECOND) {
            break;
        }
        clock_step(x, x->opts.clock_step_ns);
        waited += x->opts.clock_step_ns;
    }
    if (!x->cmd_done) {
        g_test_message("xhci: command 0x%x timed out",
                       TRB_GET_TYPE(control));
        return QXHCI_CC_TIMEOUT;
    }
    if (slot) {
        *slot = x->cmd_slot;
    }
    return x->cmd_cc;
}

int qxhci_cmd_enable_slot(QXhci *x, int *slot)
{
    return qxhci_command(x, 0, 0, TRB_TYPE(TRB_ENABLE_SLOT), slot);
}

int qxhci_cmd_disable_slot(QXhci *x, int slot)
{
    return qxhci_command(x, 0, 0, TRB_TYPE(TRB_DISABLE_SLOT) |
                         TRB_SLOT(slot), NULL);
}

int qxhci_cmd_noop(QXhci *x)
{
    return qxhci_command(x, 0, 0, TRB_TYPE(TRB_NOOP_CMD), NULL);
}

/* Controller */

static void find_one(QPCIDevice *dev, int devfn, void *data)
{
    QPCIDevice **found = data;

    if (*found) {
        g_free(dev);
    } else {
        *found = dev;
    }
}

QPCIDevice *qxhci_pci_find(QPCIBus *bus)
{
    QPCIDevice *dev = NULL;

    /* qemu-xhci, then nec-usb-xhci */
    qpci_device_foreach(bus, 0x1b36, 0x000d, find_one, &dev);
    if (!dev) {
        qpci_device_foreach(bus, 0x1033, 0x0194, find_one, &dev);
    }
    return dev;
}

static bool wait_reg(QXhci *x, uint32_t off, uint32_t mask, uint32_t want)
{
    int i;

    for (i = 0; i < 1000; i++) {
        if ((op_readl(x, off) & mask) == want) {
            return true;
        }
        clock_step(x, 100 * 1000);
    }
    return false;
}

QXhci *qxhci_new(QTestState *qts, QPCIDevice *pdev, QGuestAllocator *alloc,
                 const QXhciOptions *opts)
{
    QXhci *x = g_new0(QXhci, 1);
    uint32_t hcs1, hcs2, hcc1, pagesize;
    unsigned i;

    x->qts = qts;
    x->pdev = pdev;
    x->alloc = alloc;
    if (opts) {
        x->opts = *opts;
    }
    if (!x->opts.cmd_ring_trbs) {
        x->opts.cmd_ring_trbs = 32;
    }
    if (!x->opts.event_ring_trbs) {
        x->opts.event_ring_trbs = 64;
    }
    if (!x->opts.xfer_ring_trbs) {
        x->opts.xfer_ring_trbs = 64;
    }
    if (!x->opts.clock_step_ns) {
        x->opts.clock_step_ns = 1000 * 1000;
    }
    g_assert(x->opts.event_ring_trbs >= 16 &&
             x->opts.event_ring_trbs <= 4096);

    if (x->opts.bar) {
        x->bar = *x->opts.bar;
    } else {
        qpci_device_enable(pdev);
        x->bar = qpci_iomap(pdev, 0, NULL);
    }

    x->op = cap_readl(x, XHCI_CAPLENGTH) & 0xff;
    hcs1 = cap_readl(x, XHCI_HCSPARAMS1);
    hcs2 = cap_readl(x, XHCI_HCSPARAMS2);
    hcc1 = cap_readl(x, XHCI_HCCPARAMS1);
    x->db = cap_readl(x, XHCI_DBOFF) & ~0x3u;
    x->rt = cap_readl(x, XHCI_RTSOFF) & ~0x1fu;
    x->max_slots = hcs1 & 0xff;
    x->max_ports = hcs1 >> 24;
    x->ctx_size = (hcc1 & (1u << 2)) ? 64 : 32;
    x->n_scratch = (((hcs2 >> 21) & 0x1f) << 5) | ((hcs2 >> 27) & 0x1f);
    if (x->opts.max_slots && x->opts.max_slots < x->max_slots) {
        x->max_slots = x->opts.max_slots;
    }
    g_assert_cmpint(x->max_slots, >=, 1);
    g_assert_cmpint(x->max_ports, >=, 1);

    /* Halt, then reset */
    op_writel(x, XHCI_USBCMD, op_readl(x, XHCI_USBCMD) & ~USBCMD_RS);
    g_assert(wait_reg(x, XHCI_USBSTS, USBSTS_HCH, USBSTS_HCH));
    op_writel(x, XHCI_USBCMD, USBCMD_HCRST);
    g_assert(wait_reg(x, XHCI_USBCMD, USBCMD_HCRST, 0));
    g_assert(wait_reg(x, XHCI_USBSTS, USBSTS_CNR, 0));

    pagesize = op_readl(x, XHCI_PAGESIZE) & 0xffff;
    g_assert(pagesize);
    x->page_size = 4096u << ctz32(pagesize);

    op_writel(x, XHCI_CONFIG, x->max_slots);

    /* Device Context Base Address Array, scratchpad in entry 0 */
    x->dcbaa = zalloc(x, (x->max_slots + 1) * 8);
    if (x->n_scratch) {
        x->scratch_array = zalloc(x, x->n_scratch * 8);
        x->scratch_pages = g_new0(uint64_t, x->n_scratch);
        for (i = 0; i < x->n_scratch; i++) {
            x->scratch_pages[i] = zalloc(x, x->page_size);
            write_u64(x, x->scratch_array + i * 8, x->scratch_pages[i]);
        }
        write_u64(x, x->dcbaa, x->scratch_array);
    }
    op_writel(x, XHCI_DCBAAP_LO, (uint32_t)x->dcbaa);
    op_writel(x, XHCI_DCBAAP_HI, x->dcbaa >> 32);

    /* Command ring */
    x->cmd.size = x->opts.cmd_ring_trbs;
    x->cmd.base = guest_alloc(alloc, (size_t)x->cmd.size * TRB_SIZE);
    g_assert(x->cmd.base);
    ring_reset(x, &x->cmd);
    op_writel(x, XHCI_CRCR_LO, (uint32_t)x->cmd.base | CRCR_RCS);
    op_writel(x, XHCI_CRCR_HI, x->cmd.base >> 32);

    /* Event ring: one segment */
    x->er_size = x->opts.event_ring_trbs;
    x->er_base = zalloc(x, (size_t)x->er_size * TRB_SIZE);
    x->er_deq = 0;
    x->er_ccs = true;
    x->erst = zalloc(x, 64);
    write_u64(x, x->erst, x->er_base);
    qtest_writel(qts, x->erst + 8, x->er_size);
    ir0_writel(x, XHCI_ERSTSZ, 1);
    update_erdp(x);
    ir0_writel(x, XHCI_ERSTBA_LO, (uint32_t)x->erst);
    ir0_writel(x, XHCI_ERSTBA_HI, x->erst >> 32);

    /* Run */
    op_writel(x, XHCI_USBCMD, USBCMD_RS);
    g_assert(wait_reg(x, XHCI_USBSTS, USBSTS_HCH, 0));
    g_assert_cmphex(op_readl(x, XHCI_USBSTS) & (USBSTS_HSE | USBSTS_HCE),
                    ==, 0);
    g_assert_cmpint(qxhci_cmd_noop(x), ==, QXHCI_CC_SUCCESS);
    return x;
}

void qxhci_free(QXhci *x)
{
    unsigned i;

    if (!x) {
        return;
    }
    for (i = 0; i < ARRAY_SIZE(x->slots); i++) {
        if (x->slots[i]) {
            qxhci_device_free(x->slots[i]);
        }
    }
    op_writel(x, XHCI_USBCMD, 0);
    for (i = 0; i < x->n_scratch; i++) {
        guest_free(x->alloc, x->scratch_pages[i]);
    }
    g_free(x->scratch_pages);
    if (x->scratch_array) {
        guest_free(x->alloc, x->scratch_array);
    }
    guest_free(x->alloc, x->dcbaa);
    guest_free(x->alloc, x->cmd.base);
    guest_free(x->alloc, x->er_base);
    guest_free(x->alloc, x->erst);
    qpci_iounmap(x->pdev, x->bar);
    g_free(x);
}

void qxhci_migrated(QXhci *x, QTestState *qts, QPCIDevice *pdev)
{
    /* guest memory and the controller came along; so did the BAR */
    x->qts = qts;
    x->pdev = pdev;
}

QTestState *qxhci_qts(QXhci *x)
{
    return x->qts;
}

unsigned qxhci_event_ring_wraps(QXhci *x)
{
    return x->er_wraps;
}

unsigned qxhci_cmd_ring_wraps(QXhci *x)
{
    return x->cmd.wraps;
}

/* Ports */

int qxhci_max_ports(QXhci *x)
{
    return x->max_ports;
}

uint32_t qxhci_portsc(QXhci *x, int port)
{
    g_assert(port >= 1 && port <= x->max_ports);
    return op_readl(x, XHCI_PORTSC(port));
}

int qxhci_find_connected_port(QXhci *x)
{
    int port;

    for (port = 1; port <= x->max_ports; port++) {
        if (qxhci_portsc(x, port) & PORTSC_CCS) {
            return port;
        }
    }
    return 0;
}

int qxhci_take_port_events(QXhci *x, int port)
{
    int n;

    qxhci_poll(x);
    n = x->port_events[port];
    x->port_events[port] = 0;
    return n;
}

int qxhci_port_reset(QXhci *x, int port)
{
    uint32_t portsc = qxhci_portsc(x, port);
    int i;

    if (!(portsc & PORTSC_CCS)) {
        return -1;
    }
    /* PED is write-1-to-disable and the change bits write-1-to-clear */
    op_writel(x, XHCI_PORTSC(port), PORTSC_PP | PORTSC_PR);
    for (i = 0; i < 1000; i++) {
        portsc = qxhci_portsc(x, port);
        if ((portsc & PORTSC_PRC) && !(portsc & PORTSC_PR)) {
            break;
        }
        qxhci_step(x);
    }
    if (!(portsc & PORTSC_PRC) || !(portsc & PORTSC_PED)) {
        return -1;
    }
    op_writel(x, XHCI_PORTSC(port), PORTSC_PP |
              (portsc & PORTSC_CHANGE_BITS));
    qxhci_poll(x);
    return PORTSC_SPEED(portsc);
}

int qxhci_port_link_state(QXhci *x, int port)
{
    return PORTSC_PLS(qxhci_portsc(x, port));
}

void qxhci_port_set_link_state(QXhci *x, int port, int pls)
{
    g_assert(port >= 1 && port <= x->max_ports);
    op_writel(x, XHCI_PORTSC(port), PORTSC_PP | PORTSC_LWS |
              (uint32_t)(pls & 0xf) << 5);
    qxhci_poll(x);
}

/* Contexts */

static unsigned ep_dci(uint8_t ep)
{
    unsigned num = ep & 0x0f;

    if (num == 0) {
        return 1;
    }
    return num * 2 + ((ep & 0x80) ? 1 : 0);
}

static uint64_t in_ctx_entry(QXhciDevice *d, unsigned index)
{
    /* index 0 is the Input Control Context, 1 the slot, 1 + DCI an EP */
    return d->in_ctx + (uint64_t)index * d->xhci->ctx_size;
}

static void write_ctx(QXhci *x, uint64_t addr, const uint32_t *dw, int n)
{
    uint8_t buf[64];
    int i;

    g_assert(n * 4 <= (int)sizeof(buf));
    for (i = 0; i < n; i++) {
        stl_le_p(buf + 4 * i, dw[i]);
    }
    qtest_memwrite(x->qts, addr, buf, n * 4);
}

static void read_ctx(QXhci *x, uint64_t addr, uint32_t *dw, int n)
{
    uint8_t buf[64];
    int i;

    g_assert(n * 4 <= (int)sizeof(buf));
    qtest_memread(x->qts, addr, buf, n * 4);
    for (i = 0; i < n; i++) {
        dw[i] = ldl_le_p(buf + 4 * i);
    }
}

static void clear_in_ctx(QXhciDevice *d)
{
    qtest_memset(d->xhci->qts, d->in_ctx, 0, 33 * d->xhci->ctx_size);
}

static uint16_t default_max_packet0(int speed)
{
    switch (speed) {
    case QXHCI_SPEED_SUPER:
        return 512;
    case QXHCI_SPEED_LOW:
        return 8;
    default:
        return 64;
    }
}

static void fill_ep0_ctx(QXhciDevice *d, uint32_t *dw)
{
    QXhciRing *r = d->rings[1];

    memset(dw, 0, 5 * sizeof(*dw));
    dw[1] = (3 << 1) | (EP_TYPE_CONTROL << 3) |
            ((uint32_t)d->max_packet0 << 16);
    dw[2] = (uint32_t)ring_enqueue_addr(r) | (r->pcs ? 1 : 0);
    dw[3] = ring_enqueue_addr(r) >> 32;
    dw[4] = 8;  /* average TRB length */
}

static void cancel_pending(QXhciDevice *d, unsigned dci)
{
    GList *l = d->pending;

    while (l) {
        QXhciTransfer *t = l->data;

        l = l->next;
        if (t->dci == dci || dci == 0) {
            transfer_retire(t, QXHCI_CC_CANCELLED);
        }
    }
}

QXhciDevice *qxhci_device_enumerate(QXhci *x, int port)
{
    QXhciDevice *d;
    uint32_t dw[5];
    uint8_t desc[8];
    uint32_t actual = 0;
    uint16_t mps0;
    int speed, slot = 0, cc;

    speed = qxhci_port_reset(x, port);
    if (speed < 0) {
        return NULL;
    }
    cc = qxhci_cmd_enable_slot(x, &slot);
    g_assert_cmpint(cc, ==, QXHCI_CC_SUCCESS);
    g_assert(slot >= 1 && slot <= x->max_slots);
    g_assert(!x->slots[slot]);

    d = g_new0(QXhciDevice, 1);
    d->xhci = x;
    d->port = port;
    d->speed = speed;
    d->slot = slot;
    d->max_packet0 = default_max_packet0(speed);
    d->in_ctx = zalloc(x, 33 * x->ctx_size);
    d->out_ctx = zalloc(x, 32 * x->ctx_size);
    d->rings[1] = ring_new(x, x->opts.xfer_ring_trbs);
    d->ep_mask = 1u << 1;
    x->slots[slot] = d;
    write_u64(x, x->dcbaa + 8 * slot, d->out_ctx);

    /* Address Device: slot context and default control endpoint */
    clear_in_ctx(d);
    dw[0] = 0;
    dw[1] = 0x3;                        /* add slot and EP0 */
    write_ctx(x, in_ctx_entry(d, 0), dw, 2);
    dw[0] = (1u << 27) | ((uint32_t)speed << 20);
    dw[1] = (uint32_t)port << 16;
    dw[2] = 0;                          /* interrupter 0 */
    dw[3] = 0;
    write_ctx(x, in_ctx_entry(d, 1), dw, 4);
    fill_ep0_ctx(d, dw);
    write_ctx(x, in_ctx_entry(d, 2), dw, 5);
    cc = qxhci_command(x, d->in_ctx, 0, TRB_TYPE(TRB_ADDRESS_DEVICE) |
                       TRB_SLOT(slot), NULL);
    if (cc != QXHCI_CC_SUCCESS) {
        g_test_message("xhci: Address Device failed, completion code %d",
                       cc);
        qxhci_device_free(d);
        return NULL;
    }

    /* The first 8 bytes of the device descriptor hold bMaxPacketSize0 */
    cc = qxhci_get_descriptor(d, 1, 0, 0, desc, sizeof(desc), &actual);
    if (cc != QXHCI_CC_SUCCESS || actual != sizeof(desc)) {
        g_test_message("xhci: GET_DESCRIPTOR(device, 8) failed: cc %d, "
                       "%u bytes", cc, actual);
        qxhci_device_free(d);
        return NULL;
    }
    mps0 = speed == QXHCI_SPEED_SUPER ? 1u << MIN(desc[7], 15) : desc[7];
    if (mps0 != d->max_packet0) {
        d->max_packet0 = mps0;
        clear_in_ctx(d);
        dw[0] = 0;
        dw[1] = 0x2;                    /* EP0 */
        write_ctx(x, in_ctx_entry(d, 0), dw, 2);
        fill_ep0_ctx(d, dw);
        write_ctx(x, in_ctx_entry(d, 2), dw, 5);
        cc = qxhci_command(x, d->in_ctx, 0, TRB_TYPE(TRB_EVALUATE_CONTEXT) |
                           TRB_SLOT(slot), NULL);
        g_assert_cmpint(cc, ==, QXHCI_CC_SUCCESS);
    }
    return d;
}

void qxhci_device_free(QXhciDevice *d)
{
    QXhci *x = d->xhci;
    GList *l;
    unsigned i;

    for (l = d->pending; l; l = l->next) {
        QXhciTransfer *t = l->data;

        t->done = true;
        t->cc = QXHCI_CC_CANCELLED;
        t->dev = NULL;
    }
    g_list_free(d->pending);
    d->pending = NULL;
    /* after a detach the slot is still enabled in the controller */
    qxhci_cmd_disable_slot(x, d->slot);
    write_u64(x, x->dcbaa + 8 * d->slot, 0);
    x->slots[d->slot] = NULL;
    for (i = 0; i < ARRAY_SIZE(d->rings); i++) {
        ring_free(x, d->rings[i]);
    }
    guest_free(x->alloc, d->in_ctx);
    guest_free(x->alloc, d->out_ctx);
    g_free(d);
}

/* Transfers */

static QXhciTransfer *transfer_new(QXhciDevice *d, unsigned dci,
                                   uint32_t buf_len)
{
    QXhciTransfer *t = g_new0(QXhciTransfer, 1);

    t->xhci = d->xhci;
    t->dev = d;
    t->dci = dci;
    t->buf = guest_alloc(d->xhci->alloc, MAX(buf_len, 1));
    g_assert(t->buf);
    return t;
}

void qxhci_transfer_free(QXhciTransfer *t)
{
    if (!t) {
        return;
    }
    if (!t->done && t->dev) {
        /* the controller may still own the TD: take it back first */
        qxhci_endpoint_cancel(t->dev, t->dci == 1 ? 0 :
                              ((t->dci / 2) | ((t->dci & 1) ? 0x80 : 0)));
    }
    g_assert(t->done || !t->dev);
    guest_free(t->xhci->alloc, t->buf);
    g_free(t);
}

void qxhci_transfer_read(QXhciTransfer *t, void *buf)
{
    if (t->actual) {
        qtest_bufread(t->xhci->qts, t->buf, buf, t->actual);
    }
}

bool qxhci_wait(QXhciTransfer *t, int64_t timeout_ns)
{
    QXhci *x = t->xhci;
    gint64 wall_deadline = g_get_monotonic_time() + 120 * G_USEC_PER_SEC;
    int64_t waited = 0;

    for (;;) {
        qxhci_poll(x);
        if (t->done) {
            checkpoint(x);
            return true;
        }
        if (!t->dev || waited >= timeout_ns ||
            g_get_monotonic_time() > wall_deadline) {
            return false;
        }
        clock_step(x, x->opts.clock_step_ns);
        waited += x->opts.clock_step_ns;
    }
}

QXhciTransfer *qxhci_submit(QXhciDevice *d, uint8_t ep, const void *data,
                            uint32_t len)
{
    return qxhci_submit_split(d, ep, data, len, 0);
}

QXhciTransfer *qxhci_submit_split(QXhciDevice *d, uint8_t ep,
                                  const void *data, uint32_t len,
                                  uint32_t first_len)
{
    QXhci *x = d->xhci;
    unsigned dci = ep_dci(ep);
    QXhciRing *r = d->rings[dci];
    bool in = ep & 0x80;
    uint32_t mps = d->eps[dci].max_packet & 0x7ff;
    QXhciTransfer *t;
    uint32_t off = 0, first_control = 0;
    unsigned i;

    g_assert(dci > 1);
    g_assert(r && (d->ep_mask & (1u << dci)));
    g_assert(!d->gone);
    t = transfer_new(d, dci, len);
    t->in = in;
    t->length = len;
    if (!in && len) {
        qtest_bufwrite(x->qts, t->buf, data, len);
    }

    /* One TRB per piece that does not cross a 64 KiB boundary */
    do {
        uint64_t addr = t->buf + off;
        uint32_t chunk = MIN(len - off,
                             TRB_MAX_BUFFER - (addr & (TRB_MAX_BUFFER - 1)));

        if (!off && first_len) {
            chunk = MIN(chunk, first_len);
        }
        g_assert(t->ntrbs < QXHCI_TD_MAX_TRBS);
        t->trb_len[t->ntrbs++] = chunk;
        off += chunk;
    } while (off < len);
    g_assert_cmpuint(ring_free_trbs(r), >=, t->ntrbs);

    off = 0;
    for (i = 0; i < t->ntrbs; i++) {
        bool last = i == t->ntrbs - 1;
        uint32_t rest = len - off - t->trb_len[i];
        uint32_t td_size = last ? 0 :
                           MIN(31, mps ? DIV_ROUND_UP(rest, mps) : 0);
        uint32_t control = TRB_TYPE(TRB_NORMAL) |
                           (last ? TRB_IOC : TRB_CH) | (in ? TRB_ISP : 0);

        t->trb_addr[i] = ring_put(x, r, t->buf + off,
                                  t->trb_len[i] | (td_size << 17), control,
                                  i == 0, i == 0 ? &first_control : NULL);
        off += t->trb_len[i];
    }
    r->used += t->ntrbs;
    d->pending = g_list_append(d->pending, t);
    ring_release(x, t->trb_addr[0], first_control);
    if (!d->hold_doorbells) {
        doorbell(x, d->slot, dci);
    }
    return t;
}

void qxhci_hold_doorbells(QXhciDevice *d, bool hold)
{
    d->hold_doorbells = hold;
}

void qxhci_ring_doorbell(QXhciDevice *d, uint8_t ep)
{
    doorbell(d->xhci, d->slot, ep_dci(ep));
}

void qxhci_ring_doorbell_stream(QXhciDevice *d, uint8_t ep, uint16_t stream)
{
    doorbell(d->xhci, d->slot, ep_dci(ep) | (uint32_t)stream << 16);
}

void qxhci_set_checkpoint(QXhci *x, QXhciCheckpoint *fn, void *opaque)
{
    x->checkpoint = fn;
    x->checkpoint_opaque = opaque;
}

void qxhci_set_event_hook(QXhci *x, QXhciEventHook *hook, void *opaque)
{
    x->event_hook = hook;
    x->event_hook_opaque = opaque;
}

int qxhci_transfer_sync(QXhciDevice *d, uint8_t ep, void *data,
                        uint32_t len, uint32_t *actual, int64_t timeout_ns)
{
    QXhciTransfer *t = qxhci_submit(d, ep, data, len);
    int cc;

    if (!qxhci_wait(t, timeout_ns)) {
        qxhci_transfer_free(t);
        if (actual) {
            *actual = 0;
        }
        return QXHCI_CC_TIMEOUT;
    }
    if (t->in && data) {
        qxhci_transfer_read(t, data);
    }
    if (actual) {
        *actual = t->actual;
    }
    cc = t->cc;
    qxhci_transfer_free(t);
    return cc;
}

/* Move a stopped or halted endpoint's dequeue pointer past every TD. */
static int ring_skip_all(QXhciDevice *d, unsigned dci)
{
    QXhciRing *r = d->rings[dci];

    return qxhci_command(d->xhci, ring_enqueue_addr(r) | (r->pcs ? 1 : 0),
                         0, TRB_TYPE(TRB_SET_TR_DEQUEUE) |
                         TRB_SLOT(d->slot) | TRB_EP(dci), NULL);
}

static int endpoint_cancel_dci(QXhciDevice *d, unsigned dci)
{
    int cc;

    cc = qxhci_command(d->xhci, 0, 0, TRB_TYPE(TRB_STOP_EP) |
                       TRB_SLOT(d->slot) | TRB_EP(dci), NULL);
    if (cc == QXHCI_CC_CONTEXT_STATE_ERROR) {
        cc = qxhci_command(d->xhci, 0, 0, TRB_TYPE(TRB_RESET_EP) |
                           TRB_SLOT(d->slot) | TRB_EP(dci), NULL);
        /* neither running nor halted: stopped already */
        if (cc == QXHCI_CC_CONTEXT_STATE_ERROR) {
            cc = QXHCI_CC_SUCCESS;
        }
    }
    if (cc != QXHCI_CC_SUCCESS) {
        return cc;
    }
    /* Stop Endpoint reports the TD it interrupted */
    qxhci_poll(d->xhci);
    cancel_pending(d, dci);
    d->rings[dci]->used = 0;
    return ring_skip_all(d, dci);
}

int qxhci_endpoint_stop(QXhciDevice *d, uint8_t ep)
{
    return qxhci_command(d->xhci, 0, 0, TRB_TYPE(TRB_STOP_EP) |
                         TRB_SLOT(d->slot) | TRB_EP(ep_dci(ep)), NULL);
}

int qxhci_endpoint_cancel(QXhciDevice *d, uint8_t ep)
{
    unsigned dci = ep_dci(ep);

    g_assert(d->rings[dci]);
    if (d->gone) {
        cancel_pending(d, dci);
        return QXHCI_CC_SUCCESS;
    }
    return endpoint_cancel_dci(d, dci);
}

int qxhci_endpoint_max_packet(QXhciDevice *d, uint8_t ep)
{
    unsigned dci = ep_dci(ep);

    if (dci == 1) {
        return d->max_packet0;
    }
    return d->eps[dci].max_packet & 0x7ff;
}

/* Control transfers */

int qxhci_control(QXhciDevice *d, uint8_t request_type, uint8_t request,
                  uint16_t value, uint16_t index, void *data,
                  uint16_t length, uint32_t *actual)
{
    QXhci *x = d->xhci;
    bool in = request_type & 0x80;
    QXhciTransfer *t;
    int cc;

    g_assert(!d->gone);
    g_assert_cmpuint(ring_free_trbs(d->rings[1]), >=, 3);
    t = qxhci_control_submit(d, request_type, request, value, index, data,
                             length);
    g_assert(t);

    if (!qxhci_wait(t, NANOSECONDS_PER_SECOND)) {
        endpoint_cancel_dci(d, 1);
        cc = QXHCI_CC_TIMEOUT;
    } else {
        cc = t->cc;
        if (cc == QXHCI_CC_STALL) {
            /* halted: reset it and skip the stalled TD */
            int rc = qxhci_command(x, 0, 0, TRB_TYPE(TRB_RESET_EP) |
                                   TRB_SLOT(d->slot) | TRB_EP(1), NULL);

            g_assert_cmpint(rc, ==, QXHCI_CC_SUCCESS);
            g_assert_cmpint(ring_skip_all(d, 1), ==, QXHCI_CC_SUCCESS);
        }
    }
    if (actual) {
        *actual = t->done && cc == QXHCI_CC_SUCCESS ? t->actual : 0;
    }
    if (in && data && t->done && cc == QXHCI_CC_SUCCESS) {
        qxhci_transfer_read(t, data);
    }
    qxhci_transfer_free(t);
    return cc;
}

int qxhci_get_descriptor(QXhciDevice *d, uint8_t type, uint8_t index,
                         uint16_t lang, void *buf, uint16_t length,
                         uint32_t *actual)
{
    return qxhci_control(d, 0x80, QXHCI_REQ_GET_DESCRIPTOR,
                         ((uint16_t)type << 8) | index, lang,
                         buf, length, actual);
}

/* Endpoint configuration */

int qxhci_config_find_endpoints(const uint8_t *config, size_t len,
                                int iface, int alt,
                                QXhciEndpoint *eps, int max)
{
    size_t pos = 0;
    bool in_iface = false, found = false;
    int n = 0;

    while (pos + 2 <= len) {
        uint8_t blen = config[pos], type = config[pos + 1];

        if (blen < 2 || pos + blen > len) {
            break;
        }
        if (type == 4 && blen >= 9) {
            in_iface = config[pos + 2] == iface && config[pos + 3] == alt;
            found |= in_iface;
        } else if (type == 5 && blen >= 7 && in_iface && n < max) {
            eps[n] = (QXhciEndpoint) {
                .address = config[pos + 2],
                .attributes = config[pos + 3],
                .max_packet = lduw_le_p(config + pos + 4),
                .interval = config[pos + 6],
            };
            n++;
        } else if (type == 0x30 && blen >= 6 && in_iface && n > 0) {
            eps[n - 1].max_burst = config[pos + 2];
            eps[n - 1].bytes_per_interval = lduw_le_p(config + pos + 4);
        }
        pos += blen;
    }
    return found ? n : -1;
}

/* Endpoint Context Interval: a power of two of 125 us micro-frames */
static uint32_t ep_interval(const QXhciEndpoint *ep, int speed)
{
    unsigned type = ep->attributes & 3;
    unsigned b = ep->interval;

    if (type == 0 || type == 2) {
        return 0;   /* control and bulk: no NAK rate limit */
    }
    if (speed == QXHCI_SPEED_HIGH || speed == QXHCI_SPEED_SUPER ||
        type == 1) {
        b = MAX(1, MIN(b, 16));
        return speed == QXHCI_SPEED_HIGH || speed == QXHCI_SPEED_SUPER ?
               b - 1 : b + 2;
    }
    /* full/low speed interrupt: bInterval frames, rounded down */
    b = MAX(b, 1);
    return MIN(10, MAX(3, 31 - clz32(b) + 3));
}

static void fill_ep_ctx(QXhciDevice *d, const QXhciEndpoint *ep,
                        uint32_t *dw)
{
    QXhciRing *r = d->rings[ep_dci(ep->address)];
    unsigned type = ep->attributes & 3;
    bool in = ep->address & 0x80;
    uint32_t mps = ep->max_packet & 0x7ff;
    uint32_t burst = 0, esit = 0, avg;

    if (d->speed == QXHCI_SPEED_SUPER) {
        burst = ep->max_burst;
    } else if (d->speed == QXHCI_SPEED_HIGH && (type == 1 || type == 3)) {
        burst = (ep->max_packet >> 11) & 3;
    }
    if (type == 1 || type == 3) {
        esit = d->speed == QXHCI_SPEED_SUPER ? ep->bytes_per_interval :
               mps * (burst + 1);
    }
    avg = type == 3 ? 1024 : 3072;
    memset(dw, 0, 5 * sizeof(*dw));
    dw[0] = ep_interval(ep, d->speed) << 16;
    dw[1] = (type == 1 ? 0 : 3u << 1) | (((in ? 4 : 0) + type) << 3) |
            (burst << 8) | (mps << 16);
    dw[2] = (uint32_t)ring_enqueue_addr(r) | (r->pcs ? 1 : 0);
    dw[3] = ring_enqueue_addr(r) >> 32;
    dw[4] = avg | (esit << 16);
}

int qxhci_configure_endpoints(QXhciDevice *d,
                              const QXhciEndpoint *add, int nadd,
                              const uint8_t *drop, int ndrop)
{
    QXhci *x = d->xhci;
    uint32_t drop_flags = 0, add_flags = 1, mask = d->ep_mask;
    uint32_t dw[5];
    int i, cc;

    g_assert(!d->gone);
    clear_in_ctx(d);
    for (i = 0; i < ndrop; i++) {
        unsigned dci = ep_dci(drop[i]);

        g_assert(dci > 1);
        if (mask & (1u << dci)) {
            cancel_pending(d, dci);
            drop_flags |= 1u << dci;
            mask &= ~(1u << dci);
        }
    }
    for (i = 0; i < nadd; i++) {
        unsigned dci = ep_dci(add[i].address);

        g_assert(dci > 1);
        if (mask & (1u << dci)) {
            cancel_pending(d, dci);
            drop_flags |= 1u << dci;
        }
        add_flags |= 1u << dci;
        mask |= 1u << dci;
        if (d->rings[dci]) {
            ring_reset(x, d->rings[dci]);
        } else {
            d->rings[dci] = ring_new(x, x->opts.xfer_ring_trbs);
        }
        d->eps[dci] = add[i];
        fill_ep_ctx(d, &add[i], dw);
        write_ctx(x, in_ctx_entry(d, 1 + dci), dw, 5);
    }

    dw[0] = drop_flags;
    dw[1] = add_flags;
    write_ctx(x, in_ctx_entry(d, 0), dw, 2);
    read_ctx(x, d->out_ctx, dw, 4);
    dw[0] &= ~(0x1fu << 27);
    dw[0] |= (uint32_t)(31 - clz32(mask)) << 27;
    dw[3] = 0;
    write_ctx(x, in_ctx_entry(d, 1), dw, 4);

    cc = qxhci_command(x, d->in_ctx, 0, TRB_TYPE(TRB_CONFIGURE_EP) |
                       TRB_SLOT(d->slot), NULL);
    if (cc == QXHCI_CC_SUCCESS) {
        d->ep_mask = mask;
    }
    return cc;
}

int qxhci_deconfigure(QXhciDevice *d)
{
    uint8_t drop[30];
    int n = 0;
    unsigned dci;

    for (dci = 2; dci < 32; dci++) {
        if (d->ep_mask & (1u << dci)) {
            drop[n++] = (dci / 2) | ((dci & 1) ? 0x80 : 0);
        }
    }
    if (!n) {
        return QXHCI_CC_SUCCESS;
    }
    return qxhci_configure_endpoints(d, NULL, 0, drop, n);
}

/* Raw access for fuzz targets */

unsigned qxhci_ring_space(QXhciDevice *d, uint8_t ep)
{
    QXhciRing *r = d->rings[ep_dci(ep)];

    return r ? ring_free_trbs(r) : 0;
}

uint64_t qxhci_ring_base(QXhciDevice *d, uint8_t ep, unsigned *trbs)
{
    QXhciRing *r = d->rings[ep_dci(ep)];

    if (trbs) {
        *trbs = r ? r->size : 0;
    }
    return r ? r->base : 0;
}

unsigned qxhci_ctx_size(QXhci *x)
{
    return x->ctx_size;
}

static uint32_t reg_base(QXhci *x, int regs)
{
    switch (regs) {
    case QXHCI_REGS_OP:
        return x->op;
    case QXHCI_REGS_RT:
        return x->rt;
    default:
        return x->db;
    }
}

uint32_t qxhci_reg_read(QXhci *x, int regs, uint32_t off)
{
    return qpci_io_readl(x->pdev, x->bar, reg_base(x, regs) + (off & ~3u));
}

void qxhci_reg_write(QXhci *x, int regs, uint32_t off, uint32_t val)
{
    qpci_io_writel(x->pdev, x->bar, reg_base(x, regs) + (off & ~3u), val);
}

int qxhci_cmd_raw(QXhci *x, uint64_t param, uint32_t status,
                  uint32_t control, int *slot)
{
    /* the type and fields are the caller's; the cycle bit is the ring's */
    return qxhci_command(x, param, status, control & ~TRB_C, slot);
}

QXhciTransfer *qxhci_control_submit(QXhciDevice *d, uint8_t request_type,
                                    uint8_t request, uint16_t value,
                                    uint16_t index, const void *data,
                                    uint16_t length)
{
    QXhci *x = d->xhci;
    QXhciRing *r = d->rings[1];
    bool in = request_type & 0x80;
    QXhciTransfer *t;
    uint64_t setup;
    uint32_t first_control = 0, trt;

    if (d->gone || !r || ring_free_trbs(r) < 3) {
        return NULL;
    }
    t = transfer_new(d, 1, length);
    t->control = true;
    t->in = in;
    t->length = length;
    t->data_len = length;
    if (!in && length) {
        qtest_bufwrite(x->qts, t->buf, data, length);
    }
    setup = request_type | ((uint64_t)request << 8) |
            ((uint64_t)value << 16) | ((uint64_t)index << 32) |
            ((uint64_t)length << 48);
    trt = length ? (in ? 3 : 2) : 0;
    t->trb_len[t->ntrbs] = 8;
    t->trb_addr[t->ntrbs++] = ring_put(x, r, setup, 8,
                                       TRB_TYPE(TRB_SETUP) | TRB_IDT |
                                       TRB_SETUP_TRT(trt), true,
                                       &first_control);
    if (length) {
        t->trb_len[t->ntrbs] = length;
        t->trb_addr[t->ntrbs++] = ring_put(x, r, t->buf, length,
                                           TRB_TYPE(TRB_DATA) |
                                           (in ? TRB_DIR_IN | TRB_ISP : 0),
                                           false, NULL);
    }
    /* the status stage goes the other way from the data stage */
    t->trb_len[t->ntrbs] = 0;
    t->trb_addr[t->ntrbs++] = ring_put(x, r, 0, 0, TRB_TYPE(TRB_STATUS) |
                                       TRB_IOC |
                                       (length && in ? 0 : TRB_DIR_IN),
                                       false, NULL);
    r->used += t->ntrbs;
    d->pending = g_list_append(d->pending, t);
    ring_release(x, t->trb_addr[0], first_control);
    doorbell(x, d->slot, 1);
    return t;
}

void qxhci_abandon_devices(QXhci *x)
{
    unsigned i, j;

    for (i = 0; i < ARRAY_SIZE(x->slots); i++) {
        QXhciDevice *d = x->slots[i];
        GList *l;

        if (!d) {
            continue;
        }
        for (l = d->pending; l; l = l->next) {
            QXhciTransfer *t = l->data;

            t->done = true;
            t->cc = QXHCI_CC_CANCELLED;
            t->dev = NULL;
        }
        g_list_free(d->pending);
        /* guest memory goes with the allocator the caller drops */
        for (j = 0; j < ARRAY_SIZE(d->rings); j++) {
            g_free(d->rings[j]);
        }
        g_free(d);
        x->slots[i] = NULL;
    }
}

void qxhci_abandon(QXhci *x)
{
    qxhci_abandon_devices(x);
    g_free(x->scratch_pages);
    g_free(x);
}

/* A machine for a test */

char *qxhci_firmware_args(const char *fw_env)
{
    const char *dirs = fw_env ? g_getenv(fw_env) : NULL;
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

QXhciMachine *qxhci_machine_start(const char *fw_env, const char *devices)
{
    QXhciMachine *m = g_new0(QXhciMachine, 1);
    g_autofree char *fw = qxhci_firmware_args(fw_env);

    m->qs = qtest_pc_boot("-nodefaults%s -device qemu-xhci,id=xhci,addr=04.0 "
                          "%s", fw, devices);
    m->qts = m->qs->qts;
    m->pdev = qpci_device_find(m->qs->pcibus, QXHCI_MACHINE_DEVFN);
    g_assert(m->pdev);
    m->xhci = qxhci_new(m->qts, m->pdev, &m->qs->alloc, NULL);
    m->port = qxhci_find_connected_port(m->xhci);
    g_assert_cmpint(m->port, >, 0);
    m->dev = qxhci_device_enumerate(m->xhci, m->port);
    g_assert(m->dev);
    return m;
}

QPCIDevice *qxhci_follow_migration(QOSState *qs, QXhci *x, QPCIDevice *old,
                                   int devfn, QTestState *dst)
{
    QPCIDevice *pdev;

    qtest_quit(qs->qts);
    qs->qts = dst;
    qpci_free_pc(qs->pcibus);
    qs->pcibus = qpci_new_pc(dst, &qs->alloc);
    g_free(old);
    pdev = qpci_device_find(qs->pcibus, devfn);
    g_assert(pdev);
    qxhci_migrated(x, dst, pdev);
    return pdev;
}

void qxhci_machine_migrated(QXhciMachine *m, QTestState *dst)
{
    m->pdev = qxhci_follow_migration(m->qs, m->xhci, m->pdev,
                                     QXHCI_MACHINE_DEVFN, dst);
    m->qts = dst;
}

void qxhci_machine_stop(QXhciMachine *m)
{
    qxhci_free(m->xhci);
    g_free(m->pdev);
    qtest_shutdown(m->qs);
    g_free(m);
}

int qxhci_get_configuration(QXhciDevice *d)
{
    uint8_t v = 0xff;
    uint32_t actual = 0;

    g_assert_cmpint(qxhci_control(d, 0x80, QXHCI_REQ_GET_CONFIGURATION, 0, 0,
                                  &v, 1, &actual), ==,
                    QXHCI_CC_SUCCESS);
    g_assert_cmpuint(actual, ==, 1);
    return v;
}

int qxhci_get_interface(QXhciDevice *d, int iface)
{
    uint8_t v = 0xff;
    uint32_t actual = 0;
    int cc;

    cc = qxhci_control(d, 0x81, QXHCI_REQ_GET_INTERFACE, 0, iface, &v, 1,
                       &actual);
    if (cc == QXHCI_CC_STALL) {
        return -1;
    }
    g_assert_cmpint(cc, ==, QXHCI_CC_SUCCESS);
    g_assert_cmpuint(actual, ==, 1);
    return v;
}

void qxhci_set_configuration(QXhciDevice *d, int value)
{
    g_assert_cmpint(qxhci_control(d, 0x00, QXHCI_REQ_SET_CONFIGURATION, value,
                                  0, NULL, 0, NULL), ==, QXHCI_CC_SUCCESS);
}
