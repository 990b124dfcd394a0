#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The host-side tools' own tests (tests/tools/test_*.py), one line per case
# in make check's format: "PASS: tools/<case>" or "FAIL: tools/<case> (...)".
import os
import sys
import unittest


class LineResult(unittest.TestResult):
    def addSuccess(self, test):
        super().addSuccess(test)
        print(f"PASS: tools/{test.id()}")

    def _fail(self, test, err, what):
        msg = self._exc_info_to_string(err, test).strip().splitlines()[-1]
        print(f"FAIL: tools/{test.id()} ({what}: {msg})")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._fail(test, err, "failed")

    def addError(self, test, err):
        super().addError(test, err)
        self._fail(test, err, "error")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    suite = unittest.defaultTestLoader.discover(here, pattern="test_*.py")
    result = LineResult()
    suite.run(result)
    if not result.testsRun:
        print("FAIL: tools/discovery (no test found)")
        return 1
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
