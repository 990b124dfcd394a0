/*
 * libqos UHCI, OHCI and EHCI drivers: the schedules a guest's driver
 * writes
 *
 * A small driver for each of the USB 1.1 and 2.0 host controllers, for
 * qtests and fuzz targets alike: start the controller through its own
 * reset (UHCI 1.1 2.1, OHCI 1.0a 7.1-7.3, EHCI 1.0 2.3), reset a root
 * hub port, queue chains of TDs on its control, bulk and interrupt
 * schedules (UHCI QH/TD lists off the frame list, OHCI ED/TD lists,
 * EHCI async and periodic QH/qTD schedules, and an EHCI's UHCI
 * companions), and read back what each TD did.  Waiting steps the
 * virtual clock a frame at a time; the caller's run_main_loop hook runs
 * after each step (a fuzz target's in-process main loop).
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef LIBQOS_USB_HCD_H
#define LIBQOS_USB_HCD_H

#include "../libqtest.h"
#include "pci.h"
#include "libqos-malloc.h"

#define QHCD_FRAME_NS           (1000 * 1000)
#define QHCD_MAX_TDS            48          /* per chain */

/* UHCI 1.1 2.1: I/O registers */
#define QUHCI_CMD               0x00
#define QUHCI_FRNUM             0x06
#define QUHCI_FLBASE            0x08
#define QUHCI_SOF               0x0c
#define QUHCI_PORTSC(n)         (0x10 + 2 * (n))
#define QUHCI_PORT_PE           (1 << 2)
#define QUHCI_PORT_RD           (1 << 6)
#define QUHCI_PORT_PR           (1 << 9)
#define QUHCI_PORT_SUSP         (1 << 12)
/* OHCI 1.0a 7: operational registers */
#define QOHCI_CONTROL           0x04
#define QOHCI_CMDSTATUS         0x08
#define QOHCI_INTRSTATUS        0x0c
#define QOHCI_HCCA              0x18
#define QOHCI_CTRL_HEAD         0x20
#define QOHCI_BULK_HEAD         0x28
#define QOHCI_FMINTERVAL        0x34
#define QOHCI_FMNUMBER          0x3c
#define QOHCI_PERIODICSTART     0x40
#define QOHCI_RHSTATUS          0x50
#define QOHCI_RHPORT(n)         (0x54 + 4 * (n))
#define QOHCI_ED_SKIP           (1 << 14)
/* EHCI 1.0 2.3: operational registers, from the capability length on */
#define QEHCI_USBCMD            0x00
#define QEHCI_USBSTS            0x04
#define QEHCI_PERIODIC          0x14
#define QEHCI_ASYNC             0x18
#define QEHCI_CONFIGFLAG        0x40
#define QEHCI_PORTSC(n)         (0x44 + 4 * (n))
#define QEHCI_PORT_PED          (1 << 2)
#define QEHCI_PORT_FPR          (1 << 6)
#define QEHCI_PORT_SUSP         (1 << 7)
#define QEHCI_PORT_PR           (1 << 8)
#define QEHCI_PORT_PP           (1 << 12)
#define QEHCI_PORT_PO           (1 << 13)
#define QEHCI_PORT_RWC          0x2a
#define QEHCI_STS_HALTED        (1 << 12)

typedef enum QHcdType {
    QHCD_UHCI,
    QHCD_OHCI,
    QHCD_EHCI,
} QHcdType;

enum { QHCD_PID_SETUP, QHCD_PID_OUT, QHCD_PID_IN };

/* The schedule a chain goes on */
typedef enum QHcdList {
    QHCD_LIST_CONTROL,
    QHCD_LIST_BULK,
    QHCD_LIST_INTERRUPT,
} QHcdList;

/* One TD of a chain */
typedef struct QHcdTd {
    uint8_t pid;                /* QHCD_PID_* */
    uint8_t addr;
    uint8_t ep;
    bool toggle;
    uint32_t len;
    uint64_t buf;
} QHcdTd;

/* Where a queued TD is, and the bytes it may take: to read it back */
typedef struct QHcdRef {
    uint64_t td;
    uint64_t buf;
    uint32_t len;
} QHcdRef;

/* A queued chain, read back TD by TD as they complete */
typedef struct QHcdChain {
    QHcdRef r[QHCD_MAX_TDS];
    unsigned n;
    unsigned next;              /* the first TD not read back yet */
    bool uhci;                  /* UHCI TDs (a companion's, on EHCI) */
    bool short_ends;            /* a short TD ends it (UHCI: SPD) */
    bool ended, error;
} QHcdChain;

enum { QHCD_TD_ACTIVE, QHCD_TD_DONE, QHCD_TD_ERROR };

/* A UHCI: the controller itself, or one of an EHCI's companions */
typedef struct QUhci {
    QPCIDevice *pdev;
    QPCIBar bar;
    uint64_t frames;
    uint64_t tail;              /* last QH on the frame list's chain */
    unsigned qhs;
} QUhci;

typedef struct QHcd QHcd;

struct QHcd {
    /* set by the caller before qhcd_start() */
    QHcdType type;
    QTestState *qts;
    QGuestAllocator *alloc;
    QPCIDevice *pdev;
    QPCIBar bar;                /* the registers (UHCI: BAR 4) */
    QUhci comp[3];              /* EHCI: companions' pdev and bar */
    unsigned companions;
    uint32_t bulk_mps;          /* wMaxPacketSize of non-control EDs/QHs */
    /* after every clock step and doorbell (NULL: nothing to run) */
    void (*run_main_loop)(QHcd *h);
    void *opaque;
    /* EHCI: chains and port writes go to companion 0 */
    bool on_comp;

    /* the driver's */
    QUhci uhci;                 /* UHCI: the controller */
    uint32_t op;                /* EHCI: operational register offset */
    uint64_t sched;             /* OHCI HCCA, EHCI periodic frame list */
    uint64_t head[3];           /* OHCI: control, bulk, interrupt EDs */
    uint64_t tail[3];           /* OHCI: the lists' last EDs; EHCI: */
                                /* the async head QH, the periodic QH */
    unsigned lists;
};

/* @n frames, one clock step each; the same in one step (nothing queued) */
void qhcd_frames(QHcd *h, unsigned n);
void qhcd_frames_idle(QHcd *h, unsigned n);
/* Zeroed guest memory */
uint64_t qhcd_zalloc(QHcd *h, size_t size);

/*
 * Reset and start the controller, and reset root hub port 0 (UHCI and
 * OHCI's first port, EHCI's port 0 owned by the EHCI)
 */
void qhcd_start(QHcd *h);
/*
 * Queue @n TDs on @list (@tds[0]'s address and endpoint).  @raw, if not
 * NULL, replaces the controller's own words: UHCI TD control, token and
 * link flags; OHCI TD dword 0 and ED dword 0; EHCI qTD token, QH dwords 1
 * and 2.  @c, if not NULL, says where the TDs are (n = 0: none queued,
 * past the driver's bound of 128 chains per start).
 */
void qhcd_queue(QHcd *h, QHcdList list, const QHcdTd *tds, unsigned n,
                const uint32_t *raw, QHcdChain *c);
/*
 * Queue a control transfer to endpoint 0 of @addr on the control list:
 * @setup (8 bytes; its wLength the data stage's length) written to @buf,
 * a SETUP TD, the data stage in TDs of 64 bytes at @buf + 8 in the
 * direction bmRequestType says, DATA1 first and alternating (USB 2.0
 * 8.5.3; a data stage longer than a chain holds is cut short), and the
 * status stage the other way, DATA1 (IN when there is no data stage).
 * The caller writes an OUT data stage to @buf + 8 first.  @c as
 * qhcd_queue()'s: the data stage is c->r[1] to c->r[c->n - 2].
 */
void qhcd_control(QHcd *h, uint8_t addr, const uint8_t *setup, uint64_t buf,
                  QHcdChain *c);
/* A TD's state; QHCD_TD_DONE: @actual, the bytes it moved */
int qhcd_td_state(QHcd *h, const QHcdChain *c, const QHcdRef *r,
                  uint32_t *actual);

typedef void QHcdTdFn(QHcd *h, const QHcdRef *r, uint32_t actual,
                      void *opaque);
/*
 * Hand the TDs of @c that completed since the last call to @fn, in their
 * order.  False while the chain has TDs still to complete.
 */
bool qhcd_chain_poll(QHcd *h, QHcdChain *c, QHcdTdFn *fn, void *opaque);

/* UHCI */
void quhci_start(QHcd *h, QUhci *u);
/* @idle: wait in one clock step per wait (qhcd_frames_idle()) */
void quhci_port_reset(QHcd *h, QUhci *u, int port, bool idle);

/* OHCI */
void qohci_write(QHcd *h, uint32_t off, uint32_t v);
uint32_t qohci_read(QHcd *h, uint32_t off);
uint64_t qohci_ed(QHcd *h, uint32_t dw0, uint64_t head, uint64_t tail);

/* EHCI */
void qehci_write(QHcd *h, uint32_t off, uint32_t v);
uint32_t qehci_read(QHcd *h, uint32_t off);
void qehci_port_reset(QHcd *h, int port, bool idle);

#endif
