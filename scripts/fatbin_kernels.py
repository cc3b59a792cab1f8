#!/usr/bin/env python3
"""Lists the GPU code a host binary carries: per architecture, the kernels of its cubins.

Usage: scripts/fatbin_kernels.py BINARY [--expect SM:REGEX]... [--forbid SM:REGEX]...

Reads the fat binaries nvcc embeds (magic 0xBA55ED50: a 16-byte header, then entries of a kind,
1 PTX or 2 cubin, and an architecture such as 80 or 90), and from each cubin (an ELF file) the
names of its kernels (its `.text.<name>` sections, names demangled by c++filt where present).
Prints one line per architecture: its cubins and kernels. --expect SM:REGEX fails unless some
kernel of sm_SM matches REGEX; --forbid SM:REGEX fails if one does. No CUDA tools needed (the
cubins are not compressed; the PTX, which is, is only counted).
Exit codes: 0 every expectation held, 1 one did not, 2 bad input.
"""
import argparse
import re
import shutil
import struct
import subprocess
import sys
from collections import defaultdict

FATBIN_MAGIC = 0xBA55ED50
PTX, CUBIN = 1, 2


def fat_binaries(data):
    """Yields (kind, arch, payload) of every entry of every fat binary in `data`."""
    magic = struct.pack("<I", FATBIN_MAGIC)
    pos = 0
    while (start := data.find(magic, pos)) >= 0:
        version, header_size, size = struct.unpack_from("<HHQ", data, start + 4)
        if version != 1 or header_size != 16:
            pos = start + 4
            continue
        entry, end = start + header_size, start + header_size + size
        while entry < end:
            kind, _, entry_header, payload_size = struct.unpack_from("<HHIQ", data, entry)
            (arch,) = struct.unpack_from("<I", data, entry + 28)
            yield kind, arch, data[entry + entry_header:entry + entry_header + payload_size]
            entry += entry_header + payload_size
        pos = end


def cubin_kernels(elf):
    """The `.text.<name>` section names of a 64-bit little-endian ELF file."""
    if elf[:4] != b"\x7fELF":
        return []
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    def section(i):
        name, _, _, _, offset, size = struct.unpack_from("<IIQQQQ", elf, shoff + i * shentsize)
        return name, offset, size
    _, str_offset, str_size = section(shstrndx)
    names = elf[str_offset:str_offset + str_size]
    kernels = []
    for i in range(shnum):
        name_at = section(i)[0]
        name = names[name_at:names.index(b"\0", name_at)].decode()
        if name.startswith(".text."):
            kernels.append(name[len(".text."):])
    return kernels


def demangle(names):
    if not names or shutil.which("c++filt") is None:
        return names
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout
    return out.splitlines()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binary")
    parser.add_argument("--expect", action="append", default=[], metavar="SM:REGEX")
    parser.add_argument("--forbid", action="append", default=[], metavar="SM:REGEX")
    args = parser.parse_args()
    try:
        data = open(args.binary, "rb").read()
        rules = [(r, int(sm), re.compile(rx)) for r, items in (("expect", args.expect), ("forbid", args.forbid))
                 for sm, rx in (item.split(":", 1) for item in items)]
    except (OSError, ValueError, re.error) as e:
        print(f"fatbin_kernels: {e}", file=sys.stderr)
        return 2
    kernels, cubins, ptx = defaultdict(set), defaultdict(int), defaultdict(int)
    for kind, arch, payload in fat_binaries(data):
        if kind == CUBIN:
            cubins[arch] += 1
            kernels[arch].update(cubin_kernels(payload))
        elif kind == PTX:
            ptx[arch] += 1
    if not cubins:
        print(f"fatbin_kernels: {args.binary} holds no cubin", file=sys.stderr)
        return 2
    names = {arch: demangle(sorted(k)) for arch, k in kernels.items()}
    for arch in sorted(set(cubins) | set(ptx)):
        print(f"sm_{arch}: {cubins[arch]} cubins, {len(names.get(arch, []))} kernels, {ptx[arch]} PTX")
    ok = True
    for rule, sm, rx in rules:
        hits = [n for n in names.get(sm, []) if rx.search(n)]
        if (rule == "expect") != bool(hits):
            ok = False
            what = f"no kernel of sm_{sm} matches" if rule == "expect" else f"{len(hits)} kernels of sm_{sm} match"
            print(f"fatbin_kernels: {rule} {sm}:{rx.pattern}: {what}" + (f" (first: {hits[0]})" if hits else ""),
                  file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
