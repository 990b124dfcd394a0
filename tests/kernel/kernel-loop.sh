#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The long test of the kernel developer's loop (make check-kernel-loop):
# real kernel builds from Debian's linux-source, real guest boots under
# TCG, real bisects.  About an hour on two busy cores; make check runs only
# tests/kernel/smoke.sh.
#
#   tests/kernel/kernel-loop.sh            every leg, in this order
#   LEGS="bisect" tests/kernel/kernel-loop.sh      some of them
#   tests/kernel/kernel-loop.sh --doc       only write figures.txt's
#                                           figures into the doc again
#
# Legs:
#   run          `make run KERNEL_SRC=<loop tree>` (modules) and again with
#                KERNEL_BUILTIN=1: each builds and boots, cdc_ncm binds
#                the device, the guest runs the kernel built
#   scenario     scripts/kernel/scenario.sh zlp on the source-built 6.1:
#                verdict 0, bound as "CDC NCM (SEND ZLP)"
#   incremental  a pr_info added to cdc_ncm.c's bind, `make run` again: the
#                rebuild time, and the guest's dmesg carries the line (the
#                edited kernel booted); the edit is reverted
#   config       a fragment naming an option no tree has
#                (KERNEL_CONFIG_EXTRA): warned about, the build goes on
#   bisect       a small history on the loop tree (harmless commits, one
#                that drops the DisplayLink 0x17e9 ZLP entry from
#                cdc_ncm.c, more harmless ones): `make bisect GOOD=<first>
#                BAD=<last> SCENARIO=zlp` names the planted commit, and the
#                tree has no bisect state after (git bisect log fails, no
#                BISECT_* files, HEAD back on its branch)
#   packages     scripts/kernel/scenario.sh zlp on Debian's 5.10 and 6.1
#                packages: 5.10 binds as plain "CDC NCM" and loses
#                datagrams (verdict 1), 6.1 does not (verdict 0)
#   bisect-packages  `make bisect-packages GOOD=5.10 BAD=6.1 SCENARIO=zlp`
#                names the first version without the dropout
#
# The loop tree: $NCM_CACHE/kernel-loop/linux-source-6.1, a copy of the
# tree scripts/kernel/fetch-source.sh unpacks (KERNEL_SRC= to start from
# another), made a git repository once (its first commit is tagged
# loop-base); the bisect leg's branch is made again from it each time.
# The unpacked tree itself is never written to.
#
# KERNEL_LOOP_COLD=1: remove the loop tree's build directories first, so
# that the run leg measures cold builds (ccache stays as it is).
# Each leg's figures (seconds, with the date and the command) go to
# build/kernel-loop/figures.txt and, unless KERNEL_LOOP_DOC=0, into the
# "Measured" block of docs/kernel-developers.md.
set -uo pipefail
# (one compound command, read whole before it runs: the script can be
# edited while a long run of it goes on)
{
. "$(dirname "$0")/../../scripts/setup/common.sh"
. "$NCM_TOP/tests/guest/lib.sh"
runner_begin kernel-loop

LEGS=${LEGS:-run scenario incremental config bisect packages bisect-packages}
leg() { [[ " $LEGS " == *" $1 "* ]]; }
OUT=$NCM_BUILD/kernel-loop
mkdir -p "$OUT"
FIG=$OUT/figures.txt
touch "$FIG"
DOC=$NCM_TOP/docs/kernel-developers.md
mk() { make --no-print-directory -C "$NCM_TOP" "$@"; }
now() { date -u +%Y-%m-%dT%H:%MZ; }

# figure KEY TEXT: one measured figure (KEY sorts the block), into
# figures.txt and the doc's block between its two marker lines
figure() {
    local key=$1 text=$2
    note "figure: $text"
    { grep -v "^$key	" "$FIG" || true; printf '%s\t%s\n' "$key" "$text"; } |
        sort -t '	' -k1,1 > "$FIG.new" && mv "$FIG.new" "$FIG"
    [ "${KERNEL_LOOP_DOC:-1}" != 0 ] || return 0
    write_doc
}
# write_doc: the doc's figures block made again from figures.txt
write_doc() {
    [ -f "$DOC" ] || return 0
    python3 - "$DOC" "$FIG" <<'PY'
import sys
doc, fig = sys.argv[1], sys.argv[2]
begin = "<!-- kernel-loop figures: written by tests/kernel/kernel-loop.sh -->"
end = "<!-- end of kernel-loop figures -->"
text = open(doc).read()
if begin not in text or end not in text:
    sys.exit(0)
rows = [l.rstrip("\n").split("\t", 1)[1] for l in open(fig) if "\t" in l]
block = begin + "\n" + "".join("- " + r + "\n" for r in rows) + end
head, rest = text.split(begin, 1)
tail = rest.split(end, 1)[1]
open(doc, "w").write(head + block + tail)
PY
}

if [ "${1:-}" = --doc ]; then
    write_doc
    exit 0
fi

# the loop tree
SRC0=${KERNEL_SRC:-}
if [ -z "$SRC0" ]; then
    SRC0=$(bash "$NCM_TOP/scripts/kernel/fetch-source.sh" 6.1) ||
        die "no Linux source tree" "scripts/kernel/fetch-source.sh 6.1 failed"
fi
[ -f "$SRC0/Makefile" ] && [ -d "$SRC0/drivers/net/usb" ] ||
    die "KERNEL_SRC=$SRC0 is not a Linux tree"
SRC0=$(cd "$SRC0" && pwd -P)
T=$NCM_CACHE/kernel-loop/$(basename "$SRC0")
g() { git -C "$T" "$@"; }
TREL=${T/#$HOME/\~}
# the loop tree only for the legs that use it, one run at a time
if leg incremental || leg config || leg bisect; then
mkdir -p "$(dirname "$T")"
exec 9> "$T.lock"
flock -n 9 || die "another kernel-loop run is using $T" "wait for it, or run legs that do not use it (run, scenario, packages)"
export GIT_AUTHOR_NAME="kernel-loop" GIT_AUTHOR_EMAIL=kernel-loop@example.org \
       GIT_COMMITTER_NAME="kernel-loop" GIT_COMMITTER_EMAIL=kernel-loop@example.org \
       GIT_AUTHOR_DATE='2024-01-01T00:00:00Z' GIT_COMMITTER_DATE='2024-01-01T00:00:00Z'
if ! g rev-parse -q --verify loop-base >/dev/null 2>&1; then
    if [ ! -f "$T/Makefile" ]; then
        step "copying $SRC0 to $T (the loop tree)"
        mkdir -p "$(dirname "$T")"
        rm -rf "$T.tmp"
        cp -a "$SRC0" "$T.tmp" && mv "$T.tmp" "$T" || die "could not copy $SRC0"
    fi
    # (-f: Debian's top-level .gitignore ignores everything but debian/)
    step "making $T a git repository (its first commit: loop-base)"
    t0=$(date +%s)
    rm -rf "$T/.git"
    g init -q -b loop && g config gc.auto 0 && g config core.autocrlf false &&
        nice -n 19 git -C "$T" add -f -A . &&
        nice -n 19 git -C "$T" commit -q -m "$(basename "$SRC0") as Debian ships it" &&
        g tag loop-base || die "could not make $T a git repository"
    note "git import of the tree: $(( $(date +%s) - t0 ))s"
fi
g bisect reset >/dev/null 2>&1 || true
g checkout -q -f loop && g reset -q --hard loop-base ||
    die "could not put $T back on loop-base"
[ -z "$(g status --porcelain --untracked-files=no)" ] || die "$T is not clean"
fi

SRELD=${SRC0/#$HOME/\~}
# bdir TREE MODE: a tree's build directory (scripts/kernel/build.sh's name)
bdir() {
    printf '%s/kernel/%s-%s-x86_64-%s' "$NCM_BUILD" "$(basename "$1")" \
        "$(printf '%s' "$1" | sha256sum | cut -c1-6)" "$2"
}
if [ "${KERNEL_LOOP_COLD:-0}" = 1 ]; then
    step "KERNEL_LOOP_COLD=1: removing the build directories of $SRC0 and $T"
    rm -rf "$(bdir "$SRC0" mod)" "$(bdir "$SRC0" builtin)" "$(bdir "$T" mod)" "$(bdir "$T" builtin)"
fi
# a stamp older than anything the legs write: the unpacked tree must have
# nothing newer at the end
STAMP=$OUT/.start-stamp
touch "$STAMP"
# built_s LOG: the build seconds build.sh printed ("built V in Ns")
built_s() { sed -n 's/.*==> .*built \([^ ]*\) in \([0-9]*\)s.*/\2/p' "$1" | tail -n1; }
built_v() { sed -n 's/.*==> .*built \([^ ]*\) in \([0-9]*\)s.*/\1/p' "$1" | tail -n1; }
guest_kernel() { sed -n 's/.*, guest Linux \([^ ,]*\),.*/\1/p' "$1" | tail -n1; }

# run_make TREE MODE LOGNAME: make run KERNEL_SRC=TREE [KERNEL_BUILTIN=1]
run_make() {
    local tree=$1 mode=$2 log=$OUT/$3.log b=0 s t
    [ "$mode" = builtin ] && b=1
    s=$(date +%s)
    KERNEL_SRC=$tree KERNEL_BUILTIN=$b KERNEL_JOBS=${KERNEL_JOBS:-2} mk run > "$log" 2>&1
    RUN_RC=$?
    RUN_S=$(( $(date +%s) - s ))
    RUN_BUILD_S=$(built_s "$log")
    RUN_KVER=$(built_v "$log")
    t=$(guest_kernel "$log")
    RUN_GUEST=$t
}
run_ok() {
    local log=$1 want=$2
    [ "$RUN_RC" = 0 ] && [ -n "$RUN_KVER" ] && [ "$RUN_GUEST" = "$RUN_KVER" ] &&
        [ "$RUN_KVER" = "$want" ] && grep -q 'Driver .*cdc_ncm' "$log"
}
run_why() {
    echo "make run status $RUN_RC, built '${RUN_KVER:-none}', guest '${RUN_GUEST:-none}'; $(grep -m1 -E 'ERROR|Driver|Interface' "$1"); log ${1#"$NCM_TOP"/}"
}

# the run and scenario legs build the unpacked tree itself (out of tree:
# it must stay as unpacked), the others its git copy
if leg run; then
    for mode in mod builtin; do
        cold=warm
        [ -f "$(bdir "$SRC0" $mode)/vmlinux" ] || cold=cold
        want=$(make -s -C "$SRC0" kernelversion 2>/dev/null)-ncm
        [ "$mode" = builtin ] && want=$want-builtin
        run_make "$SRC0" "$mode" "run-$mode"
        r=1; run_ok "$OUT/run-$mode.log" "$want" && r=0
        runner_check "run/$mode" "$r" "$(run_why "$OUT/run-$mode.log")"
        [ "$r" = 0 ] || continue
        b=""; [ "$mode" = builtin ] && b=" KERNEL_BUILTIN=1"
        [ "$cold" = cold ] &&
            figure "1-cold-$mode" "cold build, $( [ "$mode" = builtin ] && echo "drivers built in" || echo "drivers as modules"), new O= directory: ${RUN_BUILD_S}s of make (whole \`make run\`, boot included: ${RUN_S}s), $(now), \`make run KERNEL_SRC=$SRELD$b KERNEL_JOBS=2\` (tests/kernel/kernel-loop.sh, leg run)"
        [ "$cold" = warm ] &&
            figure "2-nochange-$mode" "rebuild with nothing changed ($mode): ${RUN_BUILD_S}s of make, ${RUN_S}s for the whole \`make run\`, $(now), \`make run KERNEL_SRC=$SRELD$b\` (leg run)"
    done
fi

if leg scenario; then
    s=$(date +%s)
    out=$(KERNEL_SRC=$SRC0 bash "$NCM_TOP/scripts/kernel/scenario.sh" zlp 2>"$OUT/scenario-src.err")
    rc=$?
    line=$(grep '^verdict=' <<<"$out" | tail -n1)
    r=1; [ "$rc" = 0 ] && [[ $line == "verdict=0 "*'bind="CDC NCM (SEND ZLP)"'*" lost=0 "* ]] && r=0
    runner_check scenario/src-6.1-no-dropout "$r" "status $rc: ${line:-no verdict line}"
    figure "4-scenario-src" "\`KERNEL_SRC=$SRELD scripts/kernel/scenario.sh zlp\`: $(( $(date +%s) - s ))s, $(now); it printed: \`$line\`"
fi

if leg incremental; then
    f=$T/drivers/net/usb/cdc_ncm.c
    # the unedited build first (cold the first time), so that the figure
    # is the edit's rebuild alone
    s=$(date +%s)
    KERNEL_SRC=$T bash "$NCM_TOP/scripts/kernel/build.sh" > "$OUT/incremental-base.log" 2>&1 ||
        runner_fail incremental/base-build "see $OUT/incremental-base.log"
    note "the loop tree's base build: $(( $(date +%s) - s ))s ($(built_s "$OUT/incremental-base.log")s of make)"
    # (a new line each run: the same edit again would be a ccache hit)
    marker="usb-ncm-dl kernel-loop: edited cdc_ncm at $(date -u +%s)"
    # after the first statement of cdc_ncm_bind()'s body
    python3 - "$f" "$marker" <<'PY'
import re, sys
p, m = sys.argv[1], sys.argv[2]
s = open(p).read()
i = s.index("static int cdc_ncm_bind(struct usbnet *dev, struct usb_interface *intf)")
j = s.index("{", i) + 1
s = s[:j] + '\n\tpr_info("%s\\n", "' + m + '");' + s[j:]
open(p, "w").write(s)
PY
    run_make "$T" mod incremental
    # the console log of this run (run-guest.sh names it last)
    lf=$(sed -n 's/^Full console log (with the guest.s dmesg): //p' "$OUT/incremental.log" | tail -n1)
    [ -n "$lf" ] && grep -a -q "$marker" "$NCM_TOP/$lf" || lf=""
    g checkout -q -- drivers/net/usb/cdc_ncm.c
    r=1; [ "$RUN_RC" = 0 ] && [ -n "$lf" ] && [ -n "$RUN_BUILD_S" ] && r=0
    runner_check incremental/edited-driver-booted "$r" \
        "make run status $RUN_RC, rebuild ${RUN_BUILD_S:-?}s, the pr_info line $( [ -n "$lf" ] && echo "in $lf" || echo "in no guest log")"
    r=1; [ -z "$(g status --porcelain --untracked-files=no)" ] && r=0
    runner_check incremental/edit-reverted "$r" "$(g status --porcelain | head -n3)"
    [ -n "$RUN_BUILD_S" ] &&
        figure "3-incremental" "incremental rebuild after a pr_info in cdc_ncm.c (modules, ccache, O= kept): ${RUN_BUILD_S}s of make, ${RUN_S}s for the whole \`make run\`, $(now), \`make run KERNEL_SRC=$TREL\` after the edit (leg incremental)"
    # and back to the unedited module (the next legs start from it)
    KERNEL_SRC=$T bash "$NCM_TOP/scripts/kernel/build.sh" > "$OUT/incremental-revert.log" 2>&1 ||
        runner_fail incremental/rebuild-after-revert "see $OUT/incremental-revert.log"
fi

if leg config; then
    extra=$OUT/no-such-option.config
    echo "CONFIG_USB_NCM_DL_NO_SUCH_OPTION=y" > "$extra"
    # on the loop tree's modules build: configured again, built (next to
    # nothing changes), then configured back
    s=$(date +%s)
    KERNEL_SRC=$T KERNEL_CONFIG_EXTRA=$extra \
        bash "$NCM_TOP/scripts/kernel/build.sh" > "$OUT/config.log" 2>&1
    rc=$?
    w=$(grep -m1 'NO_SUCH_OPTION' "$OUT/config.log")
    r=1; [ "$rc" = 0 ] && [[ $w == *"wanted, the tree has no such option"* ]] && r=0
    runner_check config/missing-option-reported-not-fatal "$r" "build.sh status $rc: ${w:-no warning}; log ${OUT#"$NCM_TOP"/}/config.log"
    # the build directory back to the plain configuration
    KERNEL_SRC=$T bash "$NCM_TOP/scripts/kernel/build.sh" >> "$OUT/config.log" 2>&1 ||
        runner_fail config/rebuild-without-extra "see $OUT/config.log"
    note "config leg: $(( $(date +%s) - s ))s"
fi

if leg bisect; then
    c=$T/drivers/net/usb/cdc_ncm.c
    g checkout -q -B loop-bisect loop-base
    harmless() {
        printf 'kernel-loop step %s\n' "$1" >> "$T/Documentation/kernel-loop-notes.txt"
        g add -f Documentation/kernel-loop-notes.txt && g commit -q -m "Documentation: kernel-loop note $1"
    }
    harmless 1; harmless 2; harmless 3
    # the DisplayLink entry of cdc_ncm's device table: 0x17e9 with the
    # SEND ZLP driver_info (6.1: "/* DisplayLink docking stations */" up
    # to its closing "},")
    python3 - "$c" <<'PY'
import re, sys
p = sys.argv[1]
s = open(p).read()
n = re.sub(r"\t/\* DisplayLink docking stations \*/\n\t\{[^}]*0x17e9[^}]*\},\n\n?", "", s)
if n == s:
    sys.exit("no DisplayLink 0x17e9 entry found in " + p)
open(p, "w").write(n)
PY
    g commit -q -am "cdc_ncm: drop the DisplayLink (0x17e9) SEND ZLP entry" ||
        die "could not plant the regression in $c"
    planted=$(g rev-parse HEAD)
    harmless 4; harmless 5; harmless 6
    ! grep -q 0x17e9 "$c" || die "0x17e9 is still in $c"
    last=$(g rev-parse HEAD)
    first=$(g rev-parse loop-base)
    note "history: $(g rev-list --count loop-base..loop-bisect) commits on loop-base, planted $(g log -1 --format='%h %s' "$planted")"
    s=$(date +%s)
    KERNEL_SRC=$T GOOD=$first BAD=$last SCENARIO=zlp mk bisect > "$OUT/bisect.log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - s ))
    found=$(grep -m1 '^first bad commit: ' "$OUT/bisect.log")
    r=1; [ "$rc" = 0 ] && [[ $found == "first bad commit: $planted "* ]] && r=0
    runner_check bisect/names-planted-commit "$r" "status $rc: ${found:-$(tail -n2 "$OUT/bisect.log" | tr '\n' ' ')}; log ${OUT#"$NCM_TOP"/}/bisect.log"
    gd=$(g rev-parse --absolute-git-dir)
    r=1
    ! g bisect log >/dev/null 2>&1 && [ -z "$(find "$gd" -maxdepth 1 -name 'BISECT_*')" ] &&
        [ -z "$(g for-each-ref refs/bisect)" ] &&
        [ "$(g symbolic-ref -q HEAD)" = refs/heads/loop-bisect ] &&
        [ -z "$(g status --porcelain --untracked-files=no)" ] && r=0
    runner_check bisect/state-cleaned-up "$r" \
        "git bisect log $(g bisect log >/dev/null 2>&1 && echo works || echo fails), BISECT_* files: $(find "$gd" -maxdepth 1 -name 'BISECT_*' -printf '%f '), HEAD $(g symbolic-ref -q HEAD || g rev-parse --short HEAD)"
    if [ "$r" = 0 ] && grep -q '^first bad commit' "$OUT/bisect.log"; then
        figure "5-bisect" "whole bisect, $(g rev-list --count "$first..$last") commits, the planted one found: ${secs}s ($(sed -n 's/.*(\([0-9]*\) scenario runs in all.*/\1/p' "$OUT/bisect.log") scenario runs, each an incremental build and a boot), $(now), \`make bisect KERNEL_SRC=$TREL GOOD=loop-base BAD=loop-bisect SCENARIO=zlp\` (leg bisect)"
    fi
    g checkout -q loop
fi

if leg packages; then
    for v in 5.10 6.1; do
        s=$(date +%s)
        # the script itself: make turns any failing status into its own 2,
        # the verdict's exit status is scenario.sh's
        out=$(KERNEL_PACKAGE=$v bash "$NCM_TOP/scripts/kernel/scenario.sh" zlp 2>"$OUT/scenario-pkg-$v.err")
        rc=$?
        line=$(grep '^verdict=' <<<"$out" | tail -n1)
        case $v in
        5.10) r=1; [ "$rc" = 1 ] && [[ $line == "verdict=1 "*'bind="CDC NCM" '* ]] && r=0 ;;
        6.1) r=1; [ "$rc" = 0 ] && [[ $line == "verdict=0 "*'bind="CDC NCM (SEND ZLP)"'* ]] && r=0 ;;
        esac
        runner_check "packages/zlp-$v" "$r" "status $rc: ${line:-no verdict line}"
        figure "6-scenario-pkg-$v" "\`KERNEL_PACKAGE=$v scripts/kernel/scenario.sh zlp\`: exit $rc in $(( $(date +%s) - s ))s, $(now); it printed: \`$line\`"
    done
fi

if leg bisect-packages; then
    s=$(date +%s)
    mk bisect-packages GOOD=5.10 BAD=6.1 SCENARIO=zlp > "$OUT/bisect-packages.log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - s ))
    found=$(grep -m1 '^first version with' "$OUT/bisect-packages.log")
    r=1; [ "$rc" = 0 ] && [ -n "$found" ] && r=0
    runner_check bisect-packages/5.10-6.1-names-a-version "$r" \
        "status $rc: ${found:-$(tail -n2 "$OUT/bisect-packages.log" | tr '\n' ' ')}"
    [ "$r" = 0 ] &&
        figure "7-bisect-packages" "whole bisect-packages 5.10 .. 6.1: ${secs}s ($(sed -n 's/.*(\([0-9]*\) scenario runs;.*/\1/p' "$OUT/bisect-packages.log") scenario runs), $(now), \`make bisect-packages GOOD=5.10 BAD=6.1 SCENARIO=zlp\` (leg bisect-packages); ${found}"
fi
if leg run || leg scenario; then
    n=$(find "$SRC0" -newer "$STAMP" 2>/dev/null | head -n 5)
    r=1; [ -z "$n" ] && [ ! -e "$SRC0/.config" ] && [ ! -e "$SRC0/include/config" ] && r=0
    runner_check run/source-tree-untouched "$r" "written in $SRC0: $(tr '\n' ' ' <<<"$n")"
fi
runner_end
exit
}
