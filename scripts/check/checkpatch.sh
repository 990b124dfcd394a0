#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# QEMU's scripts/checkpatch.pl on every C file we own, one PASS/FAIL line
# per file; then the record/replay lint of the device's files, the table
# check, the layer check, the USB core API check, the performance doc's
# generated blocks and the knob index.  Paths are given
# relative to the repo so that checkpatch applies its tests/ rules to the
# tests.
set -uo pipefail
. "$(dirname "$0")/../setup/common.sh"

CHECKPATCH=$NCM_BUILD/qemu-src/scripts/checkpatch.pl
[ -f "$CHECKPATCH" ] || die "$CHECKPATCH is missing" \
    "run: make qemu (it prepares build/qemu-src)"
cd "$NCM_TOP"
rc=0
while IFS= read -r f; do
    out=$(perl "$CHECKPATCH" --no-tree -f "$f" 2>&1)
    if grep -q '^total: 0 errors, 0 warnings' <<<"$out"; then
        echo "PASS: style/$f"
    else
        echo "FAIL: style/$f ($(grep '^total:' <<<"$out"))"
        grep -E '^(ERROR|WARNING)' -A2 <<<"$out" | head -n 12 | sed 's/^/    | /'
        rc=1
    fi
done < <(git ls-files 'hw/*.c' 'hw/*.h' 'include/*.h' 'tests/*.c' 'tests/*.h')
# what the device schedules must replay (scripts/check/determinism.py)
python3 "$NCM_TOP/scripts/check/determinism.py" || rc=1
# one source of truth per table (scripts/check/check-tables.sh)
bash "$NCM_TOP/scripts/check/check-tables.sh" || rc=1
# the device's state private, fault injection outside it (scripts/check/layers.py)
python3 "$NCM_TOP/scripts/check/layers.py" || rc=1
# the USB core's work stays in the core (scripts/check/check-core-api.sh)
bash "$NCM_TOP/scripts/check/check-core-api.sh" || rc=1
# forbidden NAME WHAT INSTEAD PATTERN PATHSPEC...: PASS, or FAIL with the
# lines (comments aside) of the tracked files that match PATTERN
forbidden() {
    local name=$1 what=$2 instead=$3 pat=$4 hits
    shift 4
    hits=$(git grep -nE "$pat" -- "$@" ':!scripts/check/checkpatch.sh' |
           grep -vE '^[^:]+:[0-9]+:[[:space:]]*#' || true)
    if [ -z "$hits" ]; then
        echo "PASS: style/$name"
    else
        echo "FAIL: style/$name ($(wc -l <<<"$hits") $what: $instead)"
        sed 's/^/    | /' <<<"$hits" | head -n 10
        rc=1
    fi
}
# no eval in the scripts: what a file or a program printed is data, read
# as data (NAME=VALUE parsed, arrays NUL-separated), never run as code
forbidden no-eval "use(s) of eval/exec" "parse the data instead" \
    '(^|[;&|({[:space:]])eval([[:space:]]|$)|(^|[^_.a-z])(eval|exec)\(' \
    '*.sh' '*.py' 'Makefile' '*.mk' '.ci/*'
# no "producer | grep -q" in the host scripts: under pipefail the
# producer can die of SIGPIPE once grep has matched and exited, which
# fails the pipeline at random (the guest's init scripts have no pipefail)
forbidden no-pipe-grep-q "pipeline(s) into grep -q" \
    'grep -q PAT <<<"$(cmd)" instead' \
    '\|[[:space:]]*grep[[:space:]]+-[A-Za-z]*q' '*.sh' ':!tests/guest/init*'
# QAPI documentation our patches add: QEMU 10.2's qapi-gen refuses a
# doc line over 70 columns (10.0's took it), so the whole 10.2 build fails
qapi_long=$(awk '/^\+\+\+ b\/qapi\// { q = 1; next } /^\+\+\+ / { q = 0 }
                 q && /^\+#/ && length($0) - 1 > 70 { print FILENAME ":" FNR ": " substr($0, 2) }' \
                 patches/*.patch patches/*/*.patch)
if [ -z "$qapi_long" ]; then
    echo "PASS: style/qapi-doc-width"
else
    echo "FAIL: style/qapi-doc-width (QAPI doc lines over 70 columns in patches/: qapi-gen of QEMU 10.2 refuses them)"
    sed 's/^/    | /' <<<"$qapi_long"
    rc=1
fi
# docs/performance.md's results blocks what docs/performance/ holds, not
# hand edits (scripts/bench/perf-doc.py)
python3 "$NCM_TOP/scripts/bench/perf-doc.py" --check || rc=1
# results blocks a script writes: each marker pair once, in order, so the
# writer finds its block (repro-dropout.sh; check.sh's check-results)
for pair in "docs/repro-dropout.md repro-dropout" \
            "docs/testing.md check-results" \
            "docs/testing.md check-results-10.2" \
            "docs/testing.md check-results-sanitize"; do
    read -r doc mark <<<"$pair"
    if why=$(python3 "$NCM_TOP/scripts/lib/doc_block.py" check \
                 "$NCM_TOP/$doc" "$mark" 2>&1); then
        echo "PASS: style/results-block/$mark"
    else
        echo "FAIL: style/results-block/$mark ($doc: $why)"
        rc=1
    fi
done
# the device's trace events against the hunks that declare them
python3 "$NCM_TOP/scripts/check/trace-events.py" "$NCM_TOP" || rc=1
# nothing of a checkout's own in the repo: build/ (a worktree's link to
# the main checkout's build/ was once committed with a campaign's rows,
# and a fresh clone's build then pointed at itself) or any symlink
links=$(git ls-files -s | awk '$1 == "120000" { print $4 }')
built=$(git ls-files -- build)
if [ -z "$links$built" ]; then
    echo "PASS: style/tracked-paths"
else
    echo "FAIL: style/tracked-paths (tracked: $(echo $links $built);" \
         "git rm --cached them)"
    rc=1
fi
# every environment knob indexed, docs/knobs.md current (scripts/check/knobs.sh)
bash "$NCM_TOP/scripts/check/knobs.sh" || rc=1
exit $rc
