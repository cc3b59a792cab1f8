#!/usr/bin/env python3
"""scripts/render_reproduction.py and scripts/reproduce.sh on results of the real tool.

CPU results are made here by tiny runs of configs/paper/ (tilemix-bench --device cpu with smaller
shapes); GPU results are the committed H200 runs of the same prefill shapes and the same model
sweep (results/h200/prefill.json of configs/bench/prefill-llama3b.json, results/h200/model.json of
configs/bench/model.json), filed under the names of the paper's configs.

    test_render_reproduction.py TILEMIX_BENCH REPO_ROOT
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

BENCH = ""
ROOT = ""

# Small shapes, so that every CPU run takes a second or so.
SMALL = ["--set", "hq=2", "--set", "hk=1", "--set", "d=64"]
CPU_RUNS = {
    "table03-deviation": ["--set", "seq_len=1024", "--set", "ratio=0,0.05,0.25"] + SMALL,
    "table18-vs-flash": ["--set", "seq_len=256"] + SMALL,
    "table20-accumulation-direct": ["--set", "seq_len=256"] + SMALL,
    "table23-heavy-hitter": ["--set", "seq_len=512"] + SMALL,
    "table15-17-multilayer": ["--set", "seq_len=1024", "--set", "layers=1", "--set", "hq=2", "--set", "hk=2",
                              "--set", "d=64", "--set", "vocab=50"],
}
GPU_FIXTURES = {"table02-11-prefill-llama3b": "results/h200/prefill.json",
                "table15-17-multilayer": "results/h200/model.json"}


def render(*args):
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts/render_reproduction.py"), *args], check=True)


def section(doc, table_no):
    m = re.search(rf"^## Table {table_no}:.*?(?=^## |\Z)", doc, re.S | re.M)
    if not m:
        raise AssertionError(f"no section for table {table_no}")
    return m.group(0)


def table_rows(text):
    """The cells of every Markdown table row in `text`, header and rules left out."""
    rows = []
    for line in text.splitlines():
        if line.startswith("| ") and not line.startswith("| ---"):
            rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows


def cells_of(text, first, header_has):
    """The row whose first cell is `first` of the table whose header has `header_has`, as a dict."""
    header = None
    for row in table_rows(text):
        if header_has in row:
            header = row
            continue
        if header and row[0] == first:
            return dict(zip(header, row))
    raise AssertionError(f"no row {first!r} under a header with {header_has!r}")


class RenderReproduction(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tilemix-render-")
        cls.cpu = os.path.join(cls.tmp, "cpu", "paper")
        cls.gpu = os.path.join(cls.tmp, "h200", "paper")
        os.makedirs(cls.cpu)
        os.makedirs(cls.gpu)
        for name, args in CPU_RUNS.items():
            subprocess.run([BENCH, "--device", "cpu", "--config", os.path.join(ROOT, "configs/paper", name + ".json"),
                            "--format", "json", "--out", os.path.join(cls.cpu, name + ".json"), *args],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for name, source in GPU_FIXTURES.items():
            shutil.copy(os.path.join(ROOT, source), os.path.join(cls.gpu, name + ".json"))
        cls.notes = os.path.join(cls.tmp, "notes.md")
        with open(cls.notes, "w", encoding="utf-8") as f:
            f.write("# notes\n\n## all\nNOTE-ALL\n\n## table 18\nNOTE-18 first line\nNOTE-18 second line\n\n"
                    "## not reproduced\n## Tables that need model weights\nNOTE-NOT-REPRODUCED\n")
        cls.doc_path = os.path.join(cls.tmp, "REPRODUCTION.md")
        render("--results", cls.gpu, "--results", cls.cpu, "--notes", cls.notes, "--out", cls.doc_path)
        with open(cls.doc_path, encoding="utf-8") as f:
            cls.doc = f.read()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def result(self, folder, name):
        with open(os.path.join(folder, name + ".json"), encoding="utf-8") as f:
            return json.load(f)["rows"]

    def test_a_section_for_every_reproducible_table(self):
        for table_no in (2, 3, 5, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 23):
            section(self.doc, table_no)

    def test_missing_results_say_not_measured_with_the_command(self):
        t5 = section(self.doc, 5)
        self.assertIn("GPU: not measured yet (`scripts/reproduce.sh --device gpu --only table05-memory`)", t5)
        self.assertNotIn("H200 HBM", t5)  # no column for a GPU without the result
        self.assertIn("136.01 MiB", t5)   # the paper's value is shown all the same
        t19 = section(self.doc, 19)
        self.assertIn("CPU emulator: not measured yet (`scripts/reproduce.sh --device cpu --only "
                      "table19-accumulation`)", t19)
        self.assertIn("GPU: not measured yet", t19)
        # A row the result file does not hold: prefill.json has no align_sparse case.
        t11 = section(self.doc, 11)
        self.assertEqual(cells_of(t11, "AlignSparse25", "H200 K tok/s")["H200 K tok/s"], "not measured")
        # Lengths the CPU run left out.
        t3 = section(self.doc, 3)
        rows = {(r[0], r[1]): r for r in table_rows(t3)}
        self.assertEqual(rows[("2k", "5%")][4], "not measured")  # the first CPU emulator column
        self.assertNotEqual(rows[("1k", "5%")][4], "not measured")

    def test_gpu_throughput_cells_come_from_the_result_file(self):
        rows = self.result(self.gpu, "table02-11-prefill-llama3b")
        one = next(r for r in rows if r["method"] == "tilemix" and r["layout"] == "one" and r["lq"] == 4096 and
                   r["causal"])
        flash = next(r for r in rows if r["method"] == "flash_fp16" and r["lq"] == 4096 and r["causal"])
        sptrans = next(r for r in rows if r["method"] == "tilemix" and r["layout"] == "sptrans" and
                       r["ratio"] == 0.75 and r["lq"] == 4096 and r["causal"])
        t2 = section(self.doc, 2)
        block = t2[t2.index("L = 4k:"):t2.index("L = 8k:")]
        cells = cells_of(block, "One", "H200 K tok/s")
        self.assertEqual(cells["A100 K tok/s"], "29.80")
        self.assertAlmostEqual(float(cells["H200 K tok/s"]), one["thpt_ktok_s"], delta=0.001 * one["thpt_ktok_s"])
        self.assertAlmostEqual(float(cells["H200 x flash"].split()[0]), one["speedup_vs_flash"], delta=0.005)
        self.assertAlmostEqual(float(cells["A100 x Flash"]), 29.80 / 14.33, delta=0.005)
        mixed = cells_of(block, "SpTrans75", "H200 K tok/s")
        self.assertAlmostEqual(float(mixed["H200 x one"].split()[0]),
                               sptrans["thpt_ktok_s"] / one["thpt_ktok_s"], delta=0.005)
        self.assertAlmostEqual(float(mixed["A100 x One"]), 31.80 / 29.80, delta=0.005)
        self.assertAlmostEqual(float(cells_of(block, "FlashAttn", "H200 K tok/s")["H200 K tok/s"]),
                               flash["thpt_ktok_s"], delta=0.001 * flash["thpt_ktok_s"])
        # Columns the tool has no counterpart of, and its own additions.
        self.assertEqual(cells_of(block, "MInference", "H200 K tok/s")["H200 K tok/s"], "not in this tool")
        self.assertIn("cudnn_fp16 (this tool's addition)", section(self.doc, 11))
        # The paper's x One compares TileMix layouts only.
        self.assertEqual(cells_of(block, "SageAttn", "H200 K tok/s")["A100 x One"], "—")

    def test_ratios_that_disagree_are_marked_and_counted(self):
        t2 = section(self.doc, 2)
        block = t2[t2.index("L = 1k:"):t2.index("L = 2k:")]
        cells = cells_of(block, "One", "H200 K tok/s")
        ours, paper = float(cells["H200 x flash"].split()[0]), float(cells["A100 x Flash"])
        self.assertEqual(cells["H200 x flash"].endswith("≠"), max(ours / paper, paper / ours) > 1.5)
        m = re.search(r"H200, causal x flash and x one: (\d+) of (\d+) ratios differ", t2)
        self.assertIsNotNone(m)
        self.assertEqual(int(m.group(1)), t2.count("≠") - 1)  # every mark, the legend's aside

    def test_cpu_deviation_and_exposure_cells_come_from_the_result_files(self):
        rows = self.result(self.cpu, "table18-vs-flash")
        band = next(r for r in rows if r["case"].startswith("band50/"))
        one = next(r for r in rows if r["case"].startswith("one/"))
        t18 = section(self.doc, 18)
        cells = cells_of(t18, "Band50", "CPU emulator mean")
        self.assertEqual(cells["A100 mean"], "7.67e-6")
        self.assertAlmostEqual(float(cells["CPU emulator mean"]), band["mean_abs_vs_compared"],
                               delta=0.001 * band["mean_abs_vs_compared"])
        self.assertAlmostEqual(float(cells["CPU emulator mean / one"].split()[0]),
                               band["mean_abs_vs_compared"] / one["mean_abs_vs_compared"], delta=0.001)
        self.assertEqual(cells_of(t18, "Zero (0% INT8)", "CPU emulator mean")["CPU emulator mean"], "0")

        t23 = section(self.doc, 23)
        row = next(r for r in self.result(self.cpu, "table23-heavy-hitter") if r["case"].startswith("sptrans50/"))
        cells = [r for r in table_rows(t23) if r[:2] == ["SpTrans50", "10%"]][0]
        self.assertEqual(cells[2], "19.15%")
        self.assertAlmostEqual(float(cells[5].rstrip("%")), 100 * float(row["hh_exposure"].split()[1]), delta=0.05)

        t15 = section(self.doc, 15)
        model = self.result(self.cpu, "table15-17-multilayer")
        flash = next(r for r in model if r["method"] == "flash_fp16" and r["lq"] == 1024)
        ours = [r for r in table_rows(t15) if r[:2] == ["1024", "Flash"]][0]
        self.assertEqual(ours[2], "1.57e-2")
        self.assertAlmostEqual(float(ours[6]), flash["max_abs_dev"], delta=0.005 * flash["max_abs_dev"])
        # The CPU run has one layer only: the 12-layer table has no CPU rows.
        self.assertEqual([r for r in table_rows(section(self.doc, 16)) if r[:2] == ["1024", "Flash"]][0][6],
                         "not measured")

    def test_notes_are_included_where_they_belong(self):
        self.assertIn("NOTE-18 first line\nNOTE-18 second line", section(self.doc, 18))
        self.assertNotIn("NOTE-18", section(self.doc, 19))
        self.assertLess(self.doc.index("NOTE-ALL"), self.doc.index("## Table 2:"))
        self.assertGreater(self.doc.index("NOTE-NOT-REPRODUCED"), self.doc.index("## Table 23:"))

    def test_a_repeated_notes_section_is_an_error(self):
        twice = os.path.join(self.tmp, "twice.md")
        with open(twice, "w", encoding="utf-8") as f:
            f.write("## table 18\nfirst\n\n## table 19\nother\n\n## table 18\nsecond\n")
        result = subprocess.run([sys.executable, os.path.join(ROOT, "scripts/render_reproduction.py"), "--results",
                                 self.cpu, "--notes", twice, "--out", os.path.join(self.tmp, "x.md")],
                                capture_output=True, text=True)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn(f"{twice}:7: a second '## table 18' section", result.stderr)

    def test_the_document_says_at_its_top_that_it_is_generated(self):
        marker = "<!-- Generated by scripts/render_reproduction.py"
        self.assertTrue(self.doc.startswith(marker))
        with open(os.path.join(ROOT, "docs/generated/REPRODUCTION.md"), encoding="utf-8") as f:
            self.assertTrue(f.read().startswith(marker))

    def test_rendering_is_deterministic(self):
        again = os.path.join(self.tmp, "again.md")
        render("--results", self.gpu, "--results", self.cpu, "--notes", self.notes, "--out", again)
        with open(again, encoding="utf-8") as f:
            self.assertEqual(f.read(), self.doc)

    def test_the_index_lists_each_file_with_its_command(self):
        render("--index", self.cpu)
        with open(os.path.join(self.cpu, "README.md"), encoding="utf-8") as f:
            index = f.read()
        cells = cells_of(index, "`table18-vs-flash.json`", "command")
        self.assertEqual(cells["paper tables"], "18")
        self.assertEqual(cells["device"], "CPU (emulator)")
        self.assertIn("--set seq_len=256", cells["command"])
        self.assertEqual(cells["rows"], str(len(self.result(self.cpu, "table18-vs-flash"))))
        self.assertEqual(cells_of(index, "`table15-17-multilayer.json`", "command")["paper tables"], "15, 16, 17")

    def test_reproduce_runs_the_cpu_tables_and_renders(self):
        out = os.path.join(self.tmp, "suite")
        doc = os.path.join(self.tmp, "suite.md")
        env = dict(os.environ, TILEMIX_BENCH=BENCH)
        run = subprocess.run(["bash", os.path.join(ROOT, "scripts/reproduce.sh"), "--device", "cpu", "--out", out,
                              "--only", "table18,table05", "--doc", doc, "--", "--set", "seq_len=128", *SMALL],
                             env=env, capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertIn("table05-memory: needs a GPU", run.stdout)
        self.assertEqual(sorted(os.listdir(out)), ["README.md", "table18-vs-flash.json", "table18-vs-flash.md"])
        with open(doc, encoding="utf-8") as f:
            self.assertIn(os.path.relpath(out, ROOT), f.read())
        none = subprocess.run(["bash", os.path.join(ROOT, "scripts/reproduce.sh"), "--device", "cpu", "--out", out,
                               "--only", "table99"], env=env, capture_output=True, text=True)
        self.assertEqual(none.returncode, 2)


def main():
    global BENCH, ROOT
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    BENCH, ROOT = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    result = unittest.TextTestRunner(verbosity=2).run(
        unittest.defaultTestLoader.loadTestsFromTestCase(RenderReproduction))
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
