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
nfail=0

check() {
    if [ "$2" = 0 ]; then
        echo "PASS: dropout/$1"
    else
        echo "FAIL: dropout/$1 ($3; log ${LOGS#"$NCM_TOP"/}/${1%%/*}.log)"
        nfail=$((nfail + 1))
    fi
}
t() { if eval "$1"; then echo 0; else echo 1; fi; }

run() {
    if ! bash "$NCM_TOP/tests/guest/dropout-run.sh" "$1" "$2"; then
        check "$1/run" 1 "the guest run did not complete"
        return 1
    fi
}

if run dl ""; then
    L=$LOGS/dl.log
    info=$(guest_val "$L" dmesg)
    lost=$(guest_stat "$L" out_merge_lost_datagrams)
    over=$(guest_stat "$L" out_overflow_bytes)
    sent=$(guest_stat "$L" out_datagrams)
    check dl/send-zlp "$(t '[[ $info == *"CDC NCM (SEND ZLP)"* ]]')" "$info"
    check dl/tx-max-is-out-max \
        "$(t '[ "$(guest_val "$L" after.cdc_ncm.tx_max)" = 65536 ]')" \
        "tx_max $(guest_val "$L" after.cdc_ncm.tx_max)"
    check dl/no-datagram-lost "$(t '[ "$lost" = 0 ] && [ "$over" = 0 ]')" \
        "merge-lost $lost, overflow bytes $over"
    check dl/light-traffic "$(t '[ "$(guest_val "$L" ping_loss_pct)" = 0 ]')" \
        "ping loss $(guest_val "$L" ping_loss_pct)%"
    check dl/heavy-traffic \
        "$(t '[ "$(guest_val "$L" iperf_up_rc)" = 0 ] && [ "${sent:-0}" -gt 10000 ]')" \
        "iperf up rc $(guest_val "$L" iperf_up_rc), $sent datagrams out"
fi

if run generic32 "$GENERIC,ntb-out-max-size=32768"; then
    L=$LOGS/generic32.log
    info=$(guest_val "$L" dmesg)
    lost=$(guest_stat "$L" out_merge_lost_datagrams)
    merged=$(guest_stat "$L" out_merged_transfers)
    check generic32/no-zlp "$(t '[[ $info == *"CDC NCM (NO ZLP)"* ]]')" "$info"
    check generic32/light-traffic-passes \
        "$(t '[ "$(guest_val "$L" ping_loss_pct)" = 0 ]')" \
        "ping loss $(guest_val "$L" ping_loss_pct)%"
    check generic32/load-loses-merged-datagrams \
        "$(t '[ "${lost:-0}" -gt 0 ] && [ "${merged:-0}" -gt 0 ]')" \
        "merged transfers $merged, datagrams lost $lost"
    check generic32/guest-retransmits \
        "$(t '[ "$(guest_val "$L" iperf_up_retr)" -gt 0 ] 2>/dev/null')" \
        "iperf up retransmits $(guest_val "$L" iperf_up_retr)"
fi

if run generic "$GENERIC"; then
    L=$LOGS/generic.log
    sent=$(guest_stat "$L" out_datagrams)
    over=$(guest_stat "$L" out_overflow_bytes)
    check generic/min-tx-pkt-wraps-to-0 \
        "$(t '[ "$(guest_val "$L" after.cdc_ncm.min_tx_pkt)" = 0 ]')" \
        "min_tx_pkt $(guest_val "$L" after.cdc_ncm.min_tx_pkt)"
    check generic/every-transfer-merges \
        "$(t '[ "${sent:-1}" = 0 ] && [ "${over:-0}" -gt 0 ]')" \
        "out datagrams $sent, overflow bytes $over"
fi

[ "$nfail" = 0 ]
