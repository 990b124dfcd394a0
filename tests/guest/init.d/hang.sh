# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck shell=dash disable=SC2034
#
# Sourced by /init (tests/guest/init.sh): waiting with a timeout, what a
# stuck process is doing, the kernel's lockup detectors, and the live
# write of a cdc_ncm sysfs attribute that may hang.

secs() { cut -d. -f1 /proc/uptime; }

# wait_file FILE SECONDS: until FILE exists (0) or the time is up (1).
# Background jobs write their exit status to a file when they end: a
# finished job the shell has not reaped yet would still pass kill -0.
wait_file() {
    local end=$(($(secs) + $2))
    while [ ! -e "$1" ]; do
        [ "$(secs)" -ge "$end" ] && return 1
        sleep 0.2
    done
    return 0
}

# dump_stuck PID: what a process (and its children) stuck in the kernel is
# doing, then every blocked task, CPU and task (sysrq w, l, t) on the
# console
dump_stuck() {
    local p pids=$1
    dmesg -n 8
    for p in /proc/[0-9]*; do
        [ "$(cut -d' ' -f4 "$p/stat" 2>/dev/null)" = "$1" ] && pids="$pids ${p#/proc/}"
    done
    for p in $pids; do
        t "stuck.pid=$p $(cat "/proc/$p/comm" 2>/dev/null)"
        t "stuck.wchan=$(cat "/proc/$p/wchan" 2>/dev/null)"
        t "stuck.state=$(sed -n 's/^State:[[:space:]]*//p' "/proc/$p/status" 2>/dev/null)"
        t stuck-stack-begin
        cat "/proc/$p/stack" 2>&1
        t stuck-stack-end
    done
    echo w > /proc/sysrq-trigger
    echo l > /proc/sysrq-trigger
    echo t > /proc/sysrq-trigger
    sleep 2
}

# The kernel's lockup detectors, quicker than their defaults, so that a
# hang comes with a backtrace on the console (soft lockup after 10 s,
# hung task after 20 s).
lockup_watch() {
    echo 5 > /proc/sys/kernel/watchdog_thresh 2>/dev/null
    echo 20 > /proc/sys/kernel/hung_task_timeout_secs 2>/dev/null
    echo 0 > /proc/sys/kernel/softlockup_panic 2>/dev/null
    echo 1 > /proc/sys/kernel/softlockup_all_cpu_backtrace 2>/dev/null
}

# live_write ATTR VALUE TAG: write VALUE to cdc_ncm's ATTR, at most
# $RAISE_TIMEOUT s; keys TAG.write=ok|fail ...|hang ..., TAG.readback.
# Returns 2 after a hang (with dump_stuck), 1 after a failed write.
live_write() {
    local f=/sys/class/net/$IFACE/cdc_ncm/$1 pid
    if [ ! -w "$f" ]; then
        t "$3.write=absent"
        return 1
    fi
    rm -f /tmp/raise.rc
    # shellcheck disable=SC2320 # the status of the write is the one wanted
    (echo "$2" > "$f" 2>/tmp/raise.err; echo $? > /tmp/raise.rc) &
    pid=$!
    if ! wait_file /tmp/raise.rc "$RAISE_TIMEOUT"; then
        t "$3.write=hang (no return within ${RAISE_TIMEOUT}s)"
        t "live_raise=hang writing $2 to $1"
        dump_stuck "$pid"
        return 2
    fi
    if [ "$(cat /tmp/raise.rc 2>/dev/null)" = 0 ]; then
        t "$3.write=ok"
    else
        t "$3.write=fail $(cat /tmp/raise.err 2>/dev/null)"
        return 1
    fi
    t "$3.readback=$(cat "$f")"
    return 0
}
