#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Summarise a `make bench` run: medians per configuration, ratios against
# usb-net and virtio-net, the 64 KiB effect, QEMU CPU seconds per GB moved.
# Writes OUT/results.json and OUT/bench.png (gnuplot).
#
#   bench-report.py OUT IPERF-SECONDS CONFIG...
import glob
import json
import os
import re
import statistics
import subprocess
import sys

METRICS = [
    # key, label, unit, higher is better
    ("tcp_up_p1", "TCP up 1 stream", "Mbit/s", True),
    ("tcp_down_p1", "TCP down 1 stream", "Mbit/s", True),
    ("tcp_up_p4", "TCP up 4 streams", "Mbit/s", True),
    ("tcp_down_p4", "TCP down 4 streams", "Mbit/s", True),
    ("udp_up_pps", "UDP 64B up", "pkt/s", True),
    ("udp_down_pps", "UDP 64B down", "pkt/s", True),
    ("ping_avg_ms", "ping avg", "ms", False),
    ("cpu_s_per_gb", "QEMU CPU per GB", "s/GB", False),
]


def ncmtest(path):
    vals = {}
    with open(path, errors="replace") as f:
        for line in f:
            m = re.search(r"NCMTEST ([\w.]+)=(.*)$", line.rstrip("\r\n"))
            if m and m.group(1) not in vals:
                vals[m.group(1)] = m.group(2)
    return vals


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def one_boot(log, seconds):
    v = ncmtest(log)
    r = {}
    for d in ("up", "down"):
        for p in ("p1", "p4"):
            r[f"tcp_{d}_{p}"] = num(v.get(f"iperf_{d}_{p}_receiver_mbps"))
        r[f"udp_{d}_pps"] = num(v.get(f"udp_{d}_pps"))
    rtt = v.get("ping_rtt_ms", "")
    r["ping_avg_ms"] = num(rtt.split("/")[1]) if rtt.count("/") == 2 else None
    cpu = None
    try:
        with open(log + ".stats.json") as f:
            cpu = json.load(f).get("qemu_cpu_seconds")
    except (OSError, ValueError):
        pass
    mbit = sum(x for k, x in r.items() if k.startswith("tcp_") and x)
    gb = mbit * seconds / 8 / 1000
    r["cpu_s_per_gb"] = cpu / gb if cpu and gb else None
    r["qemu_cpu_seconds"] = cpu
    r["gb_moved"] = gb
    return r


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, unit=""):
    if x is None:
        return "-"
    if unit == "ms" or abs(x) < 10:
        return f"{x:.2f}"
    return f"{x:.0f}"


def main():
    out, seconds, configs = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
    runs, med = {}, {}
    for c in configs:
        logs = sorted(glob.glob(os.path.join(out, "logs", f"{c}-[0-9]*.log")))
        runs[c] = [one_boot(log, seconds) for log in logs]
        med[c] = {k: median([r[k] for r in runs[c]]) for k, *_ in METRICS}

    width = 14
    print()
    boots = max(len(r) for r in runs.values())
    what = f"Medians of {boots} boots" if boots > 1 else "One boot"
    print(f"{what} per configuration ({int(seconds)} s per iperf3 run)")
    print(f"{'':24}" + "".join(f"{c:>{width}}" for c in configs))
    for k, label, unit, _ in METRICS:
        print(f"{label + ' (' + unit + ')':24}" +
              "".join(f"{fmt(med[c][k], unit):>{width}}" for c in configs))

    def ratio(a, b, k):
        x, y = med.get(a, {}).get(k), med.get(b, {}).get(k)
        return x / y if x and y else None

    ratios = {}
    ncm = [c for c in configs if c.startswith("ncm")]
    for base in ("usb-net", "virtio-net"):
        if base not in configs:
            continue
        print()
        print(f"Ratio to {base} (higher is better; ping and CPU: lower)")
        print(f"{'':24}" + "".join(f"{c:>{width}}" for c in ncm))
        for k, label, unit, _ in METRICS:
            row = [ratio(c, base, k) for c in ncm]
            for c, x in zip(ncm, row):
                ratios.setdefault(f"{c}/{base}", {})[k] = x
            print(f"{label:24}" + "".join(
                f"{(f'{x:.2f}x' if x else '-'):>{width}}" for x in row))
    effect = {}
    if "ncm-64k" in configs and "ncm-16k" in configs:
        print()
        for k in ("tcp_down_p1", "tcp_down_p4"):
            effect[k] = ratio("ncm-64k", "ncm-16k", k)
            print(f"64 KiB effect, {k}: rx_max 65536 / 16384 = "
                  f"{fmt(effect[k])}x")

    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"seconds_per_iperf_run": seconds, "runs": runs,
                   "medians": med, "ratios": ratios,
                   "effect_64k_over_16k": effect}, f, indent=1,
                  sort_keys=True)

    dat = os.path.join(out, "bench.dat")
    keys = ["tcp_up_p1", "tcp_down_p1", "tcp_up_p4", "tcp_down_p4"]
    with open(dat, "w") as f:
        f.write("config " + " ".join(keys) + "\n")
        for c in configs:
            f.write(c + " " + " ".join(fmt(med[c][k]) if med[c][k]
                                       else "0" for k in keys) + "\n")
    plot = f"""
set terminal png size 1000,560
set termoption noenhanced
set output '{os.path.join(out, "bench.png")}'
set title 'TCP throughput, medians (guest under TCG, -netdev user)'
set ylabel 'Mbit/s'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key outside right
set grid ytics
set yrange [0:*]
set xtics rotate by -20
plot for [i=2:5] '{dat}' using i:xtic(1) title columnheader(i)
"""
    subprocess.run(["gnuplot"], input=plot.encode(), check=True)
    print()
    print(f"results: {os.path.join(out, 'results.json')}, "
          f"chart: {os.path.join(out, 'bench.png')}")


if __name__ == "__main__":
    main()
