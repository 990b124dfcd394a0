/*
 * QTest testcase for a frame of no bytes sent through the net layer
 *
 * qemu_send_packet_async() returns the size of a frame it drops (the
 * netdev has no peer, or its link is down) and 0 for one it queued, after
 * which a backend stops reading until the queued frame's callback; and a
 * receiver returns the size of what it took, which a hub passes back.  A
 * frame of no bytes returned 0 either way, got no callback, and the
 * backend never read its socket again: every frame after it was lost
 * (found by usb-ncm-dl's fuzzer, whose netdev is a socket pair and whose
 * device is unplugged and plugged again while frames arrive).
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include <poll.h>
#include <sys/ioctl.h>
#include "qemu/bswap.h"
#include "libqtest.h"
#include "qobject/qdict.h"

#define READ_TIMEOUT_S  30

/* Bytes written to @fd that the peer has not read yet */
static int unread(int fd)
{
    int n = -1;

    g_assert_cmpint(ioctl(fd, TIOCOUTQ, &n), ==, 0);
    return n;
}

/* Wait until QEMU has read everything written to @fd; false on timeout */
static bool wait_read(int fd)
{
    gint64 deadline = g_get_monotonic_time() +
                      READ_TIMEOUT_S * G_USEC_PER_SEC;

    while (unread(fd) > 0) {
        if (g_get_monotonic_time() > deadline) {
            return false;
        }
        g_usleep(10 * 1000);
    }
    return true;
}

/* One frame as the socket protocol frames it: a big-endian length, bytes */
static void send_frame(int fd, size_t len)
{
    g_autofree uint8_t *buf = g_malloc0(len + 4);

    stl_be_p(buf, len);
    if (len >= 12) {
        memset(buf + 4, 0xff, 6);               /* broadcast */
        memcpy(buf + 10, "\x52\x54\x00\x12\x34\x56", 6);
    }
    g_assert_cmpint(send(fd, buf, len + 4, 0), ==, len + 4);
}

typedef enum {
    PEER_REMOVED,       /* its peer, a hub's port, deleted: no peer */
    PEER_LINK_DOWN,     /* its peer a hub's port, its link set down */
    PEER_HUB,           /* a hub, whose other port is a socket too */
} Peer;

/* Wait for a frame of @len bytes on @fd, as the socket protocol frames it */
static void expect_frame(int fd, size_t len)
{
    g_autofree uint8_t *buf = g_malloc(len + 4);
    size_t got = 0;

    while (got < len + 4) {
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        ssize_t n;

        g_assert_cmpint(poll(&pfd, 1, READ_TIMEOUT_S * 1000), ==, 1);
        n = recv(fd, buf + got, len + 4 - got, 0);
        g_assert_cmpint(n, >, 0);
        got += n;
    }
    g_assert_cmpuint(ldl_be_p(buf), ==, len);
}

/* @netdev: the -netdev option, with "%d" for QEMU's end of the pair */
static void run_zero_length(const char *netdev, Peer peer)
{
    g_autofree char *opt = NULL;
    QTestState *qts;
    int sv[2], other[2];

    g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), ==, 0);
    g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM, 0, other), ==, 0);
    opt = g_strdup_printf(netdev, sv[1]);
    qts = qtest_initf("-machine none -nodefaults %s"
                      " -netdev hubport,id=h0,hubid=0,netdev=n0"
                      " -netdev socket,id=n1,fd=%d"
                      " -netdev hubport,id=h1,hubid=0,netdev=n1",
                      opt, other[1]);
    close(other[1]);
    if (peer == PEER_REMOVED) {
        /* as a NIC's unplug does, netdev_del leaves n0 without a peer */
        qtest_qmp_assert_success(qts, "{'execute': 'netdev_del',"
                                 " 'arguments': {'id': 'h0'}}");
    } else if (peer == PEER_LINK_DOWN) {
        qtest_qmp_assert_success(qts, "{'execute': 'set_link', 'arguments':"
                                 " {'name': 'n0', 'up': false}}");
    }
    close(sv[1]);

    /* a frame before the empty one: read, and dropped or passed on */
    send_frame(sv[0], 60);
    g_assert_true(wait_read(sv[0]));
    send_frame(sv[0], 0);
    g_assert_true(wait_read(sv[0]));
    /*
     * The frames after it must be read too, each on its own: the read
     * that brings the next frame's bytes is the one that finishes the
     * empty frame (nothing followed its length before), and it reads
     * that next frame as well.
     */
    send_frame(sv[0], 60);
    g_assert_true(wait_read(sv[0]));
    send_frame(sv[0], 1514);
    g_assert_true(wait_read(sv[0]));
    if (peer == PEER_HUB) {
        /* the hub passed on the three frames, and no empty one */
        expect_frame(other[0], 60);
        expect_frame(other[0], 60);
        expect_frame(other[0], 1514);
    }

    qtest_quit(qts);
    close(sv[0]);
    close(other[0]);
}

#define SOCKET_FD   "-netdev socket,id=n0,fd=%d"
#define STREAM_FD   "-netdev stream,id=n0,server=off,addr.type=fd,addr.str=%d"

static void test_socket_removed(void)
{
    run_zero_length(SOCKET_FD, PEER_REMOVED);
}

static void test_socket_link_down(void)
{
    run_zero_length(SOCKET_FD, PEER_LINK_DOWN);
}

static void test_stream_removed(void)
{
    run_zero_length(STREAM_FD, PEER_REMOVED);
}

static void test_stream_link_down(void)
{
    run_zero_length(STREAM_FD, PEER_LINK_DOWN);
}

static void test_socket_hub(void)
{
    run_zero_length(SOCKET_FD, PEER_HUB);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    qtest_add_func("/netdev/zero-length/socket/peer-removed",
                   test_socket_removed);
    qtest_add_func("/netdev/zero-length/socket/link-down",
                   test_socket_link_down);
    qtest_add_func("/netdev/zero-length/stream/peer-removed",
                   test_stream_removed);
    qtest_add_func("/netdev/zero-length/stream/link-down",
                   test_stream_link_down);
    qtest_add_func("/netdev/zero-length/socket/hub", test_socket_hub);
    return g_test_run();
}
