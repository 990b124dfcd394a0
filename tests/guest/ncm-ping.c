/*
 * ncm-ping: a ping that keeps going while the interface disappears
 *
 * Runs inside the test guest (tests/guest/init.sh: the re-enumeration and
 * suspend tests; built static by tests/guest/image.sh).  busybox ping
 * exits at the first failed sendto(), which is what a ping through an
 * interface that has just gone (USB re-enumeration) gets; this one counts
 * the failure and goes on, so that lost pings and the time the link took
 * to come back can be measured.
 *
 *   ncm-ping [-i MS] [-w SECONDS] [-s SIZE] [-f STOPFILE] DEST
 *   ncm-ping -l PORT [-w SECONDS]
 *
 * An ICMP echo request to DEST (IPv4) every MS milliseconds (100) for
 * SECONDS (30) or until STOPFILE exists.  Prints, with times in seconds
 * since boot (CLOCK_BOOTTIME, as /proc/uptime):
 *   "PING gap A..B" for every run of unanswered requests, when the next
 *   reply comes: the last reply before at A, the first after at B, how
 *   many requests went unanswered and how many could not even be sent;
 *   at the end one line
 *   "PING sent=N received=N lost=N send_errors=N longest_gap_ms=N
 *    gap_start=A gap_end=B first=T last=T".
 * Exit status 0 when at least one reply came.
 *
 * -l PORT waits (SECONDS, 30) for one UDP datagram to PORT instead (the
 * host sends it through slirp's hostfwd: a frame from the netdev) and
 * prints "UDP got N bytes from ADDR at T"; exit status 0 when one came.
 *
 * -c COUNT sends COUNT requests of SIZE bytes (up to 65000; the kernel
 * fragments what the MTU does not hold) every MS milliseconds, then waits
 * up to -W SECONDS (5) for the replies still on their way, and prints a
 * summary in busybox ping's words ("N packets transmitted, N packets
 * received, N% packet loss", "round-trip min/avg/max = A/B/C ms") and
 * "PING unanswered seq=..." for the requests without a reply.  busybox
 * ping -c waits one second after its last request when it has had replies
 * before: a reply that a loaded host (TCG under ASan) delays longer is
 * counted lost, and a test of the device failed on it (2026-12-06).
 *
 * -e PORT echoes every UDP datagram to PORT back to its sender for
 * SECONDS (or until STOPFILE exists): the guest end of make soak's
 * sequence-numbered datagrams (tests/guest/soak.py). At the end one line
 * "ECHO received=N sent=N send_errors=N".
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_BOOTTIME, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint16_t csum(const void *data, size_t len)
{
    const uint8_t *p = data;
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
    return htons(~sum);
}

static int usage(void)
{
    fprintf(stderr, "usage: ncm-ping [-i MS] [-w SECONDS] [-s SIZE] "
            "[-f STOPFILE] DEST\n"
            "       ncm-ping -c COUNT [-i MS] [-W SECONDS] [-s SIZE] DEST\n"
            "       ncm-ping -l PORT [-w SECONDS]\n"
            "       ncm-ping -e PORT [-w SECONDS] [-f STOPFILE]\n");
    return 2;
}

static int udp_listen(int port, double duration)
{
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons(port) };
    struct sockaddr_in from;
    socklen_t fl = sizeof(from);
    struct pollfd pfd;
    char buf[2048], ip[32];
    ssize_t n;
    int fd = socket(AF_INET, SOCK_DGRAM, 0);

    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        perror("ncm-ping: UDP socket");
        return 2;
    }
    printf("UDP listening on %d at %.2f\n", port, now_s());
    pfd.fd = fd;
    pfd.events = POLLIN;
    if (poll(&pfd, 1, (int)(duration * 1000)) <= 0) {
        printf("UDP nothing within %.0f s (at %.2f)\n", duration, now_s());
        return 1;
    }
    n = recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);
    inet_ntop(AF_INET, &from.sin_addr, ip, sizeof(ip));
    printf("UDP got %zd bytes from %s at %.2f\n", n, ip, now_s());
    return n >= 0 ? 0 : 1;
}

static int udp_echo(int port, double duration, const char *stopfile)
{
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons(port) };
    struct sockaddr_in from;
    socklen_t fl;
    struct pollfd pfd;
    char buf[2048];
    ssize_t n;
    unsigned received = 0, sent = 0, errors = 0;
    double end = now_s() + duration;
    int fd = socket(AF_INET, SOCK_DGRAM, 0), rcv = 1 << 20;

    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        perror("ncm-ping: UDP socket");
        return 2;
    }
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
    printf("ECHO listening on %d at %.2f\n", port, now_s());
    pfd.fd = fd;
    pfd.events = POLLIN;
    while (now_s() < end && !(stopfile && access(stopfile, F_OK) == 0)) {
        if (poll(&pfd, 1, 200) <= 0) {
            continue;
        }
        for (;;) {
            fl = sizeof(from);
            n = recvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT,
                         (struct sockaddr *)&from, &fl);
            if (n < 0) {
                break;
            }
            received++;
            if (sendto(fd, buf, n, 0, (struct sockaddr *)&from, fl) < 0) {
                errors++;
            } else {
                sent++;
            }
        }
    }
    printf("ECHO received=%u sent=%u send_errors=%u\n", received, sent,
           errors);
    return 0;
}

/*
 * The sequence number of the echo reply to us (@ident) in @buf, an IPv4
 * packet of @n bytes as a raw ICMP socket reads it, or -1
 */
static int echo_reply_seq(const uint8_t *buf, ssize_t n, uint16_t ident)
{
    const struct iphdr *ip = (const struct iphdr *)buf;
    const struct icmphdr *ic;

    if (n < (ssize_t)sizeof(*ip) || n < ip->ihl * 4 + 8) {
        return -1;
    }
    ic = (const struct icmphdr *)(buf + ip->ihl * 4);
    if (ic->type != ICMP_ECHOREPLY || ntohs(ic->un.echo.id) != ident) {
        return -1;
    }
    return ntohs(ic->un.echo.sequence);
}

/* -c COUNT: COUNT requests, then the replies still on their way */
static int count_ping(int fd, const struct sockaddr_in *dst, unsigned count,
                      int interval_ms, int size, double linger)
{
    uint16_t ident = getpid() & 0xffff;
    size_t buf_len = size + 8 + 60 + 8;
    uint8_t *pkt = calloc(1, size + 8), *buf = malloc(buf_len);
    double *sent_at = calloc(count, sizeof(double));
    double next, deadline = 0, tmin = 0, tmax = 0, tsum = 0;
    unsigned sent = 0, received = 0, i;

    if (!pkt || !buf || !sent_at) {
        perror("ncm-ping: malloc");
        return 2;
    }
    next = now_s();
    while (sent < count || (received < sent && now_s() < deadline)) {
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        double t = now_s();
        int wait_ms;

        if (sent < count && t >= next) {
            struct icmphdr *ic = (struct icmphdr *)pkt;

            ic->type = ICMP_ECHO;
            ic->un.echo.id = htons(ident);
            ic->un.echo.sequence = htons(sent);
            ic->checksum = 0;
            ic->checksum = csum(pkt, 8 + size);
            sent_at[sent] = t;
            if (sendto(fd, pkt, 8 + size, 0, (const struct sockaddr *)dst,
                       sizeof(*dst)) < 0) {
                perror("ncm-ping: sendto");
            }
            sent++;
            next += interval_ms / 1000.0;
            deadline = t + linger;
        }
        wait_ms = sent < count ? (int)((next - now_s()) * 1000) + 1 :
                  (int)((deadline - now_s()) * 1000) + 1;
        if (poll(&pfd, 1, wait_ms < 0 ? 0 : wait_ms) <= 0) {
            continue;
        }
        for (;;) {
            ssize_t n = recv(fd, buf, buf_len, MSG_DONTWAIT);
            int s = n < 0 ? -1 : echo_reply_seq(buf, n, ident);
            double rtt;

            if (n < 0) {
                break;
            }
            if (s < 0 || (unsigned)s >= sent || sent_at[s] < 0) {
                continue;       /* not ours, or a duplicate */
            }
            rtt = (now_s() - sent_at[s]) * 1000;
            sent_at[s] = -1;
            if (!received++ || rtt < tmin) {
                tmin = rtt;
            }
            tmax = rtt > tmax ? rtt : tmax;
            tsum += rtt;
        }
    }
    printf("%u packets transmitted, %u packets received, %u%% packet loss\n",
           sent, received, sent ? (sent - received) * 100 / sent : 0);
    if (received) {
        printf("round-trip min/avg/max = %.3f/%.3f/%.3f ms\n", tmin,
               tsum / received, tmax);
    }
    if (received < sent) {
        printf("PING unanswered seq=");
        for (i = 0; i < sent; i++) {
            if (sent_at[i] >= 0) {
                printf("%u ", i);
            }
        }
        printf("(waited %.1f s after the last request)\n", linger);
    }
    return received ? 0 : 1;
}

int main(int argc, char **argv)
{
    int interval_ms = 100, size = 56, opt, fd, listen_port = 0, echo_port = 0;
    double duration = 30, start, end, next, last_reply = 0, first = 0;
    double gap_start = 0, gap_end = 0, longest = 0, linger = 5;
    unsigned count = 0;
    const char *stopfile = NULL;
    struct sockaddr_in dst = { .sin_family = AF_INET };
    unsigned sent = 0, received = 0, send_errors = 0;
    unsigned unanswered = 0, errs_in_gap = 0;
    uint16_t ident = getpid() & 0xffff, seq = 0;
    static uint8_t seen[65536 / 8];
    uint8_t pkt[2048], buf[4096];

    while ((opt = getopt(argc, argv, "c:i:w:W:s:f:l:e:")) != -1) {
        switch (opt) {
        case 'e':
            echo_port = atoi(optarg);
            break;
        case 'l':
            listen_port = atoi(optarg);
            break;
        case 'c':
            count = atoi(optarg);
            break;
        case 'i':
            interval_ms = atoi(optarg);
            break;
        case 'W':
            linger = atof(optarg);
            break;
        case 'w':
            duration = atof(optarg);
            break;
        case 's':
            size = atoi(optarg);
            break;
        case 'f':
            stopfile = optarg;
            break;
        default:
            return usage();
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (echo_port > 0 && optind == argc) {
        return udp_echo(echo_port, duration, stopfile);
    }
    if (listen_port > 0 && optind == argc) {
        return udp_listen(listen_port, duration);
    }
    if (optind != argc - 1 || interval_ms < 1 || size < 8 ||
        size > (count ? 65000 : 1400) || count > 65536 ||
        inet_pton(AF_INET, argv[optind], &dst.sin_addr) != 1) {
        return usage();
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    fd = socket(AF_INET, SOCK_RAW, IPPROTO_ICMP);
    if (fd < 0) {
        perror("ncm-ping: socket");
        return 2;
    }
    if (count) {
        return count_ping(fd, &dst, count, interval_ms, size, linger);
    }
    start = now_s();
    end = start + duration;
    next = start;
    while (now_s() < end && !(stopfile && access(stopfile, F_OK) == 0)) {
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        double t = now_s();
        int wait_ms;

        if (t >= next) {
            struct icmphdr *ic = (struct icmphdr *)pkt;

            memset(pkt, 0, 8 + size);
            ic->type = ICMP_ECHO;
            ic->un.echo.id = htons(ident);
            ic->un.echo.sequence = htons(seq);
            memcpy(pkt + 8, &t, sizeof(t));
            ic->checksum = csum(pkt, 8 + size);
            seen[seq / 8] &= ~(1 << (seq % 8));
            seq++;
            sent++;
            if (sendto(fd, pkt, 8 + size, 0, (struct sockaddr *)&dst,
                       sizeof(dst)) < 0) {
                send_errors++;
                errs_in_gap++;
            }
            unanswered++;
            next += interval_ms / 1000.0;
            if (next < t) {
                next = t + interval_ms / 1000.0;
            }
        }
        wait_ms = (int)((next - now_s()) * 1000) + 1;
        if (wait_ms < 0) {
            wait_ms = 0;
        }
        if (poll(&pfd, 1, wait_ms) <= 0) {
            continue;
        }
        for (;;) {
            ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
            int s;
            double rt;

            if (n < 0) {
                break;
            }
            s = echo_reply_seq(buf, n, ident);
            if (s < 0) {
                continue;
            }
            if (seen[s / 8] & (1 << (s % 8))) {
                continue;       /* a duplicate */
            }
            seen[s / 8] |= 1 << (s % 8);
            received++;
            rt = now_s();
            if (!first) {
                first = rt;
            }
            /* more than one request went unanswered before this reply */
            if (last_reply && unanswered > 2) {
                printf("PING gap %.2f..%.2f: %.0f ms, %u requests "
                       "unanswered, %u not sent\n", last_reply, rt,
                       (rt - last_reply) * 1000, unanswered - 1,
                       errs_in_gap);
            }
            if (last_reply && rt - last_reply > longest) {
                longest = rt - last_reply;
                gap_start = last_reply;
                gap_end = rt;
            }
            last_reply = rt;
            unanswered = 0;
            errs_in_gap = 0;
        }
    }
    /* the replies to the last requests may still be on their way */
    usleep(300 * 1000);
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        int s;

        if (n < 0) {
            break;
        }
        s = echo_reply_seq(buf, n, ident);
        if (s >= 0 && !(seen[s / 8] & (1 << (s % 8)))) {
            seen[s / 8] |= 1 << (s % 8);
            received++;
        }
    }
    printf("PING sent=%u received=%u lost=%u send_errors=%u "
           "longest_gap_ms=%.0f gap_start=%.2f gap_end=%.2f first=%.2f "
           "last=%.2f\n", sent, received, sent - received, send_errors,
           longest * 1000, gap_start, gap_end, first, last_reply);
    return received ? 0 : 1;
}
