#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# What the device schedules must replay: under QEMU's record/replay
# (-icount rr=record|replay) work has to reach the guest at points the log
# reproduces.  The guest test (tests/guest/run-replay-test.sh) finds a
# break in minutes; this finds the usual ways to break it at once, in the
# device's own files:
#   qemu_bh_schedule() and one-shot bottom halves: run whenever the main
#       loop gets to them; replay_bh_schedule_event() runs them at the
#       recorded instruction
#   the host's clocks (QEMU_CLOCK_REALTIME/HOST/VIRTUAL_RT, glib's and
#       libc's time) and random numbers: not in the log
# A line may carry "determinism: ok (why)" in a comment when it is
# deliberate.  One "PASS:/FAIL: style/determinism/FILE" line per file.
#
#   scripts/check/determinism.py [FILE...]   default: the device's files
import os
import re
import sys

RULES = [
    (re.compile(r"\bqemu_bh_schedule\s*\("),
     "qemu_bh_schedule(): use replay_bh_schedule_event()"),
    (re.compile(r"\b(aio_bh_schedule_oneshot|qemu_bh_schedule_idle)\s*\("),
     "a bottom half outside the replay queue"),
    (re.compile(r"\bQEMU_CLOCK_(REALTIME|HOST|VIRTUAL_RT)\b"),
     "a host clock: timers and time on QEMU_CLOCK_VIRTUAL"),
    (re.compile(r"\b(g_get_monotonic_time|g_get_real_time|get_clock|"
                r"get_clock_realtime|clock_gettime|gettimeofday|time)\s*\("),
     "the host's time"),
    (re.compile(r"\b(rand|random|g_random_\w+|g_rand_\w+|"
                r"qemu_guest_getrandom\w*)\s*\("),
     "a random source"),
]
ALLOW = re.compile(r"determinism:\s*ok")
DEVICE_FILES = ["hw/usb/dev-ncm.c", "hw/usb/dev-ncm-desc.c",
                "hw/usb/ncm-fault.c", "hw/usb/ncm-function.c",
                "hw/usb/ncm-function-vmstate.c", "hw/usb/ncm-ntb.c"]


def strip_comments(text):
    """the text with C comments and string literals blanked, lines kept"""
    out = re.sub(r"/\*.*?\*/",
                 lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)
    out = re.sub(r"//[^\n]*", "", out)
    return re.sub(r'"(\\.|[^"\\\n])*"', '""', out)


def problems(text):
    """(line number, source line, why) for every use of a rule"""
    raw = text.split("\n")
    found = []
    for n, line in enumerate(strip_comments(text).split("\n"), 1):
        if ALLOW.search(raw[n - 1]):
            continue
        for rx, why in RULES:
            if rx.search(line):
                found.append((n, raw[n - 1].strip(), why))
    return found


def main(argv):
    top = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    files = argv or DEVICE_FILES
    rc = 0
    for f in files:
        path = f if os.path.isabs(f) else os.path.join(top, f)
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        except OSError as e:
            print(f"FAIL: style/determinism/{f} (cannot read: {e.strerror})")
            rc = 1
            continue
        bad = problems(text)
        if bad:
            n, line, why = bad[0]
            print(f"FAIL: style/determinism/{f} ({len(bad)} use(s); "
                  f"line {n}: {why})")
            for n, line, why in bad[:8]:
                print(f"    | {f}:{n}: {line}")
            rc = 1
        else:
            print(f"PASS: style/determinism/{f}")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
