#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The results blocks scripts write into docs: the lines between a line
# that starts "<!-- KEY:begin" and the line "<!-- KEY:end -->".  Both
# marker lines stay as they are; only what lies between them is replaced.
#
#   doc_block.py write DOC KEY FILE   the block's new text from FILE (- stdin)
#   doc_block.py check DOC KEY        one pair of markers, begin first
#
# Exit status 1, with the reason on stderr, when DOC does not have exactly
# one pair (the block is then not written).
import sys


def find(lines, key):
    """(begin, end) line indexes of KEY's markers, or exit with why"""
    begins = [i for i, l in enumerate(lines)
              if l.startswith(f"<!-- {key}:begin")]
    ends = [i for i, l in enumerate(lines)
            if l.rstrip("\n") == f"<!-- {key}:end -->"]
    if len(begins) != 1 or len(ends) != 1 or begins[0] > ends[0]:
        sys.exit(f"{len(begins)} begin and {len(ends)} end markers of "
                 f"{key}: one pair, begin first, is needed")
    return begins[0], ends[0]


def main():
    cmd, doc, key = sys.argv[1:4]
    with open(doc) as f:
        lines = f.readlines()
    begin, end = find(lines, key)
    if cmd == "check":
        return 0
    src = sys.stdin if sys.argv[4] == "-" else open(sys.argv[4])
    text = src.read()
    if text and not text.endswith("\n"):
        text += "\n"
    with open(doc, "w") as f:
        f.writelines(lines[:begin + 1])
        f.write(text)
        f.writelines(lines[end:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
