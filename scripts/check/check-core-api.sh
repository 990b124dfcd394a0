#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The device uses the USB core's API as hw/usb devices upstream do, and
# does not do the core's work from inside (issue 35; part of the style
# suite).  One PASS/FAIL line per rule; the offending lines are shown.
#
#   check-core-api.sh [FILE...]     default: the device's C files
#
#  - core-api/port-ops: no call of a port's ops (port->ops->detach...):
#    usb_detach()/usb_attach() and hw/usb/bus.c tell the port;
#  - core-api/replayed-requests: usb_desc_handle_control() only passes on
#    the request handle_control got, never one made up (a fake
#    SET_CONFIGURATION on reset or load: usb_device_reset() unconfigures,
#    usb_desc_load_config() restores), and no USBPacket is built here;
#  - core-api/packet-state, core-api/ep-queue: no usb_packet_set_state()
#    and no walk of ep->queue: packets queued behind a cancelled one are
#    run with usb_ep_run_queue(), counted with usb_ep_queue_length()
#    (patches/0030, hw/usb/core.c).
set -uo pipefail
. "$(dirname "$0")/../setup/common.sh"
cd "$NCM_TOP"
rc=0

if [ "$#" -gt 0 ]; then
    files=("$@")
else
    mapfile -t files < <(git ls-files 'hw/usb/dev-ncm*.c' 'hw/usb/dev-ncm*.h' \
                                      'hw/usb/ncm-*.c' 'include/hw/usb/ncm-*.h')
fi

# rule NAME WHY MAX PATTERN: at most MAX lines of the files match PATTERN
rule() {
    local name=$1 why=$2 max=$3 pat=$4 hits n
    hits=$(grep -nE -- "$pat" "${files[@]}" /dev/null |
           grep -vE '^[^:]+:[0-9]+:[[:space:]]*(/?\*|//)')
    n=$(sed '/^$/d' <<<"$hits" | wc -l)
    if [ "$n" -gt "$max" ]; then
        echo "FAIL: core-api/$name ($why: $n use(s), at most $max)"
        sed 's/^/    | /' <<<"$hits"
        rc=1
    elif [ "$max" -gt 0 ] && [ "$n" -lt "$max" ]; then
        echo "PASS: core-api/$name ($n of the $max use(s) left: lower the" \
             "limit in scripts/check/check-core-api.sh)"
    else
        echo "PASS: core-api/$name ($n use(s), at most $max)"
    fi
}

rule port-ops "a port's ops called by the device" 0 \
    '(->|\.)ops->(attach|detach|child_detach|wakeup|complete)\b'
rule packet-built "a USBPacket built by the device" 0 \
    'USBPacket[[:space:]]+[A-Za-z_][A-Za-z0-9_]*[[:space:]]*(=|;|\[)'
rule packet-state "usb_packet_set_state() outside the core" 0 \
    '\busb_packet_set_state[[:space:]]*\('
rule ep-queue "the core's ep->queue walked by the device" 0 \
    '(->|\.)queue\b'

# every call passes on handle_control's own arguments
hits=$(grep -nE -- '\busb_desc_handle_control[[:space:]]*\(' "${files[@]}" /dev/null |
       grep -vE 'usb_desc_handle_control\(dev, p, request, value, index, length, data\);')
if [ -n "$hits" ]; then
    echo "FAIL: core-api/replayed-requests (usb_desc_handle_control() called" \
         "with a request of the device's own making; the core resets and" \
         "restores the configuration)"
    sed 's/^/    | /' <<<"$hits"
    rc=1
else
    echo "PASS: core-api/replayed-requests (usb_desc_handle_control() only" \
         "passes on handle_control's request)"
fi
exit $rc
