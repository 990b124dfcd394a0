#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Bisect a dropout over Debian's kernel packages, without building:
#
#   GOOD=5.10 BAD=6.1 SCENARIO=zlp-merge scripts/kernel/bisect-packages.sh
#   make bisect-packages GOOD=<version> BAD=<version> SCENARIO=<name>
#   scripts/kernel/bisect-packages.sh --list     the versions, nothing run
#
# The versions: every linux-image-<abi>-amd64 (arm64 with ARCH=arm64) that
# bullseye, bullseye-security, bookworm, bookworm-updates,
# bookworm-security, bookworm-backports, trixie, trixie-security,
# trixie-backports and sid serve now, read through a private apt
# configuration ($NCM_CACHE/apt-kernel-bisect: its own sources.list, lists
# and cache; nothing in /etc/apt changes), sorted with dpkg
# --compare-versions.  The archive keeps only each suite's current version,
# so the list is short (a dozen versions), not every upload.
# GOOD/BAD (or OLD/NEW): a package version (6.1.158-1), or a prefix of one
# (5.10, 6.1: the newest version that starts so).  As scripts/kernel/
# bisect.sh, the verdicts at the ends decide whether a regression or a fix
# is searched.  Each step downloads the .deb (apt-get download into
# $NCM_CACHE/debs) and runs scripts/kernel/scenario.sh with
# KERNEL_PACKAGE=<deb>.
# Prints the first version with the new verdict and the verdict lines of it
# and of the version before it; exit 0 found, 1 no change, 125 an end could
# not be tested.
set -uo pipefail
. "$(dirname "$0")/../setup/common.sh"

case $NCM_ARCH in arm64) DARCH=arm64 ;; *) DARCH=amd64 ;; esac
APTD=$NCM_CACHE/apt-kernel-bisect
[ "$DARCH" = amd64 ] || APTD=$APTD-$DARCH
DEBS=$NCM_CACHE/debs
SUITES="bullseye bullseye-security bookworm bookworm-updates bookworm-security bookworm-backports trixie trixie-security trixie-backports sid"
opts=(-o "Dir::Etc::sourcelist=$APTD/sources.list" -o Dir::Etc::sourceparts=-
      -o "Dir::State::Lists=$APTD/lists" -o "Dir::Cache=$APTD/cache"
      -o "Dir::State::status=$APTD/status"
      -o "APT::Architecture=$DARCH" -o "APT::Architectures=$DARCH")
[ "$(id -u)" = 0 ] && opts+=(-o APT::Sandbox::User=root)

apt_update() {
    local s k=/usr/share/keyrings/debian-archive-keyring.gpg
    mkdir -p "$APTD/lists/partial" "$APTD/cache/archives/partial"
    : >> "$APTD/status"
    for s in $SUITES; do
        case $s in
        *-security) echo "deb [signed-by=$k] http://deb.debian.org/debian-security $s main" ;;
        *) echo "deb [signed-by=$k] http://deb.debian.org/debian $s main" ;;
        esac
    done > "$APTD/sources.list"
    step "apt-get update of the private kernel lists ($APTD)" >&2
    # a suite the archive no longer serves is left out, not fatal
    apt-get -q "${opts[@]}" update > "$APTD/update.log" 2>&1 ||
        note "apt-get update reported errors (see $APTD/update.log); going on with what came" >&2
}
[ -n "$(find "$APTD/lists" -maxdepth 1 -name '*Packages*' -mmin -1440 2>/dev/null | head -n1)" ] ||
    apt_update

# versions: "VERSION PACKAGE SUITE" lines, oldest first
list_versions() {
    local f suite
    # (apt keeps its lists compressed, lz4 here: apt-helper reads them)
    for f in "$APTD"/lists/*_main_binary-"${DARCH}"_Packages*; do
        [ -f "$f" ] || continue
        suite=$(basename "$f" | sed -E 's/.*_dists_([^_]+)_main_.*/\1/')
        /usr/lib/apt/apt-helper cat-file "$f" | awk -v s="$suite" -v a="$DARCH" '
            # linux-image-<abi>-<arch> kernels only: no metapackage
            # (linux-image-6.1-amd64), no -cloud/-rt flavour, no -dbg
            function kernel(p) {
                return p ~ ("^linux-image-[0-9]+[.][0-9]+[.][0-9]+[-+][^ ]*-" a "$") &&
                       p !~ /-(cloud|rt)-/
            }
            /^Package: / { p = $2 }
            /^Version: / { v = $2 }
            /^$/ { if (kernel(p)) print v, p, s; p = v = "" }
            END { if (kernel(p)) print v, p, s }'
    done | sort -u -k1,1 | python3 -c '
import subprocess, sys, functools
rows = [l.split() for l in sys.stdin if l.strip()]
def cmp(a, b):
    if a[0] == b[0]:
        return 0
    r = subprocess.run(["dpkg", "--compare-versions", a[0], "lt", b[0]])
    return -1 if r.returncode == 0 else 1
for r in sorted(rows, key=functools.cmp_to_key(cmp)):
    print(" ".join(r))'
}
VERS=$(list_versions)
[ -n "$VERS" ] || die "no linux-image versions in $APTD/lists" "see $APTD/update.log"
if [ "${1:-}" = --list ]; then
    printf '%s\n' "$VERS"
    exit 0
fi

OLD=${OLD:-${GOOD:-}}
NEW=${NEW:-${BAD:-}}
SCN=${SCENARIO:-}
[ -n "$OLD" ] && [ -n "$NEW" ] && [ -n "$SCN" ] ||
    die "usage: make bisect-packages GOOD=<version> BAD=<version> SCENARIO=<name>" \
        "versions: scripts/kernel/bisect-packages.sh --list"
# index SPEC: the line number (1-based) in VERS of that version
index() {
    awk -v s="$1" '$1 == s { print NR; f = 1; exit } END { }' <<<"$VERS" | grep . ||
        awk -v s="$1" 'index($1, s) == 1 { n = NR } END { if (n) print n }' <<<"$VERS" | grep .
}
io=$(index "$OLD") || die "no served version matches GOOD/OLD=$OLD" "see: scripts/kernel/bisect-packages.sh --list"
in=$(index "$NEW") || die "no served version matches BAD/NEW=$NEW" "see: scripts/kernel/bisect-packages.sh --list"
[ "$io" -lt "$in" ] || die "GOOD/OLD=$OLD is not older than BAD/NEW=$NEW"
mapfile -t ROWS < <(sed -n "${io},${in}p" <<<"$VERS")
step "bisect-packages $SCN over ${#ROWS[@]} versions: ${ROWS[0]%% *} .. ${ROWS[-1]%% *}"
for r in "${ROWS[@]}"; do note "$r"; done

mkdir -p "$DEBS"
# fetch ROW: the .deb path holding the kernel (a split sid kernel: the
# linux-binary .deb, its linux-modules .deb beside it)
fetch() {
    local v=$1 p=$2 f dep
    f=$(ls "$DEBS/${p}_${v//:/%3a}_"*.deb 2>/dev/null | head -n1)
    if [ -z "$f" ]; then
        (cd "$DEBS" && apt-get -q "${opts[@]}" download "$p=$v" > /dev/null 2>&1) || return 1
        f=$(ls "$DEBS/${p}_${v//:/%3a}_"*.deb 2>/dev/null | head -n1)
    fi
    [ -n "$f" ] || return 1
    if ! dpkg-deb -c "$f" | grep -qE '/vmlinuz'; then
        for dep in $(dpkg-deb -f "$f" Depends | tr ',' '\n' | grep -oE 'linux-(binary|modules)-[^ ]+ \(= [^)]+\)' | sed 's/ (= /=/; s/)$//'); do
            (cd "$DEBS" && apt-get -q "${opts[@]}" download "$dep" > /dev/null 2>&1) || return 1
        done
        f=$(ls "$DEBS"/linux-binary-*_"${v//:/%3a}"_*.deb 2>/dev/null | head -n1)
        [ -n "$f" ] || return 1
    fi
    printf '%s\n' "$f"
}
declare -A VERDICT LINE
measure() {
    local i=$1 v p deb out rc
    read -r v p _ <<<"${ROWS[$i]}"
    if ! deb=$(fetch "$v" "$p"); then
        VERDICT[$i]=125 LINE[$i]="verdict=125 scenario=$SCN why=download-failed package=$p=$v"
        return
    fi
    out=$(KERNEL_PACKAGE=$deb bash "$NCM_TOP/scripts/kernel/scenario.sh" "$SCN" 2>/dev/null)
    rc=$?
    VERDICT[$i]=$rc
    LINE[$i]="$(tail -n1 <<<"$out") package=$p=$v"
    note "$v: ${LINE[$i]}"
}
t0=$(date +%s)
lo=0 hi=$((${#ROWS[@]} - 1))
measure $lo; measure $hi
vold=${VERDICT[$lo]} vnew=${VERDICT[$hi]}
if [ "$vold" = 125 ] || [ "$vnew" = 125 ]; then
    echo "bisect-packages: an end could not be tested (old $vold, new $vnew)"
    exit 125
fi
if [ "$vold" = "$vnew" ]; then
    echo "bisect-packages: the verdict does not change between ${ROWS[$lo]%% *} and ${ROWS[$hi]%% *} (both $vold)"
    exit 1
fi
kind=regression
[ "$vold" = 0 ] || kind=fix
# binary search: lo has the old verdict, hi the new; untestable versions
# are skipped by trying their neighbours
runs=2
while [ $((hi - lo)) -gt 1 ]; do
    mid=$(((lo + hi) / 2))
    measure $mid; runs=$((runs + 1))
    m=${VERDICT[$mid]}
    if [ "$m" = 125 ]; then
        # try the others between lo and hi, nearest first
        found=""
        for d in 1 2 3 4 5 6 7 8; do
            for c in $((mid - d)) $((mid + d)); do
                [ "$c" -gt "$lo" ] && [ "$c" -lt "$hi" ] && [ -z "${VERDICT[$c]:-}" ] || continue
                measure "$c"; runs=$((runs + 1))
                [ "${VERDICT[$c]}" != 125 ] && { found=$c; break 2; }
            done
        done
        [ -n "$found" ] || { echo "bisect-packages: only untestable versions left between ${ROWS[$lo]%% *} and ${ROWS[$hi]%% *}"; exit 125; }
        mid=$found m=${VERDICT[$mid]}
    fi
    if [ "$m" = "$vold" ]; then lo=$mid; else hi=$mid; fi
done
t1=$(date +%s)
echo "first version with the $( [ "$kind" = regression ] && echo dropout || echo fix ): ${ROWS[$hi]}"
echo "  before (${ROWS[$lo]%% *}): ${LINE[$lo]}"
echo "  at     (${ROWS[$hi]%% *}): ${LINE[$hi]}"
echo "bisect-packages: $kind found in $((t1 - t0))s ($runs scenario runs; the archive serves ${#ROWS[@]} versions in this range)"
exit 0
