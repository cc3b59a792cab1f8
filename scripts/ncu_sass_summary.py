#!/usr/bin/env python3
"""Summarizes the per-instruction SASS page of an ncu report (scripts/profile_decode.sh and
profile_prefill.sh write it as CSV, the latter gzipped) for one kernel: warp instructions per warp
and loop trip, stall samples by reason, and per opcode, and the hottest instructions.

Usage: scripts/ncu_sass_summary.py SASS_CSV KERNEL_SUBSTRING [--nth N] [--trips N] [--top K] [--reason R]
                                   [--span FROM TO] [--function]

--nth picks the N-th launch (from 0) whose name holds KERNEL_SUBSTRING. --trips is the number of
executions that marks an instruction as part of the main loop (warps x tiles; for the decode
kernels at 16k x batch 8, 4 warps x 16384 tiles = 65536): instructions run at least 90% that often
are counted as the loop, and their counts are divided by it. --reason (a stall reason such as
`wait`) adds the loop's samples of that reason per opcode. --span FROM TO adds the loop's
instructions from the first whose source holds FROM (itself not counted) to the first after it that
holds TO (not counted): instructions per trip and their share of the loop's stall samples.
--function instead accounts for the kernel's called function (a __noinline__ one, such as the
prefill consumers' Q8 coding: from the target of the call that runs most often to its first RET),
split at its barriers: per part, the stall samples, the warp instructions per call and the top
stall reasons.
"""
import argparse
import collections
import csv
import gzip
import sys


def kernels(path):
    found, current = [], None
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", newline="") as f:
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


def print_function(rows, samples, stalls, num, addresses):
    """The called function's parts between barriers: samples, warp instructions per call, stalls."""
    # The function starts at the target of the call run most often, and ends at its first RET.
    call_sites = [(executed, source.split()[-1]) for source, executed, _, _ in rows
                  if source.split()[0].startswith("CALL") and executed > 0]
    if not call_sites:
        sys.exit("no CALL that runs: the kernel calls no function")
    target = max(call_sites)[1].lower()
    if target not in addresses:
        sys.exit(f"the call's target {target} is not on the page")
    first = addresses[target]
    ret = next((i for i in range(first, len(rows)) if rows[i][0].split()[0].startswith("RET")), None)
    if ret is None:
        sys.exit(f"no RET after the call's target {target}")
    calls = rows[ret][1]
    bars = [i for i in range(first, ret + 1) if rows[i][0].split()[0].startswith("BAR")]
    edges = [first] + [b for bar in bars for b in (bar, bar + 2)] + [ret + 1]
    total = sum(s for _, _, s, _ in rows[first:ret + 1])
    print(f"function: instructions {first}..{ret} ({ret - first + 1} in its code), {calls} calls, "
          f"{total} of {samples} stall samples ({100 * total / max(samples, 1):.1f}%)")
    for a, b in zip(edges, edges[1:]):
        if a >= b:
            continue
        part = rows[a:min(b, ret + 1)]
        reasons = collections.Counter()
        for _, _, _, r in part:
            for name in stalls:
                reasons[name[len("stall_"):]] += num(r, name)
        label = part[0][0].split()[0] if part[0][0].split()[0].startswith("BAR") else part[0][0][:24]
        print(f"  from {label:<24} samples {sum(s for _, _, s, _ in part):>6}  "
              f"instructions per call {sum(e for _, e, _, _ in part) / max(calls, 1):7.1f}  "
              + ", ".join(f"{k} {v}" for k, v in reasons.most_common(4) if v))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv")
    parser.add_argument("kernel")
    parser.add_argument("--trips", type=int, default=65536)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--nth", type=int, default=0)
    parser.add_argument("--reason", help="a stall reason (wait, dispatch, ...): its loop samples per opcode")
    parser.add_argument("--span", nargs=2, metavar=("FROM", "TO"), help="the loop's instructions between two")
    parser.add_argument("--function", action="store_true")
    args = parser.parse_args()

    matching = [k for k in kernels(args.csv) if args.kernel in k["name"]]
    if len(matching) <= args.nth:
        sys.exit(f"no launch {args.nth} of a kernel matching {args.kernel!r} in {args.csv} ({len(matching)} found)")
    kernel = matching[args.nth]
    h = kernel["header"]
    stalls = [n for n in h if n.startswith("stall_") and "Not Issued" not in n]

    def num(row, name):
        return int(row[h[name]] or 0)

    if args.reason and "stall_" + args.reason not in stalls:
        sys.exit(f"no stall reason {args.reason!r} in {args.csv}: "
                 + ", ".join(n[len("stall_"):] for n in stalls))

    rows = [(r[h["Source"]].strip(), num(r, "Instructions Executed"), num(r, "Warp Stall Sampling (All Samples)"), r)
            for r in kernel["rows"]]
    samples = sum(s for _, _, s, _ in rows)
    if args.function:
        print(kernel["name"])
        addresses = {r[h["Address"]].lower(): i for i, (_, _, _, r) in enumerate(rows)}
        print_function(rows, samples, stalls, num, addresses)
        return
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
    opcode_reason = collections.Counter()
    for source, executed, s, r in loop:
        words = source.split()
        opcode = (words[1] if words[0].startswith("@") else words[0]).split(".")[0]
        by_opcode[opcode] += executed / args.trips
        opcode_samples[opcode] += s
        if args.reason:
            opcode_reason[opcode] += num(r, "stall_" + args.reason)
    print("loop opcodes (per warp and trip / stall samples):")
    print("  " + "  ".join(f"{k} {v:.0f}/{opcode_samples[k]}" for k, v in by_opcode.most_common(40)))
    if args.reason:
        total = sum(opcode_reason.values())
        print(f"loop samples of stall reason {args.reason}: {total}, by opcode:")
        print("  " + "  ".join(f"{k} {v} ({100 * v / max(total, 1):.0f}%)" for k, v in opcode_reason.most_common(12)))
    if args.span:
        start = next((i for i, x in enumerate(loop) if args.span[0] in x[0]), None)
        end = None if start is None else next(
            (i for i in range(start + 1, len(loop)) if args.span[1] in loop[i][0]), None)
        if end is None:
            sys.exit(f"no loop instruction holding {args.span[1]!r} after one holding {args.span[0]!r}")
        inside = loop[start + 1 : end]
        span_samples = sum(s for _, _, s, _ in inside)
        print(f"span {args.span[0]} .. {args.span[1]}: {sum(e for _, e, _, _ in inside) / args.trips:.0f} warp "
              f"instructions per trip, {span_samples} stall samples ({100 * span_samples / max(loop_samples, 1):.1f}% "
              "of the loop's)")
    print(f"hottest {args.top} instructions (executions, samples, top stall reasons):")
    for source, executed, s, r in sorted(rows, key=lambda x: -x[2])[: args.top]:
        top = sorted(((num(r, n), n[len("stall_"):]) for n in stalls), reverse=True)[:2]
        reasons = " ".join(f"{n}:{v}" for v, n in top if v)
        print(f"  {r[h['Address']][-5:]} {executed:>9} {s:>6}  {source[:64]:<64} {reasons}")


if __name__ == "__main__":
    main()
