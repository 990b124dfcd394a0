/*
 * libqos xHCI driver: enumerate a USB device and move real transfers
 *
 * A small host controller driver for qtests.  It resets and starts an
 * xHCI, keeps command, event and transfer rings (with Link TRBs and cycle
 * bit toggling on wrap-around), resets ports, enables and addresses
 * slots, configures endpoints from their descriptors and runs control,
 * bulk and interrupt transfers.  Waiting for a transfer steps the virtual
 * clock until its Transfer Event arrives or a deadline passes.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef LIBQOS_XHCI_DRIVER_H
#define LIBQOS_XHCI_DRIVER_H

#include "libqos-pc.h"
#include "pci-pc.h"

#include "pci.h"
#include "libqos-malloc.h"

/* Completion codes (xHCI 1.2, table 6-90) */
#define QXHCI_CC_INVALID                0
#define QXHCI_CC_SUCCESS                1
#define QXHCI_CC_DATA_BUFFER_ERROR      2
#define QXHCI_CC_BABBLE                 3
#define QXHCI_CC_USB_TRANSACTION_ERROR  4
#define QXHCI_CC_TRB_ERROR              5
#define QXHCI_CC_STALL                  6
#define QXHCI_CC_RESOURCE_ERROR         7
#define QXHCI_CC_INVALID_STREAM_TYPE    10
#define QXHCI_CC_SHORT_PACKET           13
#define QXHCI_CC_CONTEXT_STATE_ERROR    19
#define QXHCI_CC_STOPPED                26
#define QXHCI_CC_INVALID_STREAM_ID      34
/* Not from the controller: the driver gave up or cancelled the TD */
#define QXHCI_CC_TIMEOUT                256
#define QXHCI_CC_CANCELLED              257

/* Port speed ids as PORTSC reports them */
#define QXHCI_SPEED_FULL                1
#define QXHCI_SPEED_LOW                 2
#define QXHCI_SPEED_HIGH                3
#define QXHCI_SPEED_SUPER               4

/* Most TRBs one TD may take (buffers are split at 64 KiB boundaries) */
#define QXHCI_TD_MAX_TRBS               8

/* Default deadline for a transfer, in virtual nanoseconds */
#define QXHCI_DEFAULT_TIMEOUT_NS        (5 * 1000 * 1000 * 1000LL)

typedef struct QXhci QXhci;
typedef struct QXhciDevice QXhciDevice;
typedef struct QXhciRing QXhciRing;

typedef struct QXhciOptions {
    unsigned cmd_ring_trbs;     /* ring size including its Link TRB */
    unsigned event_ring_trbs;   /* 16..4096 */
    unsigned xfer_ring_trbs;    /* per endpoint, including its Link TRB */
    unsigned max_slots;         /* CONFIG.MaxSlotsEn; 0 = all */
    int64_t clock_step_ns;      /* virtual time per polling step */
    /*
     * Called after each step of the virtual clock the driver takes while
     * it waits (NULL: none).  A test that runs QEMU in its own process
     * (a fuzz target) runs the main loop here: stepping the clock runs
     * timers only, not bottom halves or fd handlers.
     */
    void (*after_step)(QTestState *qts, void *opaque);
    void *after_step_opaque;
    /*
     * BAR 0 as the caller mapped it, with the device enabled (NULL: the
     * driver maps it).  A caller that starts the driver again on the same
     * controller passes it, as sizing the BAR again rebuilds the memory
     * topology twice.
     */
    const QPCIBar *bar;
} QXhciOptions;

/* What the driver needs from an endpoint descriptor (and SS companion) */
typedef struct QXhciEndpoint {
    uint8_t address;            /* bEndpointAddress */
    uint8_t attributes;         /* bmAttributes */
    uint16_t max_packet;        /* wMaxPacketSize */
    uint8_t interval;           /* bInterval */
    uint8_t max_burst;          /* SS companion bMaxBurst */
    uint16_t bytes_per_interval; /* SS companion wBytesPerInterval */
} QXhciEndpoint;

/* One TD on an endpoint's transfer ring */
typedef struct QXhciTransfer {
    QXhci *xhci;
    QXhciDevice *dev;           /* NULL once the device is freed */
    uint8_t dci;
    bool control;
    bool in;
    unsigned ntrbs;
    uint64_t trb_addr[QXHCI_TD_MAX_TRBS];
    uint32_t trb_len[QXHCI_TD_MAX_TRBS];
    uint64_t buf;               /* guest buffer owned by the transfer */
    uint32_t length;            /* bytes asked for */
    uint32_t data_len;          /* control: data stage length */
    /* filled in on completion */
    bool done;
    int cc;
    uint32_t actual;
    bool short_seen;
} QXhciTransfer;

struct QXhciDevice {
    QXhci *xhci;
    int port;
    int speed;                  /* QXHCI_SPEED_* */
    int slot;
    uint16_t max_packet0;
    uint64_t in_ctx;
    uint64_t out_ctx;
    uint32_t ep_mask;           /* DCIs with an enabled endpoint */
    QXhciRing *rings[32];
    QXhciEndpoint eps[32];
    GList *pending;             /* QXhciTransfer not yet completed */
    bool gone;                  /* detached: no more transfers */
    bool hold_doorbells;        /* qxhci_submit() leaves the doorbell */
};

/* Controller */
QPCIDevice *qxhci_pci_find(QPCIBus *bus);
QXhci *qxhci_new(QTestState *qts, QPCIDevice *pdev, QGuestAllocator *alloc,
                 const QXhciOptions *opts);
void qxhci_free(QXhci *x);
QTestState *qxhci_qts(QXhci *x);
/*
 * The machine migrated to @qts, where the controller is @pdev: go on
 * driving it there, with every ring, slot and pending TD as they were.
 */
void qxhci_migrated(QXhci *x, QTestState *qts, QPCIDevice *pdev);
/* Drain the event ring; returns the number of events consumed. */
int qxhci_poll(QXhci *x);
/* Step the virtual clock once by the polling step, then poll. */
void qxhci_step(QXhci *x);
int qxhci_max_ports(QXhci *x);
uint32_t qxhci_portsc(QXhci *x, int port);
/* First port with a device connected, or 0. */
int qxhci_find_connected_port(QXhci *x);
/* Reset @port; returns its speed (QXHCI_SPEED_*) or -1. */
int qxhci_port_reset(QXhci *x, int port);
/* PORTSC's link state (PLS), and asking for one (LWS): U0, U3 = suspend */
#define QXHCI_PLS_U0            0
#define QXHCI_PLS_U3            3
#define QXHCI_PLS_RESUME        15
int qxhci_port_link_state(QXhci *x, int port);
void qxhci_port_set_link_state(QXhci *x, int port, int pls);
/* Port Status Change events seen for @port since the last call. */
int qxhci_take_port_events(QXhci *x, int port);
/* Wrap-around counters, for tests of the driver itself */
unsigned qxhci_event_ring_wraps(QXhci *x);
unsigned qxhci_cmd_ring_wraps(QXhci *x);

/* Commands: return the completion code, or QXHCI_CC_TIMEOUT */
int qxhci_cmd_enable_slot(QXhci *x, int *slot);
int qxhci_cmd_disable_slot(QXhci *x, int slot);
int qxhci_cmd_noop(QXhci *x);

/* Devices */
/* Port reset, Enable Slot, Address Device, bMaxPacketSize0 fix-up. */
QXhciDevice *qxhci_device_enumerate(QXhci *x, int port);
/* Disable the slot and free everything (also after a detach). */
void qxhci_device_free(QXhciDevice *d);

/*
 * Control transfer on the default endpoint.  Returns the completion code
 * of the TD (QXHCI_CC_SUCCESS also when the data stage was short), with
 * the data stage length in *@actual.  After a stall the endpoint is
 * reset and moved past the TD, so the next request works.
 */
int qxhci_control(QXhciDevice *d, uint8_t request_type, uint8_t request,
                  uint16_t value, uint16_t index, void *data,
                  uint16_t length, uint32_t *actual);
int qxhci_get_descriptor(QXhciDevice *d, uint8_t type, uint8_t index,
                         uint16_t lang, void *buf, uint16_t length,
                         uint32_t *actual);

/*
 * Find the endpoints of interface @iface, alternate setting @alt in a
 * configuration descriptor.  Returns how many were stored in @eps, or -1
 * when the interface is not there.
 */
int qxhci_config_find_endpoints(const uint8_t *config, size_t len,
                                int iface, int alt,
                                QXhciEndpoint *eps, int max);
/*
 * Configure Endpoint: drop the endpoints in @drop and add those in @add,
 * with contexts computed from their descriptors.  Pending TDs on dropped
 * endpoints are cancelled.
 */
int qxhci_configure_endpoints(QXhciDevice *d,
                              const QXhciEndpoint *add, int nadd,
                              const uint8_t *drop, int ndrop);
/* Deconfigure every endpoint but the default one. */
int qxhci_deconfigure(QXhciDevice *d);

/*
 * Queue one TD of @len bytes on endpoint @ep (OUT: copied from @data; a
 * length of 0 queues a zero-length TD) and ring the doorbell.
 */
QXhciTransfer *qxhci_submit(QXhciDevice *d, uint8_t ep, const void *data,
                            uint32_t len);
/*
 * The same, but the first TRB covers at most @first_len bytes (0: no
 * limit), so that the device sees a first piece of guest memory that
 * small, followed by the rest in further TRBs.
 */
QXhciTransfer *qxhci_submit_split(QXhciDevice *d, uint8_t ep,
                                  const void *data, uint32_t len,
                                  uint32_t first_len);
/*
 * While held, qxhci_submit() only queues its TD; qxhci_ring_doorbell()
 * then hands the controller every TD queued on @ep at once, so that the
 * device sees several in one go.
 */
void qxhci_hold_doorbells(QXhciDevice *d, bool hold);
void qxhci_ring_doorbell(QXhciDevice *d, uint8_t ep);
/* The same with a Stream ID in DB Stream ID (xHCI 1.2, 5.6) */
void qxhci_ring_doorbell_stream(QXhciDevice *d, uint8_t ep, uint16_t stream);
/* Wait until @t completes or @timeout_ns of virtual time pass. */
bool qxhci_wait(QXhciTransfer *t, int64_t timeout_ns);
/* Copy what an IN transfer received (t->actual bytes) to @buf. */
void qxhci_transfer_read(QXhciTransfer *t, void *buf);
void qxhci_transfer_free(QXhciTransfer *t);

/*
 * Synchronous helpers: submit, wait, copy back, free.  Return the
 * completion code (QXHCI_CC_TIMEOUT when nothing completed: the TD is then
 * cancelled with Stop Endpoint).
 */
int qxhci_transfer_sync(QXhciDevice *d, uint8_t ep, void *data,
                        uint32_t len, uint32_t *actual, int64_t timeout_ns);

/*
 * Stop endpoint @ep, cancel its pending TDs and move its dequeue pointer
 * to the enqueue pointer.  Also recovers a halted endpoint.
 */
int qxhci_endpoint_cancel(QXhciDevice *d, uint8_t ep);
/*
 * Stop Endpoint alone: its TDs stay where they are until
 * qxhci_endpoint_cancel() (or a doorbell) follows.
 */
int qxhci_endpoint_stop(QXhciDevice *d, uint8_t ep);
int qxhci_endpoint_max_packet(QXhciDevice *d, uint8_t ep);

/*
 * For fuzz targets, which drive the controller into states the helpers
 * above assert against: raw access that leaves the checking to the caller.
 */
/* Free TRBs on @ep's transfer ring (0 when the endpoint has no ring). */
unsigned qxhci_ring_space(QXhciDevice *d, uint8_t ep);
/* Base of @ep's transfer ring and its size in TRBs (0 when none). */
uint64_t qxhci_ring_base(QXhciDevice *d, uint8_t ep, unsigned *trbs);
/* Context size in bytes (32 or 64). */
unsigned qxhci_ctx_size(QXhci *x);
/*
 * A 32-bit register of BAR 0, at @off from the start of the operational
 * (QXHCI_REGS_OP), runtime (QXHCI_REGS_RT) or doorbell (QXHCI_REGS_DB)
 * registers.  The driver does not learn what such a write changed.
 */
#define QXHCI_REGS_OP           0
#define QXHCI_REGS_RT           1
#define QXHCI_REGS_DB           2
uint32_t qxhci_reg_read(QXhci *x, int regs, uint32_t off);
void qxhci_reg_write(QXhci *x, int regs, uint32_t off, uint32_t val);
/*
 * Queue one command TRB of any type and fields (the cycle bit is the
 * driver's) and wait for its completion; QXHCI_CC_TIMEOUT if none came.
 */
int qxhci_cmd_raw(QXhci *x, uint64_t param, uint32_t status,
                  uint32_t control, int *slot);
/*
 * Queue a control TD (setup, data, status stages) and ring the doorbell
 * without waiting: the caller waits with qxhci_wait() and recovers a
 * stalled or unanswered endpoint 0 with qxhci_endpoint_cancel(d, 0).
 * NULL when the ring has no room.
 */
QXhciTransfer *qxhci_control_submit(QXhciDevice *d, uint8_t request_type,
                                    uint8_t request, uint16_t value,
                                    uint16_t index, const void *data,
                                    uint16_t length);
/*
 * Forget the devices without touching the controller or guest memory (the
 * machine is about to be reset): each is freed and each of its pending TDs
 * marked cancelled and detached, so that qxhci_transfer_free() only frees
 * the TD's buffer.  qxhci_abandon() then frees the driver itself.
 */
void qxhci_abandon_devices(QXhci *x);
/*
 * Called with every event the driver takes from the event ring, before
 * it handles it: TDs the driver did not queue (on stream rings, say)
 * complete there.  NULL stops it.
 */
typedef void QXhciEventHook(void *opaque, uint64_t ptr, uint32_t status,
                            uint32_t control);
void qxhci_set_event_hook(QXhci *x, QXhciEventHook *hook, void *opaque);
/*
 * Called after every doorbell the driver rings (a command, a request or
 * a transfer handed to the controller) and after every request or
 * transfer it saw complete, with nothing of the driver's half done: a
 * test may migrate the machine there (qxhci_migrated()).  NULL stops it.
 */
typedef void QXhciCheckpoint(QXhci *x, void *opaque);
void qxhci_set_checkpoint(QXhci *x, QXhciCheckpoint *fn, void *opaque);
void qxhci_abandon(QXhci *x);

/*
 * A PC machine for a test: qemu-xhci in slot 4 (QXHCI_MACHINE_DEVFN) with
 * @devices (-device options) on it, the driver started and the first
 * device connected enumerated.  The BIOS and option ROMs come from the
 * directories in the environment variable @fw_env (':' between them;
 * Debian's when unset): a QEMU built without its blobs needs them.
 */
#define QXHCI_MACHINE_DEVFN             QPCI_DEVFN(4, 0)

typedef struct QXhciMachine {
    QOSState *qs;
    QTestState *qts;
    QPCIDevice *pdev;
    QXhci *xhci;
    QXhciDevice *dev;
    int port;
} QXhciMachine;

char *qxhci_firmware_args(const char *fw_env);
QXhciMachine *qxhci_machine_start(const char *fw_env, const char *devices);
/* The machine migrated to @dst: go on driving it there */
void qxhci_machine_migrated(QXhciMachine *m, QTestState *dst);
/*
 * The same for a test that keeps these parts itself: @qs's QEMU is
 * quit, its PCI bus and the controller (@old, at @devfn) are found
 * again on @dst and the driver @x follows; returns the new controller.
 */
QPCIDevice *qxhci_follow_migration(QOSState *qs, QXhci *x, QPCIDevice *old,
                                   int devfn, QTestState *dst);
void qxhci_machine_stop(QXhciMachine *m);

/* Standard requests on the default endpoint (USB 2.0 9.4) */
#define QXHCI_REQ_GET_STATUS            0x00
#define QXHCI_REQ_CLEAR_FEATURE         0x01
#define QXHCI_REQ_SET_FEATURE           0x03
#define QXHCI_REQ_SET_ADDRESS           0x05
#define QXHCI_REQ_GET_DESCRIPTOR        0x06
#define QXHCI_REQ_GET_CONFIGURATION     0x08
#define QXHCI_REQ_SET_CONFIGURATION     0x09
#define QXHCI_REQ_GET_INTERFACE         0x0a
#define QXHCI_REQ_SET_INTERFACE         0x0b
int qxhci_get_configuration(QXhciDevice *d);
/* GET_INTERFACE's answer, or -1 when the device stalls it */
int qxhci_get_interface(QXhciDevice *d, int iface);
void qxhci_set_configuration(QXhciDevice *d, int value);

#endif /* LIBQOS_XHCI_DRIVER_H */
