# SPDX-License-Identifier: GPL-2.0-or-later
#
# gdb commands for a replay of the test guest (tests/guest/replay-lib.sh,
# REPLAY_GDB=1), loaded with: gdb -x tests/guest/gdb-ncm.py VMLINUX
#
#   ncm-modsyms [DIR]   add-symbol-file for the guest's loaded usbnet,
#                       cdc_ncm and cdc_ether, from the module debug files
#                       of Debian's -dbg package under DIR (default: next
#                       to the vmlinux, as tests/guest/kernel-dbg.sh keeps
#                       them).  A module's code starts at its core
#                       layout's base (Linux 6.1: core_layout.base; 6.4+:
#                       mem[MOD_TEXT].base).  Run it once the modules are
#                       loaded (the interface is up).
#   ncm-full-ntb        stop when cdc_ncm_fill_tx_frame() returns an NTB
#                       of tx_max bytes: under "CDC NCM (NO ZLP)" that one
#                       goes out padded and without a short packet, and a
#                       zlp=required device merges the next NTB into it
#                       (the ZLP dropout).  After ncm-modsyms.
import os

import gdb

WANTED = ("usbnet", "cdc_ncm", "cdc_ether")


def module_text_base(m):
    fields = [f.name for f in m.type.target().fields()]
    if "core_layout" in fields:
        return int(m["core_layout"]["base"])
    return int(m["mem"][0]["base"])


class NcmModSyms(gdb.Command):
    """Load the symbols of the guest's usbnet and cdc_ncm modules."""

    def __init__(self):
        super().__init__("ncm-modsyms", gdb.COMMAND_USER)

    def invoke(self, arg, from_tty):
        d = arg.strip()
        if not d:
            vml = gdb.current_progspace().filename or ""
            # .../usr/lib/debug/boot/vmlinux-VER -> .../usr/lib/debug
            d = os.path.dirname(os.path.dirname(vml))
        ver = gdb.parse_and_eval("init_uts_ns.name.release").string()
        kdir = os.path.join(d, "lib", "modules", ver, "kernel", "drivers",
                            "net", "usb")
        mod_t = gdb.lookup_type("struct module")
        off = [f for f in mod_t.fields() if f.name == "list"][0].bitpos // 8
        head = gdb.parse_and_eval("modules")
        node = head["next"]
        found = 0
        while int(node) != int(head.address):
            addr = int(node.cast(gdb.lookup_type("unsigned long"))) - off
            m = gdb.Value(addr).cast(mod_t.pointer())
            name = m["name"].string()
            if name in WANTED:
                f = os.path.join(kdir, name + ".ko")
                if not os.path.exists(f):
                    print(f"ncm-modsyms: no {f}")
                else:
                    base = module_text_base(m)
                    gdb.execute(f"add-symbol-file {f} {base:#x}",
                                to_string=True)
                    print(f"ncm-modsyms: {name} .text at {base:#x}")
                    found += 1
            node = node["next"]
        if not found:
            print("ncm-modsyms: none of usbnet/cdc_ncm is loaded yet")


NcmModSyms()


class NcmFullNtbReturn(gdb.FinishBreakpoint):
    def stop(self):
        skb = self.return_value
        if skb is None or int(skb) == 0:
            return False
        full = int(skb["len"]) >= int(gdb.parse_and_eval("$ncm_tx_max"))
        if full:
            gdb.set_convenience_variable("ncm_skb", skb)
        return full


class NcmFullNtbEntry(gdb.Breakpoint):
    def stop(self):
        # ctx is not computed yet at the entry: the driver's data[0]
        tx_max = gdb.parse_and_eval(
            "((struct cdc_ncm_ctx *)dev->data[0])->tx_max")
        gdb.set_convenience_variable("ncm_tx_max", int(tx_max))
        NcmFullNtbReturn(gdb.newest_frame(), internal=True)
        return False


class NcmFullNtb(gdb.Command):
    """Stop where cdc_ncm returns an NTB of tx_max bytes ($ncm_skb)."""

    def __init__(self):
        super().__init__("ncm-full-ntb", gdb.COMMAND_USER)

    def invoke(self, arg, from_tty):
        NcmFullNtbEntry("cdc_ncm_fill_tx_frame",
                        type=gdb.BP_HARDWARE_BREAKPOINT, internal=True)
        print("ncm-full-ntb: 'continue' stops at the return of an NTB of "
              "tx_max bytes; the skb is $ncm_skb")


NcmFullNtb()
