#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# tests/guest/qmp-cues.py against a fake QEMU monitor: a unix socket that
# answers every command and records what was asked.  The console log is
# written the way a loaded host sees it: the last cue, "NCMTEST
# phase=done", the dmesg dump and "reboot: Power down" in one piece, or
# the power-off line later on its own.  A QEMU that stays up after the
# guest's power-off (QEMU 10.0 on q35 after S3) must be told to quit in
# both cases; before 2026-12-05 the first one was missed and the guest
# leg's stall watcher killed QEMU after 120 s (CI: guest/suspend-xhci/
# poweroff, QEMU status 137).
import json
import os
import socket
import subprocess
import tempfile
import threading
import time
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
CUES = os.path.join(TOP, "tests", "guest", "qmp-cues.py")


class FakeMonitor(threading.Thread):
    """One QMP client; every command answered with {"return": {}} (and a
    status for query-status); the commands are kept in self.asked"""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.asked = []
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(path)
        self.srv.listen(1)

    def run(self):
        conn, _ = self.srv.accept()
        conn.sendall(b'{"QMP": {"version": {}, "capabilities": []}}\n')
        buf = b""
        while True:
            data = conn.recv(65536)
            if not data:
                return
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                name = json.loads(line)["execute"]
                self.asked.append(name)
                ret = {"status": "running"} if name == "query-status" else {}
                conn.sendall(json.dumps({"return": ret}).encode() + b"\n")
                if name == "quit":
                    conn.close()
                    return


class QmpCuesTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        d = self.tmp.name
        self.log = os.path.join(d, "console.log")
        self.out = os.path.join(d, "cues.json")
        self.mon = FakeMonitor(os.path.join(d, "qmp.sock"))
        self.mon.start()
        self.proc = subprocess.Popen(
            ["python3", CUES, "--qmp", os.path.join(d, "qmp.sock"),
             "--log", self.log, "--out", self.out, "--device", "/dev0",
             "--timeout", "30", "--poweroff-grace", "0.5"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def tearDown(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.proc.stderr.close()
        self.tmp.cleanup()

    def write(self, text):
        with open(self.log, "a") as f:
            f.write(text)

    def finish(self):
        self.proc.wait(timeout=20)
        with open(self.out) as f:
            return json.load(f)

    def poweroff_action(self, res):
        acts = [a for a in res["actions"] if a["cue"] == "(poweroff)"]
        self.assertEqual(len(acts), 1, res["actions"])
        self.assertIn("quit", acts[0]["result"])
        self.assertIn("quit", self.mon.asked)

    def test_poweroff_in_the_chunk_of_phase_done(self):
        self.write("NCMTEST phase=done\nNCMTEST dmesg-begin\n[ 1.0] x\n"
                   "NCMTEST dmesg-end\n[ 24.1] reboot: Power down\n")
        self.poweroff_action(self.finish())

    def test_poweroff_after_phase_done(self):
        self.write("NCMTEST phase=done\n")
        time.sleep(1)
        self.write("[ 24.1] reboot: Power down\n")
        self.poweroff_action(self.finish())

    def test_no_quit_before_phase_done(self):
        # a power-off line before the cues end is not the end of the run:
        # the cues after it are still acted on
        self.write("[ 9.0] reboot: Power down\n")
        time.sleep(1.5)
        self.assertNotIn("quit", self.mon.asked)
        self.write("NCMTEST phase=done\n")
        self.poweroff_action(self.finish())


if __name__ == "__main__":
    unittest.main()
