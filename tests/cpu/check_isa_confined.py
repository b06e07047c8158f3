#!/usr/bin/env python3
"""Checks that a minivit binary runs on any x86-64 CPU until it chooses a level: every
function holding an instruction beyond the x86-64 baseline (AVX, AVX2, FMA, AVX-512, BMI,
LZCNT, MOVBE) must belong to a level compiled for it, namespace isa_avx2 or isa_avx512
(kernels/isa.h). An inline function or template compiled into a level but shared with the
baseline would be merged by the linker, and the merged copy could be the leveled one; this
finds it.
usage: check_isa_confined.py BINARY"""
import re
import sys

import disassembly

BEYOND_BASELINE = re.compile(
    r"^(v\w+|k\w+|andn|bextr|blsi|blsmsk|blsr|bzhi|mulx|pdep|pext|rorx|sarx|shlx|shrx|"
    r"lzcnt|tzcnt|movbe)$")
LEVELED = ("isa_avx2::", "isa_avx512::")


def main():
    binary = sys.argv[1]
    listing = disassembly.functions(binary)
    leaks, leveled = {}, 0
    for function, instructions in listing.items():
        for _, mnemonic, _ in instructions:
            if not BEYOND_BASELINE.match(mnemonic):
                continue
            if any(level in function for level in LEVELED):
                leveled += 1
            else:
                leaks.setdefault(function, mnemonic)
    seen = len(listing)
    if seen == 0:
        sys.exit("no functions found in %s" % binary)
    if leaks:
        for function, mnemonic in sorted(leaks.items())[:40]:
            print("beyond x86-64 outside a level: %s (%s)" % (function, mnemonic))
        sys.exit("%d functions of %s would stop an older CPU" % (len(leaks), binary))
    if leveled == 0:
        sys.exit("no leveled code found in %s: is it a portable build?" % binary)
    print("%s: %d functions; the %d instructions beyond x86-64 all lie in isa_avx2 or "
          "isa_avx512 functions" % (binary, seen, leveled))


main()
