#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# make series: this repo in upstream shape, a `git format-patch` series
# against the QEMU tree `make` builds with (QEMU_VERSION / QEMU_SRC pick it,
# as for the build).
#
#   scripts/upstream/make-series.sh [--verify]
#
# patches/series/NN-*.txt say what each commit holds and why, in order
# (patches/series/<line>/NN-*.txt replaces one for trees of that line):
#   # files: <overlay files the commit adds>
#   # patches: <patches/ names it applies, the variant that fits the tree>
#   # maintainers: entry        (the commit that adds the MAINTAINERS entry)
#   <commit message>
# Every overlay file (but include/hw/usb/ncm-compat.h) and every patch must
# be in exactly one commit.  ncm-compat.h is not submitted: its #include is
# dropped and its types are spelled the way the tree needs them.
#
# The commits are made in a scratch git repository holding the pristine
# tree (build/.../series-tree), signed off by the git identity of whoever
# runs this, and written with a cover letter to build/.../series/.  Each
# patch then goes through the tree's scripts/checkpatch.pl.
#
# Each file's MAINTAINERS line goes in the patch that adds the file (the
# first such patch creates the entry): checkpatch warns "Does MAINTAINERS
# need updating?" for every patch that adds files without touching
# MAINTAINERS, so only this form is free of warnings.
# SERIES_MAINTAINERS=separate makes one MAINTAINERS patch instead (the
# "# maintainers: entry" commit) and accepts that warning before it.
#
# --verify: `git am` the series onto a fresh copy of the pristine tree
# (build/.../series-verify), build qemu-system-x86_64 (and the unit tests,
# libqos and the qtest once they exist) at every commit, run the unit tests
# and list the qtest's cases at the end; then run QEMU's own qtests on the
# last commit (SERIES_QEMU_TESTS: qos-test, usb-hcd-{uhci,ehci,xhci}-test,
# qom-test, device-introspect-test, test-hmp, migration-test, and the
# series' own usb-core-test, usb-core-migration-test, migration-query-test,
# netdev-zero-length-test).
set -euo pipefail
. "$(dirname "$0")/../setup/common.sh"
# the series tree is built as upstream builds it for x86_64: that target
# alone, QEMU's default devices
NCM_QEMU_TARGETS=x86_64
NCM_QEMU_DEVICES=""
. "$NCM_TOP/scripts/setup/qemu-tree.sh"

verify=0
case ${1:-} in
--verify) verify=1 ;;
"") ;;
*) die "unknown argument '$1'" "usage: scripts/upstream/make-series.sh [--verify]" ;;
esac

SERIES_SRC=$NCM_TOP/patches/series
OUT=$NCM_BUILD/series
TREE=$NCM_BUILD/series-tree/qemu-src
MAINT_MODE=${SERIES_MAINTAINERS:-each}
MAINT_TITLE="USB (CDC-NCM network adapter)"
case $MAINT_MODE in
separate|each) ;;
*) die "SERIES_MAINTAINERS=$MAINT_MODE" "use each (default) or separate" ;;
esac

name=$(git -C "$NCM_TOP" config user.name || true)
email=$(git -C "$NCM_TOP" config user.email || true)
[ -n "$name" ] && [ -n "$email" ] ||
    die "git user.name and user.email must be set: the Signed-off-by lines are yours" \
        "git config --global user.name 'Your Name'" \
        "git config --global user.email you@example.org"
export GIT_AUTHOR_NAME=$name GIT_AUTHOR_EMAIL=$email
export GIT_COMMITTER_NAME=$name GIT_COMMITTER_EMAIL=$email
# The same repo commit gives the same series, byte for byte.
GIT_AUTHOR_DATE=$(git -C "$NCM_TOP" log -1 --format=%aD 2>/dev/null || date -R)
export GIT_AUTHOR_DATE GIT_COMMITTER_DATE=$GIT_AUTHOR_DATE

pristine=$(bash "$NCM_TOP/scripts/setup/fetch-qemu.sh")
version=$(cat "$pristine/VERSION")

# --- what goes where --------------------------------------------------------

# patches/series/<line>/NN-*.txt, when there is one, replaces NN-*.txt for
# trees of that line (a patch that does less there says so).
line=$(qemu_line "$pristine")
entries=()
for e in "$SERIES_SRC"/[0-9][0-9]-*.txt; do
    [ -f "$e" ] || continue
    if [ -f "$SERIES_SRC/$line/$(basename "$e")" ]; then
        e=$SERIES_SRC/$line/$(basename "$e")
    fi
    entries+=("$e")
done
[ "${#entries[@]}" -gt 0 ] || die "no commit descriptions in $SERIES_SRC"

meta() {    # meta FILE KEY: the value of "# KEY: value" in FILE's header
    sed -n "/^# /!q; s/^# $2: *//p" "$1"
}
message() { # message FILE: the commit message
    sed '/^# /d' "$1"
}

problems=()
declare -A file_owner patch_owner
for e in "${entries[@]}"; do
    for f in $(meta "$e" files); do
        [ -f "$NCM_TOP/$f" ] || problems+=("$(basename "$e"): no file $f")
        [ -z "${file_owner[$f]:-}" ] ||
            problems+=("$f is in ${file_owner[$f]} and $(basename "$e")")
        file_owner[$f]=$(basename "$e")
    done
    for p in $(meta "$e" patches); do
        [ -n "$(patch_candidates "$line" "$p")" ] ||
            problems+=("$(basename "$e"): no patch $p in patches/")
        [ -z "${patch_owner[$p]:-}" ] ||
            problems+=("$p is in ${patch_owner[$p]} and $(basename "$e")")
        patch_owner[$p]=$(basename "$e")
    done
done
for f in $(overlay_files); do
    case " $NCM_OVERLAY_ONLY " in *" $f "*) continue ;; esac
    [ -n "${file_owner[$f]:-}" ] ||
        problems+=("$f is built but in no commit: add it to a '# files:' line")
done
for p in $(patch_names); do
    [ -n "${patch_owner[$p]:-}" ] ||
        problems+=("patches/$p is applied but in no commit: add it to a '# patches:' line")
done
if [ "${#problems[@]}" -gt 0 ]; then
    printf 'ERROR: patches/series/ does not describe the overlay:\n' >&2
    printf '  -> %s\n' "${problems[@]}" >&2
    exit 1
fi
series_files=$(printf '%s\n' "${!file_owner[@]}" | LC_ALL=C sort)

# --- the scratch repository ---------------------------------------------------

if [ "$(cat "$TREE/.git/ncm-pristine" 2>/dev/null)" = "$pristine" ]; then
    git -C "$TREE" checkout -q -f -B series pristine
    git -C "$TREE" clean -q -fdx
else
    step "making a git repository of $pristine ($version)"
    rm -rf "$(dirname "$TREE")"
    mkdir -p "$(dirname "$TREE")"
    cp -a "$pristine" "$TREE"
    # Debian's packaging is not QEMU's (its patches, which touch none of
    # the files the series does, stay applied).
    rm -rf "$TREE/.git" "$TREE/debian" "$TREE/.pc"
    git -C "$TREE" init -q
    git -C "$TREE" config core.autocrlf false
    git -C "$TREE" add -A -f .
    git -C "$TREE" commit -q --no-verify -m "QEMU $version"
    git -C "$TREE" tag pristine
    git -C "$TREE" checkout -q -B series pristine
    echo "$pristine" >"$TREE/.git/ncm-pristine"
fi

class_data="void"
qemu_version_ge "$pristine" 10 1 && class_data="const void"
# NCM_VMSTATE_SAVE/LOAD: vmstate_*_state() with an Error ** since 10.1
vm_errp=""
qemu_version_ge "$pristine" 10 1 && vm_errp=", NULL"

# put_file PATH: copy an overlay file into the tree, compat header resolved
put_file() {
    local f=$1 dst=$TREE/$1
    mkdir -p "$(dirname "$dst")"
    sed -e '/^#include "hw\/usb\/ncm-compat.h"$/d' \
        -e "s/\\bNcmClassInitData\\b/$class_data/g" \
        -e "s/\\bNCM_VMSTATE_SAVE(\\([^()]*\\))/vmstate_save_state(\\1, NULL$vm_errp)/g" \
        -e "s/\\bNCM_VMSTATE_LOAD(\\([^()]*\\))/vmstate_load_state(\\1$vm_errp)/g" \
        "$NCM_TOP/$f" >"$dst"
    if grep -n 'ncm-compat\|NcmClassInitData\|NCM_VMSTATE_' "$dst" >&2; then
        die "$f still uses include/hw/usb/ncm-compat.h after the rewrite" \
            "teach put_file in scripts/upstream/make-series.sh the new compat type"
    fi
}

# maintainers FILE...: the MAINTAINERS entry listing FILEs, new or updated
maintainers() {
    python3 - "$TREE/MAINTAINERS" "$MAINT_TITLE" "$name <$email>" "$@" <<'EOF'
import sys
path, title, who, files = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
lines = open(path, encoding='utf-8').read().split('\n')
if title in lines:                      # drop the entry made earlier
    i = lines.index(title)
    j = lines.index('', i)
    del lines[i:j + 1]
anchor = 'USB (serial adapter)'         # the entry ours sorts before
if anchor not in lines:
    sys.exit('MAINTAINERS has no "%s" entry to put ours before' % anchor)
entry = [title, 'M: ' + who, 'S: Maintained']
entry += ['F: ' + f for f in sorted(files)] + ['']
i = lines.index(anchor)
lines[i:i] = entry
open(path, 'w', encoding='utf-8').write('\n'.join(lines))
EOF
}

# --- the commits --------------------------------------------------------------

step "committing the series on QEMU $version (signed off by $name <$email>)"
added=()
n=0
for e in "${entries[@]}"; do
    files=$(meta "$e" files)
    patches=$(meta "$e" patches)
    is_maint=$(meta "$e" maintainers)
    if [ -n "$is_maint" ] && [ "$MAINT_MODE" = each ]; then
        continue
    fi
    msg=$(message "$e")
    for f in $files; do
        put_file "$f"
        added+=("$f")
    done
    for p in $patches; do
        used=$(apply_patch "$TREE" "$p") ||
            die "$p does not apply at $(basename "$e") on QEMU $version"
        note "$(basename "$e"): $used"
    done
    if [ -n "$is_maint" ]; then
        # shellcheck disable=SC2086
        maintainers $series_files || die "could not add the MAINTAINERS entry"
    elif [ "$MAINT_MODE" = each ] && [ -n "$files" ]; then
        maintainers "${added[@]}" || die "could not update MAINTAINERS"
        msg="$msg

$(if [ "${#added[@]}" = "$(echo "$files" | wc -w)" ]; then
    echo "Add a MAINTAINERS entry for the new files."
else
    echo "List the new files in the MAINTAINERS entry."
fi)"
    fi
    git -C "$TREE" add -A .
    if git -C "$TREE" diff --cached --quiet; then
        # only variants without hunks: this tree has the change already
        note "$(basename "$e"): nothing to commit on QEMU $version"
        continue
    fi
    git -C "$TREE" commit -q --no-verify -s -F - <<<"$msg"
    n=$((n + 1))
done

# What is submitted is what was built and tested: compare with the build's
# tree when it was made from the same pristine tree.
built=$NCM_BUILD/qemu-src
if [ "$(cat "$built/.copied-from" 2>/dev/null)" = "$pristine" ]; then
    stale=()
    for f in $series_files $(patch_touched); do
        # (the compat header's users are rewritten on their way in)
        [ -f "$NCM_TOP/$f" ] && grep -q 'ncm-compat\.h' "$NCM_TOP/$f" && continue
        cmp -s "$TREE/$f" "$built/$f" || stale+=("$f")
    done
    if [ "${#stale[@]}" -gt 0 ]; then
        note "differs from the last build ($built): ${stale[*]}"
        note "run 'make' (QEMU_VERSION=$QEMU_VERSION) so that the build is what you send"
    else
        note "the series' final tree matches the build in $built"
    fi
else
    note "no build from $pristine to compare with; run 'make' to test it"
fi

# --- format-patch and checkpatch ------------------------------------------

cover=$(sed "s/@QEMU_VERSION@/$version/g" "$SERIES_SRC/cover.txt")
git -C "$TREE" config branch.series.description "$cover"
rm -rf "$OUT"
mkdir -p "$OUT"
git -C "$TREE" format-patch -q -o "$OUT" --cover-letter \
    --cover-from-description=subject pristine..series
step "wrote $n patches and a cover letter to $OUT"

checkpatch_fail=0
maint_seen=0
for p in "$OUT"/0*.patch; do
    case $p in */0000-cover-letter.patch) continue ;; esac
    base=$(basename "$p")
    grep -q '^+++ b/MAINTAINERS' "$p" && maint_seen=1
    out=$(cd "$TREE" && perl scripts/checkpatch.pl "$p" 2>&1) || true
    total=$(grep -m1 '^total:' <<<"$out" || echo "total: ? (checkpatch failed)")
    warns=$(grep -c '^WARNING' <<<"$out" || true)
    errs=$(grep -c '^ERROR' <<<"$out" || true)
    maint_warn=$(grep -c '^WARNING: added, moved or deleted file' <<<"$out" ||
                 true)
    if [ "$errs" = 0 ] && [ "$warns" = 0 ] && grep -q '^total: 0 errors, 0 warnings' <<<"$out"; then
        echo "PASS: series/$base ($total)"
    elif [ "$errs" = 0 ] && [ "$warns" = "$maint_warn" ] && [ "$maint_seen" = 0 ]; then
        echo "PASS: series/$base ($total: only 'Does MAINTAINERS need updating?'," \
             "answered by the MAINTAINERS patch)"
    else
        echo "FAIL: series/$base ($total)"
        grep -E '^(ERROR|WARNING)' -A3 <<<"$out" | head -n 20 | sed 's/^/    | /'
        checkpatch_fail=1
    fi
done

[ "$verify" = 1 ] || {
    [ "$checkpatch_fail" = 0 ] || die "checkpatch found problems (above)"
    step "series ready: $OUT (git send-email $OUT/*.patch)"
    exit 0
}

# --- verify: git am onto a clean tree, build every commit ----------------

VER=$NCM_BUILD/series-verify
VSRC=$VER/qemu-src
VOBJ=$VER/qemu
step "verifying: git am onto a clean QEMU $version in $VSRC"
rm -rf "$VSRC"
mkdir -p "$VER"
git clone -q --no-checkout "$TREE" "$VSRC"
git -C "$VSRC" checkout -q -b verify pristine
[ -z "$(git -C "$VSRC" status --porcelain)" ] || die "$VSRC is not clean"
mapfile -t series_patches < <(ls "$OUT"/0*.patch | grep -v '/0000-cover-letter')
git -C "$VSRC" am -q --whitespace=error "${series_patches[@]}" ||
    die "git am of $OUT onto QEMU $version failed"
note "git am: $(git -C "$VSRC" rev-list --count pristine..HEAD) patches applied"
# the last commit's tree must be the one the series was made from
[ "$(git -C "$VSRC" rev-parse 'HEAD^{tree}')" = \
  "$(git -C "$TREE" rev-parse 'series^{tree}')" ] ||
    die "the applied series differs from the tree it was made from"

export CCACHE_BASEDIR=$VER CCACHE_NOHASHDIR=1
mapfile -t commits < <(git -C "$VSRC" rev-list --reverse pristine..HEAD)
verify_fail=0
i=0
for c in "${commits[@]}"; do
    i=$((i + 1))
    subject=$(git -C "$VSRC" log -1 --format=%s "$c")
    git -C "$VSRC" checkout -q "$c"
    qemu_obj_forget_moved "$VOBJ"
    if [ ! -f "$VOBJ/build.ninja" ]; then
        qemu_configure "$VSRC" "$VOBJ" "$VER/configure.log" ||
            die "configure of the series tree failed (log: $VER/configure.log)"
    fi
    # regenerate build.ninja first if meson.build or Kconfig changed, so
    # that the targets this commit adds are known
    ninja -C "$VOBJ" build.ninja >"$VER/build-$i.log" 2>&1 || true
    targets=qemu-system-x86_64
    for t in tests/unit/test-ncm-ntb tests/unit/test-ncm-function \
             tests/qtest/libqos/libqos.a tests/qtest/usb-ncm-dl-test; do
        ninja -C "$VOBJ" -t query "$t" >/dev/null 2>&1 && targets="$targets $t"
    done
    if ninja -C "$VOBJ" $targets >>"$VER/build-$i.log" 2>&1; then
        echo "PASS: series-build/$i $subject ($targets)"
    else
        echo "FAIL: series-build/$i $subject (log: $VER/build-$i.log)"
        grep -m5 -E 'error|FAILED' "$VER/build-$i.log" | sed 's/^/    | /'
        verify_fail=1
    fi
done
for t in test-ncm-ntb test-ncm-function; do
    [ -x "$VOBJ/tests/unit/$t" ] || continue
    if "$VOBJ/tests/unit/$t" --tap >"$VER/$t.log" 2>&1; then
        echo "PASS: series-unit/$t ($(grep -c '^ok ' "$VER/$t.log") cases)"
    else
        echo "FAIL: series-unit/$t (log: $VER/$t.log)"
        verify_fail=1
    fi
done
if [ -x "$VOBJ/tests/qtest/usb-ncm-dl-test" ]; then
    cases=$(QTEST_QEMU_BINARY=$VOBJ/qemu-system-x86_64 \
            "$VOBJ/tests/qtest/usb-ncm-dl-test" -l 2>/dev/null | grep -c '^/' || true)
    if [ "${cases:-0}" -gt 0 ]; then
        echo "PASS: series-qtest-list ($cases cases in tests/qtest/usb-ncm-dl-test)"
    else
        echo "FAIL: series-qtest-list (the qtest lists no case)"
        verify_fail=1
    fi
fi
# QEMU's own suites with the whole series applied: what a maintainer
# runs for a USB device, and what every device must pass (introspection,
# QOM, HMP, migration); then the core tests the series adds with its
# core patches.  SERIES_QEMU_TESTS picks others; "none" skips.
qemu_tests=${SERIES_QEMU_TESTS:-qos-test usb-hcd-uhci-test usb-hcd-ehci-test \
usb-hcd-xhci-test qom-test device-introspect-test test-hmp migration-test \
usb-core-test usb-core-migration-test migration-query-test \
netdev-zero-length-test}
if [ "$qemu_tests" != none ]; then
    mkdir -p "$VER/qemu-tests"
    read -r -a qts <<<"$qemu_tests"
    build=()
    # (qemu-img for the tests that make images, where the tree builds it)
    if ninja -C "$VOBJ" -t query qemu-img >/dev/null 2>&1; then
        build+=(qemu-img)
    fi
    for t in "${qts[@]}"; do
        build+=("tests/qtest/$t")
    done
    step "QEMU's own suites on the series: building ${qts[*]}"
    if ! ninja -C "$VOBJ" "${build[@]}" >"$VER/qemu-tests/build.log" 2>&1; then
        echo "FAIL: series-qemu-tests/build (log: $VER/qemu-tests/build.log)"
        grep -m5 -E 'error|FAILED|unknown target' "$VER/qemu-tests/build.log" |
            sed 's/^/    | /' || true
        verify_fail=1
    else
        # The Debian source has no firmware blobs: the machines' BIOS and
        # option ROMs come from the seabios, qemu-system-data and ipxe-qemu
        # packages, linked where the binary looks for its data files (its
        # qemu-bundle), as QEMU's own tests start it without -L
        share=$VOBJ/qemu-bundle/usr/local/share/qemu
        mkdir -p "$share"
        for f in /usr/share/seabios/*.bin /usr/share/qemu/*.bin \
                 /usr/lib/ipxe/qemu/*.rom; do
            if [ -e "$f" ] && [ ! -e "$share/${f##*/}" ]; then
                ln -s "$f" "$share/"
            fi
        done
        for t in "${qts[@]}"; do
            log=$VER/qemu-tests/$t.log
            t0=$SECONDS
            step "QEMU's $t (log: ${log#"$NCM_TOP"/})"
            rc=0
            env=(QTEST_QEMU_BINARY="$VOBJ/qemu-system-x86_64")
            [ -x "$VOBJ/qemu-img" ] && env+=(QTEST_QEMU_IMG="$VOBJ/qemu-img")
            env "${env[@]}" \
                timeout --kill-after=10 "${SERIES_QEMU_TEST_TIMEOUT:-1800}" \
                "$VOBJ/tests/qtest/$t" --tap -k >"$log" 2>&1 || rc=$?
            ok=$(grep -c '^ok ' "$log" || true)
            bad=$(grep -c '^not ok ' "$log" || true)
            if [ "$rc" = 0 ] && [ "$bad" = 0 ] && [ "$ok" -gt 0 ]; then
                echo "PASS: series-qemu-tests/$t ($ok cases, $((SECONDS - t0)) s)"
            else
                echo "FAIL: series-qemu-tests/$t (exit $rc, $ok ok," \
                     "$bad not ok; log: $log)"
                grep -m3 '^not ok ' "$log" | sed 's/^/    | /' || true
                verify_fail=1
            fi
        done
    fi
fi
[ "$checkpatch_fail" = 0 ] && [ "$verify_fail" = 0 ] ||
    die "the series has problems (FAIL lines above)"
step "series ready and verified: $OUT"
