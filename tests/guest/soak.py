#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The host side of make soak (tests/guest/run-soak.sh starts it inside its
# private network namespace, where tap0 = 10.0.2.2 reaches the guest through
# tests/guest/migrate-relay.py). It
#   - boots the guest (generation 0: QEMU from the NUL-separated command
#     line in CMDFILE, console into LOGDIR/console-0.log, QMP in RUNDIR);
#   - once the guest's traffic runs (NCMTEST phase=soak-traffic, see
#     tests/guest/init-soak.sh): sends numbered UDP datagrams (RATE a
#     second, 64 bytes) to the guest's echo at 10.0.2.15:7777 and counts
#     what comes back, and pings the guest every 50 ms (ping -D);
#   - rotates faults over QMP qom-set every FAULT_EVERY seconds, on a
#     usb-ncm-fault object (link-down-ms, busy-ms, drop-in-every for a
#     few seconds, corrupt-in, replug-ms), each with the
#     device's x-stats before and after;
#   - live-migrates the guest every MIGRATE_EVERY seconds to a new QEMU
#     started with -incoming (tests/guest/migrate-qmp.py; the source
#     quits);
#   - samples each QEMU's VmRSS (/proc/PID/status) every 2 s;
#   - stamps the guest's own events (NCMTEST soak_ev=..., netwatch=...)
#     with the host clock as it reads them from the console.
# At the end every lost datagram and ping is put against the event whose
# window (from its start - PRE s to its end + GRACE s) holds its send time,
# with the counters that changed in it; what no event explains is a
# failure. Prints "PASS: soak/..." / "FAIL: soak/..." lines and a summary;
# exit status 1 when anything failed.
#
#   soak.py --cmd CMDFILE --run RUNDIR --log LOGDIR --seconds N
#           [--migrate-every S] [--fault-every S] [--rate N]
#           [--faults link-down,busy,drop-in,corrupt,replug]
#           [--rss-limit-mb N]
import argparse
import json
import os
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qmplib import Qmp  # noqa: E402

GUEST = "10.0.2.15"
HOST = "10.0.2.2"
ECHO_PORT = 7777
QOM = "/machine/peripheral/ncm0"
PRE = 1.0           # a datagram sent this long before an event may die in it
GRACE = 2.5         # and this long after its end (RTT, carrier, ARP)
CORRUPTIONS = ["ndp-at-end", "datagram-offset-wrap", "ndp-chain-loop",
               "block-length-over-input-size", "short-notification"]
# counters that explain a loss
FAULT_COUNTERS = ["link_down_drops", "fault_dropped_in_ntbs",
                  "fault_corrupted_in_ntbs", "replugs", "rx_inactive_drops",
                  "in_flushed_datagrams", "in_babbles", "rx_oversize",
                  "out_merge_lost_datagrams", "bad_requests"]

T0 = time.time()
LOGF = None


def log(msg):
    line = f"[{time.time() - T0:7.1f}s] {msg}"
    print(line, flush=True)
    if LOGF:
        LOGF.write(line + "\n")
        LOGF.flush()


class Gen:
    """One QEMU process of the run."""

    def __init__(self, idx, a, base, incoming=None):
        self.idx = idx
        self.console = os.path.join(a.log, f"console-{idx}.log")
        self.qmp_path = os.path.join(a.run, f"q{idx}.qmp")
        self.pidfile = os.path.join(a.run, f"q{idx}.pid")
        cmd = base + ["-qmp", f"unix:{self.qmp_path},server=on,wait=off",
                      "-pidfile", self.pidfile]
        if incoming:
            cmd += ["-incoming", incoming]
        with open(self.console, "w") as f:
            f.write(f"# {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}"
                    f" QEMU generation {idx}\n# {' '.join(cmd)}\n")
        self.out = open(self.console, "a")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                     stdout=self.out, stderr=subprocess.STDOUT)
        self.pid = self.proc.pid
        self.qmp = None
        self.rss = []           # (host time, kB): VmRSS less the guest's RAM
        self.vmrss = []         # (host time, kB): VmRSS
        self.running_at = None if incoming else time.time()
        self.ended_at = None

    def connect(self):
        self.qmp = Qmp(self.qmp_path, time.time() + 30)

    def alive(self):
        return self.proc.poll() is None


class Console:
    """Follows the console logs, stamps NCMTEST lines with the host time."""

    def __init__(self):
        self.files = {}         # path -> position
        self.lines = []         # (host time, gen, text)
        self.partial = {}
        self.lock = threading.Lock()
        self.stop = False

    def add(self, gen):
        with self.lock:
            self.files[gen.console] = (gen.idx, 0)

    def poll(self):
        with self.lock:
            items = list(self.files.items())
        now = time.time()
        for path, (idx, pos) in items:
            try:
                with open(path, errors="replace") as f:
                    f.seek(pos)
                    chunk = f.read()
                    pos = f.tell()
            except OSError:
                continue
            if not chunk:
                continue
            buf = self.partial.get(path, "") + chunk
            parts = buf.split("\n")
            self.partial[path] = parts.pop()
            with self.lock:
                self.files[path] = (idx, pos)
                for p in parts:
                    if "NCMTEST " in p:
                        self.lines.append((now, idx, p.rstrip("\r")))

    def run(self):
        while not self.stop:
            self.poll()
            time.sleep(0.1)

    def find(self, pattern, since=0.0):
        """The first (time, gen, line) with pattern after since."""
        with self.lock:
            for t, g, line in self.lines:
                if t >= since and pattern in line:
                    return t, g, line
        return None

    def wait_pair(self, first, then, timeout, since=0.0):
        """The first line with THEN that follows one with FIRST (both
        read at or after since): (time, gen, line) or None."""
        end = time.time() + timeout
        while time.time() < end:
            with self.lock:
                seen = False
                for t, g, line in self.lines:
                    if t < since:
                        continue
                    if not seen and first in line:
                        seen = True
                    elif seen and then in line:
                        return t, g, line
            time.sleep(0.2)
        return None

    def wait(self, pattern, timeout, since=0.0, alive=None):
        end = time.time() + timeout
        while time.time() < end:
            r = self.find(pattern, since)
            if r:
                return r
            if alive and not alive():
                time.sleep(0.5)
                self.poll()
                return self.find(pattern, since)
            time.sleep(0.2)
        return None


class Udp:
    """Numbered datagrams to the guest's echo; what came back."""

    def __init__(self, rate):
        self.rate = rate
        self.sent_at = []       # index: seq
        self.got = bytearray()
        self.dups = 0
        self.dup_list = []      # (seq, host time the second copy came)
        self.stop = False
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((HOST, 0))
        self.sock.setblocking(False)

    def run(self):
        period = 1.0 / self.rate
        nxt = time.time()
        while not self.stop:
            now = time.time()
            if now >= nxt:
                seq = len(self.sent_at)
                self.sent_at.append(now)
                self.got.append(0)
                pkt = struct.pack("!Qd", seq, now) + b"s" * 48
                try:
                    self.sock.sendto(pkt, (GUEST, ECHO_PORT))
                except OSError:
                    pass        # no neighbour yet: counted as lost
                nxt += period
                if nxt < now:
                    nxt = now + period
            r, _, _ = select.select([self.sock], [], [], max(0, nxt - time.time()))
            if r:
                self.drain()

    def drain(self):
        while True:
            try:
                data = self.sock.recv(2048)
            except (BlockingIOError, OSError):
                return
            if len(data) < 16:
                continue
            seq = struct.unpack("!Q", data[:8])[0]
            if seq < len(self.got):
                if self.got[seq]:
                    self.dups += 1
                    self.dup_list.append((seq, time.time()))
                self.got[seq] = 1


def rss_kb(pid, ram_kb):
    """(VmRSS, RSS outside the guest's RAM mapping) in kB, from
    /proc/PID/status and /proc/PID/smaps (the guest RAM: the one mapping of
    at least RAM_KB)"""
    total = None
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    total = int(line.split()[1])
        guest = 0
        size = 0
        with open(f"/proc/{pid}/smaps") as f:
            for line in f:
                if line.startswith("Size:"):
                    size = int(line.split()[1])
                elif line.startswith("Rss:") and size >= ram_kb:
                    guest += int(line.split()[1])
    except (OSError, ValueError):
        return None
    return (total, total - guest) if total is not None else None


def main():
    global LOGF
    ap = argparse.ArgumentParser()
    ap.add_argument("--cmd", required=True)
    ap.add_argument("--run", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--seconds", type=int, default=600)
    ap.add_argument("--migrate-every", type=int, default=180)
    ap.add_argument("--fault-every", type=float, default=8)
    ap.add_argument("--rate", type=int, default=100)
    ap.add_argument("--faults", default="link-down,busy,drop-in,corrupt,replug")
    ap.add_argument("--corruptions", default=",".join(CORRUPTIONS))
    ap.add_argument("--rss-limit-mb", type=float, default=48)
    ap.add_argument("--boot-timeout", type=int, default=300)
    a = ap.parse_args()
    LOGF = open(os.path.join(a.log, "soak.log"), "w")
    with open(a.cmd, "rb") as f:
        base = [x.decode() for x in f.read().split(b"\0") if x]

    results = []

    def verdict(name, ok, why):
        results.append((name, ok, why))

    gens = []
    console = Console()
    ct = threading.Thread(target=console.run, daemon=True)
    ct.start()

    rss_stop = [False]
    ram_kb = 512 * 1024
    if "-m" in base:
        ram_kb = int(base[base.index("-m") + 1].rstrip("M")) * 1024

    def rss_loop():
        while not rss_stop[0]:
            for g in list(gens):
                if g.alive() and g.ended_at is None:
                    kb = rss_kb(g.pid, ram_kb)
                    if kb:
                        g.rss.append((time.time(), kb[1]))
                        g.vmrss.append((time.time(), kb[0]))
            time.sleep(2)

    cur = Gen(0, a, base)
    gens.append(cur)
    console.add(cur)
    threading.Thread(target=rss_loop, daemon=True).start()
    cur.connect()
    log(f"QEMU generation 0 (pid {cur.pid}) booting the guest; console {cur.console}")
    r = console.wait("NCMTEST phase=soak-traffic", a.boot_timeout, alive=cur.alive)
    if not r:
        log("the guest never started its traffic")
        verdict("boot", False, "no 'phase=soak-traffic' within "
                f"{a.boot_timeout}s; QEMU {'running' if cur.alive() else 'exited'}")
        return finish(a, gens, console, results, None, None, [], 0)
    verdict("boot", True, "")
    t_start = r[0]
    log("guest traffic running: iperf3 up and down, UDP echo; "
        f"soak for {a.seconds}s, faults every {a.fault_every}s, "
        f"migration every {a.migrate_every}s")

    udp = Udp(a.rate)
    time.sleep(2)           # the guest's echo socket
    ut = threading.Thread(target=udp.run, daemon=True)
    ut.start()
    ping = subprocess.Popen(["ping", "-D", "-n", "-i", "0.05", "-W", "1", GUEST],
                            stdout=open(os.path.join(a.log, "hostping.log"), "w"),
                            stderr=subprocess.STDOUT)

    events = []             # dicts: name, t0, t1, detail, deltas

    def stats(g):
        try:
            return g.qmp.cmd("qom-get", path=QOM, property="x-stats")
        except (SystemExit, OSError) as e:
            log(f"x-stats: {e}")
            return {}

    def deltas(s0, s1):
        d = {}
        for k in FAULT_COUNTERS:
            if k in s0 and k in s1 and s1[k] != s0[k]:
                d[k] = s1[k] - s0[k]
        for k in ("total",):
            p0 = s0.get("out_parse_errors", {}).get(k)
            p1 = s1.get("out_parse_errors", {}).get(k)
            if p0 is not None and p1 is not None and p1 != p0:
                d["out_parse_errors"] = p1 - p0
        return d

    # faults: the usb-ncm-fault object's properties
    def qset(g, prop, val):
        g.qmp.fault_set(QOM, prop, val)

    def qget(g, prop):
        return g.qmp.fault_get(QOM, prop)

    def wait_zero(g, prop, timeout):
        end = time.time() + timeout
        while time.time() < end:
            if not qget(g, prop):
                return True
            time.sleep(0.1)
        return False

    faults = [f for f in a.faults.split(",") if f]
    corruptions = [c for c in a.corruptions.split(",") if c]
    nfault = 0
    ncorrupt = 0
    migrations = []
    errors = []
    t_end = t_start + a.seconds
    next_fault = time.time() + a.fault_every
    mig_every = a.migrate_every
    if mig_every and mig_every >= a.seconds:
        mig_every = max(20, a.seconds // 2)     # at least one
    next_mig = t_start + mig_every if mig_every else float("inf")
    last_rss_print = 0

    try:
        while time.time() < t_end:
            if not cur.alive():
                errors.append(f"QEMU generation {cur.idx} exited (status "
                              f"{cur.proc.returncode}) during the soak")
                log(errors[-1])
                break
            now = time.time()
            if now - last_rss_print >= 30:
                last_rss_print = now
                log("RSS " + ", ".join(f"gen{g.idx} {g.vmrss[-1][1] / 1024:.1f} MiB "
                                       f"({g.rss[-1][1] / 1024:.1f} MiB outside guest RAM)"
                                       for g in gens if g.rss and g.ended_at is None))
            if now >= next_mig and t_end - now > 15:
                nxt = Gen(cur.idx + 1, a, base,
                          incoming=f"unix:{a.run}/mig{cur.idx + 1}.sock")
                gens.append(nxt)
                console.add(nxt)
                nxt.connect()
                time.sleep(1)
                log(f"migration {cur.idx} -> {nxt.idx} (pid {cur.pid} -> {nxt.pid})")
                s0 = stats(cur)
                m0 = time.time()
                # (QEMU's QMP socket takes one client: ours, so the
                # switch-over of migrate-qmp.py is done here)
                kv = migrate(cur, nxt, f"unix:{a.run}/mig{cur.idx + 1}.sock", 120)
                m1 = time.time()
                with open(os.path.join(a.log, f"migrate-{nxt.idx}.log"), "w") as f:
                    f.write("".join(f"{k}={val}\n" for k, val in kv.items()))
                ok = kv.get("mig_status") == "completed" and kv.get("dst_status") == "running"
                migrations.append((cur.idx, nxt.idx, ok, kv))
                log(f"  {kv.get('mig_status')}: {kv.get('mig_total_ms')} ms, downtime "
                    f"{kv.get('mig_downtime_ms')} ms, {kv.get('mig_ram_mb')} MB; "
                    f"destination {kv.get('dst_status')}")
                if ok:
                    cur.ended_at = time.time()
                    try:
                        cur.proc.wait(timeout=20)
                    except subprocess.TimeoutExpired:
                        cur.proc.kill()
                    nxt.running_at = time.time()
                    prev, cur = cur, nxt
                    s1 = stats(cur)
                    # counters migrate: the deltas are this window's
                    events.append({"name": f"migration {prev.idx}->{cur.idx}",
                                   "t0": m0, "t1": m1 + 3,
                                   "detail": f"downtime {kv.get('mig_downtime_ms')} ms",
                                   "deltas": deltas(s0, s1)})
                else:
                    errors.append(f"migration {cur.idx} -> {nxt.idx} failed: "
                                  f"{kv.get('mig_status')} {kv.get('mig_error', '')}")
                    log(errors[-1])
                    nxt.proc.kill()
                    nxt.ended_at = time.time()
                    events.append({"name": "failed migration", "t0": m0,
                                   "t1": m1 + 3, "detail": "", "deltas": {}})
                next_mig = time.time() + mig_every
                next_fault = max(next_fault, time.time() + 3)
                continue
            if now >= next_fault and faults and t_end - now > 8:
                f = faults[nfault % len(faults)]
                nfault += 1
                s0 = stats(cur)
                t0 = time.time()
                detail = ""
                try:
                    if f == "link-down":
                        qset(cur, "link-down-ms", 1500)
                        wait_zero(cur, "link-down-ms", 20)
                        detail = "1500 ms"
                    elif f == "busy":
                        qset(cur, "busy-ms", 800)
                        wait_zero(cur, "busy-ms", 20)
                        detail = "800 ms"
                    elif f == "drop-in":
                        qset(cur, "drop-in-every", 25)
                        time.sleep(3)
                        qset(cur, "drop-in-every", 0)
                        detail = "every 25th IN NTB for 3 s"
                    elif f == "corrupt":
                        c = corruptions[ncorrupt % len(corruptions)]
                        ncorrupt += 1
                        qset(cur, "corrupt-in", c)
                        if c == "short-notification":
                            # a notification to corrupt: a 300 ms link flap
                            # (NETWORK_CONNECTION, SPEED_CHANGE)
                            qset(cur, "link-down-ms", 300)
                            wait_zero(cur, "link-down-ms", 20)
                            c += " (with a 300 ms link flap to send one)"
                        left = not wait_zero(cur, "corrupt-count", 20)
                        detail = c + (" (still armed after 20 s)" if left else "")
                    elif f == "replug":
                        qset(cur, "replug-ms", 1000)
                        wait_zero(cur, "replug-ms", 20)
                        # until the guest has configured the new interface
                        # (its old one gone first)
                        r = console.wait_pair("netwatch=gone", "netwatch=configured",
                                              40, since=t0)
                        detail = "1000 ms; interface configured again after " + (
                            f"{r[0] - t0:.1f} s" if r else "(never, 40 s)")
                        if not r:
                            errors.append(f"replug at +{t0 - t_start:.0f}s: the guest "
                                          "did not configure the interface again within 40 s")
                except (SystemExit, OSError) as e:
                    errors.append(f"fault {f}: QMP: {e}")
                    log(errors[-1])
                t1 = time.time()
                s1 = stats(cur)
                ev = {"name": f, "t0": t0, "t1": t1, "detail": detail,
                      "deltas": deltas(s0, s1)}
                if f == "corrupt":
                    # Linux 6.1's cdc_ncm was seen to pass nothing for up
                    # to 2.7 s after one corrupted NTB (ndp-at-end)
                    ev["grace"] = 5.0
                events.append(ev)
                log(f"fault {f} {detail}: {t1 - t0:.1f}s; counters {ev['deltas']}")
                next_fault = time.time() + a.fault_every
                continue
            time.sleep(0.2)
    finally:
        pass

    # the guest ends its traffic by itself (ncm.soak_time)
    log("soak time over; waiting for the guest to stop its traffic")
    # the datagrams and pings stop when the guest starts to wind down (its
    # echo ends after its last iperf3 run)
    console.wait("NCMTEST phase=soak-stopping", 120, since=t_start, alive=cur.alive)
    udp.stop = True
    ut.join(5)
    time.sleep(2.0)
    udp.drain()
    t_ping_stop = time.time()
    ping.send_signal(signal.SIGINT)
    try:
        ping.wait(5)
    except subprocess.TimeoutExpired:
        ping.kill()
    udp.t_ping_stop = t_ping_stop
    r = console.wait("NCMTEST soak_done=1", 150, since=t_start, alive=cur.alive)
    if not r:
        errors.append("the guest did not report its results (soak_done) within 150 s")
    final = stats(cur) if cur.alive() else {}
    with open(os.path.join(a.log, "x-stats-final.json"), "w") as f:
        json.dump(final, f, indent=1, sort_keys=True)
    # the guest powers off after its dmesg dump
    console.wait("NCMTEST dmesg-end", 90, since=t_start, alive=cur.alive)
    try:
        cur.proc.wait(60)
    except subprocess.TimeoutExpired:
        errors.append(f"QEMU generation {cur.idx} still running 60 s after the guest's end: killed")
        cur.proc.kill()
    cur.ended_at = time.time()
    return finish(a, gens, console, results, udp, t_start, events, nfault,
                  migrations, errors)


def migrate(src, dst, uri, tmo):
    """src -> dst (started with -incoming URI), as tests/guest/migrate-qmp.py
    does: migrate, wait for completed, the destination running, the source
    told to quit. Returns key=value results."""
    kv = {}
    try:
        t0 = time.time()
        kv["mig_start"] = f"{t0:.3f}"
        src.qmp.cmd("migrate", uri=uri)
        info = {}
        st = "?"
        seen = []
        while True:
            info = src.qmp.cmd("query-migrate")
            st = info.get("status", "?")
            if not seen or seen[-1][0] != st:
                seen.append((st, int(1000 * (time.time() - t0))))
            if st in ("completed", "failed", "cancelled"):
                break
            if time.time() - t0 > tmo:
                src.qmp.cmd("migrate_cancel")
                st = "timeout"
                break
            time.sleep(0.05)
        t1 = time.time()
        kv["mig_end"] = f"{t1:.3f}"
        kv["mig_status"] = st
        kv["mig_statuses"] = " ".join(f"{x}@{ms}" for x, ms in seen)
        if info.get("error-desc"):
            kv["mig_error"] = info["error-desc"]
        kv["mig_total_ms"] = info.get("total-time", "")
        kv["mig_downtime_ms"] = info.get("downtime", "")
        kv["mig_ram_mb"] = f"{info.get('ram', {}).get('transferred', 0) / 1e6:.0f}"
        dst_st = "?"
        while time.time() - t1 < 15:
            dst_st = dst.qmp.cmd("query-status")["status"]
            if dst_st == "running" or st != "completed":
                break
            time.sleep(0.05)
        kv["dst_status"] = dst_st
        if dst_st == "running":
            try:
                src.qmp.cmd("quit")
            except (OSError, SystemExit):
                pass            # QEMU may close the socket before answering
    except (OSError, SystemExit) as e:
        kv["mig_error"] = f"QMP: {e}"
    return kv


def guest_events(console, t_start):
    """Windows of the guest's own events, from its begin/end lines."""
    evs = []
    open_ = {}
    with console.lock:
        lines = list(console.lines)
    for t, g, line in lines:
        m = re.search(r"NCMTEST soak_ev=(\S+) (begin|end)(.*)", line)
        if not m:
            continue
        name, what, rest = m.group(1), m.group(2), m.group(3).strip()
        if what == "begin":
            open_[name] = (t, rest)
        elif name in open_:
            t0, d = open_.pop(name)
            evs.append({"name": f"guest {name}", "t0": t0, "t1": t,
                        "detail": f"{d} -> {rest}".strip(), "deltas": {}})
    for name, (t0, d) in open_.items():
        evs.append({"name": f"guest {name} (no end)", "t0": t0,
                    "t1": t0 + 30, "detail": d, "deltas": {}})
    return evs


def ping_losses(path):
    """(send times of lost pings, sent, received) from ping -D output."""
    known = {}
    sent = 0
    try:
        text = open(path).read()
    except OSError:
        return [], 0, 0
    for line in text.splitlines():
        m = re.match(r"\[(\d+\.\d+)\].*icmp_seq=(\d+).*time=([\d.]+) ms", line)
        if m:
            known[int(m.group(2))] = float(m.group(1)) - float(m.group(3)) / 1000
        m = re.match(r"(\d+) packets transmitted", line)
        if m:
            sent = int(m.group(1))
    if sent and sent not in known:
        sent -= 1           # the last request, cut short by SIGINT
    seqs = sorted(known)
    lost = []
    if not seqs:
        return [], sent, 0
    for s in range(1, sent + 1):
        if s in known:
            continue
        # interpolate between the answered neighbours
        lo = max([x for x in seqs if x < s], default=None)
        hi = min([x for x in seqs if x > s], default=None)
        if lo is not None and hi is not None:
            t = known[lo] + (known[hi] - known[lo]) * (s - lo) / (hi - lo)
        elif lo is not None:
            t = known[lo] + 0.05 * (s - lo)
        else:
            t = known[hi] - 0.05 * (hi - s)
        lost.append((s, t))
    return lost, sent, len(known)


def runs(items):
    """[(id, t)] sorted -> [(first_id, last_id, t_first, t_last, n)]"""
    out = []
    for i, t in items:
        if out and i == out[-1][1] + 1 and t - out[-1][3] < 1.0:
            f, _, tf, _, n = out[-1]
            out[-1] = (f, i, tf, t, n + 1)
        else:
            out.append((i, i, t, t, 1))
    return out


def finish(a, gens, console, results, udp, t_start, events, nfault,
           migrations=(), errors=()):
    errors = list(errors)
    ok_all = True
    rel = (lambda t: t - t_start) if t_start else (lambda t: t - T0)
    for name, ok, why in results:
        print(f"{'PASS' if ok else 'FAIL'}: soak/{name}{'' if ok else f' ({why})'}")
        ok_all &= ok
    if t_start is None:
        return 1
    console.poll()
    events = list(events) + guest_events(console, t_start)
    events.sort(key=lambda e: e["t0"])

    def explain(t):
        for e in events:
            if e["t0"] - PRE <= t <= e["t1"] + e.get("grace", GRACE):
                return e
        return None

    unexplained = 0
    report = []
    lost_lines = []
    per_event = {}          # id(event) -> {kind: [seq...]}
    last_sent = udp.sent_at[-1] if udp.sent_at else 0
    for kind, items in (("udp", [(s, udp.sent_at[s]) for s in range(len(udp.sent_at))
                                 if not udp.got[s] and udp.sent_at[s] < last_sent - 1.0]),
                        # (SIGINT: the replies to the last pings had no time)
                        ("ping", [(sq, t) for sq, t in
                                  ping_losses(os.path.join(a.log, "hostping.log"))[0]
                                  if t < getattr(udp, "t_ping_stop", float("inf")) - 1.0])):
        for f, l, tf, tl, n in runs(items):
            e = explain(tf) or explain(tl)
            for s, t in items:
                if f <= s <= l:
                    lost_lines.append(f"{kind}\t{s}\t{rel(t):.3f}\t"
                                      f"{e['name'] if e else 'UNEXPLAINED'}")
            if e:
                per_event.setdefault(id(e), {}).setdefault(kind, []).append((f, l))
            else:
                unexplained += n
                report.append(f"  UNEXPLAINED: lost {kind} {f}" + (f"-{l}" if l != f else "") +
                              f" ({n}) sent at +{rel(tf):.2f}s: no fault, migration or "
                              "guest event then")
    for e in events:
        lost = per_event.get(id(e))
        if not lost:
            continue
        parts = []
        for kind in ("udp", "ping"):
            rs = lost.get(kind, [])
            if rs:
                n = sum(l - f + 1 for f, l in rs)
                parts.append(f"{kind} {n}: " + " ".join(
                    f"{f}" if f == l else f"{f}-{l}" for f, l in rs))
        report.append(f"  {e['name']} at +{rel(e['t0']):.1f}s..+{rel(e['t1']):.1f}s"
                      f" {e['detail']}; counters {e['deltas'] or '{}'}; lost "
                      + "; ".join(parts))
    with open(os.path.join(a.log, "losses.tsv"), "w") as f:
        f.write("kind\tseq\tsent_s\texplained_by\n" + "\n".join(lost_lines) + "\n")

    # events
    print("Events (host clock, seconds from the start of the traffic):")
    for e in events:
        print(f"  +{rel(e['t0']):7.1f}s..+{rel(e['t1']):7.1f}s {e['name']}"
              f" {e['detail']} {e['deltas'] or ''}")
    print("Lost datagrams and pings (UDP and ping sequence numbers), per event "
          "that explains them, with the device counters that moved in it:")
    for line in report or ["  none"]:
        print(line)
    usent = len(udp.sent_at)
    ugot = sum(udp.got)
    _, psent, pgot = ping_losses(os.path.join(a.log, "hostping.log"))
    if udp.dup_list:
        # a datagram echoed twice: the guest got it twice (or the device
        # sent its echo twice); which event was on then
        byev = {}
        for sq, t in udp.dup_list:
            e = explain(udp.sent_at[sq])
            byev.setdefault(e["name"] + f" at +{rel(e['t0']):.1f}s" if e else
                            "no event", []).append(sq)
        print("UDP datagrams echoed twice, by the event during which they were sent:")
        for k, v in byev.items():
            print(f"  {k}: {len(v)}: " + " ".join(str(x) for x in v[:40]) +
                  (" ..." if len(v) > 40 else ""))
    print(f"UDP: {usent} sent, {ugot} echoed, {usent - ugot} lost, {udp.dups} duplicates;"
          f" ping: {psent} sent, {pgot} answered")

    # RSS
    print("QEMU RSS (MiB) over time, per QEMU process (time from the start of "
          "the traffic: VmRSS / VmRSS outside the guest's RAM):")
    rss_fail = []
    for g in gens:
        if not g.rss:
            continue
        samples = g.rss
        step = max(1, len(samples) // 20)
        line = " ".join(f"{rel(t):.0f}s:{v[1] / 1024:.0f}/{kb / 1024:.0f}"
                        for (t, kb), v in list(zip(samples, g.vmrss))[::step])
        print(f"  gen{g.idx} pid {g.pid}: {line}")
        # growth after a warm-up: from the first sample 60 s into its run
        # (or its middle) to its last, outside the guest's RAM (which fills
        # as the guest touches pages; on a migration destination too);
        # TCG's code cache (tb-size) settles first
        run0 = g.running_at or samples[0][0]
        life = samples[-1][0] - run0
        warm = run0 + min(60, life / 2)
        after = [kb for t, kb in samples if t >= warm]
        if len(after) >= 5:
            base, last, peak = after[0], after[-1], max(after)
            growth = (last - base) / 1024
            print(f"    outside guest RAM, after warm-up: {base / 1024:.1f} -> {last / 1024:.1f} MiB "
                  f"(peak {peak / 1024:.1f}), growth {growth:+.1f} MiB over "
                  f"{samples[-1][0] - warm:.0f}s")
            if growth > a.rss_limit_mb:
                rss_fail.append(f"gen{g.idx} grew {growth:.1f} MiB after warm-up "
                                f"(limit {a.rss_limit_mb} MiB)")
    # successive generations at the same point of their life
    ends = [(g.idx, g.rss[-1][1]) for g in gens if g.rss and g.ended_at and g.idx > 0]
    if len(ends) >= 2:
        print("  at the end of each migrated generation: " +
              ", ".join(f"gen{i} {kb / 1024:.0f}" for i, kb in ends))

    # guest and QEMU errors from the consoles
    qerr = []
    gerr = []
    for g in gens:
        try:
            text = open(g.console, errors="replace").read()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("#"):
                continue
            if re.search(r"Assertion .* failed|qemu-system-[a-z0-9_]+: |"
                         r"Segmentation fault|core dumped|^Aborted", line):
                qerr.append(f"gen{g.idx}: {line.strip()[:300]}")
            if re.search(r"soft lockup|blocked for more than|detected stall|"
                         r"\bBUG:|\bOops\b|WARNING: CPU|Kernel panic|"
                         r"general protection fault|[xeuo]hci_hcd .*(ERROR|died|"
                         r"halted|not responding)|soak_error=|live_raise=hang", line):
                gerr.append(f"gen{g.idx}: {line.strip()[:300]}")
        if g.proc.returncode not in (0, None) and g.ended_at and \
                not any(m[0] == g.idx and m[2] for m in migrations):
            qerr.append(f"gen{g.idx}: exit status {g.proc.returncode}")
    qerr = list(dict.fromkeys(qerr))
    gerr = list(dict.fromkeys(gerr))

    def v(key):
        r = console.find(f"NCMTEST {key}=", t_start)
        return r[2].split(f"NCMTEST {key}=", 1)[1] if r else ""

    tcp = {d: v(f"soak_tcp_{d}").split() for d in ("up", "down")}
    print(f"guest: TCP up runs/failed/mean Mbit/s {tcp['up']}, down {tcp['down']};"
          f" echo {v('soak_echo')}; NTB changes {v('soak_ntb_changes')},"
          f" ifdowns {v('soak_ifdowns')}; faults {nfault}; migrations "
          f"{sum(1 for m in migrations if m[2])} of {len(migrations)}")

    def check(name, ok, why):
        nonlocal ok_all
        print(f"{'PASS' if ok else 'FAIL'}: soak/{name}{'' if ok else f' ({why})'}")
        ok_all &= ok

    check("qemu", not qerr and not [e for e in errors if "QEMU" in e],
          "; ".join(qerr + [e for e in errors if "QEMU" in e])[:800])
    check("migrations", all(m[2] for m in migrations),
          "; ".join(e for e in errors if "migration" in e)[:800])
    check("guest", not gerr and not [e for e in errors if "QEMU" not in e and "migration" not in e],
          "; ".join(gerr[:5] + [e for e in errors if "QEMU" not in e and "migration" not in e])[:800])
    check("results", bool(v("soak_done")), "the guest did not finish its soak")
    tcp_ok = all(len(tcp[d]) == 3 and int(tcp[d][0]) > int(tcp[d][1]) for d in tcp)
    check("tcp", tcp_ok, f"iperf3 runs/failed: up {tcp['up']}, down {tcp['down']}")
    check("udp-echoed", usent > 0 and ugot > usent // 2,
          f"{ugot} of {usent} datagrams came back")
    check("losses-explained", unexplained == 0,
          f"{unexplained} datagrams/pings lost outside every fault, migration "
          f"and guest event window; see {os.path.join(a.log, 'losses.tsv')}")
    check("rss", not rss_fail, "; ".join(rss_fail))
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
