/*
 * usb-ncm-dl fuzz targets: guest operations through qemu-xhci, and
 * mutated migration streams
 *
 * usb-ncm-dl-fuzz enumerates the device (ZLP-required firmware, or NCM
 * 1.0's zlp=auto by the first input byte) through qemu-xhci with the
 * libqos xHCI driver, then reads the input as a sequence of operations a guest
 * (or the host side) can perform: control requests, bulk and interrupt
 * transfers of any length, queued IN transfers, cancellations, raw xHCI
 * commands with fuzzed contexts, configuration and interface changes,
 * port resets, suspend, unplug and replug, frames from the netdev, clock
 * steps, usb-ncm-fault changes, migrations of the controller and the device
 * (migrate_here(): a refused stream or another state after the load is a
 * finding), and class and standard requests and migrations between the
 * packets of a bulk transfer in either direction (OP_MID_XFER).  At the
 * end of every input, frames that the device could take but that stay in
 * the netdev's socket or the device's receive queue are a finding too
 * (netdev_reads_check()).
 *
 * The guest's operations go through libqtest and the libqos xHCI driver
 * only; the host's (device_add and device_del, the usb-ncm-fault
 * properties, set_link, a migration's save and load), which a qtest
 * would send over QMP and in-process fuzzing has no QMP for, through
 * usb_ncm_dl_host.h.
 *
 * usb-ncm-dl-migration-fuzz brings the device into a state chosen by the
 * first input byte, saves its VMState in-process, mutates the stream with
 * the rest of the input (the USBDevice part the USB core writes included),
 * loads it into the device and, when the load is accepted, runs transfers.
 * A mutated stream refused is an accepted outcome; the stream as the
 * device wrote it (no mutation, or none that changed a byte) must load
 * and save again the same, else the input aborts as a crash does.
 *
 * Each input runs in the process and starts from a controller reset
 * (USBCMD.HCRST, through the libqos driver) and the device's enumeration;
 * the machine is reset and the device created again every
 * USB_NCM_FUZZ_RESET_EVERY inputs (64), and after an input that left the
 * controller unanswering (ncm_fuzz_end()).  With USB_NCM_FUZZ_FORK=1 an
 * input runs instead in a child process forked from a parent in which
 * the device is already enumerated (the way QEMU's fork-based fuzzers
 * ran); the child hands libFuzzer's coverage counters back through shared
 * memory.  Not the default: the fork of the 160 MB ASan process costs
 * more than both resets (make bench-fuzz writes the rates of the three
 * ways into docs/findings.md).
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include <sys/ioctl.h>

#include "qemu/bswap.h"
#include "qemu/main-loop.h"
#include "hw/usb.h"
#include "hw/usb/cdc-ncm.h"
#include "hw/usb/ncm-fault.h"
#include "hw/usb/ncm-ntb.h"
#include "tests/qtest/libqtest.h"
#include "tests/qtest/libqos/libqos-malloc.h"
#include "tests/qtest/libqos/malloc-pc.h"
#include "tests/qtest/libqos/pci-pc.h"
#include "tests/qtest/libqos/xhci-driver.h"
#include "fuzz.h"
#include "usb_ncm_dl_fork.h"
#include "usb_ncm_dl_host.h"
#include "usb_ncm_dl_input.h"
#include "tests/qtest/usb-ncm-dl/ncm-oracle.h"

#define XHCI_DEVFN          QPCI_DEVFN(4, 0)

#define IF_CONTROL          0
#define IF_DATA             1

/* Bounds that keep one input short and guest memory from running out */
#define MAX_XFERS           48
#define MAX_OPS             256
#define MAX_WAIT_STEPS      40
#define STEP_NS             (5 * 1000 * 1000)

/* xHCI streams an input sets up: rings for the first few stream IDs */
#define STREAM_RINGS        8
#define STREAM_RING_TRBS    16
#define STREAM_CTX_MAX      256     /* stream contexts allocated */
#define TRB_SIZE            16
#define TRB_C               (1u << 0)
#define TRB_LINK_TC         (1u << 1)
#define TRB_ISP             (1u << 2)
#define TRB_IOC             (1u << 5)
#define TRB_TYPE_NORMAL     1
#define TRB_TYPE_LINK       6
/* xHCI registers the operations write (xHCI 1.2, 5.4 and 5.5) */
#define XHCI_PORTSC(n)      (0x400 + 0x10 * ((n) - 1))
#define XHCI_IR(n)          (0x20 + 0x20 * (n))
#define XHCI_IR_IMAN        0x00
#define XHCI_IR_IMOD        0x04
#define XHCI_IR_ERSTSZ      0x08
#define XHCI_IR_ERSTBA_LO   0x10
#define XHCI_IR_ERSTBA_HI   0x14
#define XHCI_IR_ERDP_LO     0x18
#define XHCI_IR_ERDP_HI     0x1c


typedef struct NcmFuzz {
    QTestState *qts;
    QGuestAllocator alloc;
    QPCIBus *bus;
    QPCIDevice *pdev;
    QXhci *x;
    QXhciDevice *d;
    uint8_t config[512];
    uint32_t config_len;
    QXhciEndpoint ep_notify;
    QXhciEndpoint ep_in;
    QXhciEndpoint ep_out;
    uint32_t mps;
    bool ntb32;
    bool crc;
    uint16_t seq;
    GPtrArray *xfers;       /* QXhciTransfer the target still owns */
    bool dead;              /* the controller stopped answering */
    /* endpoints whose context an input wrote (streams, raw fields) */
    uint32_t raw_dcis;
    uint64_t stream_ctx[32];
    unsigned stream_n[32];
    uint64_t stream_ring[32][STREAM_RINGS];
    unsigned stream_enq[32][STREAM_RINGS];
    bool stream_ccs[32][STREAM_RINGS];
    /* event rings of interrupters 1..3 an input set up */
    uint64_t ir_ring[4];
    /*
     * The NCM oracle (ncm-oracle.c) checks every bulk IN transfer from
     * alternate setting 1 on, until an operation the oracle cannot follow
     * (anything but bulk transfers, frames and waiting: a reset, a
     * cancellation, a request that renegotiates, a migration) turns it
     * off for the rest of the input; and every GET_DESCRIPTOR reply.
     */
    NcmOracle *oracle;
    bool data_on;           /* ncm_data_on() took alternate setting 1 */
    /*
     * What a controller reset does not undo, for ncm_fuzz_end() to put
     * back before the next input: usb-ncm-fault properties or the netdev's
     * link the input set (faults_set), or a device that loaded a mutated
     * stream whose fields no reset restores (device_dirty: replaced).
     */
    bool faults_set;
    bool device_dirty;
    bool oracle_in;
    bool oracle_was_in;     /* ... before the operation running now */
    unsigned op, prev_op;   /* run_ops(): the operation and the one before */
    unsigned fresh;         /* enumerated_again(): how the op enumerated */
    unsigned fresh_before;  /* ... and the one before it */
    /*
     * The data interface went back to alternate setting 0 (NCM 1.0 7.2:
     * the NTB parameters return to their defaults) and only operations
     * the oracle follows ran since: taking alternate setting 1 again
     * restarts the oracle.
     */
    bool data_defaults;
    /*
     * What the host negotiated at alternate setting 0 since then
     * (SET_NTB_FORMAT, SET_NTB_INPUT_SIZE, SET_CRC_MODE the device
     * accepted): the oracle's parameters when it starts again, from the
     * host's side rather than from what the device says of itself.
     */
    NcmOracleParams negotiated;
    NcmOracleParams oracle_params;
} NcmFuzz;

static int sockfds[2] = { -1, -1 };
static bool ncm_fuzz_active;
/* bytes were written to the socket since QEMU was last seen to read all */
static bool sock_written;

/*
 * Bytes written to the socket that QEMU has not read yet, or -1.  The
 * ioctl only while some may be left: it was a sixtieth of the time of
 * usb-ncm-dl-fuzz, called after every operation and clock step.
 */
static int sock_unread(void)
{
    int n;

    if (!sock_written) {
        return 0;
    }
    if (ioctl(sockfds[0], TIOCOUTQ, &n) == 0) {
        sock_written = n != 0;
        return n;
    }
    return -1;
}

static void sock_drain(void)
{
    uint8_t buf[4096];
    int i;

    for (i = 0; i < 16; i++) {
        bool got = false;

        /* what the device sent to the netdev: nobody checks it here */
        while (recv(sockfds[0], buf, sizeof(buf), MSG_DONTWAIT) > 0) {
            got = true;
        }
        if (!got) {
            break;
        }
        /*
         * Frames the netdev queued on a full socket go out now, as they
         * would when the main loop finds the socket writable again.
         */
        ncm_host_netdev_flush();
    }
}

/* Main loop iterations to let the netdev read what is in its socket */
#define NCM_READ_LOOPS      4

/*
 * What a main loop iteration would run now.  Polling is needed only when
 * the netdev's socket has frames to read that the device can take now
 * (its fd handler); else only bottom halves have work, which a main loop
 * iteration finds after two polls: flush_events() took a sixth of the
 * time of usb-ncm-dl-fuzz, mostly in those polls (perf, 2026-12-06).
 * One iteration reads all the socket holds, unless a frame is queued
 * for the device (then it cannot take more); flush_events() polled at
 * least twice more to find that nothing was left to do.
 */
/*
 * Main loop iterations while the socket holds frames that the device can
 * take, at most NCM_READ_LOOPS: false when one of them read nothing
 */
static bool netdev_read_socket(void)
{
    int unread = sock_unread();
    int i;

    for (i = 0; i < NCM_READ_LOOPS && unread > 0 &&
         ncm_host_netdev_can_read(); i++) {
        int before = unread;

        ncm_host_main_loop_once();
        unread = sock_unread();
        if (unread == before) {
            return false;
        }
    }
    return true;
}

static void ncm_events(QTestState *s)
{
    /* what is left unread, netdev_reads_check() judges at the end */
    netdev_read_socket();
    ncm_host_run_bottom_halves();
    sock_drain();
}

/*
 * The xHCI driver waits by stepping the virtual clock, which runs timers
 * but not bottom halves or fd handlers; the device completes parked
 * transfers and takes frames from the netdev in those.  The driver calls
 * this after every step (QXhciOptions.after_step).
 */
static void ncm_after_step(QTestState *s, void *opaque)
{
    if (ncm_fuzz_active) {
        ncm_events(s);
    }
}

/* Device creation, outside the guest's reach */

/*
 * The firmware model of the device ncm_host_device_add() creates, chosen
 * by bit 6 of an input's first byte: NULL for the property's default,
 * which is the command line's device (DisplayLink ids: ZLP-required
 * firmware), or ncm_zlp_auto for NCM 1.0's own delimiting, whose OUT
 * path is another.
 */
static const char ncm_zlp_auto[] = "auto";
static const char *ncm_zlp;

/* One netdev frame, as -netdev socket frames them: a length, the bytes */
static void sock_frame(const uint8_t *data, uint32_t len)
{
    g_autofree uint8_t *buf = g_malloc(len + 4);
    ssize_t n;

    stl_be_p(buf, len);
    memcpy(buf + 4, data, len);
    /* a full socket drops the frame: the netdev is not read, as on a host */
    n = send(sockfds[0], buf, len + 4, MSG_DONTWAIT);
    sock_written |= n > 0;
}

/* Driver plumbing */

static unsigned ep_dci(uint8_t ep)
{
    unsigned num = ep & 0x0f;

    return num ? num * 2 + ((ep & 0x80) ? 1 : 0) : 1;
}

static bool dev_usable(NcmFuzz *f)
{
    return f->d && !f->d->gone && !f->dead;
}

static bool ep_usable(NcmFuzz *f, uint8_t ep, unsigned trbs)
{
    /* an endpoint the input configured itself has no ring of the driver's */
    return dev_usable(f) && (f->d->ep_mask & (1u << ep_dci(ep))) &&
           !(f->raw_dcis & (1u << ep_dci(ep))) &&
           qxhci_ring_space(f->d, ep) >= trbs &&
           f->xfers->len < MAX_XFERS;
}

/* A violation is a finding: abort, and libFuzzer saves the input */
static void oracle_failed(const char *what, const char *why)
{
    fprintf(stderr, "usb-ncm-dl-fuzz: NCM oracle: %s: %s\n", what, why);
    abort();
}

/*
 * The netdev reads its socket whenever the device can take a frame: one
 * that stopped reading (a frame of no bytes did, F29, patches/0039) loses
 * every frame after it, for good, whatever is plugged in later.  At the
 * end of every input, no main loop iteration may leave the socket as it
 * was while the device could take its frames, and the device's
 * receive queue, flushed, must not hold frames back while the device
 * says it takes them (a frame of no bytes wedged it, F30).
 */
static void netdev_reads_check(void)
{
    if (!netdev_read_socket()) {
        char why[128];

        snprintf(why, sizeof(why), "its socket left unread (TIOCOUTQ %d) "
                 "while the device takes frames", sock_unread());
        oracle_failed("netdev", why);
    }
    if (ncm_host_device_rx_held()) {
        oracle_failed("netdev", "frames held in the device's receive queue "
                      "while the device takes frames");
    }
}

static void oracle_in_td(NcmFuzz *f, QXhciTransfer *t)
{
    g_autofree uint8_t *buf = NULL;
    char why[256] = "";

    if (!f->oracle_in || t->control || !t->in ||
        t->dci != ep_dci(f->ep_in.address)) {
        return;
    }
    if (t->cc != QXHCI_CC_SUCCESS && t->cc != QXHCI_CC_SHORT_PACKET) {
        /* a transfer error: the stream is no longer the oracle's */
        f->oracle_in = false;
        return;
    }
    buf = g_malloc(MAX(t->length, 1));
    qxhci_transfer_read(t, buf);
    if (!ncm_oracle_in_transfer(f->oracle, &f->oracle_params, buf,
                                t->actual, t->length, why, sizeof(why))) {
        oracle_failed("bulk IN transfer", why);
    }
    ncm_fuzz_counters()->oracle_in++;
}

/* Completed TDs, in the order they were queued (an endpoint's order) */
static void xfers_reap(NcmFuzz *f)
{
    guint i = 0;

    while (i < f->xfers->len) {
        QXhciTransfer *t = g_ptr_array_index(f->xfers, i);

        if (t->done) {
            oracle_in_td(f, t);
            qxhci_transfer_free(t);
            g_ptr_array_remove_index(f->xfers, i);
        } else {
            i++;
        }
    }
}

static void settle(NcmFuzz *f, int steps)
{
    int i;

    ncm_events(f->qts);
    for (i = 0; i < steps; i++) {
        qxhci_step(f->x);
    }
    qxhci_poll(f->x);
    sock_drain();
    xfers_reap(f);
}

/* Wait until no TD is pending, for at most @steps clock steps. */
static void wait_idle(NcmFuzz *f, int steps)
{
    int i;

    for (i = 0; i < steps; i++) {
        xfers_reap(f);
        if (!f->xfers->len) {
            break;
        }
        qxhci_step(f->x);
    }
    sock_drain();
    xfers_reap(f);
}

static void submit(NcmFuzz *f, uint8_t ep, const void *data, uint32_t len)
{
    QXhciTransfer *t;

    /* 64 KiB + 1 spans three TRBs at most (buffers are page aligned) */
    if (!ep_usable(f, ep, 3)) {
        return;
    }
    t = qxhci_submit(f->d, ep, data, len);
    g_ptr_array_add(f->xfers, t);
}

/*
 * A control transfer, waited for a while; a stalled or unanswered
 * endpoint 0 is stopped or reset and moved past the TD, as a host does.
 */
static int control(NcmFuzz *f, uint8_t type, uint8_t req, uint16_t value,
                   uint16_t index, const void *data, uint16_t len)
{
    QXhciTransfer *t;
    int i, cc = QXHCI_CC_TIMEOUT;

    if (!dev_usable(f) || f->xfers->len >= MAX_XFERS) {
        return -1;
    }
    t = qxhci_control_submit(f->d, type, req, value, index, data, len);
    if (!t) {
        return -1;
    }
    g_ptr_array_add(f->xfers, t);
    /* most requests complete at the doorbell: no virtual time needed */
    qxhci_poll(f->x);
    for (i = 0; i < MAX_WAIT_STEPS && !t->done; i++) {
        qxhci_step(f->x);
    }
    if (t->done) {
        cc = t->cc;
    }
    if (t->done && type == USB_DIR_IN && req == USB_REQ_GET_DESCRIPTOR &&
        len &&
        (cc == QXHCI_CC_SUCCESS || cc == QXHCI_CC_SHORT_PACKET)) {
        g_autofree uint8_t *buf = g_malloc(len);
        char why[256] = "";

        qxhci_transfer_read(t, buf);
        if (!ncm_oracle_descriptor(value >> 8, value & 0xff, len, buf,
                                   t->actual, why, sizeof(why))) {
            oracle_failed("GET_DESCRIPTOR", why);
        }
        ncm_fuzz_counters()->oracle_desc++;
    }
    if ((!t->done || cc == QXHCI_CC_STALL) && dev_usable(f) &&
        qxhci_endpoint_cancel(f->d, 0) == QXHCI_CC_TIMEOUT) {
        f->dead = true;
    }
    xfers_reap(f);
    return cc;
}

static int set_configuration(NcmFuzz *f, uint16_t value)
{
    return control(f, USB_RECIP_DEVICE, USB_REQ_SET_CONFIGURATION, value, 0,
                   NULL, 0);
}

static int set_interface(NcmFuzz *f, uint16_t alt, uint16_t iface)
{
    return control(f, USB_RECIP_INTERFACE, USB_REQ_SET_INTERFACE, alt, iface,
                   NULL, 0);
}

static bool configure_data(NcmFuzz *f, bool add)
{
    uint8_t drop[2] = { f->ep_in.address, f->ep_out.address };
    QXhciEndpoint eps[2] = { f->ep_in, f->ep_out };

    if (!dev_usable(f)) {
        return false;
    }
    return (add ? qxhci_configure_endpoints(f->d, eps, 2, NULL, 0) :
            qxhci_configure_endpoints(f->d, NULL, 0, drop, 2)) ==
           QXHCI_CC_SUCCESS;
}

/*
 * Enumerate as a host driver does: address the device, read its
 * configuration, configure the notification endpoint, SET_CONFIGURATION(1)
 * and, with @data, the data interface's alternate setting 1.
 */
static bool ncm_data_on(NcmFuzz *f)
{
    f->data_on = configure_data(f, true) &&
                 set_interface(f, 1, IF_DATA) ==
                 QXHCI_CC_SUCCESS;
    f->data_defaults = !f->data_on;
    return f->data_on;
}

static bool ncm_enumerate(NcmFuzz *f, bool data)
{
    QXhciEndpoint eps[4];
    uint32_t actual = 0;
    int port, n;

    if (f->dead || qxhci_cmd_noop(f->x) != QXHCI_CC_SUCCESS) {
        f->dead = true;
        return false;
    }
    port = qxhci_find_connected_port(f->x);
    if (!port) {
        return false;
    }
    f->d = qxhci_device_enumerate(f->x, port);
    if (!f->d) {
        return false;
    }
    if (qxhci_get_descriptor(f->d, 2, 0, 0, f->config, sizeof(f->config),
                             &actual) != QXHCI_CC_SUCCESS || actual < 9) {
        return false;
    }
    f->config_len = actual;
    {
        char why[256] = "";

        if (!ncm_oracle_descriptor(2, 0, sizeof(f->config), f->config,
                                   actual, why, sizeof(why))) {
            oracle_failed("GET_DESCRIPTOR(configuration)", why);
        }
        ncm_fuzz_counters()->oracle_desc++;
    }
    n = qxhci_config_find_endpoints(f->config, f->config_len, IF_CONTROL, 0,
                                    eps, ARRAY_SIZE(eps));
    if (n != 1) {
        return false;
    }
    f->ep_notify = eps[0];
    n = qxhci_config_find_endpoints(f->config, f->config_len, IF_DATA, 1,
                                    eps, ARRAY_SIZE(eps));
    if (n != 2) {
        return false;
    }
    f->ep_in = (eps[0].address & 0x80) ? eps[0] : eps[1];
    f->ep_out = (eps[0].address & 0x80) ? eps[1] : eps[0];
    f->mps = MAX(f->ep_out.max_packet & 0x7ff, 8);
    f->ntb32 = false;
    f->crc = false;
    if (qxhci_configure_endpoints(f->d, &f->ep_notify, 1, NULL, 0) !=
        QXHCI_CC_SUCCESS ||
        set_configuration(f, 1) != QXHCI_CC_SUCCESS) {
        return false;
    }
    /* the data interface at alternate setting 0, with the defaults */
    f->data_defaults = true;
    memset(&f->negotiated, 0, sizeof(f->negotiated));
    return !data || ncm_data_on(f);
}

/* The host forgets the device and finds it again, as after a reset. */
static void reenumerate(NcmFuzz *f, bool data)
{
    if (f->d) {
        if (!f->dead) {
            qxhci_device_free(f->d);
        }
        f->d = NULL;
    }
    xfers_reap(f);
    ncm_enumerate(f, data);
}

/*
 * The controller's PCI function and BAR 0, mapped once per machine reset
 * (the BAR's sizing rebuilds the memory topology, twice): a controller
 * reset leaves them as they are.
 */
static struct {
    QPCIBus *bus;
    QPCIDevice *pdev;
    QPCIBar bar;
} pci_kept;

static void ncm_fuzz_begin(NcmFuzz *f, QTestState *s)
{
    QXhciOptions opts = {
        /* small rings, so that inputs wrap them */
        .cmd_ring_trbs = 16,
        .event_ring_trbs = 32,
        .xfer_ring_trbs = 32,
        .max_slots = 4,
        .clock_step_ns = STEP_NS,
        .after_step = ncm_after_step,
    };
    int i;

    memset(f, 0, sizeof(*f));
    f->qts = s;
    ncm_fuzz_active = true;
    ncm_host_device_add(ncm_zlp);
    /* leftovers of the last input: let the netdev take them */
    for (i = 0; i < 20 && sock_unread() > 0; i++) {
        main_loop_wait(true);
    }
    sock_drain();
    pc_alloc_init(&f->alloc, s, 0);
    if (!pci_kept.bus) {
        /* after a machine reset: find the controller, map its BAR */
        pci_kept.bus = qpci_new_pc(s, NULL);
        pci_kept.pdev = qpci_device_find(pci_kept.bus, XHCI_DEVFN);
        g_assert(pci_kept.pdev);
        qpci_device_enable(pci_kept.pdev);
        pci_kept.bar = qpci_iomap(pci_kept.pdev, 0, NULL);
    }
    f->bus = pci_kept.bus;
    f->pdev = pci_kept.pdev;
    opts.bar = &pci_kept.bar;
    f->x = qxhci_new(s, f->pdev, &f->alloc, &opts);
    f->xfers = g_ptr_array_new();
}

/* Every usb-ncm-fault property back to its default, the link up */
static void ncm_faults_clear(NcmFuzz *f)
{
    ncm_host_faults_clear();
    ncm_host_set_link(true);
    /* the replug timer, set to now, runs once the clock moves */
    qtest_clock_step(f->qts, 1000);
    flush_events(f->qts);
}

/*
 * Inputs between two machine resets (USB_NCM_FUZZ_RESET_EVERY, 64 unless
 * set; 1 resets the machine after every input, as the targets did before).
 * In between, an input starts where a guest whose driver reloads starts:
 * the controller reset through USBCMD.HCRST (every slot disabled, every
 * transfer cancelled), the device reset by its enumeration's port reset,
 * the usb-ncm-fault properties and the link put back.  That costs a fraction
 * of a machine reset and the device's creation (make bench-fuzz), and
 * what an input leaves for the next is what a guest leaves behind a
 * controller reset: a state the fuzzer should reach anyway.
 */
static void ncm_fuzz_end(NcmFuzz *f)
{
    static unsigned since_reset;
    guint i;

    if (f->oracle) {
        ncm_oracle_free(f->oracle);
    }

    /* the TDs' buffers go back through the driver, which goes last */
    qxhci_abandon_devices(f->x);
    for (i = 0; i < f->xfers->len; i++) {
        qxhci_transfer_free(g_ptr_array_index(f->xfers, i));
    }
    g_ptr_array_free(f->xfers, true);
    qxhci_abandon(f->x);
    alloc_destroy(&f->alloc);
    sock_drain();
    ncm_fuzz_active = false;
    if (!f->dead && ++since_reset < ncm_fuzz_reset_every()) {
        if (f->faults_set) {
            ncm_faults_clear(f);
        }
        if (f->device_dirty) {
            /* the next input's ncm_fuzz_begin() plugs a fresh one */
            ncm_host_device_del();
            ncm_fuzz_counters()->device_replugs++;
        }
        /* the next input's qxhci_new() resets the controller */
        flush_events(f->qts);
        ncm_fuzz_counters()->light_resets++;
        return;
    }
    /* a fresh device on a reset machine: nothing carries over */
    since_reset = 0;
    g_free(pci_kept.pdev);
    qpci_free_pc(pci_kept.bus);
    pci_kept.bus = NULL;
    pci_kept.pdev = NULL;
    ncm_host_device_del();
    flush_events(f->qts);
    fuzz_reset(f->qts);
    /* properties are not reset with the machine */
    if (f->faults_set) {
        ncm_faults_clear(f);
    }
    ncm_fuzz_counters()->machine_resets++;
}

/* NTBs */

/*
 * A well-formed NTB16 or NTB32 of 1 to 10 datagrams from the input, in
 * the format and CRC mode negotiated, so that inputs get past the
 * parser's first checks
 */
static GByteArray *build_ntb(NcmFuzz *f, FuzzIn *in)
{
    /* the NDP at 16, the datagrams 4-aligned, as Linux's cdc_ncm does */
    NcmHostLayout l = {
        .ntb32 = f->ntb32, .crc = f->crc, .ndp_alignment = 16, .divisor = 4,
    };
    unsigned n = in_u8(in) % 10 + 1;

    return in_ntb(in, &l, n, f->seq++);
}

/* Zeroes after the NTB, up to @len bytes of transfer */
static void pad_zero(GByteArray *b, uint32_t len)
{
    uint32_t old = b->len;

    if (len > old) {
        g_byte_array_set_size(b, len);
        memset(b->data + old, 0, len - old);
    }
}

/* Operations of usb-ncm-dl-fuzz */

enum {
    OP_CONTROL,
    OP_CLASS,
    OP_BULK_OUT,
    OP_BULK_IN,
    OP_INTR_IN,
    OP_CANCEL,
    OP_XHCI_CMD,
    OP_CONTEXT_CMD,
    OP_SET_CONFIG,
    OP_SET_ALT,
    OP_PORT,
    OP_PLUG,
    OP_FRAME,
    OP_CLOCK,
    OP_FAULT,
    OP_WAIT,
    OP_REENUMERATE,
    OP_EP_CTX,
    OP_STREAM_TD,
    OP_DOORBELL,
    OP_PORTSC,
    OP_INTERRUPTER,
    OP_MIGRATE,
    OP_MID_XFER,
    OP__MAX
};

/* Any request, any fields, any data stage */
static void op_control(NcmFuzz *f, FuzzIn *in)
{
    uint8_t type = in_u8(in), req = in_u8(in);
    uint16_t value = in_u16(in), index = in_u16(in), len = in_u16(in);
    g_autofree uint8_t *buf = NULL;

    /* most data stages are short; 4 KiB covers every request's reply */
    if (len > 4096 && !(len & 1)) {
        len &= 0xfff;
    }
    buf = g_malloc0(MAX(len, 1));
    if (!(type & 0x80)) {
        /* only a host-to-device data stage takes bytes of the input */
        in_fill(in, buf, len, len);
    }
    control(f, type, req, value, index, buf, len);
}

/*
 * Every class request of the NCM function (cdc-ncm.h: the CDC ECM 1.2
 * requests NCM 1.0 takes over and NCM 1.0's own), with the direction and
 * the data stage length a host uses.  The order is op_class()'s table
 * index, which the committed corpus depends on: add at the end.
 */
static const struct {
    uint8_t req;
    bool in;
    uint16_t len;
} ncm_class_reqs[] = {
    { CDC_SET_ETHERNET_MULTICAST_FILTERS, false, CDC_MC_ADDRESS_LEN },
    { CDC_SET_ETHERNET_PM_PATTERN_FILTER, false, 8 },
    { CDC_GET_ETHERNET_PM_PATTERN_FILTER, true, sizeof(uint16_t) },
    { CDC_SET_ETHERNET_PACKET_FILTER, false, 0 },
    { CDC_GET_ETHERNET_STATISTIC, true, sizeof(uint32_t) },
    { NCM_GET_NTB_PARAMETERS, true, NCM_NTB_PARAMETERS_LEN },
    { NCM_GET_NET_ADDRESS, true, CDC_MC_ADDRESS_LEN },
    { NCM_SET_NET_ADDRESS, false, CDC_MC_ADDRESS_LEN },
    { NCM_GET_NTB_FORMAT, true, sizeof(uint16_t) },
    { NCM_SET_NTB_FORMAT, false, 0 },
    { NCM_GET_NTB_INPUT_SIZE, true, 2 * sizeof(uint32_t) },
    { NCM_SET_NTB_INPUT_SIZE, false, sizeof(uint32_t) },
    { NCM_GET_MAX_DATAGRAM_SIZE, true, sizeof(uint16_t) },
    { NCM_SET_MAX_DATAGRAM_SIZE, false, sizeof(uint16_t) },
    { NCM_GET_CRC_MODE, true, sizeof(uint16_t) },
    { NCM_SET_CRC_MODE, false, 0 },
};

#define CLASS_IN    ((USB_DIR_IN | USB_TYPE_CLASS | USB_RECIP_INTERFACE))
#define CLASS_OUT   ((USB_DIR_OUT | USB_TYPE_CLASS | USB_RECIP_INTERFACE))

/* Requests after which the IN stream's layout is another (the oracle's) */
static bool ncm_class_renegotiates(uint8_t req)
{
    return req == NCM_SET_NTB_FORMAT || req == NCM_SET_NTB_INPUT_SIZE ||
           req == NCM_SET_MAX_DATAGRAM_SIZE || req == NCM_SET_CRC_MODE;
}

/*
 * A class request to the control interface; what an accepted
 * host-to-device one changed, for the OUT NTBs built from now on and the
 * oracle's next IN stream.
 */
static void class_request(NcmFuzz *f, uint8_t req, bool dir_in,
                          uint16_t value, uint8_t *buf, uint16_t len)
{
    if (control(f, dir_in ? CLASS_IN : CLASS_OUT, req, value, IF_CONTROL,
                buf, len) != QXHCI_CC_SUCCESS || dir_in) {
        return;
    }
    if (f->data_defaults) {
        /* at alternate setting 0: what the next IN stream must follow */
        if (req == NCM_SET_NTB_FORMAT) {
            f->negotiated.ntb32 = value == NCM_NTB_FORMAT_SELECT_32;
        } else if (req == NCM_SET_CRC_MODE) {
            f->negotiated.crc = value == NCM_CRC_APPENDED;
        } else if (req == NCM_SET_NTB_INPUT_SIZE) {
            f->negotiated.in_max_size = ldl_le_p(buf);
            f->negotiated.in_max_datagrams = len == 8 ? lduw_le_p(buf + 4) : 0;
        }
    }
    /* what the OUT NTBs built from now on must look like */
    if (req == NCM_SET_NTB_FORMAT) {
        f->ntb32 = value & 1;
    } else if (req == NCM_SET_CRC_MODE) {
        f->crc = value & 1;
    }
}

/*
 * A class request to the control interface, the request from the ones
 * the device knows, either direction (bit 7), so that inputs reach them
 * sooner.
 */
static void op_class(NcmFuzz *f, FuzzIn *in)
{
    uint8_t sel = in_u8(in);
    uint8_t req = ncm_class_reqs[sel % ARRAY_SIZE(ncm_class_reqs)].req;
    uint16_t value = in_u16(in), len = in_u16(in) % 512;
    bool dir_in = sel & 0x80;
    uint8_t buf[512] = { 0 };

    if (!dir_in) {
        in_fill(in, buf, len, len);
    }
    class_request(f, req, dir_in, value, buf, len);
}

static void op_bulk_out(NcmFuzz *f, FuzzIn *in)
{
    uint8_t kind = in_u8(in);
    uint16_t arg = in_u16(in);
    g_autoptr(GByteArray) ntb = NULL;
    g_autofree uint8_t *buf = NULL;
    uint32_t len = 0;

    switch (kind % 8) {
    case 0:
        len = arg % 4096;
        break;
    case 1:
        len = 0;
        break;
    case 2:
        len = 1;
        break;
    case 3:
        /* an exact multiple of wMaxPacketSize: the end is a ZLP away */
        len = MIN(f->mps * (1 + arg % 128), 65536);
        break;
    case 4:
        len = 65537;
        break;
    case 5:
        ntb = build_ntb(f, in);
        break;
    case 6:
        ntb = build_ntb(f, in);
        pad_zero(ntb, MIN(ROUND_UP(ntb->len, f->mps), 65536));
        break;
    default:
        len = arg;
        break;
    }
    if (ntb) {
        submit(f, f->ep_out.address, ntb->data, ntb->len);
        return;
    }
    buf = g_malloc(MAX(len, 1));
    in_fill(in, buf, len, 256);
    submit(f, f->ep_out.address, buf, len);
}

static uint32_t in_length(NcmFuzz *f, uint8_t kind, uint16_t arg)
{
    switch (kind % 8) {
    case 0:
        return arg;
    case 1:
        return 0;
    case 2:
        return f->mps;
    case 3:
        return 65536;
    case 4:
        return 65537;
    case 5:
        return 16384;
    case 6:
        return 1;
    default:
        return arg % 2048;
    }
}

/*
 * Up to 8 bulk IN TDs queued behind one doorbell, all of one length or
 * (bit 7 of the count) of lengths that differ from one TD to the next
 */
static void op_bulk_in(NcmFuzz *f, FuzzIn *in)
{
    uint8_t count = in_u8(in), kind = in_u8(in);
    unsigned n = count % 8 + 1, i;
    uint16_t arg = in_u16(in);

    if (!dev_usable(f)) {
        return;
    }
    qxhci_hold_doorbells(f->d, true);
    for (i = 0; i < n; i++) {
        submit(f, f->ep_in.address, NULL,
               in_length(f, count & 0x80 ? kind + i : kind, arg));
    }
    qxhci_hold_doorbells(f->d, false);
    if (f->d->ep_mask & (1u << ep_dci(f->ep_in.address))) {
        qxhci_ring_doorbell(f->d, f->ep_in.address);
    }
}

static void op_intr_in(NcmFuzz *f, FuzzIn *in)
{
    submit(f, f->ep_notify.address, NULL, in_u8(in) % 64);
}

/* Stop Endpoint, cancel its TDs, Set TR Dequeue past them */
static void op_cancel(NcmFuzz *f, FuzzIn *in)
{
    uint8_t eps[4] = { 0, f->ep_in.address, f->ep_out.address,
                       f->ep_notify.address };
    uint8_t ep = eps[in_u8(in) % 4];

    if (!f->d || f->dead || !qxhci_ring_base(f->d, ep, NULL)) {
        return;
    }
    if (qxhci_endpoint_cancel(f->d, ep) == QXHCI_CC_TIMEOUT) {
        f->dead = true;
    }
}

/*
 * A command with fuzzed fields: Enable/Disable Slot, Reset/Stop
 * Endpoint, Set TR Dequeue (a pointer into the endpoint's ring, any cycle
 * state and stream id), Reset Device, No Op, and the context commands of
 * OP_CONTEXT_CMD without a new context.
 */
static void op_xhci_cmd(NcmFuzz *f, FuzzIn *in)
{
    static const uint8_t types[] = {
        9, 10, 11, 12, 13, 14, 15, 16, 17, 23,
    };
    uint8_t sel = in_u8(in), type = types[sel % ARRAY_SIZE(types)];
    uint8_t dci = in_u8(in), flags = in_u8(in);
    uint16_t arg = in_u16(in);
    uint32_t ctl, status = 0;
    uint64_t param = 0;
    int slot = f->d ? f->d->slot : 1, cc, new_slot = 0;

    if (f->dead) {
        return;
    }
    /* mostly our slot; sometimes another, including invalid ones */
    if (sel & 0x80) {
        slot = arg >> 12;
    }
    dci = dci & 0x20 ? dci & 0x1f : ep_dci(dci & 1 ? f->ep_in.address :
                                            dci & 2 ? f->ep_out.address :
                                            dci & 4 ? f->ep_notify.address :
                                            0);
    ctl = (uint32_t)type << 10 | (uint32_t)slot << 24 |
              (uint32_t)dci << 16;
    switch (type) {
    case 11:                            /* Address Device: BSR */
    case 12:                            /* Configure Endpoint: DC */
        ctl |= (flags & 1) << 9;
        /* fall through */
    case 13:
        param = f->d ? f->d->in_ctx : 0;
        break;
    case 14:                            /* Reset Endpoint: TSP */
        ctl |= (flags & 1) << 9;
        break;
    case 15:                            /* Stop Endpoint: SP */
        ctl |= (flags & 1) << 23;
        break;
    case 16:
        if (f->d) {
            unsigned trbs;
            uint64_t base = qxhci_ring_base(f->d, (dci / 2) |
                                            (dci & 1 ? 0x80 : 0), &trbs);

            if (dci == 1) {
                base = qxhci_ring_base(f->d, 0, &trbs);
            }
            param = base + (trbs ? arg % trbs : arg) * 16;
        }
        param |= flags & 0xf;           /* DCS, SCT */
        status = (uint32_t)(flags >> 4) << 16;  /* stream id */
        break;
    default:
        break;
    }
    cc = qxhci_cmd_raw(f->x, param, status, ctl, &new_slot);
    if (cc == QXHCI_CC_TIMEOUT) {
        f->dead = true;
        return;
    }
    /* a slot the driver does not know must not use up the controller's */
    if (type == 9 && cc == QXHCI_CC_SUCCESS &&
        (!f->d || new_slot != f->d->slot)) {
        qxhci_cmd_disable_slot(f->x, new_slot);
    }
    settle(f, 1);
}

/*
 * Evaluate Context, Configure Endpoint or Address Device with a context
 * the guest wrote: the device context as the controller keeps it, copied
 * into the input context, with fuzzed add/drop flags and fuzzed bytes.
 */
static void op_context_cmd(NcmFuzz *f, FuzzIn *in)
{
    static const uint8_t types[] = { 11, 12, 13 };
    uint8_t sel = in_u8(in), type = types[sel % 3];
    uint32_t drop = in_u16(in), add = in_u16(in) | 1;
    unsigned npatch = in_u8(in) % 8, i, cs, size;
    g_autofree uint8_t *ctx = NULL;
    uint32_t ctl;
    int cc;

    if (!f->d || f->dead) {
        return;
    }
    cs = qxhci_ctx_size(f->x);
    size = 33 * cs;
    ctx = g_malloc0(size);
    qtest_memread(f->qts, f->d->out_ctx, ctx + cs, 32 * cs);
    /* drop flags start at DCI 2; add flags at the slot context */
    stl_le_p(ctx, drop << 2);
    stl_le_p(ctx + 4, add);
    for (i = 0; i < npatch; i++) {
        uint16_t off = in_u16(in) % size;
        uint8_t v = in_u8(in);

        if (v & 0x80) {
            ctx[off] ^= 1u << (v & 7);
        } else {
            ctx[off] = in_u8(in);
        }
    }
    qtest_memwrite(f->qts, f->d->in_ctx, ctx, size);
    ctl = (uint32_t)type << 10 | (uint32_t)f->d->slot << 24 |
              (uint32_t)(sel & 0x40 ? 1 : 0) << 9;
    cc = qxhci_cmd_raw(f->x, f->d->in_ctx, 0, ctl, NULL);
    if (cc == QXHCI_CC_TIMEOUT) {
        f->dead = true;
        return;
    }
    settle(f, 1);
}

static void set_config(NcmFuzz *f, uint8_t v)
{
    if (!dev_usable(f)) {
        return;
    }
    if (v & 0x80) {
        /* as a host does it: endpoints down first */
        qxhci_deconfigure(f->d);
    }
    set_configuration(f, v & 0x3);
    if ((v & 0x83) == 0x81 && dev_usable(f)) {
        qxhci_configure_endpoints(f->d, &f->ep_notify, 1, NULL, 0);
    }
}

static void op_set_config(NcmFuzz *f, FuzzIn *in)
{
    set_config(f, in_u8(in));
}

static void oracle_start(NcmFuzz *f);

/*
 * SET_INTERFACE: bits 0-1 the alternate setting, bit 2 the control
 * interface (else the data interface), bit 3 without the Configure
 * Endpoint a host does around it
 */
static int set_alt(NcmFuzz *f, uint8_t v)
{
    int cc;
    uint8_t alt = v & 0x3, iface = v & 0x4 ? IF_CONTROL : IF_DATA;

    if (iface == IF_DATA && alt == 1 && !(v & 0x8)) {
        configure_data(f, true);
    }
    cc = set_interface(f, alt, iface);
    if (iface == IF_DATA && alt == 0 && !(v & 0x8)) {
        configure_data(f, false);
    }
    if (iface == IF_DATA && alt == 0) {
        /* NCM 1.0 7.2: alternate setting 0 restores the defaults */
        f->ntb32 = false;
        f->crc = false;
        f->data_defaults = cc == QXHCI_CC_SUCCESS;
        memset(&f->negotiated, 0, sizeof(f->negotiated));
    } else if (iface == IF_DATA && alt == 1 && cc == QXHCI_CC_SUCCESS &&
               f->data_defaults && !f->faults_set) {
        /* a stream with the defaults again: the oracle's once more */
        f->data_defaults = false;
        xfers_reap(f);
        oracle_start(f);
    }
    return cc;
}

/*
 * SET_INTERFACE(data, 1) while the oracle followed the IN stream, at
 * alternate setting 1 then: the data path starts afresh with the
 * parameters in force (NCM 1.0 7.2), and so does the oracle; an NTB the
 * device had half sent must not go on (F23).
 */
static void op_set_alt(NcmFuzz *f, FuzzIn *in)
{
    uint8_t v = in_u8(in);
    bool again = f->oracle_was_in && (v & 0x7) == 1;

    if (set_alt(f, v) == QXHCI_CC_SUCCESS && again) {
        xfers_reap(f);
        ncm_oracle_reset(f->oracle);
        f->oracle_in = true;
    }
}

/* Port reset (re-enumerating or not), suspend and resume */
static void op_port(NcmFuzz *f, FuzzIn *in)
{
    uint8_t v = in_u8(in);
    int port;

    if (!f->d || f->dead) {
        return;
    }
    port = f->d->port;
    switch (v % 4) {
    case 0:
        qxhci_port_reset(f->x, port);
        break;
    case 1:
        qxhci_port_reset(f->x, port);
        reenumerate(f, v & 0x80);
        break;
    case 2:
        qxhci_port_set_link_state(f->x, port, QXHCI_PLS_U3);
        settle(f, v >> 4);
        break;
    default:
        qxhci_port_set_link_state(f->x, port, QXHCI_PLS_U0);
        settle(f, 1);
        break;
    }
}

/* Unplug, replug (then enumerate again or not), or the replug fault */
static bool enumerated_again(NcmFuzz *f, unsigned how);

static void op_plug(NcmFuzz *f, FuzzIn *in)
{
    uint8_t v = in_u8(in);

    switch (v % 4) {
    case 0:
        ncm_host_device_del();
        settle(f, 1);
        break;
    case 1:
        ncm_host_device_add(ncm_zlp);
        settle(f, 1);
        break;
    case 2:
        if (enumerated_again(f, 3 + !!(v & 0x80))) {
            break;
        }
        ncm_host_device_del();
        settle(f, 1);
        ncm_host_device_add(ncm_zlp);
        settle(f, 1);
        reenumerate(f, v & 0x80);
        f->fresh = dev_usable(f) ? 3 + !!(v & 0x80) : 0;
        break;
    default:
        f->faults_set = true;
        ncm_host_fault_set(NCM_FAULT_REPLUG_MS, (v >> 2) * 4);
        settle(f, 1);
        break;
    }
}

static void op_frame(NcmFuzz *f, FuzzIn *in)
{
    uint8_t kind = in_u8(in);
    uint32_t len = in_u16(in);
    g_autofree uint8_t *buf = NULL;
    static const uint8_t macs[4][6] = {
        { 0x52, 0x54, 0x00, 0x12, 0x34, 0x56 },     /* the device's */
        { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff },
        { 0x33, 0x33, 0x00, 0x00, 0x00, 0x01 },
        { 0x01, 0x00, 0x5e, 0x00, 0x00, 0xfb },
    };

    if ((kind & 0xc0) == 0xc0 && !len) {
        /*
         * A frame of no bytes into the device's queue, as
         * filter-redirector passes one on; through the socket (bit 6
         * clear) the net layer refuses it (patches/0039)
         */
        ncm_host_netdev_send_empty();
        ncm_events(f->qts);
        return;
    }
    len = kind & 0x80 ? len : 14 + len % 1501;
    buf = g_malloc(MAX(len, 14));
    in_fill(in, buf, len, 64);
    if (len >= 6 && !(kind & 0x40)) {
        memcpy(buf, macs[kind & 3], 6);
    }
    sock_frame(buf, len);
    flush_events(f->qts);
}

static void op_clock(NcmFuzz *f, FuzzIn *in)
{
    uint16_t v = in_u16(in);

    /* 10 us .. 655 ms in one step, timers in order */
    qtest_clock_step(f->qts, ((int64_t)v + 1) * 10000);
    ncm_after_step(f->qts, NULL);
    if (f->x) {
        qxhci_poll(f->x);
    }
    xfers_reap(f);
}

static void op_fault(NcmFuzz *f, FuzzIn *in)
{
    /*
     * The numbered properties but the seed (usb_ncm_fault_names[]: 0..5),
     * then corrupt-in (6), then the netdev's link (7)
     */
    uint8_t which = in_u8(in) % (NCM_FAULT_REPLUG_SEED + 2);
    uint16_t v = in_u16(in);

    if (!ncm_host_device_present()) {
        return;
    }
    f->faults_set = true;
    if (which < NCM_FAULT_REPLUG_SEED) {
        /* replugging every few ms would leave nothing else to fuzz */
        if (which == NCM_FAULT_REPLUG_EVERY_MS && v && v < 50) {
            v = 50;
        }
        ncm_host_fault_set(which, v);
    } else if (which == NCM_FAULT_REPLUG_SEED) {
        ncm_host_fault_corrupt_in(v);
    } else {
        ncm_host_set_link(v & 1);
    }
    flush_events(f->qts);
}

static void op_wait(NcmFuzz *f, FuzzIn *in)
{
    wait_idle(f, in_u8(in) % MAX_WAIT_STEPS + 1);
}

/*
 * Enumerating the device afresh right after an operation that did the
 * same (OP_REENUMERATE, or OP_PLUG's replug, each with the same data
 * interface choice) leaves it as that one left it, a few ms of virtual
 * time later: nothing new is reached.  libFuzzer's repeated-byte
 * mutations make long runs of them (93 % of the committed corpus's
 * OP_REENUMERATEs, a quarter of the target's time): counted and skipped.
 * @how: 1 + the data choice, + 2 for a replug.
 */
static bool enumerated_again(NcmFuzz *f, unsigned how)
{
    if (f->fresh_before == how && dev_usable(f)) {
        ncm_fuzz_counters()->enumerate_repeats++;
        f->fresh = how;
        return true;
    }
    return false;
}

static void op_reenumerate(NcmFuzz *f, FuzzIn *in)
{
    bool data = in_u8(in) & 1;

    if (!enumerated_again(f, 1 + data)) {
        reenumerate(f, data);
        f->fresh = dev_usable(f) ? 1 + data : 0;
    }
}

/* usb-ncm-dl-migration-fuzz */

/* Bits of the first input byte: the state the device is saved in */
#define MIG_OUT_MID_NTB     (1 << 0)    /* OUT of a wMaxPacketSize multiple */
#define MIG_IN_PARTIAL      (1 << 1)    /* an IN NTB partly sent */
#define MIG_IN_PARKED       (1 << 2)    /* bulk IN TDs waiting for data */
#define MIG_FAULT_BUSY      (1 << 3)
#define MIG_FAULT_LINK      (1 << 4)
#define MIG_CRC             (1 << 5)    /* SET_CRC_MODE(1) */
#define MIG_MC_FILTERS      (1 << 6)    /* SET_ETHERNET_MULTICAST_FILTERS */
#define MIG_NTB32           (1 << 7)    /* SET_NTB_FORMAT(NTB32) */

static void mig_frames(NcmFuzz *f, unsigned n, uint32_t len)
{
    g_autofree uint8_t *buf = g_malloc0(len);
    unsigned i;

    memcpy(buf, "\x52\x54\x00\x12\x34\x56\x52\x54\x00\xaa\xbb\xcc", 12);
    stw_be_p(buf + 12, 0x88b5);
    for (i = 0; i < n; i++) {
        buf[14] = i;
        sock_frame(buf, len);
    }
    settle(f, 2);
}

static void mig_prepare(NcmFuzz *f, uint8_t state)
{
    static const uint8_t mc[4 * 6] = {
        0x01, 0x00, 0x5e, 0x00, 0x00, 0x01, 0x33, 0x33, 0x00, 0x00, 0x00,
        0x01, 0x01, 0x00, 0x5e, 0x7f, 0xff, 0xfa, 0x33, 0x33, 0xff, 0x12,
        0x34, 0x56,
    };
    FuzzIn none = { NULL, 0 };

    if (state & (MIG_NTB32 | MIG_CRC)) {
        /* the format and CRC mode change only at alternate setting 0 */
        set_interface(f, 0, IF_DATA);
        if (state & MIG_NTB32) {
            f->ntb32 = control(f, CLASS_OUT, NCM_SET_NTB_FORMAT,
                               NCM_NTB_FORMAT_SELECT_32, IF_CONTROL, NULL,
                               0) == QXHCI_CC_SUCCESS;
        }
        if (state & MIG_CRC) {
            f->crc = control(f, CLASS_OUT, NCM_SET_CRC_MODE, NCM_CRC_APPENDED,
                             IF_CONTROL, NULL, 0) ==
                     QXHCI_CC_SUCCESS;
        }
        set_interface(f, 1, IF_DATA);
    }
    if (state & MIG_MC_FILTERS) {
        control(f, CLASS_OUT, CDC_SET_ETHERNET_MULTICAST_FILTERS,
                sizeof(mc) / CDC_MC_ADDRESS_LEN, IF_CONTROL, (void *)mc,
                sizeof(mc));
    }
    if (state & MIG_IN_PARTIAL) {
        /* frames in, then an IN TD shorter than the NTB they make */
        mig_frames(f, 6, 1400);
        submit(f, f->ep_in.address, NULL, f->mps);
        wait_idle(f, 8);
    }
    if (state & MIG_IN_PARKED) {
        unsigned i;

        if (dev_usable(f)) {
            qxhci_hold_doorbells(f->d, true);
            for (i = 0; i < 4; i++) {
                submit(f, f->ep_in.address, NULL, 65536);
            }
            qxhci_hold_doorbells(f->d, false);
            if (f->d->ep_mask & (1u << ep_dci(f->ep_in.address))) {
                qxhci_ring_doorbell(f->d, f->ep_in.address);
            }
        }
        submit(f, f->ep_notify.address, NULL, 16);
        settle(f, 2);
    }
    if (state & MIG_OUT_MID_NTB) {
        g_autoptr(GByteArray) ntb = build_ntb(f, &none);

        /* an NTB ending on a packet boundary and no ZLP after it */
        pad_zero(ntb, ROUND_UP(ntb->len, f->mps));
        submit(f, f->ep_out.address, ntb->data, ntb->len);
        settle(f, 2);
    }
    if (state & (MIG_FAULT_BUSY | MIG_FAULT_LINK)) {
        f->faults_set = true;
    }
    if (state & MIG_FAULT_BUSY) {
        ncm_host_fault_set(NCM_FAULT_BUSY_MS, 1000);
    }
    if (state & MIG_FAULT_LINK) {
        ncm_host_fault_set(NCM_FAULT_LINK_DOWN_MS, 1000);
    }
    flush_events(f->qts);
}

/*
 * Mutations, 4 bytes each: kind, offset (16 bits, modulo the stream's
 * length), value.  Offsets below @keep are left alone.
 */
static size_t mig_mutate(uint8_t *s, size_t len, FuzzIn *in, size_t keep)
{
    static const uint32_t words[8] = {
        0, 1, 0xff, 0x100, 0x7fffffff, 0x80000000, 0xffffffff, 0x10000,
    };

    while (in->len && len > keep) {
        uint8_t kind = in_u8(in);
        uint16_t arg = in_u16(in);
        uint8_t v = in_u8(in);
        size_t off = keep + arg % (len - keep);

        switch (kind % 6) {
        case 0:
            s[off] ^= v ? v : 0xff;
            break;
        case 1:
            s[off] = v;
            break;
        case 2:
            /* a stream that ends early */
            len = off;
            break;
        case 3:
            if (off + 4 <= len) {
                stl_be_p(s + off, v & 0x80 ? words[v & 7] : v);
            }
            break;
        case 4:
            s[len - 1 - (arg % (len - keep))] ^= v ? v : 0xff;
            break;
        default:
            if (off + 2 <= len) {
                stw_be_p(s + off, v & 0x80 ? 0xffff : v);
            }
            break;
        }
    }
    return len;
}

/*
 * @what's stream @saved and the stream its destination saves again,
 * @again, must be the same: else the input aborts, naming the first
 * byte that differs.
 */
static void migrate_compare(const char *what, GByteArray *saved,
                            GByteArray *again)
{
    guint i;

    if (again->len == saved->len &&
        !memcmp(again->data, saved->data, saved->len)) {
        return;
    }
    for (i = 0; i < MIN(again->len, saved->len); i++) {
        if (again->data[i] != saved->data[i]) {
            break;
        }
    }
    fprintf(stderr, "usb-ncm-dl-fuzz: migrate here: the destination's %s "
            "saves another stream (%u bytes, was %u; first difference at "
            "byte %u: 0x%02x, was 0x%02x)\n", what, again->len, saved->len,
            i, i < again->len ? again->data[i] : 0,
            i < saved->len ? saved->data[i] : 0);
    abort();
}

/* A stream the source saved unmodified must load: else a finding */
static void migrate_load_or_abort(const char *what, NcmHostPiece piece,
                                  GByteArray *saved)
{
    int ret = ncm_host_load_saved(piece, saved);

    if (ret < 0) {
        /* QEMU's error_report() above names the field or the reason */
        fprintf(stderr, "usb-ncm-dl-fuzz: migrate here: the destination's "
                "%s (section %s) refused the %u bytes its source saved: "
                "%d (%s)\n", what, ncm_host_piece_name(piece), saved->len,
                ret, strerror(-ret));
        abort();
    }
}

static void migration_run(NcmFuzz *fp, FuzzIn *inp)
{
    NcmFuzz f = *fp;
    FuzzIn in = *inp;
    uint8_t state = in_u8(&in);
    g_autoptr(GByteArray) saved = NULL;
    g_autoptr(GByteArray) mutated = NULL;
    g_autoptr(GByteArray) usbdev = NULL;
    FuzzIn none = { NULL, 0 };
    size_t keep = 0, len;
    bool unmodified;
    uint8_t buf[NCM_NTB_PARAMETERS_LEN];
    unsigned i;

    mig_prepare(&f, state);
    saved = ncm_host_save(NCM_HOST_DEVICE);
    if (getenv("USB_NCM_FUZZ_KEEP_USBDEVICE")) {
        /* the USBDevice part comes first: leave it as it was */
        usbdev = ncm_host_save(NCM_HOST_USB_DEVICE);
        keep = usbdev->len;
    }

    /*
     * A destination's device has no transfers in flight and was reset
     * with the machine: take every TD back from the device first.
     */
    if (f.d && !f.dead) {
        uint8_t eps[3] = { f.ep_in.address, f.ep_out.address,
                           f.ep_notify.address };

        for (i = 0; i < ARRAY_SIZE(eps); i++) {
            if (qxhci_ring_base(f.d, eps[i], NULL)) {
                qxhci_endpoint_cancel(f.d, eps[i]);
            }
        }
    }
    xfers_reap(&f);
    ncm_host_reset(NCM_HOST_DEVICE);
    flush_events(f.qts);

    mutated = g_byte_array_sized_new(saved->len);
    g_byte_array_append(mutated, saved->data, saved->len);
    len = mig_mutate(mutated->data, mutated->len, &in, keep);
    /*
     * No mutation, or mutations that cancel out (an input that ends
     * here, a byte set to its own value): the stream is the one the
     * source produced, which its destination must take, and whose load
     * must save the same stream again (migrate_here()'s rule).
     */
    unmodified = len == saved->len && !memcmp(mutated->data, saved->data,
                                              len);
    if (unmodified) {
        g_autoptr(GByteArray) again = NULL;

        migrate_load_or_abort(NCM_MODEL, NCM_HOST_DEVICE, saved);
        again = ncm_host_save(NCM_HOST_DEVICE);
        migrate_compare(NCM_MODEL, saved, again);
        ncm_fuzz_counters()->mig_unmodified++;
    } else if (ncm_host_load(NCM_HOST_DEVICE, mutated->data, len) < 0) {
        /*
         * A mutated stream refused, as it may be.  The device now holds
         * part of the stream: put the saved state back before it is
         * unplugged, as nothing else would run on it.
         */
        ncm_host_load_saved(NCM_HOST_DEVICE, saved);
        goto out;
    }

    /*
     * accepted: the guest goes on using the device, whose fields the
     * stream set may include some that no reset restores
     */
    f.device_dirty = true;
    settle(&f, 1);
    control(&f, CLASS_IN, NCM_GET_NTB_PARAMETERS, 0, IF_CONTROL, buf,
            sizeof(buf));
    control(&f, USB_DIR_IN, USB_REQ_GET_STATUS, 0, 0, buf, 2);
    if (dev_usable(&f)) {
        qxhci_hold_doorbells(f.d, true);
        for (i = 0; i < 4; i++) {
            submit(&f, f.ep_in.address, NULL, 65536);
        }
        qxhci_hold_doorbells(f.d, false);
        if (f.d->ep_mask & (1u << ep_dci(f.ep_in.address))) {
            qxhci_ring_doorbell(f.d, f.ep_in.address);
        }
    }
    if (dev_usable(&f)) {
        g_autoptr(GByteArray) ntb = build_ntb(&f, &none);

        submit(&f, f.ep_out.address, ntb->data, ntb->len);
        if (ntb->len % f.mps == 0) {
            submit(&f, f.ep_out.address, NULL, 0);
        }
    }
    submit(&f, f.ep_notify.address, NULL, 16);
    mig_frames(&f, 3, 600);
    qtest_clock_step(f.qts, 300 * 1000 * 1000);
    ncm_after_step(f.qts, NULL);
    wait_idle(&f, MAX_WAIT_STEPS);
    ncm_host_fault_set(NCM_FAULT_BUSY_MS, 0);
    ncm_host_fault_set(NCM_FAULT_LINK_DOWN_MS, 0);
    mig_frames(&f, 2, 100);
    wait_idle(&f, 8);
out:
    *fp = f;
}

/* Operations on endpoints the input configures itself: xHCI streams */

/* A transfer ring of STREAM_RING_TRBS TRBs, the last a Link TRB to its start */
static uint64_t raw_ring_new(NcmFuzz *f, bool ccs)
{
    uint64_t ring = guest_alloc(&f->alloc, STREAM_RING_TRBS * TRB_SIZE);
    uint8_t trb[TRB_SIZE] = { 0 };

    qtest_memset(f->qts, ring, 0, STREAM_RING_TRBS * TRB_SIZE);
    stq_le_p(trb, ring);
    stl_le_p(trb + 12, TRB_TYPE_LINK << 10 | TRB_LINK_TC | (ccs ? 0 : TRB_C));
    qtest_memwrite(f->qts, ring + (STREAM_RING_TRBS - 1) * TRB_SIZE, trb,
                   TRB_SIZE);
    return ring;
}

/* Put one TRB on ring @r of DCI @dci; the Link TRB is handed over on wrap */
static void raw_ring_put(NcmFuzz *f, unsigned dci, unsigned r, uint64_t ptr,
                         uint32_t status, uint32_t control)
{
    uint64_t ring = f->stream_ring[dci][r];
    unsigned *enq = &f->stream_enq[dci][r];
    bool *ccs = &f->stream_ccs[dci][r];
    uint8_t trb[TRB_SIZE];

    stq_le_p(trb, ptr);
    stl_le_p(trb + 8, status);
    stl_le_p(trb + 12, control | (*ccs ? TRB_C : 0));
    qtest_memwrite(f->qts, ring + *enq * TRB_SIZE, trb, TRB_SIZE);
    if (++*enq == STREAM_RING_TRBS - 1) {
        stq_le_p(trb, ring);
        stl_le_p(trb + 8, 0);
        stl_le_p(trb + 12, TRB_TYPE_LINK << 10 | TRB_LINK_TC |
                 (*ccs ? TRB_C : 0));
        qtest_memwrite(f->qts, ring + *enq * TRB_SIZE, trb, TRB_SIZE);
        *enq = 0;
        *ccs = !*ccs;
    }
}

/* The DCI an operation addresses: one of the device's three, or any */
static unsigned pick_dci(NcmFuzz *f, uint8_t sel, FuzzIn *in)
{
    switch (sel % 4) {
    case 0:
        return ep_dci(f->ep_out.address);
    case 1:
        return ep_dci(f->ep_in.address);
    case 2:
        return ep_dci(f->ep_notify.address);
    default:
        return in_u8(in) % 30 + 2;
    }
}

/*
 * Configure Endpoint (or Evaluate Context) with an endpoint context whose
 * every field the input gives (xHCI 1.2, 6.2.3): EP State, Mult,
 * MaxPStreams, LSA, Interval, Max ESIT Payload, CErr, EP Type, HID, Max
 * Burst, Max Packet Size, Average TRB Length, and a dequeue pointer that
 * is a ring of its own or, with MaxPStreams, a stream context array
 * whose first entries point at rings of their own (SCT and DCS from the
 * input).  Bit 3 of the selector keeps EP Type, Max Packet Size and
 * CErr those of the descriptor, so that the endpoint matches the
 * device's and its transfers reach it.
 */
static void op_ep_ctx(NcmFuzz *f, FuzzIn *in)
{
    uint8_t sel = in_u8(in);
    unsigned dci = pick_dci(f, sel, in);
    uint32_t dw0 = in_u16(in) | (uint32_t)in_u16(in) << 16;
    uint32_t dw1 = in_u16(in) | (uint32_t)in_u16(in) << 16;
    uint32_t dw4 = in_u16(in) | (uint32_t)in_u16(in) << 16;
    uint8_t sflags = in_u8(in);
    unsigned cs, i, n = 0, pstreams, entries;
    g_autofree uint8_t *ctx = NULL;
    uint8_t *slot, *ep;
    uint64_t deq;
    uint32_t ctl;
    bool ccs = !(sflags & 0x08);
    int cc;

    if (!f->d || f->dead) {
        return;
    }
    if (sel & 0x08) {
        const QXhciEndpoint *e = dci == ep_dci(f->ep_in.address) ?
                                 &f->ep_in : dci == ep_dci(f->ep_out.address) ?
                                 &f->ep_out : &f->ep_notify;
        unsigned type = (e->attributes & 3) | ((e->address & 0x80) ? 4 : 0);

        dw1 = (dw1 & 0x0000ff80) | 3 << 1 | type << 3 |
              (uint32_t)(e->max_packet & 0x7ff) << 16;
        dw0 &= ~7u;
    }
    if (sel & 0x10) {
        /* streams: MaxPStreams 1..15, linear stream array */
        dw0 = (dw0 & ~(0x1fu << 10)) | (1 + (dw0 >> 10) % 15) << 10 | 1 << 15;
    }
    pstreams = (dw0 >> 10) & 0x1f;
    for (i = 0; i < STREAM_RINGS; i++) {
        f->stream_ring[dci][i] = 0;
    }
    if (pstreams) {
        uint8_t sctx[TRB_SIZE];
        unsigned sct = sflags & 0x80 ? (sflags >> 4) & 7 : 1;

        entries = MIN(2u << MIN(pstreams, 15), STREAM_CTX_MAX);
        deq = guest_alloc(&f->alloc, entries * TRB_SIZE);
        qtest_memset(f->qts, deq, 0, entries * TRB_SIZE);
        n = MIN(entries, STREAM_RINGS);
        for (i = 1; i < n; i++) {
            f->stream_ring[dci][i] = raw_ring_new(f, ccs);
            f->stream_enq[dci][i] = 0;
            f->stream_ccs[dci][i] = ccs;
            memset(sctx, 0, sizeof(sctx));
            stq_le_p(sctx, f->stream_ring[dci][i] | sct << 1 | ccs);
            qtest_memwrite(f->qts, deq + i * TRB_SIZE, sctx, TRB_SIZE);
        }
        f->stream_ctx[dci] = deq;
    } else {
        f->stream_ring[dci][0] = raw_ring_new(f, ccs);
        f->stream_enq[dci][0] = 0;
        f->stream_ccs[dci][0] = ccs;
        f->stream_ctx[dci] = 0;
        deq = f->stream_ring[dci][0] | ccs;
    }
    f->stream_n[dci] = n;
    f->raw_dcis |= 1u << dci;

    cs = qxhci_ctx_size(f->x);
    ctx = g_malloc0(33 * cs);
    qtest_memread(f->qts, f->d->out_ctx, ctx + cs, 32 * cs);
    stl_le_p(ctx, sel & 0x20 ? 1u << dci : 0);
    stl_le_p(ctx + 4, 1u | 1u << dci);
    slot = ctx + cs;
    if (((ldl_le_p(slot) >> 27) & 0x1f) < dci) {
        stl_le_p(slot, (ldl_le_p(slot) & 0x07ffffff) | dci << 27);
    }
    ep = ctx + (dci + 1) * cs;
    stl_le_p(ep, dw0);
    stl_le_p(ep + 4, dw1);
    stq_le_p(ep + 8, deq);
    stl_le_p(ep + 16, dw4);
    qtest_memwrite(f->qts, f->d->in_ctx, ctx, 33 * cs);
    ctl = (uint32_t)(sel & 0x04 ? 13 : 12) << 10 |
          (uint32_t)f->d->slot << 24;
    cc = qxhci_cmd_raw(f->x, f->d->in_ctx, 0, ctl, NULL);
    if (cc == QXHCI_CC_TIMEOUT) {
        f->dead = true;
        return;
    }
    settle(f, 1);
}

/*
 * Up to four TDs on a ring of an endpoint the input configured (a stream
 * of it, or its ring of its own), then its doorbell with that stream ID
 * or (bit 6) another, once or (bit 4) twice: Normal TRBs of any length,
 * OUT ones with the input's bytes or (bit 7) a well-formed NTB, their
 * completion sent to interrupter 0..3 (bits 2-3).
 */
static void op_stream_td(NcmFuzz *f, FuzzIn *in)
{
    uint8_t sel = in_u8(in), sid = in_u8(in), flags = in_u8(in);
    uint32_t len = in_u16(in), stream, status;
    unsigned n = flags % 4 + 1, dci = 0, r, i, k;
    g_autoptr(GByteArray) ntb = NULL;
    uint64_t buf;
    bool out;

    if (!dev_usable(f) || !f->raw_dcis) {
        return;
    }
    /* the (sel % count)-th endpoint the input configured */
    k = sel % ctpop32(f->raw_dcis);
    for (i = 0; i < 32; i++) {
        if ((f->raw_dcis & (1u << i)) && !k--) {
            dci = i;
            break;
        }
    }
    r = f->stream_n[dci] ? 1 + sid % (f->stream_n[dci] - 1) : 0;
    if (!f->stream_ring[dci][r]) {
        return;
    }
    out = !(dci & 1);
    if (out && (flags & 0x80)) {
        ntb = build_ntb(f, in);
        len = ntb->len;
    }
    len = MIN(len, 65536);
    buf = guest_alloc(&f->alloc, MAX(len, 1));
    if (ntb) {
        qtest_memwrite(f->qts, buf, ntb->data, len);
    } else if (out && len) {
        g_autofree uint8_t *data = g_malloc(len);

        in_fill(in, data, len, 256);
        qtest_memwrite(f->qts, buf, data, len);
    }
    /* TRB Transfer Length is 17 bits: 64 KiB fits */
    status = len | (uint32_t)((flags >> 2) & 3) << 22;
    for (i = 0; i < n; i++) {
        raw_ring_put(f, dci, r, buf, status,
                     TRB_TYPE_NORMAL << 10 | TRB_IOC | (out ? 0 : TRB_ISP));
    }
    stream = flags & 0x40 ? in_u16(in) : r;
    qxhci_reg_write(f->x, QXHCI_REGS_DB, 4 * f->d->slot, dci | stream << 16);
    if (flags & 0x10) {
        qxhci_reg_write(f->x, QXHCI_REGS_DB, 4 * f->d->slot,
                        dci | stream << 16);
    }
    settle(f, 1);
}

/* A doorbell write of any value, to our slot, the command ring or any */
static void op_doorbell(NcmFuzz *f, FuzzIn *in)
{
    uint8_t sel = in_u8(in);
    uint32_t v = in_u16(in) | (uint32_t)in_u16(in) << 16;
    unsigned slot = sel & 0x80 ? sel % 8 : f->d ? f->d->slot : 1;

    if (f->dead) {
        return;
    }
    qxhci_reg_write(f->x, QXHCI_REGS_DB, 4 * slot, v);
    settle(f, 1);
}

/*
 * PORTSC of the device's port (or any): a raw value, or its current one
 * with one of Port Reset, Warm Port Reset, a link state write (LWS),
 * Port Enabled cleared, Port Power toggled, the change bits cleared or
 * the wake bits set
 */
static void op_portsc(NcmFuzz *f, FuzzIn *in)
{
    /* RW1C change bits and PED, which a read-modify-write must not echo */
    static const uint32_t rw1c = 0x00fe0002;
    uint8_t sel = in_u8(in), arg = in_u8(in);
    int port = f->d ? f->d->port : 1;
    uint32_t v;

    if (f->dead) {
        return;
    }
    if (sel & 0x80) {
        port = arg % qxhci_max_ports(f->x) + 1;
    }
    v = qxhci_reg_read(f->x, QXHCI_REGS_OP, XHCI_PORTSC(port)) & ~rw1c;
    switch (sel % 8) {
    case 0:
        v = in_u16(in) | (uint32_t)in_u16(in) << 16;
        break;
    case 1:
        v |= 1u << 4;                           /* PR */
        break;
    case 2:
        v |= 1u << 31;                          /* WPR */
        break;
    case 3:
        v = (v & ~(0xfu << 5)) | 1u << 16 | (uint32_t)(arg & 0xf) << 5;
        break;
    case 4:
        v |= 1u << 1;                           /* PED: disable */
        break;
    case 5:
        v ^= 1u << 9;                           /* PP */
        break;
    case 6:
        v |= rw1c & ~2u;                        /* clear the changes */
        break;
    default:
        v |= (uint32_t)(arg & 7) << 25;         /* WCE, WDE, WOE */
        break;
    }
    qxhci_reg_write(f->x, QXHCI_REGS_OP, XHCI_PORTSC(port), v);
    settle(f, 2);
}

/*
 * Interrupters: an event ring of its own for interrupter 1..3 (one
 * segment of 16..64 TRBs), any value into any of their registers, and
 * interrupter 0's IMAN and IMOD (its event ring is the driver's)
 */
static void op_interrupter(NcmFuzz *f, FuzzIn *in)
{
    uint8_t sel = in_u8(in);
    uint32_t v = in_u16(in) | (uint32_t)in_u16(in) << 16;
    unsigned ir = 1 + sel % 3, base;

    if (f->dead) {
        return;
    }
    switch ((sel >> 2) % 4) {
    case 0: {
        unsigned trbs = 16 << (v % 3);
        uint64_t erst = guest_alloc(&f->alloc, 64);
        uint64_t ring = guest_alloc(&f->alloc, trbs * TRB_SIZE);
        uint8_t seg[16] = { 0 };

        qtest_memset(f->qts, ring, 0, trbs * TRB_SIZE);
        stq_le_p(seg, ring);
        stl_le_p(seg + 8, trbs);
        qtest_memwrite(f->qts, erst, seg, sizeof(seg));
        base = XHCI_IR(ir);
        qxhci_reg_write(f->x, QXHCI_REGS_RT, base + XHCI_IR_ERSTSZ, 1);
        qxhci_reg_write(f->x, QXHCI_REGS_RT, base + XHCI_IR_ERDP_HI,
                        ring >> 32);
        qxhci_reg_write(f->x, QXHCI_REGS_RT, base + XHCI_IR_ERDP_LO, ring);
        qxhci_reg_write(f->x, QXHCI_REGS_RT, base + XHCI_IR_ERSTBA_HI,
                        erst >> 32);
        qxhci_reg_write(f->x, QXHCI_REGS_RT, base + XHCI_IR_ERSTBA_LO, erst);
        qxhci_reg_write(f->x, QXHCI_REGS_RT, base + XHCI_IR_IMAN,
                        (v >> 8) & 3);
        f->ir_ring[ir] = ring;
        break;
    }
    case 1:
        qxhci_reg_write(f->x, QXHCI_REGS_RT, XHCI_IR(ir) + (sel >> 4) * 4, v);
        break;
    case 2:
        qxhci_reg_write(f->x, QXHCI_REGS_RT, XHCI_IR(0) + XHCI_IR_IMOD, v);
        break;
    default:
        /* IP (write 1 to clear) and IE, which the driver's polling ignores */
        qxhci_reg_write(f->x, QXHCI_REGS_RT, XHCI_IR(0) + XHCI_IR_IMAN, v & 3);
        break;
    }
    settle(f, 1);
}

/*
 * "Migrate here", in the process: save the xHCI's state and the
 * device's, reset both as a destination's are (a machine reset), load
 * the streams in the order a migration stream has them (the controller
 * was created first) and go on.  With @in_flight the TDs the device or
 * the controller hold stay where they are: the destination's controller
 * runs them again from its endpoint contexts, as after a migration with
 * transfers half done (the reset cancels the source's packets, which a
 * real source takes with it).  Without it the host takes every TD back
 * first (Stop Endpoint), as usb-ncm-dl-fuzz's migrate did before.
 *
 * Only a device that can be reached is migrated.  A stream refused is a
 * finding: the input aborts; so is a destination that saves again
 * another stream than its source, for the controller or the device.
 * Nothing may differ here: no virtual time passes between the save, the
 * load and the save again, so the timers in the streams
 * (VMSTATE_TIMER_PTR: xhci-core's mfwrap_timer, the device's) save the
 * same expiry; the controller's endpoint kick timers that its post_load
 * arms are not in its stream.  The PCI function's part of the xHCI's
 * section (config space, MSI-X) is neither reset nor loaded: a PCI
 * reset would unmap BAR 0 and rebuild the memory topology twice per
 * migration, the cost the harness avoids elsewhere (ncm_fuzz_begin()),
 * and nothing of the controller's or the device's load depends on it.
 */
static void migrate_here(NcmFuzz *f, bool in_flight)
{
    g_autoptr(GByteArray) saved = NULL;
    g_autoptr(GByteArray) again = NULL;
    g_autoptr(GByteArray) xsaved = NULL;
    g_autoptr(GByteArray) xagain = NULL;
    unsigned i;

    if (!ncm_host_piece_present(NCM_HOST_DEVICE) ||
        !ncm_host_piece_present(NCM_HOST_XHCI) || !dev_usable(f)) {
        ncm_fuzz_counters()->migrate_skipped++;
        return;
    }
    for (i = 0; i < 4 && !in_flight; i++) {
        uint8_t ep = i == 0 ? 0 : i == 1 ? f->ep_in.address :
                     i == 2 ? f->ep_out.address : f->ep_notify.address;

        if (!(f->raw_dcis & (1u << ep_dci(ep))) &&
            qxhci_ring_base(f->d, ep, NULL) &&
            qxhci_endpoint_cancel(f->d, ep) == QXHCI_CC_TIMEOUT) {
            f->dead = true;
            return;
        }
    }
    /* what completed until now is the oracle's; not what follows */
    xfers_reap(f);
    f->oracle_in = false;
    f->data_defaults = false;
    ncm_events(f->qts);
    xsaved = ncm_host_save(NCM_HOST_XHCI);
    saved = ncm_host_save(NCM_HOST_DEVICE);
    ncm_host_reset(NCM_HOST_XHCI);
    ncm_host_reset(NCM_HOST_DEVICE);
    ncm_events(f->qts);
    migrate_load_or_abort("xHCI", NCM_HOST_XHCI, xsaved);
    migrate_load_or_abort(NCM_MODEL, NCM_HOST_DEVICE, saved);
    xagain = ncm_host_save(NCM_HOST_XHCI);
    again = ncm_host_save(NCM_HOST_DEVICE);
    migrate_compare("xHCI", xsaved, xagain);
    migrate_compare(NCM_MODEL, saved, again);
    ncm_fuzz_counters()->migrate_runs++;
    ncm_fuzz_counters()->migrate_in_flight += in_flight;
    ncm_fuzz_counters()->migrate_bytes += xsaved->len + saved->len;
    settle(f, 1);
}

/*
 * Bit 0 of the operation's byte: the TDs in flight stay (migrate_here).
 * A migration right after another saves what the first one's
 * destination saved and was compared, one clock step later: nothing new
 * is checked, and the committed corpus is full of such runs (88 % of
 * its migrations, a third of the target's time), which libFuzzer's
 * repeated-byte mutations make.  It is counted and skipped; a clock
 * step or any other operation between two migrations makes the second
 * one run.
 */
static void op_migrate(NcmFuzz *f, FuzzIn *in)
{
    bool in_flight = in_u8(in) & 1;

    if (f->prev_op == OP_MIGRATE) {
        ncm_fuzz_counters()->migrate_repeats++;
        return;
    }
    migrate_here(f, in_flight);
}

/*
 * Requests and migrations while a bulk transfer is half done
 * (OP_MID_XFER): one OUT NTB sent a packet per TD, or IN NTBs read a
 * packet per TD, stopped after k of its n packets (any k, chosen by the
 * input, at up to MID_MAX_STOPS boundaries) for a class request, a
 * standard request, a migration or a clock step.  The device sees a TD
 * of wMaxPacketSize as a packet that does not end the transfer.
 */
#define MID_MAX_STOPS       4
#define MID_MAX_PACKETS     64
#define MID_WAIT_STEPS      8
/* USB 2.0 9.4 table 9-6: the feature selector CLEAR_FEATURE uses here */
#define USB_FEATURE_ENDPOINT_HALT   0
/* USB 2.0 9.6.1: a device descriptor's bLength */
#define USB_DEVICE_DESC_LEN         18

static int set_alt(NcmFuzz *f, uint8_t v);
static void set_config(NcmFuzz *f, uint8_t v);

/*
 * The standard requests a device sees from a host while its data flows.
 * SET_ADDRESS is not among them: behind an xHCI the controller sends it
 * (Address Device), once per enumeration, and a driver never does.
 */
static void mid_standard(NcmFuzz *f, FuzzIn *in)
{
    uint8_t sel = in_u8(in), buf[USB_DEVICE_DESC_LEN];
    uint8_t ep = sel & 0x80 ? f->ep_out.address : f->ep_in.address;
    uint8_t iface = sel & 0x80 ? IF_DATA : IF_CONTROL;

    /* bits 0-3: the request; bits 4 and 7: its variants */
    switch ((sel & 0x0f) % 9) {
    case 0:
        control(f, DeviceRequest >> 8, USB_REQ_GET_STATUS, 0, 0, buf, 2);
        break;
    case 1:
        control(f, InterfaceRequest >> 8, USB_REQ_GET_STATUS, 0, iface, buf,
                2);
        break;
    case 2:
        control(f, EndpointRequest >> 8, USB_REQ_GET_STATUS, 0, ep, buf, 2);
        break;
    case 3:
        control(f, EndpointOutRequest >> 8, USB_REQ_CLEAR_FEATURE,
                USB_FEATURE_ENDPOINT_HALT, ep, NULL, 0);
        break;
    case 4:
        /* SET_INTERFACE(data, 0), the endpoints dropped (bit 3: kept) */
        set_alt(f, (sel >> 1) & 0x8);
        break;
    case 5:
        /* SET_INTERFACE(data, 1), the endpoints added first (bit 3: not) */
        set_alt(f, 1 | ((sel >> 1) & 0x8));
        break;
    case 6:
        /* SET_CONFIGURATION(1) or (0), deconfigured first by bit 7 */
        set_config(f, (sel & 0x80) | ((sel >> 4) & 1));
        break;
    case 7:
        control(f, sel & 0x80 ? InterfaceRequest >> 8 : DeviceRequest >> 8,
                sel & 0x80 ? USB_REQ_GET_INTERFACE :
                USB_REQ_GET_CONFIGURATION, 0, IF_DATA, buf, 1);
        break;
    default:
        control(f, DeviceRequest >> 8, USB_REQ_GET_DESCRIPTOR,
                USB_DT_DEVICE << 8, 0, buf, sizeof(buf));
        break;
    }
}

/*
 * Any class request of the function with the length a host gives it
 * (bit 7 of the second byte: the input's), the value a byte of the input
 */
static void mid_class(NcmFuzz *f, FuzzIn *in)
{
    uint8_t sel = in_u8(in), how = in_u8(in);
    unsigned i = sel % ARRAY_SIZE(ncm_class_reqs);
    uint16_t len = how & 0x80 ? how & 0x3f : ncm_class_reqs[i].len;
    uint8_t buf[64] = { 0 };

    if (!ncm_class_reqs[i].in) {
        in_fill(in, buf, len, len);
        if (ncm_class_renegotiates(ncm_class_reqs[i].req)) {
            /* as run_ops() does before such an OP_CLASS */
            xfers_reap(f);
            f->oracle_in = false;
        }
    }
    class_request(f, ncm_class_reqs[i].req, ncm_class_reqs[i].in,
                  in_u8(in), buf, len);
}

/*
 * The last thing done at the packet boundary a transfer in pieces is
 * stopped at (mid_run() starts each boundary at MID_NOTHING)
 */
typedef enum MidLast {
    MID_NOTHING,
    MID_OTHER,              /* a request or a clock step */
    MID_MIGRATED,           /* a migration, its TDs cancelled first */
    MID_MIGRATED_IN_FLIGHT, /* a migration with its TDs in flight */
} MidLast;

/*
 * What happens at a packet boundary.  A migration right after another at
 * the same boundary saves what the first one's destination was checked
 * to have, one clock step later, unless it cancels the TDs the first one
 * left in flight: as for OP_MIGRATE, it is counted and skipped.  Inputs
 * stop at one boundary several times in a row (the input's packet count
 * 0): a replay of the committed corpus skipped 1,032 such repeats beside
 * the 5,606 migrations it ran.
 */
static void mid_action(NcmFuzz *f, FuzzIn *in, MidLast *last)
{
    uint8_t a = in_u8(in);
    bool in_flight = !(a & 0x80);

    ncm_fuzz_counters()->mid_stops++;
    switch (a % 4) {
    case 0:
        if (*last == MID_MIGRATED ||
            (*last == MID_MIGRATED_IN_FLIGHT && in_flight)) {
            ncm_fuzz_counters()->mid_repeats++;
            return;
        }
        migrate_here(f, in_flight);
        *last = in_flight ? MID_MIGRATED_IN_FLIGHT : MID_MIGRATED;
        return;
    case 1:
        mid_class(f, in);
        break;
    case 2:
        mid_standard(f, in);
        break;
    default:
        /* time passes: the IN coalescing timer, notifications */
        qtest_clock_step(f->qts, ((int64_t)(a >> 2) + 1) * 100000);
        ncm_after_step(f->qts, NULL);
        qxhci_poll(f->x);
        break;
    }
    *last = MID_OTHER;
}

/* One packet's TD, waited for a while (left in flight if not done) */
static void mid_packet(NcmFuzz *f, uint8_t ep, const uint8_t *data,
                       uint32_t len)
{
    QXhciTransfer *t;
    int i;

    if (!ep_usable(f, ep, 3)) {
        return;
    }
    t = qxhci_submit(f->d, ep, data, len);
    g_ptr_array_add(f->xfers, t);
    qxhci_poll(f->x);
    for (i = 0; i < MID_WAIT_STEPS && !t->done && !f->d->gone; i++) {
        qxhci_step(f->x);
    }
}

/*
 * @n packets of a transfer in pieces: before each of the stops, the
 * input says how many packets go first (0: another stop at the same
 * boundary), then what happens there; the rest goes after the last.
 */
static void mid_run(NcmFuzz *f, FuzzIn *in, uint8_t ep, const uint8_t *data,
                    uint32_t len, unsigned n, unsigned stops)
{
    unsigned pos = 0, s, k;
    MidLast last = MID_NOTHING;

    for (s = 0; s <= stops; s++) {
        unsigned upto = s == stops ? n : pos + in_u8(in) % (n - pos + 1);

        if (upto > pos) {
            last = MID_NOTHING;
        }
        for (k = pos; k < upto && dev_usable(f); k++) {
            uint32_t off = k * f->mps;

            /* OUT: the bytes of packet k; IN: one wMaxPacketSize each */
            mid_packet(f, ep, data ? data + off : NULL,
                       data ? MIN(f->mps, len - MIN(off, len)) : f->mps);
        }
        pos = upto;
        if (s < stops && dev_usable(f)) {
            mid_action(f, in, &last);
        }
        xfers_reap(f);
    }
}

static void op_mid_xfer(NcmFuzz *f, FuzzIn *in)
{
    uint8_t sel = in_u8(in);
    unsigned stops = 1 + (sel >> 1) % MID_MAX_STOPS;

    if (!dev_usable(f)) {
        return;
    }
    ncm_fuzz_counters()->mid_xfers++;
    if (!(sel & 1)) {
        g_autoptr(GByteArray) ntb = build_ntb(f, in);
        unsigned n;

        /* bit 4: the NTB ends on a packet boundary, a ZLP after it */
        if (sel & 0x10) {
            pad_zero(ntb, MIN(ROUND_UP(ntb->len, f->mps),
                              MID_MAX_PACKETS * f->mps));
        }
        ntb->len = MIN(ntb->len, MID_MAX_PACKETS * f->mps);
        n = ntb->len / f->mps + 1;      /* the last short, or a ZLP */
        mid_run(f, in, f->ep_out.address, ntb->data, ntb->len, n, stops);
    } else {
        uint8_t count = in_u8(in) % 8 + 1;
        uint32_t flen = 60 + in_u16(in) % 1455;
        /* the NTB16 they make: NTH, NDP (a null entry last), datagrams */
        uint32_t total = NCM_NTH16_LEN + 8 + 4 * (count + 1);
        g_autofree uint8_t *frame = g_malloc0(flen);
        unsigned i;

        /* frames to the device's address, an IN NTB of several packets */
        memcpy(frame, "\x52\x54\x00\x12\x34\x56\x52\x54\x00\xaa\xbb\xcc",
               12);
        stw_be_p(frame + 12, 0x88b5);
        for (i = 0; i < count; i++) {
            frame[14] = i;
            sock_frame(frame, flen);
            total += ROUND_UP(flen, 4);
        }
        flush_events(f->qts);
        /*
         * As many packets as that NTB takes when nothing else is queued:
         * IN TDs an earlier operation left waiting take the first bytes,
         * and what these leave is the next operation's half-sent NTB
         */
        mid_run(f, in, f->ep_in.address, NULL, 0,
                MIN(total / f->mps + 1, MID_MAX_PACKETS), stops);
    }
}

/* Running one input: in a forked child, or in the process */

typedef void NcmFuzzFn(NcmFuzz *f, FuzzIn *in);

static NcmFuzz base;                /* the parent's enumerated device */
static bool base_ok;

/* Whatever a child left in the netdev socket, both ways */
static void sock_flush_both(void)
{
    uint8_t buf[4096];

    while (recv(sockfds[0], buf, sizeof(buf), MSG_DONTWAIT) > 0) {
        continue;
    }
    while (recv(sockfds[1], buf, sizeof(buf), MSG_DONTWAIT) > 0) {
        continue;
    }
}

typedef struct NcmChild {
    const char *zlp;
    bool data;
    NcmFuzzFn *fn;
    FuzzIn *in;
} NcmChild;

/* In the child: another firmware model needs the device plugged again */
static void ncm_child(void *opaque)
{
    NcmChild *c = opaque;
    bool ok = base_ok;

    if (ok && c->zlp != ncm_zlp) {
        ncm_host_device_del();
        settle(&base, 1);
        ncm_zlp = c->zlp;
        ncm_host_device_add(ncm_zlp);
        settle(&base, 1);
        reenumerate(&base, false);
        ok = dev_usable(&base) && base.config_len;
    }
    if (ok && (!c->data || ncm_data_on(&base))) {
        c->fn(&base, c->in);
    }
    netdev_reads_check();
}

/*
 * The fuzzers' clock steps skip the qtest protocol unless
 * FUZZ_SERIALIZE_QTEST is set (qtest_wrappers.c, patches/0038);
 * __real_qtest_clock_step() is the protocol's.  Once, before the first
 * input, a step each way must move the clock by what was asked, so that
 * a wrapper that does otherwise fails every fuzz run at its start (make
 * check-fuzz-device) instead of changing what the inputs do.
 */
static void ncm_check_clock_step(QTestState *s)
{
    static bool checked;
    int64_t before, direct, after;

    if (checked) {
        return;
    }
    checked = true;
    before = __real_qtest_clock_step(s, 1000);
    direct = qtest_clock_step(s, 1000);
    after = __real_qtest_clock_step(s, 1000);
    g_assert_cmpint(direct, ==, before + 1000);
    g_assert_cmpint(after, ==, direct + 1000);
}

/*
 * Run @fn on the device enumerated with firmware model @zlp (NULL: the
 * command line's), its data interface at alternate setting 1 with @data.
 * Forked (usb_ncm_dl_fork.c): the parent enumerates once and forks a
 * child per input, which replugs only for another firmware model.
 */
static void ncm_run(QTestState *s, const char *zlp, bool data, NcmFuzzFn *fn,
                    FuzzIn *in)
{
    NcmChild c = { zlp, data, fn, in };
    NcmFuzz f;

    ncm_check_clock_step(s);

    /* mapped here, before a child is forked, so that children share it */
    ncm_fuzz_counters();
    if (!ncm_fork_enabled()) {
        /* the firmware model (the last input's may differ) */
        if (zlp != ncm_zlp) {
            ncm_host_device_del();
            flush_events(s);
            ncm_zlp = zlp;
        }
        ncm_fuzz_begin(&f, s);
        if (ncm_enumerate(&f, data)) {
            fn(&f, in);
        }
        netdev_reads_check();
        ncm_fuzz_end(&f);
        return;
    }
    if (!base.qts) {
        ncm_zlp = NULL;
        ncm_fuzz_begin(&base, s);
        base_ok = ncm_enumerate(&base, false);
        flush_events(s);
        sock_flush_both();
    }
    ncm_fork_run(ncm_child, &c);
    sock_flush_both();
}

/*
 * The data interface has just taken alternate setting 1 with the
 * power-on defaults (NTB16, no CRC, the largest IN NTB): the oracle
 * follows the IN stream from here.
 */
static void oracle_start(NcmFuzz *f)
{
    uint8_t b[NCM_NTB_PARAMETERS_LEN];

    if (!f->oracle) {
        f->oracle = ncm_oracle_new();
    }
    ncm_oracle_reset(f->oracle);
    memset(b, 0, sizeof(b));
    if (control(f, CLASS_IN, NCM_GET_NTB_PARAMETERS, 0, IF_CONTROL, b,
                sizeof(b)) !=
        QXHCI_CC_SUCCESS) {
        return;
    }
    f->oracle_params = (NcmOracleParams) {
        .ntb32 = f->negotiated.ntb32,
        .crc = f->negotiated.crc,
        .in_max_size = f->negotiated.in_max_size ?: ldl_le_p(b + 4),
        .in_divisor = lduw_le_p(b + 8),
        .in_remainder = lduw_le_p(b + 10),
        .in_alignment = lduw_le_p(b + 12),
        .in_max_datagrams = f->negotiated.in_max_datagrams,
        .max_packet = f->ep_in.max_packet & 0x7ff,
    };
    f->oracle_in = true;
}

/*
 * Operations after which the oracle still knows what the IN stream is:
 * bulk transfers, frames, waiting, and requests that read (a control
 * request with a device-to-host data stage) or set what the NTBs'
 * layout does not depend on (filters, the network address); @in is
 * where the operation's bytes start.
 */
static bool oracle_follows(unsigned op, const FuzzIn *in)
{
    uint8_t b0 = in->len ? in->p[0] : 0;

    switch (op) {
    case OP_CONTROL:
        return b0 & 0x80;
    case OP_CLASS:
        return (b0 & 0x80) ||
               !ncm_class_renegotiates(
                   ncm_class_reqs[b0 % ARRAY_SIZE(ncm_class_reqs)].req);
    case OP_BULK_OUT:
    case OP_BULK_IN:
    case OP_INTR_IN:
    case OP_FRAME:
    case OP_CLOCK:
    case OP_WAIT:
        return true;
    default:
        return false;
    }
}

/*
 * An operation byte's operation.  The operations before OP_MID_XFER take
 * the byte modulo their number, as before it was added, so that the
 * committed corpus keeps its meaning; the ones added since take the
 * bytes above the last whole round of them (253-255).
 */
#define OP_FIRST_ROUNDS     (256 / OP_MID_XFER * OP_MID_XFER)

static unsigned op_of(uint8_t b)
{
    return b < OP_FIRST_ROUNDS ? b % OP_MID_XFER :
           OP_MID_XFER + (b - OP_FIRST_ROUNDS) % (OP__MAX - OP_MID_XFER);
}

/* The operations of usb-ncm-dl-fuzz, from the second input byte on */
static void run_ops(NcmFuzz *f, FuzzIn *in)
{
    static NcmFuzzFn *const ops[OP__MAX] = {
        [OP_CONTROL] = op_control,
        [OP_CLASS] = op_class,
        [OP_BULK_OUT] = op_bulk_out,
        [OP_BULK_IN] = op_bulk_in,
        [OP_INTR_IN] = op_intr_in,
        [OP_CANCEL] = op_cancel,
        [OP_XHCI_CMD] = op_xhci_cmd,
        [OP_CONTEXT_CMD] = op_context_cmd,
        [OP_SET_CONFIG] = op_set_config,
        [OP_SET_ALT] = op_set_alt,
        [OP_PORT] = op_port,
        [OP_PLUG] = op_plug,
        [OP_FRAME] = op_frame,
        [OP_CLOCK] = op_clock,
        [OP_FAULT] = op_fault,
        [OP_WAIT] = op_wait,
        [OP_REENUMERATE] = op_reenumerate,
        [OP_EP_CTX] = op_ep_ctx,
        [OP_STREAM_TD] = op_stream_td,
        [OP_DOORBELL] = op_doorbell,
        [OP_PORTSC] = op_portsc,
        [OP_INTERRUPTER] = op_interrupter,
        [OP_MIGRATE] = op_migrate,
        [OP_MID_XFER] = op_mid_xfer,
    };
    int n = 0;

    if (f->data_on) {
        oracle_start(f);
    }
    while (in->len && n++ < MAX_OPS && !f->dead) {
        unsigned op = op_of(in_u8(in));

        f->oracle_was_in = f->oracle_in;
        f->prev_op = f->op;
        f->op = op;
        f->fresh_before = f->fresh;
        f->fresh = 0;
        if (!oracle_follows(op, in)) {
            /* what completed until now is checked; nothing after it */
            xfers_reap(f);
            f->oracle_in = false;
            if (op != OP_SET_ALT && op != OP_CANCEL && op != OP_CLASS) {
                /* op_class() follows what is negotiated at setting 0 */
                f->data_defaults = false;
            }
        }
        ops[op](f, in);
        ncm_events(f->qts);
        if (f->x) {
            qxhci_poll(f->x);
        }
        xfers_reap(f);
    }
    if (!f->dead) {
        wait_idle(f, 4);
    }
}

static void usb_ncm_dl_fuzz(QTestState *s, const unsigned char *data,
                            size_t size)
{
    FuzzIn in = { data, size };
    uint8_t first = in_u8(&in);

    /*
     * byte 0 bit 6: the firmware model; bit 7: stop after
     * SET_CONFIGURATION, or go on to alternate setting 1
     */
    ncm_run(s, first & 0x40 ? ncm_zlp_auto : NULL, !(first & 0x80), run_ops,
            &in);
}

static void usb_ncm_dl_migration_fuzz(QTestState *s,
                                      const unsigned char *data,
                                      size_t size)
{
    FuzzIn in = { data, size };

    ncm_run(s, NULL, true, migration_run, &in);
}

/* Registration */

static GString *usb_ncm_dl_cmdline(FuzzTarget *t)
{
    const char *dirs = g_getenv("USB_NCM_QTEST_FIRMWARE");
    g_auto(GStrv) v = g_strsplit(dirs ? dirs :
                                 "/usr/share/seabios:/usr/share/qemu",
                                 ":", -1);
    GString *cmd = g_string_new(TARGET_NAME);
    int i;

    g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM, 0, sockfds), ==, 0);
    g_unix_set_fd_nonblocking(sockfds[0], true, NULL);
    /* the BIOS: Debian's QEMU source comes without firmware blobs */
    for (i = 0; v[i]; i++) {
        if (*v[i] && g_file_test(v[i], G_FILE_TEST_IS_DIR)) {
            g_string_append_printf(cmd, " -L %s", v[i]);
        }
    }
    g_string_append_printf(cmd,
                           " -machine pc,accel=qtest -m 128M -display none"
                           " -nodefaults"
                           " -netdev socket,id=" NCM_NETDEV ",fd=%d"
                           " -object usb-ncm-fault,id=" NCM_FAULT_ID
                           ",device=/machine/peripheral/" NCM_ID
                           " -device qemu-xhci,id=" NCM_XHCI_ID ",addr=04.0"
                           " -device " NCM_MODEL ",id=" NCM_ID
                           ",bus=" NCM_XHCI_ID ".0,netdev=" NCM_NETDEV
                           ",mac=" NCM_MAC "," NCM_PROPS " ",
                           sockfds[1]);
    return cmd;
}

static void register_usb_ncm_dl_fuzz_targets(void)
{
    fuzz_add_target(&(FuzzTarget){
        .name = "usb-ncm-dl-fuzz",
        .description = "Fuzz usb-ncm-dl behind qemu-xhci with guest "
                       "operations: control requests, bulk and interrupt "
                       "transfers, cancellations, xHCI commands and "
                       "contexts, resets, replug, netdev frames, clock "
                       "steps and usb-ncm-fault changes",
        .get_init_cmdline = usb_ncm_dl_cmdline,
        .fuzz = usb_ncm_dl_fuzz,
    });
    fuzz_add_target(&(FuzzTarget){
        .name = "usb-ncm-dl-migration-fuzz",
        .description = "Save usb-ncm-dl's VMState in a chosen state, "
                       "mutate it, load it and run transfers",
        .get_init_cmdline = usb_ncm_dl_cmdline,
        .fuzz = usb_ncm_dl_migration_fuzz,
    });
}

fuzz_target_init(register_usb_ncm_dl_fuzz_targets);
