# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck shell=bash disable=SC2034
# (SC2034: GUEST_ACCEL and GUEST_ACCEL_WHY are for the scripts that source
#  this.)
#
# Which accelerator guests boot under: ACCEL=auto (default), kvm or tcg.
# Sourced by tests/guest/lib.sh (after scripts/setup/common.sh).
#
# /dev/kvm being there is not enough: on some machines it opens and runs
# a real-mode test program, yet a Linux guest under KVM hangs right after
# the boot loader.  So `auto` boots the guest kernel under KVM once and
# takes KVM only when it reaches /init (the "NCMTEST phase=boot" line of
# tests/guest/init.sh) within NCM_ACCEL_PROBE_S seconds (20).  The verdict
# holds until the machine reboots: it is cached with the boot id, so the
# probe costs at most NCM_ACCEL_PROBE_S once per machine boot.
#
# Where the kernel says which KVM /dev/kvm is, no probe is needed: a
# paravirtual KVM (the kvm_pvm module, KVM nested inside a VM without
# hardware virtualization) hangs an ordinary guest kernel after "Probing
# EDD" and aborts -cpu host/max on MSR 0x10a, so with kvm_pvm loaded and
# neither kvm_intel nor kvm_amd (whose /dev/kvm runs ordinary guests) it
# is refused at once, like a missing /dev/kvm.  Any other /dev/kvm is
# probed.
#
#   ACCEL=auto   KVM if the probe boot works, else TCG, saying why
#   ACCEL=kvm    KVM, or stop at once saying why it cannot be used
#   ACCEL=tcg    TCG, no probe
#
# Environment for tests (tests/tools/test_accel.py): NCM_KVM_DEV
# (/dev/kvm), NCM_BOOT_ID_FILE (/proc/sys/kernel/random/boot_id),
# NCM_ACCEL_CACHE (NCM_CACHE/accel-probe), NCM_ACCEL_PROBE_S,
# NCM_SYS_MODULE_DIR (/sys/module).

NCM_KVM_DEV=${NCM_KVM_DEV:-/dev/kvm}
NCM_BOOT_ID_FILE=${NCM_BOOT_ID_FILE:-/proc/sys/kernel/random/boot_id}
NCM_ACCEL_CACHE=${NCM_ACCEL_CACHE:-$NCM_CACHE/accel-probe}
NCM_ACCEL_PROBE_S=${NCM_ACCEL_PROBE_S:-20}
NCM_SYS_MODULE_DIR=${NCM_SYS_MODULE_DIR:-/sys/module}

# qemu_firmware_args QEMU: the -L options QEMU needs for SeaBIOS and the
# option ROMs: none for an installed QEMU (scripts/setup/install-qemu.sh
# puts them in its bin/../share/qemu, where it looks first), Debian's
# directories for the one in the build tree (whose +ds source has no blobs)
qemu_firmware_args() {
    local d
    d=$(dirname "$1")
    if [ -f "$d/../share/qemu/bios-256k.bin" ]; then
        QEMU_FW_ARGS=()
    else
        QEMU_FW_ARGS=(-L /usr/share/seabios -L /usr/share/qemu)
    fi
}

# accel_kvm_blocker QEMU: why KVM cannot be tried at all (nothing if it
# can); cheap checks, never cached, so that fixing them takes effect at once
accel_kvm_blocker() {
    local qemu=$1
    if ! grep -qx kvm <<<"$("$qemu" -accel help 2>/dev/null)"; then
        echo "$qemu was built without KVM (rebuild: make qemu)"
    elif [ ! -e "$NCM_KVM_DEV" ]; then
        echo "$NCM_KVM_DEV does not exist (no KVM in this kernel, or" \
             "virtualization is off in the firmware or the hypervisor)"
    elif [ -d "$NCM_SYS_MODULE_DIR/kvm_pvm" ] &&
         [ ! -d "$NCM_SYS_MODULE_DIR/kvm_intel" ] &&
         [ ! -d "$NCM_SYS_MODULE_DIR/kvm_amd" ]; then
        echo "$NCM_KVM_DEV is a paravirtual KVM (module kvm_pvm, no" \
             "kvm_intel or kvm_amd), which hangs ordinary guest kernels"
    elif ! { : <>"$NCM_KVM_DEV"; } 2>/dev/null; then
        echo "$NCM_KVM_DEV cannot be opened read-write by $(id -un)" \
             "(add the user to group kvm)"
    fi
}

# accel_probe QEMU KERNEL INITRD: boot KERNEL under KVM until /init says
# "NCMTEST phase=boot"; prints "ok" or "no <why>"
accel_probe() {
    local qemu=$1 kernel=$2 initrd=$3 dir pid end last err
    dir=$(mktemp -d /tmp/ncm-accel-probe.XXXXXX)
    qemu_firmware_args "$qemu"
    "$qemu" "${QEMU_FW_ARGS[@]}" \
        -M q35 -m 256 -smp 1 -accel kvm \
        -kernel "$kernel" -initrd "$initrd" \
        -append "console=ttyS0 loglevel=3 quiet panic=-1 ncm.mode=probe" \
        -nodefaults -display none -monitor none \
        -serial "file:$dir/console" -no-reboot \
        </dev/null >"$dir/err" 2>&1 &
    pid=$!
    end=$((SECONDS + NCM_ACCEL_PROBE_S))
    while :; do
        if grep -qa 'NCMTEST phase=boot' "$dir/console" 2>/dev/null; then
            kill "$pid" 2>/dev/null
            wait "$pid" 2>/dev/null
            echo ok
            break
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            wait "$pid" 2>/dev/null
            err=$(grep -a . "$dir/err" | tail -n 1 | cut -c1-160)
            echo "no QEMU under KVM stopped before /init: ${err:-no message}"
            break
        fi
        if [ "$SECONDS" -ge "$end" ]; then
            kill -9 "$pid" 2>/dev/null
            wait "$pid" 2>/dev/null
            last=$(tr -d '\r' <"$dir/console" 2>/dev/null | grep -a . |
                   tail -n 1 | cut -c1-80)
            echo "no a probe boot under KVM did not reach /init in" \
                 "${NCM_ACCEL_PROBE_S} s (last console line:" \
                 "${last:-none})"
            break
        fi
        sleep 0.1
    done
    rm -rf "$dir"
}

# accel_kvm_verdict QEMU KERNEL INITRD: "ok" or "no <why>" for KVM on this
# machine boot, from the cache or a probe (which then goes in the cache)
accel_kvm_verdict() {
    local boot v b
    boot=$(cat "$NCM_BOOT_ID_FILE" 2>/dev/null) || boot=""
    if [ -n "$boot" ] && [ -f "$NCM_ACCEL_CACHE" ] &&
       IFS= read -r b <"$NCM_ACCEL_CACHE" && [ "$b" = "$boot" ]; then
        sed -n 2p "$NCM_ACCEL_CACHE"
        return 0
    fi
    v=$(accel_probe "$@")
    if [ -n "$boot" ]; then
        mkdir -p "$(dirname "$NCM_ACCEL_CACHE")"
        printf '%s\n%s\n' "$boot" "$v" >"$NCM_ACCEL_CACHE.$$"
        mv "$NCM_ACCEL_CACHE.$$" "$NCM_ACCEL_CACHE"
    fi
    echo "$v"
}

# guest_accel_pick QEMU KERNEL INITRD: set GUEST_ACCEL (kvm|tcg) and
# GUEST_ACCEL_WHY (one line) from ACCEL; dies when ACCEL=kvm cannot be had
guest_accel_pick() {
    local qemu=$1 kernel=$2 initrd=$3 mode=${ACCEL:-auto} why v kept=""
    case $mode in
    tcg)
        GUEST_ACCEL=tcg GUEST_ACCEL_WHY="ACCEL=tcg"
        return 0 ;;
    auto|kvm) ;;
    *) die "ACCEL=$mode: unknown accelerator" "use ACCEL=auto, kvm or tcg" ;;
    esac
    # an arm64 guest on another architecture: KVM runs a host's own only
    # (and qemu-system-aarch64 is built without it there: qemu-tree.sh)
    if [ "${NCM_ARCH:-x86_64}" = arm64 ] && [ "$(uname -m)" != aarch64 ]; then
        [ "$mode" = kvm ] &&
            die "ACCEL=kvm: an arm64 guest on this $(uname -m) host runs under TCG only" \
                "leave ACCEL unset or use ACCEL=tcg"
        GUEST_ACCEL=tcg GUEST_ACCEL_WHY="ARCH=arm64 on an $(uname -m) host: TCG"
        return 0
    fi
    # record/replay counts instructions, which only TCG can do
    if [ -n "${REPLAY:-}" ]; then
        [ "$mode" = kvm ] &&
            die "ACCEL=kvm: REPLAY=$REPLAY needs TCG (icount)" \
                "leave ACCEL unset or use ACCEL=tcg"
        GUEST_ACCEL=tcg GUEST_ACCEL_WHY="REPLAY=$REPLAY needs TCG"
        return 0
    fi
    why=$(accel_kvm_blocker "$qemu")
    if [ -z "$why" ]; then
        v=$(accel_kvm_verdict "$qemu" "$kernel" "$initrd")
        [ "$v" = ok ] || why=${v#no }
        kept="the verdict is kept until reboot in $NCM_ACCEL_CACHE"
    fi
    if [ -z "$why" ]; then
        GUEST_ACCEL=kvm
        GUEST_ACCEL_WHY="ACCEL=$mode: a probe boot under KVM reached /init"
        return 0
    fi
    [ "$mode" = kvm ] &&
        die "ACCEL=kvm: KVM does not work here: $why" \
            "use ACCEL=tcg (or leave ACCEL unset: auto picks TCG here)" \
            ${kept:+"$kept"}
    GUEST_ACCEL=tcg
    GUEST_ACCEL_WHY="ACCEL=auto: TCG, because $why"
}
