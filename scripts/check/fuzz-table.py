#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Usage: fuzz-table.py FINDINGS_MD DATE RUN TARGET EXECS SECONDS
#                      COV0 COV1 FT0 FT1 SEEDS FINDINGS
#
# Append one row to the fuzz campaign table of docs/findings.md (written
# by scripts/check/fuzz-campaign.sh, one row per target per run) and
# rewrite the totals below it from every row there is, so that the table
# adds up across runs.  The section is created at the end of the file the
# first time.

import sys

HEAD = '## Fuzz campaigns'
ROWS_END = '<!-- campaign rows end -->'
TOTALS = '<!-- campaign totals -->'
TOTALS_END = '<!-- campaign totals end -->'
COLS = ('Date (UTC)', 'Run', 'Target', 'Executions', 'Seconds',
        'Edges (cov)', 'Features (ft)', 'Seeds', 'Findings')

INTRO = f'''{HEAD}

Written by `make fuzz-campaign FUZZ_HOURS=N`
(`scripts/check/fuzz-campaign.sh`): one row per target per run, the
executions libFuzzer counted, libFuzzer's edges (`cov`) and features
(`ft`) from the corpus as loaded to the end of the run, the merged seeds
committed in `tests/fuzz/corpus/<target>/`, and the reproducers the run
wrote (`none`: no crash, sanitizer report, timeout or out-of-memory).
An interrupted run's row counts what it ran.  The totals below add up
every row.

| {' | '.join(COLS)} |
|{'|'.join('---' for _ in COLS)}|
{ROWS_END}

{TOTALS}
{TOTALS_END}
'''


def num(s):
    try:
        return int(s)
    except ValueError:
        return 0


def totals(rows):
    per = {}
    for r in rows:
        t = per.setdefault(r[2], [0, 0, 0, 0])
        t[0] += 1
        t[1] += num(r[3].replace(',', ''))
        t[2] += num(r[4].replace(',', ''))
        t[3] += 0 if r[8] == 'none' else len(r[8].split())
    out = ['| Target | Rows | Executions | Seconds | Inputs/s | Findings |',
           '|---|---|---|---|---|---|']
    alls = [0, 0, 0, 0]
    for name in sorted(per):
        t = per[name]
        alls = [a + b for a, b in zip(alls, t)]
        out.append(f'| {name} | {t[0]} | {t[1]:,} | {t[2]:,} | '
                   f'{t[1] // max(t[2], 1):,} | {t[3]} |')
    out.append(f'| all | {alls[0]} | {alls[1]:,} | {alls[2]:,} | '
               f'{alls[1] // max(alls[2], 1):,} | {alls[3]} |')
    return '\n'.join(out)


def main():
    path = sys.argv[1]
    date, run, target, execs, secs, c0, c1, f0, f1, seeds, found = \
        sys.argv[2:13]
    with open(path) as f:
        text = f.read()
    if HEAD not in text:
        text = text.rstrip('\n') + '\n\n' + INTRO
    cov = f'{c0} -> {c1}' if c0 != '?' else c1
    ft = f'{f0} -> {f1}' if f0 != '?' else f1
    row = [date, run, target, f'{num(execs):,}', secs, cov, ft, seeds,
           found]
    text = text.replace(ROWS_END, '| ' + ' | '.join(row) + ' |\n' + ROWS_END)
    section = text[text.index(HEAD):text.index(ROWS_END)]
    rows = [[c.strip() for c in line.strip().strip('|').split('|')]
            for line in section.splitlines()
            if line.startswith('| ') and not line.startswith('| Date')]
    a, b = text.index(TOTALS) + len(TOTALS), text.index(TOTALS_END)
    text = text[:a] + '\n' + totals(rows) + '\n' + text[b:]
    with open(path, 'w') as f:
        f.write(text)


if __name__ == '__main__':
    main()
