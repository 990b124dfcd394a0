# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck shell=bash disable=SC2034
# (SC2034: the REPLAY_* variables are for the scripts that source this.)
#
# Record/replay of a guest run (docs/system/replay.rst): sourced after
# tests/guest/lib.sh by the runners that take REPLAY= (run-guest.sh for
# make run/shell/record/replay, dropout-run.sh, run-replay-test.sh).
#
#   REPLAY=record   run as usual, under -icount shift=auto,rr=record, with
#                   a filter-replay on every netdev: the log of everything
#                   non-deterministic (packets from slirp, console input,
#                   clock warps) goes to build/replay/NAME.bin, a VM
#                   snapshot "init" at the start to NAME.qcow2 (for
#                   reverse-step/reverse-continue), the QEMU command line
#                   to NAME.cmd
#   REPLAY=replay   run NAME.cmd again with rr=replay: the guest executes
#                   the same instructions and prints the same console
#                   output, whatever the host does meanwhile
#   REPLAY_GDB=1    (replay) QEMU's gdbstub on tcp::1234 (REPLAY_GDB_PORT),
#                   the VM stopped before its first instruction; prints the
#                   gdb command line (with the guest kernel's vmlinux when
#                   one is found: KERNEL_VMLINUX, else Debian's -dbg package
#                   in REPLAY_DBG_DIR)
#   REPLAY_TRACE="usb_ncm_out_merged usb_ncm_in_ntb ..."   QEMU trace
#                   events (patterns) written to NAME.record.trace and
#                   NAME.replay.trace: a replay must write the recording's
#                   (the log backend without -msg timestamp has no times)
#   REPLAY_SNAPSHOT=0   record without the snapshot (needed for a device
#                   that does not migrate, such as usb-net; no reverse
#                   debugging then)
#   REPLAY_DIR      default build/replay

REPLAY=${REPLAY:-}
REPLAY_DIR=${REPLAY_DIR:-$NCM_BUILD/replay}

# replay_check: REPLAY is empty, record or replay
replay_check() {
    case $REPLAY in
    ""|record|replay) ;;
    *) die "REPLAY=$REPLAY" "use REPLAY=record or REPLAY=replay" ;;
    esac
    return 0
}

# replay_netdevs: the ids of GUEST_CMD's -netdev options, one a line
replay_netdevs() {
    local i
    for ((i = 0; i < ${#GUEST_CMD[@]} - 1; i++)); do
        [ "${GUEST_CMD[i]}" = -netdev ] || continue
        tr ',' '\n' <<<"${GUEST_CMD[i + 1]}" | sed -n 's/^id=//p'
    done
}

# replay_cmd NAME: turn GUEST_CMD (from guest_qemu_cmd) into a recording
# (REPLAY=record) or into the recorded command line in replay mode
# (REPLAY=replay; GUEST_CMD is then the one saved by the recording).
# Sets REPLAY_BASE (build/replay/NAME). Nothing without REPLAY.
replay_cmd() {
    local name=$1 nd i snap=""
    REPLAY_BASE=$REPLAY_DIR/$name
    replay_check
    case $REPLAY in
    record)
        mkdir -p "$REPLAY_DIR"
        rm -f "$REPLAY_BASE".*
        # gdb on the replay needs vmlinux's addresses: no KASLR; and
        # -icount needs TCG, whatever ACCEL picked (tests/guest/accel.sh)
        for ((i = 0; i < ${#GUEST_CMD[@]} - 1; i++)); do
            case ${GUEST_CMD[i]} in
            -append) GUEST_CMD[i + 1]="${GUEST_CMD[i + 1]} nokaslr" ;;
            -accel) GUEST_CMD[i + 1]=tcg ;;
            esac
        done
        # the snapshots live in an image no guest device uses
        if [ "${REPLAY_SNAPSHOT:-1}" = 0 ]; then
            :
        elif command -v qemu-img >/dev/null &&
             qemu-img create -q -f qcow2 "$REPLAY_BASE.qcow2" 64M; then
            snap=",rrsnapshot=init"
            GUEST_CMD+=(-drive "file=$REPLAY_BASE.qcow2,if=none,id=rr-snapshots")
        else
            note "no qemu-img (make deps): recording without a snapshot," \
                 "so no reverse debugging in its replays"
        fi
        GUEST_CMD+=(-icount "shift=auto,rr=record,rrfile=$REPLAY_BASE.bin$snap")
        for nd in $(replay_netdevs); do
            GUEST_CMD+=(-object "filter-replay,id=rr-$nd,netdev=$nd")
        done
        # the command word by word, NUL-separated (data, read back below)
        printf '%s\0' "${GUEST_CMD[@]}" >"$REPLAY_BASE.cmd"
        replay_trace_args
        ;;
    replay)
        [ -s "$REPLAY_BASE.bin" ] && [ -s "$REPLAY_BASE.cmd" ] ||
            die "no recording $REPLAY_BASE.bin" \
                "record it first: REPLAY=record with the same command"
        mapfile -d '' -t GUEST_CMD <"$REPLAY_BASE.cmd"
        for ((i = 0; i < ${#GUEST_CMD[@]}; i++)); do
            GUEST_CMD[i]=${GUEST_CMD[i]/,rr=record,/,rr=replay,}
        done
        if [ "${REPLAY_GDB:-0}" != 0 ]; then
            GUEST_CMD+=(-gdb "tcp::${REPLAY_GDB_PORT:-1234}" -S)
            # a debugging session is quiet for as long as it likes
            GUEST_STALL=0
            GUEST_TIMEOUT=${REPLAY_GDB_TIMEOUT:-86400}
        fi
        replay_trace_args
        ;;
    esac
    return 0
}

# replay_trace_args: REPLAY_TRACE's events into NAME.REPLAY.trace (not in
# NAME.cmd: the replay writes its own file)
replay_trace_args() {
    local ev
    rm -f "$REPLAY_BASE.$REPLAY.trace"
    [ -n "${REPLAY_TRACE:-}" ] || return 0
    GUEST_CMD+=(-D "$REPLAY_BASE.$REPLAY.trace")
    for ev in $REPLAY_TRACE; do
        GUEST_CMD+=(-trace "$ev")
    done
    # With an rrsnapshot the recording saves it and the replay loads it,
    # after a reset of its own (RESET_TYPE_SNAPSHOT_LOAD) that the device
    # sees and the recording never had: mark where the recorded run starts
    # (replay_device_trace)
    case " ${GUEST_CMD[*]} " in
    *rrsnapshot=*)
        for ev in $REPLAY_MARK_EVENTS; do
            GUEST_CMD+=(-trace "$ev")
        done ;;
    esac
    for ev in $REPLAY_CONTEXT_EVENTS; do
        GUEST_CMD+=(-trace "$ev")
    done
}

# Where the recorded run starts in a trace: the recording saved its
# snapshot, the replay loaded it (replay_trace_args)
REPLAY_MARK_EVENTS="savevm_state_setup qemu_loadvm_state_post_main"
# Context for a trace that differs, not compared: when the VM stopped and
# ran (cues, replay breaks, the guest's power-off, quit), when QEMU was
# asked to shut down, and the port's view of the device
REPLAY_CONTEXT_EVENTS="runstate_set qemu_system_shutdown_request
 usb_port_attach usb_port_detach"

# replay_events_re "EVENT...": an awk regex for lines of those events
replay_events_re() {
    echo "^($(printf '%s' "$1" | tr -s ' \n' '|'))( |\$)"
}

# replay_device_trace FILE: the device's trace events (REPLAY_TRACE's,
# not the context events replay_trace_args adds) of the recorded run
# itself, those after the snapshot was saved (recording) or loaded
# (replay); the whole file when there is no snapshot
replay_device_trace() {
    awk -v mark="$(replay_events_re "$REPLAY_MARK_EVENTS")" \
        -v ctx="$(replay_events_re "$REPLAY_CONTEXT_EVENTS")" '
         $0 ~ mark { n = 0; delete keep; next }
         $0 ~ ctx { next }
         { keep[++n] = $0 }
         END { for (i = 1; i <= n; i++) print keep[i] }' "$1"
}

# replay_trace_context FILE LINE: where the device's LINE-th event (as
# replay_device_trace numbers them) sits in FILE, with the context events
# around it: the 8 lines of FILE before it and the 8 after, for a failure
# that is seen only in CI's log
replay_trace_context() {
    awk -v want="$2" -v mark="$(replay_events_re "$REPLAY_MARK_EVENTS")" \
        -v ctx="$(replay_events_re "$REPLAY_CONTEXT_EVENTS")" '
         $0 ~ mark { n = 0; start = NR }
         { line[NR] = $0 }
         $0 !~ mark && $0 !~ ctx { if (++n == want) at = NR }
         END {
             if (!at) at = NR + 1
             for (i = at - 8; i <= at + 8; i++)
                 if (i > start && i in line)
                     printf "%s %s\n", (i == at ? ">" : " "), line[i]
         }' "$1"
}

# replay_vmlinux: the guest kernel's vmlinux with symbols, if there is one
# (KERNEL_VMLINUX, the vmlinux next to KERNEL_IMAGE, or Debian's
# linux-image-VERSION-dbg unpacked under REPLAY_DBG_DIR)
replay_vmlinux() {
    local ver=$1 d
    if [ -n "${KERNEL_VMLINUX:-}" ]; then
        echo "$KERNEL_VMLINUX"
        return 0
    fi
    if [ -n "${KERNEL_IMAGE:-}" ]; then
        d=$(dirname "$KERNEL_IMAGE")
        for f in "$d/vmlinux" "$d/../../../vmlinux"; do
            [ -f "$f" ] && { echo "$f"; return 0; }
        done
    fi
    d=${REPLAY_DBG_DIR:-$NCM_CACHE/kernel-dbg}
    for f in "$d/$ver/usr/lib/debug/boot/vmlinux-$ver" \
             "/usr/lib/debug/boot/vmlinux-$ver"; do
        [ -f "$f" ] && { echo "$f"; return 0; }
    done
    return 1
}

# replay_gdb_hint KERNEL-VERSION: how to attach gdb to the replay
replay_gdb_hint() {
    local ver=$1 vml port=${REPLAY_GDB_PORT:-1234}
    if vml=$(replay_vmlinux "$ver"); then
        note "gdb: gdb -ex 'target remote :$port' $vml"
    else
        note "gdb: gdb -ex 'target remote :$port'   (no vmlinux for $ver:" \
             "KERNEL_VMLINUX=..., or tests/guest/kernel-dbg.sh $ver for" \
             "Debian's linux-image-$ver-dbg)"
    fi
    note "the VM waits stopped: 'continue' in gdb runs the replay;" \
         "reverse-stepi / reverse-continue go back (snapshot 'init')"
}

# replay_console LOG: the guest's console output in LOG (what a replay
# must reproduce): the harness's own "# " lines left out, and (SANITIZE=1)
# ASan's warnings about QEMU's coroutine stacks, which name QEMU's pid and
# come when a stack switch happens to meet them (errors are
# sanitizer_fail's, scripts/setup/sanitize.sh)
replay_console() {
    grep -a -v '^# ' "$1" |
        grep -a -v '^qemu-system-[a-z0-9_]*: terminating on signal' |
        grep -a -v -E '^==[0-9]+==WARNING: ASan |^False positive error reports may follow$|^For details see https://github.com/google/sanitizers/issues/189$'
}

# replay_compare RECORD-LOG REPLAY-LOG: 0 when the replay printed the
# recording's console output; else the first line that differs on stdout
replay_compare() {
    local d
    d=$(diff <(replay_console "$1") <(replay_console "$2") | head -n 6) && return 0
    printf '%s\n' "$d" | grep -a '^[<>]' | head -n 2 | cut -c1-200
    return 1
}
