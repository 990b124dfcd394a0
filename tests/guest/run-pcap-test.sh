#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Whole NTBs in the USB capture: a guest run (ping, iperf3 up and down)
# with -device usb-ncm-dl,pcap=FILE,pcap-snaplen=262080 (QEMU's USB pcap,
# patches/0012-hw-usb-pcap-snaplen.patch: the whole transfer instead of
# its first 256 bytes), decoded by tshark (Wireshark's MBIM dissector
# reads NCM NTBs):
#   decodes          tshark reads the file; bulk transfers of both
#                    directions hold NTBs
#   none-truncated   no record cut short by the snap length (_ws.short),
#                    none malformed (_ws.malformed), no dissector warning
#                    or error
#   every-datagram   in every NTB, the datagrams the NDP lists are all
#                    decoded (as Ethernet frames)
#   counts-match     the datagrams tshark decodes, per direction, are the
#                    device's own counts (x-stats in_datagrams and
#                    out_datagrams)
#
#   tests/guest/run-pcap-test.sh [CONTROLLER]    default xhci
#
# Environment: KERNEL, QEMU, GUEST_TIMEOUT (300), IPERF_TIME (1).
# Files: build/guest-logs/pcap-CTRL.{log,pcap,tshark.txt}.
set -uo pipefail
. "$(dirname "$0")/../../scripts/setup/common.sh"
. "$NCM_TOP/tests/guest/lib.sh"

CTRL=${1:-xhci}
NAME=pcap-$CTRL
LOG=$NCM_BUILD/guest-logs/$NAME.log
PCAP=$NCM_BUILD/guest-logs/$NAME.pcap
REL_LOG=${LOG#"$NCM_TOP"/}
nfail=0

check() {
    if [ "$2" = 0 ]; then
        echo "PASS: guest/$NAME/$1"
    else
        echo "FAIL: guest/$NAME/$1 ($3; log $REL_LOG)"
        nfail=$((nfail + 1))
    fi
}
ok() { if eval "$1"; then echo 0; else echo 1; fi; }

if ! command -v tshark >/dev/null; then
    echo "SKIP: guest/$NAME (no tshark: make deps, or scripts/setup/install-deps.sh replay)"
    exit 0
fi
guest_need_qemu
GDIR=$(bash "$NCM_TOP/tests/guest/image.sh" --print-dir) ||
    die "could not build the guest image" "see the messages above"
mkdir -p "$(dirname "$LOG")"
rm -f "$LOG" "$LOG".* "$PCAP"
trap guest_iperf_stop EXIT
guest_iperf_start "$LOG.iperf3-server.log"

guest_device_args "$CTRL" "usb-ncm-dl,id=ncm,pcap=$PCAP,pcap-snaplen=262080"
guest_qemu_cmd "$GDIR" "ncm.mode=run ncm.driver=cdc_ncm \
ncm.port=$GUEST_IPERF_PORT ncm.time=${IPERF_TIME:-1} ncm.ping=5"
step "guest pcap test: $CTRL, capture ${PCAP#"$NCM_TOP"/}"
rc=0
guest_run_with_stats "$LOG" "${GUEST_TIMEOUT:-300}" ncm || rc=$?
guest_iperf_stop
if ! grep -aq 'NCMTEST phase=done' "$LOG" || [ ! -s "$PCAP" ]; then
    check run 1 "the guest run did not finish (QEMU status $rc)"
    exit 1
fi

# one line per bulk transfer that holds an NTB: direction (0 OUT, 1 IN),
# datagrams its NDPs list (non-empty entries), Ethernet frames decoded,
# and the expert messages of the frame
step "tshark: decoding $(du -h "$PCAP" | cut -f1)"
tshark -n -r "$PCAP" -Y 'mbim.bulk.nth.signature' -T fields \
    -E separator='|' -E occurrence=a -E aggregator=, \
    -e frame.number -e usb.endpoint_address.direction \
    -e mbim.bulk.ndp.datagram.length -e eth.type -e _ws.expert.message \
    -e _ws.short -e _ws.malformed \
    >"$LOG.tshark.txt" 2>"$LOG.tshark.err"
trc=$?
awk -F'|' '
    {
        dir = $2; n = 0; m = split($3, len, ",")
        for (i = 1; i <= m; i++) if (len[i] + 0 > 0) n++
        e = ($4 == "") ? 0 : split($4, et, ",")
        ntbs[dir]++; listed[dir] += n; decoded[dir] += e
        if (e != n) { short_ntbs++; if (!first_short) first_short = $1 }
        if ($5 != "" || $6 != "" || $7 != "") { bad++; if (!first_bad) first_bad = $1 ": " $5 }
    }
    END {
        printf "ntbs_out=%d ntbs_in=%d listed_out=%d listed_in=%d ", ntbs[0], ntbs[1], listed[0], listed[1]
        printf "decoded_out=%d decoded_in=%d short_ntbs=%d first_short=%s ", decoded[0], decoded[1], short_ntbs, first_short
        printf "bad=%d\n", bad
        if (first_bad != "") print "first_bad=" first_bad
    }' "$LOG.tshark.txt" >"$LOG.tshark.sum"
ntbs_out=0 ntbs_in=0 decoded_out=0 decoded_in=0 short_ntbs=0 first_short="" bad=0
# the numbers just written, as NAME=VALUE words
eval "$(head -n1 "$LOG.tshark.sum")"
first_bad=$(sed -n 's/^first_bad=//p' "$LOG.tshark.sum" | cut -c1-160)
dev_out=$(guest_stat "$LOG" out_datagrams)
dev_in=$(guest_stat "$LOG" in_datagrams)

check decodes "$(ok '[ "$trc" = 0 ] && [ "$ntbs_out" -gt 0 ] && [ "$ntbs_in" -gt 0 ]')" \
    "tshark status $trc, NTBs out $ntbs_out, in $ntbs_in: $(head -c 200 "$LOG.tshark.err")"
check none-truncated "$(ok '[ "$bad" = 0 ]')" \
    "$bad NTBs truncated, malformed or flagged; first: frame $first_bad"
check every-datagram "$(ok '[ "$short_ntbs" = 0 ]')" \
    "$short_ntbs NTBs with fewer Ethernet frames decoded than listed (first: frame $first_short)"
check counts-match \
    "$(ok '[ "$decoded_out" = "${dev_out:-x}" ] && [ "$decoded_in" = "${dev_in:-x}" ]')" \
    "tshark decoded out $decoded_out / in $decoded_in, the device counted out ${dev_out:-?} / in ${dev_in:-?}"
echo "# $NAME: $ntbs_out OUT NTBs with $decoded_out datagrams (device: ${dev_out:-?})," \
     "$ntbs_in IN NTBs with $decoded_in datagrams (device: ${dev_in:-?})"
[ "$nfail" = 0 ]
