#!/usr/bin/env python3
"""Summarizes the per-instruction SASS page of an ncu report (scripts/profile_decode.sh writes it
as CSV) for one kernel: warp instructions per warp and loop trip, stall samples by reason, and per
opcode, and the hottest instructions.

Usage: scripts/ncu_sass_summary.py SASS_CSV KERNEL_SUBSTRING [--trips N] [--top K]

--trips is the number of executions that marks an instruction as part of the main loop (warps x
tiles; for the decode kernels at 16k x batch 8, 4 warps x 16384 tiles = 65536): instructions run
at least 90% that often are counted as the loop, and their counts are divided by it.
"""
import argparse
import collections
import csv
import sys


def kernels(path):
    found, current = [], None
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if not row:
                continue
            if row[0] == "Kernel Name":
                current = {"name": row[1], "header": None, "rows": []}
                found.append(current)
            elif row[0] == "Address" and current is not None:
                current["header"] = {name: i for i, name in enumerate(row)}
            elif current is not None and current["header"] is not None:
                current["rows"].append(row)
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv")
    parser.add_argument("kernel")
    parser.add_argument("--trips", type=int, default=65536)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()

    kernel = next((k for k in kernels(args.csv) if args.kernel in k["name"]), None)
    if kernel is None:
        sys.exit(f"no kernel matching {args.kernel!r} in {args.csv}")
    h = kernel["header"]
    stalls = [n for n in h if n.startswith("stall_") and "Not Issued" not in n]

    def num(row, name):
        return int(row[h[name]] or 0)

    rows = [(r[h["Source"]].strip(), num(r, "Instructions Executed"), num(r, "Warp Stall Sampling (All Samples)"), r)
            for r in kernel["rows"]]
    samples = sum(s for _, _, s, _ in rows)
    loop = [x for x in rows if x[1] >= 0.9 * args.trips]
    loop_samples = sum(s for _, _, s, _ in loop)
    print(kernel["name"])
    print(f"stall samples: {samples}, in the loop: {loop_samples} ({100 * loop_samples / max(samples, 1):.1f}%)")
    print(f"loop: {sum(e for _, e, _, _ in loop) / args.trips:.1f} warp instructions per warp and trip")
    by_reason = collections.Counter()
    for _, _, _, r in rows:
        for name in stalls:
            by_reason[name[len("stall_"):]] += num(r, name)
    print("stall reasons: " + ", ".join(f"{k} {100 * v / max(samples, 1):.1f}%" for k, v in by_reason.most_common(10)))
    by_opcode = collections.Counter()
    opcode_samples = collections.Counter()
    for source, executed, s, _ in loop:
        words = source.split()
        opcode = (words[1] if words[0].startswith("@") else words[0]).split(".")[0]
        by_opcode[opcode] += executed / args.trips
        opcode_samples[opcode] += s
    print("loop opcodes (per warp and trip / stall samples):")
    print("  " + "  ".join(f"{k} {v:.0f}/{opcode_samples[k]}" for k, v in by_opcode.most_common(40)))
    print(f"hottest {args.top} instructions (executions, samples, top stall reasons):")
    for source, executed, s, r in sorted(rows, key=lambda x: -x[2])[: args.top]:
        top = sorted(((num(r, n), n[len("stall_"):]) for n in stalls), reverse=True)[:2]
        reasons = " ".join(f"{n}:{v}" for v, n in top if v)
        print(f"  {r[h['Address']][-5:]} {executed:>9} {s:>6}  {source[:64]:<64} {reasons}")


if __name__ == "__main__":
    main()
