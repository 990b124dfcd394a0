#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The DisplayLink dropout model under a real Linux guest, asserted from the
# guest's view and the device counters:
#   dl         SEND ZLP: nothing lost, light or heavy traffic;
#   generic32  NO ZLP, dwNtbOutMaxSize 32768: light traffic passes, load
#              pads NTBs to exact packet multiples that merge and vanish;
#   generic    NO ZLP, dwNtbOutMaxSize 65536: Linux's min_tx_pkt wraps to 0
#              (u16 clamp), every NTB is padded, every transfer merges.
set -uo pipefail
. "$(dirname "$0")/../../scripts/setup/common.sh"
. "$NCM_TOP/tests/guest/lib.sh"

GENERIC=",vendorid=0x46f4,productid=0x0010"
LOGS=$NCM_BUILD/dropout-logs
export IPERF_TIME=${IPERF_TIME:-8}
runner_begin dropout
# each configuration has its log: dl/... in dl.log
runner_why() { echo "; log ${LOGS#"$NCM_TOP"/}/${1%%/*}.log"; }

run() {
    if ! bash "$NCM_TOP/tests/guest/dropout-run.sh" "$1" "$2"; then
        runner_check "$1/run" 1 "the guest run did not complete"
        return 1
    fi
}

if run dl ""; then
    L=$LOGS/dl.log
    info=$(guest_val "$L" dmesg)
    lost=$(guest_stat "$L" out_merge_lost_datagrams)
    over=$(guest_stat "$L" out_overflow_bytes)
    sent=$(guest_stat "$L" out_datagrams)
    r=1; [[ $info == *"CDC NCM (SEND ZLP)"* ]] && r=0
    runner_check dl/send-zlp "$r" "$info"
    r=1; [ "$(guest_val "$L" after.cdc_ncm.tx_max)" = 65536 ] && r=0
    runner_check dl/tx-max-is-out-max "$r" \
        "tx_max $(guest_val "$L" after.cdc_ncm.tx_max)"
    r=1; [ "$lost" = 0 ] && [ "$over" = 0 ] && r=0
    runner_check dl/no-datagram-lost "$r" \
        "merge-lost $lost, overflow bytes $over"
    r=1; [ "$(guest_val "$L" ping_loss_pct)" = 0 ] && r=0
    runner_check dl/light-traffic "$r" \
        "ping loss $(guest_val "$L" ping_loss_pct)%"
    r=1; [ "$(guest_val "$L" iperf_up_rc)" = 0 ] && [ "${sent:-0}" -gt 10000 ] && r=0
    runner_check dl/heavy-traffic "$r" \
        "iperf up rc $(guest_val "$L" iperf_up_rc), $sent datagrams out"
fi

if run generic32 "$GENERIC,ntb-out-max-size=32768"; then
    L=$LOGS/generic32.log
    info=$(guest_val "$L" dmesg)
    lost=$(guest_stat "$L" out_merge_lost_datagrams)
    merged=$(guest_stat "$L" out_merged_transfers)
    r=1; [[ $info == *"CDC NCM (NO ZLP)"* ]] && r=0
    runner_check generic32/no-zlp "$r" "$info"
    r=1; [ "$(guest_val "$L" ping_loss_pct)" = 0 ] && r=0
    runner_check generic32/light-traffic-passes "$r" \
        "ping loss $(guest_val "$L" ping_loss_pct)%"
    r=1; [ "${lost:-0}" -gt 0 ] && [ "${merged:-0}" -gt 0 ] && r=0
    runner_check generic32/load-loses-merged-datagrams "$r" \
        "merged transfers $merged, datagrams lost $lost"
    r=1; [ "$(guest_val "$L" iperf_up_retr)" -gt 0 ] 2>/dev/null && r=0
    runner_check generic32/guest-retransmits "$r" \
        "iperf up retransmits $(guest_val "$L" iperf_up_retr)"
fi

if run generic "$GENERIC"; then
    L=$LOGS/generic.log
    sent=$(guest_stat "$L" out_datagrams)
    over=$(guest_stat "$L" out_overflow_bytes)
    r=1; [ "$(guest_val "$L" after.cdc_ncm.min_tx_pkt)" = 0 ] && r=0
    runner_check generic/min-tx-pkt-wraps-to-0 "$r" \
        "min_tx_pkt $(guest_val "$L" after.cdc_ncm.min_tx_pkt)"
    r=1; [ "${sent:-1}" = 0 ] && [ "${over:-0}" -gt 0 ] && r=0
    runner_check generic/every-transfer-merges "$r" \
        "out datagrams $sent, overflow bytes $over"
fi

runner_end
