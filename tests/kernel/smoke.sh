#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The short checks of the kernel developer's loop (suite "kernel" of make
# check; the long one is tests/kernel/kernel-loop.sh, make check-kernel-loop):
#   bisect/*     scripts/kernel/bisect.sh over a small git history made
#                here, with a fake scenario that reads the planted quirk
#                line: it must name the planted commit (a regression), then
#                the commit that puts it back (a fix, OLD/NEW), skip an
#                untestable commit, and leave the tree as it found it each
#                time -- also when it is killed in the middle
#   scenario/*   scenario.sh's list, and verdict 125 for a tree that does
#                not build
#   config/*     the fragments against a Linux tree (KERNEL_SRC, else the
#                one scripts/kernel/fetch-source.sh unpacked): allnoconfig +
#                fragments must take every option, modules and built-in;
#                SKIP without a tree
set -uo pipefail
. "$(dirname "$0")/../../scripts/setup/common.sh"
. "$NCM_TOP/tests/guest/lib.sh"
runner_begin kernel

W=$(mktemp -d "${TMPDIR:-/tmp}/ncm-kernel-smoke.XXXXXX")
trap 'rm -rf "$W"' EXIT
R=$W/linux
mkdir -p "$R/drivers/net/usb" "$R/Documentation"
g() { git -C "$R" "$@"; }
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.org GIT_COMMITTER_NAME=t \
       GIT_COMMITTER_EMAIL=t@example.org GIT_AUTHOR_DATE='2024-01-01T00:00:00Z' \
       GIT_COMMITTER_DATE='2024-01-01T00:00:00Z'
g init -q -b master
printf 'static const struct usb_device_id cdc_devs[] = {\n\t/* DisplayLink */\n\t{ USB_VENDOR_AND_INTERFACE_INFO(0x17e9, USB_CLASS_COMM, 0x0d, 0), .driver_info = (unsigned long)&cdc_ncm_zlp_info },\n};\n' \
    > "$R/drivers/net/usb/cdc_ncm.c"
echo 0 > "$R/Documentation/n"
g add -A && g commit -q -m "base"
for i in 1 2 3 4 5; do echo $i > "$R/Documentation/n"; g commit -qam "docs $i"; done
sed -i '/0x17e9/d' "$R/drivers/net/usb/cdc_ncm.c"
g commit -qam "cdc_ncm: drop the DisplayLink ZLP quirk"
planted=$(g rev-parse HEAD)
for i in 6 7; do echo $i > "$R/Documentation/n"; g commit -qam "docs $i"; done
touch "$R/SKIPME"; g add SKIPME; g commit -qm "an untestable commit"
g rm -q SKIPME; g commit -qm "testable again"
for i in 8 9 10; do echo $i > "$R/Documentation/n"; g commit -qam "docs $i"; done
git -C "$R" show "$planted^:drivers/net/usb/cdc_ncm.c" > "$R/drivers/net/usb/cdc_ncm.c"
g commit -qam "cdc_ncm: the DisplayLink ZLP quirk again"
fixed=$(g rev-parse HEAD)
for i in 11 12; do echo $i > "$R/Documentation/n"; g commit -qam "docs $i"; done
g checkout -q -b work

# the fake scenario: exit 0 with the quirk, 1 without, 125 on SKIPME
cat > "$W/fake-scenario.sh" <<'SH'
#!/bin/bash
sleep "${FAKE_SLEEP:-0}"
if [ -e "$KERNEL_SRC/SKIPME" ]; then rc=125; else
grep -q 0x17e9 "$KERNEL_SRC/drivers/net/usb/cdc_ncm.c" && rc=0 || rc=1; fi
line="verdict=$rc scenario=$1 kernel=fake lost=$((rc * 42))"
echo "$line"; [ -z "${SCENARIO_RESULT:-}" ] || echo "$line" >> "$SCENARIO_RESULT"
exit $rc
SH
chmod +x "$W/fake-scenario.sh"
export BISECT_SCENARIO_CMD="bash $W/fake-scenario.sh"

# tree_as_found: no bisect state, back on branch work, nothing changed
tree_as_found() {
    [ ! -e "$R/.git/BISECT_START" ] && [ -z "$(g for-each-ref refs/bisect)" ] &&
        [ "$(g symbolic-ref -q HEAD)" = refs/heads/work ] &&
        [ -z "$(g status --porcelain)" ]
}
tree_state() { echo "HEAD $(g symbolic-ref -q HEAD || g rev-parse --short HEAD), bisect refs $(g for-each-ref refs/bisect | wc -l), status '$(g status --porcelain | head -n3 | tr '\n' ' ')'"; }

out=$(KERNEL_SRC=$R GOOD=master~15 BAD=$planted~0 SCENARIO=zlp-merge bash "$NCM_TOP/scripts/kernel/bisect.sh" 2>&1)
rc=$?
r=1; [ "$rc" = 0 ] && grep -q "^first bad commit: $planted cdc_ncm: drop" <<<"$out" && r=0
runner_check bisect/regression-names-planted-commit \
    "$r" \
    "status $rc: $(grep -m1 '^first\|^bisect:\|ERROR' <<<"$out")"
r=1; grep -q "before (.*): verdict=0 .*lost=0" <<<"$out" && grep -q "at .*: verdict=1 .*lost=42" <<<"$out" && r=0
runner_check bisect/figures-on-both-sides \
    "$r" \
    "$(grep -E '^  (before|at)' <<<"$out" | tr '\n' ' ')"
r=1; tree_as_found && r=0
runner_check bisect/tree-reset-after-regression "$r" "$(tree_state)"

# over the untestable commit (skip) to the commit that fixed it: a fix search
out=$(KERNEL_SRC=$R OLD=$planted NEW=work SCENARIO=zlp-merge bash "$NCM_TOP/scripts/kernel/bisect.sh" 2>&1)
rc=$?
r=1; [ "$rc" = 0 ] && grep -q "^first fixed commit: $fixed " <<<"$out" && r=0
runner_check bisect/fix-search-names-fix \
    "$r" \
    "status $rc: $(grep -m1 '^first\|^bisect:\|ERROR' <<<"$out")"
r=1; tree_as_found && r=0
runner_check bisect/tree-reset-after-fix "$r" "$(tree_state)"

# same verdict at both ends: no bisect, status 1
out=$(KERNEL_SRC=$R GOOD=master~15 BAD=master~12 SCENARIO=zlp-merge bash "$NCM_TOP/scripts/kernel/bisect.sh" 2>&1)
rc=$?
r=1; [ "$rc" = 1 ] && grep -q "does not change" <<<"$out" && tree_as_found && r=0
runner_check bisect/no-change-is-status-1 \
    "$r" "status $rc; $(tree_state)"

# killed in the middle of git bisect run: the trap resets the tree
FAKE_SLEEP=1 KERNEL_SRC=$R GOOD=master~15 BAD=$planted~0 SCENARIO=zlp-merge \
    timeout -s TERM 4 bash "$NCM_TOP/scripts/kernel/bisect.sh" > "$W/killed.out" 2>&1
rc=$?
sleep 1
r=1; [ "$rc" = 124 ] && tree_as_found && r=0
runner_check bisect/tree-reset-when-killed \
    "$r" "timeout status $rc; $(tree_state)"

# a dirty tree is refused, untouched
echo dirty >> "$R/Documentation/n"
out=$(KERNEL_SRC=$R GOOD=master~15 BAD=$planted SCENARIO=zlp-merge bash "$NCM_TOP/scripts/kernel/bisect.sh" 2>&1)
rc=$?
r=1; [ "$rc" != 0 ] && grep -q "uncommitted changes" <<<"$out" && [ "$(g status --porcelain)" = " M Documentation/n" ] && r=0
runner_check bisect/dirty-tree-refused \
    "$r" "status $rc: $out"
g checkout -q -- Documentation/n
unset BISECT_SCENARIO_CMD

# scenario.sh
l=$(bash "$NCM_TOP/scripts/kernel/scenario.sh" --list | paste -sd' ')
r=1; [ "$l" = "zlp-merge zlp-merge-64 reenum autosuspend s3 multicast resize64" ] && r=0
runner_check scenario/list \
    "$r" "$l"
# a tree that does not build (not even a Makefile): 125, and one verdict line
out=$(KERNEL_SRC=$R NCM_BUILD=$W/build bash "$NCM_TOP/scripts/kernel/scenario.sh" zlp-merge 2>/dev/null)
rc=$?
r=1; [ "$rc" = 125 ] && [[ "$(tail -n1 <<<"$out")" == "verdict=125 scenario=zlp-merge "*build-failed* ]] && r=0
runner_check scenario/build-failure-is-125 \
    "$r" \
    "status $rc: $(tail -n1 <<<"$out")"

# the fragments against a real tree
T=${KERNEL_SRC:-$NCM_CACHE/kernel-src/linux-source-6.1}
if [ -f "$T/Makefile" ] && [ -d "$T/drivers/net/usb" ]; then
    for m in 0 1; do
        name=config/x86_64-$([ "$m" = 1 ] && echo builtin || echo modules)
        out=$(KERNEL_SRC=$T KERNEL_BUILTIN=$m bash "$NCM_TOP/scripts/kernel/build.sh" --config-only 2>&1)
        rc=$?
        runner_check "$name" "$rc" \
            "$(grep -E 'warning: config|not taken|ERROR' <<<"$out" | head -n 8 | tr '\n' ';')"
    done
else
    runner_skip "config (no Linux tree at $T: scripts/kernel/fetch-source.sh unpacks one)"
fi
runner_end
