#!/usr/bin/env python3
"""Compares the machine code of the kernels in CUDA sources between a git revision and the tree.

For a change that should not change any kernel (a restructuring, moved helpers), this compiles
each source of the base revision and of the working tree to an sm_90a cubin (no device needed)
and compares every kernel's .text section: identical bytes mean identical SASS. Where they
differ it counts the 16-byte instructions that differ and says whether the sizes match. Names of
kernels in anonymous namespaces carry a hash of their file, which is normalized away.

Usage: scripts/compare_machine_code.py BASE_REV SOURCE[:BASE_SOURCE] [...]
SOURCE is a path under the repository root in the working tree; BASE_SOURCE, when the file was
renamed, its path at BASE_REV. Kernels whose mangled names all changed (a template parameter added
with a default) are paired in name order. Exit 0 whether or not the code differs (the table is the answer);
2 when a compile fails.
"""
import hashlib
import pathlib
import re
import struct
import subprocess
import sys
import tempfile

NVCC = "/usr/local/cuda/bin/nvcc"
# An anonymous namespace's mangled name: a length, _GLOBAL__N__, a hash, the file's name and hash,
# sometimes a numeric suffix that varies between compiles (before the next name's 1-2 digit length).
ANONYMOUS = re.compile(r"\d*_GLOBAL__N__[0-9a-f]+_\d+_\w+?_cu_[0-9a-f]{8}(?:_\d+?(?=\d{1,2}[A-Za-z_]))?")


def compile_cubin(root, source, out):
    cmd = [NVCC, f"-I{root}/kernels/include", f"-I{root}", "-O3", "-DNDEBUG", "-arch=sm_90a",
           "--expt-relaxed-constexpr", "-std=c++17", "-x", "cu", "-cubin", f"{root}/{source}", "-o", str(out)]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        sys.stderr.write(result.stderr)
        sys.exit(2)


def kernel_text(cubin):
    """{normalized section name: bytes} of the .text.* sections of an ELF64 cubin."""
    data = pathlib.Path(cubin).read_bytes()
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    entsize, count, names_index = struct.unpack_from("<HHH", data, 0x3A)
    header = lambda i: struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * entsize)
    names = header(names_index)[4]
    out = {}
    for i in range(count):
        name_offset, _, _, _, offset, size = header(i)[:6]
        name = data[names + name_offset:data.index(b"\0", names + name_offset)].decode()
        if name.startswith(".text."):
            out[ANONYMOUS.sub("<anon>", name[len(".text."):])] = data[offset:offset + size]
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    base_rev, pairs = sys.argv[1], sys.argv[2:]
    repo = pathlib.Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        base_root = tmp / "base"
        subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", str(base_root), base_rev],
                       check=True, capture_output=True)
        try:
            total = same = 0
            for pair in pairs:
                source, _, base_source = pair.partition(":")
                base_source = base_source or source
                stem = pathlib.Path(source).stem
                compile_cubin(base_root, base_source, tmp / f"{stem}.base.cubin")
                compile_cubin(repo, source, tmp / f"{stem}.new.cubin")
                base = kernel_text(tmp / f"{stem}.base.cubin")
                new = kernel_text(tmp / f"{stem}.new.cubin")
                # Kernels whose names changed (a template parameter added with a default value
                # changes every mangled name) are paired in name order when both sides have as
                # many unmatched; they are compared under the base name.
                only_base = sorted(set(base) - set(new))
                only_new = sorted(set(new) - set(base))
                if only_base and len(only_base) == len(only_new):
                    for old_name, new_name in zip(only_base, only_new):
                        print(f"{source}: renamed {old_name[:60]}... -> {new_name[:60]}...")
                        new[old_name] = new.pop(new_name)
                for name in sorted(set(base) | set(new)):
                    total += 1
                    a, b = base.get(name), new.get(name)
                    short = name if len(name) <= 90 else name[:87] + "..."
                    if a is None or b is None:
                        print(f"{source}: {short}: only in {'the tree' if a is None else base_rev}")
                    elif a == b:
                        same += 1
                        print(f"{source}: {short}: identical ({len(a) // 16} instructions, "
                              f"{hashlib.md5(a).hexdigest()[:8]})")
                    else:
                        differing = sum(a[i:i + 16] != b[i:i + 16] for i in range(0, min(len(a), len(b)), 16))
                        print(f"{source}: {short}: differs: {len(a) // 16} -> {len(b) // 16} instructions, "
                              f"{differing} differ in place")
            print(f"{same} of {total} kernels identical")
        finally:
            subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(base_root)],
                           capture_output=True)


if __name__ == "__main__":
    main()
