#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# `make run`: boot a small Linux guest (Debian kernel + busybox; KVM where
# it works, else TCG: ACCEL below)
# with usb-ncm-dl behind qemu-xhci and user-mode networking, and show what
# the guest's cdc_ncm driver negotiated and how fast it goes. An iperf3
# server runs on the host's 127.0.0.1 for the duration (the guest reaches it
# as 10.0.2.2). The first run downloads and builds the guest image.
#
#   tests/guest/run-guest.sh [--shell] [--ehci] [--time SECONDS]
#
#   --shell       an interactive busybox shell on the serial console instead
#                 (`make shell`). The interface (cdc_ncm names it usb0)
#                 is up as 10.0.2.15/24; try `ip link`, `ip addr`,
#                 `grep . /sys/class/net/usb0/cdc_ncm/*`, `ethtool -S usb0`,
#                 `ping 10.0.2.2`, `dmesg | grep cdc_ncm` and the iperf3
#                 command the banner shows (the host's server is running).
#                 `exit` powers off; Ctrl-A X quits QEMU.
#   --ehci        usb-ehci (high speed) instead of qemu-xhci
#   --time N      iperf3 seconds per direction (default 3)
#
# Environment:
#   ARCH=arm64                      an arm64 guest: qemu-system-aarch64 -M
#                                   virt (TCG), Debian's arm64 kernel and
#                                   busybox (ARCH=arm64 make run / shell)
#   NCM_DEVICE=usb-ncm-dl[,props]   the device; usb-net or virtio-net-pci
#                                   run the same guest, for comparison
#   KERNEL=linux-image-amd64        any Debian kernel package (name, name=ver,
#                                   name/bookworm-backports) or a .deb path
#   KERNEL_IMAGE=/path/bzImage      your own kernel build; USB, xHCI/EHCI,
#                                   usbnet and cdc_ncm must be built in (=y),
#                                   or set KERNEL_MODULES=DIR/lib/modules/VER
#                                   from `make modules_install INSTALL_MOD_PATH=DIR`
#   QEMU=/path/qemu-system-x86_64   default build/qemu/qemu-system-x86_64
#                                   (ARCH=arm64: build/qemu/
#                                   qemu-system-aarch64)
#   QEMU_EXTRA="..."                extra QEMU arguments
#   ACCEL=auto|kvm|tcg              auto (default): KVM if a probe boot
#                                   under it reaches /init, else TCG (the
#                                   line "accelerator: ..." says why); see
#                                   tests/guest/accel.sh
#   NCM_APPEND="ncm.mtu=4000 ..."   extra guest kernel parameters (see
#                                   tests/guest/init.d/params.sh for the ncm.* list)
#   REPLAY=record|replay            record the run into build/replay/run.*
#                                   (shell.* for --shell), or replay that
#                                   recording: same console output (make
#                                   record, make replay); REPLAY_GDB=1 starts
#                                   the replay stopped with a gdbstub (see
#                                   tests/guest/replay-lib.sh)
set -euo pipefail
. "$(dirname "$0")/../../scripts/setup/common.sh"
. "$NCM_TOP/tests/guest/lib.sh"
. "$NCM_TOP/tests/guest/replay-lib.sh"

SHELL_MODE=0
CTRL=xhci
TIME=3
while [ $# -gt 0 ]; do
    case $1 in
    --shell) SHELL_MODE=1 ;;
    --ehci) CTRL=ehci ;;
    --xhci) CTRL=xhci ;;
    --time) TIME=${2:?--time needs a number of seconds}; shift ;;
    -h|--help) sed -n '3,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1'" "usage: tests/guest/run-guest.sh [--shell] [--ehci] [--time N]" ;;
    esac
    shift
done
DEVICE=${NCM_DEVICE:-usb-ncm-dl}
replay_check
# (its recordings would take the x86 ones' names, and it was never tried)
[ -z "$REPLAY" ] || [ "$NCM_ARCH" = x86_64 ] ||
    die "REPLAY=$REPLAY is for the x86_64 guest only" "leave ARCH unset for make record/replay"
# usb-net does not migrate, so it cannot be in a snapshot
case $DEVICE in usb-net*) REPLAY_SNAPSHOT=${REPLAY_SNAPSHOT:-0} ;; esac

guest_need_qemu
guest_device_args "$CTRL" "$DEVICE"
if ! guest_has_device "$GUEST_DEV_NAME"; then
    if [ "$GUEST_DEV_NAME" = usb-ncm-dl ]; then
        die "$GUEST_QEMU does not have -device usb-ncm-dl" \
            "rebuild it: make qemu" \
            "or try the old CDC-ECM device: NCM_DEVICE=usb-net make run"
    fi
    die "$GUEST_QEMU does not have -device $GUEST_DEV_NAME" \
        "see: $GUEST_QEMU -device help"
fi

step "guest image (first time: downloads ~75 MB of Debian packages)"
GDIR=$(bash "$NCM_TOP/tests/guest/image.sh" --print-dir) ||
    die "could not build the guest image" "see the messages above"

mkdir -p "$NCM_BUILD/guest-logs"
# (an arm64 tour's logs beside the x86 one's)
RUN_NAME=run
[ "$NCM_ARCH" = x86_64 ] || RUN_NAME=run-$NCM_ARCH
trap guest_iperf_stop EXIT
# a replay talks to nobody: its packets come from the recording
[ "$REPLAY" = replay ] || guest_iperf_start "$NCM_BUILD/guest-logs/$RUN_NAME.iperf3-server.log"
where=$GUEST_DEV_NAME
[ "$GUEST_IS_USB" = 1 ] && where="$GUEST_DEV_NAME on $CTRL"
[ "$NCM_ARCH" = x86_64 ] || where="$where, $NCM_ARCH guest (-M virt)"

if [ "$SHELL_MODE" = 1 ]; then
    size=""
    if [ -t 0 ] && sz=$(stty size 2>/dev/null) && [ -n "$sz" ]; then
        size="ncm.rows=${sz% *} ncm.cols=${sz#* }"
    fi
    guest_qemu_cmd "$GDIR" "ncm.mode=shell ncm.driver=$GUEST_DRIVER \
ncm.port=$GUEST_IPERF_PORT $size ${NCM_APPEND:-}"
    replay_cmd shell
    [ "$REPLAY" = replay ] && note "replaying ${REPLAY_BASE#"$NCM_TOP"/}.bin: what was typed comes from the recording"
    [ "${REPLAY_GDB:-0}" != 0 ] && [ "$REPLAY" = replay ] && replay_gdb_hint "$(basename "$GDIR")"
    step "booting $where into a shell (${GUEST_ACCEL^^}$([ "$GUEST_ACCEL" = tcg ] && echo ': ~10-20 s'))"
    note "host iperf3 server: 127.0.0.1:$GUEST_IPERF_PORT, in the guest: 10.0.2.2:$GUEST_IPERF_PORT"
    note "leave with 'exit' in the guest, or Ctrl-A X"
    rc=0
    "${GUEST_CMD[@]}" || rc=$?
    step "QEMU exited ($rc)"
    exit "$rc"
fi

LOG=$NCM_BUILD/guest-logs/$RUN_NAME.log
guest_qemu_cmd "$GDIR" "ncm.mode=run ncm.driver=$GUEST_DRIVER \
ncm.port=$GUEST_IPERF_PORT ncm.time=$TIME ${NCM_APPEND:-}"
replay_cmd run
t0=$SECONDS
case $REPLAY in
record)
    LOG=$REPLAY_BASE.record.log
    step "booting $where, recording into ${REPLAY_BASE#"$NCM_TOP"/}.bin (icount: slower than make run)" ;;
replay)
    LOG=$REPLAY_BASE.replay.log
    [ "${REPLAY_GDB:-0}" != 0 ] && replay_gdb_hint "$(basename "$GDIR")"
    step "replaying ${REPLAY_BASE#"$NCM_TOP"/}.bin" ;;
*) step "booting $where (${GUEST_ACCEL^^}$([ "$GUEST_ACCEL" = tcg ] && echo ': about 30 s in all'))" ;;
esac
rc=0
guest_run_logged "$LOG" "${GUEST_TIMEOUT:-300}" || rc=$?
[ -z "$REPLAY" ] || echo "$((SECONDS - t0))" >"$REPLAY_BASE.$REPLAY.seconds"
REL_LOG=${LOG#"$NCM_TOP"/}
if ! grep -q 'NCMTEST phase=boot' "$LOG"; then
    die "the guest did not boot (QEMU status $rc)" \
        "$(grep -v '^#' "$LOG" | grep -a . | tail -n 1 | cut -c1-200)" \
        "full console log: $REL_LOG"
fi

v() { guest_val "$LOG" "$1"; }
c() { guest_val "$LOG" "cdc_ncm.$1"; }
row() { printf '  %-12s %s\n' "$1" "$2"; }

echo
echo "$where, guest Linux $(v kernel), QEMU ${GUEST_ACCEL^^} ($GUEST_ACCEL_WHY)"
iface=$(v iface)
if [ -z "$iface" ] || [ "$iface" = none ]; then
    row Interface "none appeared: $(v error)"
    echo
    echo "Guest kernel messages about USB:"
    guest_dmesg "$LOG" | grep -iE 'usb|cdc|xhci|ehci' | tail -n 20 | sed 's/^/    /'
    echo "Full console log: $REL_LOG"
    exit 1
fi
row Driver "$(v driver) on $iface: $(v dmesg | sed 's/^\[[ 0-9.]*\] //')"
if [ -n "$(v usb_speed_mbps)" ]; then
    case $(v usb_speed_mbps) in
    12) sp="full speed" ;; 480) sp="high speed" ;; 5000) sp="SuperSpeed" ;;
    *) sp="?" ;;
    esac
    row USB "$(v usb_id) \"$(v usb_product)\", USB $(v usb_version), $(v usb_speed_mbps) Mbit/s ($sp)"
fi
if [ -n "$(c dwNtbInMaxSize)" ]; then
    fmt=$(c bmNtbFormatsSupported)
    case $(( ${fmt:-0} & 3 )) in 1) f=NTB16 ;; 3) f="NTB16+NTB32" ;; *) f="?" ;; esac
    row "NTB formats" "$fmt ($f); device takes $(c wNtbOutMaxDatagrams) datagrams per OUT NTB (Linux sends <= 40)"
    row "NTB IN" "device offers $(c dwNtbInMaxSize) bytes; divisor $(c wNdpInDivisor), remainder $(c wNdpInPayloadRemainder), alignment $(c wNdpInAlignment)"
    row "NTB OUT" "device accepts $(c dwNtbOutMaxSize) bytes; divisor $(c wNdpOutDivisor), remainder $(c wNdpOutPayloadRemainder), alignment $(c wNdpOutAlignment)"
    row "Host sizes" "driver default rx_max $(c rx_max), tx_max $(c tx_max); after writing 65536"
    row "" "(what DisplayLink's udev rule does): rx_max $(v rx_max.readback), tx_max $(v tx_max.readback)"
fi
row Link "carrier $( [ "$(v carrier)" = 1 ] && echo up || echo DOWN) after $(v carrier_wait_s) s, MTU $(v mtu), MAC $(v mac)"
row Ping "$(v ping_received)/20 replies from 10.0.2.2, $(v ping_loss_pct)% loss, rtt min/avg/max $(v ping_rtt_ms) ms"
mb() { local x; x=$(v "iperf_$1_receiver_mbps"); [ -n "$x" ] && echo "$x Mbit/s" || echo "failed (rc $(v "iperf_$1_rc"))"; }
row "iperf3 up" "$(mb up)   guest -> host, ${TIME} s"
row "iperf3 down" "$(mb down)   host -> guest, ${TIME} s"
errs=$(v stat.rx_errors)/$(v stat.tx_errors)
row Errors "rx/tx errors $errs, rx length errors $(v stat.rx_length_errors)"
echo
if [ "$GUEST_ACCEL" = tcg ]; then
    echo "TCG numbers: compare devices within one run, not with real hardware."
else
    echo "KVM numbers (the real docks measured 870/844 Mbit/s)."
fi
echo "Full console log (with the guest's dmesg): $REL_LOG"
echo "Interactive: make shell    Other device: NCM_DEVICE=usb-net make run"
if [ "$REPLAY" = replay ]; then
    rec_s=$(cat "$REPLAY_BASE.record.seconds" 2>/dev/null || echo "?")
    echo "Replay: $((SECONDS - t0)) s (the recording: $rec_s s)"
    if [ -s "$REPLAY_BASE.record.log" ] &&
       diff_line=$(replay_compare "$REPLAY_BASE.record.log" "$LOG"); then
        echo "Replay: the console output is the recording's, line for line" \
             "($(replay_console "$LOG" | wc -l) lines)"
    else
        die "the replay's console output differs from the recording's" \
            "${diff_line:-no recording log}" \
            "compare ${REPLAY_BASE#"$NCM_TOP"/}.record.log and .replay.log"
    fi
elif [ "$REPLAY" = record ]; then
    echo "Recorded in $((SECONDS - t0)) s: ${REPLAY_BASE#"$NCM_TOP"/}.bin" \
         "($(du -h "$REPLAY_BASE.bin" | cut -f1)); replay it: make replay"
fi
[ "$rc" = 0 ] || die "QEMU exited with status $rc" "see $REL_LOG"
