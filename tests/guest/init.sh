#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck shell=dash disable=SC2034
# (SC2034: the parameters are for the mode files, init-*.sh)
#
# /init of the usb-ncm-dl test guest (busybox ash). tests/guest/image.sh
# copies this file into the initramfs, every tests/guest/init.d/*.sh into
# its /etc/ncm/init.d/ and every tests/guest/init-*.sh into its /etc/ncm/.
# This file mounts what the guest needs and runs the mode; the parameters
# (the kernel command line ncm.*, see init.d/params.sh) and the helpers
# the modes share (init.d/net.sh, hang.sh, reenum.sh) are sourced from
# init.d/; each mode is in a file of its own, sourced last (mode_file, at
# the end): init-MODE.sh defines MODE_main.
#
# test/run/bench print machine-readable "NCMTEST key=value" lines, then dump
# dmesg between "NCMTEST dmesg-begin" / "NCMTEST dmesg-end" and power off.
# "NCMTEST phase=X" lines mark progress for the host scripts.

export PATH=/bin:/sbin:/usr/bin:/usr/sbin
export HOME=/root

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
# The initramfs has no /dev/console node: take it from devtmpfs now.
exec 0</dev/console 1>/dev/console 2>&1
# Only emergencies on the console from here on: our lines stay whole.
dmesg -n 1
# Every SysRq function, from /proc/sysrq-trigger and from the keyboard
# (tests/guest/lib.sh presses Alt-SysRq-8/w/l/t over QMP when we hang).
echo 1 > /proc/sys/kernel/sysrq
hostname ncm-guest
ip link set lo up

# shellcheck source=tests/guest/init.d/params.sh
. /etc/ncm/init.d/params.sh
t() { echo "NCMTEST $*"; }

# Seconds since boot with two decimals.
now() { cut -d' ' -f1 /proc/uptime; }

finish() {
    t phase=done
    t "uptime=$(now)"
    t dmesg-begin
    dmesg
    t dmesg-end
    sync
    poweroff -f
    sleep 5
}

load_modules() {
    local m
    for m in $(cat /etc/ncm/modules 2>/dev/null); do
        modprobe "$m" 2>/tmp/modprobe.err ||
            t "modprobe_failed=$m $(head -n1 /tmp/modprobe.err)"
    done
}

# shellcheck source=tests/guest/init.d/net.sh
. /etc/ncm/init.d/net.sh
# shellcheck source=tests/guest/init.d/hang.sh
. /etc/ncm/init.d/hang.sh
# shellcheck source=tests/guest/init.d/reenum.sh
. /etc/ncm/init.d/reenum.sh

# mode_file MODE: which /etc/ncm/init-FILE.sh (tests/guest/init-FILE.sh)
# carries MODE; it defines FILE_main, which runs the mode
mode_file() {
    case $1 in
    test|run|bench) echo test ;;
    replug|suspend|mcast|ntbsweep) echo pm ;;
    profiles|migrate|soak|scale|stress|shell) echo "$1" ;;
    *) return 1 ;;
    esac
}

t phase=boot
t "kernel=$(uname -r)"
t "mode=$MODE"
t phase=modules
load_modules
t phase=iface
if ! find_iface; then
    t iface=none
    t "error=no network interface appeared (driver $DRIVER) within ${WAIT}s"
    if [ "$MODE" = shell ]; then
        . /etc/ncm/init-shell.sh
        shell_mode
    fi
    finish
fi

# the mode: its file, then its FILE_main
if ! MODE_FILE=$(mode_file "$MODE"); then
    t "error=unknown ncm.mode=$MODE"
    finish
fi
# shellcheck source=/dev/null # (the initramfs' copy of tests/guest/init-*.sh)
. "/etc/ncm/init-$MODE_FILE.sh"
"${MODE_FILE}_main"
finish
