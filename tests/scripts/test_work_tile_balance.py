#!/usr/bin/env python3
"""scripts/work_tile_balance.py: the counts docs/perf/prefill.md reports, an even split where
every CTA draws the same tiles, and shapes it refuses.

    test_work_tile_balance.py REPO_ROOT
"""
import pathlib
import subprocess
import sys
import unittest

ROOT = pathlib.Path(".")


def run(*args):
    done = subprocess.run([sys.executable, str(ROOT / "scripts/work_tile_balance.py"), *args],
                          capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


class WorkTileBalance(unittest.TestCase):
    def test_the_counts_the_docs_report(self):
        rc, out = run("8,24,1024,causal", "8,24,2048,causal", "8,24,4096,causal", "4,32,1024,causal",
                      "4,32,2048,causal", "8,24,1024")
        self.assertEqual(rc, 0, out)
        for row in ("| 8 | 24 | 1024 | yes | 1536 | 1.160 | 1.042 | 0.898 |",
                    "| 8 | 24 | 2048 | yes | 3072 | 1.203 | 1.013 | 0.842 |",
                    "| 8 | 24 | 4096 | yes | 6144 | 1.079 | 1.005 | 0.932 |",
                    "| 4 | 32 | 1024 | yes | 1024 | 1.289 | 1.063 | 0.825 |",
                    "| 4 | 32 | 2048 | yes | 2048 | 1.375 | 1.015 | 0.738 |",
                    "| 8 | 24 | 1024 | no | 1536 | 1.031 | 1.031 | 1.000 |"):
            self.assertIn(row, out)

    def test_equal_tiles_in_whole_rounds_split_evenly(self):
        # 4 pairs x 8 query tiles = 32 equal tiles over 16 CTAs: two each, in either order.
        rc, out = run("--ctas", "16", "1,4,1024")
        self.assertEqual(rc, 0, out)
        self.assertIn("| 1 | 4 | 1024 | no | 32 | 1.000 | 1.000 | 1.000 |", out)

    def test_fewer_tiles_than_ctas(self):
        # One work tile: one CTA runs it, whatever the order.
        rc, out = run("1,1,100,causal")
        self.assertEqual(rc, 0, out)
        self.assertIn("| 1 | 1 | 100 | yes | 1 | 1.000 | 1.000 | 1.000 |", out)

    def test_bad_shapes_are_refused_by_name(self):
        for shape in ("8,24", "8,24,0", "8,x,1024", "8,24,1024,diagonal"):
            rc, out = run(shape)
            self.assertEqual(rc, 2, shape)
            self.assertIn(shape, out)
        rc, out = run("--ctas", "0", "8,24,1024")
        self.assertEqual(rc, 2)
        self.assertIn("--ctas", out)


if __name__ == "__main__":
    ROOT = pathlib.Path(sys.argv.pop(1)) if len(sys.argv) > 1 else ROOT
    unittest.main()
