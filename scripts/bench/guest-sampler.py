#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Sample where a TCG guest's vCPU is: "info registers" over QMP at random
# intervals (2-8 ms, so that the samples do not lock onto the guest's own
# 250 Hz tick), one line per sample: host time (CLOCK_REALTIME) when the
# answer came, RIP, CPL, HLT. HLT=1 means the guest is idle. The command
# needs the BQL, which the vCPU thread holds while a device register
# access runs: an answer can wait, and it then lands on the function that
# made the access. Such a sample stands for the whole wait, so the report
# weighs each sample by the time since the previous answer. That still
# over-counts HLT when the guest halts right after such an access (a timer
# programmed, then HLT): take the idle share from the guest's /proc/stat.
# Stops when QEMU goes away or after TIMEOUT seconds.
#
# It also turns on QEMU's lock profiler (the sync-profile command) and
# writes its table to OUTFILE.sync every SYNC_PERIOD seconds, each after a
# "@ <host time>" line: how long QEMU's threads waited for the BQL and its
# other locks, per call site (cumulative; profile-report.py takes the
# difference across a phase). A vCPU that waits for the BQL before a
# device register access shows there, not in perf's CPU samples.
#
#   guest-sampler.py SOCKET OUTFILE TIMEOUT-SECONDS
import os
import random
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "tests", "guest"))
from qmplib import Qmp  # noqa: E402

RIP = re.compile(r"RIP=([0-9a-f]+)")
CPL = re.compile(r"CPL=(\d)")
HLT = re.compile(r"HLT=(\d)")
SYNC_PERIOD = 0.5


def main():
    path, out, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
    deadline = time.time() + timeout
    qmp = Qmp(path, deadline)
    n = 0
    hmp = "human-monitor-command"
    next_sync = 0.0
    with open(out, "w") as f, open(out + ".sync", "w") as sync:
        while time.time() < deadline:
            try:
                if next_sync == 0.0:
                    qmp.cmd(hmp, **{"command-line": "sync-profile on"})
                if time.time() >= next_sync:
                    table = qmp.cmd(hmp, **{"command-line":
                                            "info sync-profile 40"})
                    sync.write(f"@ {time.time():.6f}\n{table}")
                    sync.flush()
                    next_sync = time.time() + SYNC_PERIOD
                text = qmp.cmd(hmp, **{"command-line": "info registers"})
            except (SystemExit, OSError):
                break
            rip, cpl, hlt = RIP.search(text), CPL.search(text), HLT.search(text)
            if rip and cpl and hlt:
                f.write(f"{time.time():.6f} {rip.group(1)} {cpl.group(1)} "
                        f"{hlt.group(1)}\n")
                n += 1
            time.sleep(random.uniform(0.002, 0.008))
    print(f"guest-sampler: {n} samples", file=sys.stderr)


if __name__ == "__main__":
    main()
