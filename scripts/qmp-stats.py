#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Wait until a guest started with -no-shutdown powers off, read the
# usb-ncm device's counters with qom-get, print them as JSON, quit QEMU.
#
#   qmp-stats.py SOCKET QOM-PATH TIMEOUT-SECONDS
import json
import socket
import sys
import time


class Qmp:
    def __init__(self, path, deadline):
        self.sock = None
        while time.time() < deadline:
            try:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(path)
                self.sock = s
                break
            except OSError:
                time.sleep(0.2)
        if self.sock is None:
            raise SystemExit(f"qmp-stats: cannot connect to {path}")
        self.buf = b""
        self.recv()                               # greeting
        self.cmd("qmp_capabilities")

    def recv(self):
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise SystemExit("qmp-stats: QEMU closed the QMP socket")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def cmd(self, name, **args):
        msg = {"execute": name}
        if args:
            msg["arguments"] = args
        self.sock.sendall(json.dumps(msg).encode() + b"\n")
        while True:
            reply = self.recv()
            if "return" in reply:
                return reply["return"]
            if "error" in reply:
                raise SystemExit(f"qmp-stats: {name}: {reply['error']}")


def main():
    path, qom_path, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
    deadline = time.time() + timeout
    qmp = Qmp(path, deadline)
    status = None
    while time.time() < deadline:
        status = qmp.cmd("query-status")["status"]
        if status in ("shutdown", "guest-panicked", "internal-error"):
            break
        time.sleep(0.5)
    stats = qmp.cmd("qom-get", path=qom_path, property="stats")
    stats["vm_status"] = status
    print(json.dumps(stats, sort_keys=True))
    try:
        qmp.cmd("quit")
    except SystemExit:
        pass


if __name__ == "__main__":
    main()
