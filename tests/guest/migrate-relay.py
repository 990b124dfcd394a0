#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The network of tests/guest/run-migrate-test.sh: a two-port learning
# "switch" between one tap device and the QEMU processes of a live
# migration, each connected with
#   -netdev stream,id=n0,server=off,addr.type=unix,addr.path=SOCKET
# (frames as a 4-byte big-endian length and the frame, as -netdev stream
# and -netdev socket send them).
#
# Why not the tap in both QEMUs: a tap without multi_queue takes one open
# file only (the destination's TUNSETIFF fails with EBUSY while the source
# holds it), and with multi_queue the kernel spreads the flows over both
# queues, the paused destination's included. Slirp on both sides loses
# every TCP connection (its state does not migrate). Here both QEMUs get
# the same command line, and the relay does what a real switch does when a
# VM moves: the host's frames go to the QEMU that last sent a frame (the
# first one to connect until then). The destination sends as soon as it
# runs: QEMU announces every NIC (a RARP) when an incoming migration
# completes, and the guest's upload follows.
#
#   migrate-relay.py TAP SOCKET
#
# Runs until SIGTERM/SIGINT; logs connections, switches (with the time
# since the previous frame from the host, the delay a real switch would
# add) and counters to stderr. Needs CAP_NET_ADMIN for the tap (run it in
# the network namespace that holds TAP).
import errno
import fcntl
import os
import selectors
import signal
import socket
import struct
import sys
import time

TUNSETIFF = 0x400454ca
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000
MAX_PENDING = 8 << 20       # bytes queued for one QEMU before frames drop

T0 = time.monotonic()


def log(msg):
    print(f"[{time.time():.3f} +{time.monotonic() - T0:8.3f}] {msg}",
          file=sys.stderr, flush=True)


class Conn:
    seq = 0

    def __init__(self, sock):
        Conn.seq += 1
        self.id = Conn.seq
        self.sock = sock
        self.rbuf = bytearray()
        self.wbuf = bytearray()
        self.rx_frames = 0      # from this QEMU to the tap
        self.tx_frames = 0      # from the tap to this QEMU
        self.dropped = 0
        self.last_rx = 0.0


class Relay:
    def __init__(self, tap, path):
        self.tap = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
        fcntl.ioctl(self.tap, TUNSETIFF,
                    struct.pack("16sH", tap.encode(), IFF_TAP | IFF_NO_PI))
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        self.lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.lsock.bind(path)
        self.lsock.listen(4)
        self.lsock.setblocking(False)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.lsock, selectors.EVENT_READ, "listen")
        self.sel.register(self.tap, selectors.EVENT_READ, "tap")
        self.conns = []
        self.active = None
        self.tap_rx = 0         # frames read from the tap
        self.tap_drop = 0       # ... with no QEMU to take them
        self.tap_wdrop = 0      # frames the tap refused
        self.last_tap_rx = 0.0
        self.stop = False
        log(f"relay: {tap} <-> {path}")

    def set_active(self, c, why):
        old = self.active
        self.active = c
        if old is c:
            return
        gap = ""
        if self.last_tap_rx:
            gap = f"; last host frame {1000 * (time.monotonic() - self.last_tap_rx):.0f} ms ago"
        log(f"switch: host frames now go to QEMU #{c.id if c else '-'}"
            f" (was #{old.id if old else '-'}): {why}{gap}")

    def want_write(self, c):
        ev = selectors.EVENT_READ
        if c.wbuf:
            ev |= selectors.EVENT_WRITE
        self.sel.modify(c.sock, ev, c)

    def accept(self):
        s, _ = self.lsock.accept()
        s.setblocking(False)
        c = Conn(s)
        self.conns.append(c)
        self.sel.register(s, selectors.EVENT_READ, c)
        log(f"connect: QEMU #{c.id}")
        if self.active is None:
            self.set_active(c, "first QEMU")

    def close(self, c, why):
        log(f"disconnect: QEMU #{c.id} ({why}); from it {c.rx_frames} frames,"
            f" to it {c.tx_frames} (+{c.dropped} dropped, {len(c.wbuf)} bytes unsent)")
        self.sel.unregister(c.sock)
        c.sock.close()
        self.conns.remove(c)
        if self.active is c:
            nxt = max(self.conns, key=lambda x: (x.last_rx, x.id), default=None)
            self.set_active(nxt, f"QEMU #{c.id} went away")

    def from_tap(self):
        c = self.active
        for _ in range(256):
            try:
                frame = os.read(self.tap, 65536)
            except BlockingIOError:
                break
            self.tap_rx += 1
            self.last_tap_rx = time.monotonic()
            if c is None:
                self.tap_drop += 1
            elif len(c.wbuf) > MAX_PENDING:
                c.dropped += 1
            else:
                c.wbuf += struct.pack(">I", len(frame)) + frame
                c.tx_frames += 1
        if c is not None and c.wbuf:
            self.flush(c)

    def flush(self, c):
        try:
            n = c.sock.send(c.wbuf)
            del c.wbuf[:n]
        except BlockingIOError:
            pass
        except OSError as e:
            self.close(c, f"send: {e}")
            return
        self.want_write(c)

    def from_qemu(self, c):
        try:
            data = c.sock.recv(1 << 20)
        except BlockingIOError:
            return
        except OSError as e:
            self.close(c, f"recv: {e}")
            return
        if not data:
            self.close(c, "EOF")
            return
        c.rbuf += data
        buf = c.rbuf
        off = 0
        while len(buf) - off >= 4:
            (n,) = struct.unpack_from(">I", buf, off)
            if len(buf) - off - 4 < n:
                break
            frame = bytes(buf[off + 4:off + 4 + n])
            off += 4 + n
            c.rx_frames += 1
            c.last_rx = time.monotonic()
            if self.active is not c:
                etype = frame[12:14].hex() if len(frame) >= 14 else "?"
                self.set_active(c, f"it sent a frame (ethertype 0x{etype},"
                                   f" {n} bytes)")
            try:
                os.write(self.tap, frame)
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.ENOBUFS, errno.EIO):
                    raise
                self.tap_wdrop += 1
        del buf[:off]

    def run(self):
        while not self.stop:
            for key, ev in self.sel.select(1.0):
                what = key.data
                if what == "listen":
                    self.accept()
                elif what == "tap":
                    self.from_tap()
                else:
                    if what not in self.conns:
                        continue
                    if ev & selectors.EVENT_WRITE:
                        self.flush(what)
                    if what in self.conns and ev & selectors.EVENT_READ:
                        self.from_qemu(what)
        for c in list(self.conns):
            self.close(c, "relay stopping")
        log(f"relay: from the tap {self.tap_rx} frames ({self.tap_drop} with"
            f" no QEMU connected), {self.tap_wdrop} refused by the tap")


def main():
    if len(sys.argv) != 3:
        raise SystemExit("usage: migrate-relay.py TAP SOCKET")
    relay = Relay(sys.argv[1], sys.argv[2])

    def stop(*_):
        relay.stop = True
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    relay.run()


if __name__ == "__main__":
    main()
