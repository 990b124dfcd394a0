#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# One dropout scenario on one kernel, with a verdict:
#
#   scripts/kernel/scenario.sh SCENARIO        (make scenario SCENARIO=...)
#   scripts/kernel/scenario.sh --list
#
# The kernel: KERNEL_SRC=/path/to/linux (built by scripts/kernel/build.sh,
# KERNEL_BUILTIN=1 for built-in drivers), KERNEL_PACKAGE=SPEC (a Debian
# linux-image .deb or package spec), or what the harness takes already
# (KERNEL, KERNEL_IMAGE/KERNEL_MODULES); default: the host release's kernel.
#
# Scenarios (each one guest boot of an existing runner):
#   zlp-merge     tests/guest/dropout-run.sh with the DisplayLink ids
#                 (0x17e9) and dwNtbOutMaxSize 32768, the ZLP-required
#                 firmware model, guest tx_max = 32768: a kernel without
#                 cdc_ncm's 0x17e9 SEND ZLP quirk pads NTBs to packet
#                 multiples that merge in the device (datagrams lost)
#   zlp-merge-64  the same at 65536 (kernels before 6.0 cap tx_max at 32 KiB)
#   reenum        run-pm-test.sh replug xhci: 2 s off the bus under traffic
#   autosuspend   run-pm-test.sh suspend xhci, ncm.pm=auto: suspend when
#                 idle, a frame from the host wakes it
#   s3            run-pm-test.sh suspend xhci-hs, ncm.pm=s3: suspend to RAM
#                 and back, traffic before and after
#   multicast     run-pm-test.sh mcast xhci: IPv6 link-local ping,
#                 neighbour discovery, a router advertisement
#   resize64      run-pm-test.sh ntbsweep xhci: rx_max/tx_max rewritten on
#                 the running interface to 16, 32 and 64 KiB, iperf3 each
#                 way at each size, nothing lost in the device
#
# Exit status: 0 no dropout, 1 dropout reproduced, 125 could not test (the
# kernel did not build, the guest did not boot or cdc_ncm did not bind,
# QEMU died) -- git bisect run's "skip".  The last line on stdout is the
# verdict with the figures that decided it:
#   verdict=0 scenario=zlp-merge kernel=6.1.192-ncm bind="CDC NCM (SEND ZLP)" tx_max=32768 out=... lost=0 ...
# SCENARIO_RESULT=FILE: that line is appended to FILE too.
set -uo pipefail
. "$(dirname "$0")/../setup/common.sh"
. "$NCM_TOP/tests/guest/lib.sh"

SCENARIOS="zlp-merge zlp-merge-64 reenum autosuspend s3 multicast resize64"
case ${1:-} in
--list) tr ' ' '\n' <<<"$SCENARIOS"; exit 0 ;;
-h|--help|"") sed -n '3,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
esac
SCN=$1
case " $SCENARIOS " in
*" $SCN "*) ;;
*) die "unknown scenario '$SCN'" "use one of: $SCENARIOS" ;;
esac

OUT=$NCM_BUILD/scenario
mkdir -p "$OUT"
# verdict RC FIGURES...: the one line, then exit RC
verdict() {
    local rc=$1 line
    shift
    line="verdict=$rc scenario=$SCN kernel=${KVER:-?} $*"
    printf '%s\n' "$line"
    [ -z "${SCENARIO_RESULT:-}" ] || printf '%s\n' "$line" >> "$SCENARIO_RESULT"
    exit "$rc"
}

# the kernel
if [ -n "${KERNEL_SRC:-}" ]; then
    envf=$OUT/.build-env.$$
    if ! bash "$NCM_TOP/scripts/kernel/build.sh" --print-env > "$envf"; then
        rm -f "$envf"
        verdict 125 "why=build-failed src=$KERNEL_SRC"
    fi
    KERNEL_IMAGE=$(sed -n 's/^KERNEL_IMAGE=//p' "$envf")
    KERNEL_MODULES=$(sed -n 's/^KERNEL_MODULES=//p' "$envf")
    BUILD_S=$(sed -n 's/^KERNEL_BUILD_SECONDS=//p' "$envf")
    BUILD_DIR=$(sed -n 's/^KERNEL_BUILD_DIR=//p' "$envf")
    rm -f "$envf"
    export KERNEL_IMAGE KERNEL_MODULES
    LABEL=src-$(basename "$BUILD_DIR")
elif [ -n "${KERNEL_PACKAGE:-}" ]; then
    export KERNEL=$KERNEL_PACKAGE
    LABEL=pkg-$(basename "$KERNEL_PACKAGE" .deb)
else
    LABEL=${KERNEL:-default}
    [ -z "${KERNEL_IMAGE:-}" ] || LABEL=img-$(sha256sum < "$KERNEL_IMAGE" | cut -c1-8)
fi
LABEL=$(printf '%s' "$LABEL" | sed 's|[^A-Za-z0-9._-]|_|g' | cut -c1-60)
NAME=scn-$SCN-$LABEL

# the guest image (also tells the kernel version)
if ! bash "$NCM_TOP/tests/guest/image.sh" > "$OUT/$NAME.image.log" 2>&1; then
    verdict 125 "why=guest-image-failed log=${OUT#"$NCM_TOP"/}/$NAME.image.log"
fi
KVER=$(sed -n 's/.*kernel: .*(\(.*\))$/\1/p' "$OUT/$NAME.image.log" | tail -n1)

RUNLOG=$OUT/$NAME.run.log
PM=$NCM_TOP/tests/guest/run-pm-test.sh
# not_tested LOG: why the run could not test anything (empty: it could)
not_tested() {
    local f=$1 e
    [ -f "$f" ] || { echo "no-log"; return; }
    grep -aq 'NCMTEST phase=boot' "$f" || {
        e=$(grep -a -m1 -oE 'Kernel panic[^\r]*' "$f" | tr ' ' _ | cut -c1-60)
        echo "no-boot${e:+:$e}"; return; }
    e=$(guest_qemu_error "$f")
    [ -z "$e" ] || { echo "qemu-died:$(tr ' ' _ <<<"$e" | cut -c1-60)"; return; }
    return 0
}
# failed CHECK...: which of these checks FAILed in the runner's output
# (a check that is missing counts as failed)
failed() {
    local c f=""
    for c in "$@"; do
        grep -q "^PASS: .*/$c\$" "$RUNLOG" || f="$f${f:+,}$c"
    done
    printf '%s' "$f"
}
pm_verdict() {
    local log=$1 figures=$2 why bad
    shift 2
    why=$(not_tested "$log")
    [ -z "$why" ] || verdict 125 "why=$why log=${log#"$NCM_TOP"/}"
    grep -q '^PASS: .*/driver$' "$RUNLOG" ||
        verdict 125 "why=cdc_ncm-did-not-bind driver=$(guest_val "$log" driver) log=${log#"$NCM_TOP"/}"
    bad=$(failed "$@")
    if [ -n "$bad" ]; then
        verdict 1 "failed=$bad $figures log=${log#"$NCM_TOP"/}"
    fi
    verdict 0 "$figures log=${log#"$NCM_TOP"/}"
}

step "scenario $SCN on ${KVER:-?} ($LABEL)${BUILD_S:+, kernel build ${BUILD_S}s}"
case $SCN in
zlp-merge|zlp-merge-64)
    props=""
    [ "$SCN" = zlp-merge ] && props=",ntb-out-max-size=32768"
    LOG=$NCM_BUILD/dropout-logs/$NAME.log
    rm -f "$LOG" "$LOG".*
    IPERF_TIME=${IPERF_TIME:-8} bash "$NCM_TOP/tests/guest/dropout-run.sh" "$NAME" "$props" \
        > "$RUNLOG" 2>&1
    why=$(not_tested "$LOG")
    [ -z "$why" ] || verdict 125 "why=$why log=${LOG#"$NCM_TOP"/}"
    [ -s "$LOG.stats.json" ] || verdict 125 "why=no-device-counters log=${LOG#"$NCM_TOP"/}"
    bind=$(guest_val "$LOG" dmesg | grep -o 'CDC NCM[^:,]*' | head -n1)
    [ -n "$bind" ] || verdict 125 "why=cdc_ncm-did-not-bind log=${LOG#"$NCM_TOP"/}"
    lost=$(guest_stat "$LOG" out_merge_lost_datagrams)
    ovf=$(guest_stat "$LOG" out_overflow_bytes)
    merged=$(guest_stat "$LOG" out_merged_transfers)
    out=$(guest_stat "$LOG" out_datagrams)
    up=$(guest_val "$LOG" iperf_up_receiver_mbps)
    uprc=$(guest_val "$LOG" iperf_up_rc)
    fig="bind=\"$bind\" tx_max=$(guest_val "$LOG" after.cdc_ncm.tx_max) out=${out:-?} merged=${merged:-?} lost=${lost:-?} overflow_bytes=${ovf:-?} up_mbps=${up:-?} up_rc=${uprc:-?} log=${LOG#"$NCM_TOP"/}"
    if [ "${lost:-0}" != 0 ] || [ "${ovf:-0}" != 0 ] || [ "${uprc:-1}" != 0 ]; then
        verdict 1 "$fig"
    fi
    verdict 0 "$fig"
    ;;
reenum)
    LOG=$NCM_BUILD/guest-logs/$NAME.log
    LOG_NAME=$NAME bash "$PM" replug xhci > "$RUNLOG" 2>&1
    v() { guest_val "$LOG" "$1"; }
    pm_verdict "$LOG" "configured_s=$(v replug_configured_s) ping_lost=$(v replug_ping_lost)/$(v replug_ping_sent) recover_s=$(v replug_ping_recover_s) tcp_last3_live=$(v replug_iperf_last3_live)" \
        unbind rebind address ping-recovers tcp-recovers
    ;;
autosuspend)
    LOG=$NCM_BUILD/guest-logs/$NAME.log
    LOG_NAME=$NAME NCM_APPEND="ncm.pm=auto" bash "$PM" suspend xhci > "$RUNLOG" 2>&1
    v() { guest_val "$LOG" "$1"; }
    pm_verdict "$LOG" "suspended=$(v auto_suspended) suspend_s=$(v auto_suspend_s) wake_rx=$(v auto_wake_rx) wake_s=$(v auto_wake_s) status_after=$(v auto_status_after)" \
        autosuspend wake-on-frame ping-after-autosuspend
    ;;
s3)
    LOG=$NCM_BUILD/guest-logs/$NAME.log
    LOG_NAME=$NAME NCM_APPEND="ncm.pm=s3" bash "$PM" suspend xhci-hs > "$RUNLOG" 2>&1
    v() { guest_val "$LOG" "$1"; }
    grep -q '^PASS: .*/s3-suspended$' "$RUNLOG" || [ -n "$(not_tested "$LOG")" ] ||
        verdict 125 "why=guest-did-not-suspend s3_rc=\"$(v s3_rc)\" log=${LOG#"$NCM_TOP"/}"
    pm_verdict "$LOG" "back_s=$(v s3_back_s) ping_loss_pct=$(v s3_ping_loss_pct) down_before_mbps=$(v iperf_s3_before_receiver_mbps) down_after_mbps=$(v iperf_s3_after_receiver_mbps)" \
        s3-traffic-before s3-interface-back s3-traffic-after
    ;;
multicast)
    LOG=$NCM_BUILD/guest-logs/$NAME.log
    LOG_NAME=$NAME bash "$PM" mcast xhci > "$RUNLOG" 2>&1
    v() { guest_val "$LOG" "$1"; }
    pm_verdict "$LOG" "ll_ping=\"$(v mcast_ll_ping)\" ra=$(v mcast_ra) allmulti=$(v mcast_allmulti)" \
        ll-ping neighbour router-advert
    ;;
resize64)
    LOG=$NCM_BUILD/guest-logs/$NAME.log
    LOG_NAME=$NAME IPERF_TIME=${IPERF_TIME:-5} bash "$PM" ntbsweep xhci > "$RUNLOG" 2>&1
    v() { guest_val "$LOG" "$1"; }
    lost=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["stats"]["final"]["out_merge_lost_datagrams"])' "$LOG.cues.json" 2>/dev/null)
    pm_verdict "$LOG" "rx_max=$(v ntb_65536_rx_max) tx_max=$(v ntb_65536_tx_max) up_mbps=$(v iperf_up_65536_receiver_mbps) down_mbps=$(v iperf_down_65536_receiver_mbps) lost=${lost:-?}" \
        iperf-up-65536 iperf-down-65536 nothing-lost
    ;;
esac
