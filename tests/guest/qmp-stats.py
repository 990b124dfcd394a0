#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Wait until a guest started with -no-shutdown powers off, read the
# usb-ncm device's counters with qom-get (QOM-PATH "-": none), add QEMU's
# CPU time (qemu_cpu_seconds), print them as JSON, quit QEMU.
#
#   qmp-stats.py SOCKET QOM-PATH TIMEOUT-SECONDS
import json
import os
import socket
import struct
import sys
import time

from qmplib import DONE, Qmp


def qemu_cpu_seconds(sock):
    # the peer of the QMP socket is QEMU itself
    cred = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                           struct.calcsize("3i"))
    pid = struct.unpack("3i", cred)[0]
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def main():
    path, qom_path, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
    deadline = time.time() + timeout
    qmp = Qmp(path, deadline)
    status = qmp.wait_status(DONE, deadline, 0.5)
    stats = {}
    if qom_path != "-":
        stats = qmp.cmd("qom-get", path=qom_path, property="x-stats")
    stats["vm_status"] = status
    stats["qemu_cpu_seconds"] = qemu_cpu_seconds(qmp.sock)
    print(json.dumps(stats, sort_keys=True))
    qmp.quit()


if __name__ == "__main__":
    main()
