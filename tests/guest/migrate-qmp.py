#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The switch-over of tests/guest/run-migrate-test.sh: live-migrate the
# source QEMU to the destination (started with -incoming URI), wait for
# "completed", check that the destination runs, then quit the source.
#
#   migrate-qmp.py SRC-QMP-SOCKET DST-QMP-SOCKET URI TIMEOUT-S
#
# Prints "key=value" lines: mig_status, mig_error, mig_total_ms,
# mig_downtime_ms, mig_setup_ms, mig_ram_mb, mig_mbps, mig_dirty_syncs,
# mig_start / mig_end (Unix times), mig_wall_ms, mig_statuses (each
# status seen with the ms since the migrate command), dst_status,
# dst_running_after_ms, src_status, src_quit. MIGRATE_PARAMS="k=v,..."
# (environment) sets migration parameters first (e.g. max-bandwidth=...);
# MIGRATE_TRACE="pattern,..." enables those trace events in the source just
# before the migrate command (the destination gets them on its command line).
# Exit status 0 when the destination runs.
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qmplib import Qmp  # noqa: E402


def out(key, val):
    print(f"{key}={val}", flush=True)


def main():
    if len(sys.argv) != 5:
        raise SystemExit("usage: migrate-qmp.py SRC-QMP DST-QMP URI TIMEOUT-S")
    src_path, dst_path, uri, tmo = sys.argv[1:5]
    tmo = float(tmo)
    src = Qmp(src_path, time.time() + 10)
    dst = Qmp(dst_path, time.time() + 10)
    out("dst_status_before", dst.cmd("query-status")["status"])
    params = {}
    for kv in filter(None, os.environ.get("MIGRATE_PARAMS", "").split(",")):
        k, v = kv.split("=", 1)
        params[k] = int(v) if v.isdigit() else v
    if params:
        src.cmd("migrate-set-parameters", **params)
    p = src.cmd("query-migrate-parameters")
    out("mig_params", f"max-bandwidth={p.get('max-bandwidth')}"
        f" downtime-limit={p.get('downtime-limit')}")

    for pat in filter(None, os.environ.get("MIGRATE_TRACE", "").split(",")):
        # (not Qmp.cmd: its first parameter is called "name" too)
        src.sock.sendall(json.dumps({
            "execute": "trace-event-set-state",
            "arguments": {"name": pat, "enable": True}}).encode() + b"\n")
        while "return" not in (r := src.recv()):
            if "error" in r:
                raise SystemExit(f"trace-event-set-state {pat}: {r['error']}")
    t0 = time.time()
    out("mig_start", f"{t0:.3f}")
    src.cmd("migrate", uri=uri)
    seen = []
    info = {}
    while True:
        info = src.cmd("query-migrate")
        st = info.get("status", "?")
        if not seen or seen[-1][0] != st:
            seen.append((st, int(1000 * (time.time() - t0))))
        if st in ("completed", "failed", "cancelled"):
            break
        if time.time() - t0 > tmo:
            src.cmd("migrate_cancel")
            st = "timeout"
            break
        time.sleep(0.05)
    t1 = time.time()
    out("mig_end", f"{t1:.3f}")
    out("mig_wall_ms", int(1000 * (t1 - t0)))
    out("mig_status", st)
    out("mig_statuses", " ".join(f"{s}@{ms}" for s, ms in seen))
    if info.get("error-desc"):
        out("mig_error", info["error-desc"])
    ram = info.get("ram", {})
    out("mig_total_ms", info.get("total-time", ""))
    out("mig_downtime_ms", info.get("downtime", ""))
    out("mig_setup_ms", info.get("setup-time", ""))
    out("mig_ram_mb", f"{ram.get('transferred', 0) / 1e6:.0f}")
    out("mig_mbps", f"{ram.get('mbps', 0):.0f}")
    out("mig_dirty_syncs", ram.get("dirty-sync-count", ""))

    running = False
    dst_st = "?"
    while time.time() - t1 < 15:
        dst_st = dst.cmd("query-status")["status"]
        if dst_st == "running":
            running = True
            break
        if st != "completed":
            break
        time.sleep(0.05)
    out("dst_status", dst_st)
    if running:
        out("dst_running_after_ms", int(1000 * (time.time() - t1)))
    out("src_status", src.cmd("query-status")["status"])
    if running:
        # the source is paused in "postmigrate": it can go (QEMU may close
        # the socket before its answer arrives)
        try:
            src.cmd("quit")
            out("src_quit", "ok")
        except (OSError, SystemExit) as e:
            out("src_quit", f"socket closed ({e})")
    return 0 if running else 1


if __name__ == "__main__":
    sys.exit(main())
