"""A minivit binary's instructions by function, from `objdump -d -C`, for the checks in this
folder that read the machine code: check_isa_confined.py and check_tiles_in_registers.py."""
import re
import subprocess

HEADER = re.compile(r"^[0-9a-f]+ <(.*)>:$")
INSTRUCTION = re.compile(r"^\s*([0-9a-f]+):\t(\S+)\s*(.*)$")


def functions(binary, wanted=lambda name: True):
    """{demangled name: [(address, mnemonic, operands)]} for each function whose name
    `wanted` accepts; functions it rejects are listed with no instructions."""
    listing = subprocess.run(["objdump", "-d", "-C", "--no-show-raw-insn", binary],
                             check=True, capture_output=True, text=True).stdout
    found, current = {}, None
    for line in listing.splitlines():
        header = HEADER.match(line)
        if header:
            name = header.group(1)
            found.setdefault(name, [])
            current = name if wanted(name) else None
            continue
        instruction = INSTRUCTION.match(line) if current else None
        if instruction:
            found[current].append((int(instruction.group(1), 16), instruction.group(2),
                                   instruction.group(3)))
    return found
