#!/usr/bin/env python3
"""scripts/prefill_bar.py on the committed H100 sweep, and on made-up sweeps that meet or miss
each bar by a little.

    test_prefill_bar.py REPO_ROOT
"""
import copy
import json
import pathlib
import subprocess
import sys
import tempfile
import unittest

ROOT = pathlib.Path(".")


def run_bar(path, strict=True):
    args = [sys.executable, str(ROOT / "scripts/prefill_bar.py"), str(path)] + (["--strict"] if strict else [])
    run = subprocess.run(args, capture_output=True, text=True)
    return run.returncode, run.stdout


def row(method, ms, lq=4096, causal=False, **fields):
    r = dict(method=method, median_ms=ms, status="ok", lq=lq, lk=lq, batch=2, hq=8, hk=2, d=128, causal=causal,
             case=f"{fields.get('layout', method)}/seq_len={lq}", layout=None, ratio=None, pv=None, mode=None,
             accum="fp32", state="fp32", smooth_k=None, quant_ms=None, rel_l2_vs_flash=None, rel_l2_vs_ref=None)
    r.update(fields)
    return r


def tilemix(layout, ratio, ms, pv="fp16", **fields):
    numerics = dict(layout=layout, ratio=ratio, pv=pv, mode="quantize_once", smooth_k=False, quant_ms=0.01)
    return row("tilemix", ms, **{**numerics, **fields})


def int8_shape(lq=4096, one_ms=0.8):
    """One shape that meets every INT8 bar: cudnn_fp16 1 ms, `one` 1.25x, the layouts at the midpoint."""
    return [row("cudnn_fp16", 1.0, lq), row("flash_fp16", 1.0, lq), tilemix("zero", 0.0, 0.9, lq=lq),
            tilemix("one", 1.0, one_ms, lq=lq)] + [tilemix(l, 0.5, (0.9 + one_ms) / 2, lq=lq)
                                                   for l in ("band", "sptrans", "bigbird")]


class PrefillBar(unittest.TestCase):
    def sweep(self, rows):
        f = pathlib.Path(self.scratch.name) / f"sweep{len(list(pathlib.Path(self.scratch.name).iterdir()))}.json"
        f.write_text(json.dumps({"provenance": {"git_sha": "test"}, "rows": rows}))
        return f

    def setUp(self):
        self.scratch = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.scratch.cleanup()

    def test_committed_h100_sweep(self):
        rc, out = run_bar(ROOT / "results/h100/prefill.json", strict=False)
        self.assertEqual(rc, 0)
        # The ratios docs/perf/prefill.md reports for this run ("On the H100").
        self.assertIn("| 1k | no | 0.87 | **0.76** (>= 0.85) | 0.87 | 6.0% | **1.16** (<= 1.05) "
                      "| **1.11** (<= 1.05) | **1.16** (<= 1.05) |", out)
        self.assertIn("| 8k | yes | 0.99 | **0.95** (>= 1.15) | 0.96 | 1.3% |", out)
        self.assertIn("| 16k | yes | **0.65** (>= 1.0) | 0.0448 / 0.0740 (rel_l2_vs_flash) |", out)
        self.assertEqual(run_bar(ROOT / "results/h100/prefill.json")[0], 1)

    def test_every_int8_bar_met(self):
        rows = int8_shape(4096) + int8_shape(2048, one_ms=0.99) + int8_shape(1024, one_ms=1.0 / 0.86)
        rc, out = run_bar(self.sweep(rows))
        self.assertEqual(rc, 0, out)
        self.assertIn("bars: 16 met, 0 not met", out)  # 5 per shape and quant_ms

    def test_a_bar_missed_by_a_little(self):
        rows = int8_shape(4096, one_ms=1.0 / 1.149)
        rc, out = run_bar(self.sweep(rows))
        self.assertEqual(rc, 1)
        # 1.149 rounds onto the bar at two decimals: three are shown.
        self.assertIn("one / cudnn_fp16: 1.149, bar >= 1.15", out)
        self.assertEqual(run_bar(self.sweep(rows), strict=False)[0], 0)

    def test_on_the_bar_is_met(self):
        rows = int8_shape(4096, one_ms=1.0)
        rows[0]["median_ms"] = rows[1]["median_ms"] = 1.15  # cudnn_fp16, flash_fp16: `one` at 1.15x exactly
        rc, out = run_bar(self.sweep(rows))
        self.assertEqual(rc, 0, out)
        self.assertIn("| 4k | no | 1.00 | 1.15 |", out)

    def test_layout_past_the_midpoint(self):
        rows = int8_shape(4096)
        rows[5]["median_ms"] = 0.85 * 1.06  # sptrans 50%
        rc, out = run_bar(self.sweep(rows))
        self.assertEqual(rc, 1)
        self.assertIn("sptrans 50% vs mid: 1.06, bar <= 1.05", out)

    def test_missing_quant_ms(self):
        rows = int8_shape(4096)
        rows[4]["quant_ms"] = None
        rc, out = run_bar(self.sweep(rows))
        self.assertEqual(rc, 1)
        self.assertIn("not met: sweep: quant_ms: missing on 1 tilemix rows, e.g. band/seq_len=4096", out)

    def test_missing_failed_and_ambiguous_rows_are_not_met(self):
        base = int8_shape(4096)
        cases = {
            "no row": [r for r in base if r["method"] != "cudnn_fp16"],
            "no ok row": [dict(r, status="error") if r["method"] == "cudnn_fp16" else r for r in base],
            "2 rows": base + [copy.deepcopy(base[0])],
        }
        for why, rows in cases.items():
            rc, out = run_bar(self.sweep(rows))
            self.assertEqual(rc, 1, why)
            self.assertIn(f"cudnn_fp16: {why}", out)
        rows = copy.deepcopy(base)
        rows[3]["median_ms"] = float("nan")  # `one`
        rc, out = run_bar(self.sweep(rows))
        self.assertIn("one: no ok row", out)

    def test_other_numerics_are_not_the_bar_rows(self):
        rows = int8_shape(4096)
        rows.append(tilemix("one", 1.0, 0.5, accum="fp16"))  # a faster `one` with fp16 accumulation
        rows.append(tilemix("one", 1.0, 0.5, mode="on_the_fly"))
        rc, out = run_bar(self.sweep(rows))
        self.assertEqual(rc, 0, out)
        self.assertIn("| 4k | no | 1.00 | 1.25 |", out)

    def test_fp8_pv_bars(self):
        rows = int8_shape(8192) + [
            row("cudnn_fp8", 0.5, 8192, rel_l2_vs_ref=0.07),
            tilemix("one", 1.0, 0.45, pv="fp8", lq=8192, rel_l2_vs_ref=0.05),
            tilemix("zero", 0.0, 0.6, pv="routed", lq=8192),
            tilemix("one", 1.0, 0.45, pv="routed", lq=8192),
            tilemix("sptrans", 0.5, 0.5, pv="routed", lq=8192),
            tilemix("bigbird", 0.5, 0.61, pv="routed", lq=8192),
        ]
        rc, out = run_bar(self.sweep(rows))
        self.assertEqual(rc, 1)
        self.assertIn("| 8k | no | 1.11 | 0.0500 / 0.0700 (rel_l2_vs_ref) | 0.95 | **1.16** (between `zero` and `one`) |",
                      out)
        self.assertIn("bigbird 50% pv routed vs mid: 1.16, bar between `zero` and `one`", out)
        self.assertNotIn("sptrans 50% pv routed vs mid:", out)
        worse = [dict(r, rel_l2_vs_ref=0.08) if r.get("pv") == "fp8" else r for r in rows]
        self.assertIn("one pv fp8 rel_l2_vs_ref: 0.0800 / 0.0700 (rel_l2_vs_ref), bar <= cudnn_fp8's",
                      run_bar(self.sweep(worse))[1])


if __name__ == "__main__":
    ROOT = pathlib.Path(sys.argv.pop(1)) if len(sys.argv) > 1 else ROOT
    unittest.main()
