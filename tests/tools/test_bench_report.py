#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# scripts/bench/bench-report.py against hand-made make bench and make
# bench-scaling runs whose numbers are known: medians over boots, ratios
# and targets per backend, CPU seconds per GB over the TCP phases only,
# RSS idle and under load, the JSON files, and the chart when gnuplot or
# matplotlib is there.
import io
import json
import os
import shutil
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

from repo_script import TOP, load

report = load("bench_report", "scripts", "bench", "bench-report.py")

T0 = 2000.0
SECS = 5


def write_boot(log, tcp, cpu_per_phase, rss=(100, 200), irq="500 250 5.00"):
    """One bench boot: TCP rates (up_p1, down_p1, up_p4, down_p4), QEMU
    using cpu_per_phase CPU seconds in each TCP phase and 10 s (not to be
    counted) in the UDP phase."""
    up1, down1, up4, down4 = tcp
    with open(log, "w") as f:
        f.write("NCMTEST phase=boot\n")
        for k, v in (("up_p1", up1), ("down_p1", down1), ("up_p4", up4),
                     ("down_p4", down4)):
            f.write(f"NCMTEST iperf_{k}_receiver_mbps={v}\n")
            f.write(f"NCMTEST irq_{k}={irq}\n")
        f.write("NCMTEST udp_up_pps=1000\nNCMTEST udp_down_pps=500\n")
        f.write("NCMTEST ping_rtt_ms=1.0/2.0/3.0\nNCMTEST phase=done\n")
    names = ["ping", "iperf-up", "iperf-down", "iperf-up", "iperf-down",
             "udp-up", "done"]
    with open(log + ".phases", "w") as f:
        for i, n in enumerate(names):
            f.write(f"{T0 + 10 * i:.6f} {n} | cpu 0 0 0 0 0 0 0 0\n")
    cpu, lines = 0.0, []
    for i in range(len(names)):
        lines.append(f"{T0 + 10 * i:.3f} {cpu:.2f} "
                     f"{rss[1] * 1024 if 1 <= i <= 4 else rss[0] * 1024}")
        if 1 <= i <= 4:
            cpu += cpu_per_phase
        elif names[i] == "udp-up":
            cpu += 10
    with open(log + ".proc", "w") as f:
        f.write("\n".join(lines) + "\n")


class BenchReportTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = self.tmp.name
        run = {"seconds": SECS, "reps": 3,
               "backends": {"tap": ["ncm-64k", "usb-net", "virtio-net-nooff"],
                            "slirp": ["ncm-64k", "usb-net"]}}
        with open(os.path.join(self.out, "run.json"), "w") as f:
            json.dump(run, f)
        rates = {
            # three boots each; medians: ncm 300/400/500/600,
            # usb-net 100/200/100/200, virtio-net-nooff 600/800/1000/1200
            "ncm-64k": [(300, 400, 500, 600), (290, 390, 490, 590),
                        (310, 410, 510, 610)],
            "usb-net": [(100, 200, 100, 200)] * 3,
            "virtio-net-nooff": [(600, 800, 1000, 1200), (1, 1, 1, 1),
                                 (700, 900, 1100, 1300)],
        }
        for backend in run["backends"]:
            d = os.path.join(self.out, backend, "logs")
            os.makedirs(d)
            for c in run["backends"][backend]:
                for i, tcp in enumerate(rates[c], 1):
                    write_boot(os.path.join(d, f"{c}-{i}.log"), tcp, 2.0)

    def tearDown(self):
        self.tmp.cleanup()

    def test_one_boot(self):
        log = os.path.join(self.out, "tap", "logs", "ncm-64k-1.log")
        r = report.one_boot(log, SECS)
        self.assertEqual(r["tcp_down_p4"], 600)
        self.assertEqual(r["ping_avg_ms"], 2.0)
        self.assertEqual(r["irq_up_p1"], 100)
        # 4 TCP phases x 2 s; the UDP phase's 10 s do not count
        self.assertAlmostEqual(r["cpu_s_tcp"], 8.0)
        gb = (300 + 400 + 500 + 600) * SECS / 8 / 1000
        self.assertAlmostEqual(r["cpu_s_per_gb"], 8.0 / gb)
        self.assertEqual(r["rss_max_mib"], 200)

    def test_clock_jump_not_counted(self):
        # ncm-64k boot 2's guest clock jumps during its 1-stream download
        # (the guest's iperf3: 0.01 Mbit/s over 187235 s): that figure is
        # left out, so the median is of boots 1 and 3 (400, 410), not 400.
        log = os.path.join(self.out, "tap", "logs", "ncm-64k-2.log")
        with open(log) as f:
            text = f.read()
        text = text.replace("iperf_down_p1_receiver_mbps=390",
                            "iperf_down_p1_receiver_mbps=0.01")
        text = text.replace("irq_down_p1=500 250 5.00",
                            "irq_down_p1=500 250 187235.39", 1)
        with open(log, "w") as f:
            f.write(text)
        r = report.one_boot(log, SECS)
        self.assertIsNone(r["tcp_down_p1"])
        self.assertIsNone(r["irq_down_p1"])
        self.assertEqual(r["tcp_up_p1"], 290)
        self.assertEqual(len(r["discarded"]), 1)
        out = io.StringIO()
        with redirect_stdout(out):
            report.bench(self.out)
        with open(os.path.join(self.out, "results-tap.json")) as f:
            tap = json.load(f)
        self.assertEqual(tap["medians"]["ncm-64k"]["tcp_down_p1"], 405)
        self.assertIn("not counted: ncm-64k boot 2, tcp_down_p1 0.01",
                      out.getvalue())

    def test_bench(self):
        out = io.StringIO()
        with redirect_stdout(out):
            report.bench(self.out)
        text = out.getvalue()
        with open(os.path.join(self.out, "results-tap.json")) as f:
            tap = json.load(f)
        self.assertEqual(tap["medians"]["ncm-64k"]["tcp_up_p1"], 300)
        self.assertEqual(tap["medians"]["virtio-net-nooff"]["tcp_up_p1"], 600)
        self.assertAlmostEqual(
            tap["ratios"]["ncm-64k/virtio-net-nooff"]["tcp_down_p4"], 0.5)
        self.assertAlmostEqual(
            tap["ratios"]["ncm-64k/usb-net"]["tcp_up_p4"], 5.0)
        tgt = {(t["base"], t["metric"]): t["ratio"] for t in tap["targets"]}
        self.assertEqual(len(tgt), 8)
        self.assertAlmostEqual(tgt[("usb-net", "tcp_down_p1")], 2.0)
        with open(os.path.join(self.out, "results-slirp.json")) as f:
            slirp = json.load(f)
        self.assertEqual([t["metric"] for t in slirp["targets"]],
                         ["tcp_down_p1", "tcp_down_p4"])
        self.assertIn("ncm-64k / virtio-net-nooff  TCP down 4 streams", text)
        self.assertIn("= 3.00x", text)          # slirp down 4: 600 / 200
        for b in ("tap", "slirp"):
            self.assertTrue(os.path.exists(
                os.path.join(self.out, f"bench-{b}.png")))

    def test_scaling(self):
        d = os.path.join(self.out, "scaling")
        os.makedirs(os.path.join(d, "tap", "logs"))
        with open(os.path.join(d, "run.json"), "w") as f:
            json.dump({"seconds": 8, "backend": "tap", "configs": [
                {"name": "ncm-2", "devices": 2, "controllers": 1,
                 "device": "usb-ncm-dl"}]}, f)
        log = os.path.join(d, "tap", "logs", "ncm-2-1.log")
        with open(log, "w") as f:
            f.write("NCMTEST scale_up_mbps=400\nNCMTEST scale_down_mbps=600\n"
                    "NCMTEST scale_up_each=200 200\n"
                    "NCMTEST irq_scale_up=800 0 8.00\n")
        with open(log + ".phases", "w") as f:
            for i, n in enumerate(["ping", "scale-idle", "scale-up",
                                   "scale-down", "done"]):
                f.write(f"{T0 + 10 * i:.6f} {n} | cpu 0\n")
        with open(log + ".proc", "w") as f:
            # idle 100-102 MiB, 300 MiB at most under load; 5 CPU s per run
            for t, cpu, rss in ((5, 0, 90), (10, 0, 100), (15, 0, 102),
                                (20, 1, 250), (25, 4, 300), (30, 6, 280),
                                (40, 11, 200), (45, 30, 200)):
                f.write(f"{T0 + t:.3f} {cpu} {rss * 1024}\n")
        out = io.StringIO()
        with redirect_stdout(out):
            report.scaling(d)
        with open(os.path.join(d, "scaling.json")) as f:
            m = json.load(f)["results"]["ncm-2"]["medians"]
        self.assertEqual(m["up"], 400)
        self.assertAlmostEqual(m["cpu_s_per_gb"], 10 / ((400 + 600) * 8 / 8000))
        self.assertEqual(m["rss_idle_mib"], 101)
        self.assertEqual(m["rss_load_mib"], 300)
        self.assertEqual(m["irq_up"], 100)
        self.assertIn("ncm-2", out.getvalue())
        # a second boot whose guest clock jumped during the download: its
        # download and interrupt rate are left out, its upload counts
        with open(log) as f:
            text = f.read()
        log2 = os.path.join(d, "tap", "logs", "ncm-2-2.log")
        with open(log2, "w") as f:
            f.write(text.replace("scale_up_mbps=400", "scale_up_mbps=500") +
                    "NCMTEST irq_scale_down=800 0 187235.39\n")
        for ext in (".phases", ".proc"):
            shutil.copy(log + ext, log2 + ext)
        out = io.StringIO()
        with redirect_stdout(out):
            report.scaling(d)
        with open(os.path.join(d, "scaling.json")) as f:
            r = json.load(f)["results"]["ncm-2"]
        self.assertEqual(r["medians"]["up"], 450)
        self.assertEqual(r["medians"]["down"], 600)
        self.assertIsNone(r["boots"][1]["down"])
        self.assertIsNone(r["boots"][1]["irq_down"])
        self.assertIn("the guest's clock measured 187235.39 s",
                      out.getvalue())


def have_chart_tool():
    try:
        import matplotlib  # noqa: F401
        return True
    except ImportError:
        return shutil.which("gnuplot") is not None


if not have_chart_tool():
    # no chart tool (make check installs only the build packages): the
    # numbers are still checked, the chart is not
    report.chart = lambda path, *a: open(path, "w").close()

if __name__ == "__main__":
    sys.exit(unittest.main())
