#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# tests/guest/replay-qmp.py's cue in a recording (cue_at) against a fake
# monitor: the fault is set for an IN NTB a few ahead (the usb-ncm-fault
# object's at-in-ntb) with the VM running; a recording that stopped the
# VM to set it could replay into a stall (issue 37), so no stop or cont
# may be sent.  When the device sends that NTB before the fault is set
# (QEMU says "has passed"), at-in-ntb is set again and the fault retried.
import unittest

from repo_script import load

replay_qmp = load("replay_qmp", "tests", "guest", "replay-qmp.py")


class FakeQmp:
    """at-in-ntb as the object keeps it: N from now, read back absolute;
    after the Kth set of it the device sends @sent[K] IN NTBs (0 once the
    list is used up) before the fault's qom-set arrives"""

    def __init__(self, sent=(), other_error=None):
        self.asked = []
        self.in_ntbs = 100
        self.at = 0
        self.sent = list(sent)
        self.other_error = other_error

    def cmd(self, name, **args):
        self.asked.append((name, args.get("property"), args.get("value")))
        if name == "qom-set" and args["property"] == "at-in-ntb":
            self.at = self.in_ntbs + args["value"]
            self.in_ntbs += self.sent.pop(0) if self.sent else 0
            return {}
        if name == "qom-get" and args["property"] == "at-in-ntb":
            return self.at
        if name == "query-replay":
            return {"icount": 12345}
        return {}

    def try_cmd(self, name, **args):
        self.asked.append((name, args.get("property"), args.get("value")))
        if self.other_error:
            return self.other_error
        if self.at <= self.in_ntbs:
            # the object refuses a change for an NTB that was sent
            return f"IN NTB {self.at} (at-in-ntb) has passed"
        return None


class ReplayCuesTest(unittest.TestCase):
    def test_set_ahead_without_stopping(self):
        q = FakeQmp()
        act = replay_qmp.cue_at(q, "/objects/f", "link-down-ms", 500)
        self.assertEqual(act, {"at_in_ntb": 100 + replay_qmp.CUE_NTBS,
                               "icount": 12345})
        names = [a[0] for a in q.asked]
        self.assertNotIn("stop", names)
        self.assertNotIn("cont", names)
        self.assertEqual(q.asked[0], ("qom-set", "at-in-ntb",
                                      replay_qmp.CUE_NTBS))
        self.assertIn(("qom-set", "link-down-ms", 500), q.asked)

    def test_passed_ntb_is_set_again(self):
        # the device outruns the monitor twice, then the fault goes in
        n = replay_qmp.CUE_NTBS
        q = FakeQmp(sent=[n, n + 3])
        act = replay_qmp.cue_at(q, "/objects/f", "replug-ms", 200)
        sets = [a for a in q.asked if a[:2] == ("qom-set", "at-in-ntb")]
        tries = [a for a in q.asked if a[1] == "replug-ms"]
        self.assertEqual((len(sets), len(tries)), (3, 3))
        self.assertEqual(act["at_in_ntb"], 100 + n + n + 3 + n)

    def test_other_error_ends_the_run(self):
        q = FakeQmp(other_error="no usb-ncm device 'ncm'")
        with self.assertRaises(SystemExit) as cm:
            replay_qmp.cue_at(q, "/objects/f", "link-down-ms", 500)
        self.assertIn("no usb-ncm device", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
