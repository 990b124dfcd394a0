#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Follow a QEMU process from outside: find it as the peer of one of its QMP
# sockets (so that it works whatever wraps it: timeout, ip netns exec),
# write its pid to PIDFILE ("-": none), then every PERIOD seconds write one
# line to OUTFILE: host time (CLOCK_REALTIME), QEMU's CPU seconds so far
# (utime + stime of the process, all threads), its RSS in KiB. Stops when
# the process is gone or after TIMEOUT seconds. scripts/bench/bench-report.py
# cuts these into the guest's phases (CPU seconds per GB moved, RSS idle
# and under load); scripts/bench/profile.sh attaches perf to the pid.
#
#   bench-proc-sampler.py SOCKET OUTFILE PIDFILE TIMEOUT [PERIOD]
import os
import socket
import struct
import sys
import time


def peer_pid(path, deadline):
    while time.time() < deadline:
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
        except OSError:
            time.sleep(0.05)
            continue
        cred = s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                            struct.calcsize("3i"))
        s.close()
        return struct.unpack("3i", cred)[0]
    return None


def sample(pid, ticks):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    rss = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
                break
    return cpu, rss


def main():
    path, out, pidfile = sys.argv[1], sys.argv[2], sys.argv[3]
    timeout = float(sys.argv[4])
    period = float(sys.argv[5]) if len(sys.argv) > 5 else 0.25
    deadline = time.time() + timeout
    pid = peer_pid(path, deadline)
    if pid is None:
        sys.exit(f"bench-proc-sampler: nothing listened on {path}")
    if pidfile != "-":
        with open(pidfile + ".tmp", "w") as f:
            f.write(f"{pid}\n")
        os.rename(pidfile + ".tmp", pidfile)
    ticks = os.sysconf("SC_CLK_TCK")
    with open(out, "w") as f:
        while time.time() < deadline:
            try:
                cpu, rss = sample(pid, ticks)
            except (OSError, IndexError, ValueError):
                break
            f.write(f"{time.time():.3f} {cpu:.2f} {rss}\n")
            f.flush()
            time.sleep(period)


if __name__ == "__main__":
    main()
