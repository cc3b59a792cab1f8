#!/usr/bin/env python3
"""Fails where ptxas serializes a kernel's wgmma pipeline, or spills in a source that must not.

ptxas reports a serialized pipeline only as an info line ("(C7514) Potential Performance Loss:
wgmma.mma_async instructions are serialized due to ..."), the build succeeds, and the kernel then
waits for every wgmma right after issuing it: decode v31 measured such a build 7-20% slower. A
spill is a warning the build passes too, and in a kernel that holds its accumulators, scores and
P in registers it puts local-memory traffic into every step. This recompiles the named CUDA
sources with the build's own commands (compile_commands.json) plus -Xptxas -v into a scratch
object, prints each serialized pipeline and, for the sources after --spill-free, each function
that spills, and a line per source with the range of registers ptxas gave its functions.

Usage: scripts/check_ptxas.py BUILD_DIR SOURCE... [--spill-free SOURCE...]
SOURCE is a path relative to the repository root; every source is checked for serialized
pipelines, those after --spill-free for spills too. Exit 0: every source compiled, no entry
function is serialized and no spill-free source spills; 1: a serialized entry function or a
spill; 2: a source is missing from the build, a compile failed, or ptxas compiled no entry
function.
"""
import json
import pathlib
import re
import shlex
import subprocess
import sys
import tempfile

SERIALIZED = re.compile(r"\(C75\d\d\) Potential Performance Loss: wgmma")
ENTRY = re.compile(r"Compiling entry function '([^']+)'")
# "Function properties for NAME" and, on the next line, "... N bytes spill stores, M bytes spill loads".
PROPERTIES = re.compile(r"Function properties for (\S+)\s*\n\s*\d+ bytes stack frame, (\d+) bytes spill stores, "
                        r"(\d+) bytes spill loads")
REGISTERS = re.compile(r"Used (\d+) registers")


def command_for(commands, source):
    for entry in commands:
        if entry["file"].endswith("/" + source):
            return entry
    return None


def compile_verbose(build, commands, source):
    """ptxas' -v output for `source` and its entry functions, or exits 2 naming why there are none."""
    entry = command_for(commands, source)
    if entry is None:
        print(f"{source}: not in {build}/compile_commands.json")
        sys.exit(2)
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    with tempfile.TemporaryDirectory() as scratch:
        out = args.index("-o")
        args[out + 1] = str(pathlib.Path(scratch) / "object.o")
        run = subprocess.run(args + ["-Xptxas", "-v"], cwd=entry["directory"], capture_output=True, text=True)
    log = run.stdout + run.stderr
    if run.returncode != 0:
        print(f"{source}: the compile failed (exit {run.returncode})\n{log[-4000:]}")
        sys.exit(2)
    entries = ENTRY.findall(log)
    if not entries:
        print(f"{source}: ptxas compiled no entry function")
        sys.exit(2)
    return log, entries


def main():
    args = sys.argv[1:]
    spill_free = []
    if "--spill-free" in args:
        at = args.index("--spill-free")
        args, spill_free = args[:at], args[at + 1:]
    if len(args) < 1 or len(args) + len(spill_free) < 2:
        sys.exit(__doc__)
    build = pathlib.Path(args[0])
    commands = json.loads((build / "compile_commands.json").read_text())
    failures = 0
    for source in args[1:] + spill_free:
        log, entries = compile_verbose(build, commands, source)
        serialized = [line.strip() for line in log.splitlines() if SERIALIZED.search(line)]
        for line in serialized:
            print(f"{source}: {line}")
        spilling = []
        if source in spill_free:
            spilling = [(name, int(st), int(ld)) for name, st, ld in PROPERTIES.findall(log) if int(st) or int(ld)]
            for name, stores, loads in spilling:
                print(f"{source}: {name} spills {stores} bytes (stores), {loads} (loads)")
        failures += len(serialized) + len(spilling)
        summary = f"{source}: {len(entries)} entry functions, {len(serialized)} with serialized wgmma"
        if source in spill_free:
            summary += f", {len(spilling)} functions spilling"
        registers = sorted(int(r) for r in REGISTERS.findall(log))
        if registers:
            summary += f"; ptxas registers {registers[0]}-{registers[-1]}"
        print(summary)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
