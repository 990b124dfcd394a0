# SPDX-License-Identifier: GPL-2.0-or-later
#
# A minimal QMP client for the scripts in this directory (no qemu.qmp
# package on a plain Debian machine).
import json
import os
import socket
import sys
import time

# how the scripts' messages start: the script's own name
WHO = os.path.basename(sys.argv[0]) or "qmplib"
# the run states after which a guest does no more (QEMU with -no-shutdown)
DONE = ("shutdown", "guest-panicked", "internal-error")
# the usb-ncm-fault object the scripts set faults on (Qmp.fault_set)
FAULT_ID = "ncm-fault"


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
            raise SystemExit(f"{WHO}: cannot connect to {path}")
        self.buf = b""
        self.recv()                               # greeting
        self.cmd("qmp_capabilities")

    def recv(self):
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise SystemExit(f"{WHO}: QEMU closed the QMP socket")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def exchange(self, name, **args):
        """send command @name; its reply (events are passed over)"""
        msg = {"execute": name}
        if args:
            msg["arguments"] = args
        self.sock.sendall(json.dumps(msg).encode() + b"\n")
        while True:
            reply = self.recv()
            if "return" in reply or "error" in reply:
                return reply

    def cmd(self, name, **args):
        """command @name's return value; an error ends the script"""
        reply = self.exchange(name, **args)
        if "error" in reply:
            raise SystemExit(f"{WHO}: {name}: {reply['error']}")
        return reply["return"]

    def try_cmd(self, name, **args):
        """command @name: None when it succeeds, else QEMU's message"""
        reply = self.exchange(name, **args)
        return reply["error"].get("desc", "") if "error" in reply else None

    def fault_object(self, device):
        """the QOM path of the usb-ncm-fault object for @device (its QOM
        path or id), which object-add creates at the first fault: after
        the device, and again on a migration's destination"""
        names = [p["name"] for p in self.cmd("qom-list", path="/objects")]
        if FAULT_ID not in names:
            self.cmd("object-add", **{"qom-type": "usb-ncm-fault",
                                      "id": FAULT_ID, "device": device})
        return "/objects/" + FAULT_ID

    def fault_set(self, device, prop, value):
        """set fault @prop (link-down-ms, replug-ms...) on @device"""
        self.cmd("qom-set", path=self.fault_object(device), property=prop,
                 value=value)

    def fault_get(self, device, prop):
        return self.cmd("qom-get", path=self.fault_object(device),
                        property=prop)

    def wait_status(self, want, deadline, poll=0.2):
        """query-status until it is one of @want: that status, or None
        when @deadline (time.time()) passes first"""
        while time.time() < deadline:
            status = self.cmd("query-status")["status"]
            if status in want:
                return status
            time.sleep(poll)
        return None

    def quit(self):
        """quit QEMU; it may close the socket before it answers"""
        try:
            self.cmd("quit")
        except SystemExit:
            pass
