#!/usr/bin/env python3
"""scripts/plot_results.py as a user runs it (its shebang's interpreter), on the fixtures of
tests/scripts/fixtures/: every plot is rendered and its SVG parses; it holds the series and panel
labels that the fixture's rows call for; the frontier's speedups are those of each row's own group
(the two mainloops of one shape have their own flash_fp16); a frontier panel labels exactly its
baselines and the Pareto front of its tilemix points, computed here from the rows (every point
with --label all); no throughput panel draws more than 8 lines and FP8 P V series are only in
panels of their own; absent deviations skip the frontier with a message or are joined from
--accuracy; re-rendering gives the same bytes; and a file that is not a tilemix-bench JSON is an
input error (exit 2) that names it.
Exits 77 (skipped) where the script's interpreter has no matplotlib.
"""
import copy
import json
import re
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ElementTree
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "plot_results.py"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
GPU_FIXTURE = FIXTURES / "gpu-prefill-tiny.json"  # GPU table with rel_l2_vs_ref, as --reference writes it
EMULATOR_FIXTURE = FIXTURES / "emulator-prefill-tiny.json"  # tilemix-bench --device cpu of the same config
MIXED_FIXTURE = FIXTURES / "gpu-prefill-mixed.json"  # many layouts and ratios, smooth_k, FP8 P V, four baselines
SKIPPED = 77
MAX_SERIES = 8
SVG = "{http://www.w3.org/2000/svg}"


def interpreter():
    return SCRIPT.read_text(encoding="utf-8").splitlines()[0][2:].split()


def run(*args):
    return subprocess.run([str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=300)


SHARED = tempfile.TemporaryDirectory()  # the renders that several tests read
SHARED_RUNS = {}  # their arguments -> (result, output folder)


def shared_render(source, *args):
    """Renders `source` once per argument list for all tests: (result, output folder)."""
    key = (str(source),) + tuple(map(str, args))
    if key not in SHARED_RUNS:
        out = Path(SHARED.name) / str(len(SHARED_RUNS))
        SHARED_RUNS[key] = (run(source, *args, "--out", out), out)
    return SHARED_RUNS[key]


def tearDownModule():
    SHARED.cleanup()


def svg_texts(path):
    """Every text of an SVG (parsing it also checks that it is well-formed)."""
    root = ElementTree.parse(path).getroot()
    return {"".join(e.itertext()).strip() for e in root.iter(f"{SVG}text")}


def svg_panels(path):
    """Each panel (matplotlib axes) of an SVG, in drawing order: its title's lines, its point
    labels (the groups whose id starts with point-label-), its legend's entries and how many
    lines it draws."""
    figure = ElementTree.parse(path).getroot().find(f"{SVG}g")
    panels = []
    for axes in figure.findall(f"{SVG}g"):
        if axes.get("id").startswith(("patch_", "text_", "legend_")):
            continue
        groups = axes.findall(f"{SVG}g")

        def lines_of(group):
            return ["".join(t.itertext()).strip() for t in group.iter(f"{SVG}text")]

        legend = next((g for g in groups if g.get("id").startswith("legend_")), None)
        panels.append({
            "title": next((lines_of(g) for g in groups if g.get("id").startswith("text_")), []),
            "labels": [" ".join(lines_of(g)) for g in groups if g.get("id").startswith("point-label-")],
            "legend": [] if legend is None else
                      [" ".join(lines_of(g)) for g in legend.findall(f"{SVG}g") if g.get("id").startswith("text_")],
            "lines": sum(g.get("id").startswith("line2d_") for g in groups),
        })
    return panels


def load(path):
    return json.loads(Path(path).read_text(encoding="utf-8"))


def routing_label(row):
    """A tilemix row's name in the pictures: layout, ratio, then what its numerics change."""
    layout = row["layout"]
    label = layout if layout in ("zero", "one") else f"{layout} {100 * row['ratio']:g}%"
    if row.get("mode") == "on_the_fly":
        label += " on_the_fly"
    if row.get("pv") not in (None, "fp16"):
        label += f" pv {row['pv']}"
    if row.get("smooth_k"):
        label += " smooth_k"
    return label


def point_label(row):
    return routing_label(row) if row["method"] == "tilemix" else row["method"]


def frontier_panels(doc, base_method):
    """{panel title: [(label, rel_l2, speedup, tilemix?)]}: the points of each group of the fixture,
    (L, causal), with their speedups over the group's base_method row."""
    groups = {}
    for row in doc["rows"]:
        groups.setdefault(f"L={row['lq']}  {'causal' if row['causal'] else 'not causal'}", []).append(row)
    panels = {}
    for title, rows in groups.items():
        (base,) = [r for r in rows if r["method"] == base_method]
        panels[title] = [(point_label(r), r["rel_l2_vs_ref"], base["median_ms"] / r["median_ms"],
                          r["method"] == "tilemix") for r in rows if r["rel_l2_vs_ref"] is not None]
    return panels


def pareto_labels(points):
    """The labels of the tilemix points that no other tilemix point beats: as accurate or more and as
    fast or faster, one of the two strictly."""
    routed = [p for p in points if p[3]]
    return {label for label, l2, speedup, _ in routed
            if not any(o_l2 <= l2 and o_speedup >= speedup and (o_l2 < l2 or o_speedup > speedup)
                       for _, o_l2, o_speedup, _ in routed)}


def without_speedup(label):
    """A baseline beyond a panel's speedups is labelled with its speedup: `cudnn_fp8 ↑ x1.67`."""
    return re.sub(r" [↑↓] x\S+$", "", label)


def case_axes(case_name):
    """{axis: value} of a case name base/axis=value/..."""
    return dict(part.split("=", 1) for part in case_name.split("/")[1:])


def panel_title(row, with_length):
    axes = case_axes(row["case"])
    parts = [f"L={row['lq']}"] if with_length else []
    parts += ["causal" if row["causal"] else "not causal", f"mainloop={axes['mainloop']}"]
    return "  ".join(parts)


class Case(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name)
        self.gpu = load(GPU_FIXTURE)

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, doc):
        path = self.dir / name
        path.write_text(json.dumps(doc), encoding="utf-8")
        return path

    def timing_only(self):
        """The GPU fixture as a run without --reference writes it."""
        doc = copy.deepcopy(self.gpu)
        for row in doc["rows"]:
            row["rel_l2_vs_ref"] = None
        return self.write("gpu-timing.json", doc)

    def assertRun(self, result, code):
        self.assertEqual(result.returncode, code, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}")


class Frontier(Case):
    def test_labels_every_point_with_label_all_and_draws_a_panel_per_group(self):
        result, out = shared_render(GPU_FIXTURE, "--label", "all")
        self.assertRun(result, 0)
        for base_method, short in (("flash_fp16", "flash"), ("cudnn_fp16", "cudnn")):
            svg = out / f"gpu-prefill-tiny-frontier-{short}.svg"
            expected = {}
            for row in self.gpu["rows"]:
                expected.setdefault(panel_title(row, with_length=True), []).append(point_label(row))
            panels = {" ".join(p["title"]): p for p in svg_panels(svg)}
            self.assertEqual(set(panels), set(expected))
            for title, labels in expected.items():
                self.assertEqual(sorted(without_speedup(label) for label in panels[title]["labels"]), sorted(labels),
                                 f"frontier-{short}: {title}")
            self.assertIn(f"speedup over {base_method} (higher is better)", svg_texts(svg))

    def test_labels_the_baselines_and_exactly_the_pareto_front_of_each_panel(self):
        result, out = shared_render(MIXED_FIXTURE)
        self.assertRun(result, 0)
        mixed = load(MIXED_FIXTURE)
        for base_method, short in (("flash_fp16", "flash"), ("cudnn_fp16", "cudnn")):
            expected = frontier_panels(mixed, base_method)
            panels = {" ".join(p["title"]): p for p in svg_panels(out / f"gpu-prefill-mixed-frontier-{short}.svg")}
            self.assertEqual(set(panels), set(expected))
            for title, points in expected.items():
                front = pareto_labels(points)
                # The fixture makes the check mean something: a front of several points, and points off it.
                self.assertGreater(len(front), 1, title)
                self.assertLess(len(front), sum(routed for *_, routed in points), title)
                baselines = {label for label, _, _, routed in points if not routed}
                labelled = [without_speedup(label) for label in panels[title]["labels"]]
                self.assertEqual(len(labelled), len(front) + len(baselines), f"frontier-{short}: {title}: {labelled}")
                self.assertEqual(set(labelled), front | baselines, f"frontier-{short}: {title}")

    def test_label_all_labels_every_point_of_each_panel(self):
        result, out = shared_render(MIXED_FIXTURE, "--label", "all", "--plot", "frontier")
        self.assertRun(result, 0)
        expected = frontier_panels(load(MIXED_FIXTURE), "flash_fp16")
        for panel in svg_panels(out / "gpu-prefill-mixed-frontier-flash.svg"):
            labels = sorted(label for label, *_ in expected[" ".join(panel["title"])])
            self.assertEqual(sorted(without_speedup(label) for label in panel["labels"]), labels)

    def test_speedups_are_over_the_base_of_the_rows_own_group(self):
        result, _ = shared_render(GPU_FIXTURE)
        self.assertRun(result, 0)
        printed = {}  # (base, panel, label) -> speedup
        base = panel = None
        for line in result.stdout.splitlines():
            if line.startswith("frontier over "):
                base = line.split()[2]
            elif line.startswith("wrote ") or line.startswith(str(GPU_FIXTURE)):
                base = None
            elif base and line.startswith("  ") and not line.startswith("    "):
                panel = line.strip()
            elif base and line.startswith("    "):
                label, speedup = re.match(r"\s+(.+?)\s+rel\.L2 ref \S+\s+x(\S+)$", line).groups()
                printed[(base, panel, label)] = float(speedup)
        groups = {}
        for row in self.gpu["rows"]:
            groups.setdefault(panel_title(row, with_length=True), []).append(row)
        self.assertEqual(len(groups), 8)
        checked = 0
        for title, rows in groups.items():
            for base_method in ("flash_fp16", "cudnn_fp16"):
                (base_row,) = [r for r in rows if r["method"] == base_method]
                for row in rows:
                    label = routing_label(row) if row["method"] == "tilemix" else row["method"]
                    key = next(k for k in printed if k[0] == base_method and k[1].endswith(title) and k[2] == label)
                    self.assertAlmostEqual(printed[key], base_row["median_ms"] / row["median_ms"], places=3)
                    checked += 1
        self.assertEqual(checked, 2 * len(self.gpu["rows"]))

    def test_rows_whose_groups_cannot_be_told_apart_are_an_input_error(self):
        doc = copy.deepcopy(self.gpu)
        del doc["provenance"]["config"]  # the mainloop of each case is then unknown
        result = run(self.write("no-config.json", doc), "--plot", "frontier", "--out", self.dir)
        self.assertRun(result, 2)
        self.assertIn("no-config.json", result.stderr)
        self.assertIn("(flash_fp16) fall in one group", result.stderr)

    def test_an_axis_over_one_input_setting_makes_its_own_groups(self):
        # The fixture's mainloop axis renamed to an axis over an input setting: each value's rows
        # are a group of their own, with their own flash_fp16.
        doc = copy.deepcopy(self.gpu)
        config = doc["provenance"]["config"]
        values = config["axes"].pop("mainloop")
        config["axes"]["input.k_channel_bias"] = list(range(len(values)))
        for case in config.get("cases", []):
            case.pop("mainloop", None)
        config.get("defaults", {}).pop("mainloop", None)
        for row in doc["rows"]:
            for i, v in enumerate(values):
                row["case"] = row["case"].replace(f"/mainloop={v}", f"/input.k_channel_bias={i}")
        result = run(self.write("input-axis.json", doc), "--plot", "frontier", "--out", self.dir)
        self.assertRun(result, 0)
        for i in range(len(values)):
            self.assertIn(f"input.k_channel_bias={i}", result.stdout)

    def test_is_skipped_with_a_message_without_deviations(self):
        timing = self.timing_only()
        result = run(timing, "--out", self.dir)
        self.assertRun(result, 0)
        self.assertIn("frontier over flash_fp16 skipped: no rel_l2_vs_ref values", result.stdout)
        self.assertIn("--accuracy", result.stdout)
        self.assertFalse((self.dir / "gpu-timing-frontier-flash.svg").exists())
        self.assertTrue((self.dir / "gpu-timing-throughput.svg").exists())
        self.assertRun(run(timing, "--plot", "frontier", "--out", self.dir), 1)

    def test_joins_the_deviations_of_an_emulator_run_by_case_keys(self):
        result = run(self.timing_only(), "--accuracy", EMULATOR_FIXTURE, "--plot", "frontier", "--plot", "deviation",
                     "--out", self.dir)
        self.assertRun(result, 0)
        routed = sum(r["method"] == "tilemix" for r in self.gpu["rows"])
        self.assertIn(f"rel_l2_vs_ref of {routed} of {len(self.gpu['rows'])} rows joined", result.stdout)
        texts = svg_texts(self.dir / "gpu-timing-frontier-flash.svg")
        self.assertIn("deviations of routed rows joined from emulator-prefill-tiny.json (--accuracy)", texts)
        for row in self.gpu["rows"]:
            if row["method"] == "tilemix":
                self.assertIn(routing_label(row), texts)
        self.assertIn("max |d| to the exact reference", svg_texts(self.dir / "gpu-timing-deviation.svg"))

    def test_an_accuracy_file_of_other_cases_is_an_input_error(self):
        emulator = load(EMULATOR_FIXTURE)
        for row in emulator["rows"]:
            row["case"] = "other-" + row["case"]
        other = self.write("other-cases.json", emulator)
        result = run(self.timing_only(), "--accuracy", other, "--out", self.dir)
        self.assertRun(result, 2)
        self.assertIn("other-cases.json: no row matches a row of", result.stderr)


class Throughput(Case):
    def test_draws_a_line_per_method_and_a_panel_per_causal_setting_and_mainloop(self):
        result, out = shared_render(GPU_FIXTURE)
        self.assertRun(result, 0)
        texts = svg_texts(out / "gpu-prefill-tiny-throughput.svg")
        for row in self.gpu["rows"]:
            label = f"tilemix {routing_label(row)}" if row["method"] == "tilemix" else row["method"]
            self.assertIn(label, texts)
            self.assertIn(panel_title(row, with_length=False), texts)
        self.assertTrue({"TOPS", "K tokens/s"} <= texts)

    def test_no_panel_draws_more_than_8_lines_and_fp8_pv_has_panels_of_its_own(self):
        result, out = shared_render(MIXED_FIXTURE)
        self.assertRun(result, 0)
        series = {(f"tilemix {routing_label(r)}" if r["method"] == "tilemix" else r["method"]): r
                  for r in load(MIXED_FIXTURE)["rows"]}
        self.assertGreater(len(series), MAX_SERIES)
        # A row of panels (one per causal setting and metric) ends with the panel that holds its legend.
        rows, row = [], []
        for panel in svg_panels(out / "gpu-prefill-mixed-throughput.svg"):
            row.append(panel)
            if panel["legend"]:
                rows.append(row)
                row = []
        self.assertEqual(row, [])
        self.assertGreater(len(rows), 2)
        shown = {}  # causal setting -> the series of its panels
        for row in rows:
            legend = row[-1]["legend"]
            content = " ".join(row[-1]["title"][1:])
            self.assertLessEqual(len(legend), MAX_SERIES, content)
            pvs = {series[label]["pv"] for label in legend if series[label]["method"] == "tilemix"}
            if content.startswith("FP16 P V"):
                self.assertEqual(pvs, {"fp16"}, content)
            elif "(pv fp8)" in content:
                self.assertEqual(pvs, {"fp8"}, content)
            else:
                self.assertIn("(pv routed)", content)
                self.assertEqual(pvs, {"routed"}, content)
            for panel in row:
                self.assertEqual(" ".join(panel["title"][1:]), content)
                self.assertEqual(panel["lines"], len(legend), panel["title"])  # every group has every series
                shown.setdefault(panel["title"][0], set()).update(legend)
        self.assertEqual(shown, {"not causal": set(series), "causal": set(series)})

    def test_is_skipped_for_a_single_length(self):
        doc = copy.deepcopy(self.gpu)
        doc["rows"] = [r for r in doc["rows"] if r["lq"] == 256]
        result = run(self.write("one-length.json", doc), "--plot", "throughput", "--out", self.dir)
        self.assertRun(result, 1)
        self.assertIn("throughput skipped: one sequence length only (256)", result.stdout)


class Deviation(Case):
    def test_draws_rel_l2_and_max_abs_per_layout_from_an_emulator_run(self):
        result = run(EMULATOR_FIXTURE, "--out", self.dir)
        self.assertRun(result, 0)
        texts = svg_texts(self.dir / "emulator-prefill-tiny-deviation.svg")
        for row in load(EMULATOR_FIXTURE)["rows"]:
            self.assertIn(row["layout"], texts)
            self.assertIn(panel_title(row, with_length=True), texts)
        self.assertIn("relative L2 to the exact reference", texts)
        self.assertIn("max |d| to the exact reference", texts)
        self.assertIn("frontier over flash_fp16 skipped: no GPU timings", result.stdout)
        self.assertIn("throughput skipped: no tops column", result.stdout)

    def test_draws_the_baselines_of_a_gpu_run_as_lines(self):
        result, out = shared_render(GPU_FIXTURE)
        self.assertRun(result, 0)
        texts = svg_texts(out / "gpu-prefill-tiny-deviation.svg")
        self.assertTrue({"flash_fp16", "cudnn_fp16", "band", "sptrans", "zero", "one"} <= texts)


class Output(Case):
    def test_rendering_again_gives_the_same_bytes_without_a_date(self):
        result, first_out = shared_render(GPU_FIXTURE)
        self.assertRun(result, 0)
        self.assertRun(run(GPU_FIXTURE, "--out", self.dir), 0)
        svgs = sorted(p.name for p in first_out.iterdir())
        self.assertEqual(len(svgs), 4)
        for name in svgs:
            first = (first_out / name).read_bytes()
            self.assertEqual(first, (self.dir / name).read_bytes(), name)
            self.assertNotIn(b"<dc:date>", first)
            self.assertNotIn(b"Matplotlib v", first)

    def test_every_plot_of_the_mixed_fixture_parses_and_renders_again_to_the_same_bytes(self):
        result, first_out = shared_render(MIXED_FIXTURE)
        self.assertRun(result, 0)
        self.assertRun(run(MIXED_FIXTURE, "--out", self.dir), 0)
        svgs = sorted(p.name for p in first_out.iterdir())
        self.assertEqual(svgs, [f"gpu-prefill-mixed-{plot}.svg"
                                for plot in ("deviation", "frontier-cudnn", "frontier-flash", "throughput")])
        for name in svgs:
            self.assertTrue(svg_panels(first_out / name), name)
            self.assertEqual((first_out / name).read_bytes(), (self.dir / name).read_bytes(), name)

    def test_writes_beside_the_input_without_out(self):
        beside = self.write("run.json", self.gpu)
        self.assertRun(run(beside, "--plot", "throughput"), 0)
        self.assertTrue((self.dir / "run-throughput.svg").exists())


class Kinds(Case):
    def test_a_decode_sweep_has_nothing_to_plot(self):
        doc = {"provenance": {"tool": "tilemix-bench"},
               "rows": [{"case": "L16k", "method": "fp16_cache", "cache_len": 16384, "median_ms": 0.1}]}
        result = run(self.write("decode.json", doc), "--out", self.dir)
        self.assertRun(result, 1)
        self.assertIn("a decode sweep; the plots read prefill rows: nothing to plot", result.stdout)
        self.assertEqual(list(self.dir.glob("*.svg")), [])


class Errors(Case):
    def assertInputError(self, path, *words):
        result = run(path, "--out", self.dir)
        self.assertRun(result, 2)
        self.assertIn(str(path), result.stderr)
        for word in words:
            self.assertIn(word, result.stderr)
        self.assertEqual(list(self.dir.glob("*.svg")), [])

    def test_a_tilemix_check_json(self):
        path = self.write("check.json", {"provenance": {"tool": "tilemix-check"}, "rows": [], "summary": {}})
        self.assertInputError(path, '$.provenance.tool: expected "tilemix-bench", got "tilemix-check"')

    def test_text_that_is_not_json(self):
        path = self.dir / "table.md"
        path.write_text("| case | method |\n", encoding="utf-8")
        self.assertInputError(path, "not JSON")

    def test_json_without_provenance(self):
        self.assertInputError(self.write("rows.json", [{"case": "zero"}]), "$.provenance: missing")

    def test_a_row_without_a_method(self):
        doc = copy.deepcopy(self.gpu)
        del doc["rows"][3]["method"]
        self.assertInputError(self.write("no-method.json", doc), "$.rows[3].method: expected a string")


def main():
    try:
        has_matplotlib = subprocess.run([*interpreter(), "-c", "import matplotlib"], capture_output=True).returncode == 0
    except OSError:
        has_matplotlib = False
    if not has_matplotlib:
        print(f"SKIPPED: {' '.join(interpreter())} (the interpreter of scripts/plot_results.py) has no matplotlib "
              "(Debian: apt-get install python3-matplotlib)")
        return SKIPPED
    result = unittest.main(argv=[sys.argv[0], "-v", *sys.argv[1:]], exit=False).result
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
