# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck shell=bash disable=SC2034,SC2054
# (SC2034: the GUEST_* variables are for the scripts that source this;
#  SC2054: commas inside -device/-netdev arguments are intended.)
#
# Host-side helpers shared by tests/guest/run-guest-test.sh and
# tests/guest/run-guest.sh: find QEMU, build the device arguments, run an iperf3
# server on loopback, boot the guest and read its "NCMTEST key=value" lines.
# Source scripts/setup/common.sh first.  ARCH=arm64 (common.sh's NCM_ARCH):
# qemu-system-aarch64 -M virt under TCG, the controllers on virt's PCIe
# host, the arm64 guest image (tests/guest/image.sh).

GUEST_QEMU=${QEMU:-$NCM_QEMU_OBJ/qemu-system-$NCM_QEMU_TARGET}
# shellcheck source=tests/guest/accel.sh
. "$NCM_TOP/tests/guest/accel.sh"

guest_need_qemu() {
    [ -x "$GUEST_QEMU" ] ||
        die "QEMU is not built: $GUEST_QEMU is missing" \
            "run: $([ "$NCM_ARCH" = x86_64 ] || echo "ARCH=$NCM_ARCH ")make qemu   (or set QEMU=/path/to/qemu-system-$NCM_QEMU_TARGET)"
}

# guest_has_device NAME: does this QEMU know -device NAME?
guest_has_device() {
    local list
    list=$("$GUEST_QEMU" -device help 2>/dev/null) || return 1
    grep -q "^name \"$1\"" <<<"$list"
}

# guest_device_args CONTROLLER DEVICE
#   CONTROLLER: xhci (qemu-xhci, the device on a USB 3 port: super speed)
#               | xhci-hs (qemu-xhci,p3=0: USB 2 ports only, high speed)
#               | ehci (usb-ehci, high speed) | uhci (piix3-usb-uhci, full
#               speed) | ohci (pci-ohci, full speed) | a QEMU device name;
#               optionally with properties (xhci,p2=8)
#               The set-ups of real machines (one boot each in
#               make check-guest):
#               | ehci-uhci (q35's USB 2 as libvirt lays it out:
#               ich9-usb-ehci1 at 1d.7 with companions ich9-usb-uhci1..3
#               at 1d.0-1d.2, masterbus=, firstport=0/2/4; high speed, the
#               guest can hand the port to the UHCI: GUEST_COMPANION)
#               | ehci-ohci (an EHCI with an OHCI companion, as AMD and
#               other non-Intel chipsets pair them: ich9-usb-ehci2 at 1a.7
#               with pci-ohci,masterbus=,num-ports=6 at 1a.0; QEMU's
#               usb-ehci takes no companion) | xhci-hub (qemu-xhci, a usb-hub on port 1, the
#               device on hub port 1.1: full speed, QEMU's hub is USB 1.1)
#               | ehci-uhci-hub (the ehci-uhci set-up with a usb-hub on
#               port 1 and the device on 1.1, as libvirt's <hub> on q35:
#               the guest's EHCI driver hands the full-speed hub to the
#               UHCI companion)
#               | xhci-dual (qemu-xhci with two NCM functions, MACs
#               52:54:00:12:36:00 and :01 on netdevs n0 and n1 =
#               -netdev user,net=10.0.3.0/24: GUEST_NICS=2)
#   DEVICE:     usb-ncm-dl | usb-net | virtio-net-pci ..., optionally with
#               properties (usb-ncm-dl,pcap=/tmp/x.pcap)
# Sets GUEST_DEV_ARGS (array: controller(s), then the device(s)),
# GUEST_CTL_ARGS (the controller part alone), GUEST_DEV_NAME,
# GUEST_DRIVER (the Linux driver expected to bind), GUEST_IS_USB,
# GUEST_USB_SPEED (the speed the guest must see, Mbit/s; empty when not
# known), GUEST_COMPANION (uhci/ohci when the device's EHCI port has a
# companion, else empty), GUEST_NICS (how many NICs; 1 but for xhci-dual).
guest_device_args() {
    local ctrl=$1 dev=$2 cname copts dopts devport=""
    cname=${ctrl%%,*}
    copts=${ctrl#"$cname"}
    GUEST_DEV_NAME=${dev%%,*}
    dopts=${dev#"$GUEST_DEV_NAME"}
    GUEST_COMPANION=""
    GUEST_NICS=1
    GUEST_USB_SPEED=""
    case $GUEST_DEV_NAME in
    usb-ncm*) GUEST_DRIVER=cdc_ncm ;;
    usb-net) GUEST_DRIVER=cdc_ether ;;
    virtio-net*) GUEST_DRIVER=virtio_net ;;
    *) GUEST_DRIVER=any ;;
    esac
    case $GUEST_DEV_NAME in
    usb-*)
        GUEST_IS_USB=1
        case $cname in
        xhci|qemu-xhci|nec-usb-xhci|xhci-dual)
            GUEST_USB_SPEED=5000
            case $copts in *p3=0*) GUEST_USB_SPEED=480 ;; esac ;;
        uhci|ohci|piix3-usb-uhci|ich9-usb-uhci[1-6]|pci-ohci|xhci-hub|ehci-uhci-hub) GUEST_USB_SPEED=12 ;;
        *) GUEST_USB_SPEED=480 ;;
        esac
        # a USB 3 port takes usb-net at high speed only
        [ "$GUEST_DEV_NAME" = usb-net ] && [ "$GUEST_USB_SPEED" = 5000 ] && GUEST_USB_SPEED=480
        case $cname in
        xhci) cname=qemu-xhci ;;
        xhci-hs) cname=qemu-xhci copts=",p3=0$copts" ;;
        ehci) cname=usb-ehci ;;
        uhci) cname=piix3-usb-uhci ;;
        ohci) cname=pci-ohci ;;
        ehci-uhci|ehci-uhci-hub)
            GUEST_CTL_ARGS=(-device "ich9-usb-ehci1,id=usbctl,addr=1d.7,multifunction=on$copts"
                -device ich9-usb-uhci1,masterbus=usbctl.0,firstport=0,addr=1d.0,multifunction=on
                -device ich9-usb-uhci2,masterbus=usbctl.0,firstport=2,addr=1d.1
                -device ich9-usb-uhci3,masterbus=usbctl.0,firstport=4,addr=1d.2)
            if [ "$cname" = ehci-uhci-hub ]; then
                GUEST_CTL_ARGS+=(-device usb-hub,bus=usbctl.0,port=1)
                devport=,port=1.1
            else
                GUEST_COMPANION=uhci devport=,port=1
            fi ;;
        ehci-ohci)
            # (QEMU's usb-ehci takes no companions: only the ICH9 EHCIs do)
            GUEST_CTL_ARGS=(-device "ich9-usb-ehci2,id=usbctl,addr=1a.7,multifunction=on$copts"
                -device pci-ohci,masterbus=usbctl.0,firstport=0,num-ports=6,addr=1a.0,multifunction=on)
            GUEST_COMPANION=ohci devport=,port=1 ;;
        xhci-hub)
            GUEST_CTL_ARGS=(-device "qemu-xhci,id=usbctl$copts"
                -device usb-hub,bus=usbctl.0,port=1)
            devport=,port=1.1 ;;
        xhci-dual)
            GUEST_CTL_ARGS=(-device "qemu-xhci,id=usbctl$copts")
            GUEST_NICS=2 ;;
        qemu-xhci|usb-ehci|ich9-usb-ehci1|nec-usb-xhci|piix3-usb-uhci|\
        ich9-usb-uhci[1-6]|pci-ohci) ;;
        *) die "unknown USB controller '$cname'" \
               "use xhci, xhci-hs, ehci, uhci, ohci, ehci-uhci, ehci-ohci, ehci-uhci-hub, xhci-hub or xhci-dual" ;;
        esac
        case $cname in
        ehci-uhci|ehci-ohci|ehci-uhci-hub|xhci-hub|xhci-dual) ;;
        *) GUEST_CTL_ARGS=(-device "$cname,id=usbctl$copts") ;;
        esac
        if [ "$GUEST_NICS" = 2 ]; then
            GUEST_DEV_ARGS=("${GUEST_CTL_ARGS[@]}"
                -device "$GUEST_DEV_NAME,netdev=n0,bus=usbctl.0,mac=52:54:00:12:36:00$dopts"
                -netdev user,id=n1,net=10.0.3.0/24
                -device "$GUEST_DEV_NAME,netdev=n1,bus=usbctl.0,mac=52:54:00:12:36:01${dopts//,id=/,id=second-}")
        else
            GUEST_DEV_ARGS=("${GUEST_CTL_ARGS[@]}"
                -device "$GUEST_DEV_NAME,netdev=n0,bus=usbctl.0$devport$dopts")
        fi
        ;;
    *)
        GUEST_IS_USB=0
        GUEST_CTL_ARGS=()
        GUEST_DEV_ARGS=(-device "$GUEST_DEV_NAME,netdev=n0,romfile=$dopts")
        ;;
    esac
}

GUEST_IPERF_PID=""
GUEST_IPERF_PORT=""

# guest_iperf_start LOGFILE: an iperf3 server on 127.0.0.1 (the guest sees it
# as 10.0.2.2) on a free port; sets GUEST_IPERF_PORT. Stopped by
# guest_iperf_stop (call it from an EXIT trap).
guest_iperf_start() {
    local log=$1 port
    command -v iperf3 >/dev/null ||
        die "iperf3 is missing on the host" "run: make deps (or apt-get install iperf3)"
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        port=$((20000 + (RANDOM % 20000)))
        # Something already answers there: try another port.
        if (exec 2>/dev/null; : </dev/tcp/127.0.0.1/$port); then
            continue
        fi
        iperf3 -s -B 127.0.0.1 -p "$port" >"$log" 2>&1 &
        GUEST_IPERF_PID=$!
        sleep 0.3
        if kill -0 "$GUEST_IPERF_PID" 2>/dev/null; then
            GUEST_IPERF_PORT=$port
            return 0
        fi
        wait "$GUEST_IPERF_PID" 2>/dev/null || true
        GUEST_IPERF_PID=""
    done
    die "could not start an iperf3 server on 127.0.0.1" "see $log"
}

guest_iperf_stop() {
    if [ -n "$GUEST_IPERF_PID" ]; then
        kill "$GUEST_IPERF_PID" 2>/dev/null || true
        wait "$GUEST_IPERF_PID" 2>/dev/null || true
        GUEST_IPERF_PID=""
    fi
}

# guest_accel GUESTDIR: choose GUEST_ACCEL (kvm|tcg) from ACCEL once per
# script, probing KVM with GUESTDIR's kernel if need be
# (tests/guest/accel.sh), and say on stderr which and why; scripts that
# report the accelerator call it before their first guest_qemu_cmd
guest_accel() {
    [ -z "${GUEST_ACCEL:-}" ] || return 0
    guest_accel_pick "$GUEST_QEMU" "$1/vmlinuz" "$1/initrd.img"
    note "accelerator: $GUEST_ACCEL ($GUEST_ACCEL_WHY)" >&2
}

# guest_qemu_cmd GUESTDIR APPEND [NETDEV]: sets GUEST_CMD (array) for a
# boot of the image in GUESTDIR with GUEST_DEV_ARGS and kernel parameters
# APPEND; NETDEV is the -netdev of the device's n0 (default user,id=n0:
# slirp; netns.sh's netns_tap_netdev and netns_relay_netdev give the others;
# it must say id=n0).
# -nodefaults: with q35's default devices SeaBIOS spends ~30 s (TCG) before
# it starts the kernel; without them it is a second or two. The serial port
# and the monitor share stdio (Ctrl-A X quits, Ctrl-A C: monitor).
# no_timer_check: on a loaded host the kernel's check of the IO-APIC timer
# under TCG can miss its ticks and panic ("IO-APIC + timer doesn't work!",
# seen in one of the 28 boots of a make repro-dropout run, on 7.2).
# The accelerator (GUEST_ACCEL, kvm or tcg) is chosen by ACCEL at the first
# call (guest_accel).
# ARCH=arm64: -M virt, whose -kernel boots the Image itself (no firmware),
# with a Cortex-A57 (TCG runs it faster than "max", whose pointer
# authentication it emulates in full) and the PL011 console; the
# controllers are plain PCI functions on virt's PCIe root bus.
guest_qemu_cmd() {
    local dir=$1 append=$2 netdev=${3:-user,id=n0}
    case ,$netdev, in
    *,id=n0,*) ;;
    *) die "guest_qemu_cmd: netdev '$netdev' is not id=n0" \
           "the device is on netdev=n0 (guest_device_args)" ;;
    esac
    guest_accel "$dir"
    # what differs between the architectures: the machine, its firmware
    # (none: -M virt boots -kernel directly) and the console
    local machine console
    if [ "$NCM_ARCH" = arm64 ]; then
        machine=(-M virt -cpu cortex-a57)
        console="console=ttyAMA0"
    else
        qemu_firmware_args "$GUEST_QEMU"
        machine=("${QEMU_FW_ARGS[@]}" -M q35)
        console="console=ttyS0"
        append="no_timer_check $append"
    fi
    GUEST_CMD=("$GUEST_QEMU" "${machine[@]}" -m 512 -smp 1 -accel "$GUEST_ACCEL"
        -kernel "$dir/vmlinuz" -initrd "$dir/initrd.img"
        -append "$console loglevel=3 quiet panic=-1 $append"
        -netdev "$netdev" "${GUEST_DEV_ARGS[@]}"
        -nodefaults -nographic -serial mon:stdio -no-reboot)
    # shellcheck disable=SC2206 # word splitting intended
    [ -n "${QEMU_EXTRA:-}" ] && GUEST_CMD+=($QEMU_EXTRA)
    return 0
}

# guest_run_logged LOG TIMEOUT: run GUEST_CMD without input, the console
# (carriage returns removed) into LOG, announcing "NCMTEST phase=" lines as
# steps. Returns QEMU's status (124: timed out). A hung guest costs a few
# minutes, not the whole TIMEOUT:
# - when the guest kernel reports a lockup (soft lockup, hung task, RCU
#   stall), QEMU gets GUEST_LOCKUP_GRACE seconds (60) more for the
#   backtraces, then is killed ("# killed: guest lockup" in LOG);
# - when the guest prints no "NCMTEST" or "STRESS" line (nor a "# " line
#   of ncm-usbfs-stress) for GUEST_STALL seconds (120; 0: never, for runs
#   with longer silent stretches), Alt-SysRq-8, w, l and t go to its
#   keyboard over QMP (tests/guest/qmp-sysrq.py: every message to the
#   console, blocked tasks, CPU backtraces, all tasks), and QEMU is killed
#   30 s later ("# killed: guest stalled"). Under REPLAY=replay a guest
#   that is silent but whose replay instruction count still grows
#   (tests/guest/qmp-icount.py) is making progress.
# guest_cues_start LOG QOM [qmp-cues.py options...]: a QMP socket on
# GUEST_CMD and tests/guest/qmp-cues.py on it, carrying out the guest's
# "NCMTEST cue=" requests for device QOM (results in LOG.cues.json);
# sets QMP_SOCK and CUES_PID.  guest_cues_wait: wait for it to finish.
guest_cues_start() {
    local log=$1 qom=$2

    shift 2
    QMP_SOCK=$(mktemp -u /tmp/ncm-cues.XXXXXX)
    GUEST_CMD+=(-qmp "unix:$QMP_SOCK,server=on,wait=off")
    python3 "$NCM_TOP/tests/guest/qmp-cues.py" --qmp "$QMP_SOCK" \
        --log "$log" --out "$log.cues.json" --device "$qom" \
        --timeout "$GUEST_TIMEOUT" "$@" 2>"$log.cues.err" &
    CUES_PID=$!
}

guest_cues_wait() {
    wait "$CUES_PID" 2>/dev/null || true
    CUES_PID=""
}

guest_run_logged() {
    local log=$1 tmo=$2 rc pidfile qmp errexit=
    mkdir -p "$(dirname "$log")"
    pidfile=$(mktemp -u /tmp/ncm-qemu-pid.XXXXXX)
    qmp=$(mktemp -u /tmp/ncm-qemu-qmp.XXXXXX)
    {
        printf '# %s\n' "$(date -u '+%Y-%m-%dT%H:%M:%SZ')"
        printf '#'
        printf ' %q' "${GUEST_CMD[@]}"
        printf '\n'
    } > "$log"
    # the caller's errexit back afterwards: a runner without set -e (such
    # as run-replay-test.sh) must not get it from here, or its next
    # failing command ends it before it prints its FAIL lines
    [[ $- == *e* ]] && errexit=1
    set +e
    # (stderr of the group: bash's "Killed" notice when QEMU is killed)
    {
        timeout -k 10 "$tmo" "${GUEST_CMD[@]}" -pidfile "$pidfile" \
            -qmp "unix:$qmp,server=on,wait=off" </dev/null 2>&1 |
            guest_console "$log" "$pidfile" "$qmp"
        rc=${PIPESTATUS[0]}
    } 2>/dev/null
    [ -z "$errexit" ] || set -e
    rm -f "$pidfile" "$qmp"
    [ "$rc" = 124 ] && printf '# timed out after %ss\n' "$tmo" >> "$log"
    # SANITIZE=1: an ASan/UBSan report on the console is a FAIL of its own
    # (scripts/setup/sanitize.sh), whatever the checks make of the run
    sanitizer_fail "guest/sanitizer/$(basename "$log" .log)" "$log" || true
    return "$rc"
}

# guest_console LOG PIDFILE QMP-SOCKET: the reading end of guest_run_logged
guest_console() {
    local log=$1 pidfile=$2 qmp=$3 line buf="" st
    local lockup=0 grace=${GUEST_LOCKUP_GRACE:-60}
    local stall=${GUEST_STALL:-120} progress=$SECONDS kill_at=0
    local icount="" now
    while :; do
        if IFS= read -r -t 5 line; then
            line=$buf${line%$'\r'}
            buf=""
        else
            st=$?
            if [ "$st" -gt 128 ]; then
                buf=$buf$line           # no newline yet: keep the piece
                line=""
            else
                line=$buf$line          # end of output
                [ -n "$line" ] && printf '%s\n' "${line%$'\r'}" >> "$log"
                break
            fi
        fi
        if [ -n "$line" ]; then
            printf '%s\n' "$line" >> "$log"
            case $line in
            *"NCMTEST "*|"STRESS "*|"# "*) progress=$SECONDS ;;
            esac
            case $line in
            *"NCMTEST phase="*) guest_phase "${line##*NCMTEST phase=}" ;;
            *"soft lockup"*|*"blocked for more than"*|*"detected stall"*)
                if [ "$lockup" = 0 ] && [ "$kill_at" = 0 ]; then
                    lockup=$SECONDS
                    kill_at=$((SECONDS + grace))
                    step "guest: kernel lockup report; QEMU goes in ${grace}s"
                    printf '# guest lockup reported; QEMU killed in %ss\n' "$grace" >> "$log"
                fi
                ;;
            esac
        fi
        if [ "$kill_at" = 0 ] && [ "$stall" != 0 ] &&
           [ $((SECONDS - progress)) -ge "$stall" ]; then
            # a replay's progress is its instruction count, not its
            # console: it replays a busy boot (the kernel's APIC timer
            # calibration, a PAUSE loop with a replay checkpoint every ten
            # instructions) many times slower than it was recorded,
            # printing nothing meanwhile
            now=""
            [ "${REPLAY:-}" = replay ] &&
                now=$(timeout 10 python3 "$NCM_TOP/tests/guest/qmp-icount.py" "$qmp" 2>/dev/null || true)
            if [ -n "$now" ] && [ "$now" != "$icount" ]; then
                icount=$now
                progress=$SECONDS
            else
                [ "${REPLAY:-}" = replay ] &&
                    step "guest: the replay no longer advances${icount:+ (instruction $icount)}: diverged from its recording?"
                step "guest: no progress for ${stall}s; SysRq w/l/t, QEMU goes in 30s"
                # a guest that powered off prints nothing more: then it is
                # QEMU that did not exit (and nobody told it to quit)
                if grep -a -q 'reboot: Power down' "$log"; then
                    printf '# guest stalled: no progress for %ss after the guest powered off (QEMU did not exit); sending SysRq 8 w l t\n' "$stall" >> "$log"
                else
                    printf '# guest stalled: no progress for %ss; sending SysRq 8 w l t\n' "$stall" >> "$log"
                fi
                timeout 30 python3 "$NCM_TOP/tests/guest/qmp-sysrq.py" "$qmp" 8 w l t \
                    >> "$log" 2>&1 &
                kill_at=$((SECONDS + 30))
            fi
        fi
        if [ "$kill_at" != 0 ] && [ "$SECONDS" -ge "$kill_at" ]; then
            printf '# killed: guest %s\n' "$([ "$lockup" != 0 ] && echo lockup || echo stalled)" >> "$log"
            [ -s "$pidfile" ] && kill -9 "$(cat "$pidfile")" 2>/dev/null
            kill_at=$((SECONDS + 3600))
        fi
    done
}

# guest_qemu_error LOG: the line QEMU left when it died on its own (an
# assertion, a signal, a sanitizer report), if any
guest_qemu_error() {
    local san
    san=$(sanitizer_report "$1")
    [ -z "$san" ] || { echo "$san"; return 0; }
    grep -a -v '^#' "$1" |
        grep -a -m1 -E 'Assertion .* failed|qemu-system-[a-z0-9_]+: .*(abort|assert|[Ee]rror|fault)|Segmentation fault|core dumped|^Aborted' |
        cut -c1-300 || true
}

# guest_lockup LOG: how the guest kernel hung, if it did: its first
# lockup report (soft lockup, RCU stall, hung task) or, for a guest that
# just stopped ("# guest stalled" from guest_console), the SysRq output;
# with the frames of the stuck task ("func < caller < ..."; interrupt
# frames and "?" guesses left out): for an RCU stall the task where the
# grace-period kthread last ran, for a stall the task SysRq-l interrupted,
# or, when that CPU was idle, the first blocked task of SysRq-w.
guest_lockup() {
    awk '
        function frame(line,   f) {
            if (line ~ / \? / || !match(line, /[A-Za-z_][A-Za-z_0-9.]*\+0x[0-9a-f]+\/0x[0-9a-f]+/))
                return ""
            f = substr(line, RSTART, RLENGTH); sub(/\+.*/, "", f)
            return f ~ /^(asm_|sysvec_|entry_SYSCALL|do_syscall)/ ? "" : f
        }
        # state: 0 looking for a header, 1 waiting for the trace, 2 in it
        state == 0 && /soft lockup|blocked for more than/ {
            head = $0; state = 1; want = "Call Trace:"
        }
        state == 0 && /detected stall/ {
            head = $0; state = 1; want = "Stack dump where RCU GP kthread last ran"
        }
        state == 0 && /^# guest stalled/ {
            head = $0; sub(/^# /, "", head); state = 1; want = "Show backtrace of all active CPUs"
        }
        state == 1 && index($0, want) { state = 2; irq = 0; next }
        state == 2 && want != "Call Trace:" && /Call Trace:/ { next }
        state == 2 && /<IRQ>/ { irq = 1; next }
        state == 2 && /<\/IRQ>/ { irq = 0; next }
        state == 2 && /<\/TASK>/ && n { state = 3 }
        state == 2 && !irq && n < 12 { f = frame($0); if (f != "") fr[n++] = f }
        state == 2 && irq && ni < 6 {
            f = frame($0)
            if (f != "" && f !~ /sysrq|show|dump_stack|input_|atkbd|serio|i8042|nmi|irq_exit|irq_event|softirqs|common_interrupt|handle_edge|_raw_spin/)
                fi_[ni++] = f
        }
        # SysRq-t, in case SysRq-l printed nothing: the task that was
        # running, the one SysRq interrupted
        /sysrq: Show State/ { sh = 1; next }
        sh == 1 && /task:.* state:R / { sh = 2; rirq = 0; mine = 0; nr = 0; next }
        sh == 2 && /task:/ { sh = 1 }
        sh == 2 && /<IRQ>/ { rirq = 1; next }
        sh == 2 && /<\/IRQ>/ { rirq = 0; next }
        sh == 2 && rirq && /sysrq_handle_showstate/ { mine = 1 }
        sh == 2 && /<\/TASK>/ { sh = mine ? 3 : 1 }
        sh == 2 && !rirq && nr < 12 { f = frame($0); if (f != "") rf[nr++] = f }
        # an idle CPU: the first blocked task of SysRq-w instead
        /Show Blocked State/ { blk = 1; next }
        blk == 1 && /sysrq: / { blk = 0 }
        blk == 1 && /task:/ { blk = 2; bt = $0; sub(/^.*task:/, "task ", bt); sub(/ +state:.*/, "", bt); next }
        blk == 2 && /<\/TASK>/ { blk = 3 }
        blk == 2 && nb < 12 { f = frame($0); if (f != "") bf[nb++] = f }
        END {
            if (!state) exit
            sub(/^\[[ 0-9.]*\] /, "", head)
            s = ""
            for (i = 0; i < n; i++) s = s (i ? " < " : "") fr[i]
            if (!n && nr && sh == 3)
                for (i = 0; i < nr; i++) s = s (i ? " < " : "running: ") rf[i]
            if (s ~ /idle/ && nb) {
                s = "CPU idle; blocked " bt ": "
                for (i = 0; i < nb; i++) s = s (i ? " < " : "") bf[i]
            }
            t = ""
            for (i = 0; i < ni; i++) t = t (i ? " < " : "") fi_[i]
            printf "%s%s%s\n", head, (s != "" ? "; trace: " s : ""),
                (t != "" ? "; in an interrupt on top of it: " t : "")
        }
    ' "$1" | cut -c1-800
}

# guest_hc_error LOG: the guest host controller driver's first complaint
# and how many there were ("ERROR Transfer event TRB DMA ptr not part of
# current TD ... (x42)"), if any
guest_hc_error() {
    grep -a -E '[xeuo]hci_hcd .*(ERROR|[Ee]rror|died|halted|not responding|HC died)' "$1" |
        sed 's/^\[[ 0-9.]*\] //' |
        awk 'NR == 1 { first = $0 } END { if (NR) printf "%s%s\n", first, (NR > 1 ? " (x" NR ")" : "") }' |
        cut -c1-300 || true
}

# guest_stuck_stack LOG: the kernel stack(s) /init printed for a process
# that did not come back (dump_stuck in init.sh), "func < caller < ..."
guest_stuck_stack() {
    sed -n '/NCMTEST stuck-stack-begin/,/NCMTEST stuck-stack-end/p' "$1" |
        sed -n 's/^\[<[0-9a-f]*>\] \([^+]*\)+.*/\1/p' | head -n 10 |
        paste -sd'<' | sed 's/</ < /g'
}

guest_phase() {
    # scripts/bench/profile.sh cuts its samples into phases with these times,
    # and takes how busy the host's CPUs were from its /proc/stat line
    [ -z "${GUEST_PHASE_LOG:-}" ] ||
        printf '%s %s | %s\n' "$EPOCHREALTIME" "$1" "$(head -n1 /proc/stat)" \
            >> "$GUEST_PHASE_LOG"
    case $1 in
    boot) step "guest: kernel up, /init running" ;;
    modules) step "guest: loading modules" ;;
    iface) step "guest: waiting for the network interface" ;;
    carrier) step "guest: link up, waiting for carrier" ;;
    ping) step "guest: ping 10.0.2.2" ;;
    iperf-up) step "guest: iperf3 upload (guest -> host)" ;;
    iperf-down) step "guest: iperf3 download (host -> guest)" ;;
    done) step "guest: done, powering off" ;;
    *) step "guest: $1" ;;
    esac
}

# guest_val LOG KEY: the value of the first "NCMTEST KEY=value" line.
guest_val() {
    sed -n "/NCMTEST $2=/{s/.*NCMTEST $2=//p;q}" "$1"
}

# guest_dmesg LOG: the guest's dmesg dumped at the end of the run.
guest_dmesg() {
    sed -n '/NCMTEST dmesg-begin/,/NCMTEST dmesg-end/p' "$1" | sed '1d;$d'
}

# guest_run_with_stats LOG TIMEOUT QOM-ID: guest_run_logged with QEMU kept
# alive after the guest powers off (-no-shutdown) long enough to read the
# usb-ncm counters (qom-get stats; QOM-ID "-" for other NICs) and QEMU's
# CPU time into LOG.stats.json; then QEMU quits.
guest_run_with_stats() {
    local log=$1 tmo=$2 id=$3 sock qpid qom=- rc=0
    [ "$id" = - ] || qom=/machine/peripheral/$id
    sock=$(mktemp -u /tmp/ncm-qmp.XXXXXX)
    GUEST_CMD+=(-no-shutdown -qmp "unix:$sock,server=on,wait=off")
    python3 "$NCM_TOP/tests/guest/qmp-stats.py" "$sock" "$qom" "$tmo" \
        >"$log.stats.json" \
        2>"$log.stats.err" &
    qpid=$!
    guest_run_logged "$log" "$tmo" || rc=$?
    wait "$qpid" 2>/dev/null || true
    rm -f "$sock"
    return "$rc"
}

# guest_stat LOG KEY: a counter from LOG.stats.json ("out_parse_errors.total"
# reaches into the nested object); empty when absent.
guest_stat() {
    python3 - "$1.stats.json" "$2" <<'PY' 2>/dev/null
import json, sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."):
    v = v[k]
print(v)
PY
}

# The runner skeleton every tests/guest/run-*-test.sh uses: one verdict
# line per check, in the format scripts/check/check.sh and CI count
# ("PASS: PREFIX/CHECK", "FAIL: PREFIX/CHECK (WHY)", "SKIP: PREFIX (WHY)"),
# and the summary.  Write the CHECK names as literal strings at the call
# (runner_check ping-56 ...), so that grepping a test's name finds it.
#
# runner_begin PREFIX [LOG]: start counting; PREFIX is the part of every
#   name before the check (guest/jumbo-ehci, dropout, replay, install);
#   with LOG (a path relative to the top) every FAIL ends "; log LOG".
#   A FAIL's WHY gets, in this order: what the script's runner_why CHECK
#   prints when it defines that function (run-guest-test.sh: the
#   timeout), "; $QEMU_DIED" when the script set QEMU_DIED (how QEMU or
#   the guest kernel died), then the log.
# runner_pass CHECK / runner_fail CHECK WHY... / runner_skip WHY
# runner_check CHECK STATUS WHY...: PASS when STATUS (an exit status) is 0,
#   else FAIL with WHY (the words after STATUS, joined).  Conditions run
#   as commands, never eval'd:
#     r=1; [ "$x" = 1 ] && [ "$y" -gt 0 ] && r=0
#     runner_check CHECK "$r" "x=$x y=$y"
#   (r=1 first and "&& r=0" last keep set -e from ending the script.)
# CHECKS=name1,name2 (environment), as kselftest's TESTS=: only those
#   checks are reported; a name is CHECK or PREFIX/CHECK, shell patterns
#   allowed (CHECKS='ping*,guest/ehci/iperf-up').  runner_pass and
#   runner_check obey it; runner_fail called directly (the run itself
#   broke: no boot, no QEMU) always prints.
# runner_selected CHECK: status 0 when CHECKS picks CHECK (or is empty),
#   for a script that can skip the work of a check nobody asked for.
# runner_end [EXTRA]: the summary "PREFIX: N checks passed, M failed
#   [EXTRA]" (a note); returns non-zero when a check failed.
# RUNNER_NPASS, RUNNER_NFAIL: the counts (a FAIL printed elsewhere, as by
#   sanitizer_fail, adds to RUNNER_NFAIL itself).
runner_begin() {
    RUNNER_PREFIX=$1
    RUNNER_LOG=${2:-}
    RUNNER_NPASS=0
    RUNNER_NFAIL=0
    QEMU_DIED=""
}

runner_selected() {
    local pat
    [ -n "${CHECKS:-}" ] || return 0
    local IFS=,
    for pat in $CHECKS; do
        # shellcheck disable=SC2053 # CHECKS holds patterns
        [[ $1 == $pat || $RUNNER_PREFIX/$1 == $pat ]] && return 0
    done
    return 1
}

runner_pass() {
    runner_selected "$1" || return 0
    echo "PASS: $RUNNER_PREFIX/$1"
    RUNNER_NPASS=$((RUNNER_NPASS + 1))
}

runner_fail() {
    local name=$1 why
    shift
    why=$*
    if declare -F runner_why >/dev/null; then
        why=$why$(runner_why "$name" || true)
    fi
    [ -z "${QEMU_DIED:-}" ] || why="$why; $QEMU_DIED"
    [ -z "$RUNNER_LOG" ] || why="$why; log $RUNNER_LOG"
    echo "FAIL: $RUNNER_PREFIX/$name ($why)"
    RUNNER_NFAIL=$((RUNNER_NFAIL + 1))
}

runner_skip() {
    echo "SKIP: $RUNNER_PREFIX ($1)"
}

runner_check() {
    runner_selected "$1" || return 0
    if [ "$2" = 0 ]; then
        runner_pass "$1"
    else
        # (the reason may come in several words: all of them)
        runner_fail "$1" "${*:3}"
    fi
}

# shellcheck disable=SC2120 # EXTRA is optional
runner_end() {
    [ -z "${CHECKS:-}" ] || [ $((RUNNER_NPASS + RUNNER_NFAIL)) != 0 ] ||
        runner_skip "no check of this run matches CHECKS=$CHECKS"
    note "$RUNNER_PREFIX: $RUNNER_NPASS checks passed, $RUNNER_NFAIL failed${1:+ $1}"
    [ "$RUNNER_NFAIL" = 0 ]
}
