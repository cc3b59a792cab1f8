#!/usr/bin/env python3
"""Prints the counters table of docs/perf/prefill.md from an ncu raw page.

Input: the CSV of `ncu --import REPORT --csv --page raw` (gzip or plain) of a profiler run with
`--set full` (configs/bench/profile/*.json). One markdown row per profiled kernel launch, in launch
order (the last of consecutive launches of one kernel): its name (template arguments kept, namespaces dropped), duration, tensor pipe active, warp
instructions, issue slots busy, and the four largest stall reasons by share of the PC samples.

Usage: scripts/ncu_kernel_counters.py RAW.csv[.gz]
"""
import csv
import gzip
import re
import sys

STALL = re.compile(r"^smsp__pcsamp_warps_issue_stalled_(\w+?)$")


def open_text(path):
    return gzip.open(path, "rt", newline="") if path.endswith(".gz") else open(path, newline="")


def number(text):
    return float(text.replace(",", "")) if text not in ("", "n/a") else 0.0


def short_name(name):
    name = re.sub(r"\b(?:tilemix|gpu|ws_detail|\(anonymous namespace\)|unnamed>)::", "", name)
    return re.sub(r"^void\s+", "", name).replace("(KernelParamsWs)", "")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open_text(sys.argv[1]) as f:
        rows = list(csv.reader(f))
    header, units, launches = rows[0], rows[1], rows[2:]
    col = {name: i for i, name in enumerate(header)}
    stalls = [(m.group(1), i) for name, i in col.items() if (m := STALL.match(name)) and not name.endswith("_not_issued")]
    print("| kernel | time | tensor pipe active | warp instructions | issue slots busy | top stalls (share of samples) |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    # A bench row may launch its kernel more than once (an untimed run, then the timed one): the
    # last launch of each run of one kernel name stands for it.
    last = [r for i, r in enumerate(launches)
            if i + 1 == len(launches) or launches[i + 1][col["Kernel Name"]] != r[col["Kernel Name"]]]
    for r in last:
        duration = number(r[col["gpu__time_duration.sum"]])
        scale = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0, "msecond": 1.0}[units[col["gpu__time_duration.sum"]]]
        samples = {reason: number(r[i]) for reason, i in stalls}
        total = sum(samples.values()) or 1.0
        top = sorted(samples.items(), key=lambda kv: -kv[1])[:4]
        print(f"| {short_name(r[col['Kernel Name']])} | {duration * scale:.2f} ms "
              f"| {number(r[col['sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active']]):.1f}% "
              f"| {number(r[col['smsp__inst_executed.sum']]) / 1e9:.2f} G "
              f"| {number(r[col['smsp__issue_active.avg.pct_of_peak_sustained_active']]):.0f}% "
              f"| {', '.join(f'{k.replace(chr(95), chr(32))} {100 * v / total:.0f}' for k, v in top)} |")


if __name__ == "__main__":
    main()
