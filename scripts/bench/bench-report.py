#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Summarise make bench and make bench-scaling runs.
#
#   bench-report.py bench OUT      medians per backend and configuration,
#                                  ratios, the targets; writes
#                                  OUT/results-BACKEND.json and
#                                  OUT/bench-BACKEND.png
#   bench-report.py scaling OUT    the scaling table; OUT/scaling.json
#   bench-report.py one LOG SECS   one line about one boot (progress)
#
# OUT/run.json (written by scripts/bench/bench.sh or bench-scaling.sh) says what
# ran. Per boot, LOG is the console (NCMTEST lines), LOG.phases the guest's
# phases with host times, LOG.proc QEMU's CPU seconds and RSS over time
# (scripts/bench/bench-proc-sampler.py), LOG.stats.json the device counters.
# CPU seconds per GB count the TCP phases only: boot, ping and UDP are out.
# Charts: matplotlib when python3 has it, else gnuplot.
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import time

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
    ("irq_up_p1", "guest NIC irq, up 1", "1/s", False),
    ("irq_down_p1", "guest NIC irq, down 1", "1/s", False),
    ("rss_max_mib", "QEMU RSS max", "MiB", False),
]
TCP = ["tcp_up_p1", "tcp_down_p1", "tcp_up_p4", "tcp_down_p4"]
# Ratios of every other configuration to these, when they ran
BASES = ["virtio-net-nooff", "usb-net", "virtio-net"]
# The figures issue 13 asks for: (backend, config, base, metrics)
TARGETS = [
    ("tap", "ncm-64k", "virtio-net-nooff", TCP),
    ("tap", "ncm-64k", "usb-net", TCP),
    ("slirp", "ncm-64k", "usb-net", ["tcp_down_p1", "tcp_down_p4"]),
]


def ncmtest(path):
    vals = {}
    try:
        with open(path, errors="replace") as f:
            for line in f:
                m = re.search(r"NCMTEST ([\w.]+)=(.*)$", line.rstrip("\r\n"))
                if m and m.group(1) not in vals:
                    vals[m.group(1)] = m.group(2)
    except OSError:
        pass
    return vals


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def phases(path):
    """[(name, start, end)] from a phase log (the last phase has no end)."""
    rows = []
    try:
        with open(path) as f:
            for line in f:
                head = line.split("|", 1)[0].split()
                if len(head) >= 2:
                    rows.append((head[1], float(head[0])))
    except OSError:
        return []
    return [(n, t0, t1) for (n, t0), (_, t1) in zip(rows, rows[1:])]


def proc_samples(path):
    """[(t, cpu_seconds, rss_kib)] from bench-proc-sampler.py"""
    out = []
    try:
        with open(path) as f:
            for line in f:
                p = line.split()
                if len(p) == 3:
                    out.append((float(p[0]), float(p[1]), int(p[2])))
    except OSError:
        pass
    return out


def cpu_at(samples, t):
    """QEMU's CPU seconds at host time t, interpolated."""
    if not samples or t < samples[0][0] or t > samples[-1][0]:
        return None
    for (t0, c0, _), (t1, c1, _) in zip(samples, samples[1:]):
        if t0 <= t <= t1:
            return c0 + (c1 - c0) * (t - t0) / (t1 - t0) if t1 > t0 else c0
    return samples[-1][1]


def cpu_in(samples, wins):
    total = 0.0
    for _, t0, t1 in wins:
        a, b = cpu_at(samples, t0), cpu_at(samples, t1)
        if a is None or b is None:
            return None
        total += b - a
    return total


def rss_in(samples, wins, how):
    xs = [r for t, _, r in samples for _, t0, t1 in wins if t0 <= t < t1]
    return how(xs) / 1024 if xs else None


def irq_rate(v, key):
    """NIC interrupts per second from an irq_KEY=NIC LOC SECONDS line."""
    p = (v.get(f"irq_{key}") or "").split()
    if len(p) == 3 and num(p[2]):
        return float(p[0]) / float(p[2])
    return None


def guest_seconds(v, key):
    """The guest's own measure of a TCP run's length (its irq_KEY line)."""
    p = (v.get(f"irq_{key}") or "").split()
    return num(p[2]) if len(p) == 3 else None


def clock_jumped(v, key, seconds):
    """The guest's clock jumped during run KEY if it measured the run far
    from its length (iperf3 runs SECONDS plus its set-up). Seen once (run
    F, docs/performance/bench-F.txt): the host VM was forked mid-run and
    its TSC, which a TCG guest's TSC follows, moved on; iperf3 in the
    guest then reported a rate near zero over days of guest time. Such a
    figure is no measurement of the NIC."""
    s = guest_seconds(v, key)
    return s is not None and not 0.5 * seconds <= s <= 3 * seconds + 10


def one_boot(log, seconds):
    v = ncmtest(log)
    r = {"discarded": []}
    for d in ("up", "down"):
        for p in ("p1", "p4"):
            r[f"tcp_{d}_{p}"] = num(v.get(f"iperf_{d}_{p}_receiver_mbps"))
            r[f"irq_{d}_{p}"] = irq_rate(v, f"{d}_{p}")
            if clock_jumped(v, f"{d}_{p}", seconds):
                r["discarded"].append(
                    f"tcp_{d}_{p} {r[f'tcp_{d}_{p}']} Mbit/s: the guest's "
                    f"clock measured {guest_seconds(v, f'{d}_{p}')} s")
                r[f"tcp_{d}_{p}"] = r[f"irq_{d}_{p}"] = None
        r[f"udp_{d}_pps"] = num(v.get(f"udp_{d}_pps"))
    rtt = v.get("ping_rtt_ms", "")
    r["ping_avg_ms"] = num(rtt.split("/")[1]) if rtt.count("/") == 2 else None
    samples = proc_samples(log + ".proc")
    wins = [w for w in phases(log + ".phases") if w[0].startswith("iperf-")]
    gb = sum(r[k] for k in TCP if r[k]) * seconds / 8 / 1000
    cpu = cpu_in(samples, wins) if wins else None
    r["cpu_s_tcp"] = cpu
    r["gb_moved"] = gb
    r["cpu_s_per_gb"] = cpu / gb if cpu and gb else None
    r["rss_max_mib"] = max(s[2] for s in samples) / 1024 if samples else None
    try:
        with open(log + ".stats.json") as f:
            stats = json.load(f)
        r["qemu_cpu_seconds_boot"] = stats.get("qemu_cpu_seconds")
        if "in_ntbs" in stats and stats.get("in_ntbs"):
            r["in_datagrams_per_ntb"] = stats["in_datagrams"] / stats["in_ntbs"]
        if "out_ntbs" in stats and stats.get("out_ntbs"):
            r["out_datagrams_per_ntb"] = (stats["out_datagrams"] /
                                          stats["out_ntbs"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        with open(log + ".loadavg") as f:
            r["host_loadavg_1m"] = num(f.read().split()[0])
    except (OSError, IndexError):
        pass
    return r


def now():
    """UTC now, as run.json's "started" is written"""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, unit=""):
    if x is None:
        return "-"
    if unit == "ms" or abs(x) < 10:
        return f"{x:.2f}"
    return f"{x:.0f}"


def fmt_ratio(x):
    return f"{x:.2f}x" if x else "-"


def boots(out, backend, config):
    pat = os.path.join(out, backend, "logs", f"{config}-[0-9]*.log")
    return sorted(glob.glob(pat), key=lambda p: int(re.findall(r"-(\d+)\.log$", p)[0]))


def table(rows, cols):
    """rows: [(label, [cells])]"""
    first = max(len(label) for label, _ in rows) + 2
    width = max([14] + [len(c) + 2 for c in cols])
    lines = [f"{'':{first}}" + "".join(f"{c:>{width}}" for c in cols)]
    for label, cells in rows:
        lines.append(f"{label:{first}}" + "".join(f"{c:>{width}}" for c in cells))
    return "\n".join(lines)


def chart(path, title, configs, med, keys, labels):
    """Grouped bars of keys per configuration, values printed on them."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        plt = None
    if plt:
        fig, ax = plt.subplots(figsize=(10, 5.6))
        w = 0.8 / len(keys)
        for i, (k, lab) in enumerate(zip(keys, labels)):
            xs = [j + (i - (len(keys) - 1) / 2) * w for j in range(len(configs))]
            ys = [med[c].get(k) or 0 for c in configs]
            bars = ax.bar(xs, ys, w, label=lab)
            ax.bar_label(bars, labels=[f"{y:.0f}" for y in ys], fontsize=7)
        ax.set_xticks(range(len(configs)), configs)
        ax.set_ylabel("Mbit/s")
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.4)
        ax.legend()
        fig.tight_layout()
        fig.savefig(path)
        return
    dat = path[:-4] + ".dat"
    with open(dat, "w") as f:
        f.write("config " + " ".join(f'"{lab}"' for lab in labels) + "\n")
        for c in configs:
            f.write(c + " " + " ".join(f"{med[c].get(k) or 0:.0f}"
                                       for k in keys) + "\n")
    n = len(keys)
    w = 1.0 / (n + 1)
    plot = f"""
set terminal png size 1000,560
set termoption noenhanced
set output '{path}'
set title '{title}'
set ylabel 'Mbit/s'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key top left autotitle columnhead
set grid ytics
set yrange [0:*]
set offsets 0, 0, graph 0.06, 0
plot for [i=2:{n + 1}] '{dat}' using i:xtic(1), \\
     for [i=2:{n + 1}] '{dat}' using ($0 + (i - 2 - {(n - 1) / 2}) * {w}):i:\\
(sprintf('%d', column(i))) with labels offset 0,0.6 font ',8' notitle
"""
    subprocess.run(["gnuplot"], input=plot.encode(), check=True)


def report_backend(out, run, backend):
    configs = run["backends"][backend]
    seconds = run["seconds"]
    runs, med = {}, {}
    for c in configs:
        runs[c] = [one_boot(log, seconds) for log in boots(out, backend, c)]
        keys = set(k for r in runs[c] for k in r) - {"discarded"}
        med[c] = {k: median([r.get(k) for r in runs[c]]) for k in keys}
        for k, *_ in METRICS:
            med[c].setdefault(k, None)
    n = max((len(r) for r in runs.values()), default=0)
    what = f"medians of {n} boots" if n > 1 else "one boot"
    # runs from before ACCEL existed were all TCG
    accel = run.get("accel", "tcg").upper()
    print(f"\n=== {backend}: {what} per configuration "
          f"({int(seconds)} s per iperf3 run, guest under {accel}) ===")
    print(table([(f"{label} ({unit})", [fmt(med[c][k], unit) for c in configs])
                 for k, label, unit, _ in METRICS], configs))
    for c in configs:
        for i, r in enumerate(runs[c], 1):
            for d in r["discarded"]:
                print(f"not counted: {c} boot {i}, {d} (its clock jumped)")

    def ratio(a, b, k):
        x, y = med.get(a, {}).get(k), med.get(b, {}).get(k)
        return x / y if x and y else None

    ratios = {}
    for base in BASES:
        if base not in configs:
            continue
        others = [c for c in configs if c != base and c not in BASES]
        if not others:
            continue
        rows = []
        for k, label, _, _ in METRICS[:4] + [METRICS[7]]:
            cells = []
            for c in others:
                x = ratio(c, base, k)
                ratios.setdefault(f"{c}/{base}", {})[k] = x
                cells.append(fmt_ratio(x))
            rows.append((label, cells))
        print(f"\nRatio to {base} (throughput: higher is better; CPU: lower)")
        print(table(rows, others))

    targets = []
    for tb, c, base, keys in TARGETS:
        if tb != backend or c not in configs or base not in configs:
            continue
        for k in keys:
            targets.append({"backend": backend, "config": c, "base": base,
                            "metric": k, "value": med[c][k],
                            "base_value": med[base][k],
                            "ratio": ratio(c, base, k)})

    png = os.path.join(out, f"bench-{backend}.png")
    chart(png, f"TCP throughput, {what} (guest under {accel}, {backend} "
          "backend)",
          configs, med, TCP, ["up 1 stream", "down 1 stream",
                              "up 4 streams", "down 4 streams"])
    res = os.path.join(out, f"results-{backend}.json")
    with open(res, "w") as f:
        # what made the figures, for scripts/bench/perf-doc.py's blocks:
        # the run's start and commit (run.json), the report's time (the
        # run's end)
        json.dump({"backend": backend, "seconds_per_iperf_run": seconds,
                   "reps": run.get("reps"), "started": run.get("started"),
                   "reported": now(), "commit": run.get("commit"),
                   "udp_mbps": run.get("udp_mbps"),
                   "host": run.get("host"), "qemu": run.get("qemu"),
                   "accel": accel, "accel_why": run.get("accel_why"),
                   "configs": configs, "runs": runs, "medians": med,
                   "ratios": ratios, "targets": targets}, f, indent=1,
                  sort_keys=True)
    print(f"\n{backend}: results {res}, chart {png}")
    return targets


def bench(out):
    with open(os.path.join(out, "run.json")) as f:
        run = json.load(f)
    targets = []
    for backend in run["backends"]:
        targets += report_backend(out, run, backend)
    if targets:
        print("\n=== Targets (ratio of medians, one run) ===")
        for t in targets:
            label = next(lab for k, lab, *_ in METRICS if k == t["metric"])
            print(f"{t['backend']:6s} {t['config']} / {t['base']:17s} "
                  f"{label:20s} {fmt(t['value']):>6s} / "
                  f"{fmt(t['base_value']):>6s} Mbit/s = {fmt_ratio(t['ratio'])}")


def scaling(out):
    with open(os.path.join(out, "run.json")) as f:
        run = json.load(f)
    seconds = run["seconds"]
    rows, meds = [], {}
    for c in run["configs"]:
        name = c["name"]
        per = []
        for log in boots(out, run["backend"], name):
            v = ncmtest(log)
            samples = proc_samples(log + ".proc")
            ph = phases(log + ".phases")
            r = {}
            for k in ("up", "down"):
                r[k] = num(v.get(f"scale_{k}_mbps"))
                r[f"irq_{k}"] = irq_rate(v, f"scale_{k}")
                if clock_jumped(v, f"scale_{k}", seconds):
                    print(f"not counted: {name} {log}, {k}: the guest's clock "
                          f"measured {guest_seconds(v, f'scale_{k}')} s")
                    r[k] = r[f"irq_{k}"] = None
            gb = (sum(r[k] for k in ("up", "down") if r[k]) *
                  seconds / 8 / 1000)
            cpu = cpu_in(samples, [w for w in ph
                                   if w[0] in ("scale-up", "scale-down")])
            r["cpu_s_per_gb"] = cpu / gb if cpu and gb else None
            r["rss_idle_mib"] = rss_in(samples, [w for w in ph
                                                 if w[0] == "scale-idle"],
                                       statistics.median)
            r["rss_load_mib"] = rss_in(samples, [w for w in ph if w[0] in
                                                 ("scale-up", "scale-down")],
                                       max)
            r["each_up"] = v.get("scale_up_each")
            r["each_down"] = v.get("scale_down_each")
            per.append(r)
        m = {k: median([r[k] for r in per]) for k in
             ("up", "down", "cpu_s_per_gb", "rss_idle_mib", "rss_load_mib",
              "irq_up", "irq_down")}
        meds[name] = {"config": c, "boots": per, "medians": m}
        rows.append((name, c["devices"], c["controllers"], m))
    n = max((len(v["boots"]) for v in meds.values()), default=0)
    what = f"medians of {n} boots" if n > 1 else "one boot"
    print(f"\n=== Scaling, {run['backend']} backend, {what} "
          f"({int(seconds)} s TCP on every NIC at once, guest under "
          f"{run.get('accel', 'tcg').upper()}) ===")
    hdr = (f"{'configuration':16s}{'NICs':>5s}{'xHCIs':>6s}"
           f"{'up Mbit/s':>11s}{'down Mbit/s':>12s}{'CPU s/GB':>10s}"
           f"{'RSS idle MiB':>14s}{'RSS load MiB':>14s}")
    print(hdr)
    for name, dev, ctl, m in rows:
        print(f"{name:16s}{dev:>5d}{ctl:>6d}{fmt(m['up']):>11s}"
              f"{fmt(m['down']):>12s}{fmt(m['cpu_s_per_gb']):>10s}"
              f"{fmt(m['rss_idle_mib']):>14s}{fmt(m['rss_load_mib']):>14s}")
    res = os.path.join(out, "scaling.json")
    with open(res, "w") as f:
        json.dump({"seconds_per_iperf_run": seconds, "run": run,
                   "reported": now(), "results": meds}, f, indent=1,
                  sort_keys=True)
    print(f"\nresults: {res}")


def one(log, seconds):
    r = one_boot(log, seconds)
    print(f"up {fmt(r['tcp_up_p1'])}/{fmt(r['tcp_up_p4'])}, "
          f"down {fmt(r['tcp_down_p1'])}/{fmt(r['tcp_down_p4'])} Mbit/s "
          f"(1/4 streams); QEMU {fmt(r['cpu_s_per_gb'])} CPU s/GB" +
          "".join(f"; not counted: {d}" for d in r["discarded"]))


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "bench":
        bench(sys.argv[2])
    elif len(sys.argv) >= 3 and sys.argv[1] == "scaling":
        scaling(sys.argv[2])
    elif len(sys.argv) >= 4 and sys.argv[1] == "one":
        one(sys.argv[2], float(sys.argv[3]))
    else:
        sys.exit("usage: bench-report.py bench|scaling OUT | one LOG SECONDS")


if __name__ == "__main__":
    main()
