#!/usr/bin/env python3
"""scripts/ab_compare.py on a committed same-run A/B, and with a further build beside it.

    test_ab_compare.py REPO_ROOT
"""
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = pathlib.Path(".")
AB = "results/h100/experiments/prefill-short-ab/tile-overlap-first"


def compare(folder):
    run = subprocess.run([sys.executable, str(ROOT / "scripts/ab_compare.py"), str(folder)], capture_output=True,
                         text=True, check=True)
    return run.stdout.splitlines()


def row(lines, case, method):
    for line in lines:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[:2] == [case, method]:
            return cells
    raise AssertionError(f"no row {case} {method}")


class AbCompare(unittest.TestCase):
    def test_base_and_new(self):
        lines = compare(ROOT / AB)
        self.assertIn("| case | method | base1 | base2 | new1 | new2 | new / base |", lines)
        # one-1k causal: base 466.9 / 465.4 us, new 475.3 / 476.0 us: best over best is +2.1%.
        self.assertEqual(row(lines, "one-1k/causal=true", "tilemix")[2:], ["466.9", "465.4", "475.3", "476.0", "+2.1%"])

    def test_a_further_build(self):
        with tempfile.TemporaryDirectory() as scratch:
            folder = pathlib.Path(scratch)
            for f in (ROOT / AB).glob("ab-*.json"):
                shutil.copy(f, folder)
            # A build named two_q whose every median is 0.9 of the base's first run, twice.
            base = json.loads((folder / "ab-prefill-short-ab-base1.json").read_text())
            for rep in (1, 2):
                faster = json.loads(json.dumps(base))
                for r in faster["rows"]:
                    r["median_ms"] *= 0.9
                (folder / f"ab-prefill-short-ab-two_q{rep}.json").write_text(json.dumps(faster))
            lines = compare(folder)
            self.assertIn("| case | method | base1 | base2 | new1 | new2 | two_q1 | two_q2 | new / base | two_q / base |",
                          lines)
            cells = row(lines, "one-1k/causal=true", "tilemix")
            self.assertEqual(cells[2:6], ["466.9", "465.4", "475.3", "476.0"])
            self.assertEqual(cells[-2:], ["+2.1%", f"{0.9 * 466.9 / 465.4 - 1:+.1%}"])


if __name__ == "__main__":
    ROOT = pathlib.Path(sys.argv.pop(1))
    unittest.main()
