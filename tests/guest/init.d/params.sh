# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck shell=dash disable=SC2034
#
# Sourced by /init (tests/guest/init.sh) from /etc/ncm/init.d/ before any
# mode runs: the kernel command line parameters, their defaults, and
# their parsing.  (SC2034: the parameters are for the mode files.)
#
# Kernel command line parameters (all optional):
#   ncm.mode=test|run|bench   see tests/guest/init-test.sh
#   ncm.mode=stress        see tests/guest/init-stress.sh
#   ncm.mode=scale         see tests/guest/init-scale.sh
#   ncm.mode=shell         (the default) see tests/guest/init-shell.sh
#   ncm.mode=replug|suspend|mcast|ntbsweep   see tests/guest/init-pm.sh
#   ncm.mode=profiles      see tests/guest/init-profiles.sh
#   ncm.mode=soak          see tests/guest/init-soak.sh (make soak)
#   ncm.mode=migrate       see tests/guest/init-migrate.sh
#   ncm.driver=cdc_ncm     driver whose interface to use (cdc_ether for
#                          usb-net, virtio_net for virtio-net-pci, any = first)
#   ncm.wait=60            seconds to wait for that interface, then any non-lo
#   ncm.mac=MAC            of several such interfaces, the one with this MAC
#   ncm.server=10.0.2.2    iperf3 server (slirp's host address)
#   ncm.port=5201          iperf3 port
#   ncm.time=5             iperf3 seconds per direction
#   ncm.parallel=1         iperf3 -P; a list (1,4) runs each, keys get _pN
#   ncm.dirs=up,down       iperf3 directions (up: guest->host, down: -R)
#   ncm.rx_max=65536 ncm.tx_max=65536   written to cdc_ncm sysfs; "none"
#                          skips (bench mode default: none); "max" writes
#                          dwNtbInMaxSize / dwNtbOutMaxSize
#   ncm.mtu=N              set the interface MTU
#   ncm.ip=10.0.2.15/24 ncm.gw=10.0.2.2
#   ncm.ping=20            ping count (0 skips)
#   ncm.ping_sizes=56      ping payload sizes, each a run of ncm.ping pings;
#                          keys ping_* for 56, ping<size>_* for the others
#   ncm.live_raise=0       1: boot with the driver's NTB sizes (rx_max and
#                          tx_max default to "none"), and after the TCP runs
#                          write ncm.live_value to rx_max, then tx_max, with
#                          the interface up and traffic running (iperf3 -R
#                          and a fast ping), ncm.live_rounds times (odd; back
#                          to the first sizes in between); a write that does
#                          not return within ncm.raise_timeout s is a hang,
#                          reported with the writer's kernel stack and sysrq
#                          w/l/t; then ping again (keys ping_after_*)
#   ncm.live_value=65536 ncm.live_rounds=3 ncm.live_time=8
#   ncm.raise_timeout=30
#   ncm.stress=STEP,...    stress mode: the ncm-usbfs-stress steps to run
#                          (default: every one, see "ncm-usbfs-stress list");
#                          after each, cdc_ncm must bind again and 5 pings
#                          to the gateway must come back
#   ncm.stress_v=1         ncm-usbfs-stress -v (every URB completion)
#   ncm.carrier_wait=20    seconds to wait for carrier
#   ncm.sysfs=a=1,b=2      more cdc_ncm sysfs writes after rx_max/tx_max
#                          (e.g. tx_timer_usecs=5, min_tx_pkt=0)
#   ncm.intervals=1        print iperf3's per-second lines as
#                          "NCMTEST iperf_<dir>_interval=<end-s> <Mbit/s> <retr>"
#   ncm.udp=0              iperf3 UDP runs of 64-byte datagrams (0: none;
#                          N: offered rate N Mbit/s, each direction in DIRS)
#   ncm.cols=N ncm.rows=N  terminal size for the shell
#   ncm.scale=N            scale mode (ncm.mode=scale): N NICs at once,
#                          see scale_mode
#   ncm.mode=migrate       the host live-migrates QEMU under traffic, see
#                          migrate_mode (ncm.time: iperf3 seconds)
#   ncm.symbols=PORT       at the end, send the text symbols of
#                          /proc/kallsyms (modules included) and /proc/stat
#                          before/after each TCP run as a tar.gz to
#                          SERVER:PORT: scripts/bench/profile.sh listens there and
#                          maps the guest RIPs it samples to functions

MODE=shell
DRIVER=cdc_ncm
WAIT=60
SERVER=10.0.2.2
PORT=5201
TIME=5
PARALLEL=1
PARALLEL_LIST=1
DIRS=up,down
RX_MAX=default
TX_MAX=default
MTU=
IPADDR=10.0.2.15/24
GW=10.0.2.2
PING=20
CARRIER_WAIT=20
SYSFS=
INTERVALS=0
UDP=0
COLS=
ROWS=
SYMBOLS=
PING_SIZES=56
LIVE_RAISE=0
LIVE_VALUE=65536
LIVE_TIME=8
LIVE_ROUNDS=3
RAISE_TIMEOUT=30
STRESS=
STRESS_V=
SCALE=1
MAC=

for arg in $(cat /proc/cmdline); do
    case $arg in
    ncm.mode=*) MODE=${arg#*=} ;;
    ncm.driver=*) DRIVER=${arg#*=} ;;
    ncm.wait=*) WAIT=${arg#*=} ;;
    ncm.server=*) SERVER=${arg#*=} ;;
    ncm.port=*) PORT=${arg#*=} ;;
    ncm.time=*) TIME=${arg#*=} ;;
    ncm.parallel=*) PARALLEL_LIST=${arg#*=} ;;
    ncm.dirs=*) DIRS=${arg#*=} ;;
    ncm.rx_max=*) RX_MAX=${arg#*=} ;;
    ncm.tx_max=*) TX_MAX=${arg#*=} ;;
    ncm.mtu=*) MTU=${arg#*=} ;;
    ncm.ip=*) IPADDR=${arg#*=} ;;
    ncm.gw=*) GW=${arg#*=} ;;
    ncm.ping=*) PING=${arg#*=} ;;
    ncm.carrier_wait=*) CARRIER_WAIT=${arg#*=} ;;
    ncm.sysfs=*) SYSFS=${arg#*=} ;;
    ncm.intervals=*) INTERVALS=${arg#*=} ;;
    ncm.udp=*) UDP=${arg#*=} ;;
    ncm.cols=*) COLS=${arg#*=} ;;
    ncm.rows=*) ROWS=${arg#*=} ;;
    ncm.symbols=*) SYMBOLS=${arg#*=} ;;
    ncm.ping_sizes=*) PING_SIZES=${arg#*=} ;;
    ncm.live_raise=*) LIVE_RAISE=${arg#*=} ;;
    ncm.live_value=*) LIVE_VALUE=${arg#*=} ;;
    ncm.live_time=*) LIVE_TIME=${arg#*=} ;;
    ncm.raise_timeout=*) RAISE_TIMEOUT=${arg#*=} ;;
    ncm.live_rounds=*) LIVE_ROUNDS=${arg#*=} ;;
    ncm.stress=*) STRESS=${arg#*=} ;;
    ncm.stress_v=1) STRESS_V=-v ;;
    ncm.scale=*) SCALE=${arg#*=} ;;
    ncm.mac=*) MAC=${arg#*=} ;;
    ncm.profiles=*) PROFILES=${arg#*=} ;;
    ncm.profile_rx=*) PROFILE_RX=${arg#*=} ;;
    esac
done
# bench and live_raise start from the driver's own NTB sizes
if [ "$RX_MAX" = default ]; then
    if [ "$MODE" = bench ] || [ "$LIVE_RAISE" = 1 ]; then RX_MAX=none; else RX_MAX=65536; fi
fi
if [ "$TX_MAX" = default ]; then
    if [ "$MODE" = bench ] || [ "$LIVE_RAISE" = 1 ]; then TX_MAX=none; else TX_MAX=65536; fi
fi
