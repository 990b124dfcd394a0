#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Write the seed corpora of the structured in-QEMU fuzz targets of
# tests/qtest/fuzz/usb_ncm_dl_fuzz.c (usb-ncm-dl-fuzz and
# usb-ncm-dl-migration-fuzz) under tests/fuzz/corpus/<target>/.  The files
# are committed; rerun this only after changing it or the targets' input
# format.  Each seed reaches a state the fuzzer would take long to find
# from nothing: every class request, full NTBs both ways, OUT transfers of
# every end-of-transfer shape, faults, resets and replugs, raw xHCI
# commands, suspend, and every migration state.

import os
import struct
import sys

TOP = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(TOP, '..', '..', 'scripts', 'lib'))
import ncm_ntb  # noqa: E402
OUT = os.path.join(TOP, 'corpus')

# usb-ncm-dl-fuzz operations, in the order of the target's enum
(OP_CONTROL, OP_CLASS, OP_BULK_OUT, OP_BULK_IN, OP_INTR_IN, OP_CANCEL,
 OP_XHCI_CMD, OP_CONTEXT_CMD, OP_SET_CONFIG, OP_SET_ALT, OP_PORT, OP_PLUG,
 OP_FRAME, OP_CLOCK, OP_FAULT, OP_WAIT, OP_REENUMERATE) = range(17)

# op_class: index into the target's request table; bit 7 = device to host
CLASS = {0x40: 0, 0x41: 1, 0x42: 2, 0x43: 3, 0x44: 4, 0x80: 5, 0x81: 6,
         0x82: 7, 0x83: 8, 0x84: 9, 0x85: 10, 0x86: 11, 0x87: 12,
         0x88: 13, 0x89: 14, 0x8a: 15}
# op_xhci_cmd: index into the target's command table
CMD = {'enable_slot': 0, 'disable_slot': 1, 'address': 2, 'configure': 3,
       'evaluate': 4, 'reset_ep': 5, 'stop_ep': 6, 'set_deq': 7,
       'reset_dev': 8, 'noop': 9}
# op_xhci_cmd's endpoint selector: bit 0 bulk IN, 1 bulk OUT, 2 interrupt
EP0, EP_IN, EP_OUT, EP_NOTIFY = 0, 1, 2, 4
# op_fault
(F_LINK_DOWN, F_BUSY, F_DROP_IN, F_CORRUPT_COUNT, F_REPLUG,
 F_REPLUG_EVERY, F_CORRUPT_IN, F_LINK) = range(8)
# x-fault-corrupt-in values, by index
CORRUPT = {'none': 0, 'ndp-at-end': 1, 'datagram-offset-wrap': 2,
           'ndp-chain-loop': 3, 'block-length-over-input-size': 4,
           'short-notification': 5}


def u16(v):
    return struct.pack('<H', v & 0xffff)


def control(rtype, req, value, index, data=b'', length=None):
    n = len(data) if length is None else length
    return (bytes([OP_CONTROL, rtype, req]) + u16(value) + u16(index) +
            u16(n) + data)


def cls(req, value=0, data=b'', dir_in=False, length=None):
    n = len(data) if length is None else length
    return (bytes([OP_CLASS, CLASS[req] | (0x80 if dir_in else 0)]) +
            u16(value) + u16(n) + data)


def ntb_out(kind, datagrams, fields=None):
    """kind 5: the NTB as built; 6: padded to a wMaxPacketSize multiple.
    fields: the target's length fields, when not each datagram's length
    - 14 (in CRC mode, bit 15 of one keeps the input's bytes as the CRC)"""
    if fields is None:
        fields = [len(d) - 14 for d in datagrams]
    b = bytes([OP_BULK_OUT, kind]) + u16(0) + bytes([len(datagrams) - 1])
    for d, v in zip(datagrams, fields):
        b += u16(v) + d[:64]
    return b


def out_raw(kind, arg=0, data=b''):
    """kind 0: arg % 4096 bytes, 1: ZLP, 2: 1 byte, 3: (1 + arg % 128)
    wMaxPacketSize, 4: 64 KiB + 1, 7: arg bytes"""
    return bytes([OP_BULK_OUT, kind]) + u16(arg) + data


def bulk_in(n, kind, arg=0):
    """n TDs (+ 0x80: kind + i for TD i) of kind 0: arg bytes, 1: zero,
    2: wMaxPacketSize, 3: 64 KiB, 4: 64 KiB + 1, 5: 16 KiB, 6: 1 byte,
    7: arg % 2048"""
    return bytes([OP_BULK_IN, (n & 0x80) | ((n & 0x7f) - 1), kind]) + u16(arg)


def frame(n, seed=0, dst=0):
    """dst: 0 the device's address, 1 broadcast, 2 and 3 multicast"""
    payload = bytes((seed * 131 + i * 7) & 0xff for i in range(64))
    return bytes([OP_FRAME, dst]) + u16(n - 14) + payload


def datagram(n, seed=0):
    mac = b'\x52\x54\x00\xaa\xbb\xcc\x52\x54\x00\x12\x34\x56\x88\xb5'
    return mac + bytes((seed * 31 + i) & 0xff for i in range(n - 14))


def wait(steps=30):
    return bytes([OP_WAIT, steps])


def clock(us10):
    """a clock step of us10 * 10 us"""
    return bytes([OP_CLOCK]) + u16(us10 - 1)


def fault(which, value):
    return bytes([OP_FAULT, which]) + u16(value)


def xcmd(cmd, ep=EP0, flags=0, arg=0):
    return bytes([OP_XHCI_CMD, CMD[cmd], ep, flags]) + u16(arg)


def ctx_cmd(kind, drop, add, patches=()):
    """kind 0 Address Device, 1 Configure Endpoint, 2 Evaluate Context"""
    b = bytes([OP_CONTEXT_CMD, kind]) + u16(drop) + u16(add)
    b += bytes([len(patches)])
    for off, val in patches:
        b += u16(off) + bytes([0, val])
    return b


MC = bytes.fromhex('01005e000001333300000001')

# first byte: bit 7 set stops after SET_CONFIGURATION (data alt 0)
STRUCTURED = {
    # every class request, both NTB formats, CRC mode, the filters
    'class-tour': b'\x00' + b''.join([
        cls(0x80, dir_in=True, length=28),
        cls(0x85, dir_in=True, length=4),
        cls(0x86, data=struct.pack('<I', 16384)),
        cls(0x86, data=struct.pack('<IHH', 8192, 4, 0)),
        cls(0x87, dir_in=True, length=2),
        cls(0x88, data=u16(1514)),
        cls(0x83, dir_in=True, length=2),
        cls(0x89, dir_in=True, length=2),
        cls(0x40, value=2, data=MC),
        cls(0x43, value=0x1f),
        cls(0x44, value=1, dir_in=True, length=4),
        cls(0x44, value=0x1d, dir_in=True, length=4),
        cls(0x41, value=0, data=b'\x00' * 8),
        cls(0x42, value=0, dir_in=True, length=2),
        bytes([OP_SET_ALT, 0x00]),
        cls(0x84, value=1),
        cls(0x8a, value=1),
        bytes([OP_SET_ALT, 0x01]),
        frame(600, 1), frame(1514, 2, dst=1),
        bulk_in(2, 3), wait(),
        ntb_out(5, [datagram(100, 1), datagram(1514, 2)]), wait(),
    ]),
    # every GET_ETHERNET_STATISTIC selector (the device is made with all
    # of them), one past the last, and SET_NTB_INPUT_SIZE's refusals
    'statistics': b'\x00' + b''.join(
        [frame(600, 1), frame(60, 2, dst=1), bulk_in(2, 3), wait(),
         ntb_out(5, [datagram(100, 1), datagram(1514, 2)]), wait()] +
        [cls(0x44, value=v, dir_in=True, length=4) for v in range(0, 0x20)] +
        [cls(0x44, value=1, dir_in=True, length=2),
         cls(0x86, data=struct.pack('<I', 1024)),
         cls(0x86, data=struct.pack('<I', 1 << 20)),
         cls(0x86, data=struct.pack('<IHH', 4096, 0xffff, 0)),
         cls(0x86, data=b'\x00' * 6)]),
    # NTBs both ways through queued TDs
    'traffic': b'\x00' + b''.join([
        frame(60, 1), frame(1514, 2), frame(600, 3, dst=1),
        bulk_in(4, 3), wait(),
        ntb_out(5, [datagram(60, 1), datagram(1514, 2), datagram(300, 3)]),
        wait(),
        bulk_in(8, 0, 2048),
        frame(1000, 4), frame(1000, 5), clock(100), wait(),
        bytes([OP_INTR_IN, 16]), wait(5),
    ]),
    # every end-of-transfer shape of bulk OUT
    'out-shapes': b'\x00' + b''.join([
        out_raw(3, 0, bytes(64)), wait(5),
        out_raw(1), wait(5),
        ntb_out(6, [datagram(500, 1), datagram(1514, 2)]), wait(5),
        out_raw(1), wait(5),
        out_raw(4, 0, ncm_ntb.NTB16.nth_sig), wait(5),
        out_raw(2, 0, b'N'), wait(5),
        out_raw(0, 12, ncm_ntb.nth(ncm_ntb.NTB16, 0, 12, 12)), wait(5),
        out_raw(3, 63, bytes(16)), wait(5),
        ntb_out(5, [datagram(1514, 7)] * 10), wait(),
    ]),
    # x-fault-* while traffic flows
    'faults': b'\x00' + b''.join([
        bulk_in(2, 3), fault(F_BUSY, 20), frame(500, 1), clock(3000),
        wait(),
        fault(F_LINK_DOWN, 10), frame(500, 2), bulk_in(1, 3),
        bytes([OP_INTR_IN, 16]), clock(2000), wait(),
        fault(F_DROP_IN, 2), frame(100, 3), frame(100, 4), bulk_in(2, 3),
        wait(),
        fault(F_CORRUPT_IN, CORRUPT['ndp-at-end']),
        fault(F_CORRUPT_COUNT, 3), frame(100, 5), bulk_in(1, 3), wait(),
        fault(F_CORRUPT_IN, CORRUPT['ndp-chain-loop']), frame(100, 6),
        bulk_in(1, 3), wait(),
        fault(F_CORRUPT_IN, CORRUPT['short-notification']),
        fault(F_LINK, 0), bytes([OP_INTR_IN, 16]), wait(),
        fault(F_LINK, 1), wait(),
    ]),
    # queues, cancellation, resets, replug
    'lifecycle': b'\x00' + b''.join([
        bulk_in(0x88, 0, 4096), out_raw(3, 3, bytes(8)),
        bytes([OP_CANCEL, 1]), bytes([OP_CANCEL, 2]),
        bytes([OP_SET_ALT, 0x00]), bytes([OP_SET_ALT, 0x01]),
        bulk_in(4, 3), bytes([OP_SET_CONFIG, 0x80]),
        bytes([OP_SET_CONFIG, 0x81]), bytes([OP_SET_ALT, 0x01]),
        bulk_in(2, 3), bytes([OP_PORT, 0x01]),
        bulk_in(2, 3), bytes([OP_PLUG, 0x82]),
        bulk_in(2, 3), frame(600, 1), wait(),
        bytes([OP_PLUG, 0x03 | (50 << 2)]), clock(30000), wait(),
        bytes([OP_REENUMERATE, 1]), frame(600, 2), bulk_in(1, 3), wait(),
    ]),
    # raw xHCI commands and contexts around live transfers
    'xhci-commands': b'\x00' + b''.join([
        bulk_in(4, 3), xcmd('stop_ep', EP_IN), xcmd('reset_ep', EP_IN),
        xcmd('set_deq', EP_IN, flags=1, arg=0), frame(100, 1), wait(),
        ctx_cmd(2, 0, 0x3), ctx_cmd(1, 0, 1 << 3),
        ctx_cmd(1, 1 << 1, 0x1, ((32 * 4 + 4, 0x40),)),
        xcmd('stop_ep', EP_OUT, flags=1), out_raw(2, 0, b'N'), wait(),
        xcmd('noop'), xcmd('enable_slot'), xcmd('reset_dev'),
        bulk_in(1, 3), wait(5),
        xcmd('disable_slot'), bytes([OP_REENUMERATE, 1]),
        xcmd('address', flags=1), bytes([OP_REENUMERATE, 1]),
        frame(100, 2), bulk_in(1, 3), wait(),
    ]),
    # selective suspend with remote wakeup, woken by a frame
    'suspend': b'\x00' + b''.join([
        control(0x00, 3, 1, 0),
        control(0x01, 3, 0, 0x0200),
        bytes([OP_PORT, 0x22]), frame(600, 1), clock(1000),
        bytes([OP_PORT, 0x03]), bulk_in(1, 3), wait(),
    ]),
    # standard requests with odd fields; the device without alt 1 first
    'standard': b'\x80' + b''.join([
        control(0x80, 6, 0x0100, 0, length=18),
        control(0x80, 6, 0x0200, 0, length=0xffff),
        control(0x80, 6, 0x0300, 0, length=255),
        control(0x80, 6, 0x0304, 0x0409, length=255),
        control(0x80, 6, 0x0f00, 0, length=64),
        control(0x80, 0, 0, 0, length=2),
        control(0x81, 0, 0, 0, length=2),
        control(0x82, 0, 0, 0x81, length=2),
        control(0x02, 3, 0, 0x82),
        control(0x02, 1, 0, 0x82),
        control(0x80, 8, 0, 0, length=1),
        control(0x81, 10, 0, 1, length=1),
        control(0x21, 0x86, 0, 0, b'\xff' * 8),
        control(0xa1, 0x80, 0, 1, length=28),
        bytes([OP_SET_ALT, 0x01]), bulk_in(1, 3), frame(60, 1), wait(),
    ]),
}


# first byte bit 6: the device with NCM 1.0's zlp=auto instead of the
# ZLP-required firmware (another OUT path); these replay seeds of the
# required firmware there
for _name in ('out-shapes', 'traffic', 'class-tour'):
    STRUCTURED['auto-' + _name] = bytes([0x40]) + STRUCTURED[_name][1:]

STRUCTURED.update({
    # an OUT transfer of 128 wMaxPacketSize packets, no terminator, then
    # its ZLP: more than the 64 KiB buffer, on both firmware models
    'overflow': b'\x00' + b''.join([
        out_raw(3, 127, bytes(16)), wait(5), out_raw(1), wait(5),
        ntb_out(5, [datagram(100, 1)]), wait(5)]),
    'auto-overflow': b'\x40' + b''.join([
        out_raw(3, 127, bytes(16)), wait(5), out_raw(1), wait(5),
        ntb_out(6, [datagram(100, 1), datagram(1514, 2)]), wait(5)]),
    # GET/SET_NET_ADDRESS on alt 0 and refused on alt 1; perfect
    # multicast filtering of frames in and out of the list
    'net-address-filters': b'\x80' + b''.join([
        cls(0x81, dir_in=True, length=6),
        cls(0x82, data=bytes.fromhex('020000aabbcc')),
        cls(0x82, data=bytes.fromhex('0200aabbcc')),
        cls(0x81, dir_in=True, length=6),
        bytes([OP_SET_ALT, 0x01]),
        cls(0x82, data=bytes.fromhex('020000ddeeff')),
        cls(0x40, value=2, data=MC),
        cls(0x43, value=0x1c),
        frame(100, 1, dst=2), frame(100, 2, dst=3), frame(100, 3, dst=1),
        bulk_in(3, 3), wait(),
        cls(0x43, value=0x1e), frame(100, 4, dst=3), bulk_in(1, 3), wait(),
    ]),
    # CRC mode: datagrams with the right CRC-32 and one with a wrong one
    'crc': b'\x80' + b''.join([
        cls(0x8a, value=1), cls(0x89, dir_in=True, length=2),
        bytes([OP_SET_ALT, 0x01]),
        ntb_out(5, [datagram(100, 0), datagram(300, 1), datagram(1514, 2)]),
        wait(),
        ntb_out(5, [datagram(100, 0), datagram(114, 1)],
                fields=[86, 0x8000 | 100]), wait(),
    ]),
    # the IN corruptions the other seeds leave out, and SET_NTB_INPUT_SIZE
    # while an IN NTB is being built and sent
    'in-corrupt-resize': b'\x00' + b''.join([
        fault(F_CORRUPT_IN, CORRUPT['datagram-offset-wrap']),
        fault(F_CORRUPT_COUNT, 2), frame(100, 1), bulk_in(1, 3), wait(),
        frame(100, 2), bulk_in(1, 3), wait(),
        fault(F_CORRUPT_IN, CORRUPT['block-length-over-input-size']),
        fault(F_CORRUPT_COUNT, 1), frame(100, 3), bulk_in(1, 3), wait(),
        fault(F_CORRUPT_IN, CORRUPT['none']),
        frame(1514, 4), frame(1514, 5),
        cls(0x86, data=struct.pack('<I', 2048)),
        bulk_in(1, 0, 512), frame(1514, 6),
        cls(0x86, data=struct.pack('<I', 4096)),
        bulk_in(4, 3), wait(),
    ]),
})

# usb-ncm-dl-migration-fuzz: the state byte (bits: 0 OUT mid-NTB, 1 IN
# NTB partly sent, 2 parked IN TDs, 3 busy fault, 4 link-down fault,
# 5 CRC mode, 6 multicast filters, 7 NTB32), then mutations of 4 bytes:
# kind, offset (16 bits), value
MIG_STATES = {
    'idle': 0x00,
    'out-mid-ntb': 0x01,
    'in-partial': 0x02,
    'in-parked': 0x04,
    'fault-busy': 0x08,
    'fault-link': 0x10,
    'crc': 0x20,
    'mc-filters': 0x40,
    'ntb32': 0x80,
    'out-in-parked': 0x07,
    'everything': 0xff,
}


def mutation(kind, off, val):
    return bytes([kind]) + u16(off) + bytes([val])


# past the USBDevice part (29 bytes); the fuzzer reaches that from these
MIG_MUTATED = {
    'in-parked-xor': bytes([0x06]) + mutation(0, 40, 0x01),
    'in-partial-word': bytes([0x02]) + mutation(3, 60, 0x84),
    'truncated': bytes([0x05]) + mutation(2, 200, 0),
    'tail': bytes([0x61]) + mutation(4, 3, 0x01),
}


def write(target, seeds):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(d, 'seed-' + name), 'wb') as f:
            f.write(data)


def main():
    write('usb-ncm-dl-fuzz', STRUCTURED)
    write('usb-ncm-dl-migration-fuzz',
          dict({k: bytes([v]) for k, v in MIG_STATES.items()},
               **MIG_MUTATED))


if __name__ == '__main__':
    main()
