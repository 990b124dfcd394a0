#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# QMP for a recorded or replayed guest run (tests/guest/replay-lib.sh):
# device faults set at points that record/replay reproduces, and the
# device's counters at the end.  A PROP is a property of the usb-ncm-fault
# object (link-down-ms, replug-ms...), which both runs create before the
# first instruction (QEMU runs with -S), so that it counts the device's
# IN NTBs from the same point.
#
# A qom-set from the host is not in the replay log: replayed, it would
# land wherever the host's timing puts it, and the replay diverges.  Nor
# may the recording stop the VM to set one: a stop at a point the host's
# timing picks can cut a clock warp short, and the replay, which cannot
# stop there, waits for a clock event that never comes (the EHCI replay
# stall of issue 37).  So a fault waits for a point in the device's own
# traffic, an IN NTB (the object's at-in-ntb):
#   --start PROP=VALUE   before the first instruction, in the recording
#                        and in the replay alike;
#   --cue TEXT=PROP=VALUE  recording: when the console LOG shows TEXT, set
#                        at-in-ntb to a few NTBs from now, read back its
#                        number N, set the property (it waits for IN NTB
#                        N) and write N to ACTIONS; replay: read ACTIONS
#                        and queue the same changes for the same NTBs
#                        before the first instruction.
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
from qmplib import DONE, WHO, Qmp  # noqa: E402


def value_of(text):
    return int(text) if text.lstrip("-").isdigit() else text


# the usb-ncm-fault parameter that makes the changes after it wait
AT_IN_NTB = "at-in-ntb"
# how many IN NTBs after the cue a fault comes: enough that the device
# does not send them between the two qom-sets
CUE_NTBS = 4


def cue_at(qmp, fault, prop, value):
    """set @prop to @value on the fault object @fault at an IN NTB a few
    from now, with the VM running; the NTB's number and the icount then
    (for the log) as a dict"""
    for _ in range(50):
        qmp.cmd("qom-set", path=fault, property=AT_IN_NTB, value=CUE_NTBS)
        at = qmp.cmd("qom-get", path=fault, property=AT_IN_NTB)
        err = qmp.try_cmd("qom-set", path=fault, property=prop, value=value)
        if err is None:
            return {"at_in_ntb": at,
                    "icount": qmp.cmd("query-replay")["icount"]}
        if "has passed" not in err:
            raise SystemExit(f"{WHO}: qom-set {prop}={value}: {err}")
    raise SystemExit(f"{WHO}: the device kept sending IN NTBs faster than "
                     f"at-in-ntb could be set ({CUE_NTBS} ahead)")


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

    fault = qmp.fault_object(a.device)
    for s in a.start:
        prop, val = s.split("=", 1)
        qmp.fault_set(a.device, prop, value_of(val))

    actions = []
    if a.mode == "replay":
        with open(a.actions) as f:
            actions = json.load(f)
        # nothing is sent before the first instruction: N from now is N
        for act in actions:
            qmp.fault_set(a.device, AT_IN_NTB, act["at_in_ntb"])
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
                    actions.append(dict(cue_at(qmp, fault, c[1], c[2]),
                                        cue=c[0], prop=c[1], value=c[2]))
                    with open(a.actions, "w") as f:
                        json.dump(actions, f, indent=1)
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
