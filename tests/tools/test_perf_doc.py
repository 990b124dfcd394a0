#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# scripts/bench/perf-doc.py, the writer of docs/performance.md's results
# blocks: a marker missing, doubled, out of order or unknown stops it
# with the doc untouched; a second run changes nothing; --check fails on
# a hand edit inside a block; the profile figures it derives (guest CPU
# per GB, with and without the BQL waits) from a hand-made report.
import io
import os
import shutil
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

from repo_script import TOP, load

doc = load("perf_doc", "scripts", "bench", "perf-doc.py")

DATA = os.path.join(TOP, "docs", "performance")


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = doc.main(list(argv))
    return rc, out.getvalue() + err.getvalue()


class FillTest(unittest.TestCase):
    BLOCKS = {"a": "A1\nA2", "b": "B"}

    def text(self, *names):
        return "".join(f"x\n<!-- perf-doc:{n}:begin -->\nold\n"
                       f"<!-- perf-doc:{n}:end -->\n" for n in names) + "y\n"

    def test_fills_and_is_idempotent(self):
        once = doc.fill(self.text("a", "b"), self.BLOCKS)
        self.assertIn("<!-- perf-doc:a:begin -->\nA1\nA2\n"
                      "<!-- perf-doc:a:end -->", once)
        self.assertIn("<!-- perf-doc:b:begin -->\nB\n<!-- perf-doc:b:end -->",
                      once)
        self.assertNotIn("old", once)
        self.assertTrue(once.endswith("y\n"))
        self.assertEqual(doc.fill(once, self.BLOCKS), once)

    def test_missing_block_fails(self):
        with self.assertRaisesRegex(doc.DocError, "block b:.*found neither"):
            doc.fill(self.text("a"), self.BLOCKS)

    def test_missing_end_fails(self):
        text = self.text("a", "b").replace("<!-- perf-doc:b:end -->\n", "")
        with self.assertRaisesRegex(doc.DocError, r"block b:.*\['begin'\]"):
            doc.fill(text, self.BLOCKS)

    def test_doubled_and_reversed_fail(self):
        with self.assertRaisesRegex(doc.DocError, "block a"):
            doc.fill(self.text("a", "a", "b"), self.BLOCKS)
        rev = ("<!-- perf-doc:a:end -->\n<!-- perf-doc:a:begin -->\n" +
               self.text("b"))
        with self.assertRaisesRegex(doc.DocError, "block a"):
            doc.fill(rev, self.BLOCKS)

    def test_unknown_marker_fails(self):
        with self.assertRaisesRegex(doc.DocError, "no known block: c"):
            doc.fill(self.text("a", "b", "c"), self.BLOCKS)


class DocTest(unittest.TestCase):
    """the real doc and the stored data, in a copy"""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.doc = os.path.join(self.tmp.name, "performance.md")
        shutil.copy(os.path.join(TOP, "docs", "performance.md"), self.doc)

    def tearDown(self):
        self.tmp.cleanup()

    def read(self):
        with open(self.doc) as f:
            return f.read()

    def test_second_run_changes_nothing(self):
        self.assertEqual(run(self.doc, DATA)[0], 0)
        first = self.read()
        rc, out = run(self.doc, DATA)
        self.assertEqual(rc, 0)
        self.assertIn("already current", out)
        self.assertEqual(self.read(), first)
        rc, out = run("--check", self.doc, DATA)
        self.assertEqual(rc, 0, out)
        self.assertIn("PASS: style/perf-doc", out)

    def test_check_fails_on_a_hand_edit(self):
        run(self.doc, DATA)
        text = self.read()
        i = text.index("<!-- perf-doc:bench-tap:begin -->")
        j = text.index("\n| TCP up 1 stream", i)
        k = text.index("\n", j + 1)
        row = text[j:k].split(" | ")
        row[1] = "9999"
        with open(self.doc, "w") as f:
            f.write(text[:j] + " | ".join(row) + text[k:])
        rc, out = run("--check", self.doc, DATA)
        self.assertEqual(rc, 1)
        self.assertIn("FAIL: style/perf-doc", out)
        self.assertIn("9999", out)

    def test_missing_marker_fails_loudly_and_writes_nothing(self):
        text = self.read().replace("<!-- perf-doc:scaling:end -->\n", "")
        with open(self.doc, "w") as f:
            f.write(text)
        rc, out = run(self.doc, DATA)
        self.assertEqual(rc, 1)
        self.assertIn("block scaling", out)
        self.assertEqual(self.read(), text)
        rc, out = run("--check", self.doc, DATA)
        self.assertEqual(rc, 1)
        self.assertIn("FAIL: style/perf-doc", out)

    def test_missing_data_fails_loudly(self):
        empty = os.path.join(self.tmp.name, "none")
        os.mkdir(empty)
        before = self.read()
        rc, out = run(self.doc, empty)
        self.assertEqual(rc, 1)
        self.assertIn("results-tap.json", out)
        self.assertEqual(self.read(), before)


PROFILE = """\
# make profile, started 2026-01-01T00:00:00Z, commit 0123abc, accelerator tcg. more
##### backend: tap

=== ncm-64k: TCP download (host -> guest), 1 stream: 800 Mbit/s (profiled 7.0 s) ===
Host: 1.20 of 2 CPUs busy (everything: QEMU, iperf3, the samplers)
  busiest functions:
     30.0  xhci_ring_ep_doorbell [xhci_hcd]
      5.0  csum_partial
Guest interrupts (/proc/interrupts, the whole run): NIC 1000/s, local timer 1/s
QEMU lock waits (sync-profile over 7.0 s: % of that time; waits/s; mean us):
    BQL      accel/tcg/cputlb.c:2527                10.0     10000      10.0
Guest's own accounting (/proc/stat): user 0%, system 20%, idle 20%, irq 60%

=== virtio-net-nooff: TCP download (host -> guest), 1 stream: 1600 Mbit/s (profiled 7.0 s) ===
Host: 1.40 of 2 CPUs busy (everything: QEMU, iperf3, the samplers)
Guest interrupts (/proc/interrupts, the whole run): NIC 500/s, local timer 1/s

Summary, TCP download (host -> guest), 1 stream
                                             ncm-64k  virtio-net-nooff
Mbit/s                                           800              1600
guest idle (/proc/stat), %                      20.0               0.0
BQL wait, other threads, % time                 20.0              50.0
"""


class ProfileTest(unittest.TestCase):
    def test_derived_figures(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "p.txt"), "w") as f:
                f.write(PROFILE)
            block = doc.profile_block(d, "p.txt", "X")
        rows = {}
        for r in block.split("\n"):
            if r.startswith("| "):
                cells = [c.strip() for c in r.strip("|").split("|")]
                rows[cells[0]] = cells[1:]
        # busy 80 % at 800 Mbit/s (100 MB/s): 8.0 s per GB; 60 % without
        # the BQL waits: 6.0; virtio: 100 % at 200 MB/s: 5.0, 2.5
        self.assertEqual(rows["**guest CPU s per GB**"][:2],
                         ["**8.0**", "**5.0**"])
        self.assertEqual(rows["guest CPU s per GB without the BQL waits"][:2],
                         ["6.0", "2.5"])
        self.assertEqual(rows["guest CPU per GB over virtio-net-nooff's "
                              "(same direction)"][0], "1.60x")
        self.assertEqual(rows["register writes (MMIO stores) per MB"][0],
                         "100")
        self.assertEqual(rows["guest NIC interrupts/s; per MB"][0], "1000; -")
        self.assertIn('its header says "make profile, started '
                      '2026-01-01T00:00:00Z, commit 0123abc, accelerator tcg"',
                      block)
        self.assertIn("accelerator tcg)", block)


if __name__ == "__main__":
    unittest.main()
