#!/usr/bin/env python3
"""Reads a tilemix-bench decode sweep (JSON, e.g. results/h200/decode.json) and prints
1. the rows of the decode bar (cache >= 16k tokens, batch >= 8): % of the copy bandwidth and the
   speedup over the FP16 cache of the same run, each against its bar (75% and 1.7x), and which
   rows miss;
2. the bar rows whose FP16-cache figure was measured at an SM clock more than 10% below the INT8
   row's, and the passing rows that would miss against the FP16 cache's fastest repetition (under
   the power cap the compute-heavy FP16-cache call at 16 new tokens is sometimes throttled for
   part of its repetitions, which flatters the speedup of the median; the clock is the one reading
   a row takes when its timing ends, so a row throttled only for a while may not show it);
3. batch 1 x the longest cache x 1 new token against its bar (60% of copy);
4. per new-token count and method, the least-squares line of time against cache length at
   batch 8 over the cache lengths >= 16k: the slope (the streaming cost per 16k tokens) and the
   intercept (the fixed cost of a call), in microseconds.

Usage: scripts/decode_bar.py SWEEP_JSON [--batch 8]
"""
import argparse
import json
import sys

BAR_CACHE, BAR_BATCH, BAR_COPY, BAR_SPEEDUP, BATCH1_COPY = 16384, 8, 75.0, 1.7, 60.0
CLOCK_SKEW = 0.9  # an FP16-cache clock below this share of the INT8 row's is reported


def line_fit(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return slope, my - slope * mx


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sweep")
    ap.add_argument("--batch", type=int, default=BAR_BATCH, help="batch of the line fit (default 8)")
    args = ap.parse_args()
    doc = json.load(open(args.sweep))
    rows = [r for r in doc["rows"] if r.get("status") == "ok"]
    if not rows:
        sys.exit(f"{args.sweep}: no measured rows")
    prov = doc.get("provenance", {})
    print(f"{args.sweep}: git {prov.get('git_sha', '?')}, copy {rows[0]['copy_gbps']:.0f} GB/s")

    bar = [r for r in rows if r["method"] == "tilemix" and r["cache_len"] >= BAR_CACHE and r["batch"] >= BAR_BATCH]
    misses = [r for r in bar if r["pct_of_copy"] < BAR_COPY or r["speedup_vs_fp16_cache"] < BAR_SPEEDUP]
    print(f"\nbar rows (cache >= 16k, batch >= 8): {len(bar) - len(misses)} of {len(bar)} pass "
          f"(>= {BAR_COPY:.0f}% of copy and >= {BAR_SPEEDUP}x the FP16 cache)")
    if misses:
        print("| cache | batch | new | layout | % copy | x fp16 cache | us |\n| --- | --- | --- | --- | --- | --- | --- |")
        for r in sorted(misses, key=lambda r: (r["new_tokens"], r["cache_len"], r["batch"], r["layout"])):
            print(f"| {r['cache_len'] // 1024}k | {r['batch']} | {r['new_tokens']} | {r['layout']} | "
                  f"{r['pct_of_copy']:.1f} | {r['speedup_vs_fp16_cache']:.3f} | {r['median_ms'] * 1e3:.1f} |")

    # The FP16-cache row a tilemix row was compared with: same shape, and of those (a config may
    # measure the FP16 cache again per split plan or combine) the median its speedup implies.
    def shape_key(r):
        return (r["cache_len"], r["batch"], r["new_tokens"], r["hq"], r["hk"], r["d"])

    fp16_rows = {}
    for r in rows:
        if r["method"] == "fp16_cache":
            fp16_rows.setdefault(shape_key(r), []).append(r)

    def baseline(r):
        candidates = fp16_rows.get(shape_key(r), [])
        implied = r["speedup_vs_fp16_cache"] * r["median_ms"]
        return min(candidates, key=lambda b: abs(b["median_ms"] - implied), default=None)

    skewed = []
    for r in bar:
        base = baseline(r)
        if base and r.get("sm_clock_mhz") and base.get("sm_clock_mhz") and \
                base["sm_clock_mhz"] < CLOCK_SKEW * r["sm_clock_mhz"]:
            skewed.append((r, base))
    if skewed:
        print(f"\nbar rows whose FP16-cache figure ran at an SM clock below {CLOCK_SKEW:.0%} of the INT8 row's:")
        for r, base in skewed:
            verdict = "miss" if r in misses else "pass"
            print(f"  {r['cache_len'] // 1024}k x {r['batch']} x {r['new_tokens']} {r['layout']}: "
                  f"{r['speedup_vs_fp16_cache']:.3f}x ({verdict}), FP16 cache {base['median_ms'] * 1e3:.1f} us at "
                  f"{base['sm_clock_mhz']} MHz (min {base['min_ms'] * 1e3:.1f} us), INT8 at {r['sm_clock_mhz']} MHz")

    fragile = []
    for r in bar:
        base = baseline(r)
        if base and r not in misses and base["min_ms"] / r["median_ms"] < BAR_SPEEDUP:
            fragile.append((r, base))
    if fragile:
        print(f"\npassing bar rows below {BAR_SPEEDUP}x against the FP16 cache's fastest repetition:")
        for r, base in fragile:
            print(f"  {r['cache_len'] // 1024}k x {r['batch']} x {r['new_tokens']} {r['layout']}: "
                  f"{r['speedup_vs_fp16_cache']:.3f}x of the median, {base['min_ms'] / r['median_ms']:.3f}x of the "
                  f"minimum (FP16 cache median {base['median_ms'] * 1e3:.1f} us, minimum {base['min_ms'] * 1e3:.1f} us)")

    longest = max(r["cache_len"] for r in rows)
    b1 = [r for r in rows if r["method"] == "tilemix" and r["batch"] == 1 and r["cache_len"] == longest
          and r["new_tokens"] == 1]
    if b1:
        print()
    for r in b1:
        verdict = "pass" if r["pct_of_copy"] >= BATCH1_COPY else "MISS"
        print(f"batch 1 x {longest // 1024}k x 1 token, {r['layout']}: {r['pct_of_copy']:.1f}% of copy ({verdict})")

    print(f"\nline fit at batch {args.batch} over caches >= 16k: slope us per 16k tokens / intercept us")
    series = {}
    for r in rows:
        if r["batch"] == args.batch and r["cache_len"] >= BAR_CACHE:
            name = r["layout"] if r["method"] == "tilemix" else r["method"]
            series.setdefault((r["new_tokens"], name), []).append((r["cache_len"] / BAR_CACHE, r["median_ms"] * 1e3))
    for (tokens, name), points in sorted(series.items()):
        if len(points) < 2:
            continue
        slope, intercept = line_fit([p[0] for p in points], [p[1] for p in points])
        print(f"  {tokens:2d} new tokens  {name:10s} {slope:7.1f} / {intercept:5.1f}")


if __name__ == "__main__":
    main()
