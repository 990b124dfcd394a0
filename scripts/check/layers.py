#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The device's layers and its fault injection stay apart (issue 35; part
# of the style suite).  One PASS/FAIL line per rule, the offending lines
# shown:
#
#  - layers/state-private: USBNcmState is dev-ncm.c's: no header declares
#    it (struct USBNcmState {, its typedef or OBJECT_DECLARE_*);
#  - layers/no-fault-object-in-device: the device (dev-ncm*.c,
#    dev-ncm*.h), the function and the codec include no header of the
#    fault object and name neither its type nor its state: they know the
#    hook interface (include/hw/usb/ncm-fault-target.h) only, so that a
#    build without CONFIG_USB_NCM_FAULT has the device and no faults;
#  - layers/fault-object-apart: the fault object (hw/usb/ncm-fault.c)
#    includes none of the device's private headers (dev-ncm*.h): it
#    reaches the device through the hook interface;
#  - layers/include-graph: the includes among our files go one way
#    (dev-ncm.c -> {dev-ncm.h, ncm-function.h} -> ncm-ntb.h; ncm-fault.c
#    -> ncm-fault-target.h -> ncm-function.h): no cycle, and no layer
#    includes one above it;
#  - layers/fuzz-through-qtest: the fuzz targets
#    (tests/qtest/fuzz/usb_ncm_dl*_fuzz.c) reach QEMU through libqtest,
#    libqos and usb_ncm_dl_host.h only, as a qtest does: they include no
#    QEMU header but the constants' (hw/usb.h, cdc-ncm.h, ncm-fault.h's
#    property names, the codec's for its own fuzzers) and call no QOM,
#    qdev, QMP, VMState or USB-core function; the host's side that QMP
#    would do is usb_ncm_dl_host.c's.
#
#   layers.py [TOP]     default: the repository this script is in

import os
import re
import subprocess
import sys

TOP = sys.argv[1] if len(sys.argv) > 1 else \
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
        __file__))))

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

# what each layer's files may include of ours (by base name)
LAYER = [
    # (files, level): a file includes only files of its level or below
    (("ncm-ntb.c", "ncm-ntb.h", "cdc-ncm.h", "ncm-eth-stats.h"), 0),
    (("ncm-function.c", "ncm-function.h", "ncm-function-vmstate.c",
      "ncm-compat.h"), 1),
    (("ncm-fault-target.h", "ncm-fault.h", "dev-ncm-desc.c", "dev-ncm.h"),
     2),
    (("dev-ncm.c", "ncm-fault.c"), 3),
]
DEVICE = re.compile(r"^(hw/usb/(dev-ncm[^/]*|ncm-function[^/]*|ncm-ntb)"
                    r"\.[ch]|include/hw/usb/(ncm-function|ncm-ntb)\.h)$")
FAULT_OBJECT = "hw/usb/ncm-fault.c"
FAULT_NAMES = re.compile(r"\b(TYPE_USB_NCM_FAULT|UsbNcmFault|USB_NCM_FAULT)"
                         r"\b|\"usb-ncm-fault\"|ncm-fault\.h")
FUZZ_TARGET = re.compile(r"^tests/qtest/fuzz/usb_ncm_dl\w*_fuzz\.c$")
FUZZ_INCLUDES = re.compile(r"^(qemu/(osdep|bswap|main-loop|module)\.h|"
                           r"hw/usb\.h|hw/usb/(cdc-ncm|ncm-fault|ncm-ntb)\.h|"
                           r"tests/qtest/.*\.h|fuzz\.h|usb_ncm_dl_\w+\.h)$")
FUZZ_INTERNALS = re.compile(r"\b(object_\w+|qdev_\w+|qmp_\w+|vmstate_\w+|"
                            r"qemu_file_\w+|qemu_f\w+|device_cold_reset|"
                            r"usb_device_\w+|usb_packet_\w+|"
                            r"DEVICE_GET_CLASS|USB_DEVICE)\s*\(")
STATE_DECL = re.compile(r"\bstruct\s+USBNcmState\s*\{|typedef\s+struct\s+"
                        r"USBNcmState\b|OBJECT_DECLARE_\w+\(\s*USBNcmState\b")


def ours(*paths):
    """our files under @paths (git pathspecs; default: the device's)"""
    paths = paths or ("hw/usb/*.c", "hw/usb/*.h", "include/hw/usb/*.h")
    out = subprocess.run(["git", "ls-files", *paths], cwd=TOP, check=True,
                         capture_output=True, text=True).stdout
    return [f for f in out.split() if os.path.exists(os.path.join(TOP, f))]


def text_of(path):
    with open(os.path.join(TOP, path), encoding="utf-8") as fh:
        return fh.read()


def code_of(text):
    """the text without comments, lines kept"""
    return re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)),
                  text, flags=re.S)


def code_lines_matching(files, pattern):
    """"file:line: text" of each line of @files, comments left out,
    that @pattern matches"""
    hits = []
    for f in files:
        for n, line in enumerate(code_of(text_of(f)).split("\n"), 1):
            if pattern.search(line):
                hits.append(f"{f}:{n}: {line.strip()}")
    return hits


def report(name, why, hits):
    if hits:
        print(f"FAIL: layers/{name} ({why})")
        for h in hits[:12]:
            print(f"    | {h}")
        return 1
    print(f"PASS: layers/{name}")
    return 0


def main():
    files = ours()
    rc = 0

    hits = code_lines_matching([f for f in files if f.endswith(".h")],
                               STATE_DECL)
    rc |= report("state-private", "USBNcmState declared in a header; it "
                 "is dev-ncm.c's", hits)

    hits = code_lines_matching([f for f in files if DEVICE.match(f)],
                               FAULT_NAMES)
    rc |= report("no-fault-object-in-device", "the device names the fault "
                 "object; use include/hw/usb/ncm-fault-target.h", hits)

    hits = []
    if FAULT_OBJECT in files:
        for inc in INCLUDE.findall(text_of(FAULT_OBJECT)):
            if os.path.basename(inc).startswith("dev-ncm"):
                hits.append(f"{FAULT_OBJECT}: #include \"{inc}\"")
    else:
        hits.append(f"{FAULT_OBJECT} is missing")
    rc |= report("fault-object-apart", "the fault object includes the "
                 "device's private headers", hits)

    # the include graph among our files, by base name
    level = {name: lvl for names, lvl in LAYER for name in names}
    by_base = {os.path.basename(f): f for f in files}
    graph = {}
    hits = []
    for f in files:
        base = os.path.basename(f)
        graph[base] = [os.path.basename(i)
                       for i in INCLUDE.findall(text_of(f))
                       if os.path.basename(i) in by_base]
        for dep in graph[base]:
            if base in level and dep in level and level[dep] > level[base]:
                hits.append(f"{f} includes {dep}: a layer above it")
    state = {}

    def visit(node, path):
        state[node] = 1
        for dep in graph.get(node, []):
            if state.get(dep) == 1:
                hits.append("cycle: " + " -> ".join(path + [node, dep]))
            elif not state.get(dep):
                visit(dep, path + [node])
        state[node] = 2

    for node in sorted(graph):
        if not state.get(node):
            visit(node, [])
    rc |= report("include-graph", "an include goes up a layer or round "
                 "in a cycle", hits)

    fuzz = [f for f in ours("tests/qtest/fuzz/") if FUZZ_TARGET.match(f)]
    hits = [f"{f}: #include \"{inc}\"" for f in fuzz
            for inc in INCLUDE.findall(code_of(text_of(f)))
            if not FUZZ_INCLUDES.match(inc)]
    hits += code_lines_matching(fuzz, FUZZ_INTERNALS)
    if not fuzz:
        hits.append("no tests/qtest/fuzz/usb_ncm_dl*_fuzz.c found")
    rc |= report("fuzz-through-qtest", "a fuzz target reaches into QEMU; "
                 "put the host's side in usb_ncm_dl_host.c", hits)
    return rc


if __name__ == "__main__":
    sys.exit(main())
