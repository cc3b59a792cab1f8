#!/usr/bin/env python3
"""Reads a tilemix-bench prefill sweep (JSON, e.g. results/h100/prefill.json) and prints, per shape
(L, causal, batch, heads, d), every ratio from the rows of that shape in that run:
1. the INT8 bars, on the tilemix rows with FP16 P V, fp32 state and accumulation, quantize_once
   and no smoothing: `one` over cudnn_fp16 against 1.15 from 4k tokens, 1.0 from 2k and 0.85
   below; flash_fp16 over cudnn_fp16 against 0.95 from 2k and 0.85 below; band, sptrans and
   bigbird at 50% against 1.05 x the mean of `zero`'s and `one`'s times; `quant_ms` on every
   tilemix row of the sweep;
2. where the sweep has FP8 P V rows: `one` pv fp8 over cudnn_fp8 against 1.0 from 8k; sptrans and
   bigbird at 50% with pv routed between `zero` and `one` pv routed; `one` pv fp8's relative L2
   against cudnn_fp8's (to the exact reference where the rows have it, else to flash_fp16).
A ratio of speeds is the baseline's median time over the row's; "vs mid" is a layout's time over
the mean of `zero`'s and `one`'s. L is the query length. A bar whose rows are missing, failed or
ambiguous (two rows where one is meant) counts as not met.

Usage: scripts/prefill_bar.py SWEEP_JSON [--strict]
  --strict  exit 1 when a bar is not met (for CI); otherwise exit 0 whatever the figures.
"""
import argparse
import json
import math
import sys
from collections import defaultdict, namedtuple

MID_BAR = 1.05
LAYOUTS_AT_HALF = ("band", "sptrans", "bigbird")
PV_ROUTED_LAYOUTS = ("sptrans", "bigbird")


def one_bar(length):
    return 1.15 if length >= 4096 else 1.0 if length >= 2048 else 0.85


def flash_bar(length):
    return 0.95 if length >= 2048 else 0.85


FP8_BAR_FROM, FP8_BAR = 8192, 1.0


ShapeKey = namedtuple("ShapeKey", "lq lk batch hq hk d causal")


class Shape:
    """The rows of one shape, and the verdicts taken on them."""

    def __init__(self, key, rows):
        self.key = key
        self.rows = rows
        self.misses = []  # (what, why): the bars not met
        self.met = 0

    @property
    def heads(self):
        return self.key.batch, self.key.hq, self.key.hk, self.key.d

    def cells(self):
        """The table's first two cells: L and causal."""
        lq = self.key.lq
        return [f"{lq // 1024}k" if lq % 1024 == 0 else str(lq), "yes" if self.key.causal else "no"]

    def where(self):
        return f"L={self.key.lq} causal={'yes' if self.key.causal else 'no'} B={self.key.batch}"

    def pick(self, what, **want):
        """The one ok row with these fields (None: missing, failed or ambiguous, noted as a miss)."""
        found = [r for r in self.rows if all(r.get(k) == v or (v is None and r.get(k) in (None, False))
                                              for k, v in want.items())]
        ok = [r for r in found if r.get("status") == "ok" and math.isfinite(r.get("median_ms") or math.nan)]
        if len(ok) == 1:
            return ok[0]
        why = "no row" if not found else "no ok row" if not ok else f"{len(ok)} rows"
        self.misses.append((what, why))
        return None

    def verdict(self, what, value, ok, bar_text):
        if ok:
            self.met += 1
            return value
        self.misses.append((what, f"{value}, bar {bar_text}"))
        return f"**{value}** ({bar_text})"


def int8_numerics(layout, ratio, pv="fp16"):
    return dict(method="tilemix", layout=layout, ratio=ratio, pv=pv, mode="quantize_once", accum="fp32",
                state="fp32", smooth_k=None)


def speed(base, row):
    return base["median_ms"] / row["median_ms"]


def ratio_text(r, bar):
    """Two decimals, or three where two would round onto the bar and hide its side."""
    return f"{r:.3f}" if f"{r:.2f}" == f"{bar:.2f}" and r != bar else f"{r:.2f}"


def int8_cells(shape):
    length = shape.key.lq
    cudnn = shape.pick("cudnn_fp16", method="cudnn_fp16")
    flash = shape.pick("flash_fp16", method="flash_fp16")
    zero = shape.pick("zero", **int8_numerics("zero", 0.0))
    one = shape.pick("one", **int8_numerics("one", 1.0))
    cells = []
    for row, bar, name in ((flash, flash_bar(length), "flash_fp16"), (one, one_bar(length), "one")):
        if row and cudnn:
            r = speed(cudnn, row)
            cells.append(shape.verdict(f"{name} / cudnn_fp16", ratio_text(r, bar), r >= bar, f">= {bar}"))
        else:
            cells.append("n/a")
    cells.append(f"{speed(flash, one):.2f}" if flash and one else "n/a")
    has_quant = one and one.get("quant_ms") is not None
    cells.append(f"{100 * one['quant_ms'] / one['median_ms']:.1f}%" if has_quant else "n/a")
    for layout in LAYOUTS_AT_HALF:
        row = shape.pick(f"{layout} 50%", **int8_numerics(layout, 0.5))
        if row and zero and one:
            r = row["median_ms"] / ((zero["median_ms"] + one["median_ms"]) / 2)
            cells.append(shape.verdict(f"{layout} 50% vs mid", ratio_text(r, MID_BAR), r <= MID_BAR, f"<= {MID_BAR}"))
        else:
            cells.append("n/a")
    return shape.cells() + cells


def deviation(row):
    for field in ("rel_l2_vs_ref", "rel_l2_vs_flash"):
        if row.get(field) is not None:
            return field, row[field]
    return None, None


def fp8_cells(shape):
    length = shape.key.lq
    cells = shape.cells()
    cudnn8 = shape.pick("cudnn_fp8", method="cudnn_fp8")
    one8 = shape.pick("one pv fp8", **int8_numerics("one", 1.0, "fp8"))
    if cudnn8 and one8:
        r = speed(cudnn8, one8)
        if length >= FP8_BAR_FROM:
            cells.append(shape.verdict("one pv fp8 / cudnn_fp8", ratio_text(r, FP8_BAR), r >= FP8_BAR, f">= {FP8_BAR}"))
        else:
            cells.append(f"{r:.2f}")
        (field, mine), (field8, theirs) = deviation(one8), deviation(cudnn8)
        if field and field == field8:
            cells.append(shape.verdict(f"one pv fp8 {field}", f"{mine:.4f} / {theirs:.4f} ({field})", mine <= theirs,
                                       "<= cudnn_fp8's"))
        else:
            shape.misses.append(("one pv fp8 deviation", "no deviation beside cudnn_fp8's"))
            cells.append("n/a")
    else:
        cells += ["n/a", "n/a"]
    if not any(r.get("pv") == "routed" for r in shape.rows):
        return cells + ["n/a"] * len(PV_ROUTED_LAYOUTS)
    zero_r = shape.pick("zero pv routed", **int8_numerics("zero", 0.0, "routed"))
    one_r = shape.pick("one pv routed", **int8_numerics("one", 1.0, "routed"))
    for layout in PV_ROUTED_LAYOUTS:
        row = shape.pick(f"{layout} 50% pv routed", **int8_numerics(layout, 0.5, "routed"))
        if row and zero_r and one_r:
            lo, hi = sorted((zero_r["median_ms"], one_r["median_ms"]))
            r = row["median_ms"] / ((zero_r["median_ms"] + one_r["median_ms"]) / 2)
            cells.append(shape.verdict(f"{layout} 50% pv routed vs mid", f"{r:.2f}",
                                       lo <= row["median_ms"] <= hi, "between `zero` and `one`"))
        else:
            cells.append("n/a")
    return cells


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(["---"] * 2 + ["---:"] * (len(header) - 2)) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sweep")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a bar is not met")
    args = ap.parse_args()
    doc = json.load(open(args.sweep))
    prefill = [r for r in doc["rows"] if r.get("lq") is not None]
    if not prefill:
        sys.exit(f"{args.sweep}: no prefill rows")
    groups = defaultdict(list)
    for r in prefill:
        groups[ShapeKey(r["lq"], r["lk"], r["batch"], r["hq"], r["hk"], r["d"], bool(r["causal"]))].append(r)
    prov = doc.get("provenance", {})
    gpu = prov.get("device", {}).get("name", "?")
    print(f"{args.sweep}: git {prov.get('git_sha', '?')}, {gpu}")

    shapes = sorted((Shape(k, rows) for k, rows in groups.items()), key=lambda s: (s.heads, s.key.lq, s.key.causal))
    all_misses = []
    for heads in sorted({s.heads for s in shapes}):
        batch, hq, hk, d = heads
        mine = [s for s in shapes if s.heads == heads]
        print(f"\n## B={batch} Hq={hq} Hk={hk} d={d}: INT8 bars (missed in bold, the bar beside)\n")
        print(table(["L", "causal", "flash / cudnn_fp16", "`one` / cudnn_fp16", "`one` / flash", "quant share of `one`"]
                    + [f"{l} 50% vs mid" for l in LAYOUTS_AT_HALF], [int8_cells(s) for s in mine]))
        if any(r.get("pv") in ("fp8", "routed") for s in mine for r in s.rows):
            print(f"\n## B={batch} Hq={hq} Hk={hk} d={d}: FP8 P V bars\n")
            print(table(["L", "causal", "`one` pv fp8 / cudnn_fp8", "deviation, `one` pv fp8 / cudnn_fp8"]
                        + [f"{l} 50% pv routed vs mid" for l in PV_ROUTED_LAYOUTS], [fp8_cells(s) for s in mine]))
        all_misses += [(s.where(), what, why) for s in mine for what, why in s.misses]

    no_quant = [r["case"] for r in prefill
                if r["method"] == "tilemix" and r.get("status") == "ok" and r.get("quant_ms") is None]
    if no_quant:
        all_misses.append(("sweep", "quant_ms", f"missing on {len(no_quant)} tilemix rows, e.g. {no_quant[0]}"))
    met = sum(s.met for s in shapes) + (0 if no_quant else 1)
    print(f"\nbars: {met} met, {len(all_misses)} not met")
    for where, what, why in all_misses:
        print(f"  not met: {where}: {what}: {why}")
    sys.exit(1 if args.strict and all_misses else 0)


if __name__ == "__main__":
    main()
