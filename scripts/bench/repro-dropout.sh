#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# make repro-dropout: the DisplayLink network dropouts, reproduced under
# several Linux kernels, as one table (scenario x kernel, each cell what was
# measured) and one plot.
#
# Kernels (columns): REPRO_KERNELS, default "5.10 6.1 6.12 7.2" (Debian's
# bullseye, bookworm, trixie and sid kernels; the other releases come
# through tests/guest/image.sh's private apt configuration, nothing on
# this machine is upgraded). KERNEL=... (anything tests/guest/image.sh
# takes) runs that one kernel only.
#
# Scenarios (rows), one guest boot each per kernel:
#   ZLP merge 64 KiB / 32 KiB  the ZLP-required firmware model with other
#       ids (Linux binds "CDC NCM (NO ZLP)") and dwNtbOutMaxSize 65536 /
#       32768, guest tx_max = dwNtbOutMaxSize: datagrams the device lost in
#       merged transfers, iperf3 up (tests/guest/dropout-run.sh)
#   re-enumeration   the device off the bus for 2 s under ping + iperf3 -R:
#       when the interface was back and configured, pings lost, TCP
#       (tests/guest/run-pm-test.sh replug)
#   USB autosuspend  interface up and idle, power/control=auto: suspended?
#       woken by a frame from the host? On qemu-xhci with USB 2 ports (high
#       speed) and on its USB 3 ports (super speed)
#   suspend to RAM   S3 and system_wakeup: interface back, iperf3 after
#   multicast        IPv6 link-local ping and a router advertisement
#       through cdc_ncm; the usbfs step "filter": the function without
#       SET_ETHERNET_PACKET_FILTER (x-stats rx_filtered)
#   throughput       iperf3 up/down with rx_max = tx_max = 16, 32, 64 KiB
#
# Output: build/repro-dropout/table.txt (also printed) and
# build/repro-dropout/throughput.png; every boot's log in build/guest-logs/
# and build/dropout-logs/ (repro-<kernel>-<scenario>).  A run over the
# default kernels also writes the table, with its date, commit,
# accelerator and duration, between the repro-dropout markers of
# docs/repro-dropout.md (and the plot to docs/repro-dropout-throughput.png);
# a run of other kernels leaves the docs alone.  A cell says why when its
# boot failed (no guest image, QEMU died, the kernel panicked) and lists
# the checks that failed. REPRO_TABLE_ONLY=1 prints the table and draws
# the plot again from the logs, running nothing.
set -uo pipefail
. "$(dirname "$0")/../setup/common.sh"
. "$NCM_TOP/tests/guest/lib.sh"

OUT=$NCM_BUILD/repro-dropout
GENERIC=",vendorid=0x46f4,productid=0x0010"
if [ -n "${KERNEL:-}" ]; then
    KERNELS=("$KERNEL")
else
    read -r -a KERNELS <<<"${REPRO_KERNELS:-5.10 6.1 6.12 7.2}"
fi

# REPRO_TABLE_ONLY=1: the table and plot again from the last runs' logs
if [ "${REPRO_TABLE_ONLY:-0}" != 1 ]; then
    bash "$NCM_TOP/scripts/setup/install-deps.sh" build guest bench || exit 1
    bash "$NCM_TOP/scripts/setup/build-qemu.sh" || exit 1
fi
mkdir -p "$OUT"

# label K: a file-name-safe name for a kernel spec
label() { printf '%s' "$1" | sed 's|.*/||; s|[^A-Za-z0-9._-]|_|g' | cut -c1-40; }

PM=$NCM_TOP/tests/guest/run-pm-test.sh
run_start=$SECONDS
i=0
[ "${REPRO_TABLE_ONLY:-0}" = 1 ] && KRUN=() || KRUN=("${KERNELS[@]}")
for k in "${KRUN[@]}"; do
    i=$((i + 1))
    L=$(label "$k")
    step "kernel $i/${#KERNELS[@]}: $k"
    export KERNEL=$k
    # nothing of an earlier run of this kernel may show up in the table
    rm -f "$GL/repro-$L-"* "$DL/repro-$L-"* "$OUT/$L".*
    if ! bash "$NCM_TOP/tests/guest/image.sh" >"$OUT/$L.image.log" 2>&1; then
        note "guest image for $k failed: $OUT/$L.image.log"
        touch "$OUT/$L.image-failed"
        continue
    fi
    {
        IPERF_TIME=8 bash "$NCM_TOP/tests/guest/dropout-run.sh" "repro-$L-zlp64" "$GENERIC"
        IPERF_TIME=8 bash "$NCM_TOP/tests/guest/dropout-run.sh" "repro-$L-zlp32" "$GENERIC,ntb-out-max-size=32768"
        LOG_NAME=repro-$L-replug bash "$PM" replug xhci
        LOG_NAME=repro-$L-suspend bash "$PM" suspend xhci-hs
        LOG_NAME=repro-$L-auto-ss NCM_APPEND="ncm.pm=auto" bash "$PM" suspend xhci
        LOG_NAME=repro-$L-mcast bash "$PM" mcast xhci
        LOG_NAME=repro-$L-ntbsweep IPERF_TIME=5 bash "$PM" ntbsweep xhci
    } 2>&1 | tee "$OUT/$L.runs.log" | grep -E '^(==>|PASS|FAIL|    [a-zA-Z])' || true
done
unset KERNEL

GL=$NCM_BUILD/guest-logs
DL=$NCM_BUILD/dropout-logs
# gv LOGBASE KEY, gs LOGBASE KEY (dropout runs' counters), cs LOGBASE TAG KEY
gv() { [ -f "$1" ] && guest_val "$1" "$2"; }
gs() { [ -f "$1.stats.json" ] && guest_stat "$1" "$2"; }
cs() {
    python3 - "$1.cues.json" "$2" "$3" <<'PY' 2>/dev/null
import json, sys
print(json.load(open(sys.argv[1]))["stats"][sys.argv[2]][sys.argv[3]])
PY
}
# dmesg_has LOG PATTERN
dmesg_has() { [ -f "$1" ] && grep -aq "$2" "$1"; }

# why_not LOG: nothing when LOG is a guest run that booted; else why not
why_not() {
    local f=$1 e
    [ -f "$f" ] || { echo "not run"; return; }
    grep -aq 'NCMTEST phase=boot' "$f" && return
    e=$(guest_qemu_error "$f")
    [ -n "$e" ] && { echo "QEMU died: $e"; return; }
    e=$(grep -a -m1 -oE 'Kernel panic[^\r]*|VFS: Unable to mount[^\r]*' "$f")
    [ -n "$e" ] && { echo "no boot: $e"; return; }
    e=$(guest_lockup "$f")
    [ -n "$e" ] && { echo "no boot: $e"; return; }
    echo "no boot: $(grep -a -v '^[[:space:]]*$' "$f" | tail -n1 | tr -d '\r' | cut -c1-60)"
}

# fails L CHECK-PREFIX: the names of the checks that FAILed in that run
fails() {
    [ -f "$OUT/$1.runs.log" ] || return 0
    sed -n "s|^FAIL: guest/$2/\([^ ]*\) .*|\1|p" "$OUT/$1.runs.log" | paste -sd, -
}

# cell L ROW: what was measured, or why nothing was
cell() {
    local L=$1 row=$2 f w c
    if [ -e "$OUT/$L.image-failed" ]; then
        echo "no guest image: $(grep -a -m1 -E 'error|ERROR|E:|failed' "$OUT/$L.image.log" | cut -c1-60)"
        return
    fi
    case $row in
    kernel) f=$GL/repro-$L-replug.log ;;
    zlp64|zlp32) f=$DL/repro-$L-$row.log ;;
    auto-hs|s3) f=$GL/repro-$L-suspend.log ;;
    filter) f=$GL/repro-$L-mcast.log ;;
    tput*) f=$GL/repro-$L-ntbsweep.log ;;
    *) f=$GL/repro-$L-$row.log ;;
    esac
    if [ "$row" = kernel ]; then
        w=$(sed -n 's/^ *kernel: \(linux-[^ ]*\).*(\(.*\))$/\2/p' "$OUT/$L.image.log" 2>/dev/null | head -n1)
        c=$(gv "$f" kernel)
        echo "${c:-${w:-?}}"
        return
    fi
    w=$(why_not "$f")
    if [ -n "$w" ]; then
        echo "$w"
        return
    fi
    case $row in
    replug) c=$(fails "$L" replug-xhci) ;;
    auto-hs|s3) c=$(fails "$L" suspend-xhci-hs) ;;
    auto-ss) c=$(fails "$L" suspend-xhci) ;;
    mcast|filter) c=$(fails "$L" mcast-xhci) ;;
    tput*) c=$(fails "$L" ntbsweep-xhci) ;;
    *) c="" ;;
    esac
    # only the failed checks that belong to the row
    case $row in
    auto-*) c=$(tr , '\n' <<<"$c" | grep -vE '^s3-' | paste -sd, -) ;;
    s3) c=$(tr , '\n' <<<"$c" | grep -E '^s3-' | paste -sd, -) ;;
    mcast) c=$(tr , '\n' <<<"$c" | grep -E '^(ll-ping|neighbour|router-advert)' | paste -sd, -) ;;
    filter) c=$(tr , '\n' <<<"$c" | grep -E '^(usbfs|rx-filtered)' | paste -sd, -) ;;
    tput*) c=$(tr , '\n' <<<"$c" | grep -E "^iperf-.*-$(( ${row#tput} * 1024 ))\$" | paste -sd, -) ;;
    esac
    printf '%s%s\n' "$(measured "$L" "$row")" "${c:+ FAIL:$c}"
}

measured() {
    local L=$1 row=$2 f v a b
    case $row in
    zlp64|zlp32)
        f=$DL/repro-$L-$row.log
        [ -f "$f" ] || { echo "(no run)"; return; }
        a=$(gs "$f" out_merge_lost_datagrams)
        b=$(gv "$f" iperf_up_receiver_mbps)
        [ "$(gv "$f" iperf_up_rc)" = 0 ] || b=FAIL
        v=$(gs "$f" out_overflow_bytes)
        echo "tx=$(gv "$f" after.cdc_ncm.tx_max) out=$(gs "$f" out_datagrams) lost=${a:-?} ovf=$(( ${v:-0} / 1024 ))K up=${b:-?}" ;;
    replug)
        f=$GL/repro-$L-replug.log
        [ -f "$f" ] || { echo "(no run)"; return; }
        a=$(gv "$f" replug_configured_s)
        [ -n "$a" ] || a="?"
        b=$(gv "$f" replug_iperf_last3_live)
        echo "${a}s; $(gv "$f" replug_ping_lost)/$(gv "$f" replug_ping_sent) lost; rec $(gv "$f" replug_ping_recover_s)s; TCP $([ "${b:-0}" -ge 1 ] 2>/dev/null && echo ok || echo NO)" ;;
    auto-hs|auto-ss)
        if [ "$row" = auto-hs ]; then f=$GL/repro-$L-suspend.log; else f=$GL/repro-$L-auto-ss.log; fi
        [ -f "$f" ] || { echo "(no run)"; return; }
        if [ "$(gv "$f" auto_suspended)" = yes ]; then
            if [ "$(gv "$f" auto_wake_rx)" = yes ]; then
                echo "suspends; frame wakes ($(gv "$f" auto_wake_s)s)"
            else
                echo "suspends; frame: NO wake"
            fi
        elif dmesg_has "$f" "won't remote wakeup"; then
            echo "no: won't remote wakeup ($(grep -a -m1 -o "won't remote wakeup, status -*[0-9]*" "$f" | sed 's/.*status //'))"
        else
            echo "no suspend ($(gv "$f" auto_status))"
        fi ;;
    s3)
        f=$GL/repro-$L-suspend.log
        [ -f "$f" ] || { echo "(no run)"; return; }
        if [ "$(gv "$f" s3_rc | cut -d' ' -f1)" != 0 ]; then echo "no S3: $(gv "$f" s3_rc)"; return; fi
        echo "back $(gv "$f" s3_back_s)s; -R $(gv "$f" iperf_s3_before_receiver_mbps)->$(gv "$f" iperf_s3_after_receiver_mbps) Mb/s, rx_max set: $(gv "$f" iperf_s3_after_rx_max_receiver_mbps)" ;;
    mcast)
        f=$GL/repro-$L-mcast.log
        [ -f "$f" ] || { echo "(no run)"; return; }
        echo "ll ping $(gv "$f" mcast_ll_ping | cut -d' ' -f1)/5; RA $(gv "$f" mcast_ra)" ;;
    filter)
        f=$GL/repro-$L-mcast.log
        [ -f "$f" ] || { echo "(no run)"; return; }
        a=$(cs "$f" mcast-cdc_ncm rx_filtered)
        b=$(cs "$f" mcast-usbfs rx_filtered)
        v=$(grep -a -m1 -o 'multicast [a-zA-Z]* (expected' "$f" | cut -d' ' -f2)
        echo "mcast ${v:-?}; rx_filtered +$(( ${b:-0} - ${a:-0} ))" ;;
    tput16|tput32|tput64)
        f=$GL/repro-$L-ntbsweep.log
        [ -f "$f" ] || { echo "(no run)"; return; }
        v=$(( ${row#tput} * 1024 ))
        a=$(gv "$f" "ntb_${v}_rx_max")
        b=$(gv "$f" "ntb_${v}_tx_max")
        f2=""
        [ "$a" = "$v" ] && { [ "$b" = "$v" ] || [ "$b" = $((v + 1)) ]; } ||
            f2=" (took rx $a tx $b)"
        echo "$(gv "$f" "iperf_up_${v}_receiver_mbps") / $(gv "$f" "iperf_down_${v}_receiver_mbps")$f2" ;;
    esac
}

ROWS=(kernel zlp64 zlp32 replug auto-hs auto-ss s3 mcast filter tput16 tput32 tput64)
declare -A TITLE=(
    [kernel]="kernel"
    [zlp64]="ZLP merge, NO ZLP, 64 KiB"
    [zlp32]="ZLP merge, NO ZLP, 32 KiB"
    [replug]="re-enumeration (2 s off)"
    [auto-hs]="USB autosuspend, high speed"
    [auto-ss]="USB autosuspend, super speed"
    [s3]="suspend to RAM (S3)"
    [mcast]="IPv6 multicast via cdc_ncm"
    [filter]="power-on filter (usbfs)"
    [tput16]="iperf3 16 KiB NTBs up/down"
    [tput32]="iperf3 32 KiB NTBs up/down"
    [tput64]="iperf3 64 KiB NTBs up/down")
# the accelerators the boots ran under, from their logged command lines
# (each boot's script chose by ACCEL, tests/guest/accel.sh)
ACCELS=$(cat "$GL"/repro-*.log "$DL"/repro-*.log 2>/dev/null |
         grep -a '^# .* -accel ' | grep -o -- '-accel [a-z]*' |
         awk '{ print toupper($2) }' | sort -u | paste -sd/)
ACCELS=${ACCELS:-TCG}
{
    echo
    echo "DisplayLink dropout reproduction ($(date -u '+%Y-%m-%d %H:%M UTC')), usb-ncm-dl on QEMU $ACCELS"
    echo
    printf '%-30s' ""
    for k in "${KERNELS[@]}"; do printf '| %-50s' "$k"; done
    printf '\n'
    for r in "${ROWS[@]}"; do
        printf '%-30s' "${TITLE[$r]}"
        for k in "${KERNELS[@]}"; do printf '| %-50s' "$(cell "$(label "$k")" "$r" | cut -c1-50)"; done
        printf '\n'
    done
    echo
    echo "ZLP merge: the ZLP-required firmware model with other ids (Linux: NO ZLP), guest tx_max"
    echo "  raised to dwNtbOutMaxSize (tx: what the kernel took); the device's counters: datagrams"
    echo "  out to the netdev, lost in merged transfers, overflow (transfers past 4 NTBs, dropped"
    echo "  whole); iperf3 guest->host Mbit/s (FAIL: iperf3 gave up)."
    echo "re-enumeration: interface configured again N s after the fault; pings lost of sent (every"
    echo "  100 ms); rec: fault to the first reply; TCP: iperf3 -R carried data in its last 3 seconds."
    echo "autosuspend: power/control=auto with the interface up and idle; a UDP datagram from the"
    echo "  host through slirp must wake the device (seconds from the host's send to its arrival)."
    echo "S3: seconds from resume to the interface configured again; iperf3 -R Mbit/s before -> after,"
    echo "  then after writing cdc_ncm's rx_max (SET_NTB_INPUT_SIZE again: the device was reset on"
    echo "  resume and is back at its default NTB input size; cdc_ncm's reset_resume does not say it)."
    echo "power-on filter: ncm-usbfs-stress filter (no SET_ETHERNET_PACKET_FILTER after a reset):"
    echo "  whether slirp's router advertisement (multicast) came in; rx_filtered counted meanwhile."
    echo "Logs: build/guest-logs/repro-*, build/dropout-logs/repro-*."
} | tee "$OUT/table.txt"

# Throughput per NTB size, one line per kernel and direction
plot_cmd=""
for k in "${KERNELS[@]}"; do
    L=$(label "$k")
    f=$GL/repro-$L-ntbsweep.log
    for d in up down; do
        dat=$OUT/$L-$d.dat
        : > "$dat"
        for n in 16 32 64; do
            # at the NTB size the kernel took (5.10 caps rx_max)
            v=$(gv "$f" "iperf_${d}_$((n * 1024))_receiver_mbps")
            a=$(gv "$f" "ntb_$((n * 1024))_rx_max")
            [ -n "$v" ] && [ -n "$a" ] && echo "$((a / 1024)) $v" >> "$dat"
        done
        [ -s "$dat" ] || continue
        plot_cmd+="${plot_cmd:+, }'$dat' using 1:2 with linespoints lw 2 title '$k $d'"
    done
done
if [ -n "$plot_cmd" ] && command -v gnuplot >/dev/null; then
    gnuplot <<EOF
set terminal png size 1000,560
set termoption noenhanced
set output '$OUT/throughput.png'
set title 'usb-ncm-dl on qemu-xhci ($ACCELS, SEND ZLP): iperf3 by the NTB size cdc_ncm took (rx_max), per kernel'
set xlabel 'rx_max (KiB)'
set ylabel 'Mbit/s'
set logscale x 2
set xrange [12:85]
set yrange [0:*]
set xtics (16, 32, 64)
set key outside right
set grid
plot $plot_cmd
EOF
fi
step "table: ${OUT#"$NCM_TOP"/}/table.txt, plot: ${OUT#"$NCM_TOP"/}/throughput.png"

# docs/repro-dropout.md holds the run of the default kernels, written here
# (the prose there refers to its rows and carries no figure of its own)
doc=$NCM_TOP/docs/repro-dropout.md
if [ "${REPRO_TABLE_ONLY:-0}" != 1 ] &&
   [ "${KERNELS[*]}" = "5.10 6.1 6.12 7.2" ]; then
    commit=$(git -C "$NCM_TOP" rev-parse --short HEAD 2>/dev/null || echo unknown)
    dirty=$(git -C "$NCM_TOP" status --porcelain --untracked-files=no 2>/dev/null)
    qver=$(cat "$NCM_BUILD/qemu-src/VERSION" 2>/dev/null || echo "$QEMU_VERSION")
    block=$OUT/doc-block.md
    {
        echo "The run of $(date -u '+%Y-%m-%d'): QEMU $qver ($ACCELS)" \
             "with the overlay at $commit${dirty:+ (with local changes)}," \
             "$(nproc) cores, $(( (SECONDS - run_start + 30) / 60 )) minutes" \
             "for ${#KERNELS[@]} kernels."
        echo
        echo '```'
        cat "$OUT/table.txt"
        echo '```'
    } >"$block"
    if python3 "$NCM_TOP/scripts/lib/doc_block.py" write "$doc" repro-dropout \
            "$block"
    then
        [ -s "$OUT/throughput.png" ] &&
            cp -f "$OUT/throughput.png" "$NCM_TOP/docs/repro-dropout-throughput.png"
        note "wrote the table into docs/repro-dropout.md (commit it)"
    else
        note "docs/repro-dropout.md not written (see above)"
    fi
else
    note "not the default kernels, or only the table: docs/repro-dropout.md left as it is"
fi
