# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck shell=bash
#
# The NIC configurations that make bench and make profile boot, one per
# line.  Sourced after tests/guest/lib.sh; config_field NAME FIELD prints
# one field (2: controller, 3: -device argument, 4: extra guest kernel
# parameters), config_guest_cmd prepares a boot of one on a backend
# (tests/guest/netns.sh: tap or slirp).
#
# virtio-net-nooff is virtio-net-pci with every offload off (checksum, GSO,
# TSO, ECN, UFO, USO, both directions): one frame per packet each way, the
# per-frame limit of this guest. An NCM device cannot offer offloads; with
# them virtio-net moves 64 KiB segments per descriptor.
#
# ncm-64k-sync reads bulk OUT in the vCPU thread, as before the bottom half.
# ncm-64k-nocoalesce sends every IN NTB at the end of the main-loop
# iteration that filled it, as before in-coalesce-us (default 200).
# ncm-64k-dN advertise wNtbOutMaxDatagrams N, so that cdc_ncm sends an NTB
# as soon as it holds N datagrams instead of waiting for its TX timer.
# name | controller | device | kernel parameters
CONFIG_TABLE="
ncm-16k|xhci|usb-ncm-dl,id=ncm|ncm.rx_max=16384 ncm.tx_max=16384
ncm-32k|xhci|usb-ncm-dl,id=ncm|ncm.rx_max=32768 ncm.tx_max=32768
ncm-64k|xhci|usb-ncm-dl,id=ncm|ncm.rx_max=65536 ncm.tx_max=65536
ncm-64k-nocoalesce|xhci|usb-ncm-dl,id=ncm,in-coalesce-us=0|ncm.rx_max=65536 ncm.tx_max=65536
ncm-64k-sync|xhci|usb-ncm-dl,id=ncm,x-deferred-out=off|ncm.rx_max=65536 ncm.tx_max=65536
ncm-64k-t20|xhci|usb-ncm-dl,id=ncm|ncm.rx_max=65536 ncm.tx_max=65536 ncm.sysfs=tx_timer_usecs=20
ncm-64k-d2|xhci|usb-ncm-dl,id=ncm,ntb-out-max-datagrams=2|ncm.rx_max=65536 ncm.tx_max=65536
ncm-64k-d4|xhci|usb-ncm-dl,id=ncm,ntb-out-max-datagrams=4|ncm.rx_max=65536 ncm.tx_max=65536
ncm-64k-d8|xhci|usb-ncm-dl,id=ncm,ntb-out-max-datagrams=8|ncm.rx_max=65536 ncm.tx_max=65536
ncm-64k-d16|xhci|usb-ncm-dl,id=ncm,ntb-out-max-datagrams=16|ncm.rx_max=65536 ncm.tx_max=65536
usb-net|xhci|usb-net|
virtio-net|pci|virtio-net-pci|
virtio-net-nooff|pci|virtio-net-pci,csum=off,gso=off,host_tso4=off,host_tso6=off,host_ecn=off,host_ufo=off,host_uso=off,guest_csum=off,guest_tso4=off,guest_tso6=off,guest_ecn=off,guest_ufo=off,guest_uso4=off,guest_uso6=off|
"

. "$(dirname "${BASH_SOURCE[0]}")/../../tests/guest/netns.sh"

config_field() {
    awk -F'|' -v n="$1" -v f="$2" '$1 == n { print $f }' <<<"$CONFIG_TABLE"
}

# config_guest_cmd NAME GUESTDIR VARNAME APPEND [BACKEND NS]: GUEST_CMD for
# a bench-mode boot of configuration NAME on BACKEND (slirp, the default, or
# tap in namespace NS) against that backend's iperf3 server, with the guest
# kernel parameters APPEND; CONFIG_QOM is the usb-ncm device's id for
# guest_run_with_stats ("-" for other NICs). VARNAME names the variable the
# user set, for the message when NAME is unknown.
# shellcheck disable=SC2034 # CONFIG_QOM is read by the sourcing script
config_guest_cmd() {
    local name=$1 dir=$2 var=$3 append=$4 backend=${5:-slirp} ns=${6:-} ctrl dev
    ctrl=$(config_field "$name" 2)
    dev=$(config_field "$name" 3)
    [ -n "$dev" ] || die "unknown configuration '$name'" \
        "$var takes: $(awk -F'|' 'NF > 1 { printf "%s ", $1 }' <<<"$CONFIG_TABLE")"
    guest_device_args "$ctrl" "$dev"
    CONFIG_QOM=-
    case $dev in *id=ncm*) CONFIG_QOM=ncm ;; esac
    guest_qemu_cmd "$dir" "ncm.mode=bench ncm.driver=$GUEST_DRIVER \
ncm.port=$(backend_port "$backend") $append $(config_field "$name" 4)" \
        "$(backend_netdev "$backend")"
    backend_apply "$backend" "$ns"
}

# bench_snapshot_qemu DIR: run this whole measurement on a copy of the
# QEMU binary, so that a rebuild in the middle of it (make qemu from
# another shell) does not mix two builds in one table.
bench_snapshot_qemu() {
    guest_need_qemu
    cp "$GUEST_QEMU" "$1/qemu-system-x86_64"
    GUEST_QEMU=$1/qemu-system-x86_64
}

# bench_boot LOG TIMEOUT QOM-ID [PIDFILE]: guest_run_with_stats with the
# guest's phases (LOG.phases) and QEMU's CPU time and RSS every 0.25 s
# (LOG.proc, scripts/bench/bench-proc-sampler.py) recorded next to LOG;
# PIDFILE gets QEMU's pid as soon as it runs.
bench_boot() {
    local log=$1 tmo=$2 qom=$3 pidfile=${4:--} sock spid rc=0
    sock=$(mktemp -u /tmp/ncm-bench-qmp.XXXXXX)
    GUEST_CMD+=(-qmp "unix:$sock,server=on,wait=off")
    python3 "$NCM_TOP/scripts/bench/bench-proc-sampler.py" "$sock" "$log.proc" \
        "$pidfile" "$tmo" 2>"$log.proc.err" &
    spid=$!
    rm -f "$log.phases"
    GUEST_PHASE_LOG=$log.phases guest_run_with_stats "$log" "$tmo" "$qom" || rc=$?
    wait "$spid" 2>/dev/null || true
    rm -f "$sock"
    return "$rc"
}
