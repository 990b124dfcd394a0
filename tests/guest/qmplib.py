# SPDX-License-Identifier: GPL-2.0-or-later
#
# A minimal QMP client for the scripts in this directory (no qemu.qmp
# package on a plain Debian machine).
import json
import socket
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
