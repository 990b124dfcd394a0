#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# ncm-ping -c (tests/guest/ncm-ping.c), the guest's counted ping that
# run_ping (tests/guest/init.d/net.sh) reads with busybox ping's patterns.
# Built for the host and run in a network namespace of its own: against
# loopback, against a blackhole route, and against a tun device whose
# replies this test writes itself, one of them 1.2 s late.  A late reply
# must count as received (busybox ping -c gave up one second after its
# last request, which failed a guest test on a loaded host).
import os
import re
import select
import shutil
import struct
import subprocess
import tempfile
import time
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SRC = os.path.join(TOP, 'tests', 'guest', 'ncm-ping.c')

# What run_ping takes from the output (its sed expressions, in Python)
RECEIVED = re.compile(r', (\d+) packets received')
LOSS = re.compile(r' ([0-9.]+)% packet loss')
RTT = re.compile(r'min/avg/max = ([0-9.]+)/([0-9.]+)/([0-9.]+) ms')

# Run inside the namespace: a tun device at 10.9.7.1 whose peer, 10.9.7.2,
# is this script; it answers echo requests, the one with sequence number
# DELAY_SEQ after DELAY seconds, while ncm-ping runs.
TUN_RESPONDER = r"""
import fcntl, os, select, struct, subprocess, sys, time

def csum(b):
    if len(b) % 2:
        b += b'\0'
    s = sum(struct.unpack('!%dH' % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff

ping, delay_seq, delay = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
fd = os.open('/dev/net/tun', os.O_RDWR)
fcntl.ioctl(fd, 0x400454ca, struct.pack('16sH', b'tun0', 0x0001 | 0x1000))
for c in ('ip addr add 10.9.7.1 peer 10.9.7.2 dev tun0',
          'ip link set tun0 up'):
    subprocess.run(c.split(), check=True)
p = subprocess.Popen([ping, '-c', '3', '-i', '100', '-W', '3', '10.9.7.2'],
                     stdout=subprocess.PIPE, text=True)
held = []
while p.poll() is None:
    r, _, _ = select.select([fd], [], [], 0.05)
    if r:
        pkt = bytearray(os.read(fd, 65536))
        ihl = (pkt[0] & 15) * 4
        if pkt[9] == 1 and pkt[ihl] == 8:
            pkt[12:16], pkt[16:20] = pkt[16:20], pkt[12:16]
            pkt[ihl] = 0
            pkt[ihl + 2:ihl + 4] = b'\0\0'
            pkt[ihl + 2:ihl + 4] = struct.pack('!H', csum(bytes(pkt[ihl:])))
            pkt[10:12] = b'\0\0'
            pkt[10:12] = struct.pack('!H', csum(bytes(pkt[:ihl])))
            seq = struct.unpack('!H', pkt[ihl + 6:ihl + 8])[0]
            held.append((time.time() + (delay if seq == delay_seq else 0),
                         bytes(pkt)))
    for due, pkt in [h for h in held if h[0] <= time.time()]:
        os.write(fd, pkt)
        held.remove((due, pkt))
sys.stdout.write(p.stdout.read())
sys.exit(p.returncode)
"""


def _can_run():
    return (os.geteuid() == 0 and shutil.which('ip') and shutil.which('gcc')
            and os.path.exists('/dev/net/tun'))


@unittest.skipUnless(_can_run(), 'needs root, ip, gcc and /dev/net/tun')
class NcmPingCountTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.ping = os.path.join(cls.tmp.name, 'ncm-ping')
        subprocess.run(['gcc', '-O2', '-Wall', '-Wextra', '-Werror', '-o',
                        cls.ping, SRC], check=True)
        cls.ns = 'ncm-ping-test-%d' % os.getpid()
        subprocess.run(['ip', 'netns', 'add', cls.ns], check=True)
        for c in ('ip link set lo up',
                  'ip route add blackhole 10.9.8.0/24'):
            cls.netns(c.split())

    @classmethod
    def tearDownClass(cls):
        subprocess.run(['ip', 'netns', 'del', cls.ns])
        cls.tmp.cleanup()

    @classmethod
    def netns(cls, argv, check=True):
        return subprocess.run(['ip', 'netns', 'exec', cls.ns] + argv,
                              capture_output=True, text=True, check=check,
                              timeout=60)

    def test_every_reply_counted_in_busybox_words(self):
        out = self.netns([self.ping, '-c', '5', '-i', '20', '-s', '8000',
                          '127.0.0.1']).stdout
        self.assertIn('5 packets transmitted', out)
        self.assertEqual(RECEIVED.search(out).group(1), '5')
        self.assertEqual(LOSS.search(out).group(1), '0')
        lo, avg, hi = (float(v) for v in RTT.search(out).groups())
        self.assertTrue(0 <= lo <= avg <= hi, out)
        self.assertNotIn('unanswered', out)

    def test_unanswered_requests_named(self):
        t0 = time.monotonic()
        r = self.netns([self.ping, '-c', '3', '-i', '20', '-W', '0.5',
                        '10.9.8.1'], check=False)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertEqual(RECEIVED.search(r.stdout).group(1), '0')
        self.assertEqual(LOSS.search(r.stdout).group(1), '100')
        self.assertIn('PING unanswered seq=0 1 2 ', r.stdout)
        self.assertGreaterEqual(time.monotonic() - t0, 0.5)

    def test_a_late_reply_is_not_a_loss(self):
        r = self.netns(['python3', '-c', TUN_RESPONDER, self.ping, '2',
                        '1.2'], check=False)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(RECEIVED.search(r.stdout).group(1), '3', r.stdout)
        hi = float(RTT.search(r.stdout).group(3))
        self.assertGreaterEqual(hi, 1200, r.stdout)


if __name__ == '__main__':
    unittest.main()
