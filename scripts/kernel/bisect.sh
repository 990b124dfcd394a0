#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Bisect a dropout over a Linux git tree: `git bisect run` on a scenario
# (scripts/kernel/scenario.sh, each step a kernel build in the same O=
# directory, so incremental, and one guest boot).
#
#   KERNEL_SRC=/path/to/linux.git GOOD=rev BAD=rev SCENARIO=zlp-merge \
#       scripts/kernel/bisect.sh               (make bisect ...)
#
# GOOD/BAD, or OLD/NEW (the same two: the older and the newer revision).
# The verdicts at both ends decide what is searched: old without the
# dropout and new with it is a regression (git bisect's terms good/bad);
# old with it and new without is a fix (terms dropout/fixed, `git bisect
# start --term-old=dropout --term-new=fixed`).  Both ends are measured
# first; equal verdicts, or an end that could not be tested, stop it.
#
# BISECT_SCENARIO_CMD=cmd: run that instead of scenario.sh at each step
# (the tests use a fake scenario); it gets SCENARIO and KERNEL_SRC in its
# environment and follows scenario.sh's exit codes (0, 1, 125) and
# last-line format.
#
# Prints the first commit where the verdict changes, its subject, and the
# scenario's verdict line on both sides:
#   first bad commit: <sha> <subject>
#     before (<sha of parent>): verdict=0 ...
#     at     (<sha>):          verdict=1 ...
# Exit: 0 found, 1 no change between the ends, 2 usage/tree errors,
# 125 an end could not be tested.  The tree's bisect state is reset and
# its HEAD put back on every exit (trap).
set -uo pipefail
. "$(dirname "$0")/../setup/common.sh"

SRC=${KERNEL_SRC:-}
OLD=${OLD:-${GOOD:-}}
NEW=${NEW:-${BAD:-}}
SCN=${SCENARIO:-}
[ -n "$SRC" ] && [ -n "$OLD" ] && [ -n "$NEW" ] && [ -n "$SCN" ] ||
    die "usage: make bisect KERNEL_SRC=<git tree> GOOD=<rev> BAD=<rev> SCENARIO=<name>" \
        "(or OLD=/NEW= for either direction; scenarios: scripts/kernel/scenario.sh --list)"
git -C "$SRC" rev-parse --git-dir >/dev/null 2>&1 ||
    die "KERNEL_SRC=$SRC is not a git tree" "git bisect needs one"
SRC=$(cd "$SRC" && pwd -P)
g() { git -C "$SRC" "$@"; }
gitdir=$(g rev-parse --absolute-git-dir)
[ ! -e "$gitdir/BISECT_START" ] ||
    die "$SRC is already bisecting" "finish or 'git -C $SRC bisect reset' first"
[ -z "$(g status --porcelain --untracked-files=no)" ] ||
    die "$SRC has uncommitted changes" "commit or stash them: bisect checks out other commits"
old=$(g rev-parse --verify -q "$OLD^{commit}") || die "GOOD/OLD=$OLD is no commit in $SRC"
new=$(g rev-parse --verify -q "$NEW^{commit}") || die "BAD/NEW=$NEW is no commit in $SRC"
g merge-base --is-ancestor "$old" "$new" ||
    die "$OLD is not an ancestor of $NEW" "GOOD/OLD is the older revision"

CMD=${BISECT_SCENARIO_CMD:-bash $NCM_TOP/scripts/kernel/scenario.sh}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ncm-bisect.XXXXXX")
RESULTS=$WORK/results
: > "$RESULTS"
orig=$(g symbolic-ref -q HEAD || g rev-parse HEAD)
cleanup() {
    if [ -e "$gitdir/BISECT_START" ]; then
        g bisect reset >/dev/null 2>&1 || g bisect reset --no-checkout >/dev/null 2>&1
    fi
    # back where the tree was (bisect reset does it when a bisect started)
    g checkout -q "${orig#refs/heads/}" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# measure REV: checkout, run the scenario; sets MEASURED (the verdict line)
# and returns the scenario's exit status
measure() {
    local rc
    g checkout -q --detach "$1" || return 125
    SCENARIO=$SCN KERNEL_SRC=$SRC SCENARIO_RESULT=$WORK/one $CMD "$SCN" > "$WORK/out" 2>&1
    rc=$?
    MEASURED=$(tail -n1 "$WORK/one" 2>/dev/null || tail -n1 "$WORK/out")
    rm -f "$WORK/one"
    printf '%s %s\n' "$(g rev-parse HEAD)" "$MEASURED" >> "$RESULTS"
    return "$rc"
}
short() { g log -1 --format='%h %s' "$1"; }

step "bisect $SCN over $(g rev-list --count "$old..$new") commits of $SRC: $(short "$old") .. $(short "$new")"
measure "$old"; vold=$?
note "old end $(short "$old"): $MEASURED"
measure "$new"; vnew=$?
note "new end $(short "$new"): $MEASURED"
if [ "$vold" = 125 ] || [ "$vnew" = 125 ]; then
    echo "bisect: an end could not be tested (verdicts: old $vold, new $vnew)"
    exit 125
fi
if [ "$vold" = "$vnew" ]; then
    echo "bisect: the verdict does not change between the ends (both $vold)"
    exit 1
fi
if [ "$vold" = 0 ]; then
    kind=regression told=good tnew=bad
else
    kind=fix told=dropout tnew=fixed
fi

# the step: the scenario's verdict mapped onto the terms (old: exit 0)
cat > "$WORK/step.sh" <<EOF
#!/bin/bash
SCENARIO='$SCN' KERNEL_SRC='$SRC' SCENARIO_RESULT='$WORK/one' $CMD '$SCN' > '$WORK/out' 2>&1
rc=\$?
line=\$(tail -n1 '$WORK/one' 2>/dev/null || tail -n1 '$WORK/out')
rm -f '$WORK/one'
printf '%s %s\n' "\$(git rev-parse HEAD)" "\$line" >> '$RESULTS'
printf '    %s: %s\n' "\$(git log -1 --format='%h %s' HEAD)" "\$line" >&2
case \$rc in
$vold) exit 0 ;;
$vnew) exit 1 ;;
*) exit 125 ;;
esac
EOF
chmod +x "$WORK/step.sh"

step "searching the $kind (git bisect run, terms $told/$tnew)"
t0=$(date +%s)
g bisect start --term-old="$told" --term-new="$tnew" "$new" "$old" > "$WORK/bisect.log" 2>&1 ||
    { cat "$WORK/bisect.log"; die "git bisect start failed"; }
(cd "$SRC" && git bisect run "$WORK/step.sh") >> "$WORK/bisect.log" 2>&1
brc=$?
t1=$(date +%s)
first=$(g rev-parse -q --verify "refs/bisect/$tnew" 2>/dev/null || true)
if [ "$brc" != 0 ] || [ -z "$first" ] ||
   ! grep -q "is the first $tnew commit" "$WORK/bisect.log"; then
    grep -E 'first|skip|cannot|only' "$WORK/bisect.log" | head -n 20
    echo "bisect: git bisect run did not name one commit (status $brc)"
    exit 1
fi
fig() { awk -v c="$1" '$1 == c { $1 = ""; sub(/^ /, ""); l = $0 } END { print l }' "$RESULTS"; }
parent=$(g rev-parse "$first^" 2>/dev/null || true)
steps=$(wc -l < "$RESULTS")
echo "first $tnew commit: $(g log -1 --format='%H %s' "$first")"
echo "  before ($(g log -1 --format=%h "$parent")): $(fig "$parent" | grep . || echo '(not measured)')"
echo "  at     ($(g log -1 --format=%h "$first")): $(fig "$first")"
echo "bisect: $kind found in $((t1 - t0))s of git bisect run ($steps scenario runs in all, the two ends included)"
exit 0
