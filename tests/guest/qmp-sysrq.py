#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Press Alt-SysRq-KEY on the guest's PS/2 keyboard over QMP, for each KEY
# given: tests/guest/lib.sh does it when a guest stops making progress, so
# that the guest kernel prints where it is stuck ("8": every message to the
# console, "w": blocked tasks, "l": backtrace of every CPU, "t": every
# task). The guest must allow it (kernel.sysrq=1; tests/guest/init.sh).
#
#   qmp-sysrq.py SOCKET KEY...
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qmplib import Qmp  # noqa: E402


def main():
    if len(sys.argv) < 3:
        raise SystemExit("usage: qmp-sysrq.py SOCKET KEY...")
    qmp = Qmp(sys.argv[1], time.time() + 5)
    for key in sys.argv[2:]:
        keys = [{"type": "qcode", "data": k} for k in ("alt", "sysrq", key)]
        qmp.cmd("send-key", keys=keys, **{"hold-time": 200})
        # let the guest print before the next one
        time.sleep(3)


if __name__ == "__main__":
    main()
