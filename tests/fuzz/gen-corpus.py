#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Write the seed corpora under tests/fuzz/corpus/ (run from anywhere; the
# files are committed, so only rerun this after changing it).  NTBs come
# from scripts/lib/ncm_ntb.py (NCM 1.0 section 3 field by field, not the
# codec) and include the malformed shapes the unit test checks.

import os
import struct
import zlib
import sys

TOP = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(TOP, '..', '..', 'scripts', 'lib'))
import ncm_ntb  # noqa: E402
from ncm_ntb import NTB16, NTB32  # noqa: E402

OUT = os.path.join(TOP, 'corpus')

# usb-ncm-dl-ntb-parse selector byte: bit 0 NTB32, bits 1-3 max NTB size index
# (4 = 65536, 7 = 4 GiB), bits 4-5 datagram size, bits 6-7 max datagrams
SEL16 = 4 << 1
SEL32 = 1 | (4 << 1)
SEL32_4G = 1 | (7 << 1)
SEL16_MAX1 = SEL16 | (1 << 6)


def frame(n, seed=0):
    return bytes((seed * 131 + i * 7) & 0xff for i in range(n))


def ntb(fmt, lens, **kw):
    return ncm_ntb.build(fmt, [frame(ln, i) for i, ln in enumerate(lens)],
                         **kw)


def ntb16(lens, seq=1, **kw):
    return ntb(NTB16, lens, seq=seq, **kw)


def ntb32(lens, seq=1, **kw):
    return ntb(NTB32, lens, seq=seq, **kw)


def chain16(n, loop_to=0):
    dg = 12 + 16 * n
    b = bytearray(dg) + frame(14)
    ncm_ntb.pack_nth(b, 0, NTB16, 0, dg + 14, 12)
    for i in range(n):
        ndp = 12 + 16 * i
        nxt = ndp + 16 if i + 1 < n else (12 + 16 * (loop_to - 1)
                                          if loop_to else 0)
        ncm_ntb.pack_ndp(b, ndp, NTB16, b'NCM0', 16, nxt, [(dg, 14)])
    return bytes(b)


def linux_out(tx_max=2048, count=8):
    # cdc_ncm_fill_tx_frame(): NDP after the NTH sized for 40 + 1 entries,
    # datagrams at ALIGN(len, 4) + 2, zero padding to tx_max
    b = bytearray(tx_max)
    ncm_ntb.pack_nth(b, 0, NTB16, 0, tx_max, 12)
    pos = 12 + 8 + 41 * 4
    ents = []
    for i in range(count):
        a = (pos + 3) // 4 * 4 + 2
        pos = a if a != pos else pos
        ln = 60 + 11 * i
        ents.append((pos, ln))
        b[pos:pos + ln] = frame(ln, i)
        pos += ln
    ncm_ntb.pack_ndp(b, 12, NTB16, b'NCM0', 12 + 4 * count, 0, ents)
    return bytes(b)


def poke16(data, off, val):
    b = bytearray(data)
    struct.pack_into('<H', b, off, val)
    return bytes(b)


def poke32(data, off, val):
    b = bytearray(data)
    struct.pack_into('<I', b, off, val)
    return bytes(b)


def crc_ntb(fmt, lens, sig=None, bad=-1):
    """NCM1/ncm1 NTB: every datagram followed by its CRC-32; wSequence has
    bit 15 set, which puts the parse harness in CRC mode."""
    dgs = []
    for i, ln in enumerate(lens):
        f = frame(ln, i)
        crc = zlib.crc32(f) ^ (1 if i == bad else 0)
        dgs.append(f + struct.pack('<I', crc))
    return ncm_ntb.build(fmt, dgs, seq=0x8001, ndp_sig=sig or fmt.ndp_crc_sig)


def parse_seeds():
    m16 = ntb16([14])
    m32 = ntb32([14])
    two = ntb16([60, 1514, 14], seq=1) + ntb16([99], seq=2)
    s = {
        'ok-ntb16-min': (SEL16, m16),
        'ok-ntb32-min': (SEL32, m32),
        'ok-windows-pad': (SEL16, m16 + b'\0'),
        'ok-ntb32-windows-pad': (SEL32, m32 + b'\0'),
        'ok-back-to-back': (SEL16, two + ntb16([1514, 200, 42], seq=3)),
        'ok-back-to-back-ntb32': (SEL32, ntb32([60, 1514]) + ntb32([99])),
        'ok-block-len-0': (SEL16, poke16(m16, 8, 0) + bytes(58)),
        'ok-linux-out-2k': (SEL16, linux_out()),
        'ok-chain-16': (SEL16, chain16(16)),
        'nth-truncated': (SEL16, m16[:11]),
        'nth-signature': (SEL16, m32),
        'nth-header-len': (SEL16, poke16(m16, 4, 16)),
        'block-too-short': (SEL16, poke16(m16, 8, 27)),
        'block-len-0-ntb32': (SEL32, poke32(m32, 8, 0)),
        'block-past-transfer': (SEL32_4G, poke32(m32, 8, 0x80000000)),
        'ndp-alignment': (SEL16, poke16(m16, 10, 14)),
        'ndp-bounds': (SEL16, poke16(m16, 10, 36)),
        'ndp-ncm1': (SEL16, ntb16([14], ndp_sig=b'NCM1')),
        'ndp-length-odd': (SEL16, poke16(m16, 16, 18)),
        'ndp-unterminated': (SEL16, poke16(poke16(m16, 24, 28), 26, 14)),
        'ndp-self-loop': (SEL16, poke16(m16, 18, 12)),
        'ndp-chain-loop': (SEL16, chain16(3, 2)),
        'ndp-chain-17': (SEL16, chain16(17)),
        'dg-0xfff0-wraps': (SEL16, poke16(poke16(m16, 20, 0xfff0), 22, 0x20)),
        'dg-ntb32-wraps': (SEL32, poke32(poke32(m32, 32, 0xfffffff0),
                                         36, 0x20)),
        'dg-too-short': (SEL16, poke16(m16, 22, 13)),
        'dg-too-long': (SEL16, ntb16([1515])),
        'too-many': (SEL16_MAX1, ntb16([14, 14])),
        'malformed-second': (SEL16, m16 + poke16(m16, 22, 13)),
        'nonzero-pad': (SEL16, m16 + b'\x01'),
    }
    # NDP whose header ends the block: its entries run past wBlockLength
    end = bytearray(44)
    ncm_ntb.pack_nth(end, 0, NTB16, 0, 36, 28)
    end[12:26] = frame(14)
    ncm_ntb.pack_ndp(end, 28, NTB16, b'NCM0', 16, 0, [(12, 14)])
    s['ndp-at-end'] = (SEL16, bytes(end))
    # CRC mode (wSequence bit 15): good, a bad CRC (the parser passes it,
    # the function drops it), NCM0 in CRC mode, datagrams shorter than the
    # CRC and than a header plus CRC
    c16 = crc_ntb(NTB16, [60, 1514, 14])
    s['crc-ok-ntb16'] = (SEL16, c16)
    s['crc-ok-ntb32'] = (SEL32, crc_ntb(NTB32, [14, 700]))
    s['crc-bad-crc'] = (SEL16, crc_ntb(NTB16, [100, 200], bad=1))
    s['crc-ndp-ncm0'] = (SEL16, crc_ntb(NTB16, [100], sig=b'NCM0'))
    s['crc-dg-3-bytes'] = (SEL16, poke16(c16, 22, 3))
    s['crc-dg-17-bytes'] = (SEL16, poke16(c16, 22, 17))
    s['crc-dg-too-long'] = (SEL16, crc_ntb(NTB16, [1515]))
    s['crc-ncm1-without-crc-mode'] = (SEL16, poke16(c16, 6, 1))
    return s


def roundtrip_seeds():
    def rt(flags, max_len, div, rem, maxd, sizes):
        return (struct.pack('<BHHHB', flags, max_len, div, rem, maxd) +
                b''.join(struct.pack('<H', v) for v in sizes))
    return {
        'div4-16k-1514': rt(0, 14336, 4, 0, 0, [1500] * 12),
        'div512-rem14': rt(0, 30720, 512, 14, 0, [1500] * 24),
        'ntb32-div8-rem6-align16': rt(1 | (2 << 1), 3584, 8, 6, 0,
                                      [0, 1, 46, 1500, 319] * 4),
        'max3': rt(0, 14336, 0, 0, 3, [86] * 8),
        'small-64': rt(0, 6144, 1, 0, 0, [50] * 200),
        '64k': rt(0, 63488, 4, 0, 0, [1500] * 50),
        'jumbo-ntb32': rt(1 | (1 << 4), 65000, 4, 2, 0, [9000] * 40),
    }


def write(name, seeds):
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.unlink(os.path.join(d, f))
    for seed_name, data in seeds.items():
        with open(os.path.join(d, seed_name), 'wb') as f:
            f.write(data)


def main():
    write('usb-ncm-dl-ntb-parse', {k: bytes([sel]) + v
                                   for k, (sel, v) in parse_seeds().items()})
    write('usb-ncm-dl-ntb-roundtrip', roundtrip_seeds())
    return 0


if __name__ == '__main__':
    sys.exit(main())
