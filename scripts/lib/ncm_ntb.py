# SPDX-License-Identifier: GPL-2.0-or-later
#
# The one NTB builder of the Python tools (NCM 1.0 section 3, laid out
# field by field, not by the device's codec): the fuzz corpus generators
# under tests/fuzz/ import it, and scripts/check/check-tables.sh fails if
# another Python file packs an NTH or NDP itself.
#
#   import ncm_ntb
#   ncm_ntb.build(ncm_ntb.NTB16, [frame1, frame2])      # a well-formed NTB
#   ncm_ntb.pack_nth(buf, 0, ncm_ntb.NTB16, seq, block_len, ndp_index)
#   ncm_ntb.pack_ndp(buf, off, ncm_ntb.NTB16, b'NCM0', length, next, ents)
#
# The second form writes any field value, so malformed shapes (an NDP that
# loops, a block length past the input) are built with the same code.

import struct


class Format:
    """What differs between NTB16 and NTB32, as in the codec's format
    table: NTH struct, signature and size, NDP header struct and size,
    datagram pointer entry struct, the smallest NDP, the NDP signatures."""

    def __init__(self, name, nth, nth_sig, nth_len, ndp, ndp_hdr, entry,
                 entry_len, ndp_min, ndp_sig, ndp_crc_sig):
        self.name = name
        self.nth = nth
        self.nth_sig = nth_sig
        self.nth_len = nth_len
        self.ndp = ndp
        self.ndp_hdr = ndp_hdr
        self.entry = entry
        self.entry_len = entry_len
        self.ndp_min = ndp_min
        self.ndp_sig = ndp_sig
        self.ndp_crc_sig = ndp_crc_sig

    def ndp_fields(self, sig, length, next_index):
        if self.ndp_hdr == 8:
            return (sig, length, next_index)
        return (sig, length, 0, next_index, 0)

    def ndp_room(self, count):
        """Bytes of an NDP with count entries and its zero terminator."""
        return max(self.ndp_hdr + (count + 1) * self.entry_len, self.ndp_min)


NTB16 = Format('ntb16', '<4sHHHH', b'NCMH', 12, '<4sHH', 8, '<HH', 4, 16,
               b'NCM0', b'NCM1')
NTB32 = Format('ntb32', '<4sHHII', b'ncmh', 16, '<4sHHII', 16, '<II', 8, 32,
               b'ncm0', b'ncm1')


def pack_nth(buf, off, fmt, seq, block_len, ndp_index):
    """Write an NTH (dwSignature, wHeaderLength, wSequence, wBlockLength,
    wNdpIndex) at buf[off]."""
    struct.pack_into(fmt.nth, buf, off, fmt.nth_sig, fmt.nth_len, seq,
                     block_len, ndp_index)


def nth(fmt, seq, block_len, ndp_index):
    """An NTH alone, as bytes."""
    b = bytearray(fmt.nth_len)
    pack_nth(b, 0, fmt, seq, block_len, ndp_index)
    return bytes(b)


def pack_ndp(buf, off, fmt, sig, length, next_index, entries=()):
    """Write an NDP header and its (index, length) entries at buf[off];
    the terminating entry is whatever buf holds after them (zero in a
    fresh bytearray)."""
    struct.pack_into(fmt.ndp, buf, off, *fmt.ndp_fields(sig, length,
                                                        next_index))
    for i, (index, length) in enumerate(entries):
        struct.pack_into(fmt.entry, buf,
                         off + fmt.ndp_hdr + fmt.entry_len * i, index, length)


def build(fmt, datagrams, seq=0, block_len=None, ndp_sig=None, ndp_next=0,
          ndp_len=None, entries=None):
    """NTH, then one NDP sized for the datagrams (fmt.ndp_room), then the
    datagrams each at a 4-byte boundary.  block_len, ndp_len, ndp_next and
    entries replace the values that describe the NTB correctly."""
    room = fmt.ndp_room(len(datagrams))
    ndp_at = fmt.nth_len
    pos = ndp_at + room
    body = bytearray(pos)
    offs = []
    for d in datagrams:
        while pos % 4:
            body.append(0)
            pos += 1
        offs.append((pos, len(d)))
        body += d
        pos += len(d)
    pack_nth(body, 0, fmt, seq, pos if block_len is None else block_len,
             ndp_at)
    pack_ndp(body, ndp_at, fmt, ndp_sig or fmt.ndp_sig,
             room if ndp_len is None else ndp_len, ndp_next,
             offs if entries is None else entries)
    return bytes(body)
