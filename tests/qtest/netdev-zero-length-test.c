/*
 * QTest testcase for a frame of no bytes on the length-prefixed socket
 * protocol of -netdev socket and -netdev stream
 *
 * qemu_send_packet_async() returns the size of a frame it drops (the
 * netdev has no peer, or its link is down) and 0 for one it queued, after
 * which the backend stops reading until the queued frame's callback.  A
 * dropped frame of no bytes returned 0 and got no callback: the backend
 * never read its socket again, and every frame after it was lost (found
 * by usb-ncm-dl's fuzzer, whose netdev is a socket pair and whose device
 * is unplugged and plugged again while frames arrive).
 *
 * Copyright (c) 2026 The usb-ncm-dl authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
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
} Peer;

/* @netdev: the -netdev option, with "%d" for QEMU's end of the pair */
static void run_zero_length(const char *netdev, Peer peer)
{
    g_autofree char *opt = NULL;
    QTestState *qts;
    int sv[2];

    g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), ==, 0);
    opt = g_strdup_printf(netdev, sv[1]);
    qts = qtest_initf("-machine none -nodefaults %s"
                      " -netdev hubport,id=h0,hubid=0,netdev=n0", opt);
    if (peer == PEER_REMOVED) {
        /* as a NIC's unplug does, netdev_del leaves n0 without a peer */
        qtest_qmp_assert_success(qts, "{'execute': 'netdev_del',"
                                 " 'arguments': {'id': 'h0'}}");
    } else {
        qtest_qmp_assert_success(qts, "{'execute': 'set_link', 'arguments':"
                                 " {'name': 'n0', 'up': false}}");
    }
    close(sv[1]);

    /* a frame before the empty one is read and dropped */
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

    qtest_quit(qts);
    close(sv[0]);
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
    return g_test_run();
}
