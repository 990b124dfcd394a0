#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Whole NTBs in the USB capture: a guest run (ping, iperf3 up and down)
# with -device usb-ncm-dl,pcap=FILE (whole transfers: the device's default
# pcap-snaplen; QEMU's USB pcap,
# patches/0008-hw-usb-pcap-snaplen.patch: the whole transfer instead of
# its first 256 bytes), decoded by tshark (Wireshark's MBIM dissector
# reads NCM NTBs):
#   decodes          tshark reads the file; bulk transfers of both
#                    directions hold NTBs
#   none-truncated   no record cut short by the snap length (_ws.short),
#                    none malformed (_ws.malformed or an expert message of
#                    the malformed group), no expert error
#   check-can-fail   the same checks on a copy cut to 256 bytes a record
#                    (editcap -s, what pcap= kept before pcap-snaplen)
#                    find truncated NTBs and missing datagrams
#   every-datagram   in every NTB, the datagrams the NDP lists are all
#                    decoded (as Ethernet frames)
#   counts-match     the datagrams tshark decodes, per direction, are the
#                    device's own counts (x-stats in_datagrams and
#                    out_datagrams)
#
#   tests/guest/run-pcap-test.sh [CONTROLLER]    default xhci
#
# Environment: KERNEL, QEMU, GUEST_TIMEOUT (300), IPERF_TIME (1);
# PCAP_REUSE=1 checks the last run's capture again without a new run.
# Files: build/guest-logs/pcap-CTRL.{log,pcap,tshark.txt}.
set -uo pipefail
. "$(dirname "$0")/../../scripts/setup/common.sh"
. "$NCM_TOP/tests/guest/lib.sh"

CTRL=${1:-xhci}
NAME=pcap-$CTRL
LOG=$NCM_BUILD/guest-logs/$NAME.log
PCAP=$NCM_BUILD/guest-logs/$NAME.pcap
REL_LOG=${LOG#"$NCM_TOP"/}
runner_begin "guest/$NAME" "$REL_LOG"

if ! command -v tshark >/dev/null; then
    runner_skip "no tshark: make deps, or scripts/setup/install-deps.sh replay"
    exit 0
fi
rc=0
if [ "${PCAP_REUSE:-0}" = 0 ] || [ ! -s "$PCAP" ]; then
    guest_need_qemu
    GDIR=$(bash "$NCM_TOP/tests/guest/image.sh" --print-dir) ||
        die "could not build the guest image" "see the messages above"
    mkdir -p "$(dirname "$LOG")"
    rm -f "$LOG" "$LOG".* "$PCAP"
    trap guest_iperf_stop EXIT
    guest_iperf_start "$LOG.iperf3-server.log"
    guest_device_args "$CTRL" "usb-ncm-dl,id=ncm,pcap=$PCAP"
    guest_qemu_cmd "$GDIR" "ncm.mode=run ncm.driver=cdc_ncm \
ncm.port=$GUEST_IPERF_PORT ncm.time=${IPERF_TIME:-1} ncm.ping=5"
    step "guest pcap test: $CTRL, capture ${PCAP#"$NCM_TOP"/}"
    guest_run_with_stats "$LOG" "${GUEST_TIMEOUT:-300}" ncm || rc=$?
    guest_iperf_stop
fi
if ! grep -aq 'NCMTEST phase=done' "$LOG" || [ ! -s "$PCAP" ]; then
    runner_check run 1 "the guest run did not finish (QEMU status $rc)"
    exit 1
fi

# iperf3's payload is random bytes, which a heuristic dissector on TCP may
# take for its protocol and flag as short or malformed: Thrift did, in 3
# of ~2300 NTBs, and Q.931 in one of a SANITIZE=1 run (2026-12-06).  What
# decode() checks ends at the TCP/UDP headers, so every protocol that has
# a heuristic on TCP or UDP is off (tshark -G heuristic-decodes lists
# them), and PCAP_PAYLOAD_PROTOCOLS_OFF's.
noheur=()
for proto in $(tshark -G heuristic-decodes 2>/dev/null |
               awk -F'\t' '$1 == "tcp" || $1 == "udp" { print $2 }' |
               sort -u) ${PCAP_PAYLOAD_PROTOCOLS_OFF-thrift}; do
    noheur+=(--disable-protocol "$proto")
done

# decode PCAP OUT: OUT.txt, one line per bulk transfer that holds an NTB
# (frame, direction 0 OUT / 1 IN, the datagram lengths its NDPs list,
# the Ethernet types decoded), OUT.bad (frames truncated, malformed or in
# error) and OUT.sum (NAME=VALUE words: NTBs, datagrams listed and decoded
# per direction, NTBs with datagrams missing); returns tshark's status
decode() {
    local pcap=$1 out=$2 rc
    tshark -n -r "$pcap" -Y 'mbim.bulk.nth.signature' -T fields \
        -E separator='|' -E occurrence=a -E aggregator=, \
        -e frame.number -e usb.endpoint_address.direction \
        -e mbim.bulk.ndp.datagram.length -e eth.type \
        >"$out.txt" 2>"$out.err"
    rc=$?
    tshark -n "${noheur[@]}" -r "$pcap" -Y '_ws.malformed || _ws.short ||
        _ws.expert.severity >= 0x800000 || _ws.expert.group == 0x07000000' \
        -T fields -e frame.number -e _ws.expert.message \
        >"$out.bad" 2>>"$out.err" || rc=1
    awk -F'|' '
        {
            dir = $2; n = 0; m = split($3, len, ",")
            for (i = 1; i <= m; i++) if (len[i] + 0 > 0) n++
            e = ($4 == "") ? 0 : split($4, et, ",")
            ntbs[dir]++; listed[dir] += n; decoded[dir] += e
            if (e != n) { short_ntbs++; if (!first_short) first_short = $1 }
        }
        END {
            printf "ntbs_out=%d ntbs_in=%d ", ntbs[0], ntbs[1]
            printf "decoded_out=%d decoded_in=%d ", decoded[0], decoded[1]
            printf "short_ntbs=%d first_short=%d\n", short_ntbs, first_short
        }' "$out.txt" >"$out.sum"
    return "$rc"
}

# load_sum FILE: decode()'s NAME=VALUE words into the variables of those
# names; only the names below, only numbers (the file is data, not code)
load_sum() {
    local w
    for w in $(<"$1"); do
        case ${w%%=*} in
        ntbs_out|ntbs_in|decoded_out|decoded_in|short_ntbs|first_short)
            [[ ${w#*=} =~ ^[0-9]+$ ]] && printf -v "${w%%=*}" '%s' "${w#*=}" ;;
        esac
    done
}

step "tshark: decoding $(du -h "$PCAP" | cut -f1)"
decode "$PCAP" "$LOG.tshark"
trc=$?
ntbs_out=0 ntbs_in=0 decoded_out=0 decoded_in=0 short_ntbs=0 first_short=0
# the numbers just written, as NAME=VALUE words
load_sum "$LOG.tshark.sum"
bad=$(wc -l <"$LOG.tshark.bad")
first_bad=$(head -n1 "$LOG.tshark.bad" | cut -c1-160)
dev_out=$(guest_stat "$LOG" out_datagrams)
dev_in=$(guest_stat "$LOG" in_datagrams)

r=1; [ "$trc" = 0 ] && [ "$ntbs_out" -gt 0 ] && [ "$ntbs_in" -gt 0 ] && r=0
runner_check decodes "$r" \
    "tshark status $trc, NTBs out $ntbs_out, in $ntbs_in: $(head -c 200 "$LOG.tshark.err")"
r=1; [ "$bad" = 0 ] && r=0
runner_check none-truncated "$r" \
    "$bad NTBs truncated, malformed or flagged; first: frame $first_bad"
r=1; [ "$short_ntbs" = 0 ] && r=0
runner_check every-datagram "$r" \
    "$short_ntbs NTBs with fewer Ethernet frames decoded than listed (first: frame $first_short)"
r=1; [ "$decoded_out" = "${dev_out:-x}" ] && [ "$decoded_in" = "${dev_in:-x}" ] && r=0
runner_check counts-match "$r" \
    "tshark decoded out $decoded_out / in $decoded_in, the device counted out ${dev_out:-?} / in ${dev_in:-?}"
# the checks see what they are for: cut to 256 bytes a record, the NTBs
# are truncated and their datagrams missing
editcap -s 320 "$PCAP" "$LOG.cut.pcap" 2>/dev/null
# (its numbers in a subshell, not to overwrite the real run's)
read -r cut_bad cut_short < <(
    decode "$LOG.cut.pcap" "$LOG.cut"
    load_sum "$LOG.cut.sum"
    echo "$(wc -l <"$LOG.cut.bad") $short_ntbs"
)
r=1; [ "$cut_bad" -gt 0 ] && [ "$cut_short" -gt 0 ] && r=0
runner_check check-can-fail "$r" \
    "a copy cut to 256 data bytes a record: $cut_bad frames flagged, $cut_short NTBs short of datagrams"
rm -f "$LOG.cut.pcap"
echo "# $NAME: $ntbs_out OUT NTBs with $decoded_out datagrams (device: ${dev_out:-?})," \
     "$ntbs_in IN NTBs with $decoded_in datagrams (device: ${dev_in:-?})"
runner_end
