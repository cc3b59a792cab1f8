#!/usr/bin/env python3
"""Fails when ptxas serializes the wgmma pipeline of a kernel.

ptxas reports it only as an info line ("(C7514) Potential Performance Loss: wgmma.mma_async
instructions are serialized due to ..."), the build succeeds, and the kernel then waits for every
wgmma right after issuing it: decode v31 measured such a build 7-20% slower. This recompiles the
named CUDA sources with the build's own commands (compile_commands.json) plus -Xptxas -v into a
scratch object, and prints each such line.

Usage: scripts/check_wgmma_pipelines.py BUILD_DIR SOURCE [SOURCE...]
SOURCE is a path relative to the repository root. Exit 0: every source compiled and no entry
function is serialized; 1: a serialized entry function; 2: a source is missing from the build, a
compile failed, or ptxas compiled no entry function.
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


def command_for(commands, source):
    for entry in commands:
        if entry["file"].endswith("/" + source):
            return entry
    return None


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    build = pathlib.Path(sys.argv[1])
    commands = json.loads((build / "compile_commands.json").read_text())
    serialized = 0
    for source in sys.argv[2:]:
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
        lines = [line.strip() for line in log.splitlines() if SERIALIZED.search(line)]
        serialized += len(lines)
        for line in lines:
            print(f"{source}: {line}")
        print(f"{source}: {len(entries)} entry functions, {len(lines)} with serialized wgmma")
    sys.exit(1 if serialized else 0)


if __name__ == "__main__":
    main()
