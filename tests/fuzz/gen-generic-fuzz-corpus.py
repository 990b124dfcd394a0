#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Write hand-made seeds for the generic-fuzz targets of usb-ncm-dl
# (scripts/check/fuzz-device.sh) under tests/fuzz/corpus/<target>/.  The
# files are committed; rerun this only after changing it.
#
# A generic-fuzz input is a list of operations separated by "FUZZ"
# (tests/qtest/fuzz/generic_fuzz.c): the first byte picks the operation
# (modulo 10), the rest are its operands in the layout of that file's
# structs.  The controller's registers are reached through its PCI BARs,
# which the fuzzer maps and enables before each input; guest memory is
# never written directly: each DMA read of the controller is filled from
# the next of the DMA patterns added so far, in turn.
#
# UHCI (piix3-usb-uhci) reads, per frame, the frame list entry (4 bytes),
# then each TD (16 bytes) and the buffer of each SETUP or OUT TD.  Each
# step below adds exactly the patterns one frame reads, runs one frame
# (a clock step to the next timer) and then leaves a frame list entry that
# terminates, so that the next frames read nothing.  The steps walk the
# device from its reset state through SET_ADDRESS, GET_DESCRIPTOR,
# SET_CONFIGURATION, GET_NTB_PARAMETERS and SET_INTERFACE to a bulk OUT
# NTB (an ARP request) and bulk IN polling, so that the fuzzer starts from
# inputs that reach the NCM function instead of having to discover
# enumeration first.  Checked with -trace usb_ncm*: the device is
# addressed, configured and at data alternate setting 1, and the bulk OUT
# packets reach it; the device parks them until the transfer ends, and the
# terminating frame list entry of the next frame makes UHCI cancel them,
# so the NTB itself is not parsed (a QH holding the OUT TDs would be the
# next step).
#
# The other targets' seeds (xhci, ehci, ohci) are not made here: they are
# a libFuzzer merge of fuzzing runs (scripts/check/fuzz-device.sh
# --save-seeds).

import os
import struct
import sys

TOP = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(TOP, '..', '..', 'scripts', 'lib'))
import ncm_ntb  # noqa: E402
OUT = os.path.join(TOP, 'corpus')

SEP = b'FUZZ'
OP_OUT, OP_ADD_DMA_PATTERN, OP_CLEAR_DMA_PATTERNS, OP_CLOCK_STEP = 1, 7, 8, 9
BYTE, WORD, LONG = 0, 1, 2


def op_out(size, offset, value, base=0):
    return bytes([OP_OUT]) + struct.pack('<BBHI', size, base, offset, value)


def op_pattern(data):
    assert SEP not in data
    return bytes([OP_ADD_DMA_PATTERN, 0, 0]) + data


def op_clear():
    return bytes([OP_CLEAR_DMA_PATTERNS])


def op_clock():
    return bytes([OP_CLOCK_STEP])


# UHCI registers (I/O BAR 4) and descriptors
USBCMD, FLBASEADD, PORTSC1 = 0x00, 0x08, 0x10
CMD_RS, CMD_MAXP = 0x01, 0x80
PORT_EN, PORT_RESET = 0x0004, 0x0200
TD_ACTIVE = 1 << 23
TD_ERRORS = 3 << 27
PID_SETUP, PID_IN, PID_OUT = 0x2d, 0x69, 0xe1
LINK_TERMINATE, LINK_DEPTH = 1, 4

FRAME_LIST = 0x10000
TD_BASE = 0x20000
BUF_BASE = 0x30000

NCM_EP_BULK_OUT, NCM_EP_BULK_IN = 6, 7


def td(pid, addr, ep, length, toggle, buf, last):
    maxlen = (length - 1) & 0x7ff
    token = (maxlen << 21) | (toggle << 19) | (ep << 15) | (addr << 8) | pid
    return {'pid': pid, 'token': token, 'buf': buf, 'len': length,
            'last': last}


def frame(tds, data):
    """The patterns, in read order, of one frame that runs TDS.  DATA maps
    a TD's index to the bytes its buffer read gets (SETUP and OUT)."""
    pats = [struct.pack('<I', TD_BASE)]
    for i, t in enumerate(tds):
        link = LINK_TERMINATE if i == len(tds) - 1 else \
            (TD_BASE + 0x20 * (i + 1)) | LINK_DEPTH
        pats.append(struct.pack('<IIII', link, TD_ACTIVE | TD_ERRORS,
                                t['token'], t['buf']))
        if t['pid'] in (PID_SETUP, PID_OUT) and t['len'] > 0:
            pats.append(data[i])
    ops = [op_clear()] + [op_pattern(p) for p in pats] + [op_clock()]
    # then a frame list entry that terminates, for every later read
    ops += [op_clear(), op_pattern(struct.pack('<I', LINK_TERMINATE))]
    return ops


def control(addr, setup, in_len=0, out_data=b''):
    """One control transfer in one frame: SETUP, an optional data stage,
    and the status stage."""
    tds = [td(PID_SETUP, addr, 0, 8, 0, BUF_BASE, False)]
    data = {0: setup}
    if in_len:
        tds.append(td(PID_IN, addr, 0, in_len, 1, BUF_BASE + 0x100, False))
    if out_data:
        data[len(tds)] = out_data
        tds.append(td(PID_OUT, addr, 0, len(out_data), 1, BUF_BASE + 0x100,
                      False))
    status_pid = PID_OUT if in_len else PID_IN
    tds.append(td(status_pid, addr, 0, 0, 1, 0, True))
    return frame(tds, data)


def uhci_start():
    return [op_out(WORD, PORTSC1, PORT_RESET), op_out(WORD, PORTSC1, 0),
            op_out(WORD, PORTSC1, PORT_EN),
            op_out(LONG, FLBASEADD, FRAME_LIST),
            op_clear(), op_pattern(struct.pack('<I', LINK_TERMINATE)),
            op_out(WORD, USBCMD, CMD_RS | CMD_MAXP)]


def ntb16_arp():
    """An NTB16 with one datagram: an ARP request for slirp's 10.0.2.2."""
    mac = bytes.fromhex('525400123456')
    arp = (b'\xff' * 6 + mac + b'\x08\x06' +
           struct.pack('>HHBBH', 1, 0x0800, 6, 4, 1) +
           mac + bytes([10, 0, 2, 15]) + b'\x00' * 6 + bytes([10, 0, 2, 2]))
    return ncm_ntb.build(ncm_ntb.NTB16, [arp])


def uhci_seeds():
    addr = 1
    set_address = control(0, struct.pack('<BBHHH', 0x00, 5, addr, 0, 0))
    get_dev_desc = control(addr, struct.pack('<BBHHH', 0x80, 6, 0x0100, 0,
                                             18), in_len=18)
    get_cfg_desc = control(addr, struct.pack('<BBHHH', 0x80, 6, 0x0200, 0,
                                             64), in_len=64)
    set_config = control(addr, struct.pack('<BBHHH', 0x00, 9, 1, 0, 0))
    # GET_NTB_PARAMETERS (class, interface 0), 28 bytes
    get_ntb_params = control(addr, struct.pack('<BBHHH', 0xa1, 0x80, 0, 0,
                                               28), in_len=28)
    # SET_NTB_INPUT_SIZE 2048 (4-byte form)
    set_in_size = control(addr, struct.pack('<BBHHH', 0x21, 0x86, 0, 0, 4),
                          out_data=struct.pack('<I', 2048))
    set_alt1 = control(addr, struct.pack('<BBHHH', 0x01, 11, 1, 1, 0))
    ntb = ntb16_arp()
    bulk_out = frame([td(PID_OUT, addr, NCM_EP_BULK_OUT, 64, 0, BUF_BASE,
                         False),
                      td(PID_OUT, addr, NCM_EP_BULK_OUT, len(ntb) - 64, 1,
                         BUF_BASE + 64, True)],
                     {0: ntb[:64], 1: ntb[64:]})
    bulk_in = frame([td(PID_IN, addr, NCM_EP_BULK_IN, 64, 0, BUF_BASE + 0x200,
                        True)], {})[:-2]
    poll_in = bulk_in + [op_clock()] * 8 + \
        [op_clear(), op_pattern(struct.pack('<I', LINK_TERMINATE))]

    enum = uhci_start() + set_address + set_config
    return {
        'uhci-enumerate': enum,
        'uhci-descriptors': uhci_start() + set_address + get_dev_desc +
        get_cfg_desc + set_config,
        'uhci-ntb-params': enum + get_ntb_params + set_in_size,
        'uhci-bulk-out': enum + set_alt1 + bulk_out,
        'uhci-bulk-out-in': enum + get_ntb_params + set_alt1 + bulk_out +
        poll_in,
    }


def write(target, seeds):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    for name, ops in seeds.items():
        with open(os.path.join(d, name), 'wb') as f:
            f.write(SEP.join(ops))


def main():
    write('generic-fuzz-usb-ncm-dl-uhci', uhci_seeds())


if __name__ == '__main__':
    main()
