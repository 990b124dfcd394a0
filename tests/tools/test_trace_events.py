#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# scripts/check/trace-events.py: the device's trace events against their
# declarations in patches/*.patch.  A tree that agrees passes; an event
# declared and never called, one called and never declared, one declared
# twice and a call with the wrong number of arguments each fail, naming
# the event; the repository itself passes.
import io
import pathlib
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

from repo_script import TOP, load

te = load("trace_events", "scripts", "check", "trace-events.py")

HUNK = """--- a/hw/usb/trace-events
+++ b/hw/usb/trace-events
@@ -1,1 +1,3 @@
+usb_ncm_one(const char *id, int a) "%s: %d"
+usb_ncm_two(void) "two"
"""
SOURCE = """
static void f(void)
{
    trace_usb_ncm_one(s->id, MIN(a, (b, c)));
    trace_usb_ncm_two();
}
"""


def check(hunks, source):
    with tempfile.TemporaryDirectory() as d:
        top = pathlib.Path(d)
        (top / "patches").mkdir()
        (top / "hw" / "usb").mkdir(parents=True)
        for i, h in enumerate(hunks):
            (top / "patches" / f"{i:04d}-t.patch").write_text(h)
        (top / "hw" / "usb" / "dev.c").write_text(source)
        out = io.StringIO()
        argv, sys.argv = sys.argv, ["trace-events.py", d]
        try:
            with redirect_stdout(out):
                rc = te.main()
        finally:
            sys.argv = argv
        return rc, out.getvalue()


class TraceEventsTest(unittest.TestCase):
    def test_agreeing_tree_passes(self):
        rc, out = check([HUNK], SOURCE)
        self.assertEqual(rc, 0, out)
        self.assertIn("PASS: style/trace-events (2 events, 2 calls)", out)

    def test_declared_never_called(self):
        rc, out = check([HUNK], SOURCE.replace(
            "    trace_usb_ncm_two();\n", ""))
        self.assertEqual(rc, 1)
        self.assertIn("usb_ncm_two declared in 0000-t.patch but never "
                      "called", out)

    def test_called_never_declared(self):
        rc, out = check([HUNK], SOURCE + "void g(void) "
                        "{ trace_usb_ncm_three(1); }\n")
        self.assertEqual(rc, 1)
        self.assertIn("trace_usb_ncm_three() at hw/usb/dev.c:7 has no "
                      "declaration", out)

    def test_declared_twice(self):
        rc, out = check([HUNK, HUNK], SOURCE)
        self.assertEqual(rc, 1)
        self.assertIn("usb_ncm_one declared 2 times", out)

    def test_wrong_argument_count(self):
        rc, out = check([HUNK], SOURCE.replace(
            "trace_usb_ncm_one(s->id, MIN(a, (b, c)))",
            "trace_usb_ncm_one(s->id, \"a, b\", c)"))
        self.assertEqual(rc, 1)
        self.assertIn("passes 3 arguments, its declaration lists 2", out)

    def test_the_repository_passes(self):
        argv, sys.argv = sys.argv, ["trace-events.py", TOP]
        out = io.StringIO()
        try:
            with redirect_stdout(out):
                rc = te.main()
        finally:
            sys.argv = argv
        self.assertEqual(rc, 0, out.getvalue())


if __name__ == "__main__":
    unittest.main()
