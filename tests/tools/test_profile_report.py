#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# scripts/bench/profile-report.py against a hand-made run directory whose numbers
# are known: phase windows, per-thread and per-category host shares,
# guest symbol resolution (modules included), sample weights, /proc/stat.
import io
import os
import sys
import tarfile
import tempfile
import unittest
from contextlib import redirect_stdout

from repo_script import TOP, load

report = load("profile_report", "scripts", "bench", "profile-report.py")

T0 = 1000.0
KALLSYMS = (
    "ffffffff81000000 T _stext\n"
    "ffffffff81001000 T native_apic_mem_write\n"
    "ffffffff81002000 T __memcpy\n"
    "ffffffff81003000 t tcp_rcv_established\n"
    "ffffffffc0001000 t cdc_ncm_rx_fixup\t[cdc_ncm]\n"
    "ffffffffc0002000 t xhci_irq\t[xhci_hcd]\n")


def stat_line(user, system, idle, irq):
    return f"cpu {user} 0 {system} {idle} 0 {irq} 0 0 0 0"


def make_run(d):
    # download from T0 to T0 + 5.2: the window is [T0 + 1, T0 + 5)
    with open(os.path.join(d, "phases.txt"), "w") as f:
        f.write(f"{T0:.6f} iperf-down | cpu 0 0 0 0 0 0 0 0\n")
        f.write(f"{T0 + 5.2:.6f} done | cpu 300 0 100 400 0 0 0 0\n")
    lines = []
    # 4 s window at 999 Hz: vCPU 2997 samples (75 %), main 999 (25 %)
    for i in range(2997):
        t = T0 + 1 + i * 4 / 2997
        sym, dso = (("[unknown]", "[unknown]") if i % 3 else
                    ("helper_lookup_tb_ptr", "/b/qemu-system-x86_64"))
        lines.append(f" CPU 0/TCG 11 {t:.6f}: 55aa {sym} ({dso})")
    for i in range(999):
        t = T0 + 1 + i * 4 / 999
        sym, dso = (("ncm_function_out_direct", "/b/qemu-system-x86_64")
                    if i % 2 else ("slirp_input", "/usr/lib/libslirp.so.0"))
        lines.append(f" qemu-system-x86 10 {t:.6f}: 55aa {sym} ({dso})")
    # outside the window: must not count
    lines.append(f" CPU 0/TCG 11 {T0 + 0.5:.6f}: 55aa x (/b/qemu-system-x86_64)")
    with open(os.path.join(d, "perf.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    # guest RIP: samples every 10 ms; 1/2 halted, 1/4 cdc_ncm, 1/4 memcpy
    rips = []
    for i in range(400):
        t = T0 + 1 + i * 0.01
        kind = i % 4
        if kind in (0, 1):
            rips.append(f"{t:.6f} ffffffff81001010 0 1")
        elif kind == 2:
            rips.append(f"{t:.6f} ffffffffc0001040 0 0")
        else:
            rips.append(f"{t:.6f} ffffffff81002008 0 0")
    with open(os.path.join(d, "guest-rip.txt"), "w") as f:
        f.write("\n".join(rips) + "\n")
    with tarfile.open(os.path.join(d, "guest.tgz"), "w:gz") as tar:
        for name, text in (
                ("prof/kallsyms", KALLSYMS),
                ("prof/down.stat", stat_line(0, 0, 0, 0) + "\n" +
                 stat_line(10, 20, 60, 10) + "\n")):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    # QEMU trace log: 2 doorbells to slot 1 DCI 3 and 2 IN NTBs per
    # 10 ms, one doorbell outside the window
    tr = [f"42@{T0 + 0.5:.6f}:usb_xhci_doorbell_write off 0x0004, val 0x00000003"]
    for i in range(400):
        t = T0 + 1 + i * 0.01
        tr.append(f"42@{t:.6f}:usb_xhci_doorbell_write off 0x0004, val 0x00000003")
        # trace events of the device start with its id (here "nic 7")
        tr.append(f"42@{t:.6f}:usb_ncm_in_ntb nic 7: IN NTB 30000 bytes, "
                  "20 datagrams")
        tr.append(f"42@{t:.6f}:usb_ncm_park nic 7: ep 1: packet of 65536 "
                  "bytes parked, NTB built in place 1")
    with open(os.path.join(d, "trace.log"), "w") as f:
        f.write("\n".join(tr) + "\n")
    # sync-profile dumps (cumulative) before the window, inside it near
    # its end, and after it (must not count): over the 4.4 s between the
    # first two, the vCPU's BQL waits grow by 1.1 s, the main loop's 0.4 s
    head = ("Type               Object  Call site                   Wait Time "
            "(s)         Count  Average (us)\n" + "-" * 96 + "\n")
    dumps = []
    for t, vcpu, vn, main, mn in ((T0 + 0.5, 1.0, 1000, 0.5, 100),
                                  (T0 + 4.9, 2.1, 12000, 0.9, 500),
                                  (T0 + 5.1, 9.9, 99000, 0.9, 500)):
        dumps.append(
            f"@ {t:.6f}\n{head}"
            f"BQL mutex  0x55f5a0a9ee60  system/physmem.c:2866  {vcpu:.5f}"
            f"  {vn}  1.00\n"
            f"condvar    0x55f5b6d1c100  system/cpus.c:463  10.00000  20"
            f"  500000.00\n"
            f"BQL mutex  0x55f5a0a9ee60  util/main-loop.c:308  {main:.5f}"
            f"  {mn}  1.09\n"
            f"mutex      [           3]  include/qemu/lockable.h:56"
            f"  0.00001  428  0.03\n" + "-" * 96 + "\n")
    with open(os.path.join(d, "guest-rip.txt.sync"), "w") as f:
        f.write("".join(dumps))
    with open(os.path.join(d, "console.log"), "w") as f:
        f.write("NCMTEST iperf_down_receiver_mbps=123\n"
                "NCMTEST irq_down=800 1000 4.00\n")


class ProfileReportTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.run_dir = os.path.join(self.tmp.name, "ncm-64k")
        os.mkdir(self.run_dir)
        make_run(self.run_dir)

    def tearDown(self):
        self.tmp.cleanup()

    def test_window(self):
        wins = report.phase_windows(os.path.join(self.run_dir, "phases.txt"))
        start, end, busy = wins["iperf-down"]
        self.assertAlmostEqual(start, T0 + 1.0)
        self.assertAlmostEqual(end, T0 + 5.0)
        self.assertAlmostEqual(busy, 0.5 * os.cpu_count())
        self.assertNotIn("done", wins)

    def test_host_threads_and_categories(self):
        threads, cats, _ = report.host_profile(
            os.path.join(self.run_dir, "perf.txt"), (T0 + 1, T0 + 5))
        self.assertEqual(threads["vCPU (CPU 0/TCG)"], 2997)
        self.assertEqual(threads["main loop (qemu-system-x86)"], 999)
        self.assertEqual(cats["TCG: guest code"], 1998)
        self.assertEqual(cats["TCG runtime"], 999)
        self.assertEqual(cats["usb-ncm device"], 499)
        self.assertEqual(cats["slirp"], 500)

    def test_guest_samples(self):
        syms = report.Symbols(KALLSYMS)
        self.assertEqual(syms.lookup(0xffffffffc0001040),
                         ("cdc_ncm_rx_fixup", "cdc_ncm"))
        count, total, cats, funcs = report.guest_profile(
            os.path.join(self.run_dir, "guest-rip.txt"), syms,
            (T0 + 1, T0 + 5))
        self.assertEqual(count, 400)
        self.assertAlmostEqual(cats["idle (HLT)"] / total, 0.5, places=2)
        self.assertAlmostEqual(cats["NIC driver"] / total, 0.25, places=2)
        self.assertAlmostEqual(cats["copy/memset"] / total, 0.25, places=2)
        self.assertAlmostEqual(funcs["cdc_ncm_rx_fixup [cdc_ncm]"] / total,
                               0.25, places=2)

    def test_trace_counts(self):
        c = report.trace_counts(os.path.join(self.run_dir, "trace.log"),
                                (T0 + 1, T0 + 5))
        self.assertEqual(c["doorbell"], 400)
        self.assertEqual(c["doorbell slot 1 DCI 3"], 400)
        self.assertEqual(c["usb_ncm_in_ntb"], 400)
        self.assertEqual(c["usb_ncm_in_ntb datagrams"], 8000)
        self.assertEqual(c["usb_ncm_in_ntb bytes"], 12000000)
        self.assertEqual(c["usb_ncm_park ep 1"], 400)

    def test_sync_waits(self):
        span, waits = report.sync_waits(
            os.path.join(self.run_dir, "guest-rip.txt.sync"), (T0 + 1, T0 + 5))
        self.assertAlmostEqual(span, 4.4)
        w, n = waits[("BQL", "system/physmem.c:2866")]
        self.assertAlmostEqual(w, 1.1)
        self.assertEqual(n, 11000)
        self.assertAlmostEqual(waits[("condvar", "system/cpus.c:463")][0], 0)
        self.assertAlmostEqual(waits[("mutex", "include/qemu/lockable.h:56")][0],
                               0)

    def test_summary(self):
        out = io.StringIO()
        sys.argv = ["profile-report.py", self.tmp.name, "ncm-64k"]
        with redirect_stdout(out):
            report.main()
        text = out.getvalue()
        rows = {l[:34].strip(): l[34:].strip() for l in text.splitlines()
                if l.startswith(("Mbit/s", "vCPU thread", "main-loop",
                                 "guest idle (/proc/stat)",
                                 "device model", "slirp, %",
                                 "guest NIC interrupts/s",
                                 "xHCI doorbells", "IN datagrams per NTB",
                                 "BQL wait"))}
        self.assertEqual(rows["Mbit/s"], "123")
        self.assertEqual(rows["vCPU thread, % core"], "75.0")
        self.assertEqual(rows["main-loop thread, % core"], "25.0")
        self.assertEqual(rows["device model, % core"], "12.5")
        self.assertEqual(rows["slirp, % core"], "12.5")
        self.assertEqual(rows["guest idle (/proc/stat), %"], "60.0")
        self.assertEqual(rows["guest NIC interrupts/s"], "200.0")
        self.assertEqual(rows["xHCI doorbells (virtio kicks)/s"], "100.0")
        self.assertEqual(rows["IN datagrams per NTB"], "20.0")
        self.assertEqual(rows["BQL wait, other threads, % time"], "25.0")
        self.assertEqual(rows["BQL wait, main loop, % time"], "9.1")


if __name__ == "__main__":
    unittest.main()
