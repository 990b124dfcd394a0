#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The migration ABI of usb-ncm and usb-ncm-dl: what `qemu-system-x86_64
# -dump-vmstate` says of them must equal tests/device/vmstate.json, and no
# debug counter (the X-macros NCM_FUNCTION_COUNTERS and
# USB_NCM_PACKET_COUNTERS) may be in it but the ones GET_ETHERNET_STATISTIC
# reports.  So adding a debug counter cannot change the stream unseen.
#
# And adding a debug counter must not change -dump-vmstate at all: the
# size of NcmFunction, which the dump shows for usb-ncm's "fn" field, is
# compared with and without one more counter in NCM_FUNCTION_COUNTERS
# (a probe that includes ncm-function.h, compiled with the flags QEMU's
# build compiles hw/usb/ncm-function.c with: its compile_commands.json).
#
#   check-vmstate.py QEMU [--update]     prints PASS:/FAIL: lines
#   check-vmstate.py --header FILE [QEMU_BUILD_DIR]
#                                        the size check alone, on FILE as
#                                        include/hw/usb/ncm-function.h
#                                        (build dir: default build/qemu)
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
GOLDEN = os.path.join(TOP, "tests/device/vmstate.json")
DEVICES = ("usb-ncm", "usb-ncm-dl")


def xmacro_list(path, macro):
    text = open(os.path.join(TOP, path)).read()
    m = re.search(r"#define %s\(X\)(.*?)\n\n" % macro, text, re.S)
    assert m, f"{macro} not found in {path}"
    # X(name) or X(SELECTOR, name): the counter's name is the last word
    return re.findall(r"\bX\((?:\w+,\s*)?(\w+)\)", m.group(1))


def xmacro_names(path, macro):
    return set(xmacro_list(path, macro))


def find_desc(desc, name):
    """the description called @name in @desc, at any depth"""
    if desc.get("name") == name:
        return desc
    for f in desc.get("Fields", []):
        if "Description" in f:
            d = find_desc(f["Description"], name)
            if d:
                return d
    for sub in desc.get("Subsections", []):
        d = find_desc(sub, name)
        if d:
            return d
    return None


def field_names(desc, out):
    for f in desc.get("Fields", []):
        out.add(f["field"].split(".")[-1])
        if "Description" in f:
            field_names(f["Description"], out)
    for sub in desc.get("Subsections", []):
        field_names(sub, out)
    return out


PROBE = """#include "qemu/osdep.h"
#include "hw/usb/ncm-function.h"
#include <stdio.h>
int main(void) { printf("%zu\\n", sizeof(NcmFunction)); return 0; }
"""


def qemu_compile_args(build_dir):
    """the compiler and flags QEMU's build uses for hw/usb/ncm-function.c,
    without its input, output and dependency-file arguments"""
    with open(os.path.join(build_dir, "compile_commands.json")) as f:
        entries = json.load(f)
    for e in entries:
        if e["file"].endswith("hw/usb/ncm-function.c"):
            break
    else:
        raise SystemExit(f"no hw/usb/ncm-function.c in {build_dir}/"
                         "compile_commands.json: build QEMU first")
    args, out, skip = shlex.split(e["command"]), [], 0
    for a in args:
        if skip:
            skip -= 1
        elif a in ("-o", "-c", "-MQ", "-MF"):
            skip = 1
        elif a != "-MD":
            out.append(a)
    return out, e["directory"]


def function_size(header_text, tmp, build_dir):
    """sizeof(NcmFunction) with ncm-function.h's text as given"""
    inc = os.path.join(tmp, "include", "hw", "usb")
    os.makedirs(inc, exist_ok=True)
    with open(os.path.join(inc, "ncm-function.h"), "w") as f:
        f.write(header_text)
    with open(os.path.join(tmp, "probe.c"), "w") as f:
        f.write(PROBE)
    args, cwd = qemu_compile_args(build_dir)
    exe = os.path.join(tmp, "probe")
    # the copy of the header first: QEMU includes "hw/usb/..." by -iquote
    cc = [a for a in args if a != "ccache"]
    subprocess.run([cc[0], "-iquote", os.path.join(tmp, "include"),
                    *cc[1:], "-o", exe, os.path.join(tmp, "probe.c")],
                   check=True, cwd=cwd)
    return int(subprocess.run([exe], check=True, capture_output=True,
                              text=True).stdout)


def check_added_counter(header_path, build_dir):
    """PASS when one more debug counter leaves NcmFunction's size alone"""
    text = open(header_path).read()
    macro = "#define NCM_FUNCTION_COUNTERS(X) \\\n"
    if macro not in text:
        print("FAIL: device/vmstate/debug-counter-added-same-dump "
              f"(no '{macro.strip()}' line in {header_path})")
        return 1
    planted = text.replace(macro, macro + "    X(planted_debug_counter) \\\n")
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        before = function_size(text, a, build_dir)
        after = function_size(planted, b, build_dir)
    if before == after:
        print("PASS: device/vmstate/debug-counter-added-same-dump "
              f"(NcmFunction {before} bytes with and without one more)")
        return 0
    print("FAIL: device/vmstate/debug-counter-added-same-dump (one more "
          f"debug counter makes NcmFunction {before} -> {after} bytes, and "
          "-dump-vmstate shows that size: keep the counters out of the "
          "migrated struct)")
    return 1


def main():
    if sys.argv[1] == "--header":
        build_dir = (sys.argv[3] if len(sys.argv) > 3
                     else os.path.join(TOP, "build", "qemu"))
        return check_added_counter(sys.argv[2], build_dir)
    qemu, update = sys.argv[1], "--update" in sys.argv
    with tempfile.NamedTemporaryFile(suffix=".json") as t:
        subprocess.run([qemu, "-nodefaults", "-machine", "none",
                        "-dump-vmstate", t.name], check=True,
                       stdout=subprocess.DEVNULL)
        dump = json.load(open(t.name))
    got = {d: dump[d] for d in DEVICES}
    if update:
        with open(GOLDEN, "w") as f:
            json.dump(got, f, indent=1, sort_keys=True)
            f.write("\n")
    want = json.load(open(GOLDEN))
    fails = 0
    for d in DEVICES:
        if got[d] == want.get(d):
            print(f"PASS: device/vmstate/{d}-matches-golden")
        else:
            fails += 1
            print(f"FAIL: device/vmstate/{d}-matches-golden (-dump-vmstate "
                  f"differs from tests/device/vmstate.json: a stream format "
                  f"change; if meant, rerun with --update and say so)")
    debug = (xmacro_names("include/hw/usb/ncm-function.h",
                          "NCM_FUNCTION_COUNTERS") |
             xmacro_names("hw/usb/dev-ncm.c", "USB_NCM_PACKET_COUNTERS"))
    # the Ethernet statistics, from their one list (ncm_statistic() and
    # the migrated fields are generated from it)
    eth_list = xmacro_list("include/hw/usb/ncm-eth-stats.h",
                           "NCM_ETH_STAT_COUNTERS")
    eth_stats = set(eth_list)
    assert eth_stats <= debug, "a statistic is no counter any more"
    # ncm-function-vmstate.c migrates them as one array made from the
    # list (VMSTATE_WITH_TMP): as many as the list has
    for d in DEVICES:
        desc = find_desc(got[d]["Description"],
                         "ncm-function/ethernet-statistics/counters/values")
        nums = [f.get("num") for f in (desc or {}).get("Fields", [])
                if f["field"] == "values"]
        if nums == [len(eth_list)]:
            print(f"PASS: device/vmstate/{d}-eth-stats-migrated")
        else:
            fails += 1
            print(f"FAIL: device/vmstate/{d}-eth-stats-migrated (the "
                  f"stream's ethernet-statistics/counters/values has "
                  f"{nums or 'no values array'}, NCM_ETH_STAT_COUNTERS "
                  f"lists {len(eth_list)})")
    for d in DEVICES:
        leaked = (field_names(got[d]["Description"], set()) & debug) - \
            eth_stats
        if leaked:
            fails += 1
            print(f"FAIL: device/vmstate/{d}-no-debug-counters "
                  f"({', '.join(sorted(leaked))} in the stream)")
        else:
            print(f"PASS: device/vmstate/{d}-no-debug-counters")
    fails += check_added_counter(os.path.join(
        TOP, "include/hw/usb/ncm-function.h"),
        os.path.dirname(os.path.abspath(qemu)))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
