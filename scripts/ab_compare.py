#!/usr/bin/env python3
"""Same-run A/B table from `scripts/device_batch.sh run ab` output.

Usage: scripts/ab_compare.py DIR_OR_TGZ [CONFIG]

Reads ab-CONFIG-SIDEN.json (from a folder, not its subfolders, or a results.tgz): SIDE is `base`
or a build's name (`new`, or each name of AB_BUILDS: not ending in a digit), N the run. Prints,
per row (case, method), every run's median in microseconds and, per build, the change of its best
median over the base's best: the runs alternate base, new, ..., base, new, ... in one session, so
the spread between a side's runs is the noise to read the change against.
"""
import json
import re
import sys
import tarfile
from collections import defaultdict
from pathlib import Path

# A build's name ends in a letter or _, so that the run number after it reads one way.
NAME = re.compile(r"ab-(?P<config>.+)-(?P<side>[A-Za-z](?:[A-Za-z0-9_]*[A-Za-z_])?)(?P<rep>\d+)\.json$")


def load_runs(source):
    runs = {}
    if source.is_dir():
        for f in sorted(source.glob("ab-*.json")):  # the folder's own runs: a subfolder holds another A/B
            m = NAME.search(f.name)
            if m:
                runs[(m["config"], m["side"], int(m["rep"]))] = json.loads(f.read_text())
    else:
        with tarfile.open(source) as tar:
            for member in tar.getmembers():
                m = NAME.search(member.name)
                if m:
                    runs[(m["config"], m["side"], int(m["rep"]))] = json.load(tar.extractfile(member))
    return runs


def row_key(row):
    return (row["case"], row["method"])


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    runs = load_runs(Path(sys.argv[1]))
    configs = sorted({c for c, _, _ in runs} if len(sys.argv) == 2 else {sys.argv[2]})
    if not runs:
        sys.exit(f"no ab-*.json in {sys.argv[1]}")
    for config in configs:
        names = sorted({s for c, s, _ in runs if c == config}, key=lambda s: (s != "base", s))
        sides = {side: sorted(r for c, s, r in runs if c == config and s == side) for side in names}
        medians = defaultdict(dict)  # key -> {(side, rep): us}
        for side, reps in sides.items():
            for rep in reps:
                for row in runs[(config, side, rep)]["rows"]:
                    if row.get("status", "ok") == "ok":
                        medians[row_key(row)][(side, rep)] = row["median_ms"] * 1e3
        cols = [(s, r) for s in names for r in sides[s]]
        builds = [s for s in names if s != "base"]
        revs = ", ".join(f"{s} {runs[(config, s, sides[s][0])]['provenance'].get('git_sha', '?')}" for s in names)
        print(f"## {config}: {revs} (median us per run)\n")
        print("| case | method | " + " | ".join(f"{s}{r}" for s, r in cols) + " | " +
              " | ".join(f"{b} / base" for b in builds) + " |")
        print("| --- | --- | " + " | ".join("---:" for _ in cols + builds) + " |")
        for (case, method), by_run in medians.items():
            base = [v for (s, _), v in by_run.items() if s == "base"]
            changes = []
            for b in builds:
                mine = [v for (s, _), v in by_run.items() if s == b]
                changes.append(f"{min(mine) / min(base) - 1:+.1%}" if base and mine else "")
            cells = " | ".join(f"{by_run[c]:.1f}" if c in by_run else "" for c in cols)
            print(f"| {case} | {method} | {cells} | " + " | ".join(changes) + " |")
        print()


if __name__ == "__main__":
    main()
