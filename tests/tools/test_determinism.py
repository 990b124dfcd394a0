# SPDX-License-Identifier: GPL-2.0-or-later
#
# scripts/check/determinism.py: the record/replay lint finds what it must
# and nothing else.
import os
import unittest

from repo_script import TOP, load

det = load("determinism", "scripts", "check", "determinism.py")


def whys(text):
    return [why for _, _, why in det.problems(text)]


class Determinism(unittest.TestCase):
    def test_plain_bh_schedule_found(self):
        self.assertEqual(len(whys("    qemu_bh_schedule(s->out_bh);\n")), 1)

    def test_replay_bh_schedule_passes(self):
        self.assertEqual(whys("    replay_bh_schedule_event(s->out_bh);\n"),
                         [])

    def test_host_clocks_found(self):
        for clock in ("QEMU_CLOCK_REALTIME", "QEMU_CLOCK_HOST",
                      "QEMU_CLOCK_VIRTUAL_RT"):
            self.assertEqual(len(whys(f"t = timer_new_ms({clock}, cb, s);")),
                             1, clock)

    def test_virtual_clock_passes(self):
        self.assertEqual(whys("t = timer_new_ms(QEMU_CLOCK_VIRTUAL, cb, s);\n"
                              "timer_mod(t, now + 1);\n"), [])

    def test_host_time_and_random_found(self):
        self.assertEqual(len(whys("x = g_get_monotonic_time();\n"
                                  "y = g_random_int();\n"
                                  "z = time(NULL);\n")), 3)

    def test_comments_and_strings_ignored(self):
        self.assertEqual(whys("/* qemu_bh_schedule() would not replay */\n"
                              "// QEMU_CLOCK_HOST\n"
                              "msg = \"qemu_bh_schedule(\";\n"), [])

    def test_deliberate_use_allowed(self):
        self.assertEqual(whys("qemu_bh_schedule(b); /* determinism: ok "
                              "(never under replay) */\n"), [])

    def test_device_files_clean(self):
        for f in det.DEVICE_FILES:
            with open(os.path.join(TOP, f), encoding="utf-8") as fh:
                self.assertEqual(det.problems(fh.read()), [], f)
