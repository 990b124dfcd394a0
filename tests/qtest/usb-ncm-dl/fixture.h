/*
 * QTest fixture for the USB CDC-NCM adapters usb-ncm-dl and usb-ncm
 *
 * What every area file of tests/qtest/usb-ncm-dl-test shares: a QEMU with
 * qemu-xhci and the device on a socketpair netdev (ncm_start/ncm_stop),
 * enumeration and class requests, the socket peer (sock_*), an NTB
 * builder for OUT and a strict checker for IN (ntb_*, ncm_receive), x-stats
 * marks and deltas, fault setters, and case registration (ncm_add_case).
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef USB_NCM_DL_FIXTURE_H
#define USB_NCM_DL_FIXTURE_H

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

extern const uint8_t ncm_mac[6];

extern const uint8_t peer_mac[6];

extern const uint8_t other_mac[6];

extern const uint8_t bcast_mac[6];

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
    QDict *mark;                /* x-stats at ncm_mark() */
};

/* Frames */
GByteArray *make_frame(const uint8_t *dst, uint32_t tag, size_t len);
GPtrArray *frames_new(void);
void frames_add(GPtrArray *a, const uint8_t *dst, uint32_t tag,
                size_t len);
void frames_assert_equal(GPtrArray *got, GPtrArray *want);

/* The socket side of the netdev */
void sock_write_all(NcmEnv *e, const uint8_t *buf, size_t len);
void sock_send_frames(NcmEnv *e, GPtrArray *frames);

/* Bytes written to the socket that QEMU has not read yet, or -1. */
int sock_unread(NcmEnv *e);

/* Let QEMU take in what the test wrote, as far as it is willing to. */
void sock_settle(NcmEnv *e);
/* The same in virtual-time steps of @step_ns (sock_settle: the driver's). */
void sock_settle_by(NcmEnv *e, int64_t step_ns);
bool sock_read_exact(NcmEnv *e, uint8_t *buf, size_t len,
                     int timeout_ms, bool started);
GByteArray *sock_recv_frame(NcmEnv *e, int timeout_ms);
void sock_expect_frames(NcmEnv *e, GPtrArray *want);
void sock_expect_silence(NcmEnv *e, int timeout_ms);

/* NTB building (host to device) */

typedef struct NtbLayout {
    bool ntb32;
    uint16_t ndp_alignment;
    uint16_t divisor;
    uint16_t remainder;
} NtbLayout;
NtbLayout out_layout(NcmEnv *e);
uint32_t align_up(uint32_t v, uint32_t a);
void put_field(uint8_t *p, bool ntb32, uint32_t v);
GByteArray *ntb_build(const NtbLayout *l, GPtrArray *frames,
                      uint16_t seq);

/* Zero-pad @ntb to @len bytes inside the block (NTB16 64 KiB: length 0). */
void ntb_pad_to(GByteArray *ntb, bool ntb32, uint32_t len);

/* As many @frame_len-byte frames as fit an NTB of exactly @len bytes. */
GByteArray *ntb_build_filled(NcmEnv *e, uint32_t len,
                             uint32_t frame_len, uint32_t tag,
                             GPtrArray *frames);

/* Device */
char *firmware_args(void);
int class_in(NcmEnv *e, uint8_t req, uint16_t value, void *buf,
             uint16_t len, uint32_t *actual);
int class_out(NcmEnv *e, uint8_t req, uint16_t value,
              const void *buf, uint16_t len);
void read_ntb_parameters(NcmEnv *e, NtbParams *p, uint8_t *raw);

/* Enumerate like a host driver: descriptors, endpoints, configuration. */
void ncm_enumerate(NcmEnv *e);
void ncm_set_alt(NcmEnv *e, int alt);
NcmEnv *ncm_start(const NcmCase *c);
void ncm_stop(NcmEnv *e);
void assert_alive(NcmEnv *e);

/* Data path helpers */
void out_td(NcmEnv *e, const uint8_t *data, uint32_t len);

/* @n bulk IN TDs of @len bytes into @t, queued before one doorbell. */
void in_submit_queued(NcmEnv *e, QXhciTransfer **t, unsigned n,
                      uint32_t len);

/* One OUT transfer, ended by a ZLP when it is an exact multiple. */
void ncm_send(NcmEnv *e, const uint8_t *data, uint32_t len);
void ncm_send_frames(NcmEnv *e, GPtrArray *frames);

/* A valid NTB after whatever came before must come out alone and whole */
void ncm_check_marker(NcmEnv *e, uint32_t tag);
uint32_t get_field(const uint8_t *p, bool ntb32);

/* Check one IN NTB strictly and append its datagrams to @out. */
void ntb_parse_in(NcmEnv *e, const uint8_t *b, uint32_t len,
                  uint32_t max_len, GPtrArray *out);
GPtrArray *ncm_receive(NcmEnv *e, unsigned n, uint32_t td_len,
                       uint32_t max_ntb);
void ncm_expect_rx(NcmEnv *e, GPtrArray *want);
void ncm_check_rx_frame(NcmEnv *e, uint32_t tag, size_t len);

/* Bulk IN must stay NAK'd: nothing queued for the host. */
void ncm_expect_no_rx(NcmEnv *e);

/* One notification, or 0 bytes when none came within @timeout_ns. */
uint32_t notify_read(NcmEnv *e, uint8_t *buf, int64_t timeout_ns);
void expect_speed_change(const uint8_t *b, uint32_t len);
void expect_connection(const uint8_t *b, uint32_t len, bool up);
void set_link(NcmEnv *e, bool up);

/* Counters and fault injection, through QOM */

#define NCM_QOM_PATH            "/machine/peripheral/ncm0"
#define MS                      (1000 * 1000LL)
QDict *qom_get(NcmEnv *e, const char *prop);
int64_t qom_get_int(NcmEnv *e, const char *prop);
char *qom_get_str(NcmEnv *e, const char *prop);
bool ncm_parks_packets(NcmEnv *e);

/* Every counter of the "x-stats" property */
QDict *ncm_stats(NcmEnv *e);

/* How much counter @name grew from @before to @after */
uint64_t stat_delta(QDict *before, QDict *after, const char *name);
void assert_stat_delta(QDict *before, QDict *after, const char *name,
                       uint64_t want);
void assert_parse_errors(QDict *before, QDict *after,
                         const char *name, uint64_t n);

/*
 * ncm_mark() takes x-stats; ncm_assert_deltas(e, { "in_ntbs", 2 }, ...)
 * asserts how far each named counter grew since, ncm_delta() returns it,
 * ncm_assert_parse_errors() asserts that out_parse_errors grew by @n in
 * class @name only (NULL: not at all).
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
void ncm_assert_counters_kept(NcmEnv *e);

void fault_set(NcmEnv *e, const char *prop, uint32_t value);
void fault_corrupt(NcmEnv *e, const char *how);

/* Virtual time in ns (clock_step refuses a step of 0, so step by 1 ns) */
int64_t clock_ns(NcmEnv *e);

/* Descriptors */
const uint8_t *find_cs_desc(NcmEnv *e, uint8_t subtype);
char *get_string(NcmEnv *e, uint8_t index);

/* Parse what a completed IN TD holds (no NTB when it came back empty). */
void in_td_parse(NcmEnv *e, QXhciTransfer *t, uint32_t max_ntb,
                 GPtrArray *got);
GByteArray *in_ntb_expected(NcmEnv *e, GPtrArray *frames,
                            uint16_t seq);
void ncm_set_configuration(NcmEnv *e, int value);

/* The adapter again, as a host finds it after a reset or a replug */
void ncm_reenumerate(NcmEnv *e);

/* Both directions work: an OUT NTB and an IN NTB through queued TDs. */
void in_fill_in_turn(NcmEnv *e, QXhciTransfer **t, GPtrArray *first,
                     GPtrArray *second, uint32_t max2);
void queue_check_traffic(NcmEnv *e, uint32_t tag);

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
void ncm_add_fault_cases(bool ss);     /* faults.c: x-fault-* injection */
void ncm_add_lifecycle_cases(bool ss); /* lifecycle.c: queues, resets, */
                                       /* hot-unplug, migration */
void ncm_add_spec_cases(bool ss);      /* ncm-spec.c: NCM 1.0 requests */
                                       /* beyond the base, profile= */
void ncm_add_replay_cases(bool ss);    /* replay.c: the same script, the */
                                       /* same trace (record/replay) */
void ncm_add_host_cases(bool ss);      /* hosts.c: Windows, FreeBSD, */
                                       /* iPXE, macOS as their sources */

#endif
