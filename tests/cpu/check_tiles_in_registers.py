#!/usr/bin/env python3
"""Checks that the product kernels keep their C tile in registers: no innermost loop of a
tile of the fp32 kernels (sgemm_blocked.h) or of the AVX512_BF16 kernel (a backward jump over
at most 64 instructions holding broadcasts of A and at least four FMAs or bf16 dot products)
may store a vector register to the stack. GCC writes an accumulator array back to
memory at every step of k once anything takes its address or indexes it in a loop, and the
tile then runs at about half its rate; the numbers still come out right, so only the
instructions show it.
usage: check_tiles_in_registers.py BINARY"""
import re
import sys

import disassembly

KERNELS = re.compile(r"isa_(avx2|avx512)::(sgemm_blocked::sgemm<|\(anonymous namespace\)::"
                     r"sgemm_blocked<)")
JUMP_TARGET = re.compile(r"^([0-9a-f]+) <")
SPILL = re.compile(r"^%[xyz]mm\d+,-?(0x[0-9a-f]+)?\(%r[bs]p")
MAX_LOOP = 64


def tile_loops(instructions):
    """(first, last) indices of the loops whose body holds broadcasts and FMAs."""
    where = {address: i for i, (address, _, _) in enumerate(instructions)}
    for i, (address, mnemonic, operands) in enumerate(instructions):
        target = JUMP_TARGET.match(operands) if mnemonic.startswith("j") else None
        if not target:
            continue
        first = where.get(int(target.group(1), 16))
        if first is None or first > i or i - first > MAX_LOOP:
            continue
        body = [m for _, m, _ in instructions[first:i + 1]]
        if any(m in ("vbroadcastss", "vpbroadcastd") for m in body) and \
                sum(m.startswith(("vfmadd", "vdpbf16ps")) for m in body) >= 4:
            yield first, i


def main():
    binary = sys.argv[1]
    functions = {name: instructions for name, instructions
                 in disassembly.functions(binary, KERNELS.search).items() if instructions}
    if not functions:
        sys.exit("no product kernels found in %s" % binary)
    loops, spilling = 0, []
    for function, instructions in sorted(functions.items()):
        for first, last in tile_loops(instructions):
            loops += 1
            stores = [i for i in range(first, last + 1) if instructions[i][1].startswith("vmov")
                      and SPILL.match(instructions[i][2])]
            if stores:
                spilling.append("%s: the loop at %x stores %d vector registers to the stack "
                                "at every step" % (function[:110], instructions[first][0],
                                                   len(stores)))
    if loops == 0:
        sys.exit("no tile loops found in the product kernels of %s" % binary)
    if spilling:
        print("\n".join(spilling))
        sys.exit("%d of %d tile loops in %s keep their tile in memory" % (len(spilling), loops,
                                                                          binary))
    print("%s: %d tile loops in %d kernels, none stores a register to the stack" %
          (binary, loops, len(functions)))


main()
