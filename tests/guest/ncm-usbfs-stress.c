/*
 * ncm-usbfs-stress: drive the usb-ncm-dl NCM function through Linux usbfs
 *
 * Runs inside the test guest (tests/guest/init.sh, ncm.mode=stress; built
 * static by tests/guest/image.sh).  It takes the function away from
 * cdc_ncm, queues URBs the way no driver does (several bulk IN URBs of
 * mixed sizes, OUT NTBs of exact wMaxPacketSize multiples with and without
 * a zero-length packet), changes the data interface or the configuration
 * or resets the device under them, and checks that every URB comes back
 * with a sane status within a time limit and that the function still
 * passes traffic (ARP and ICMP echo to slirp's 10.0.2.2, in NTB16s built
 * here).  Then it gives the function back to cdc_ncm.
 *
 *   ncm-usbfs-stress [-v] STEP       run one step, print one line
 *                                    "STRESS STEP ok <what was seen>" or
 *                                    "STRESS STEP FAIL <why>", then hand the
 *                                    function back ("STRESS STEP/handback")
 *   ncm-usbfs-stress list            the steps, one a line
 *   ncm-usbfs-stress handback        give both interfaces back to cdc_ncm
 *   ncm-usbfs-stress reset-handback  USBDEVFS_RESET first, then hand back
 *
 * -v prints every URB completion ("# " lines).  Exit status: 0 when the
 * step and the hand-back passed, 1 otherwise.
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>
#include <linux/usb/ch9.h>
#include <linux/usbdevice_fs.h>
/* class requests, notifications, filter bits: the device's own table */
#include "hw/usb/cdc-ncm.h"

#define ARRAY_LEN(a)        (sizeof(a) / sizeof((a)[0]))
#define MAX_XFERS           32
#define IN_BUF_MAX          65536
#define OUT_BUF_MAX         65536
#define DRAIN_MS            5000    /* after DISCARDURB, every URB is back */
#define ALIVE_MS            6000    /* a reply to fresh URBs within this */
#define STEP_ALARM_S        90      /* the whole step, in case of a hang */
#define CTRL_TIMEOUT_MS     3000

static const uint8_t guest_ip[4] = { 10, 0, 2, 15 };
static const uint8_t gw_ip[4] = { 10, 0, 2, 2 };
static const uint16_t icmp_ident = 0x4e43;      /* "NC" */
/* a source address slirp has never seen: its reply needs an ARP request */
static const uint8_t stranger_ip[4] = { 10, 0, 2, 16 };

typedef enum XferKind {
    X_IN,
    X_OUT,
    X_NOTIFY,
} XferKind;

typedef struct Xfer {
    struct usbdevfs_urb urb;
    XferKind kind;
    unsigned id;            /* submission number, for order and messages */
    unsigned slot;          /* IN: which of the depth slots */
    size_t len;
    bool busy;              /* submitted, not reaped yet */
    bool held;              /* a step keeps a pointer: not to be reused */
    bool discarded;
    bool zlp;
    uint16_t first_seq;     /* OUT: ICMP sequence numbers it carries */
    unsigned n_seq;
    uint8_t *buf;
} Xfer;

typedef struct Stats {
    unsigned in_done, in_data, in_empty, in_bytes, ntbs, datagrams;
    unsigned arp_replies, icmp_replies, other_frames;
    /* by destination MAC, and the frames the filter step looks for */
    unsigned to_us, to_broadcast, to_multicast;
    unsigned arp_requests_16, router_adverts;
    unsigned out_done, out_bytes, notifications;
    unsigned cancelled, overflow, stalls, errors;
    unsigned last_in_id;    /* IN completions must come in order */
    char insane[400];       /* the first thing no URB may do */
    char errlist[120];      /* the error statuses seen, "EPIPE x3 ..." */
} Stats;

typedef struct Ncm {
    int fd;
    char path[64];
    uint16_t vid, pid;
    int speed;
    uint8_t config_value;
    uint8_t ctrl_if, data_if, data_alt;
    uint8_t ep_in, ep_out, ep_notify;
    uint16_t mps_in, mps_out, mps_notify;
    uint8_t mac_index;
    uint8_t mac[6];
    uint8_t gw_mac[6];
    uint32_t ntb_in_max, ntb_out_max;
    uint16_t out_div, out_rem, out_align;
    uint16_t ntb_seq, icmp_seq;
    bool claimed;
    bool tolerant;          /* the step disrupts: errors are allowed */
    bool resubmit;          /* IN and notify URBs go back once reaped */
    unsigned in_depth;
    size_t in_sizes[8];
    unsigned next_id;
    Xfer xfers[MAX_XFERS];
    Stats st;
    /* bulk IN data of an NTB that spans transfers */
    uint8_t acc[IN_BUF_MAX + 2048];
    size_t acc_len;
    /* which ICMP echo sequence numbers were answered (a bitmap) */
    uint8_t echo_seen[8192];
} Ncm;

static bool verbose;
static const char *cur_step = "setup";
static const char *cur_phase = "setup";

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void vlog(const char *fmt, ...)
{
    va_list ap;

    if (!verbose) {
        return;
    }
    va_start(ap, fmt);
    printf("# ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
}

/* Where we are, printed before each call that might block in the kernel. */
static void phase(const char *what)
{
    cur_phase = what;
    printf("# %s: %s\n", cur_step, what);
    fflush(stdout);
}

static void on_alarm(int sig)
{
    char msg[256];
    int len;

    (void)sig;
    len = snprintf(msg, sizeof(msg),
                   "STRESS %s FAIL hang: the step did not end within %d s "
                   "(stuck in: %s)\n", cur_step, STEP_ALARM_S, cur_phase);
    if (write(STDOUT_FILENO, msg, len) < 0) {
        _exit(3);
    }
    _exit(1);
}

static const char *errname(int e)
{
    switch (e) {
    case 0: return "0";
    case ENOENT: return "ENOENT";
    case ECONNRESET: return "ECONNRESET";
    case ESHUTDOWN: return "ESHUTDOWN";
    case ENODEV: return "ENODEV";
    case EPIPE: return "EPIPE";
    case EPROTO: return "EPROTO";
    case EILSEQ: return "EILSEQ";
    case ETIME: return "ETIME";
    case ETIMEDOUT: return "ETIMEDOUT";
    case EOVERFLOW: return "EOVERFLOW";
    case EREMOTEIO: return "EREMOTEIO";
    case ECOMM: return "ECOMM";
    case ENOSR: return "ENOSR";
    case EINVAL: return "EINVAL";
    case EBUSY: return "EBUSY";
    case EXDEV: return "EXDEV";
    default: return strerror(e);
    }
}

static void insane(Ncm *n, const char *fmt, ...)
{
    va_list ap;

    if (n->st.insane[0]) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(n->st.insane, sizeof(n->st.insane), fmt, ap);
    va_end(ap);
}

static void note_error(Ncm *n, int e)
{
    size_t l = strlen(n->st.errlist);

    if (strstr(n->st.errlist, errname(e))) {
        return;
    }
    snprintf(n->st.errlist + l, sizeof(n->st.errlist) - l, "%s%s",
             l ? "," : "", errname(e));
}

static const char *kind_name(XferKind k)
{
    return k == X_IN ? "IN" : k == X_OUT ? "OUT" : "notify";
}

static uint16_t le16(const uint8_t *p)
{
    return p[0] | p[1] << 8;
}

static uint32_t le32(const uint8_t *p)
{
    return le16(p) | (uint32_t)le16(p + 2) << 16;
}

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = v;
    p[1] = v >> 8;
}

static void put16be(uint8_t *p, uint16_t v)
{
    p[0] = v >> 8;
    p[1] = v;
}

/* Control transfers */

static int ctrl(Ncm *n, uint8_t rt, uint8_t req, uint16_t val, uint16_t idx,
                void *data, uint16_t len)
{
    struct usbdevfs_ctrltransfer c = {
        .bRequestType = rt,
        .bRequest = req,
        .wValue = val,
        .wIndex = idx,
        .wLength = len,
        .timeout = CTRL_TIMEOUT_MS,
        .data = data,
    };
    int r = ioctl(n->fd, USBDEVFS_CONTROL, &c);

    return r < 0 ? -errno : r;
}

static int set_interface(Ncm *n, unsigned ifn, unsigned alt)
{
    struct usbdevfs_setinterface si = { .interface = ifn, .altsetting = alt };

    return ioctl(n->fd, USBDEVFS_SETINTERFACE, &si) < 0 ? -errno : 0;
}

static int raw_set_interface(Ncm *n, unsigned ifn, unsigned alt)
{
    return ctrl(n, USB_DIR_OUT | USB_TYPE_STANDARD | USB_RECIP_INTERFACE,
                USB_REQ_SET_INTERFACE, alt, ifn, NULL, 0);
}

static int raw_set_config(Ncm *n, unsigned value)
{
    return ctrl(n, USB_DIR_OUT | USB_TYPE_STANDARD | USB_RECIP_DEVICE,
                USB_REQ_SET_CONFIGURATION, value, 0, NULL, 0);
}

/* Finding the device and its descriptors */

/* One number from /sys/bus/usb/devices/DIR/FILE, in scanf format @fmt */
static int read_sysfs(const char *dir, const char *file, const char *fmt,
                      unsigned *v)
{
    char p[512];
    FILE *f;
    int ok;

    snprintf(p, sizeof(p), "/sys/bus/usb/devices/%s/%s", dir, file);
    f = fopen(p, "r");
    if (!f) {
        return -1;
    }
    ok = fscanf(f, fmt, v) == 1;
    fclose(f);
    return ok ? 0 : -1;
}

static int find_device(Ncm *n, char *why, size_t whylen)
{
    DIR *d = opendir("/sys/bus/usb/devices");
    struct dirent *e;
    unsigned vid, pid, bus, dev;

    if (!d) {
        snprintf(why, whylen, "no /sys/bus/usb/devices: %s", strerror(errno));
        return -1;
    }
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || strchr(e->d_name, ':')) {
            continue;
        }
        if (read_sysfs(e->d_name, "idVendor", "%x", &vid) < 0 ||
            (vid != 0x17e9 && vid != 0x46f4) ||
            read_sysfs(e->d_name, "idProduct", "%x", &pid) < 0 ||
            read_sysfs(e->d_name, "busnum", "%u", &bus) < 0 ||
            read_sysfs(e->d_name, "devnum", "%u", &dev) < 0) {
            continue;
        }
        n->vid = vid;
        n->pid = pid;
        snprintf(n->path, sizeof(n->path), "/dev/bus/usb/%03u/%03u",
                 bus, dev);
        closedir(d);
        return 0;
    }
    closedir(d);
    snprintf(why, whylen, "no USB device with idVendor 0x17e9 or 0x46f4");
    return -1;
}

/*
 * Reading a usbfs device node gives the device descriptor and then each
 * configuration's descriptors.  The NCM control interface (class 2,
 * subclass 0x0d) has the interrupt endpoint and the Ethernet functional
 * descriptor; the data interface (class 0x0a) the bulk pair in its
 * alternate setting 1.
 */
static int parse_descriptors(Ncm *n, char *why, size_t whylen)
{
    uint8_t buf[4096];
    ssize_t len = read(n->fd, buf, sizeof(buf));
    size_t off, total;
    int cls = -1, sub = -1, ifn = -1, alt = -1;
    bool have_ctrl = false, have_data = false;

    if (len < 18 + 9 || buf[1] != USB_DT_DEVICE ||
        buf[18 + 1] != USB_DT_CONFIG) {
        snprintf(why, whylen, "cannot read descriptors from %s (%zd bytes)",
                 n->path, len);
        return -1;
    }
    total = le16(buf + 18 + 2);
    if (18 + total > (size_t)len) {
        total = len - 18;
    }
    n->config_value = buf[18 + 5];
    for (off = 18; off + 2 <= 18 + total && buf[off] >= 2;
         off += buf[off]) {
        const uint8_t *d = buf + off;

        if (off + d[0] > 18 + total) {
            break;
        }
        switch (d[1]) {
        case USB_DT_INTERFACE:
            ifn = d[2];
            alt = d[3];
            cls = d[5];
            sub = d[6];
            break;
        case 0x24:      /* CS_INTERFACE */
            if (d[0] >= 13 && d[2] == 0x0f) {
                n->mac_index = d[3];
            }
            break;
        case USB_DT_ENDPOINT: {
            uint8_t type = d[3] & USB_ENDPOINT_XFERTYPE_MASK;
            uint16_t mps = le16(d + 4) & 0x7ff;

            if (cls == USB_CLASS_COMM && sub == 0x0d &&
                type == USB_ENDPOINT_XFER_INT && (d[2] & USB_DIR_IN)) {
                n->ctrl_if = ifn;
                n->ep_notify = d[2];
                n->mps_notify = mps;
                have_ctrl = true;
            } else if (cls == USB_CLASS_CDC_DATA &&
                       type == USB_ENDPOINT_XFER_BULK) {
                n->data_if = ifn;
                n->data_alt = alt;
                have_data = true;
                if (d[2] & USB_DIR_IN) {
                    n->ep_in = d[2];
                    n->mps_in = mps;
                } else {
                    n->ep_out = d[2];
                    n->mps_out = mps;
                }
            }
            break;
        }
        }
    }
    if (!have_ctrl || !have_data || !n->ep_in || !n->ep_out ||
        !n->mps_in || !n->mps_out) {
        snprintf(why, whylen, "%s: no NCM control interface with an "
                 "interrupt IN endpoint, or no data interface with a bulk "
                 "pair", n->path);
        return -1;
    }
    return 0;
}

static void read_mac(Ncm *n)
{
    uint8_t s[64];
    int len, i, nib = 0;

    /* QEMU's default usb-ncm-dl MAC, in case the string cannot be read */
    memcpy(n->mac, (uint8_t[]){ 0x52, 0x54, 0x00, 0x12, 0x34, 0x56 }, 6);
    /* slirp's own address for 10.0.2.2 until an ARP reply says otherwise */
    memcpy(n->gw_mac, (uint8_t[]){ 0x52, 0x55, 0x0a, 0x00, 0x02, 0x02 }, 6);
    if (!n->mac_index) {
        return;
    }
    len = ctrl(n, USB_DIR_IN, USB_REQ_GET_DESCRIPTOR,
               USB_DT_STRING << 8 | n->mac_index, 0x0409, s, sizeof(s));
    if (len < 2 + 12 * 2) {
        return;
    }
    for (i = 0; i < 12; i++) {
        int c = s[2 + 2 * i], v;

        if (c >= '0' && c <= '9') {
            v = c - '0';
        } else if (c >= 'A' && c <= 'F') {
            v = c - 'A' + 10;
        } else if (c >= 'a' && c <= 'f') {
            v = c - 'a' + 10;
        } else {
            return;
        }
        if (nib & 1) {
            n->mac[nib / 2] |= v;
        } else {
            n->mac[nib / 2] = v << 4;
        }
        nib++;
    }
}

static void read_ntb_parameters(Ncm *n)
{
    uint8_t p[28];
    int len;

    n->ntb_in_max = IN_BUF_MAX;
    n->ntb_out_max = 2048;
    n->out_div = 4;
    n->out_rem = 0;
    n->out_align = 4;
    len = ctrl(n, USB_DIR_IN | USB_TYPE_CLASS | USB_RECIP_INTERFACE,
               NCM_GET_NTB_PARAMETERS, 0, n->ctrl_if, p, sizeof(p));
    if (len < 28) {
        return;
    }
    n->ntb_in_max = le32(p + 4);
    n->ntb_out_max = le32(p + 16);
    if (le16(p + 20) >= 1 && le16(p + 20) <= 256) {
        n->out_div = le16(p + 20);
        n->out_rem = le16(p + 22) % n->out_div;
    }
    if (le16(p + 24) >= 4 && !(le16(p + 24) & (le16(p + 24) - 1))) {
        n->out_align = le16(p + 24);
    }
    if (n->ntb_out_max > OUT_BUF_MAX) {
        n->ntb_out_max = OUT_BUF_MAX;
    }
}

static int get_driver(Ncm *n, unsigned ifn, char *name, size_t len)
{
    struct usbdevfs_getdriver gd = { .interface = ifn };

    if (ioctl(n->fd, USBDEVFS_GETDRIVER, &gd) < 0) {
        snprintf(name, len, "%s", errno == ENODATA ? "none" : strerror(errno));
        return -1;
    }
    snprintf(name, len, "%.*s", (int)len - 1, gd.driver);
    return 0;
}

static int claim_one(Ncm *n, unsigned ifn)
{
    struct usbdevfs_disconnect_claim dc = { .interface = ifn };
    struct usbdevfs_ioctl cmd = {
        .ifno = ifn,
        .ioctl_code = USBDEVFS_DISCONNECT,
    };

    if (ioctl(n->fd, USBDEVFS_DISCONNECT_CLAIM, &dc) == 0) {
        return 0;
    }
    if (errno != ENOTTY && errno != EINVAL) {
        return -errno;
    }
    /* older kernels: disconnect, then claim */
    if (ioctl(n->fd, USBDEVFS_IOCTL, &cmd) < 0 && errno != ENODATA) {
        return -errno;
    }
    return ioctl(n->fd, USBDEVFS_CLAIMINTERFACE, &ifn) < 0 ? -errno : 0;
}

/* Take both interfaces from cdc_ncm and put the data interface in alt 1. */
static int claim(Ncm *n, char *why, size_t whylen)
{
    int r;

    phase("DISCONNECT_CLAIM of both interfaces");
    r = claim_one(n, n->ctrl_if);
    if (!r) {
        r = claim_one(n, n->data_if);
    }
    if (r) {
        snprintf(why, whylen, "cannot take the interfaces from cdc_ncm: %s",
                 strerror(-r));
        return -1;
    }
    n->claimed = true;
    /* a class request to the control interface: ours only now */
    read_ntb_parameters(n);
    phase("SETINTERFACE data alt 1");
    r = set_interface(n, n->data_if, n->data_alt);
    if (r) {
        snprintf(why, whylen, "SETINTERFACE(%u, %u): %s", n->data_if,
                 n->data_alt, strerror(-r));
        return -1;
    }
    return 0;
}

/*
 * Give the interfaces back: release them and let the kernel probe drivers
 * (cdc_ncm binds the control interface and claims the data one).
 */
static int handback(Ncm *n, char *why, size_t whylen)
{
    unsigned ifs[2] = { n->ctrl_if, n->data_if };
    char drv[2][64];
    unsigned i;

    phase("hand back: release and USBDEVFS_CONNECT");
    for (i = 0; i < 2; i++) {
        unsigned ifn = ifs[i];

        if (ioctl(n->fd, USBDEVFS_RELEASEINTERFACE, &ifn) < 0 &&
            errno != EINVAL) {
            vlog("RELEASEINTERFACE %u: %s", ifn, strerror(errno));
        }
    }
    n->claimed = false;
    for (i = 0; i < 2; i++) {
        struct usbdevfs_ioctl cmd = {
            .ifno = ifs[i],
            .ioctl_code = USBDEVFS_CONNECT,
        };

        if (ioctl(n->fd, USBDEVFS_IOCTL, &cmd) < 0) {
            vlog("CONNECT %u: %s", ifs[i], strerror(errno));
        }
    }
    get_driver(n, n->ctrl_if, drv[0], sizeof(drv[0]));
    get_driver(n, n->data_if, drv[1], sizeof(drv[1]));
    if (strcmp(drv[0], "cdc_ncm") || strcmp(drv[1], "cdc_ncm")) {
        snprintf(why, whylen, "after USBDEVFS_CONNECT interface %u has "
                 "driver %s, interface %u %s (want cdc_ncm)",
                 n->ctrl_if, drv[0], n->data_if, drv[1]);
        return -1;
    }
    return 0;
}

static int open_device(Ncm *n, char *why, size_t whylen)
{
    if (find_device(n, why, whylen) < 0) {
        return -1;
    }
    n->fd = open(n->path, O_RDWR | O_CLOEXEC);
    if (n->fd < 0) {
        snprintf(why, whylen, "open %s: %s", n->path, strerror(errno));
        return -1;
    }
    if (parse_descriptors(n, why, whylen) < 0) {
        return -1;
    }
    n->speed = ioctl(n->fd, USBDEVFS_GET_SPEED);
    read_mac(n);
    return 0;
}

/* Frames and NTBs */

static uint16_t ip_csum(const uint8_t *p, size_t len)
{
    uint32_t sum = 0;
    size_t i;

    for (i = 0; i + 1 < len; i += 2) {
        sum += p[i] << 8 | p[i + 1];
    }
    if (len & 1) {
        sum += p[len - 1] << 8;
    }
    while (sum >> 16) {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    return ~sum;
}

static size_t make_arp_request(Ncm *n, uint8_t *f)
{
    memset(f, 0, 60);
    memset(f, 0xff, 6);
    memcpy(f + 6, n->mac, 6);
    put16be(f + 12, 0x0806);
    put16be(f + 14, 1);             /* Ethernet */
    put16be(f + 16, 0x0800);
    f[18] = 6;
    f[19] = 4;
    put16be(f + 20, 1);             /* request */
    memcpy(f + 22, n->mac, 6);
    memcpy(f + 28, guest_ip, 4);
    memcpy(f + 38, gw_ip, 4);
    return 60;
}

static size_t make_icmp_echo(Ncm *n, uint8_t *f, uint16_t seq)
{
    uint8_t *ip = f + 14, *icmp = f + 34;
    size_t i;

    memset(f, 0, 98);
    memcpy(f, n->gw_mac, 6);
    memcpy(f + 6, n->mac, 6);
    put16be(f + 12, 0x0800);
    ip[0] = 0x45;
    put16be(ip + 2, 84);
    put16be(ip + 4, seq);
    ip[8] = 64;
    ip[9] = 1;                      /* ICMP */
    memcpy(ip + 12, guest_ip, 4);
    memcpy(ip + 16, gw_ip, 4);
    put16be(ip + 10, ip_csum(ip, 20));
    icmp[0] = 8;                    /* echo request */
    put16be(icmp + 4, icmp_ident);
    put16be(icmp + 6, seq);
    for (i = 8; i < 64; i++) {
        icmp[i] = i;
    }
    put16be(icmp + 2, ip_csum(icmp, 64));
    return 98;
}

/*
 * An NTB16 with an ARP request and @n_echo ICMP echo requests, padded with
 * zeroes to @pad_to bytes when that is longer (wBlockLength says so too).
 * Datagrams start at wNdpOutDivisor/wNdpOutPayloadRemainder offsets and
 * the NDP at a wNdpOutAlignment one, as the function's parameters ask.
 */
static size_t build_ntb(Ncm *n, uint8_t *b, size_t pad_to, unsigned n_echo,
                        uint16_t *first_seq)
{
    uint8_t frame[128];
    size_t ndp, off, flen, len;
    unsigned i, nd = 1 + n_echo;

    memset(b, 0, 64);
    ndp = (12 + n->out_align - 1) & ~(size_t)(n->out_align - 1);
    off = ndp + 8 + 4 * (nd + 1);
    *first_seq = n->icmp_seq;
    for (i = 0; i < nd; i++) {
        while (off % n->out_div != n->out_rem) {
            b[off++] = 0;
        }
        if (i == 0) {
            flen = make_arp_request(n, frame);
        } else {
            flen = make_icmp_echo(n, frame, n->icmp_seq++);
        }
        memcpy(b + off, frame, flen);
        put16(b + ndp + 8 + 4 * i, off);
        put16(b + ndp + 8 + 4 * i + 2, flen);
        off += flen;
    }
    put16(b + ndp + 8 + 4 * nd, 0);
    put16(b + ndp + 8 + 4 * nd + 2, 0);
    len = off;
    if (pad_to > len) {
        memset(b + len, 0, pad_to - len);
        len = pad_to;
    }
    memcpy(b, "NCMH", 4);
    put16(b + 4, 12);
    put16(b + 6, n->ntb_seq++);
    put16(b + 8, len);
    put16(b + 10, ndp);
    memcpy(b + ndp, "NCM0", 4);
    put16(b + ndp + 4, 8 + 4 * (nd + 1));
    put16(b + ndp + 6, 0);
    return len;
}

static void echo_mark(Ncm *n, uint16_t seq)
{
    n->echo_seen[seq / 8] |= 1 << (seq % 8);
}

static bool echo_was_seen(Ncm *n, uint16_t seq)
{
    return n->echo_seen[seq / 8] & (1 << (seq % 8));
}

static void classify_frame(Ncm *n, const uint8_t *f, size_t len)
{
    uint16_t type;

    n->st.datagrams++;
    if (len < 14) {
        insane(n, "IN datagram of %zu bytes", len);
        return;
    }
    if (!memcmp(f, "\xff\xff\xff\xff\xff\xff", 6)) {
        n->st.to_broadcast++;
    } else if (f[0] & 1) {
        n->st.to_multicast++;
    } else if (!memcmp(f, n->mac, 6)) {
        n->st.to_us++;
    }
    type = f[12] << 8 | f[13];
    if (type == 0x0806 && len >= 42 && f[20] == 0 && f[21] == 1 &&
        !memcmp(f + 38, stranger_ip, 4)) {
        n->st.arp_requests_16++;
        return;
    }
    /* IPv6, ICMPv6 (next header 58) type 134: a router advertisement */
    if (type == 0x86dd && len >= 14 + 40 + 4 && f[14 + 6] == 58 &&
        f[14 + 40] == 134) {
        n->st.router_adverts++;
        return;
    }
    if (type == 0x0806 && len >= 42 && f[20] == 0 && f[21] == 2 &&
        !memcmp(f + 28, gw_ip, 4)) {
        n->st.arp_replies++;
        memcpy(n->gw_mac, f + 22, 6);
        return;
    }
    if (type == 0x0800 && len >= 14 + 20 + 8 && f[14 + 9] == 1 &&
        !memcmp(f + 14 + 12, gw_ip, 4)) {
        const uint8_t *icmp = f + 14 + (f[14] & 15) * 4;

        if (icmp + 8 <= f + len && icmp[0] == 0 &&
            (icmp[4] << 8 | icmp[5]) == icmp_ident) {
            n->st.icmp_replies++;
            echo_mark(n, icmp[6] << 8 | icmp[7]);
            return;
        }
    }
    n->st.other_frames++;
}

/*
 * An NTB that came in (NTB16 or NTB32) must be whole: the header, a chain
 * of NDPs and datagrams inside the block.
 */
static void parse_ntb(Ncm *n, const Xfer *x, const uint8_t *b, size_t len)
{
    bool n32;
    uint32_t block, ndp, hlen;
    unsigned hops = 0;

    if (len < 12) {
        insane(n, "IN #%u (%zu-byte URB) got %zu bytes: not an NTB", x->id,
               x->len, len);
        return;
    }
    if (!memcmp(b, "NCMH", 4)) {
        n32 = false;
        hlen = le16(b + 4);
        block = le16(b + 8);
        ndp = le16(b + 10);
    } else if (!memcmp(b, "ncmh", 4) && len >= 16) {
        n32 = true;
        hlen = le16(b + 4);
        block = le32(b + 8);
        ndp = le32(b + 12);
    } else {
        insane(n, "IN #%u: %zu bytes without an NTH signature "
               "(%02x %02x %02x %02x)", x->id, len, b[0], b[1], b[2], b[3]);
        return;
    }
    if (hlen != (n32 ? 16 : 12) || block > len ||
        (block && block < hlen)) {
        insane(n, "IN #%u: NTH%d wHeaderLength %u, block %u, transfer %zu",
               x->id, n32 ? 32 : 16, hlen, block, len);
        return;
    }
    if (!block) {
        block = len;
    }
    n->st.ntbs++;
    while (ndp) {
        uint32_t nlen, entry, step = n32 ? 8 : 4;

        if (++hops > 16 || ndp % 4 || ndp < hlen ||
            ndp + (n32 ? 16 : 8) > block) {
            insane(n, "IN #%u: NDP at %u in a %u-byte block", x->id, ndp,
                   block);
            return;
        }
        if (memcmp(b + ndp, n32 ? "ncm" : "NCM", 3) ||
            (b[ndp + 3] != '0' && b[ndp + 3] != '1')) {
            insane(n, "IN #%u: no NDP signature at %u", x->id, ndp);
            return;
        }
        nlen = le16(b + ndp + 4);
        if (nlen < (n32 ? 32 : 16) || ndp + nlen > block) {
            insane(n, "IN #%u: NDP wLength %u at %u, block %u", x->id, nlen,
                   ndp, block);
            return;
        }
        for (entry = ndp + (n32 ? 16 : 8); entry + step <= ndp + nlen;
             entry += step) {
            uint32_t di = n32 ? le32(b + entry) : le16(b + entry);
            uint32_t dl = n32 ? le32(b + entry + 4) : le16(b + entry + 2);

            if (!di || !dl) {
                break;
            }
            if (di < hlen || di + dl > block) {
                insane(n, "IN #%u: datagram %u+%u outside the %u-byte block",
                       x->id, di, dl, block);
                return;
            }
            classify_frame(n, b + di, dl);
        }
        ndp = n32 ? le32(b + ndp + 8) : le16(b + ndp + 6);
    }
}

/* URBs */

static Xfer *xfer_new(Ncm *n, XferKind kind, size_t len)
{
    unsigned i;

    for (i = 0; i < MAX_XFERS; i++) {
        Xfer *x = &n->xfers[i];

        if (!x->busy && !x->held) {
            if (!x->buf) {
                x->buf = malloc(IN_BUF_MAX);
                if (!x->buf) {
                    return NULL;
                }
            }
            memset(&x->urb, 0, sizeof(x->urb));
            x->kind = kind;
            x->len = len;
            x->discarded = false;
            x->zlp = false;
            x->n_seq = 0;
            return x;
        }
    }
    return NULL;
}

static int xfer_submit(Ncm *n, Xfer *x)
{
    x->urb.type = x->kind == X_NOTIFY ? USBDEVFS_URB_TYPE_INTERRUPT
                                      : USBDEVFS_URB_TYPE_BULK;
    x->urb.endpoint = x->kind == X_IN ? n->ep_in :
                      x->kind == X_OUT ? n->ep_out : n->ep_notify;
    x->urb.buffer = x->buf;
    x->urb.buffer_length = x->len;
    x->urb.flags = x->zlp ? USBDEVFS_URB_ZERO_PACKET : 0;
    x->urb.usercontext = x;
    x->urb.status = 0;
    x->urb.actual_length = 0;
    x->id = n->next_id++;
    if (ioctl(n->fd, USBDEVFS_SUBMITURB, &x->urb) < 0) {
        int e = errno;

        vlog("submit %s #%u (%zu B): %s", kind_name(x->kind), x->id, x->len,
             strerror(e));
        return -e;
    }
    x->busy = true;
    return 0;
}

static int submit_in(Ncm *n, unsigned slot)
{
    Xfer *x = xfer_new(n, X_IN, n->in_sizes[slot]);

    if (!x) {
        return -ENOMEM;
    }
    x->slot = slot;
    return xfer_submit(n, x);
}

static int submit_notify(Ncm *n)
{
    Xfer *x = xfer_new(n, X_NOTIFY, n->mps_notify ? n->mps_notify : 16);

    return x ? xfer_submit(n, x) : -ENOMEM;
}

/* An OUT NTB of @len bytes (0: as short as it comes) with @n_echo echoes */
static int submit_out(Ncm *n, size_t len, bool zlp, unsigned n_echo)
{
    Xfer *x = xfer_new(n, X_OUT, 0);
    uint16_t seq;

    if (!x) {
        return -ENOMEM;
    }
    x->len = build_ntb(n, x->buf, len, n_echo, &seq);
    x->first_seq = seq;
    x->n_seq = n_echo;
    x->zlp = zlp;
    return xfer_submit(n, x);
}

static unsigned busy_count(Ncm *n, int kind)
{
    unsigned i, c = 0;

    for (i = 0; i < MAX_XFERS; i++) {
        if (n->xfers[i].busy && (kind < 0 || (int)n->xfers[i].kind == kind)) {
            c++;
        }
    }
    return c;
}

/*
 * Bulk IN data as USB delivers it: a transfer that fills its URB with
 * whole packets may stop in the middle of an NTB that the next transfer
 * goes on with (a 512-byte URB and a 712-byte NTB: 512 + 200); a short
 * transfer ends the NTB.  An URB that is not a whole number of packets
 * can only be filled by an NTB that ends there: were there more, the
 * function's packet would not fit and the host controller would report
 * babble (EOVERFLOW).
 */
static void in_data(Ncm *n, const Xfer *x, unsigned got)
{
    bool full = got == x->len, whole_packets = !(x->len % n->mps_in);
    uint32_t block = 0;

    if (n->acc_len + got > sizeof(n->acc)) {
        insane(n, "IN #%u: an NTB longer than %zu bytes across transfers",
               x->id, sizeof(n->acc));
        n->acc_len = 0;
        return;
    }
    memcpy(n->acc + n->acc_len, x->buf, got);
    n->acc_len += got;
    if (n->acc_len >= 12 && !memcmp(n->acc, "NCMH", 4)) {
        block = le16(n->acc + 8);
    } else if (n->acc_len >= 16 && !memcmp(n->acc, "ncmh", 4)) {
        block = le32(n->acc + 8);
    }
    if (full && !whole_packets && block != n->acc_len) {
        insane(n, "IN #%u, a %zu-byte URB (not a whole number of %u-byte "
               "packets), completed with status 0 and %u bytes of a longer "
               "NTB: the function cut it to the URB (a USB function with "
               "more to send babbles: EOVERFLOW)", x->id, x->len,
               n->mps_in, got);
        n->acc_len = 0;
        return;
    }
    if (full && whole_packets && (!block || block > n->acc_len)) {
        return;                 /* the NTB goes on in the next transfer */
    }
    parse_ntb(n, x, n->acc, n->acc_len);
    n->acc_len = 0;
}

static bool is_cancel_status(int e)
{
    return e == ENOENT || e == ECONNRESET || e == ESHUTDOWN || e == ENODEV;
}

static bool is_error_status(int e)
{
    return e == EPIPE || e == EPROTO || e == EILSEQ || e == ETIME ||
           e == EOVERFLOW || e == EREMOTEIO || e == ECOMM || e == ENOSR ||
           e == ETIMEDOUT || e == EXDEV;
}

/* One reaped URB: its status must be one a host controller gives. */
static void completed(Ncm *n, Xfer *x)
{
    int st = x->urb.status, e = -st;
    unsigned got = x->urb.actual_length;

    x->busy = false;
    vlog("%s #%u (%zu B%s%s) -> %s, %u B", kind_name(x->kind), x->id,
         x->len, x->zlp ? ", ZLP" : "", x->discarded ? ", discarded" : "",
         errname(e), got);
    if (st > 0 || got > x->len) {
        insane(n, "%s #%u (%zu B): status %d, actual_length %u",
               kind_name(x->kind), x->id, x->len, st, got);
        return;
    }
    if (st == 0) {
        switch (x->kind) {
        case X_IN:
            n->st.in_done++;
            if (!got && n->acc_len) {
                /* a zero-length packet ends the NTB in the pieces so far */
                parse_ntb(n, x, n->acc, n->acc_len);
                n->acc_len = 0;
            }
            if (x->id < n->st.last_in_id) {
                insane(n, "IN #%u completed after IN #%u", x->id,
                       n->st.last_in_id);
            }
            n->st.last_in_id = x->id;
            if (!got) {
                n->st.in_empty++;
                break;
            }
            n->st.in_data++;
            n->st.in_bytes += got;
            in_data(n, x, got);
            break;
        case X_OUT:
            n->st.out_done++;
            n->st.out_bytes += got;
            if (got != x->len) {
                insane(n, "OUT #%u: %u of %zu bytes sent, status 0", x->id,
                       got, x->len);
            }
            break;
        case X_NOTIFY:
            n->st.notifications++;
            if (got < 8 || x->buf[0] != 0xa1 ||
                (x->buf[1] != CDC_NOTIFY_NETWORK_CONNECTION &&
                 x->buf[1] != CDC_NOTIFY_SPEED_CHANGE)) {
                insane(n, "notification of %u bytes: %02x %02x", got,
                       got ? x->buf[0] : 0, got > 1 ? x->buf[1] : 0);
            }
            break;
        }
        return;
    }
    if (x->kind == X_IN) {
        n->acc_len = 0;         /* an NTB in pieces is lost with it */
    }
    if (is_cancel_status(e)) {
        n->st.cancelled++;
        /* only discarded URBs, or any in a step that disrupts */
        if (!x->discarded && !n->tolerant) {
            insane(n, "%s #%u (%zu B), not discarded: %s", kind_name(x->kind),
                   x->id, x->len, errname(e));
        }
        return;
    }
    if (e == EOVERFLOW && x->kind == X_IN) {
        /* a buffer smaller than the NTB: babble */
        n->st.overflow++;
        note_error(n, e);
        return;
    }
    if (is_error_status(e)) {
        if (e == EPIPE) {
            n->st.stalls++;
        } else {
            n->st.errors++;
        }
        note_error(n, e);
        if (!n->tolerant) {
            insane(n, "%s #%u (%zu B): %s in a step that should not fail "
                   "transfers", kind_name(x->kind), x->id, x->len, errname(e));
        }
        return;
    }
    insane(n, "%s #%u (%zu B): status %d (%s)", kind_name(x->kind), x->id,
           x->len, st, errname(e));
}

/* Reap what has completed; wait up to @ms for the first one. */
static unsigned reap(Ncm *n, int ms)
{
    struct pollfd pfd = { .fd = n->fd, .events = POLLOUT };
    unsigned count = 0;

    if (ms > 0 && poll(&pfd, 1, ms) < 0 && errno != EINTR) {
        insane(n, "poll on %s: %s", n->path, strerror(errno));
    }
    /* bounded: URBs that fail at once must not keep us here */
    while (count < 4 * MAX_XFERS) {
        struct usbdevfs_urb *u = NULL;
        Xfer *x;

        if (ioctl(n->fd, USBDEVFS_REAPURBNDELAY, &u) < 0) {
            if (errno != EAGAIN && errno != ENODEV && errno != EINTR) {
                insane(n, "REAPURBNDELAY: %s", strerror(errno));
            }
            return count;
        }
        x = u ? u->usercontext : NULL;
        if (!x || x < n->xfers || x >= n->xfers + MAX_XFERS || !x->busy) {
            insane(n, "REAPURBNDELAY gave back an URB we do not have queued");
            continue;
        }
        completed(n, x);
        count++;
        /* refill after a success only: an endpoint that fails stays empty */
        if (n->resubmit && !x->urb.status && x->kind == X_IN) {
            submit_in(n, x->slot);
        } else if (n->resubmit && !x->urb.status && x->kind == X_NOTIFY) {
            submit_notify(n);
        }
    }
    return count;
}

static void discard(Ncm *n, Xfer *x)
{
    if (!x->busy) {
        return;
    }
    x->discarded = true;
    /* EINVAL: it completed meanwhile and waits to be reaped */
    if (ioctl(n->fd, USBDEVFS_DISCARDURB, &x->urb) < 0 && errno != EINVAL) {
        vlog("DISCARDURB #%u: %s", x->id, strerror(errno));
    }
}

/*
 * Discard every URB still queued and reap them all.  Returns how many did
 * not come back within DRAIN_MS (a hang), describing them in @why.
 */
static unsigned drain(Ncm *n, char *why, size_t whylen)
{
    int64_t end;
    unsigned i, left;
    size_t l;

    phase("DISCARDURB on every URB still queued, then reap");
    n->resubmit = false;
    for (i = 0; i < MAX_XFERS; i++) {
        discard(n, &n->xfers[i]);
    }
    end = now_ms() + DRAIN_MS;
    while (busy_count(n, -1) && now_ms() < end) {
        reap(n, 100);
    }
    left = busy_count(n, -1);
    if (!left) {
        return 0;
    }
    l = snprintf(why, whylen, "hang: %u URB%s not given back %d s after "
                 "DISCARDURB:", left, left == 1 ? "" : "s", DRAIN_MS / 1000);
    for (i = 0; i < MAX_XFERS && l < whylen; i++) {
        Xfer *x = &n->xfers[i];

        if (x->busy) {
            l += snprintf(why + l, whylen - l, " %s#%u/%zuB",
                          kind_name(x->kind), x->id, x->len);
        }
    }
    return left;
}

static void set_depth(Ncm *n, unsigned depth)
{
    static const size_t sizes[] = { 65536, 512, 1, 16384, 2048 };
    unsigned i;

    n->in_depth = depth;
    for (i = 0; i < depth && i < ARRAY_LEN(n->in_sizes); i++) {
        n->in_sizes[i] = sizes[i % ARRAY_LEN(sizes)];
    }
}

/* Queue the IN slots, a notification URB and @out OUT NTBs. */
static int start_traffic(Ncm *n, unsigned out, char *why, size_t whylen)
{
    unsigned i;
    int r = 0;

    n->resubmit = true;
    for (i = 0; i < n->in_depth && !r; i++) {
        r = submit_in(n, i);
    }
    if (!r) {
        r = submit_notify(n);
    }
    for (i = 0; i < out && !r; i++) {
        r = submit_out(n, 0, false, 1);
    }
    if (r) {
        snprintf(why, whylen, "SUBMITURB failed: %s", strerror(-r));
        return -1;
    }
    return 0;
}

/* Keep the queues full for @ms: IN slots refilled, OUT every 50 ms. */
static void run_traffic(Ncm *n, int ms)
{
    int64_t end = now_ms() + ms, next_out = 0;

    while (now_ms() < end) {
        if (now_ms() >= next_out && busy_count(n, X_OUT) < 4) {
            submit_out(n, 0, false, 1);
            next_out = now_ms() + 50;
        }
        reap(n, 20);
    }
}

/*
 * Fresh URBs after whatever the step did: two 64 KiB IN URBs and an ARP +
 * ICMP echo NTB every 250 ms until 10.0.2.2 answers.
 */
static int check_alive(Ncm *n, char *why, size_t whylen)
{
    unsigned before = n->st.arp_replies + n->st.icmp_replies;
    int64_t end, next = 0;
    unsigned left, i;
    char dwhy[200];

    phase("fresh URBs: is the function still passing traffic?");
    n->tolerant = false;
    n->resubmit = true;
    n->acc_len = 0;
    n->in_sizes[0] = IN_BUF_MAX;
    for (i = 0; i < 2; i++) {
        Xfer *x = xfer_new(n, X_IN, IN_BUF_MAX);

        if (!x || xfer_submit(n, x)) {
            snprintf(why, whylen, "device dead after the step: SUBMITURB "
                     "of a bulk IN URB failed: %s", strerror(errno));
            return -1;
        }
        x->slot = 0;
    }
    end = now_ms() + ALIVE_MS;
    while (now_ms() < end &&
           n->st.arp_replies + n->st.icmp_replies == before) {
        if (now_ms() >= next) {
            if (submit_out(n, 0, true, 1)) {
                snprintf(why, whylen, "device dead after the step: "
                         "SUBMITURB of a bulk OUT URB failed: %s",
                         strerror(errno));
                drain(n, dwhy, sizeof(dwhy));
                return -1;
            }
            next = now_ms() + 250;
        }
        reap(n, 50);
    }
    left = drain(n, dwhy, sizeof(dwhy));
    if (left) {
        snprintf(why, whylen, "after the step, fresh URBs: %s", dwhy);
        return -1;
    }
    if (n->st.insane[0]) {
        snprintf(why, whylen, "after the step, fresh URBs: %s",
                 n->st.insane);
        return -1;
    }
    if (n->st.arp_replies + n->st.icmp_replies == before) {
        snprintf(why, whylen, "device dead after the step: no reply from "
                 "10.0.2.2 within %d s to ARP/ICMP NTBs on fresh URBs "
                 "(OUT done %u, IN done %u, last errors %s)",
                 ALIVE_MS / 1000, n->st.out_done, n->st.in_done,
                 n->st.errlist[0] ? n->st.errlist : "none");
        return -1;
    }
    return 0;
}

static void summary(Ncm *n, char *buf, size_t len)
{
    snprintf(buf, len, "IN %u done (%u with data, %u empty, %u B, %u NTBs, "
             "%u datagrams: %u ARP + %u ICMP replies, %u other), OUT %u done "
             "(%u B), %u notifications, %u cancelled, %u overflow, "
             "%u stalls, %u other errors%s%s",
             n->st.in_done, n->st.in_data, n->st.in_empty, n->st.in_bytes,
             n->st.ntbs, n->st.datagrams, n->st.arp_replies,
             n->st.icmp_replies, n->st.other_frames, n->st.out_done,
             n->st.out_bytes, n->st.notifications, n->st.cancelled,
             n->st.overflow, n->st.stalls, n->st.errors,
             n->st.errlist[0] ? " " : "", n->st.errlist);
}

/*
 * The verdict of a step.  Every URB must come back after DISCARDURB (else
 * a hang); @problem (NULL: none) or the first status no host controller
 * gives is the reason to FAIL; and, unless URBs hang, fresh URBs must get
 * replies from 10.0.2.2 whatever happened before.  0 ok, -1 FAIL; @why
 * says what was seen either way.
 */
static int conclude(Ncm *n, const char *problem, const char *okmsg,
                    char *why, size_t whylen)
{
    char reason[500] = "", s[400], awhy[400] = "";
    unsigned i;
    int alive = -1;

    if (drain(n, reason, sizeof(reason))) {
        summary(n, s, sizeof(s));
        snprintf(why, whylen, "%s; %s", reason, s);
        return -1;
    }
    for (i = 0; i < MAX_XFERS; i++) {
        n->xfers[i].held = false;
    }
    if (problem) {
        snprintf(reason, sizeof(reason), "%s", problem);
    } else if (n->st.insane[0]) {
        snprintf(reason, sizeof(reason), "%s", n->st.insane);
    }
    summary(n, s, sizeof(s));
    n->st.insane[0] = 0;
    alive = check_alive(n, awhy, sizeof(awhy));
    if (!reason[0] && !alive) {
        snprintf(why, whylen, "%s; %s", okmsg, s);
        return 0;
    }
    if (!reason[0]) {
        snprintf(why, whylen, "%s; %s", awhy, s);
    } else if (alive) {
        snprintf(why, whylen, "%s; then: %s; %s", reason, awhy, s);
    } else {
        snprintf(why, whylen, "%s (fresh URBs afterwards got replies); %s",
                 reason, s);
    }
    return -1;
}

static int step_in_depth(Ncm *n, unsigned depth, char *why, size_t whylen)
{
    char sizes[64], ok[128], problem[160];
    size_t l = 0;
    unsigned i;

    set_depth(n, depth);
    for (i = 0; i < depth && l < sizeof(sizes); i++) {
        l += snprintf(sizes + l, sizeof(sizes) - l, "%s%zu", i ? "," : "",
                      n->in_sizes[i]);
    }
    phase("queueing IN, notify and OUT URBs");
    if (start_traffic(n, 4, why, whylen) < 0) {
        return conclude(n, why, "", why, whylen);
    }
    run_traffic(n, 3000);
    drain(n, problem, sizeof(problem));
    problem[0] = 0;
    if (!n->st.arp_replies && !n->st.icmp_replies) {
        snprintf(problem, sizeof(problem), "no reply from 10.0.2.2 came in "
                 "while %u IN URBs (%s B) were queued", depth, sizes);
    }
    snprintf(ok, sizeof(ok), "%u IN URBs in flight (%s B)", depth, sizes);
    return conclude(n, problem[0] ? problem : NULL, ok, why, whylen);
}

static int step_in_1(Ncm *n, char *why, size_t whylen)
{
    return step_in_depth(n, 1, why, whylen);
}

static int step_in_2(Ncm *n, char *why, size_t whylen)
{
    return step_in_depth(n, 2, why, whylen);
}

static int step_in_4(Ncm *n, char *why, size_t whylen)
{
    return step_in_depth(n, 4, why, whylen);
}

static int step_in_6(Ncm *n, char *why, size_t whylen)
{
    return step_in_depth(n, 6, why, whylen);
}

/*
 * OUT NTBs whose length is an exact multiple of wMaxPacketSize: first a
 * batch that ends each with a ZLP (every echo in them must be answered),
 * then the same lengths without (the function may merge those; it must
 * only survive them), four in flight at a time.
 */
static int step_out_odd(Ncm *n, char *why, size_t whylen)
{
    size_t lens[5], base, top;
    unsigned nl = 0, i, batch, answered = 0, asked = 0;
    uint16_t zlp_first = 0, zlp_end = 0;
    char problem[200] = "", ok[200];
    int64_t end;

    /* the smallest multiple that holds the NTB, the next, ..., the most */
    base = (512 + n->mps_out - 1) / n->mps_out * n->mps_out;
    top = n->ntb_out_max / n->mps_out * n->mps_out;
    if (top < 3 * base) {
        snprintf(problem, sizeof(problem), "dwNtbOutMaxSize %u is too "
                 "small for this step", n->ntb_out_max);
        return conclude(n, problem, "", why, whylen);
    }
    lens[nl++] = base;
    lens[nl++] = base + n->mps_out;
    lens[nl++] = 3 * base;
    if (16 * base < top) {
        lens[nl++] = 16 * base;
    }
    lens[nl++] = top;
    set_depth(n, 2);
    n->in_sizes[1] = IN_BUF_MAX;
    phase("queueing IN URBs, then OUT NTBs of wMaxPacketSize multiples");
    if (start_traffic(n, 0, why, whylen) < 0) {
        return conclude(n, why, "", why, whylen);
    }
    for (batch = 0; batch < 2; batch++) {
        bool zlp = batch == 0;

        if (zlp) {
            zlp_first = n->icmp_seq;
        }
        for (i = 0; i < nl; i++) {
            end = now_ms() + DRAIN_MS;
            while (busy_count(n, X_OUT) >= 4 && now_ms() < end) {
                reap(n, 50);
            }
            if (busy_count(n, X_OUT) >= 4) {
                snprintf(problem, sizeof(problem), "4 OUT URBs still queued "
                         "after %d s", DRAIN_MS / 1000);
                return conclude(n, problem, "", why, whylen);
            }
            if (submit_out(n, lens[i], zlp, 2)) {
                snprintf(problem, sizeof(problem), "SUBMITURB of a %zu-byte "
                         "OUT NTB%s: %s", lens[i], zlp ? " with ZLP" : "",
                         strerror(errno));
                return conclude(n, problem, "", why, whylen);
            }
        }
        if (zlp) {
            zlp_end = n->icmp_seq;
        }
        end = now_ms() + 1500;
        while (now_ms() < end) {
            reap(n, 50);
        }
    }
    /* a short NTB ends whatever the ZLP-less batch left open */
    submit_out(n, 0, false, 1);
    run_traffic(n, 500);
    for (i = zlp_first; (uint16_t)i != zlp_end; i = (uint16_t)(i + 1)) {
        asked++;
        answered += echo_was_seen(n, i);
    }
    if (answered != asked) {
        snprintf(problem, sizeof(problem), "%u of %u ICMP echoes in "
                 "ZLP-terminated OUT NTBs of %zu..%zu B (multiples of "
                 "wMaxPacketSize %u) answered", answered, asked, lens[0],
                 lens[nl - 1], n->mps_out);
    }
    snprintf(ok, sizeof(ok), "%u OUT NTB lengths %zu..%zu B (multiples of "
             "%u) with ZLP (%u/%u echoes answered) and without", nl,
             lens[0], lens[nl - 1], n->mps_out, answered, asked);
    return conclude(n, problem[0] ? problem : NULL, ok, why, whylen);
}

static Xfer *submit_held(Ncm *n, XferKind kind, size_t len)
{
    Xfer *x = xfer_new(n, kind, len);

    if (!x) {
        errno = ENOMEM;
        return NULL;
    }
    if (kind == X_OUT) {
        x->len = build_ntb(n, x->buf, 0, 1, &x->first_seq);
    }
    if (xfer_submit(n, x)) {
        return NULL;
    }
    x->held = true;
    return x;
}

/* Traffic until none of @xs[0..@nx) is queued any more, or @ms are up */
static bool wait_done(Ncm *n, Xfer **xs, unsigned nx, int ms)
{
    int64_t end = now_ms() + ms, next = 0;
    unsigned i;
    bool busy = true;

    while (busy && now_ms() < end) {
        if (now_ms() >= next && busy_count(n, X_OUT) < 2) {
            submit_out(n, 0, true, 1);
            next = now_ms() + 100;
        }
        reap(n, 50);
        busy = false;
        for (i = 0; i < nx; i++) {
            busy |= xs[i]->busy;
        }
    }
    return !busy;
}

/*
 * DISCARDURB in the middle of a queue: six IN URBs wait for data, two in
 * the middle are discarded, then traffic must complete the other four, in
 * order.  Then the one the function holds (the first) is discarded with
 * three behind it, and an OUT in the middle of six.
 */
static int step_discard_mid(Ncm *n, char *why, size_t whylen)
{
    Xfer *in[6], *out[6];
    unsigned i, done;
    char problem[300] = "";

    phase("six IN URBs queued, discarding the third and fourth");
    n->resubmit = false;
    for (i = 0; i < 6; i++) {
        in[i] = submit_held(n, X_IN, IN_BUF_MAX);
        if (!in[i]) {
            snprintf(problem, sizeof(problem), "SUBMITURB of IN %u: %s", i,
                     strerror(errno));
            return conclude(n, problem, "", why, whylen);
        }
    }
    reap(n, 300);
    discard(n, in[2]);
    discard(n, in[3]);
    done = n->st.in_done;
    if (!wait_done(n, in, 6, 6000)) {
        snprintf(problem, sizeof(problem), "after DISCARDURB of IN #%u and "
                 "#%u (3rd and 4th of six queued), %u of the other four "
                 "completed in 6 s of traffic (#%u %s, #%u %s, #%u %s, "
                 "#%u %s)", in[2]->id, in[3]->id, n->st.in_done - done,
                 in[0]->id, in[0]->busy ? "queued" : "done",
                 in[1]->id, in[1]->busy ? "queued" : "done",
                 in[4]->id, in[4]->busy ? "queued" : "done",
                 in[5]->id, in[5]->busy ? "queued" : "done");
        return conclude(n, problem, "", why, whylen);
    }
    for (i = 0; i < 6; i++) {
        in[i]->held = false;
    }

    phase("four IN URBs, discarding the first (held by the function)");
    for (i = 0; i < 4; i++) {
        in[i] = submit_held(n, X_IN, IN_BUF_MAX);
        if (!in[i]) {
            snprintf(problem, sizeof(problem), "SUBMITURB of IN %u: %s", i,
                     strerror(errno));
            return conclude(n, problem, "", why, whylen);
        }
    }
    reap(n, 300);
    discard(n, in[0]);
    done = n->st.in_done;
    if (!wait_done(n, in, 4, 6000)) {
        snprintf(problem, sizeof(problem), "after DISCARDURB of IN #%u (the "
                 "first of four queued), %u of the other three completed "
                 "in 6 s of traffic", in[0]->id, n->st.in_done - done);
        return conclude(n, problem, "", why, whylen);
    }
    for (i = 0; i < 4; i++) {
        in[i]->held = false;
    }

    phase("six OUT URBs, discarding the fourth");
    for (i = 0; i < 6; i++) {
        out[i] = submit_held(n, X_OUT, 0);
        if (!out[i]) {
            snprintf(problem, sizeof(problem), "SUBMITURB of OUT %u: %s", i,
                     strerror(errno));
            return conclude(n, problem, "", why, whylen);
        }
    }
    discard(n, out[3]);
    return conclude(n, NULL, "discarded 2 of 6 queued IN URBs, the first "
                    "of 4, the 4th of 6 OUT; the others completed in order",
                    why, whylen);
}

typedef enum Disrupt {
    D_SETIF,            /* USBDEVFS_SETINTERFACE data 0, then 1 */
    D_SETIF_RAW,        /* SET_INTERFACE control requests, usbcore unaware */
    D_SETCONFIG_1,      /* SET_CONFIGURATION(1) control request */
    D_SETCONFIG_0_1,    /* SET_CONFIGURATION(0), then (1) */
    D_RESET,            /* USBDEVFS_RESET */
} Disrupt;

/*
 * Queue IN (four, mixed sizes), OUT and notify URBs, keep traffic going,
 * then pull the rug: the URBs may come back with any status a host
 * controller gives (cancelled, stalled...), but they must come back, and
 * afterwards the function must work again.
 */
static int step_disrupt(Ncm *n, Disrupt d, char *why, size_t whylen)
{
    char problem[300] = "", ok[200];
    int r = 0, r2 = 0;
    const char *what = "";

    set_depth(n, 4);
    n->in_sizes[2] = 2048;      /* no 1-byte URB to hold up the queue */
    phase("queueing IN, notify and OUT URBs");
    if (start_traffic(n, 4, why, whylen) < 0) {
        return conclude(n, why, "", why, whylen);
    }
    run_traffic(n, 800);
    /* OUT URBs in flight at the moment it happens */
    submit_out(n, 0, false, 1);
    submit_out(n, 2 * n->mps_out, false, 1);
    submit_out(n, 0, true, 1);
    n->tolerant = true;
    switch (d) {
    case D_SETIF:
        what = "USBDEVFS_SETINTERFACE";
        phase("USBDEVFS_SETINTERFACE data alt 0 with URBs in flight");
        r = set_interface(n, n->data_if, 0);
        reap(n, 0);
        phase("USBDEVFS_SETINTERFACE data alt 1");
        r2 = set_interface(n, n->data_if, n->data_alt);
        break;
    case D_SETIF_RAW:
        what = "SET_INTERFACE request";
        phase("SET_INTERFACE(data, 0) request with URBs in flight");
        r = raw_set_interface(n, n->data_if, 0);
        reap(n, 0);
        phase("SET_INTERFACE(data, 1) request");
        r2 = raw_set_interface(n, n->data_if, n->data_alt);
        break;
    case D_SETCONFIG_1:
        what = "SET_CONFIGURATION request";
        phase("SET_CONFIGURATION(1) request with URBs in flight");
        r = raw_set_config(n, n->config_value);
        break;
    case D_SETCONFIG_0_1:
        what = "SET_CONFIGURATION request";
        phase("SET_CONFIGURATION(0) request with URBs in flight");
        r = raw_set_config(n, 0);
        reap(n, 0);
        submit_out(n, 0, true, 1);
        reap(n, 100);
        phase("SET_CONFIGURATION(1) request");
        r2 = raw_set_config(n, n->config_value);
        break;
    case D_RESET:
        what = "USBDEVFS_RESET";
        phase("USBDEVFS_RESET with URBs in flight");
        r = ioctl(n->fd, USBDEVFS_RESET) < 0 ? -errno : 0;
        break;
    }
    if (r < 0 || r2 < 0) {
        snprintf(problem, sizeof(problem), "%s failed: %s", what,
                 strerror(r < 0 ? -r : -r2));
    }
    /* whatever is still queued meets more traffic, then goes */
    if (d != D_RESET) {
        run_traffic(n, 1000);
    }
    drain(n, why, whylen);
    if (busy_count(n, -1)) {
        return conclude(n, problem[0] ? problem : NULL, "", why, whylen);
    }
    if (d == D_RESET) {
        char drv[64];

        /* usbcore rebinds cdc_ncm after a reset: take it back */
        get_driver(n, n->ctrl_if, drv, sizeof(drv));
        printf("# %s: after the reset interface %u has driver %s\n",
               cur_step, n->ctrl_if, drv);
        if (claim(n, why, whylen) < 0) {
            snprintf(problem, sizeof(problem), "after the reset: %s", why);
        }
    } else {
        /* usbcore's view and the function's in step again */
        phase("USBDEVFS_SETINTERFACE data 0 then 1 to resynchronise");
        r = set_interface(n, n->data_if, 0);
        if (!r) {
            r = set_interface(n, n->data_if, n->data_alt);
        }
        if (r && !problem[0]) {
            snprintf(problem, sizeof(problem), "SETINTERFACE after the %s: "
                     "%s", what, strerror(-r));
        }
    }
    snprintf(ok, sizeof(ok), "%s with URBs in flight", what);
    return conclude(n, problem[0] ? problem : NULL, ok, why, whylen);
}

static int step_setif(Ncm *n, char *why, size_t whylen)
{
    return step_disrupt(n, D_SETIF, why, whylen);
}

static int step_setif_raw(Ncm *n, char *why, size_t whylen)
{
    return step_disrupt(n, D_SETIF_RAW, why, whylen);
}

static int step_setconfig_1(Ncm *n, char *why, size_t whylen)
{
    return step_disrupt(n, D_SETCONFIG_1, why, whylen);
}

static int step_setconfig_0_1(Ncm *n, char *why, size_t whylen)
{
    return step_disrupt(n, D_SETCONFIG_0_1, why, whylen);
}

static int step_reset(Ncm *n, char *why, size_t whylen)
{
    return step_disrupt(n, D_RESET, why, whylen);
}

/* An ICMP echo request to 10.0.2.2 from an address slirp does not know */
static size_t make_stranger_echo(Ncm *n, uint8_t *f, uint16_t seq)
{
    size_t len = make_icmp_echo(n, f, seq);
    uint8_t *ip = f + 14;

    memcpy(ip + 12, stranger_ip, 4);
    put16be(ip + 10, 0);
    put16be(ip + 10, ip_csum(ip, 20));
    return len;
}

/*
 * An ICMPv6 router solicitation from our link-local address (EUI-64 of the
 * MAC) to ff02::2, with our link-layer address: slirp answers with a
 * router advertisement to ff02::1 (33:33:00:00:00:01), a multicast frame.
 */
static size_t make_router_solicit(Ncm *n, uint8_t *f)
{
    uint8_t *ip = f + 14, *ic = f + 54, ph[40 + 16];
    uint32_t sum = 0;
    size_t i;

    memset(f, 0, 14 + 40 + 16);
    memcpy(f, "\x33\x33\x00\x00\x00\x02", 6);
    memcpy(f + 6, n->mac, 6);
    put16be(f + 12, 0x86dd);
    ip[0] = 0x60;
    put16be(ip + 4, 16);            /* RS + source link-layer option */
    ip[6] = 58;                     /* ICMPv6 */
    ip[7] = 255;                    /* hop limit, as NDP requires */
    ip[8] = 0xfe;
    ip[9] = 0x80;
    ip[16] = n->mac[0] ^ 2;
    ip[17] = n->mac[1];
    ip[18] = n->mac[2];
    ip[19] = 0xff;
    ip[20] = 0xfe;
    ip[21] = n->mac[3];
    ip[22] = n->mac[4];
    ip[23] = n->mac[5];
    ip[24] = 0xff;
    ip[25] = 0x02;
    ip[39] = 0x02;
    ic[0] = 133;                    /* router solicitation */
    ic[8] = 1;                      /* source link-layer address */
    ic[9] = 1;
    memcpy(ic + 10, n->mac, 6);
    /* checksum over the pseudo-header (addresses, length, next header) */
    memcpy(ph, ip + 8, 32);
    memset(ph + 32, 0, 8);
    ph[35] = 16;
    ph[39] = 58;
    memcpy(ph + 40, ic, 16);
    for (i = 0; i < sizeof(ph); i += 2) {
        sum += ph[i] << 8 | ph[i + 1];
    }
    while (sum >> 16) {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    put16be(ic + 2, ~sum);
    return 14 + 40 + 16;
}

/* An OUT NTB16 of the @nf frames given, with a ZLP if it needs one */
static int submit_frames(Ncm *n, uint8_t frames[][128], const size_t *lens,
                         unsigned nf)
{
    Xfer *x = xfer_new(n, X_OUT, 0);
    uint8_t *b;
    size_t ndp, off;
    unsigned i;

    if (!x) {
        return -ENOMEM;
    }
    b = x->buf;
    memset(b, 0, 64);
    ndp = (12 + n->out_align - 1) & ~(size_t)(n->out_align - 1);
    off = ndp + 8 + 4 * (nf + 1);
    for (i = 0; i < nf; i++) {
        while (off % n->out_div != n->out_rem) {
            b[off++] = 0;
        }
        memcpy(b + off, frames[i], lens[i]);
        put16(b + ndp + 8 + 4 * i, off);
        put16(b + ndp + 8 + 4 * i + 2, lens[i]);
        off += lens[i];
    }
    put16(b + ndp + 8 + 4 * nf, 0);
    put16(b + ndp + 8 + 4 * nf + 2, 0);
    memcpy(b, "NCMH", 4);
    put16(b + 4, 12);
    put16(b + 6, n->ntb_seq++);
    put16(b + 8, off);
    put16(b + 10, ndp);
    memcpy(b + ndp, "NCM0", 4);
    put16(b + ndp + 4, 8 + 4 * (nf + 1));
    x->len = off;
    x->zlp = true;
    return xfer_submit(n, x);
}

/* Traffic for up to @ms until *@counter passes @before */
static bool wait_count(Ncm *n, const unsigned *counter, unsigned before, int ms)
{
    int64_t end = now_ms() + ms;

    while (*counter == before && now_ms() < end) {
        reap(n, 50);
    }
    return *counter != before;
}

/*
 * parse_filter: a packet filter value, decimal or 0x-prefixed hex, ending
 * at the end of the string or at white space.  Returns it, or -1 for
 * anything else (empty, a stray character, more than the 5 filter bits).
 */
static int parse_filter(const char *s)
{
    unsigned base = 10, v = 0, d;
    const char *p = s;

    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        base = 16;
        p += 2;
    }
    for (; *p && *p != ' ' && *p != '\n'; p++) {
        if (*p >= '0' && *p <= '9') {
            d = *p - '0';
        } else if (*p >= 'a' && *p <= 'f') {
            d = *p - 'a' + 10;
        } else if (*p >= 'A' && *p <= 'F') {
            d = *p - 'A' + 10;
        } else {
            return -1;
        }
        if (d >= base) {
            return -1;
        }
        v = v * base + d;
        if (v > 0x1f) {
            return -1;
        }
    }
    if (p == s || (base == 16 && p == s + 2)) {
        return -1;
    }
    return v;
}

/*
 * The packet filter the function applies before the host sets one:
 * NCM_POWER_ON_FILTER, else ncm.power_on_filter= on the kernel command
 * line, else DisplayLink's directed + broadcast.  -1 if the value given
 * is not a filter; *@src says where it came from.
 */
static int expected_power_on_filter(const char **src)
{
    static const char key[] = "ncm.power_on_filter=";
    const char *e = getenv("NCM_POWER_ON_FILTER");
    char line[4096];
    const char *p = NULL;
    FILE *f;

    if (e && *e) {
        *src = "NCM_POWER_ON_FILTER";
        return parse_filter(e);
    }
    f = fopen("/proc/cmdline", "r");
    if (f) {
        if (fgets(line, sizeof(line), f)) {
            p = strstr(line, key);
        }
        fclose(f);
    }
    if (p) {
        *src = "ncm.power_on_filter=";
        return parse_filter(p + strlen(key));
    }
    *src = "default";
    return CDC_FILTER_DIRECTED | CDC_FILTER_BROADCAST;  /* DisplayLink */
}

/*
 * The packet filter at power-on.  A USB reset brings back the firmware's
 * own filter; then, without SET_ETHERNET_PACKET_FILTER, a directed frame
 * (ARP reply, echo reply), a broadcast one (slirp's ARP request for an
 * address it does not know) and a multicast one (slirp's router
 * advertisement to ff02::1, the answer to a router solicitation) are
 * asked for.  Directed and broadcast must come; multicast only when the
 * power-on filter has promiscuous or all-multicast (NCM_POWER_ON_FILTER
 * or ncm.power_on_filter= on the kernel command line, default 0x0c).
 * Then SET_ETHERNET_PACKET_FILTER(directed | broadcast | all-multicast),
 * what Linux sends once the interface has joined a group, and the
 * advertisement must come.
 */
static int step_filter(Ncm *n, char *why, size_t whylen)
{
    uint8_t frames[2][128];
    size_t lens[2];
    char problem[400] = "", ok[400], drv[64];
    const char *pof_src;
    int pof = expected_power_on_filter(&pof_src);
    unsigned ra_before, ra_after;
    bool want_mcast, directed, bcast, mcast, mcast_set;
    int r;

    if (pof < 0) {
        snprintf(problem, sizeof(problem), "%s: not a packet filter value "
                 "(0..0x1f)", pof_src);
        return conclude(n, problem, "", why, whylen);
    }
    want_mcast = pof & (CDC_FILTER_PROMISCUOUS | CDC_FILTER_ALL_MULTICAST);
    phase("USBDEVFS_RESET: the firmware's power-on packet filter again");
    if (ioctl(n->fd, USBDEVFS_RESET) < 0) {
        snprintf(problem, sizeof(problem), "USBDEVFS_RESET: %s",
                 strerror(errno));
        return conclude(n, problem, "", why, whylen);
    }
    get_driver(n, n->ctrl_if, drv, sizeof(drv));
    printf("# %s: after the reset interface %u has driver %s\n", cur_step,
           n->ctrl_if, drv);
    if (claim(n, why, whylen) < 0) {
        snprintf(problem, sizeof(problem), "after the reset: %.300s", why);
        return conclude(n, problem, "", why, whylen);
    }
    set_depth(n, 2);
    n->in_sizes[1] = IN_BUF_MAX;
    if (start_traffic(n, 0, why, whylen) < 0) {
        return conclude(n, why, "", why, whylen);
    }

    phase("directed: ARP and ICMP echo to 10.0.2.2");
    submit_out(n, 0, true, 1);
    directed = wait_count(n, &n->st.icmp_replies, n->st.icmp_replies, 3000);

    phase("broadcast: an echo from 10.0.2.16, slirp asks who has it");
    lens[0] = make_stranger_echo(n, frames[0], n->icmp_seq++);
    r = submit_frames(n, frames, lens, 1);
    bcast = !r && wait_count(n, &n->st.arp_requests_16,
                             n->st.arp_requests_16, 3000);

    phase("multicast: router solicitation, the advertisement to ff02::1");
    ra_before = n->st.router_adverts;
    lens[0] = make_router_solicit(n, frames[0]);
    r = submit_frames(n, frames, lens, 1);
    mcast = !r && wait_count(n, &n->st.router_adverts, ra_before, 3000);
    run_traffic(n, 300);

    phase("SET_ETHERNET_PACKET_FILTER directed|broadcast|all-multicast");
    r = ctrl(n, USB_DIR_OUT | USB_TYPE_CLASS | USB_RECIP_INTERFACE,
             CDC_SET_ETHERNET_PACKET_FILTER,
             CDC_FILTER_DIRECTED | CDC_FILTER_BROADCAST |
             CDC_FILTER_ALL_MULTICAST, n->ctrl_if, NULL, 0);
    ra_after = n->st.router_adverts;
    lens[0] = make_router_solicit(n, frames[0]);
    mcast_set = !r && !submit_frames(n, frames, lens, 1) &&
                wait_count(n, &n->st.router_adverts, ra_after, 3000);

    printf("# %s: power-on filter (expected 0x%02x): directed %s, "
           "broadcast %s, multicast %s; after SET_ETHERNET_PACKET_FILTER"
           "(0x0e)%s: multicast %s; frames to us %u, broadcast %u, "
           "multicast %u\n", cur_step, pof, directed ? "in" : "MISSING",
           bcast ? "in" : "MISSING", mcast ? "in" : "filtered",
           r ? " (failed)" : "", mcast_set ? "in" : "MISSING",
           n->st.to_us, n->st.to_broadcast, n->st.to_multicast);
    if (!directed) {
        snprintf(problem, sizeof(problem), "no directed frame (ICMP echo "
                 "reply) before SET_ETHERNET_PACKET_FILTER");
    } else if (!bcast) {
        snprintf(problem, sizeof(problem), "no broadcast frame (slirp's "
                 "ARP request for 10.0.2.16) before "
                 "SET_ETHERNET_PACKET_FILTER");
    } else if (mcast != want_mcast &&
               (want_mcast || !(pof & CDC_FILTER_MULTICAST))) {
        snprintf(problem, sizeof(problem), "multicast before "
                 "SET_ETHERNET_PACKET_FILTER: the router advertisement to "
                 "ff02::1 %s, but the power-on filter 0x%02x %s it",
                 mcast ? "came in" : "did not come",
                 pof, want_mcast ? "passes" : "rejects");
    } else if (r) {
        snprintf(problem, sizeof(problem), "SET_ETHERNET_PACKET_FILTER: %s",
                 strerror(-r));
    } else if (!mcast_set) {
        snprintf(problem, sizeof(problem), "no router advertisement "
                 "(multicast) after SET_ETHERNET_PACKET_FILTER(0x0e)");
    }
    snprintf(ok, sizeof(ok), "power-on filter: directed and broadcast in, "
             "multicast %s (expected 0x%02x); after "
             "SET_ETHERNET_PACKET_FILTER(0x0e) multicast in",
             mcast ? "in" : "filtered", pof);
    return conclude(n, problem[0] ? problem : NULL, ok, why, whylen);
}

typedef struct Step {
    const char *name;
    int (*run)(Ncm *n, char *why, size_t whylen);
    const char *what;
} Step;

static const Step steps[] = {
    { "in-1", step_in_1, "1 bulk IN URB (64 KiB) + OUT URBs in flight" },
    { "in-2", step_in_2, "2 bulk IN URBs (64 KiB, 512 B) + OUT" },
    { "in-4", step_in_4, "4 bulk IN URBs (64 KiB, 512, 1, 16384 B) + OUT" },
    { "in-6", step_in_6, "6 bulk IN URBs (.., 2048 B, 64 KiB) + OUT" },
    { "out-odd", step_out_odd,
      "OUT NTBs of wMaxPacketSize multiples, with and without ZLP" },
    { "discard-mid", step_discard_mid,
      "DISCARDURB in the middle of the IN queue, the held IN URB, an OUT" },
    { "setif", step_setif,
      "USBDEVFS_SETINTERFACE data 0 -> 1 with URBs in flight" },
    { "setif-raw", step_setif_raw,
      "SET_INTERFACE requests data 0 -> 1 with URBs in flight" },
    { "setconfig-1", step_setconfig_1,
      "SET_CONFIGURATION(1) request with URBs in flight" },
    { "setconfig-0-1", step_setconfig_0_1,
      "SET_CONFIGURATION(0) then (1) with URBs in flight" },
    { "reset", step_reset, "USBDEVFS_RESET with URBs in flight" },
    { "filter", step_filter, "packet filter at power-on (after a reset, "
      "no SET_ETHERNET_PACKET_FILTER): directed, broadcast, multicast" },
};

static int usage(void)
{
    fprintf(stderr, "usage: ncm-usbfs-stress [-v] STEP|list|handback|"
            "reset-handback\n");
    return 2;
}

int main(int argc, char **argv)
{
    static Ncm ncm = { .fd = -1 };
    struct sigaction sa = { 0 };
    Ncm *n = &ncm;
    const Step *st = NULL;
    char why[1024] = "", hwhy[300] = "";
    const char *name;
    unsigned i;
    int r, hr;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc > 1 && !strcmp(argv[1], "-v")) {
        verbose = true;
        argv++;
        argc--;
    }
    if (argc != 2) {
        return usage();
    }
    name = argv[1];
    if (!strcmp(name, "list")) {
        for (i = 0; i < ARRAY_LEN(steps); i++) {
            printf("%s\t%s\n", steps[i].name, steps[i].what);
        }
        return 0;
    }
    for (i = 0; i < ARRAY_LEN(steps); i++) {
        if (!strcmp(name, steps[i].name)) {
            st = &steps[i];
        }
    }
    if (!st && strcmp(name, "handback") && strcmp(name, "reset-handback")) {
        return usage();
    }
    cur_step = name;
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    alarm(STEP_ALARM_S);

    if (open_device(n, why, sizeof(why)) < 0) {
        printf("STRESS %s FAIL %s\n", name, why);
        return 1;
    }
    if (!st) {
        if (!strcmp(name, "reset-handback")) {
            phase("USBDEVFS_RESET");
            if (ioctl(n->fd, USBDEVFS_RESET) < 0) {
                printf("# USBDEVFS_RESET: %s\n", strerror(errno));
            }
        }
        hr = handback(n, hwhy, sizeof(hwhy));
        printf("STRESS %s %s%s\n", name, hr ? "FAIL " : "ok", hwhy);
        return hr ? 1 : 0;
    }
    printf("# %s: %s on %s (%04x:%04x, speed %d), control if %u ep 0x%02x, "
           "data if %u alt %u IN 0x%02x/%u OUT 0x%02x/%u, MAC "
           "%02x:%02x:%02x:%02x:%02x:%02x\n", name, st->what, n->path,
           n->vid, n->pid, n->speed, n->ctrl_if, n->ep_notify, n->data_if,
           n->data_alt, n->ep_in, n->mps_in, n->ep_out, n->mps_out,
           n->mac[0], n->mac[1], n->mac[2], n->mac[3], n->mac[4], n->mac[5]);

    r = claim(n, why, sizeof(why));
    if (!r) {
        printf("# %s: NTB in %u out %u, OUT divisor %u+%u align %u\n", name,
               n->ntb_in_max, n->ntb_out_max, n->out_div, n->out_rem,
               n->out_align);
        r = st->run(n, why, sizeof(why));
    }
    printf("STRESS %s %s %s\n", name, r ? "FAIL" : "ok", why);

    /* whatever happened, the function goes back to cdc_ncm */
    if (busy_count(n, -1)) {
        char dwhy[300];

        if (drain(n, dwhy, sizeof(dwhy))) {
            printf("# %s\n", dwhy);
        }
    }
    hr = handback(n, hwhy, sizeof(hwhy));
    printf("STRESS %s/handback %s%s\n", name, hr ? "FAIL " : "ok", hwhy);
    return r || hr ? 1 : 0;
}
