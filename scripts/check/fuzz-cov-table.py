#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Usage: fuzz-cov-table.py EXPORT_JSON [--findings MD --date D --commit C
#                          --corpora "target=n[:seeds] ..." --command CMD]
#
# Read the summary of `llvm-cov-14 export -summary-only` (written by
# scripts/check/fuzz-device.sh --coverage) and print, for every file of
# FILES below, its lines, lines hit and per cent, then the device files'
# sum.  With --findings, also write that table, with the date, the commit,
# the corpus sizes and the command that measured it, into the findings
# file between the markers below (the section is added at the end of the
# file the first time; a rerun replaces it, nothing else moves).
# Exit status 1 when the export lacks a file of FILES (a path changed, or
# not the coverage binary's export).

import argparse
import json
import sys

BEGIN = '<!-- fuzz coverage -->'
END = '<!-- fuzz coverage end -->'
HEAD = '## Fuzz coverage'
# (group, path under the QEMU tree): the device's files, then the
# controllers issue 26 names and the USB core the targets drive
DEVICE = ('hw/usb/dev-ncm.c', 'hw/usb/dev-ncm-desc.c',
          'hw/usb/ncm-fault.c', 'hw/usb/ncm-function.c',
          'hw/usb/ncm-function-vmstate.c', 'hw/usb/ncm-ntb.c')
HOST = ('hw/usb/hcd-xhci.c', 'hw/usb/hcd-xhci-pci.c', 'hw/usb/hcd-ehci.c',
        'hw/usb/hcd-ehci-pci.c', 'hw/usb/hcd-uhci.c', 'hw/usb/hcd-ohci.c',
        'hw/usb/hcd-ohci-pci.c', 'hw/usb/core.c', 'hw/usb/desc.c')
FILES = DEVICE + HOST


def lines_of(export):
    """{path in FILES: (lines, hit)} from an llvm-cov export summary"""
    out = {}
    for data in export.get('data', []):
        for f in data.get('files', []):
            name = f.get('filename', '')
            for want in FILES:
                if name == want or name.endswith('/' + want):
                    s = f['summary']['lines']
                    out[want] = (int(s['count']), int(s['covered']))
    return out


def pct(hit, n):
    return f'{100.0 * hit / n:.1f}' if n else '-'


def table(cov):
    """the Markdown rows of FILES, device sum after the device files"""
    rows = ['| File | Lines | Hit | % |', '|---|---:|---:|---:|']
    for group, name in ((DEVICE, 'device files together'),
                        (HOST, 'controllers and USB core together')):
        n = hit = 0
        for f in group:
            c, h = cov[f]
            n += c
            hit += h
            rows.append(f'| `{f}` | {c} | {h} | {pct(h, c)} |')
        rows.append(f'| **{name}** | {n} | {hit} | **{pct(hit, n)}** |')
    return rows


def section(rows, date, commit, corpora, command):
    # corpora: "target=replayed:committed ..." (":committed" optional)
    sizes = []
    total = seeds = 0
    for c in corpora.split():
        t, n = c.split('=', 1)
        n, _, m = n.partition(':')
        total += int(n)
        seeds += int(m or n)
        sizes.append(f'`{t}` {n}' + (f' ({m} committed)' if m and m != n
                                     else ''))
    return '\n'.join([
        BEGIN,
        f'Written by `{command}` (scripts/check/fuzz-device.sh --coverage,'
        ' scripts/check/fuzz-cov-table.py) on ' + date + ', commit '
        f'`{commit}`: line coverage (llvm-cov-14, clang source-based) of the '
        f'{total} inputs ({seeds} of them committed in tests/fuzz/corpus/, '
        'the rest from the working corpora build/fuzz-qemu/corpus-*) of '
        'every device target replayed through one coverage build, all '
        'targets together.  Inputs per target: ' + ', '.join(sizes) +
        '.',
        '',
        *rows,
        END])


def write(md, text):
    try:
        with open(md) as f:
            old = f.read()
    except FileNotFoundError:
        old = ''
    if BEGIN in old and END in old:
        a = old.index(BEGIN)
        b = old.index(END) + len(END)
        new = old[:a] + text + old[b:]
    else:
        new = old.rstrip('\n') + f'\n\n{HEAD}\n\n{text}\n'
    if new != old:
        with open(md, 'w') as f:
            f.write(new)


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument('export')
    ap.add_argument('--findings')
    ap.add_argument('--date', default='?')
    ap.add_argument('--commit', default='?')
    ap.add_argument('--corpora', default='')
    ap.add_argument('--command', default='make fuzz-coverage')
    a = ap.parse_args(argv)
    with open(a.export) as f:
        cov = lines_of(json.load(f))
    missing = [f for f in FILES if f not in cov]
    if missing:
        print('fuzz-cov-table.py: not in the export: ' + ' '.join(missing),
              file=sys.stderr)
        return 1
    rows = table(cov)
    print('\n'.join(rows))
    if a.findings:
        write(a.findings, section(rows, a.date, a.commit, a.corpora,
                                  a.command))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
