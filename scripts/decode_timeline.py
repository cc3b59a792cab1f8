#!/usr/bin/env python3
"""Summarizes per-CTA decode timelines (the timeline-*.csv files of `tilemix-bench --timeline DIR`):
where a call's time goes, CTA by CTA.

For each file: the phases of the CTAs (prologue = start to the first tile, loop, epilogue) as
percentiles; the loop time per tile of the CTAs whose tiles are all FP16-routed, all INT8-routed
or both; where both routes occur, a least-squares fit of loop time = a x INT8 tiles + b x FP16
tiles over the CTAs; the loop rate by launch round (CTA index // SMs: the block scheduler's first,
second, ... CTA on each SM); and the spread of loop times within an SM against between SMs.

Usage: scripts/decode_timeline.py DIR/timeline-*.csv
"""
import collections
import statistics as st
import sys


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def load(path):
    header, rows = "", []
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                header = line[1:].strip()
                continue
            if line.startswith("cta,"):
                continue
            c = line.strip().split(",")
            rows.append({"cta": int(c[0]), "sm": int(c[1]), "start": float(c[2]), "loop": float(c[3]),
                         "loop_end": float(c[4]), "end": float(c[5]), "tiles": int(c[6]), "fp16": int(c[7])})
    return header, rows


def route_fit(rows):
    """Least squares of loop time (us) on (INT8 tiles, FP16 tiles); None when one route is absent."""
    s11 = s12 = s22 = b1 = b2 = 0.0
    for r in rows:
        x1, x2, y = r["tiles"] - r["fp16"], r["fp16"], r["loop_end"] - r["loop"]
        s11, s12, s22, b1, b2 = s11 + x1 * x1, s12 + x1 * x2, s22 + x2 * x2, b1 + x1 * y, b2 + x2 * y
    det = s11 * s22 - s12 * s12
    if s11 == 0 or s22 == 0 or abs(det) < 1e-9 * s11 * s22:
        return None
    return (b1 * s22 - b2 * s12) / det, (s11 * b2 - s12 * b1) / det


def summarize(path):
    header, rows = load(path)
    rows = [r for r in rows if r["tiles"] > 0]
    print(f"== {path.rsplit('/', 1)[-1]}: {header}")
    if not rows:
        print("   no CTA with tiles")
        return
    print(f"   {len(rows)} CTAs on {len({r['sm'] for r in rows})} SMs, last end {max(r['end'] for r in rows):.1f} us")
    for name, f in [("prologue", lambda r: r["loop"] - r["start"]), ("loop", lambda r: r["loop_end"] - r["loop"]),
                    ("epilogue", lambda r: r["end"] - r["loop_end"]), ("end", lambda r: r["end"])]:
        v = [f(r) for r in rows]
        print(f"   {name:9s} min {min(v):8.1f}  p10 {pct(v, .1):8.1f}  median {st.median(v):8.1f}  "
              f"p90 {pct(v, .9):8.1f}  max {max(v):8.1f} us")
    classes = collections.defaultdict(list)
    for r in rows:
        classes["fp16" if r["fp16"] == r["tiles"] else "int8" if r["fp16"] == 0 else "mixed"].append(r)
    for name, v in sorted(classes.items()):
        per_tile = [1000 * (r["loop_end"] - r["loop"]) / r["tiles"] for r in v]
        print(f"   {name:5s} CTAs {len(v):5d}: tiles median {st.median(r['tiles'] for r in v):7.1f}, "
              f"loop ns per tile median {st.median(per_tile):6.0f}")
    fit = route_fit(rows)
    if fit:
        print(f"   fit over the CTAs: {1000 * fit[0]:.0f} ns per INT8-routed tile, {1000 * fit[1]:.0f} per FP16-routed")
    sms = max(r["sm"] for r in rows) + 1
    rounds = collections.defaultdict(list)
    for r in rows:
        rounds[r["cta"] // sms].append(1000 * (r["loop_end"] - r["loop"]) / r["tiles"])
    print("   loop ns per tile by launch round (CTA index // %d): %s" %
          (sms, " / ".join(f"{st.median(v):.0f}" for _, v in sorted(rounds.items()))))
    by_sm = collections.defaultdict(list)
    for r in rows:
        by_sm[r["sm"]].append(r["loop_end"] - r["loop"])
    most = max(len(v) for v in by_sm.values())
    full = [v for v in by_sm.values() if len(v) == most]
    if most > 1 and len(full) > 1:
        within = st.mean(st.pstdev(v) for v in full)
        between = st.pstdev([st.mean(v) for v in full])
        print(f"   loop time spread on SMs with {most} CTAs: {within:.1f} us within an SM, {between:.1f} us between SMs")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for p in sys.argv[1:]:
        summarize(p)
