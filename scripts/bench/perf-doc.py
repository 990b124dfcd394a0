#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The results blocks of docs/performance.md, written from the data that
# make bench, make bench-scaling and make profile left in
# docs/performance/, so that no figure in that text is typed by hand and
# none outlives the data it came from.
#
#   perf-doc.py [--check] [DOC [DATA]]
#
# DOC (docs/performance.md) holds each block between the lines
# <!-- perf-doc:NAME:begin --> and <!-- perf-doc:NAME:end -->; what lies
# between them is replaced.  A block whose markers are missing, doubled or
# out of order, or a marker that names no block, stops the script before
# anything is written: a block that silently stays behind is a stale one.
# --check writes nothing and prints "FAIL: style/perf-doc" when DOC's
# blocks are not what DATA (docs/performance/) makes, e.g. after a hand
# edit inside one (the style suite runs it).
#
# Each block starts with what produced its data (command, start time in
# UTC, commit, accelerator) as the stored file records it, and says so
# where the file does not.  After a run worth keeping: copy its report
# and results into docs/performance/ (docs/performance/README.md), then
# run this (make perf-doc).
import difflib
import importlib.util
import json
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))


def _bench_report():
    """scripts/bench/bench-report.py (its metrics and number format)"""
    spec = importlib.util.spec_from_file_location(
        "bench_report", os.path.join(HERE, "bench-report.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BR = _bench_report()
fmt = BR.fmt
TCP = BR.TCP
LABEL = {k: (label, unit) for k, label, unit, _ in BR.METRICS}

# The make bench runs the text compares, the current one first: its
# name in the text, its results file (bench-report.py), and the
# configurations the tables show (None: every one it ran).
BENCH_RUNS = {
    "tap": [("H", "results-tap.json", None),
            ("F", "results-tap-F.json", ["ncm-64k"])],
    "slirp": [("H", "results-slirp.json", None),
              ("F", "results-slirp-F.json", ["ncm-64k", "usb-net"])],
}
# Issue 13's goals for the targets bench-report.py reports: the ratio of
# medians (config / base) each TCP figure is to reach.  The goal is not
# a measurement: it is the line the figures are held against.
GOALS = {("tap", "ncm-64k", "virtio-net-nooff"): 1.0,
         ("tap", "ncm-64k", "usb-net"): 3.0,
         ("slirp", "ncm-64k", "usb-net"): 1.0}
# make profile reports the text quotes: block name, file, run name
PROFILES = [("profile-tap-F", "profile-tap-F.txt", "F"),
            ("profile-tap", "profile-tap.txt", "H"),
            ("profile-slirp", "profile-slirp.txt", "H")]
# The BQL call sites the profile text names, as QEMU 10.0's TCG takes the
# lock there (profile-tap.txt's header); other versions move the lines,
# and the rows then read "-".
BQL_SITES = [("accel/tcg/cputlb.c:2527", "register writes (MMIO stores)"),
             ("accel/tcg/cpu-exec.c:802", "interrupt delivery")]
# Guest functions whose share of the RIP samples the text discusses: the
# xHCI doorbell write, virtio's queue kick
RIP_FUNCS = ["xhci_ring_ep_doorbell", "iowrite16"]
# The profile's reference NIC: ratios of guest cost per byte are to it
PROFILE_BASE = "virtio-net-nooff"


class DocError(Exception):
    pass


def load_json(data, name):
    try:
        with open(os.path.join(data, name)) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise DocError(f"{os.path.join(data, name)}: {e}") from e


def read_text(data, name):
    try:
        with open(os.path.join(data, name)) as f:
            return f.read()
    except OSError as e:
        raise DocError(f"{os.path.join(data, name)}: {e}") from e


def recorded(d, key, what, fname):
    v = d.get(key)
    return f"{what} {v}" if v else f"{what} not recorded in `{fname}`"


def header_of(text, fname):
    """What a stored report's own first line ("# ...", written when it was
    stored) says, up to its first ': ' or '. ' (the rest is detail the
    file keeps)"""
    first = text.split("\n", 1)[0]
    if not first.startswith("# "):
        return (f"`{fname}` has no header line: no date, commit or "
                "accelerator recorded")
    head = first[2:]
    cut = [i for i in (head.find(": "), head.find(". ")) if i >= 0]
    said = f"its header says \"{head[:min(cut)] if cut else head}\""
    if not re.search(r"\b(commit|main) [0-9a-f]{7,40}\b", head):
        said += f"; commit not recorded in `{fname}`"
    return said


def accel_of(text, fname):
    """the accelerator a stored report names ("accelerator tcg" or
    "accelerator: tcg" near its top: make profile's header lines)"""
    m = re.search(r"\baccelerator:? ([A-Za-z]+)", text[:2000])
    return (f"accelerator {m.group(1)}" if m else
            f"accelerator not recorded in `{fname}`")


def md_table(head, rows, left=1):
    """a Markdown table; the first @left columns left-aligned, the rest
    right-aligned (numbers)"""
    out = ["| " + " | ".join(head) + " |",
           "|" + "|".join("---" if i < left else "---:"
                          for i in range(len(head))) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def span(xs, f=fmt):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    lo, hi = f(min(xs)), f(max(xs))
    return lo if lo == hi else f"{lo}-{hi}"


def pct_change(a, b):
    if not a or b is None:
        return "-"
    x = round((b / a - 1) * 100)
    return f"{x:+d}" if x else "0"


def sec(x):
    return "-" if x is None else f"{x:g}"


# ---- make bench ----------------------------------------------------------

def bench_runs(data, backend):
    """[(name, fname, results, configs shown)]"""
    out = []
    for name, fname, configs in BENCH_RUNS[backend]:
        d = load_json(data, fname)
        shown = [c for c in d["configs"] if configs is None or c in configs]
        out.append((name, fname, d, shown))
    return out


def bench_provenance(runs):
    """what the results files say produced them: per run the file, its
    start, commit and accelerator; then what they share (or each run's)"""
    first = "; ".join(
        f"run {n}, `performance/{f}`: {recorded(d, 'started', 'started', f)}"
        + (f", report written {d['reported']}" if d.get("reported") else "")
        + f", {recorded(d, 'commit', 'commit', f)}, "
        f"{recorded(d, 'accel', 'accelerator', f)}"
        for n, f, d, _ in runs)
    facts = []
    for what, fn in (
            ("", lambda d: d.get("qemu") or "QEMU version not recorded"),
            ("host", lambda d: d.get("host") or "not recorded"),
            ("boots per configuration", lambda d: str(d.get("reps"))),
            ("seconds per iperf3 run",
             lambda d: sec(d.get("seconds_per_iperf_run"))),
            ("host load average (1 min) at the boots' starts",
             lambda d: span([r.get("host_loadavg_1m")
                             for rs in d["runs"].values() for r in rs]))):
        vals = [(n, fn(d)) for n, _, d, _ in runs]
        if len(set(v for _, v in vals)) == 1:
            facts.append(f"{what}: {vals[0][1]}" if what else vals[0][1])
        else:
            facts.append((f"{what}: " if what else "") +
                         ", ".join(f"{v} (run {n})" for n, v in vals))
    return (f"Written by `scripts/bench/perf-doc.py` from what `make bench` "
            f"stored (`scripts/bench/bench-report.py`'s results): {first}. "
            + "; ".join(facts) + ". Medians over the boots.")


def bench_block(data, backend):
    runs = bench_runs(data, backend)
    # columns: the current run's configurations in its order, each
    # followed by the earlier runs' figures for it
    cols = []
    for c in runs[0][2]["configs"]:
        cols += [(c, name, d) for name, _, d, shown in runs if c in shown]
    lines = [bench_provenance(runs), ""]
    rows = []
    for k, label, unit, _ in BR.METRICS:
        rows.append([f"{label}, {unit}"] +
                    [fmt(d["medians"][c].get(k), unit) for c, _, d in cols])
    for k, label in (("in_datagrams_per_ntb", "datagrams per IN NTB"),
                     ("out_datagrams_per_ntb", "datagrams per OUT NTB")):
        if any(r.get(k) for c, _, d in cols for r in d["runs"][c]):
            rows.append([f"{label} (whole boot), range over boots"] +
                        [span([r.get(k) for r in d["runs"][c]],
                              lambda x: f"{x:.1f}") for c, _, d in cols])
    lines.append(md_table(["metric"] + [f"{c} ({n})" for c, n, _ in cols],
                          rows))
    # per boot: what the medians hide
    lines += ["", "Per boot, TCP Mbit/s up 1 / down 1 / up 4 / down 4 "
              "streams (in the order the boots ran):", ""]
    n = max(len(d["runs"][c]) for c, _, d in cols)
    rows, notes, widest = [], [], None
    for c, name, d in cols:
        boots = d["runs"][c]
        rows.append([f"{c} ({name})"] +
                    [" / ".join(fmt(r.get(k)) for k in TCP) for r in boots] +
                    [""] * (n - len(boots)))
        for i, r in enumerate(boots, 1):
            notes += [f"- not counted: {c} ({name}) boot {i}, {x} (its "
                      "clock jumped)" for x in r.get("discarded", [])]
        for k in TCP:
            xs = [r.get(k) for r in boots if r.get(k)]
            med = d["medians"][c].get(k)
            if len(xs) > 1 and med:
                w = (max(xs) - min(xs)) / med
                if widest is None or w > widest[0]:
                    widest = (w, c, name, k, min(xs), max(xs))
    lines.append(md_table(["configuration"] +
                          [f"boot {i}" for i in range(1, n + 1)], rows))
    if notes:
        lines += [""] + notes
    if widest:
        w, c, name, k, lo, hi = widest
        lines += ["", f"Widest spread between the boots of one column: "
                  f"{c} ({name}), {LABEL[k][0]}, {fmt(lo)} to {fmt(hi)} "
                  f"Mbit/s, {w * 100:.0f} % of its median."]
    return "\n".join(lines)


def targets_block(data):
    lines, rows = [], []
    for backend in BENCH_RUNS:
        for name, fname, d, _ in bench_runs(data, backend):
            lines.append(f"run {name} {backend}: `performance/{fname}`")
            pairs = []
            for t in d.get("targets", []):
                if (t["config"], t["base"]) not in pairs:
                    pairs.append((t["config"], t["base"]))
            for c, base in pairs:
                goal = GOALS.get((backend, c, base))
                keys = [t["metric"] for t in d["targets"]
                        if (t["config"], t["base"]) == (c, base)]
                bmed = d["medians"][base]
                cells, met = [], 0
                for k in TCP:
                    x = d["ratios"].get(f"{c}/{base}", {}).get(k)
                    if x is None:
                        cells.append("-")
                        continue
                    per = span([r[k] / bmed[k] for r in d["runs"][c]
                                if r.get(k) and bmed.get(k)],
                               lambda v: f"{v:.2f}")
                    cell = f"{x:.2f}x ({per})"
                    if k in keys:
                        met += goal is not None and x >= goal
                        cell = f"**{cell}**"
                    cells.append(cell)
                what = ("TCP" if len(keys) == len(TCP) else
                        ", ".join(LABEL[k][0].replace("TCP ", "")
                                  for k in keys))
                rows.append([f"{backend}, run {name}: {c} / {base}",
                             f">= {goal:.1f}x ({what})" if goal else "-"] +
                            cells + [f"{met} of {len(keys)}" if goal else "-"])
    head = ["ratio of medians (per boot)", "goal (issue 13)"] + \
        [LABEL[k][0] for k in TCP] + ["goal met"]
    return "\n".join(
        ["Written by `scripts/bench/perf-doc.py` from the targets and "
         "ratios `scripts/bench/bench-report.py` stored (" +
         "; ".join(lines) + "; their runs are described above the tap "
         "table). In bold the figures a goal applies to; in brackets "
         "each boot of the configuration over the base's median.", "",
         md_table(head, rows, left=2)])


# ---- make profile --------------------------------------------------------

def profile_sections(text):
    """{(direction, config): {...}} from a make profile report
    (scripts/bench/profile-report.py): per TCP run its Mbit/s, the host's
    busy CPUs, the BQL waits per call site, the guest's busiest functions,
    and the rows of the report's summary table"""
    tcp, cur, summary = {}, None, None
    in_busy, backends = False, []
    for line in text.split("\n"):
        m = re.match(r"##### backend: (\S+)", line)
        if m:
            # (direction, config) names a column: one backend per file
            backends.append(m.group(1))
            if len(backends) > 1:
                raise DocError(f"more than one backend ({', '.join(backends)})"
                               " in one profile report: store one file per "
                               "backend")
            cur = summary = None
            continue
        m = re.match(r"=== (\S+): TCP (download|upload) .*?: ([\d.]+) Mbit/s",
                     line)
        if m:
            d = "down" if m.group(2) == "download" else "up"
            cur = tcp.setdefault((d, m.group(1)), {
                "mbps": float(m.group(3)), "locks": {}, "funcs": {},
                "summary": {}})
            summary, in_busy = None, False
            continue
        m = re.match(r"Summary, TCP (download|upload)", line)
        if m:
            summary = ["down" if m.group(1) == "download" else "up", None]
            cur = None
            continue
        if summary is not None:
            if not line.strip():
                continue
            if summary[1] is None:
                summary[1] = line.split()
                continue
            cfgs = summary[1]
            parts = line.split()
            label = " ".join(parts[:-len(cfgs)])
            for c, v in zip(cfgs, parts[-len(cfgs):]):
                if (summary[0], c) in tcp:
                    tcp[(summary[0], c)]["summary"][label] = BR.num(v)
            continue
        if cur is None:
            continue
        m = re.match(r"Guest interrupts .*?: NIC ([\d.]+)/s", line)
        if m:
            cur["nic_irq"] = float(m.group(1))
        m = re.match(r"Host: ([\d.]+) of (\d+) CPUs busy", line)
        if m:
            cur["host_busy"], cur["cpus"] = float(m.group(1)), int(m.group(2))
        m = re.match(r"\s+BQL\s+(\S+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$",
                     line)
        if m:
            cur["locks"][m.group(1)] = tuple(float(m.group(i))
                                             for i in (2, 3, 4))
        if line.strip() == "busiest functions:":
            in_busy = True
            continue
        if in_busy:
            m = re.match(r"\s+([\d.]+)\s+(\S+)( \[\S+\])?$", line)
            if m:
                cur["funcs"].setdefault(m.group(2), float(m.group(1)))
            else:
                in_busy = False
    return tcp


def profile_block(data, fname, name):
    text = read_text(data, fname)
    tcp = profile_sections(text)
    if not tcp:
        raise DocError(f"{fname}: no TCP run found (not a make profile "
                       "report?)")
    configs = []
    for _, c in tcp:
        if c not in configs:
            configs.append(c)
    cols = [(d, c) for d in ("down", "up") for c in configs if (d, c) in tcp]

    def s(col, key):
        return tcp[col]["summary"].get(key)

    def busy(col):
        idle = s(col, "guest idle (/proc/stat), %")
        return None if idle is None else 100 - idle

    def per_gb(col, share):
        """guest CPU seconds per GB moved, busy @share % of the time"""
        mbps = tcp[col]["mbps"]
        return share / 100 * 8000 / mbps if share is not None and mbps else None

    def cost(col, nobql=False):
        b = busy(col)
        w = s(col, "BQL wait, other threads, % time")
        if nobql:
            b = None if b is None or w is None else b - w
        return per_gb(col, b)

    def ratio(col, f):
        base = (col[0], PROFILE_BASE)
        if base not in tcp or col == base:
            return "-"
        a, b = f(col), f(base)
        return f"{a / b:.2f}x" if a and b else "-"

    def one(x, unit=""):
        return "-" if x is None else f"{x:.1f}{unit}"

    def lock(col, site, per_mb=False):
        w = tcp[col]["locks"].get(site)
        if w is None:
            return "-"
        if per_mb:
            return f"{w[1] * 8 / tcp[col]['mbps']:.0f}"
        return f"{w[0]:.1f} ({w[1]:.0f}/s, {w[2]:.1f} us each)"

    cpus = max(tcp[c].get("cpus", 0) for c in cols)
    rows = [
        ["Mbit/s (this boot)"] + [fmt(tcp[c]["mbps"]) for c in cols],
        [f"host CPUs busy (of {cpus})"] +
        [f"{tcp[c]['host_busy']:.2f}" if "host_busy" in tcp[c] else "-"
         for c in cols],
        ["QEMU vCPU thread / main-loop thread, % of a core"] +
        [f"{one(s(c, 'vCPU thread, % core'))} / "
         f"{one(s(c, 'main-loop thread, % core'))}" for c in cols],
        ["QEMU device model (usb-ncm + xHCI + USB core, or virtio-net), "
         "% of a core"] + [one(s(c, "device model, % core")) for c in cols],
        ["guest busy (`/proc/stat`), %"] + [one(busy(c)) for c in cols],
        ["**guest CPU s per GB**"] +
        [f"**{one(cost(c))}**" for c in cols],
        ["threads outside the main loop waiting for the BQL (the vCPU), "
         "% of wall time"] +
        [one(s(c, "BQL wait, other threads, % time")) for c in cols],
    ]
    for site, what in BQL_SITES:
        rows.append([f"... at {what}, `{site}`"] +
                    [lock(c, site) for c in cols])
    rows += [
        [f"{BQL_SITES[0][1]} per MB"] +
        [lock(c, BQL_SITES[0][0], per_mb=True) for c in cols],
        ["guest CPU s per GB without the BQL waits"] +
        [one(cost(c, True)) for c in cols],
    ]
    if any((d, PROFILE_BASE) in tcp for d, _ in cols):
        rows += [
            [f"guest CPU per GB over {PROFILE_BASE}'s (same direction)"] +
            [ratio(c, cost) for c in cols],
            ["... the same without the BQL waits"] +
            [ratio(c, lambda col: cost(col, True)) for c in cols],
        ]
    rows += [
        ["guest NIC interrupts/s; per MB"] +
        [f"{fmt(tcp[c].get('nic_irq'))}; "
         f"{one(s(c, 'guest NIC interrupts per MB'))}" for c in cols],
        ["guest RIP samples in " +
         " / ".join(f"`{f}`" for f in RIP_FUNCS) + ", %"] +
        [next((f"{tcp[c]['funcs'][f]:.1f}" for f in RIP_FUNCS
               if f in tcp[c]["funcs"]), "-") for c in cols],
        ["guest copy/memset / network stack / USB or virtio transport, "
         "% of RIP samples"] +
        [" / ".join(one(s(c, k)) for k in
                    ("guest copy/memset, %", "guest network stack, %",
                     "guest USB/virtio transport, %")) for c in cols],
    ]
    head = ["TCP, 1 stream"] + [f"{c} {d}" for d, c in cols]
    return "\n".join([
        f"Written by `scripts/bench/perf-doc.py` from `performance/{fname}` "
        f"(run {name}; `scripts/bench/profile-report.py`'s report; "
        f"{header_of(text, fname)}; {accel_of(text, fname)}). One boot "
        "per configuration. Guest CPU s "
        "per GB: its busy share over the throughput; without the BQL "
        "waits: less the share its vCPU waited for the lock.", "",
        md_table(head, rows)])


# ---- make bench-scaling ----------------------------------------------------

def scaling_block(data):
    fname = "scaling.json"
    d = load_json(data, fname)
    run = d["run"]
    res = d["results"]
    rows, boots = [], []
    for c in run["configs"]:
        r = res[c["name"]]
        m = r["medians"]
        rows.append([c["name"], str(c["devices"]), str(c["controllers"]),
                     fmt(m.get("up")), fmt(m.get("down")),
                     fmt(m.get("cpu_s_per_gb")), fmt(m.get("rss_idle_mib")),
                     fmt(m.get("rss_load_mib")),
                     f"{fmt(m.get('irq_up'))} / {fmt(m.get('irq_down'))}"])
        for i, b in enumerate(r["boots"], 1):
            each = ("" if c["devices"] == 1 else
                    f" ({b.get('each_up') or '-'} / "
                    f"{b.get('each_down') or '-'})")
            boots.append([c["name"], str(i),
                          f"{fmt(b.get('up'))} / {fmt(b.get('down'))}{each}",
                          fmt(b.get("cpu_s_per_gb"))])
    when = recorded(run, "started", "started", fname)
    if d.get("reported"):
        when += f", report written {d['reported']}"
    return "\n".join([
        f"Written by `scripts/bench/perf-doc.py` from `performance/{fname}` "
        f"(`make bench-scaling` {when}; "
        f"{recorded(run, 'commit', 'commit', fname)}; "
        f"{recorded(run, 'accel', 'accelerator', fname)}; "
        f"{run.get('qemu') or 'QEMU version not recorded'}; "
        f"{run.get('backend')} backend, {run.get('reps')} boots per "
        f"configuration, {sec(d.get('seconds_per_iperf_run'))} s of TCP on "
        "every NIC at once). Medians over the boots; Mbit/s are the "
        "NICs' sum.", "",
        md_table(["configuration", "NICs", "xHCIs", "up, Mbit/s",
                  "down, Mbit/s", "QEMU CPU s/GB", "RSS idle, MiB",
                  "RSS load, MiB", "guest NIC irq/s, up / down"], rows),
        "", "Per boot (in the order the boots ran), Mbit/s up / down, "
        "each NIC's in brackets:", "",
        md_table(["configuration", "boot", "up / down, Mbit/s",
                  "QEMU CPU s/GB"], boots, left=2)])


# ---- the in-coalesce-us A/B ------------------------------------------------

def report_tables(text):
    """[(backend, {config: {label: value}})] from bench-report.py's printed
    median tables ("=== BACKEND: medians ... ===", a line of
    configuration names, then "LABEL (UNIT)  V V ...")"""
    out, cur = [], None
    for line in text.split("\n"):
        m = re.match(r"=== (\w+): ", line)
        if m:
            cur = {"backend": m.group(1), "configs": None, "rows": {}}
            out.append(cur)
            continue
        if cur is None:
            continue
        if cur["configs"] is None:
            cur["configs"] = line.split()
            continue
        m = re.match(r"(\S.*?\)) +(\S.*)$", line)
        if not m or len(m.group(2).split()) != len(cur["configs"]):
            cur = None
            continue
        for c, v in zip(cur["configs"], m.group(2).split()):
            cur["rows"].setdefault(c, {})[m.group(1)] = BR.num(v)
    return [(t["backend"], t["rows"]) for t in out if t["configs"]]


def ab_block(data):
    fname = "in-coalesce-ab.txt"
    text = read_text(data, fname)
    parts = re.split(r"^## ", text, flags=re.M)[1:]
    if not parts:
        raise DocError(f"{fname}: no '## Run' section")
    off, on = "ncm-64k", "ncm-64k-co"
    keys = [f"{LABEL[k][0]} ({LABEL[k][1]})" for k in TCP]
    udp = f"{LABEL['udp_down_pps'][0]} ({LABEL['udp_down_pps'][1]})"
    rows = []
    for part in parts:
        title = part.split("\n", 1)[0]
        m = re.match(r"Run (\d+): in-coalesce-us=(\d+),.*?(\d+) boots each",
                     title)
        if not m:
            raise DocError(f"{fname}: run title not understood: {title}")
        stats = re.findall(r"^\s+(\w+)/logs/(\S+?)-\d+\.log\.stats\.json: "
                           r"(\d+) / (\d+), ([\d.]+)$", part, flags=re.M)
        for backend, meds in report_tables(part):
            a, b = meds.get(off, {}), meds.get(on, {})

            def of(cfg, col):
                return [col(x) for bk, c, *x in stats
                        if bk == backend and c == cfg]

            dpn = [span(of(cfg, lambda x: float(x[2])),
                        lambda v: f"{v:.1f}") for cfg in (off, on)]
            late = of(on, lambda x: int(x[1]) / int(x[0]) * 100
                      if int(x[0]) else None)
            rows.append([
                f"{backend}, {m.group(2)} us, run {m.group(1)} "
                f"({m.group(3)} boots)",
                " / ".join(fmt(a.get(k)) for k in keys),
                " / ".join(fmt(b.get(k)) for k in keys),
                " / ".join(pct_change(a.get(k), b.get(k)) for k in keys),
                f"{fmt(a.get(udp))} / {fmt(b.get(udp))}",
                f"{dpn[0]} / {dpn[1]}",
                span(late, lambda v: f"{v:.0f}")])
    return "\n".join([
        f"Written by `scripts/bench/perf-doc.py` from `performance/{fname}` "
        f"(bench-report.py's tables of interleaved `make bench` runs; "
        f"{header_of(text, fname)}; {accel_of(text, fname)}). Medians; "
        f"TCP up 1 / down 1 / up 4 / down 4 streams; off: {off} with "
        f"in-coalesce-us=0, on: {on} with the value named. "
        "Datagrams per IN NTB and the share of kept NTBs sent at the limit "
        "(in_coalesce_timeouts / in_coalesced): range over the boots "
        "whose x-stats the file lists (\"-\": none listed).", "",
        md_table(["run", "off, Mbit/s", "on, Mbit/s", "change, %",
                  "UDP 64 B down off / on, pkt/s",
                  "datagrams per IN NTB, off / on",
                  "kept NTBs sent at the limit, %"], rows)])


# ---- the blocks ------------------------------------------------------------

def blocks(data):
    """{name: text} for every block DOC must hold"""
    out = {"bench-tap": bench_block(data, "tap"),
           "bench-slirp": bench_block(data, "slirp"),
           "bench-targets": targets_block(data),
           "scaling": scaling_block(data),
           "in-coalesce-ab": ab_block(data)}
    for name, fname, run in PROFILES:
        out[name] = profile_block(data, fname, run)
    return out


MARKER = re.compile(r"^<!-- perf-doc:([\w.-]+):(begin|end) -->$", re.M)


def fill(text, content):
    """@text with each block's lines replaced by @content[name]; DocError
    for a marker missing, doubled, out of order or naming no block"""
    seen = {}
    for m in MARKER.finditer(text):
        seen.setdefault(m.group(1), []).append((m.group(2), m.start(), m.end()))
    unknown = sorted(set(seen) - set(content))
    if unknown:
        raise DocError("markers of no known block: " + ", ".join(unknown))
    spans = []
    for name in content:
        marks = seen.get(name, [])
        kinds = [k for k, _, _ in marks]
        if kinds != ["begin", "end"]:
            raise DocError(
                f"block {name}: want one <!-- perf-doc:{name}:begin --> "
                f"line and then one <!-- perf-doc:{name}:end --> line, "
                f"found {kinds or 'neither'}")
        spans.append((marks[0][2], marks[1][1], name))
    spans.sort()
    out, pos = [], 0
    for start, end, name in spans:
        if start < pos:
            raise DocError(f"block {name} overlaps another")
        out += [text[pos:start], "\n", content[name].rstrip("\n"), "\n"]
        pos = end
    out.append(text[pos:])
    return "".join(out)


def main(argv):
    check = "--check" in argv
    args = [a for a in argv if a != "--check"]
    if len(args) > 2 or any(a.startswith("-") for a in args):
        sys.exit("usage: perf-doc.py [--check] [DOC [DATA]]")
    doc = args[0] if args else os.path.join(TOP, "docs", "performance.md")
    data = args[1] if len(args) > 1 else os.path.join(
        os.path.dirname(doc), "performance")
    try:
        with open(doc) as f:
            text = f.read()
        new = fill(text, blocks(data))
    except (OSError, DocError, KeyError) as e:
        what = f"{type(e).__name__} {e}" if isinstance(e, KeyError) else e
        if check:
            print(f"FAIL: style/perf-doc ({doc}: {what})")
            return 1
        print(f"perf-doc.py: {doc}: {what}", file=sys.stderr)
        return 1
    if check:
        if new == text:
            print(f"PASS: style/perf-doc ({os.path.relpath(doc, TOP)}'s "
                  "results blocks are what its data makes)")
            return 0
        print(f"FAIL: style/perf-doc ({os.path.relpath(doc, TOP)}'s results "
              "blocks differ from its data: run scripts/bench/perf-doc.py "
              "and edit the text around them, not the blocks)")
        diff = difflib.unified_diff(text.splitlines(), new.splitlines(),
                                    "doc", "from the data", lineterm="", n=0)
        for line in list(diff)[:20]:
            print(f"    | {line}")
        return 1
    if new != text:
        with open(doc, "w") as f:
            f.write(new)
        print(f"perf-doc.py: {doc}: blocks written")
    else:
        print(f"perf-doc.py: {doc}: blocks already current")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
