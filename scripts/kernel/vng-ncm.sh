#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# usb-ncm-dl under virtme-ng: boot a kernel with `vng` (the developer's own
# runner, installed by make deps-kernel) on qemu-xhci + usb-ncm-dl on a
# -netdev user network, and check that cdc_ncm binds and answers a ping.
#
#   scripts/kernel/vng-ncm.sh [KERNEL]              the check (make vng):
#                                                   one boot, one verdict line
#   scripts/kernel/vng-ncm.sh --scenario zlp [KERNEL]
#                                                   make scenario's zlp-merge
#                                                   under vng (make vng
#                                                   SCENARIO=zlp)
#   scripts/kernel/vng-ncm.sh [KERNEL] -- VNG-ARGS  vng on the dock with your
#                                                   own arguments (--exec CMD;
#                                                   none: a shell)
#   scripts/kernel/vng-ncm.sh --print-opts          the vng options alone, one
#                                                   a line, for your own vng:
#       vng --run arch/x86/boot/bzImage $(scripts/kernel/vng-ncm.sh --print-opts)
#
# KERNEL (or VNG_RUN): what `vng --run` takes (a kernel tree built by
# `vng --build`, a bzImage or vmlinuz), a linux-image-*.deb, or a Debian
# package name (linux-image-amd64 is bookworm's current kernel; the .deb is
# fetched into $NCM_CACHE/debs and unpacked into $NCM_CACHE/vng-kernels,
# modules beside the image, where vng finds them).  Default: KERNEL_PACKAGE,
# else linux-image-amd64.  The kernel needs what vng needs (virtio-pci,
# 9p, virtio-serial; Debian's have them as modules) plus xhci_pci and
# cdc_ncm, as modules or built in.
#
# Environment:
#   QEMU           the QEMU (default build/qemu/qemu-system-x86_64, make qemu;
#                  or make install's PREFIX/bin/qemu-system-x86_64, which
#                  finds its firmware itself); it needs virtio-9p, which
#                  scripts/setup/qemu-tree.sh configures
#   ACCEL          tcg: vng --disable-kvm; kvm: vng's own choice (KVM);
#                  auto (default): KVM only when tests/guest/accel.sh's probe
#                  (make run does it) found it working since this boot
#   VNG_NCM_PROPS  more usb-ncm-dl properties (",zlp=required,...")
#   VNG_PINGS      pings to 10.0.2.2 (5); VNG_TIMEOUT seconds for the boot (300)
#
# Scenarios (--scenario or SCENARIO): ping (default): cdc_ncm binds and
# 10.0.2.2 answers; zlp (zlp-merge): as scripts/kernel/scenario.sh's
# zlp-merge, the ZLP-required firmware model with dwNtbOutMaxSize 32768,
# tx_max raised to it in the guest, iperf3 up to the host for VNG_IPERF_TIME
# seconds (8); the device's counters are read over QMP once the guest has
# powered off (-no-shutdown; tests/guest/qmp-stats.py): a datagram lost in
# a merged transfer is a dropout.
# The check's last line is its verdict (scripts/kernel/scenario.sh's form):
#   verdict=0 scenario=vng-ping kernel=6.1.0-57-amd64 bind="CDC NCM (SEND ZLP)" iface=enx525400123456 ping=5/5 ...
# Exit status 0 bound and answered (zlp: and nothing lost), 1 not
# (cdc_ncm did not bind, pings lost; zlp: datagrams lost), 125 could not
# test (no vng, no kernel, the guest did not boot, no counters).
# The whole vng output is in build/vng/<kernel>.log.
set -uo pipefail
. "$(dirname "$0")/../setup/common.sh"
. "$NCM_TOP/tests/guest/lib.sh"

QEMU=${QEMU:-$NCM_BUILD/qemu/qemu-system-x86_64}
VNG_PINGS=${VNG_PINGS:-5}
VNG_TIMEOUT=${VNG_TIMEOUT:-300}
OUT=$NCM_BUILD/vng
T0=$SECONDS

mode=check
run=${VNG_RUN:-}
scn=${SCENARIO:-ping}
extra=()
while [ $# -gt 0 ]; do
    case $1 in
    --print-opts) mode=print ;;
    --scenario) scn=${2:?--scenario needs a name: ping or zlp}; shift ;;
    -h|--help) sed -n '3,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --) shift; mode=vng; extra=("$@"); break ;;
    -*) die "unknown option '$1'" "usage: scripts/kernel/vng-ncm.sh [--print-opts] [KERNEL] [-- VNG-ARGS]" ;;
    *) run=$1 ;;
    esac
    shift
done
run=${run:-${KERNEL_PACKAGE:-linux-image-amd64}}
case $scn in
ping) ;;
zlp|zlp-merge) scn=zlp ;;
*) die "unknown scenario '$scn'" "use ping or zlp (make scenario has the others, on its own guest)" ;;
esac

# verdict RC FIGURES...: the one line, then exit RC
verdict() {
    local rc=$1
    shift
    printf 'verdict=%s scenario=vng-%s kernel=%s %s seconds=%s\n' "$rc" "$scn" \
        "${KVER:-?}" "$*" "$((SECONDS - T0))"
    exit "$rc"
}
# cannot MESSAGE HINT...: in check mode a verdict 125, else an error
cannot() {
    if [ "$mode" = check ]; then
        printf 'ERROR: %s\n' "$1" >&2
        shift
        printf '  -> %s\n' "$@" >&2
        verdict 125 "why=$(printf '%s' "$WHY" | tr ' ' _)"
    fi
    die "$@"
}

# the options that put the dock on vng's QEMU, in VNG_OPTS
vng_opts() {
    local qopts=() o
    VNG_OPTS=(--qemu="$QEMU" --disable-microvm --force-9p)
    case ${ACCEL:-auto} in
    kvm) ACCEL_WHY="KVM: ACCEL=kvm" ;;
    tcg) VNG_OPTS+=(--disable-kvm); ACCEL_WHY="TCG: ACCEL=tcg" ;;
    auto)
        ACCEL_WHY=$(accel_kvm_blocker "$QEMU")
        if [ -z "$ACCEL_WHY" ]; then
            o=""
            [ -f "$NCM_ACCEL_CACHE" ] &&
                [ "$(sed -n 1p "$NCM_ACCEL_CACHE")" = "$(cat "$NCM_BOOT_ID_FILE" 2>/dev/null)" ] &&
                o=$(sed -n 2p "$NCM_ACCEL_CACHE")
            case $o in
            ok) ACCEL_WHY="KVM: the probe boot worked since this machine booted" ;;
            "") ACCEL_WHY="TCG: KVM not probed since this boot (make run probes it; ACCEL=kvm to force it)" ;;
            *) ACCEL_WHY="TCG: ${o#no }" ;;
            esac
        else
            ACCEL_WHY="TCG: $ACCEL_WHY"
        fi
        case $ACCEL_WHY in TCG*) VNG_OPTS+=(--disable-kvm) ;; esac ;;
    *) die "ACCEL=$ACCEL: unknown accelerator" "use ACCEL=auto, kvm or tcg" ;;
    esac
    ACCEL_NAME=tcg
    case $ACCEL_WHY in KVM*) ACCEL_NAME=kvm ;; esac
    qemu_firmware_args "$QEMU"
    # shellcheck disable=SC2054 # the commas are QEMU's
    qopts=("${QEMU_FW_ARGS[@]}"
        -device qemu-xhci,id=ncmxhci
        -netdev user,id=ncmnet
        -device "usb-ncm-dl,bus=ncmxhci.0,netdev=ncmnet${VNG_NCM_PROPS:-}"
        "$@")
    # one token an option: vng joins them with spaces and hands the line
    # to a shell, so none may hold a space
    for o in "${qopts[@]}"; do
        case $o in
        *[[:space:]\;\&\|\<\>\$\`\'\"\\]*)
            die "'$o' cannot go through vng --qemu-opts (a space or shell character)" \
                "use paths and properties without them" ;;
        esac
        VNG_OPTS+=("--qemu-opts=$o")
    done
}

# deb_kernel_dir SPEC: a linux-image .deb (a path, or a package apt knows)
# unpacked with its modules beside the image; sets RUN and KVER
deb_kernel_dir() {
    local spec=$1 deb pkg ver dep d
    mkdir -p "$NCM_CACHE/debs" "$NCM_CACHE/vng-kernels"
    case $spec in
    *.deb)
        [ -r "$spec" ] || return 1
        deb=$(realpath "$spec") ;;
    *)
        pkg=$spec
        # a metapackage (linux-image-amd64): the linux-image it depends on
        for _ in 1 2 3; do
            case $pkg in linux-image-[0-9]*) break ;; esac
            dep=$(apt-cache depends "$pkg" 2>/dev/null |
                  sed -n 's/^ *Depends: \(linux-image-[^ ]*\)$/\1/p' | head -n 1)
            [ -n "$dep" ] || break
            pkg=$dep
        done
        ver=$(apt-cache show --no-all-versions "$pkg" 2>/dev/null |
              sed -n 's/^Version: //p' | head -n 1)
        [ -n "$ver" ] || return 1
        deb=$NCM_CACHE/debs/${pkg}_${ver//:/%3a}_amd64.deb
        if [ ! -s "$deb" ]; then
            step "downloading $pkg $ver"
            (cd "$NCM_CACHE/debs" && apt-get download -q "$pkg=$ver" >/dev/null 2>&1) ||
                return 1
        fi ;;
    esac
    d=$NCM_CACHE/vng-kernels/$(basename "$deb" .deb)
    if [ ! -f "$d/.unpacked" ]; then
        step "unpacking $(basename "$deb") for vng"
        rm -rf "$d"
        dpkg-deb -x "$deb" "$d" || return 1
        # merged /usr (trixie on): modules where vng looks, beside boot/
        if [ -d "$d/usr/lib/modules" ] && [ ! -d "$d/lib/modules" ]; then
            mkdir -p "$d/lib"
            mv "$d/usr/lib/modules" "$d/lib/modules"
        fi
        touch "$d/.unpacked"
    fi
    RUN=$(ls "$d"/boot/vmlinuz-* 2>/dev/null | head -n 1)
    [ -n "$RUN" ] || return 1
    KVER=${RUN##*/vmlinuz-}
}

SOCK="" QPID=""
if [ "$mode" = check ] && [ "$scn" = zlp ]; then
    # the firmware model and NTB size of scenario.sh's zlp-merge, an id for
    # qom-get, and QEMU kept after the guest's poweroff for the counters
    VNG_NCM_PROPS=",id=ncm,zlp=required,ntb-out-max-size=32768${VNG_NCM_PROPS:-}"
    SOCK=$(mktemp -u /tmp/ncm-vng-qmp.XXXXXX)
    vng_opts -no-shutdown -qmp "unix:$SOCK,server=on,wait=off"
else
    vng_opts
fi
if [ "$mode" = print ]; then
    printf '%s\n' "${VNG_OPTS[@]}"
    exit 0
fi

WHY="no-vng"
command -v vng >/dev/null ||
    cannot "vng (virtme-ng) is not installed" "run: make deps-kernel (installs virtme-ng 1.41)"
VNG_V=$(vng --version 2>/dev/null | awk '{print $2}')
WHY="no-qemu"
[ -x "$QEMU" ] || cannot "$QEMU does not exist" "build it: make qemu (or QEMU=/path/to/qemu-system-x86_64)"
grep -q '^name "virtio-9p-pci"' <<<"$("$QEMU" -device help 2>/dev/null)" ||
    cannot "$QEMU has no virtio-9p-pci, which vng needs for its root filesystem" \
        "rebuild it: make qemu (scripts/setup/qemu-tree.sh configures --enable-virtfs)"

KVER=""
case $run in
*.deb|linux-image-*)
    WHY="no-kernel"
    deb_kernel_dir "$run" ||
        cannot "could not fetch or unpack kernel package '$run'" \
            "check that apt knows it (apt-cache policy $run) and deb.debian.org is reachable" ;;
*)
    [ -e "$run" ] || { WHY="no-kernel"; cannot "KERNEL '$run' does not exist" \
        "give a kernel tree, a bzImage, a linux-image .deb or a package name"; }
    RUN=$(realpath "$run")
    [ -f "$RUN" ] && KVER=$(file -b "$RUN" | sed -n 's/.*version \([^ ]*\).*/\1/p') ;;
esac

cmd=(vng --run "$RUN" "${VNG_OPTS[@]}" --memory 1G)
if [ "$mode" = vng ]; then
    step "vng on usb-ncm-dl: ${cmd[*]} ${extra[*]}"
    exec "${cmd[@]}" "${extra[@]}"
fi

mkdir -p "$OUT"
LOG=$OUT/$(printf '%s' "${KVER:-$(basename "$RUN")}" | tr -c 'A-Za-z0-9._-' _).log
[ "$scn" = ping ] || LOG=${LOG%/*}/$scn-${LOG##*/}
if [ "$scn" = zlp ]; then
    trap 'guest_iperf_stop; rm -f "$SOCK"' EXIT
    guest_iperf_start "$LOG.iperf3-server.log"
    cmd+=(--exec "sh $NCM_TOP/scripts/kernel/vng-ncm-guest.sh zlp $GUEST_IPERF_PORT ${VNG_IPERF_TIME:-8}")
    python3 "$NCM_TOP/tests/guest/qmp-stats.py" "$SOCK" /machine/peripheral/ncm \
        "$VNG_TIMEOUT" >"$LOG.stats.json" 2>"$LOG.stats.err" &
    QPID=$!
else
    cmd+=(--exec "sh $NCM_TOP/scripts/kernel/vng-ncm-guest.sh ping $VNG_PINGS")
fi
step "vng $VNG_V booting ${KVER:-$RUN} on qemu-xhci + usb-ncm-dl${VNG_NCM_PROPS:-}, scenario $scn ($ACCEL_WHY; about a minute under TCG)"
note "QEMU: $QEMU"
note "log: ${LOG#"$NCM_TOP"/} (the command: $(basename "$LOG").cmd)"
# (the command apart: vng's QEMU reopens its stdout, the log, truncating it)
{ printf '%q ' "${cmd[@]}"; echo; } >"$LOG.cmd"
timeout -k 10 "$VNG_TIMEOUT" "${cmd[@]}" </dev/null >"$LOG" 2>&1
rc=$?
if [ -n "$QPID" ]; then
    # qmp-stats.py quits QEMU once it has the counters; if QEMU never
    # came up it would wait for its deadline: not past vng's own end
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        kill -0 "$QPID" 2>/dev/null || break
        sleep 1
    done
    kill "$QPID" 2>/dev/null
    wait "$QPID" 2>/dev/null
fi
tr -d '\r' <"$LOG" | grep -a '^    \|^vng-ncm-guest:'
line=$(tr -d '\r' <"$LOG" | grep -a '^vng-ncm-guest: kernel=' | tail -n 1)
rel=${LOG#"$NCM_TOP"/}
if [ -z "$line" ]; then
    err=$(tr -d '\r' <"$LOG" | grep -a -m1 -E 'qemu-system[^:]*:|Kernel panic|ERROR|error:' | cut -c1-100 | tr ' ' _)
    [ "$rc" != 124 ] || err="timeout-${VNG_TIMEOUT}s"
    verdict 125 "why=no-guest-result${err:+:$err} vng_rc=$rc vng=$VNG_V log=$rel"
fi
line=${line#vng-ncm-guest: }
KVER=$(sed -n 's/^kernel=\([^ ]*\).*/\1/p' <<<"$line")
figs=${line#kernel=* }
figs=${figs% rc=*}
grc=$(sed -n 's/.* rc=\([0-9]*\)$/\1/p' <<<"$line")
acc="vng=$VNG_V accel=$ACCEL_NAME log=$rel"
if [ "$scn" = zlp ] && [ "$grc" != 2 ]; then
    # scenario.sh's zlp-merge verdict, from the device's counters
    [ -s "$LOG.stats.json" ] ||
        verdict 125 "why=no-device-counters $figs $acc"
    lost=$(guest_stat "$LOG" out_merge_lost_datagrams)
    ovf=$(guest_stat "$LOG" out_overflow_bytes)
    merged=$(guest_stat "$LOG" out_merged_transfers)
    out=$(guest_stat "$LOG" out_datagrams)
    figs="$figs out=${out:-?} merged=${merged:-?} lost=${lost:-?} overflow_bytes=${ovf:-?}"
    uprc=$(sed -n 's/.* up_rc=\([0-9]*\).*/\1/p' <<<"$figs")
    if [ "${lost:-0}" != 0 ] || [ "${ovf:-0}" != 0 ] || [ "${uprc:-1}" != 0 ]; then
        verdict 1 "$figs $acc"
    fi
    verdict 0 "$figs $acc"
fi
case $grc in
0) verdict 0 "$figs vng=$VNG_V accel=$ACCEL_NAME log=$rel" ;;
2) verdict 1 "why=cdc_ncm-did-not-bind $figs vng=$VNG_V accel=$ACCEL_NAME log=$rel" ;;
*) verdict 1 "why=ping $figs vng=$VNG_V accel=$ACCEL_NAME log=$rel" ;;
esac
