#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# scripts/check/fuzz-cov-table.py against a hand-made llvm-cov export whose
# numbers are known: the per-file rows and the two sums, a file missing
# from the export, the section written into a findings file between its
# markers and replaced (not added again) by a rerun; and that
# docs/findings.md holds the markers make fuzz-coverage writes between.
import io
import json
import os
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

from repo_script import TOP, load

cov = load("fuzz_cov_table", "scripts", "check", "fuzz-cov-table.py")


def export(skip=()):
    """an export of every file of FILES: file i has 10 * (i + 1) lines,
    i + 1 of them missed; plus files that are not ours"""
    files = [{"filename": "/b/qemu/../qemu-src/hw/usb/dev-ncm.h",
              "summary": {"lines": {"count": 0, "covered": 0}}},
             {"filename": "/b/qemu-src/hw/usb/hcd-xhci-nec.c",
              "summary": {"lines": {"count": 17, "covered": 11}}}]
    for i, f in enumerate(cov.FILES):
        if f in skip:
            continue
        n = 10 * (i + 1)
        files.append({"filename": "/b/qemu/../qemu-src/" + f,
                      "summary": {"lines": {"count": n,
                                            "covered": n - i - 1}}})
    return {"data": [{"files": files}]}


class FuzzCovTable(unittest.TestCase):
    def run_main(self, exp, *args):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "export.json")
            with open(p, "w") as f:
                json.dump(exp, f)
            out, err = io.StringIO(), io.StringIO()
            with redirect_stdout(out), redirect_stderr(err):
                rc = cov.main([p, *args])
            return rc, out.getvalue(), err.getvalue()

    def test_rows_and_sums(self):
        rc, out, _ = self.run_main(export())
        self.assertEqual(rc, 0)
        lines = out.splitlines()
        self.assertIn("| `hw/usb/dev-ncm.c` | 10 | 9 | 90.0 |", lines)
        self.assertIn("| `hw/usb/ncm-ntb.c` | 60 | 54 | 90.0 |", lines)
        self.assertIn("| `hw/usb/hcd-xhci.c` | 70 | 63 | 90.0 |", lines)
        # device: 10+..+60 = 210 lines, 1+..+6 = 21 missed
        self.assertIn("| **device files together** | 210 | 189 | **90.0** |",
                      lines)
        # controllers and core: 70+..+150 = 990, 7+..+15 = 99 missed
        self.assertIn("| **controllers and USB core together** | 990 | 891"
                      " | **90.0** |", lines)
        self.assertFalse(any("hcd-xhci-nec" in x for x in lines))
        self.assertEqual(len(lines), 2 + len(cov.FILES) + 2)

    def test_missing_file_fails(self):
        rc, out, err = self.run_main(export(skip=("hw/usb/hcd-ohci.c",)))
        self.assertEqual(rc, 1)
        self.assertIn("hw/usb/hcd-ohci.c", err)
        self.assertEqual(out, "")

    def test_findings_written_then_replaced(self):
        with tempfile.TemporaryDirectory() as d:
            md = os.path.join(d, "findings.md")
            with open(md, "w") as f:
                f.write("# Findings\n\ntext\n")
            args = ["--findings", md, "--date", "2026-12-03T16:00Z",
                    "--commit", "abc1234", "--corpora", "a=3 b=4:2"]
            self.assertEqual(self.run_main(export(), *args)[0], 0)
            with open(md) as f:
                first = f.read()
            self.assertTrue(first.startswith("# Findings\n\ntext\n"))
            self.assertEqual(first.count(cov.BEGIN), 1)
            self.assertIn("2026-12-03T16:00Z", first)
            self.assertIn("`abc1234`", first)
            self.assertIn("the 7 inputs (5 of them committed", first)
            self.assertIn("`a` 3, `b` 4 (2 committed)", first)
            self.assertEqual(self.run_main(export(), *args)[0], 0)
            with open(md) as f:
                self.assertEqual(f.read(), first)
            args[3] = "2026-12-04T10:00Z"
            self.assertEqual(self.run_main(export(), *args)[0], 0)
            with open(md) as f:
                second = f.read()
            self.assertEqual(second.count(cov.BEGIN), 1)
            self.assertEqual(second.count(cov.HEAD), 1)
            self.assertIn("2026-12-04T10:00Z", second)
            self.assertNotIn("2026-12-03T16:00Z", second)

    def test_docs_have_markers(self):
        with open(os.path.join(TOP, "docs", "findings.md")) as f:
            text = f.read()
        self.assertTrue(cov.BEGIN in text and cov.END in text,
                        "docs/findings.md lacks the coverage markers")
        table = text[text.index(cov.BEGIN):text.index(cov.END)]
        for f in cov.FILES:
            self.assertTrue(f"`{f}`" in table,
                            f"no row for {f} between the markers")


if __name__ == "__main__":
    unittest.main()
