#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# QMP for a recorded or replayed guest run (tests/guest/replay-lib.sh):
# device faults set at points that record/replay reproduces, and the
# device's counters at the end.  A PROP is a property of the usb-ncm-fault
# object (link-down-ms, replug-ms...), created for --device at the first.
#
# A qom-set from the host is not in the replay log: replayed, it would
# land wherever the host's timing puts it, and the replay diverges.  So
# every fault is set while the VM is stopped at a known instruction count:
#   --start PROP=VALUE   before the first instruction (QEMU runs with -S),
#                        in the recording and in the replay alike;
#   --cue TEXT=PROP=VALUE  recording: when the console LOG shows TEXT,
#                        stop the VM, note query-replay's icount, set the
#                        property, continue, and write the icount to
#                        ACTIONS; replay: read ACTIONS, replay-break at
#                        each icount and set the same property there.
# At the end (the guest powered off; QEMU runs with -no-shutdown) the
# device's x-stats and the last icount go to STATS as JSON; then QEMU
# quits.
#
#   replay-qmp.py --qmp SOCKET --mode record|replay --actions FILE
#                 --log LOG --device QOM-PATH --stats OUT [--timeout S]
#                 [--start PROP=VALUE]... [--cue TEXT=PROP=VALUE]...
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qmplib import DONE, Qmp  # noqa: E402


def value_of(text):
    return int(text) if text.lstrip("-").isdigit() else text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qmp", required=True)
    ap.add_argument("--mode", choices=("record", "replay"), required=True)
    ap.add_argument("--actions", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--device", required=True)
    ap.add_argument("--stats", required=True)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--start", action="append", default=[])
    ap.add_argument("--cue", action="append", default=[])
    a = ap.parse_args()
    deadline = time.time() + a.timeout
    qmp = Qmp(a.qmp, deadline)
    done = DONE

    for s in a.start:
        prop, val = s.split("=", 1)
        qmp.fault_set(a.device, prop, value_of(val))

    actions = []
    if a.mode == "replay":
        with open(a.actions) as f:
            actions = json.load(f)
        for act in actions:
            qmp.cmd("replay-break", icount=act["icount"])
            qmp.cmd("cont")
            if qmp.wait_status(("paused",) + done, deadline, 0.1) != "paused":
                break
            act["replayed_icount"] = qmp.cmd("query-replay")["icount"]
            qmp.fault_set(a.device, act["prop"], act["value"])
        qmp.cmd("cont")
    else:
        cues = []
        for c in a.cue:
            text, prop, val = c.rsplit("=", 2)
            cues.append([text, prop, value_of(val), False])
        qmp.cmd("cont")
        pos = 0
        buf = ""
        while time.time() < deadline and not all(c[3] for c in cues):
            try:
                with open(a.log, errors="replace") as f:
                    f.seek(pos)
                    buf += f.read()
                    pos = f.tell()
            except OSError:
                pass
            for c in cues:
                if not c[3] and c[0] in buf:
                    c[3] = True
                    qmp.cmd("stop")
                    icount = qmp.cmd("query-replay")["icount"]
                    qmp.fault_set(a.device, c[1], c[2])
                    actions.append({"icount": icount, "cue": c[0],
                                    "prop": c[1], "value": c[2]})
                    with open(a.actions, "w") as f:
                        json.dump(actions, f, indent=1)
                    qmp.cmd("cont")
            if qmp.cmd("query-status")["status"] in done:
                break
            time.sleep(0.2)
        with open(a.actions, "w") as f:
            json.dump(actions, f, indent=1)

    status = qmp.wait_status(done, deadline, 0.1)
    stats = qmp.cmd("qom-get", path=a.device, property="x-stats")
    out = {"stats": stats, "vm_status": status,
           "icount": qmp.cmd("query-replay")["icount"],
           "actions": actions}
    with open(a.stats, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
    qmp.quit()


if __name__ == "__main__":
    main()
