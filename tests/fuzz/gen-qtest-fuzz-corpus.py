#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Write the seed corpora of the structured in-QEMU fuzz targets of
# tests/qtest/fuzz/usb_ncm_dl_fuzz.c (usb-ncm-dl-fuzz and
# usb-ncm-dl-migration-fuzz) under tests/fuzz/corpus/<target>/.  The files
# are committed; rerun this only after changing it or the targets' input
# format.  The operation numbers and the request, command and fault tables
# are read from the target's source; --check fails when the committed
# seeds differ from what this writes now (drift).  Each seed reaches a
# state the fuzzer would take long to find from nothing: every class
# request, full NTBs both ways, OUT transfers of every end-of-transfer
# shape, faults, resets and replugs, raw xHCI commands, suspend, and every
# migration state.

import filecmp
import os
import re
import struct
import sys
import tempfile

TOP = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(TOP, '..', '..', 'scripts', 'lib'))
import ncm_ntb  # noqa: E402
OUT = os.path.join(TOP, 'corpus')
# The target's tables are read from its source, the one list of them
SRC = os.path.join(TOP, '..', 'qtest', 'fuzz', 'usb_ncm_dl_fuzz.c')


def c_source():
    with open(SRC) as f:
        return f.read()


def c_ops(src):
    """the names of the target's operation enum, in order (OP_CONTROL..),
    each of which its ops[] table must map to a function"""
    m = re.search(r'enum \{\s*(OP_CONTROL,.*?)OP__MAX\s*\};', src, re.S)
    if not m:
        sys.exit(f'{SRC}: no "enum {{ OP_CONTROL, ... OP__MAX }}"')
    names = re.findall(r'\b(OP_[A-Z0-9_]+)\b', m.group(1))
    table = dict(re.findall(r'\[(OP_[A-Z0-9_]+)\] = (op_[a-z0-9_]+),', src))
    for n in names:
        if n not in table:
            sys.exit(f'{SRC}: {n} has no entry in the ops[] table')
    for n in table:
        if n not in names:
            sys.exit(f'{SRC}: ops[] maps {n}, which the enum lacks')
    return names


def c_array(src, func, name):
    """the initializer of array @name in function @func, as Python values"""
    body = src[src.index(f'static void {func}('):]
    m = re.search(name + r'\[\] = \{(.*?)\};', body, re.S)
    if not m:
        sys.exit(f'{SRC}: no {name}[] in {func}()')
    vals = re.findall(r'"([^"]*)"|(0x[0-9a-fA-F]+|\d+)', m.group(1))
    return [q if q else int(n, 0) for q, n in vals]


def c_class_reqs(src):
    """the request codes of the target's ncm_class_reqs[] table, in order,
    its cdc-ncm.h names resolved from that header"""
    hdr = os.path.join(TOP, '..', '..', 'include', 'hw', 'usb', 'cdc-ncm.h')
    with open(hdr) as f:
        codes = {n: int(v, 0) for n, v in re.findall(
            r'#define\s+((?:CDC|NCM)_[A-Z0-9_]+)\s+(0x[0-9a-fA-F]+)\b',
            f.read())}
    m = re.search(r'ncm_class_reqs\[\] = \{(.*?)\n\};', src, re.S)
    if not m:
        sys.exit(f'{SRC}: no ncm_class_reqs[] table')
    names = re.findall(r'\{ ([A-Z0-9_]+),', m.group(1))
    for n in names:
        if n not in codes:
            sys.exit(f'{SRC}: ncm_class_reqs[] names {n}, not in {hdr}')
    return [codes[n] for n in names]


def op_bytes(ops):
    """each operation's byte: the ones before OP_MID_XFER their index (the
    target takes a byte modulo their number), the ones after it the bytes
    above the last whole round of those (the target's op_of())"""
    first = ops.index('OP_MID_XFER')
    rounds = 256 // first * first
    return {n: i if i < first else rounds + i - first
            for i, n in enumerate(ops)}


_SRC = c_source()
# usb-ncm-dl-fuzz operations: OP_CONTROL = 0, ... in the enum's order
OPS = c_ops(_SRC)
globals().update(op_bytes(OPS))


def std_reqs():
    """the standard request codes, by name, from libqos's xHCI driver (the
    qtests' one list of them)"""
    hdr = os.path.join(TOP, '..', 'qtest', 'libqos', 'xhci-driver.h')
    with open(hdr) as f:
        codes = {n: int(v, 0) for n, v in re.findall(
            r'#define\s+QXHCI_REQ_([A-Z_]+)\s+(0x[0-9a-fA-F]+)\b', f.read())}
    if 'GET_DESCRIPTOR' not in codes:
        sys.exit(f'{hdr}: no QXHCI_REQ_GET_DESCRIPTOR; the pattern is stale')
    return codes


def class_codes():
    """the class request codes of cdc-ncm.h, by name"""
    hdr = os.path.join(TOP, '..', '..', 'include', 'hw', 'usb', 'cdc-ncm.h')
    with open(hdr) as f:
        return {n: int(v, 0) for n, v in re.findall(
            r'#define\s+((?:CDC|NCM)_[A-Z0-9_]+)\s+(0x[0-9a-fA-F]+)\b',
            f.read())}


REQ = std_reqs()
CDC = class_codes()

# op_class: index into the target's request table; bit 7 = device to host
CLASS = {r: i for i, r in enumerate(c_class_reqs(_SRC))}
# op_xhci_cmd: index into the target's table of TRB types
_TRB_TYPE = {'enable_slot': 9, 'disable_slot': 10, 'address': 11,
             'configure': 12, 'evaluate': 13, 'reset_ep': 14, 'stop_ep': 15,
             'set_deq': 16, 'reset_dev': 17, 'noop': 23}
_TYPES = c_array(_SRC, 'op_xhci_cmd', 'types')
CMD = {k: _TYPES.index(t) for k, t in _TRB_TYPE.items()}
# op_xhci_cmd's endpoint selector: bit 0 bulk IN, 1 bulk OUT, 2 interrupt
EP0, EP_IN, EP_OUT, EP_NOTIFY = 0, 1, 2, 4


def fault_props():
    """UsbNcmFaultProp of include/hw/usb/ncm-fault.h: the usb-ncm-fault
    properties that take a number, by their index (op_fault numbers them
    so, then corrupt-in, then the link)"""
    hdr = os.path.join(TOP, '..', '..', 'include', 'hw', 'usb',
                       'ncm-fault.h')
    with open(hdr) as f:
        m = re.search(r'enum UsbNcmFaultProp \{(.*?)NCM_FAULT__MAX,',
                      f.read(), re.S)
    if not m:
        sys.exit(f'{hdr}: no "enum UsbNcmFaultProp {{ ... NCM_FAULT__MAX"')
    return re.findall(r'\bNCM_FAULT_([A-Z0-9_]+),', m.group(1))


def corruptions():
    """ncm_in_corruption_names[] of hw/usb/ncm-function.c, in order"""
    src = os.path.join(TOP, '..', '..', 'hw', 'usb', 'ncm-function.c')
    with open(src) as f:
        m = re.search(r'ncm_in_corruption_names\[NCM_CORRUPT__MAX\] = '
                      r'\{(.*?)\};', f.read(), re.S)
    if not m:
        sys.exit(f'{src}: no ncm_in_corruption_names[]')
    return re.findall(r'"([^"]+)"', m.group(1))


# op_fault: the usb-ncm-fault properties by their index (but the seed),
# then the corruption and the link
_FAULTS = fault_props()
(F_LINK_DOWN, F_BUSY, F_DROP_IN, F_CORRUPT_COUNT, F_REPLUG,
 F_REPLUG_EVERY) = (_FAULTS.index(n) for n in (
     'LINK_DOWN_MS', 'BUSY_MS', 'DROP_IN_EVERY', 'CORRUPT_COUNT',
     'REPLUG_MS', 'REPLUG_EVERY_MS'))
F_CORRUPT_IN = _FAULTS.index('REPLUG_SEED')
F_LINK = F_CORRUPT_IN + 1
# corrupt-in values, by index
CORRUPT = {n: i for i, n in enumerate(corruptions())}


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


def u32(v):
    return struct.pack('<I', v & 0xffffffff)


def ep_ctx(sel, dw0=0, dw1=0, dw4=0, sflags=0):
    """sel: 0 bulk OUT, 1 bulk IN, 2 interrupt (3: a DCI byte follows);
    +0x04 Evaluate Context, +0x08 the descriptor's type and size, +0x10
    streams (MaxPStreams 1 + dw0[14:10] % 15, LSA), +0x20 drop it too"""
    return (bytes([OP_EP_CTX, sel]) + u32(dw0) + u32(dw1) + u32(dw4) +
            bytes([sflags]))


def stream_td(sel, sid, flags, length=0, tail=b''):
    """flags: TDs 1 + flags % 4, +0x80 an NTB (tail: its input), +0x40
    another stream ID (2 bytes after tail), +0x10 two doorbells"""
    return bytes([OP_STREAM_TD, sel, sid, flags]) + u16(length) + tail


def ntb_input(n=1, size=100):
    """build_ntb()'s input: n datagrams of size bytes"""
    return bytes([n - 1]) + b''.join(u16(size - 14) + bytes(64)
                                      for _ in range(n))


MC = bytes.fromhex('01005e000001333300000001')


def mid_xfer(dir_in, body, stops, pad=False):
    """OP_MID_XFER: one bulk transfer a packet per TD, OUT (body:
    build_ntb()'s input; pad: ended on a packet boundary, a ZLP after it)
    or IN (body: mid_in_frames()), stopped at up to 4 packet boundaries;
    stops: (packets sent before the stop, what happens there: mid_*())"""
    sel = (1 if dir_in else 0) | (len(stops) - 1) << 1 | (0x10 if pad else 0)
    return (bytes([OP_MID_XFER, sel]) + body +
            b''.join(bytes([adv]) + act for adv, act in stops))


def mid_in_frames(n, size):
    """frames to the device's address before the IN TDs"""
    return bytes([n - 1]) + u16(size - 60)


def mid_migrate(cancel_first=False):
    return bytes([0x80 if cancel_first else 0x00])


def mid_class(req, value=0, data=b''):
    """with the data stage length the target's table has for req"""
    return bytes([0x01, CLASS[req], 0]) + data + bytes([value])


def mid_standard(sel):
    """0 GET_STATUS(device), 1 (interface; +0x80 data), 2 (endpoint; +0x80
    OUT), 3 CLEAR_FEATURE(ENDPOINT_HALT) (+0x80 OUT), 4 SET_INTERFACE(data,
    0), 5 (data, 1), 6 SET_CONFIGURATION (+0x10 value 1, +0x80 endpoints
    down first), 7 GET_CONFIGURATION (+0x80 GET_INTERFACE), 8
    GET_DESCRIPTOR(device); +0x10 for 4 and 5: no Configure Endpoint"""
    return bytes([0x02, sel])


# every class request with the data a host sends, two per transfer
MID_CLASS = [
    (0x40, 1, MC[:6]), (0x41, 0, bytes(8)), (0x42, 0, b''), (0x43, 0x1c, b''),
    (0x44, 1, b''), (0x80, 0, b''), (0x81, 0, b''),
    (0x82, 0, bytes.fromhex('525400123456')), (0x83, 0, b''), (0x84, 0, b''),
    (0x85, 0, b''), (0x86, 0, u16(0x4000) + u16(0)), (0x87, 0, b''),
    (0x88, 0, u16(1514)), (0x89, 0, b''), (0x8a, 0, b''),
]
MID_STANDARD = [0x00, 0x01, 0x81, 0x02, 0x82, 0x03, 0x83, 0x07, 0x87, 0x08,
                0x04, 0x05, 0x96, 0x05]


def mid_tour(dir_in, actions):
    """actions two per transfer, each at a packet boundary and followed
    by a migration with the transfer half done there; the next transfer
    stops one packet later"""
    out = b''
    for i in range(0, len(actions), 2):
        body = mid_in_frames(4, 1000) if dir_in else ntb_input(4, 1000)
        stops = [(1 + i // 2 % 3, actions[i]), (0, mid_migrate()),
                 (1, actions[i + 1] if i + 1 < len(actions) else
                  mid_migrate(True)), (0, mid_migrate())]
        out += mid_xfer(dir_in, body, stops, pad=i % 4 == 2) + wait()
    return out

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
    # faults (usb-ncm-fault) while traffic flows
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
        control(0x00, REQ['SET_FEATURE'], 1, 0),
        control(0x01, REQ['SET_FEATURE'], 0, 0x0200),
        bytes([OP_PORT, 0x22]), frame(600, 1), clock(1000),
        bytes([OP_PORT, 0x03]), bulk_in(1, 3), wait(),
    ]),
    # standard requests with odd fields; the device without alt 1 first
    'standard': b'\x80' + b''.join([
        control(0x80, REQ['GET_DESCRIPTOR'], 0x0100, 0, length=18),
        control(0x80, REQ['GET_DESCRIPTOR'], 0x0200, 0, length=0xffff),
        control(0x80, REQ['GET_DESCRIPTOR'], 0x0300, 0, length=255),
        control(0x80, REQ['GET_DESCRIPTOR'], 0x0304, 0x0409, length=255),
        control(0x80, REQ['GET_DESCRIPTOR'], 0x0f00, 0, length=64),
        control(0x80, REQ['GET_STATUS'], 0, 0, length=2),
        control(0x81, REQ['GET_STATUS'], 0, 0, length=2),
        control(0x82, REQ['GET_STATUS'], 0, 0x81, length=2),
        control(0x02, REQ['SET_FEATURE'], 0, 0x82),
        control(0x02, REQ['CLEAR_FEATURE'], 0, 0x82),
        control(0x80, REQ['GET_CONFIGURATION'], 0, 0, length=1),
        control(0x81, REQ['GET_INTERFACE'], 0, 1, length=1),
        control(0x21, CDC['NCM_SET_NTB_INPUT_SIZE'], 0, 0, b'\xff' * 8),
        control(0xa1, CDC['NCM_GET_NTB_PARAMETERS'], 0, 1, length=28),
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
    # xHCI streams on the bulk endpoints although the device has none:
    # MaxPStreams 1 (4 stream contexts), TDs on stream 1, its doorbell
    # once and twice; bulk IN the same
    'streams-out': b'\x00' + b''.join([
        ep_ctx(0x18, dw4=0x400), stream_td(0, 0, 0x80, tail=ntb_input()),
        wait(), stream_td(0, 0, 0x91, tail=ntb_input(2)), wait(),
        stream_td(0, 1, 0x00, 512), wait(),
    ]),
    'streams-in': b'\x00' + b''.join([
        frame(600, 1), ep_ctx(0x19, dw0=3 << 10, dw4=0x400),
        stream_td(0, 0, 0x01, 2048), wait(), frame(600, 2),
        stream_td(0, 2, 0x50, 2048, u16(5)), wait(),
        bytes([OP_DOORBELL, 0x00]) + u32(3 | 1 << 16), wait(),
    ]),
    # every field of a context from the input, then the rings' owner back
    'ep-contexts': b'\x00' + b''.join([
        ep_ctx(0x00, 0xffffffff, 0xffffffff, 0xffffffff, 0xff),
        ep_ctx(0x0c, 0x00ff8000, 0x00001000), ep_ctx(0x2a),
        ep_ctx(0x03, 0x1234, 0x5678) + bytes([7]),
        stream_td(1, 0, 0x03, 64), wait(), bytes([OP_REENUMERATE, 1]),
        bulk_in(1, 2), wait(),
    ]),
    # port register writes: reset, warm reset, U3 and back, PED, power
    'portsc': b'\x00' + b''.join([
        bytes([OP_PORTSC, 0x03, 3]), clock(100), bytes([OP_PORTSC, 0x03, 0]),
        clock(100), bytes([OP_PORTSC, 0x06, 0]), bytes([OP_PORTSC, 0x07, 7]),
        bytes([OP_PORTSC, 0x01, 0]), clock(100), bytes([OP_REENUMERATE, 1]),
        bytes([OP_PORTSC, 0x02, 0]), clock(100), bytes([OP_PORTSC, 0x04, 0]),
        bytes([OP_PORTSC, 0x05, 0]), clock(100), bytes([OP_PORTSC, 0x05, 0]),
        clock(100), bytes([OP_REENUMERATE, 1]), bulk_in(1, 2), wait(),
    ]),
    # event rings for interrupters 1..3, completions sent to them
    'interrupters': b'\x00' + b''.join([
        bytes([OP_INTERRUPTER, 0x00]) + u32(0x200),
        bytes([OP_INTERRUPTER, 0x01]) + u32(0x301),
        bytes([OP_INTERRUPTER, 0x08]) + u32(4000),
        bytes([OP_INTERRUPTER, 0x0c]) + u32(3),
        ep_ctx(0x09, dw4=0x400), stream_td(0, 0, 0x04, 512), wait(),
        bytes([OP_INTERRUPTER, 0x35]) + u32(0xffffffff), wait(),
    ]),
    # "migrate here" idle, with IN TDs and frames in flight, in CRC mode
    'migrate-here': b'\x00' + b''.join([
        bytes([OP_MIGRATE, 0]), frame(600, 1), bulk_in(2, 3),
        bytes([OP_MIGRATE, 0]), wait(), cls(0x8a, 1),
        bytes([OP_SET_ALT, 0x00]), cls(0x8a, 1), bytes([OP_SET_ALT, 0x01]),
        bytes([OP_MIGRATE, 0]), frame(600, 2), bulk_in(1, 3), wait(),
        ntb_out(5, [datagram(100, 1)]), bytes([OP_MIGRATE, 0]), wait(),
    ]),
    # an IN stream the NCM oracle follows to the end: IN TDs of every
    # length kind, frames, GETs and filters between them, OUT NTBs
    'oracle-in-stream': b'\x00' + b''.join([
        bulk_in(2, 3), frame(600, 1), frame(700, 2), wait(),
        bulk_in(0x83, 0), frame(1514, 3), frame(60, 4), wait(),
        cls(0x85, dir_in=True, length=4), cls(0x43, value=0x1f),
        bulk_in(3, 2), frame(1400, 5), frame(1400, 6), frame(1400, 7),
        wait(), ntb_out(5, [datagram(100, 1)]), bulk_in(1, 5),
        frame(300, 8), wait(),
    ]),
    'auto-oracle-in-stream': b'\x40' + b''.join([
        bulk_in(4, 2), frame(1000, 1), frame(1000, 2), wait(),
        bulk_in(1, 3), frame(512 - 14, 3), wait(),
    ]),
    # every class request and the standard requests a device sees while
    # a bulk OUT or IN transfer is half done, and migrations there
    'mid-out-class': b'\x00' + mid_tour(False, [
        mid_class(r, v, d) for r, v, d in MID_CLASS]),
    'mid-in-class': b'\x00' + mid_tour(True, [
        mid_class(r, v, d) for r, v, d in MID_CLASS]),
    'mid-out-standard': b'\x00' + mid_tour(False, [
        mid_standard(x) for x in MID_STANDARD]),
    'mid-in-standard': b'\x00' + mid_tour(True, [
        mid_standard(x) for x in MID_STANDARD]),
    'auto-mid-out-class': b'\x40' + mid_tour(False, [
        mid_class(r, v, d) for r, v, d in MID_CLASS]),
    # F23 through the oracle: an IN NTB half sent, SET_INTERFACE(data, 1)
    # at alternate setting 1, the next IN transfer must begin an NTB
    'oracle-set-interface-1': b'\x00' + b''.join([
        frame(1000, 1), frame(1000, 2), frame(1000, 3), wait(),
        bulk_in(1, 2), wait(), bytes([OP_SET_ALT, 0x01]),
        frame(600, 4), bulk_in(2, 3), wait(),
    ]),
    # F23: SET_INTERFACE(data, 1) at alternate setting 1 after the first
    # packet of an OUT and of an IN NTB, a migration there, the rest
    'mid-set-interface-1': b'\x00' + b''.join([
        mid_xfer(False, ntb_input(3, 1000), [(1, mid_standard(0x05)),
                                             (0, mid_migrate())]), wait(),
        ntb_out(5, [datagram(100, 1)]), wait(),
        mid_xfer(True, mid_in_frames(3, 1000), [(1, mid_standard(0x05)),
                                               (0, mid_migrate())]), wait(),
        frame(600, 1), bulk_in(1, 3), wait(),
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


def write(out, target, seeds):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(d, 'seed-' + name), 'wb') as f:
            f.write(data)


def write_all(out):
    write(out, 'usb-ncm-dl-fuzz', STRUCTURED)
    write(out, 'usb-ncm-dl-migration-fuzz',
          dict({k: bytes([v]) for k, v in MIG_STATES.items()},
               **MIG_MUTATED))


def check():
    """the committed seeds are what this writes from the target's tables
    as they are now: an operation renumbered, a table reordered or a seed
    changed without rerunning this fails"""
    bad = []
    with tempfile.TemporaryDirectory() as tmp:
        write_all(tmp)
        for target in sorted(os.listdir(tmp)):
            for name in sorted(os.listdir(os.path.join(tmp, target))):
                committed = os.path.join(OUT, target, name)
                if (not os.path.exists(committed) or
                        not filecmp.cmp(os.path.join(tmp, target, name),
                                        committed, shallow=False)):
                    bad.append(f'{target}/{name}')
    for b in bad:
        print(f'drift: tests/fuzz/corpus/{b} differs from what '
              f'{os.path.basename(__file__)} writes from {SRC}')
    print(f'{len(OPS)} operations read from the target; '
          f'{"no" if not bad else len(bad)} seed(s) drifted')
    return 1 if bad else 0


def main():
    if sys.argv[1:] == ['--check']:
        sys.exit(check())
    write_all(OUT)


if __name__ == '__main__':
    main()
