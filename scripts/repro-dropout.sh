#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# make repro-dropout: the DisplayLink network dropouts, reproduced.
#
# The same ZLP-required firmware model is driven by the same Linux guest
# with tx_max raised to dwNtbOutMaxSize, three times:
#   dl         DisplayLink ids: Linux binds "CDC NCM (SEND ZLP)"
#   generic    other ids: "CDC NCM (NO ZLP)", dwNtbOutMaxSize 65536
#   generic32  other ids, dwNtbOutMaxSize 32768
# and prints a side-by-side table of what the guest and the device saw,
# plus a PNG of throughput over time (build/repro-dropout/dropout.png).
set -euo pipefail
. "$(dirname "$0")/common.sh"
. "$NCM_TOP/tests/guest/lib.sh"

OUT=$NCM_BUILD/repro-dropout
GENERIC=",vendorid=0x46f4,productid=0x0010"
RUNS=(dl generic generic32)
declare -A PROPS=([dl]="" [generic]="$GENERIC"
                  [generic32]="$GENERIC,ntb-out-max-size=32768")

bash "$NCM_TOP/scripts/install-deps.sh" build guest bench
bash "$NCM_TOP/scripts/build-qemu.sh"
mkdir -p "$OUT"

i=0
for r in "${RUNS[@]}"; do
    i=$((i + 1))
    step "run $i/${#RUNS[@]}: $r"
    NCM_BUILD=$NCM_BUILD bash "$NCM_TOP/tests/guest/dropout-run.sh" "$r" \
        "${PROPS[$r]}"
done

LOGS=$NCM_BUILD/dropout-logs
val() { guest_val "$LOGS/$1.log" "$2"; }
stat() { guest_stat "$LOGS/$1.log" "$2"; }

row() {
    local label=$1 r
    shift
    printf '%-34s' "$label"
    for r in "${RUNS[@]}"; do
        printf '%-20s' "$("$@" "$r")"
    done
    printf '\n'
}
zlp_mode() { val "$1" dmesg | grep -o 'CDC NCM ([A-Z ]*)' || echo '?'; }
out_max() { val "$1" cdc_ncm.dwNtbOutMaxSize; }
txmax() { val "$1" after.cdc_ncm.tx_max; }
mintx() { val "$1" after.cdc_ncm.min_tx_pkt; }
ping_loss() { echo "$(val "$1" ping_loss_pct)% of 10"; }
iperf() {
    local m rc
    m=$(val "$1" "iperf_${DIR}_receiver_mbps")
    rc=$(val "$1" "iperf_${DIR}_rc")
    if [ "$rc" = 0 ]; then echo "$m Mbit/s"; else echo "failed (rc $rc)"; fi
}
retr() { val "$1" "iperf_${DIR}_retr"; }
counter() { stat "$1" "$COUNTER"; }

{
    echo
    echo "DisplayLink dropout reproduction ($(date -u '+%Y-%m-%d %H:%M UTC'))"
    echo "usb-ncm-dl zlp=required on qemu-xhci, guest tx_max = dwNtbOutMaxSize"
    echo
    row "" echo
    row "Linux driver info" zlp_mode
    row "dwNtbOutMaxSize" out_max
    row "guest tx_max" txmax
    row "guest min_tx_pkt" mintx
    row "ping (light traffic) loss" ping_loss
    for DIR in up down; do
        row "iperf3 $DIR (guest $( [ $DIR = up ] && echo '->' || echo '<-') host)" iperf
        row "  retransmits" retr
    done
    for COUNTER in out_transfers out_ntbs out_datagrams out_zlps \
                   out_merged_transfers out_merge_lost_datagrams \
                   out_overflow_bytes out_parse_errors.total in_datagrams; do
        row "device $COUNTER" counter
    done
    echo
    echo "Expected: dl loses nothing; generic loses datagrams in merged"
    echo "transfers (min_tx_pkt 0 pads every NTB to 65536: even light traffic);"
    echo "generic32 passes light traffic and loses under load."
} | tee "$OUT/table.txt"

# Throughput over time: one data file per run and direction.
plot_cmd=""
for r in "${RUNS[@]}"; do
    for DIR in up down; do
        f=$OUT/$r-$DIR.dat
        sed -n "s/.*NCMTEST iperf_${DIR}_interval=//p" "$LOGS/$r.log" |
            awk '{ print $1, $2 }' >"$f"
        [ -s "$f" ] || echo "0 0" >"$f"
        plot_cmd+="${plot_cmd:+, }'$f' using 1:2 with linespoints title '$r $DIR'"
    done
done
gnuplot <<EOF
set terminal png size 1000,560
set termoption noenhanced
set output '$OUT/dropout.png'
set title 'usb-ncm-dl zlp=required, tx_max = dwNtbOutMaxSize: iperf3 per second'
set xlabel 'seconds'
set ylabel 'Mbit/s'
set key outside right
set grid
plot $plot_cmd
EOF
step "table: ${OUT#"$NCM_TOP"/}/table.txt, plot: ${OUT#"$NCM_TOP"/}/dropout.png"
