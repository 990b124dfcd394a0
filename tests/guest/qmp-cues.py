#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The host's side of the guest's cues (tests/guest/init-pm.sh): follow the
# console log that tests/guest/lib.sh's guest_run_logged writes and act on
# every "NCMTEST cue=WHAT ARGS" line over QMP:
#   replug MS     usb-ncm-fault replug-ms MS on DEVICE (off the bus now,
#                 back after MS ms of virtual time)
#   udp PORT      a UDP datagram to 127.0.0.1:HOSTPORT, which slirp's
#                 hostfwd (set up by the caller: --udp-fwd HOSTPORT)
#                 turns into a frame from the netdev to the guest's PORT
#   wakeup        wait until QEMU reports the guest suspended (S3), then
#                 system_wakeup
#   stats TAG [QOM-PATH]   qom-get DEVICE (or QOM-PATH) x-stats, kept
#                 under TAG
# Everything done goes to OUT (JSON, rewritten after each cue):
# {"actions": [{"cue", "t", "result"}...], "stats": {TAG: {...}}}.
# Ends when the log says "NCMTEST phase=done", QEMU goes away, or after
# TIMEOUT seconds. A QEMU still running 10 s (--poweroff-grace) after the
# guest powered off ("reboot: Power down", wherever it is in the log:
# QEMU 10.0 on q35 ignores the ACPI power-off of a guest that went through
# S3 and system_wakeup) is told to quit, and that is noted as the action
# "(poweroff)".
#
#   qmp-cues.py --qmp SOCKET --log LOG --out OUT --device QOM-PATH
#               [--udp-fwd HOSTPORT] [--timeout SECONDS]
#               [--poweroff-grace SECONDS]
import argparse
import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qmplib import Qmp  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qmp", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", required=True)
    ap.add_argument("--udp-fwd", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=600)
    # seconds QEMU gets to exit after the guest's power-off (tests: less)
    ap.add_argument("--poweroff-grace", type=float, default=10)
    a = ap.parse_args()
    deadline = time.time() + a.timeout
    res = {"actions": [], "stats": {}}

    def save():
        with open(a.out + ".tmp", "w") as f:
            json.dump(res, f, indent=1, sort_keys=True)
        os.replace(a.out + ".tmp", a.out)

    save()
    while not os.path.exists(a.log) and time.time() < deadline:
        time.sleep(0.2)
    qmp = Qmp(a.qmp, deadline)
    t0 = time.time()
    pos = 0
    buf = ""
    done = False
    # when the console said "reboot: Power down": looked for in every line
    # read, those of the chunk that ended the cues included (a loaded host
    # reads "phase=done", the dmesg dump and the power-off in one chunk)
    off = None
    end = deadline
    while time.time() < end:
        with open(a.log, errors="replace") as f:
            f.seek(pos)
            chunk = f.read()
            pos = f.tell()
        buf += chunk
        lines = buf.split("\n")
        buf = lines.pop()
        for line in lines:
            if "reboot: Power down" in line and off is None:
                off = time.time()
            if done:
                continue
            if "NCMTEST phase=done" in line:
                done = True
                # the guest's power-off, then QEMU's exit
                end = min(deadline, time.time() + 60)
                save()
            i = line.find("NCMTEST cue=")
            if i < 0:
                continue
            words = line[i + len("NCMTEST cue="):].split()
            if not words:
                continue
            act = {"cue": " ".join(words), "t": round(time.time() - t0, 2)}
            try:
                act["result"] = do_cue(qmp, a, words, res, deadline)
            except SystemExit as e:
                act["result"] = f"error: {e}"
                if "closed the QMP socket" in str(e):
                    done = True
                    end = min(deadline, time.time() + 60)
            except OSError as e:
                act["result"] = f"error: QMP: {e}"
                done = True
                end = min(deadline, time.time() + 60)
            res["actions"].append(act)
            save()
        if not done:
            if not chunk:
                time.sleep(0.1)
            continue
        if off is not None and time.time() - off > a.poweroff_grace:
            try:
                st = qmp.cmd("query-status")["status"]
                qmp.cmd("quit")
                res["actions"].append({
                    "cue": "(poweroff)", "t": round(time.time() - t0, 2),
                    "result": f"QEMU still {st} {a.poweroff_grace:g} s "
                              "after the guest powered off: quit"})
            except SystemExit:
                pass
            break
        try:
            qmp.sock.settimeout(0.5)
            if qmp.sock.recv(65536, socket.MSG_PEEK) == b"":
                break                       # QEMU went away
        except socket.timeout:
            pass
        except OSError:
            break
        finally:
            qmp.sock.settimeout(None)
        time.sleep(0.5)
    save()


def do_cue(qmp, a, words, res, deadline):
    what, args = words[0], words[1:]
    if what == "replug":
        qmp.fault_set(a.device, "replug-ms", int(args[0]))
        return "ok"
    if what == "udp":
        if not a.udp_fwd:
            return "error: no --udp-fwd port"
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.sendto(b"wake up, a frame from the netdev\n",
                 ("127.0.0.1", a.udp_fwd))
        s.close()
        return f"sent to 127.0.0.1:{a.udp_fwd}"
    if what == "wakeup":
        t = time.time()
        status = None
        while time.time() < min(deadline, t + 60):
            status = qmp.cmd("query-status")["status"]
            if status == "suspended":
                break
            time.sleep(0.2)
        if status != "suspended":
            return f"error: never suspended (status {status})"
        waited = time.time() - t
        time.sleep(1)
        qmp.cmd("system_wakeup")
        return f"suspended after {waited:.1f}s; system_wakeup 1s later"
    if what == "stats":
        tag = args[0] if args else str(len(res["stats"]))
        res["stats"][tag] = qmp.cmd("qom-get",
                                    path=args[1] if len(args) > 1 else
                                    a.device,
                                    property="x-stats")
        return "ok"
    return f"error: unknown cue {what}"


if __name__ == "__main__":
    main()
