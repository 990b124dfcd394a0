#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Tables for make profile (scripts/bench/profile.sh): for each configuration and
# TCP direction, how busy each QEMU thread was and in what (host perf
# samples), and where the guest's vCPU was (RIP samples resolved with the
# guest's /proc/kallsyms). Only the middle of each iperf3 run counts: from
# 1 s after it started to 0.2 s before the next phase began.
#
# The guest's idle share is best read from its own /proc/stat: the RIP
# sampler can only answer while the vCPU thread does not hold the BQL
# (device register accesses, interrupt delivery), so it over-counts halted
# time when the guest halts right after such work (see guest-sampler.py).
#
#   profile-report.py OUTDIR CONFIG...
import bisect
import collections
import io
import os
import re
import sys
import tarfile

PERF_HZ = 999
SKIP_START, SKIP_END = 1.0, 0.2
DIRECTIONS = (("down", "iperf-down", "download (host -> guest)"),
              ("up", "iperf-up", "upload (guest -> host)"))

HOST_RULES = [
    ("usb-ncm device", r"^(ncm_|usb_ncm)"),
    ("xHCI model", r"^xhci_"),
    ("USB core", r"^usb_"),
    ("virtio model", r"^(virtio|vring|virtqueue)"),
    ("net layer", r"^(net_|qemu_send|qemu_net|qemu_deliver|nc_|filter_|"
                  r"qemu_flush|qemu_can_)"),
    ("memory/DMA API", r"^(address_space|flatview|memory_region|dma_|iov_|"
                       r"qemu_iovec|pci_|msi|qemu_ram|ram_block|"
                       r"physmem|subpage)"),
    ("main loop", r"^(aio_|qemu_bh|main_loop|os_host|qemu_poll|timerlist|"
                  r"qemu_clock|glib_|qemu_mutex|qemu_cond|qemu_event|"
                  r"qemu_lockcnt|rcu|call_rcu|qemu_sem|bql)"),
    ("TCG runtime", r"^(helper_|tlb_|probe_access|cpu_|tb_|tcg|x86_|gen_|"
                    r"translator|do_ld|do_st|mmu|victim|store_|load_|"
                    r"float|cc_compute|compute_|page_|log_|int_ld|int_st|"
                    r"full_ld|full_st|do_interrupt|raise_|ldl_|ldq_|lduw|"
                    r"ldub|stl_|stq_|stw_|stb_|io_|apic_|hpet|pit_|"
                    r"qemu_plugin|svm_|handle_|disas_|decode_|"
                    r"get_page_addr|icount|parts|softfloat|atomic_|"
                    r"breakpoint|check_|switch_|seg_|tss_)"),
]

GUEST_MODULES = {
    "NIC driver": {"cdc_ncm", "usbnet", "cdc_ether", "virtio_net",
                   "net_failover", "failover"},
    "USB host stack": {"xhci_hcd", "xhci_pci", "usbcore", "usb_common",
                       "ehci_hcd", "ehci_pci", "xhci_pci_renesas"},
    "virtio transport": {"virtio_ring", "virtio_pci", "virtio",
                         "virtio_pci_modern_dev", "virtio_pci_legacy_dev"},
}
GUEST_RULES = [
    ("copy/memset", r"(memcpy|memmove|memset|copy_user|_copy_to|_copy_from|"
                    r"rep_movs|rep_stos|copy_page|skb_copy|clear_page|"
                    r"copy_mc|csum_partial_copy)"),
    ("checksum", r"csum"),
    ("network stack", r"^(_*tcp|_*ip|inet|_*udp|_*sock|sk_|_*skb|_*netif|"
                      r"napi|_*dev_|net_|_*neigh|eth_|_*gro|_*qdisc|sch_|"
                      r"validate_xmit|tc_|raw_v|_*kfree_skb|consume_skb|"
                      r"pfifo|fq_|dst_|_*sys_sendto|_*sys_recvfrom|"
                      r"_*sys_sendmsg|_*sys_recvmsg)"),
    ("memory alloc", r"(kmem|kmalloc|kfree|alloc_|_alloc|free_|__free|"
                     r"page_frag|slab|folio|get_page|put_page|mm_|"
                     r"memcg|obj_cgroup|refill_obj|rmqueue)"),
    ("irq/timer/sched/locks", r"(irq|hrtimer|timer|tick|apic|sched|"
                              r"pick_|enqueue|dequeue|update_|ktime|clock|"
                              r"spin|lock|rcu|syscall|sysvec|asm_|entry_|"
                              r"wake|switch|idle|cpuidle|do_|handle_|"
                              r"finish_task|ttwu)"),
]


def phase_windows(path):
    """{phase: (start, end, host_busy)} for each phase with a successor;
    host_busy is how many of the host's CPUs were busy on average over the
    whole phase (from the /proc/stat line logged with each phase)."""
    lines = []
    with open(path) as f:
        for line in f:
            head, _, stat = line.partition("|")
            t, name = head.split(None, 1)
            ticks = [int(x) for x in stat.split()[1:9]] if stat else None
            lines.append((float(t), name.strip(), ticks))
    wins = {}
    for (t0, name, a), (t1, _, b) in zip(lines, lines[1:]):
        busy = None
        if a and b:
            d = [y - x for x, y in zip(a, b)]
            total = sum(d)
            if total:
                busy = (total - d[3] - d[4]) / total * os.cpu_count()
        wins[name] = (t0 + SKIP_START, t1 - SKIP_END, busy)
    return wins


def host_category(sym, dso):
    if dso == "[kernel.kallsyms]":
        return "host kernel"
    if sym == "[unknown]" and (dso == "[unknown]" or dso.startswith("/tmp/perf-")
                               or "JIT" in dso):
        return "TCG: guest code"
    if "libslirp" in dso:
        return "slirp"
    if "libglib" in dso:
        return "main loop"
    if "libc.so" in dso:
        if re.match(r"_*(mem|str)", sym):
            return "libc memcpy/memset"
        return "libc other"
    if dso.endswith("qemu-system-x86_64"):
        for name, rx in HOST_RULES:
            if re.match(rx, sym):
                return name
        return "QEMU other"
    return "other libraries"


PERF_LINE = re.compile(r"^\s*(?P<comm>.*?)\s+(?P<tid>\d+)\s+(?P<t>\d+\.\d+):"
                       r"\s+[0-9a-f]+\s+(?P<sym>.*?)\s+\((?P<dso>.*)\)\s*$")


def host_profile(path, win):
    """Per thread and per category sample counts inside win."""
    threads = collections.Counter()
    cats = collections.Counter()
    syms = collections.Counter()
    if not os.path.exists(path):
        return None
    with open(path, errors="replace") as f:
        for line in f:
            m = PERF_LINE.match(line)
            if not m:
                continue
            t = float(m["t"])
            if not win[0] <= t < win[1]:
                continue
            comm = m["comm"]
            if comm.startswith("CPU "):
                comm = "vCPU (" + comm + ")"
            elif comm.startswith("qemu-system"):
                comm = "main loop (" + comm + ")"
            threads[comm] += 1
            cat = host_category(m["sym"], m["dso"])
            cats[cat] += 1
            syms[(cat, m["sym"])] += 1
    return threads, cats, syms


class Symbols:
    def __init__(self, text):
        entries = []
        for line in text.splitlines():
            parts = line.split()
            if len(parts) < 3:
                continue
            addr = int(parts[0], 16)
            if addr == 0:
                continue
            mod = parts[3].strip("[]") if len(parts) > 3 else ""
            entries.append((addr, parts[2], mod))
        entries.sort()
        self.addrs = [e[0] for e in entries]
        self.entries = entries

    def lookup(self, addr):
        i = bisect.bisect_right(self.addrs, addr) - 1
        if i < 0:
            return "?", ""
        return self.entries[i][1], self.entries[i][2]


def guest_category(name, mod):
    for cat, mods in GUEST_MODULES.items():
        if mod in mods:
            return cat
    if mod:
        return "other modules"
    for cat, rx in GUEST_RULES:
        if re.search(rx, name):
            return cat
    return "other kernel"


def guest_profile(path, syms, win):
    """Samples in win, each weighed by the seconds since the one before
    (see guest-sampler.py); returns (count, seconds, categories, functions)."""
    cats = collections.Counter()
    funcs = collections.Counter()
    n, total, prev = 0, 0.0, None
    if not os.path.exists(path) or syms is None:
        return None
    with open(path) as f:
        for line in f:
            t, rip, cpl, hlt = line.split()
            t = float(t)
            weight, prev = (t - prev if prev is not None else 0.0), t
            if not win[0] <= t < win[1]:
                continue
            n += 1
            total += weight
            if hlt == "1":
                cats["idle (HLT)"] += weight
                continue
            if cpl == "3":
                cats["user space"] += weight
                funcs["[user space]"] += weight
                continue
            name, mod = syms.lookup(int(rip, 16))
            cats[guest_category(name, mod)] += weight
            funcs[name + (f" [{mod}]" if mod else "")] += weight
    return n, total, cats, funcs


def read_guest_tgz(path):
    files = {}
    if not os.path.exists(path):
        return files
    with tarfile.open(path) as tar:
        for m in tar.getmembers():
            if m.isfile():
                files[os.path.basename(m.name)] = tar.extractfile(m).read()
    return files


TRACE_LINE = re.compile(r"^\d+@(?P<t>\d+\.\d+):(?P<ev>\w+)\s*(?P<args>.*)$")
TRACE_ROWS = [
    # summary row, counter keys summed
    ("xHCI doorbells (virtio kicks)/s", ("doorbell", "virtio_queue_notify")),
    # xHCI's MSI-X raise has no trace event: see "guest NIC interrupts/s"
    ("virtio notifies/s", ("virtio_notify",)),
    ("USB transfers started/s", ("usb_xhci_xfer_start",)),
    ("USB NAKs/s", ("usb_xhci_xfer_nak",)),
    ("IN packets parked/s", ("usb_ncm_park ep 7",)),
    ("OUT packets parked/s", ("usb_ncm_park ep 6",)),
    ("IN NTBs/s", ("usb_ncm_in_ntb",)),
    ("OUT NTBs/s", ("usb_ncm_out_ntb",)),
]


def trace_counts(path, win):
    """Counts of the trace events QEMU logged inside win (PROFILE_TRACE=1):
    doorbell writes per target, NTBs with their datagrams and bytes."""
    c = collections.Counter()
    if not os.path.exists(path):
        return None
    with open(path, errors="replace") as f:
        for line in f:
            m = TRACE_LINE.match(line)
            if not m or not win[0] <= float(m["t"]) < win[1]:
                continue
            ev, args = m["ev"], m["args"]
            if ev.startswith("usb_ncm_"):
                # "<device id>: ..." (the device's id or USB port first)
                args = args.split(": ", 1)[-1]
            c[ev] += 1
            if ev == "usb_xhci_doorbell_write":
                off, val = re.findall(r"0x([0-9a-f]+)", args)[:2]
                target = ("command ring" if int(off, 16) == 0 else
                          f"slot {int(off, 16) // 4} DCI {int(val, 16) & 0xff}")
                c["doorbell"] += 1
                c[f"doorbell {target}"] += 1
            elif ev in ("usb_ncm_in_ntb", "usb_ncm_out_ntb"):
                size, dgrams = map(int, re.findall(r"(\d+) ", args + " ")[:2])
                c[ev + " bytes"] += size
                c[ev + " datagrams"] += dgrams
            elif ev == "usb_ncm_park":
                ep = re.match(r"ep (\d+)", args)
                c[f"usb_ncm_park ep {ep[1] if ep else '?'}"] += 1
    return c


SYNC_ROW = re.compile(r"^(?P<what>.*?)\s+(?P<site>\S+:\d+)\s+(?P<wait>[\d.]+)"
                      r"\s+(?P<count>\d+)\s+[\d.]+\s*$")


def sync_tables(path):
    """[(host time, {(lock type, call site): [wait seconds, count]})] from
    guest-sampler.py's sync-profile dumps (cumulative since it was on)."""
    tables = []
    if not os.path.exists(path):
        return tables
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("@ "):
                tables.append((float(line.split()[1]), collections.defaultdict(
                    lambda: [0.0, 0])))
                continue
            m = SYNC_ROW.match(line.rstrip())
            if m and tables:
                kind = "BQL" if m["what"].startswith("BQL") else m["what"].split()[0]
                cell = tables[-1][1][(kind, m["site"])]
                cell[0] += float(m["wait"])
                cell[1] += int(m["count"])
    return tables


def sync_waits(path, win):
    """{(lock type, call site): (wait seconds, count)} inside win: the last
    dump before its end minus the last one before its start."""
    tables = sync_tables(path)
    before = [t for t in tables if t[0] <= win[0]]
    inside = [t for t in tables if t[0] <= win[1]]
    if not before or not inside or inside[-1][0] <= before[-1][0]:
        return None
    a, b = before[-1][1], inside[-1][1]
    secs = inside[-1][0] - before[-1][0]
    return secs, {k: (b[k][0] - a.get(k, [0.0, 0])[0],
                      b[k][1] - a.get(k, [0.0, 0])[1]) for k in b}


def guest_stat(raw):
    """user/system/idle/irq+softirq shares from two /proc/stat cpu lines."""
    if raw is None:
        return None
    a, b = [list(map(int, l.split()[1:])) for l in raw.decode().splitlines()[:2]]
    d = [y - x for x, y in zip(a, b)]
    total = sum(d[:8]) or 1
    return {"user": 100 * (d[0] + d[1]) / total, "system": 100 * d[2] / total,
            "idle": 100 * (d[3] + d[4]) / total,
            "irq": 100 * (d[5] + d[6]) / total}


def ncmtest(path):
    vals = {}
    if os.path.exists(path):
        with open(path, errors="replace") as f:
            for line in f:
                m = re.search(r"NCMTEST ([\w.]+)=(.*)", line)
                if m and m[1] not in vals:
                    vals[m[1]] = m[2].strip()
    return vals


def pct(n, total):
    return 100.0 * n / total if total else 0.0


def main():
    out, configs = sys.argv[1], sys.argv[2:]
    summary = collections.OrderedDict()
    for c in configs:
        d = os.path.join(out, c)
        vals = ncmtest(os.path.join(d, "console.log"))
        gfiles = read_guest_tgz(os.path.join(d, "guest.tgz"))
        syms = Symbols(gfiles["kallsyms"].decode()) if "kallsyms" in gfiles else None
        try:
            wins = phase_windows(os.path.join(d, "phases.txt"))
        except OSError:
            print(f"{c}: no phases recorded (did the guest boot?)")
            continue
        for key, phase, title in DIRECTIONS:
            if phase not in wins:
                print(f"{c}: no {phase} phase in the run")
                continue
            win = wins[phase]
            secs = max(win[1] - win[0], 0.001)
            mbps = vals.get(f"iperf_{key}_receiver_mbps", "?")
            row = summary.setdefault((key, c), {})
            row["Mbit/s"] = mbps
            print(f"\n=== {c}: TCP {title}, 1 stream: {mbps} Mbit/s "
                  f"(profiled {secs:.1f} s) ===")
            if win[2] is not None:
                print(f"Host: {win[2]:.2f} of {os.cpu_count()} CPUs busy "
                      "(everything: QEMU, iperf3, the samplers)")
                row[f"host CPUs busy (of {os.cpu_count()})"] = win[2]
            host = host_profile(os.path.join(d, "perf.txt"), win)
            if host:
                threads, cats, hsyms = host
                core = PERF_HZ * secs
                print("Host, QEMU process (perf, % of one core):")
                for name, n in threads.most_common():
                    print(f"  {name:34s} {pct(n, core):6.1f}")
                print(f"  {'all threads':34s} {pct(sum(threads.values()), core):6.1f}")
                print("  by category:")
                for name, n in cats.most_common():
                    top = [s for (cat, s), _ in hsyms.most_common()
                           if cat == name and s != "[unknown]"][:3]
                    extra = f"  ({', '.join(top)})" if top else ""
                    print(f"    {name:24s} {pct(n, core):6.1f}{extra}")
                row["QEMU busy, % core"] = pct(sum(threads.values()), core)
                for name, n in threads.items():
                    if name.startswith("vCPU"):
                        row["vCPU thread, % core"] = pct(n, core)
                    elif name.startswith("main loop"):
                        row["main-loop thread, % core"] = pct(n, core)
                row["TCG guest code+runtime, % core"] = pct(
                    cats["TCG: guest code"] + cats["TCG runtime"], core)
                row["device model, % core"] = pct(
                    cats["usb-ncm device"] + cats["xHCI model"] +
                    cats["USB core"] + cats["virtio model"], core)
                row["slirp, % core"] = pct(cats["slirp"], core)
            guest = guest_profile(os.path.join(d, "guest-rip.txt"), syms, win)
            if guest:
                count, n, gcats, funcs = guest
                print(f"Guest vCPU ({count} RIP samples, % of the time they"
                      " cover):")
                for name, k in gcats.most_common():
                    print(f"    {name:24s} {pct(k, n):6.1f}")
                print("  busiest functions:")
                for name, k in funcs.most_common(12):
                    print(f"    {pct(k, n):5.1f}  {name}")
                row["guest halted (RIP samples), %"] = pct(gcats["idle (HLT)"], n)
                row["guest NIC driver, %"] = pct(gcats["NIC driver"], n)
                row["guest USB/virtio transport, %"] = pct(
                    gcats["USB host stack"] + gcats["virtio transport"], n)
                row["guest copy/memset, %"] = pct(gcats["copy/memset"], n)
                row["guest network stack, %"] = pct(gcats["network stack"], n)
                row["guest user space, %"] = pct(gcats["user space"], n)
            irq = (vals.get(f"irq_{key}") or "").split()
            if len(irq) == 3 and float(irq[2]) > 0:
                nic, loc = int(irq[0]) / float(irq[2]), int(irq[1]) / float(irq[2])
                print(f"Guest interrupts (/proc/interrupts, the whole run): "
                      f"NIC {nic:.0f}/s, local timer {loc:.0f}/s")
                row["guest NIC interrupts/s"] = nic
                try:
                    row["guest NIC interrupts per MB"] = nic / (float(mbps) / 8)
                except (ValueError, ZeroDivisionError):
                    pass
            tc = trace_counts(os.path.join(d, "trace.log"), win)
            if tc:
                print(f"QEMU trace events (per second; per MB moved):")
                mb = float(mbps) / 8 if re.match(r"^[\d.]+$", mbps) else 0
                for name in sorted(k for k in tc if " " in k or k.startswith("usb_") or
                                   k.startswith("virtio")):
                    if name.endswith((" bytes", " datagrams")):
                        continue
                    print(f"    {name:40s} {tc[name] / secs:9.0f}"
                          f"{tc[name] / secs / mb if mb else 0:9.1f}")
                for label, keys in TRACE_ROWS:
                    row[label] = sum(tc[k] for k in keys) / secs
                for ev, label in (("usb_ncm_in_ntb", "IN"), ("usb_ncm_out_ntb", "OUT")):
                    if tc[ev]:
                        row[f"{label} datagrams per NTB"] = tc[ev + " datagrams"] / tc[ev]
                        row[f"{label} bytes per NTB"] = tc[ev + " bytes"] / tc[ev]
                        print(f"    {label} NTBs: {tc[ev + ' datagrams'] / tc[ev]:.1f} "
                              f"datagrams, {tc[ev + ' bytes'] / tc[ev]:.0f} bytes each")
            sw = sync_waits(os.path.join(d, "guest-rip.txt.sync"), win)
            if sw:
                span, waits = sw
                print(f"QEMU lock waits (sync-profile over {span:.1f} s: "
                      "% of that time; waits/s; mean us):")
                top = sorted(waits.items(), key=lambda kv: -kv[1][0])[:6]
                for (kind, site), (w, n) in top:
                    if w <= 0:
                        continue
                    print(f"    {kind:8s} {site:36s} {pct(w, span):6.1f} "
                          f"{n / span:9.0f} {1e6 * w / n if n else 0:9.1f}")
                bql = [(site, w, n) for (kind, site), (w, n) in waits.items()
                       if kind == "BQL"]
                main_loop = [x for x in bql if x[0].startswith("util/main-loop")]
                others = [x for x in bql if x not in main_loop]
                row["BQL wait, main loop, % time"] = pct(
                    sum(w for _, w, _ in main_loop), span)
                row["BQL wait, other threads, % time"] = pct(
                    sum(w for _, w, _ in others), span)
            st = guest_stat(gfiles.get(f"{key}.stat"))
            if st:
                print("Guest's own accounting (/proc/stat): " +
                      ", ".join(f"{k} {v:.0f}%" for k, v in st.items()))
                row["guest idle (/proc/stat), %"] = st["idle"]
                row["guest irq+softirq (/proc/stat), %"] = st["irq"]
    for key, _, title in DIRECTIONS:
        cols = [c for c in configs if (key, c) in summary]
        if not cols:
            continue
        metrics = []
        for c in cols:
            for m in summary[(key, c)]:
                if m not in metrics:
                    metrics.append(m)
        buf = io.StringIO()
        buf.write(f"\nSummary, TCP {title}, 1 stream\n")
        w = max([13] + [len(c) + 2 for c in cols])
        buf.write(f"{'':34s}" + "".join(f"{c:>{w}s}" for c in cols) + "\n")
        for m in metrics:
            buf.write(f"{m:34s}")
            for c in cols:
                v = summary[(key, c)].get(m, "-")
                buf.write(f"{v:>{w}.1f}" if isinstance(v, float) else f"{v:>{w}s}")
            buf.write("\n")
        print(buf.getvalue(), end="")


if __name__ == "__main__":
    main()
