/*
 * QTest fixture for the USB CDC-NCM adapters usb-ncm-dl and usb-ncm
 *
 * What every area file of tests/qtest/usb-ncm-dl-test shares: a QEMU with
 * qemu-xhci and the device on a socketpair netdev (ncm_start/ncm_stop),
 * enumeration and class requests, the socket peer (ncm_sock_*), an NTB
 * builder for OUT and a strict checker for IN (ncm_ntb_*, ncm_receive),
 * x-stats marks and deltas, fault setters, and case registration
 * (ncm_add_case).  Everything it exports is ncm_*, Ncm* or NCM_*.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef USB_NCM_DL_FIXTURE_H
#define USB_NCM_DL_FIXTURE_H

#include "qemu/bswap.h"
#include "qemu/timer.h"
#include "hw/usb/cdc-ncm.h"
#include "ncm-oracle.h"
#include "libqtest.h"
#include "libqos/libqos-pc.h"
#include "libqos/xhci-driver.h"
#include "libqos/ncm-host.h"
#include "libqos/usb-hcd.h"
#include "libqos/pci-pc.h"
#include "qobject/qlist.h"
#include "qobject/qdict.h"
#include <poll.h>
#include <sys/ioctl.h>

#define NCM_MAC_STR             "52:54:00:12:34:56"
#define NCM_MAC_HEX             "525400123456"
#define NCM_XHCI_DEVFN          QPCI_DEVFN(4, 0)

#define NCM_IF_CONTROL          0
#define NCM_IF_DATA             1

#define NCM_RX_TIMEOUT_NS       (5 * NANOSECONDS_PER_SECOND)

extern const uint8_t ncm_mac[6];

extern const uint8_t ncm_peer_mac[6];

extern const uint8_t ncm_other_mac[6];

extern const uint8_t ncm_bcast_mac[6];

typedef struct NcmEnv NcmEnv;
typedef struct NcmCase NcmCase;

struct NcmCase {
    bool super;                 /* else high speed */
    const char *model;          /* usb-ncm-dl or usb-ncm */
    const char *props;          /* extra -device properties, or NULL */
    const void *data;           /* case-specific, typed by the case */
    void (*fn)(NcmEnv *e, const NcmCase *c);
};

/* GET_NTB_PARAMETERS */
typedef struct NcmNtbParams {
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
} NcmNtbParams;

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
    NcmNtbParams p;
    bool ntb32;
    uint32_t in_size;           /* NTB input size in force */
    uint16_t rx_seq;            /* next expected IN wSequence */
    unsigned rx_ntbs;           /* IN NTBs parsed */
    uint64_t rx_bytes;          /* their bytes */
    QDict *mark;                /* x-stats at ncm_mark() */
    /*
     * The NCM 1.0 oracle (ncm-oracle.h) sees every IN transfer the test
     * completes on the data endpoint and every descriptor it reads, with
     * the parameters the device was told (@neg, taken from the class
     * requests that succeeded); a violation fails the case.  A case that
     * makes the device break the rules on purpose sets @oracle_off.
     */
    NcmOracle *oracle;
    bool oracle_off;
    struct {
        bool ntb32;             /* SET_NTB_FORMAT(1) */
        bool crc;               /* SET_CRC_MODE(1) */
        uint32_t in_size;       /* SET_NTB_INPUT_SIZE, else dwNtbInMaxSize */
        uint16_t in_max_dgrams; /* its 8-byte form's wNtbInMaxDatagrams */
    } neg;
    /* migrate.c: NCM_QTEST_MIGRATE=each, and what outlives a migration */
    struct {
        bool on;                /* migrate at every driver checkpoint */
        bool busy;
        bool stopped;           /* ncm_migrate_each_stop() */
        bool link_down;         /* set_link off: the destination too */
        unsigned done;          /* migrations in this case */
        unsigned blocked;       /* ... refused by a fault's blocker */
        unsigned skipped;       /* ... the source waiting after its own */
        int64_t src_clock_ns;   /* the source's virtual clock at the save */
        bool src_running;       /* ... and whether it ran */
        char *props;            /* the adapter's -device properties now */
        QDict *stats_offset;    /* x-stats lost to destinations so far */
        QDict *loaded_stats;    /* the destination's before it ran */
        QDict *src_stats;       /* the source's once it stopped */
        GByteArray *resend;     /* frames for the destination's socket */
        GByteArray *sent;       /* written to the netdev socket, from the */
        GArray *sent_frames;    /* ... first frame the device has not taken */
        uint64_t frames_sent;   /* frames written to the socket in all */
        uint64_t frames_taken_before; /* by the device on earlier QEMUs */
        uint64_t frames_taken_next;   /* ... once the destination runs */
        GByteArray *recv_carry; /* read from an old socket, not taken */
    } mig;
};

/* Frames */
GByteArray *ncm_make_frame(const uint8_t *dst, uint32_t tag, size_t len);
GPtrArray *ncm_frames_new(void);
void ncm_frames_add(GPtrArray *a, const uint8_t *dst, uint32_t tag,
                    size_t len);
void ncm_frames_assert_equal(GPtrArray *got, GPtrArray *want);

/* The socket side of the netdev */
void ncm_sock_send_frames(NcmEnv *e, GPtrArray *frames);

/* One virtual-time step of @ns (0: the driver's 1 ms), then events. */
void ncm_step(NcmEnv *e, int64_t ns);

/* Let QEMU take in what the test wrote, as far as it is willing to. */
void ncm_sock_settle(NcmEnv *e);
/* The same in virtual-time steps of @step_ns (0: the driver's). */
void ncm_sock_settle_by(NcmEnv *e, int64_t step_ns);
void ncm_sock_expect_frames(NcmEnv *e, GPtrArray *want);
void ncm_sock_expect_silence(NcmEnv *e, int timeout_ms);

/*
 * NTBs (libqos/ncm-host.h builds and reads them): the placement the
 * device asked for, for OUT NTBs, and the one it uses, for IN NTBs
 */
NcmHostLayout ncm_out_layout(NcmEnv *e);
NcmHostLayout ncm_in_layout(NcmEnv *e);

/* As many @frame_len-byte frames as fit an NTB of exactly @len bytes. */
GByteArray *ncm_ntb_build_filled(NcmEnv *e, uint32_t len,
                                 uint32_t frame_len, uint32_t tag,
                                 GPtrArray *frames);

/* Device */
char *ncm_firmware_args(void);
int ncm_class_in(NcmEnv *e, uint8_t req, uint16_t value, void *buf,
                 uint16_t len, uint32_t *actual);
int ncm_class_out(NcmEnv *e, uint8_t req, uint16_t value,
                  const void *buf, uint16_t len);
void ncm_read_ntb_parameters(NcmEnv *e, NcmNtbParams *p, uint8_t *raw);

/* Enumerate like a host driver: descriptors, endpoints, configuration. */
void ncm_enumerate(NcmEnv *e);
void ncm_set_alt(NcmEnv *e, int alt);
NcmEnv *ncm_start(const NcmCase *c);
void ncm_stop(NcmEnv *e);
void ncm_assert_alive(NcmEnv *e);

/* Data path helpers */
void ncm_out_td(NcmEnv *e, const uint8_t *data, uint32_t len);

/* @n bulk IN TDs of @len bytes into @t, queued before one doorbell. */
void ncm_in_submit_queued(NcmEnv *e, QXhciTransfer **t, unsigned n,
                          uint32_t len);

/* One OUT transfer, ended by a ZLP when it is an exact multiple. */
void ncm_send(NcmEnv *e, const uint8_t *data, uint32_t len);
void ncm_send_frames(NcmEnv *e, GPtrArray *frames);

/* A valid NTB after whatever came before must come out alone and whole */
void ncm_check_marker(NcmEnv *e, uint32_t tag);

/* Check one IN NTB strictly and append its datagrams to @out. */
void ncm_ntb_parse_in(NcmEnv *e, const uint8_t *b, uint32_t len,
                      uint32_t max_len, GPtrArray *out);
GPtrArray *ncm_receive(NcmEnv *e, unsigned n, uint32_t td_len,
                       uint32_t max_ntb);
void ncm_expect_rx(NcmEnv *e, GPtrArray *want);
void ncm_check_rx_frame(NcmEnv *e, uint32_t tag, size_t len);

/* Bulk IN must stay NAK'd: nothing queued for the host. */
void ncm_expect_no_rx(NcmEnv *e);

/*
 * One notification, or 0 bytes when none came within @timeout_ns.  The
 * host polls the interrupt endpoint every 32 ms (bInterval 9), so a read
 * shorter than that may never reach the device: "none came" needs at
 * least NCM_NOTIFY_QUIET_NS.
 */
uint32_t ncm_notify_read(NcmEnv *e, uint8_t *buf, int64_t timeout_ns);
#define NCM_NOTIFY_QUIET_NS     (64 * NCM_MS)
void ncm_expect_speed_change(const uint8_t *b, uint32_t len);
void ncm_expect_connection(const uint8_t *b, uint32_t len, bool up);
/* What a link coming up sends: SPEED_CHANGE, then NETWORK_CONNECTION(1) */
void ncm_expect_link_up(NcmEnv *e);
void ncm_set_link(NcmEnv *e, bool up);

/* Counters and fault injection, through QOM */

#define NCM_QOM_PATH            "/machine/peripheral/ncm0"
#define NCM_MS                  (1000 * 1000LL)      /* ns per ms */
int64_t ncm_qom_get_int(NcmEnv *e, const char *prop);
char *ncm_qom_get_str(NcmEnv *e, const char *prop);
bool ncm_parks_packets(NcmEnv *e);

/* Every counter of the "x-stats" property */
QDict *ncm_stats(NcmEnv *e);

/*
 * The one way to check counters: ncm_mark() takes x-stats;
 * ncm_assert_deltas(e, { "in_ntbs", 2 }, ...) asserts how far each named
 * counter grew since (all from one snapshot), ncm_delta() returns it,
 * ncm_assert_parse_errors() asserts that out_parse_errors grew by @n in
 * class @name only (NULL: not at all).  A case that checks two stretches
 * marks again between them, or asserts the sum since the first mark.
 */
typedef struct NcmDelta {
    const char *name;
    uint64_t delta;
} NcmDelta;

void ncm_mark(NcmEnv *e);
void ncm_assert_deltas_n(NcmEnv *e, const NcmDelta *want, size_t n);
#define ncm_assert_deltas(e, ...) \
    ncm_assert_deltas_n(e, (const NcmDelta[]) { __VA_ARGS__ }, \
                        ARRAY_SIZE(((const NcmDelta[]) { __VA_ARGS__ })))
uint64_t ncm_delta(NcmEnv *e, const char *name);
void ncm_assert_parse_errors(NcmEnv *e, const char *name, uint64_t n);
/* the Ethernet statistics' counters (NCM_ETH_STAT_COUNTERS), { NULL } last */
typedef struct NcmEthStatName {
    const char *name;
} NcmEthStatName;
extern const NcmEthStatName ncm_eth_stat_names[];
void ncm_assert_eth_stats_kept(NcmEnv *e, QDict *before);
int64_t ncm_qom_get_stat(NcmEnv *e, const char *name);

/*
 * Fault injection: the properties of the usb-ncm-fault object
 * NCM_FAULT_PATH ("busy-ms", ...), which ncm_fault_object() creates on
 * the case's machine if it has none; ncm_fault_corrupt() sets corrupt-in.
 */
#define NCM_FAULT_PATH          "/objects/ncm-fault"
void ncm_fault_object(NcmEnv *e);
void ncm_fault_set(NcmEnv *e, const char *fault, uint32_t value);
/*
 * Migration refused by a usb-ncm-fault blocker; or not blocked: it
 * starts (to a socket nobody listens on) and fails there.
 */
void ncm_migrate_assert_blocked(NcmEnv *e);
void ncm_migrate_assert_unblocked(NcmEnv *e);
void ncm_fault_corrupt(NcmEnv *e, const char *how);
int64_t ncm_fault_get_int(NcmEnv *e, const char *fault);
char *ncm_fault_get_str(NcmEnv *e, const char *fault);

/*
 * Migration (migrate.c): save the machine to @file, load it into a new
 * QEMU with @props for the adapter; NULL when the destination refused
 * it.  ncm_follow_migration() moves the test to the destination.
 */
void ncm_migrate_save(NcmEnv *e, const char *file);
QTestState *ncm_migrate_load(NcmEnv *e, const char *file,
                             const char *props, int *sock);
QTestState *ncm_migrate_via_file(NcmEnv *e, const char *file,
                                 const char *props, int *sock);
void ncm_follow_migration(NcmEnv *e, QTestState *dst, int sock);
/*
 * NCM_QTEST_MIGRATE=each: the machine migrates at every checkpoint of
 * the xHCI driver from ncm_migrate_each_start() to ..._end(); x-stats
 * (ncm_stats) and the netdev socket carry on across it.
 */
bool ncm_migrate_each_wanted(void);
void ncm_migrate_each_start(NcmEnv *e);
void ncm_migrate_each_end(NcmEnv *e);
/*
 * The case changes the machine's configuration (device_del, blockdev-add)
 * in a way a destination's command line does not follow: no more
 * migrations in it from here.
 */
void ncm_migrate_each_stop(NcmEnv *e, const char *why);
void ncm_migrate_stats_adjust(NcmEnv *e, QDict *stats);
void ncm_migrate_note_sent(NcmEnv *e, const uint8_t *buf, size_t len,
                           const uint32_t *frame_starts, unsigned nframes);
size_t ncm_migrate_take_carried(NcmEnv *e, uint8_t *buf, size_t len);
/* x-stats as the device reports it (ncm_stats: across migrations) */
QDict *ncm_stats_raw(NcmEnv *e);
QDict *ncm_stats_raw_of(QTestState *qts);
/* Bytes to the netdev socket as they are (ncm_sock_send_frames frames) */
void ncm_sock_write_raw(NcmEnv *e, const uint8_t *buf, size_t len);

/* Virtual time in ns (clock_step refuses a step of 0, so step by 1 ns) */
int64_t ncm_clock_ns(NcmEnv *e);

/* Descriptors */
/* GET_DESCRIPTOR through the oracle (qxhci_get_descriptor's contract) */
int ncm_get_descriptor(NcmEnv *e, uint8_t type, uint8_t index, uint16_t lang,
                       void *buf, uint16_t len, uint32_t *actual);
const uint8_t *ncm_find_cs_desc(NcmEnv *e, uint8_t subtype);
char *ncm_get_string(NcmEnv *e, uint8_t index);

/*
 * The oracle: ncm_oracle_in() checks the @len bytes a bulk IN TD of
 * @requested bytes returned, ncm_oracle_in_td() a completed TD; both fail
 * the case on a violation, unless e->oracle_off.  ncm_oracle_catches()
 * asserts that the oracle refuses such a transfer (corrupt-in).
 * ncm_function_reset(): the device reset its function (NCM 1.0 7.2: a
 * SET_INTERFACE of the data interface, SET_CONFIGURATION or a port
 * reset), @defaults when the negotiated parameters went back to theirs.
 * ncm_oracle_lost_ntb(): an NTB the device sent never reached the host.
 */
void ncm_oracle_in(NcmEnv *e, const uint8_t *buf, uint32_t len,
                   uint32_t requested);
void ncm_oracle_in_td(NcmEnv *e, QXhciTransfer *t);
void ncm_oracle_catches(NcmEnv *e, const uint8_t *buf, uint32_t len,
                        uint32_t requested);
void ncm_function_reset(NcmEnv *e, bool defaults);
/* The device sent an NTB the host lost: its wSequence is skipped. */
void ncm_oracle_lost_ntb(NcmEnv *e);

/* Parse what a completed IN TD holds (no NTB when it came back empty). */
void ncm_in_td_parse(NcmEnv *e, QXhciTransfer *t, uint32_t max_ntb,
                     GPtrArray *got);
GByteArray *ncm_in_ntb_expected(NcmEnv *e, GPtrArray *frames,
                                uint16_t seq);
void ncm_set_configuration(NcmEnv *e, int value);

/* The adapter again, as a host finds it after a reset or a replug */
void ncm_reenumerate(NcmEnv *e);
/* ... once a replug is over: waits for the port, enumerates, data on */
void ncm_replug_wait_back(NcmEnv *e);

/* Both directions work: an OUT NTB and an IN NTB through queued TDs. */
void ncm_in_fill_in_turn(NcmEnv *e, QXhciTransfer **t, GPtrArray *first,
                         GPtrArray *second, uint32_t max2);
void ncm_queue_check_traffic(NcmEnv *e, uint32_t tag);

/*
 * Cases: each area file registers its own, at super speed (@ss) or high
 * speed; a case runs in a fresh QEMU with the device enumerated and must
 * leave it alive and the socket silent.  -m slow adds the heavy ones: the
 * high-speed repeats of cases the packet size does not change (see
 * ncm_add_case) and the TD-queue cases' high-speed, NAK-mode and usb-ncm
 * variants (lifecycle.c).
 */
#define NCM_DL                  "usb-ncm-dl"
#define NCM_GENERIC             "usb-ncm"

void ncm_add_case(bool super, const char *model, const char *name,
                  void (*fn)(NcmEnv *e, const NcmCase *c), const void *data,
                  const char *props);
void ncm_add_control_cases(bool ss);   /* control.c: requests, descriptors */
void ncm_add_tx_cases(bool ss);        /* tx.c: host to device, OUT NTBs */
void ncm_add_rx_cases(bool ss);        /* rx.c: device to host, IN NTBs */
void ncm_add_fault_cases(bool ss);     /* faults.c: usb-ncm-fault */
void ncm_add_lifecycle_cases(bool ss); /* lifecycle.c: queues, resets, */
                                       /* hot-unplug, migration */
void ncm_add_spec_cases(bool ss);      /* ncm-spec.c: NCM 1.0 requests */
                                       /* beyond the base, profile= */
void ncm_add_replay_cases(bool ss);    /* replay.c: the same script, the */
                                       /* same trace (record/replay) */
void ncm_add_host_cases(bool ss);      /* hosts.c: Windows, FreeBSD, */
                                       /* iPXE, macOS as their sources */
void ncm_add_stream_cases(bool ss);    /* streams.c: xHCI streams on */
                                       /* a device that has none */
/* oracle.c: the NCM 1.0 / USB ch. 9 oracle on hand-made input, no QEMU */
void ncm_add_oracle_cases(void);
/*
 * A machine with the USB host controller @hc (its -device driver and
 * options) in PCI slot 5 and usb-ncm-dl on it (@dev_opts: its bus and
 * port), on a hubport netdev, for the tests that drive a controller by
 * its registers: the controller found, enabled and BAR 0 mapped.
 */
typedef struct NcmHcMachine {
    QTestState *qts;
    QGuestAllocator alloc;
    QPCIBus *bus;
    QPCIDevice *pdev;
    QPCIBar bar;
} NcmHcMachine;

void ncm_hc_machine_start(NcmHcMachine *m, const char *hc,
                          const char *dev_opts);
void ncm_hc_machine_stop(NcmHcMachine *m);
/*
 * The libqos driver of @type for the machine's controller, started: the
 * controller reset and running, the device's port (port 0) reset
 */
void ncm_hc_driver(NcmHcMachine *m, QHcd *h, QHcdType type);

/* ehci.c: qTDs QEMU's EHCI must not abort on */
void ncm_add_ehci_cases(void);
/* ohci.c: an isochronous TD QEMU's OHCI must not abort on */
void ncm_add_ohci_cases(void);
/* hcd.c: the adapter behind the libqos UHCI, OHCI and EHCI drivers */
void ncm_add_hcd_cases(void);
/* desc.c: descriptor strings at their limits (the core and the adapter) */
void ncm_add_desc_cases(void);

#endif
