#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Print the instruction count of a QEMU under record/replay (query-replay):
# tests/guest/lib.sh asks it when a replayed guest has printed nothing for
# a while, because a replay can be silent for minutes and still advance
# (it replays a busy boot many times slower than it was recorded) and
# only a count that no longer grows means the replay has stopped.
#
#   qmp-icount.py SOCKET
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qmplib import Qmp  # noqa: E402


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: qmp-icount.py SOCKET")
    qmp = Qmp(sys.argv[1], time.time() + 5)
    print(qmp.cmd("query-replay").get("icount", ""))


if __name__ == "__main__":
    main()
