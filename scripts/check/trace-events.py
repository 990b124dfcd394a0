#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The device's trace events against their declarations.

Usage: scripts/check/trace-events.py [TOP]

The usb_ncm_* events are declared in the hunks patches/*.patch add to
QEMU's hw/usb/trace-events (QEMU's file, so the overlay cannot own it)
and called as trace_usb_ncm_*() in hw/usb/.  tracetool stops the build
on a call without a declaration, not on a declaration nobody calls or
on one declared twice, and the compiler sees a call's arguments only
once the tree is built.  This checks, from the sources alone:
  - every declared event is called somewhere, and every called one is
    declared, once;
  - every call passes as many arguments as the declaration lists.
Prints "PASS: style/trace-events" or one FAIL line per problem.
"""

import pathlib
import re
import sys

DECL = re.compile(r'^\+(usb_ncm_[a-z0-9_]+)\((.*?)\)\s+"')
CALL = re.compile(r'\btrace_(usb_ncm_[a-z0-9_]+)\s*\(')


def declarations(top):
    """{event: [(patch, number of parameters)]} from the patches' hunks."""
    found = {}
    for patch in sorted((top / "patches").glob("*.patch")):
        for line in patch.read_text(errors="replace").splitlines():
            m = DECL.match(line)
            if not m:
                continue
            params = m.group(2).strip()
            n = 0 if params in ("", "void") else params.count(",") + 1
            found.setdefault(m.group(1), []).append((patch.name, n))
    return found


def call_args(text, start):
    """The number of arguments of the call whose '(' is at text[start]."""
    depth, n, i, empty = 0, 1, start, True
    while i < len(text):
        c = text[i]
        if c in "\"'":
            quote, i = c, i + 1
            while i < len(text) and text[i] != quote:
                i += 2 if text[i] == "\\" else 1
            empty = False
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return 0 if empty else n
        elif c == "," and depth == 1:
            n += 1
        elif not c.isspace() and depth >= 1:
            empty = False
        i += 1
    return -1


def calls(top):
    """{event: [(file:line, number of arguments)]} from hw/usb/."""
    found = {}
    for src in sorted((top / "hw" / "usb").glob("*.c")):
        text = src.read_text(errors="replace")
        for m in CALL.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            where = f"{src.relative_to(top)}:{line}"
            found.setdefault(m.group(1), []).append(
                (where, call_args(text, m.end() - 1)))
    return found


def main():
    top = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    decl, used = declarations(top), calls(top)
    fails = []
    for event, where in sorted(decl.items()):
        if len(where) > 1:
            fails.append(f"{event} declared {len(where)} times "
                         f"({', '.join(p for p, _ in where)})")
        if event not in used:
            fails.append(f"{event} declared in {where[0][0]} but never "
                         "called in hw/usb/")
    for event, sites in sorted(used.items()):
        if event not in decl:
            fails.append(f"trace_{event}() at {sites[0][0]} has no "
                         "declaration in patches/*.patch")
            continue
        want = decl[event][0][1]
        for where, n in sites:
            if n != want:
                fails.append(f"trace_{event}() at {where} passes {n} "
                             f"arguments, its declaration lists {want}")
    for f in fails:
        print(f"FAIL: style/trace-events ({f})")
    if not fails:
        print(f"PASS: style/trace-events ({len(decl)} events, "
              f"{sum(len(s) for s in used.values())} calls)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
