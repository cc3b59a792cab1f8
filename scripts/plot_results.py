#!/usr/bin/python3
"""Renders SVG pictures of a tilemix-bench JSON (`tilemix-bench --format json`, or `--out X.json`):
1. frontier: the speedup of every tilemix row over flash_fp16 (X-frontier-flash.svg) and over
   cudnn_fp16 (X-frontier-cudnn.svg) against its relative L2 deviation from the exact reference,
   one labelled point per layout and ratio, a panel per group of rows that share their inputs
   (shape, L, causal, numerics, mainloop, input); the baselines of the group whose deviation is
   known are drawn beside them. Speedups are the base's median over the row's, both measured in
   the same file. A GPU run carries the deviations only with --reference; --accuracy adds them
   from a second JSON (a CPU emulator run of the same config), joined by the case keys.
2. throughput (X-throughput.svg): TOPS, and K tokens/s where the file has them, against L, one
   line per method, a panel per causal setting and per shape.
3. deviation (X-deviation.svg): relative L2 deviation from the exact reference, and max |d|
   where the file has it (CPU emulator runs), against the realized INT8 group coverage, one
   series per layout, a panel per group; the baselines' deviations as horizontal lines.
Without --plot it renders every plot the file supports and says why it skips the others. The
SVGs are written beside the input (or into --out DIR) and are byte-identical from run to run.

Usage: scripts/plot_results.py RESULTS_JSON [--plot frontier|throughput|deviation]...
                               [--accuracy JSON] [--out DIR]
Exit codes: 0 every asked plot rendered (without --plot: at least one), 1 a plot the file does
not support was asked for (or, without --plot, it supports none), 2 bad input.
Needs Debian's python3-matplotlib (/usr/bin/python3).
"""
import argparse
import json
import math
import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("svg")
import matplotlib.pyplot as plt  # noqa: E402

# Reproducible SVG: fixed ids, text kept as text (searchable, no font paths), no date and no
# matplotlib version in the metadata.
matplotlib.rcParams.update({"svg.hashsalt": "tilemix", "svg.fonttype": "none", "font.size": 9})
SVG_METADATA = {"Date": None, "Creator": "TileMix scripts/plot_results.py"}

PLOTS = ("frontier", "throughput", "deviation")
ROUTED_METHODS = ("tilemix", "emulator")  # rows with a routing (GPU kernel, CPU emulator)
FRONTIER_BASES = (("flash_fp16", "flash"), ("cudnn_fp16", "cudnn"))

# The columns and case keys that flash_fp16 and the baselines of a GPU run depend on: cases equal
# in all of them share inputs and baselines (prefill_group_key in apps/bench/case_groups.cpp). The
# case keys are not columns: they are read from the case name's /axis=value parts and the config
# as read.
SHAPE_COLUMNS = ("batch", "hq", "hk", "d", "lq", "lk", "causal", "state", "accum")
GROUP_CASE_KEYS = ("mainloop", "input", "softmax_scale", "seqlens_q", "seqlens_k")
# What --accuracy joins on: the case and everything that changes a routed output (an equal
# realized coverage also says that both runs made the same routing plan).
JOIN_COLUMNS = ("case", "layout", "ratio", "coverage", "mode") + SHAPE_COLUMNS

# Colors of the layouts and of the baselines, distinct from each other.
LAYOUT_COLORS = {"zero": "tab:blue", "one": "tab:orange", "band": "tab:green", "sptrans": "tab:red",
                 "bigbird": "tab:purple", "global": "tab:pink", "rowrand": "tab:cyan",
                 "align_sparse": "#393b79", "file": "#637939"}
BASELINE_COLORS = {"flash_fp16": "black", "cudnn_fp16": "#7f7f7f", "cudnn_fp8": "#8c564b",
                   "torch_like": "#bcbd22"}
RATIO_MARKERS = {0.25: "v", 0.5: "o", 0.75: "^"}
LABEL_FONT_SIZE, LABEL_STEP = 7, 10  # the frontier's point labels, and the steps (points) they move in


class InputError(Exception):
    pass


class Unsupported(Exception):
    """The file lacks what a plot needs; the message says what."""


# ---- Reading ----

def load_bench_json(path):
    """The provenance and rows of a tilemix-bench JSON, or an InputError naming what is wrong."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read: {e}") from e
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not JSON (line {e.lineno}, column {e.colno}: {e.msg}); "
                         "expected the output of tilemix-bench --format json") from e
    if not isinstance(doc, dict) or not isinstance(doc.get("provenance"), dict):
        raise InputError(f"{path}: $.provenance: missing; not a tilemix-bench JSON")
    tool = doc["provenance"].get("tool")
    if tool != "tilemix-bench":
        raise InputError(f"{path}: $.provenance.tool: expected \"tilemix-bench\", got {json.dumps(tool)}; "
                         "this script reads tilemix-bench --format json output")
    rows = doc.get("rows")
    if not isinstance(rows, list):
        raise InputError(f"{path}: $.rows: expected an array of rows")
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise InputError(f"{path}: $.rows[{i}]: expected an object")
        for key in ("case", "method"):
            if not isinstance(row.get(key), str):
                raise InputError(f"{path}: $.rows[{i}].{key}: expected a string")
    return doc["provenance"], rows


def sweep_kind(rows):
    """prefill, decode or model: what the rows' columns say the sweep was."""
    if any("cache_len" in r for r in rows):
        return "decode"
    if any("layers" in r for r in rows):
        return "model"
    return "prefill"


def ran(row):
    return row.get("status", "ok") == "ok"


def is_routed(row):
    return row["method"] in ROUTED_METHODS and row.get("layout") is not None


def value_text(value):
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"))


class CaseSettings:
    """The GROUP_CASE_KEYS of each case, from the config as read (provenance) and its name."""

    def __init__(self, provenance):
        config = provenance.get("config")
        config = config if isinstance(config, dict) else {}
        name = config.get("name") or Path(str(provenance.get("config_path") or "")).stem
        defaults = config.get("defaults") if isinstance(config.get("defaults"), dict) else {}
        cases = config.get("cases") if isinstance(config.get("cases"), list) else [{}]
        self.by_base = {}
        for i, case in enumerate(cases):
            case = case if isinstance(case, dict) else {}
            merged = {**defaults, **case}
            base = case.get("name") or f"{name}-{i}"
            self.by_base[base] = {k: value_text(merged[k]) for k in GROUP_CASE_KEYS if k in merged}
        axes = config.get("axes") if isinstance(config.get("axes"), dict) else {}
        self.axis_split = re.compile("/(" + "|".join(map(re.escape, axes)) + ")=") if axes else None

    def axes_of(self, case_name):
        """(base name, {axis: value text}) of a case name `base/axis=value/...`."""
        if self.axis_split is None:
            return case_name, {}
        parts = self.axis_split.split(case_name)
        return parts[0], dict(zip(parts[1::2], parts[2::2]))

    def routing_axes(self, case_name):
        """The case name's axes that are not part of the group, nor a column: they tell routed
        rows of one group apart (a `seed` axis, say)."""
        _, axes = self.axes_of(case_name)
        return {k: v for k, v in axes.items()
                if not is_group_setting(k) and k not in SHAPE_COLUMNS
                and k not in ("seq_len", "layout", "ratio", "mode")}

    def of(self, case_name):
        base, axes = self.axes_of(case_name)
        settings = dict(self.by_base.get(base, {}))
        settings.update({k: v for k, v in axes.items() if is_group_setting(k)})
        return settings


def is_group_setting(key):
    """A case key whose values split rows into groups: GROUP_CASE_KEYS, and an axis over one input
    setting (`input.k_channel_bias`), which changes the inputs as `input` does."""
    return key in GROUP_CASE_KEYS or key.startswith("input.")


def group_key(row, settings):
    return tuple(row.get(c) for c in SHAPE_COLUMNS) + tuple(sorted(settings.of(row["case"]).items()))


def group_rows(rows, settings):
    """Rows by group, in the order of the groups' first rows."""
    groups = {}
    for row in rows:
        groups.setdefault(group_key(row, settings), []).append(row)
    return groups


def describe(key):
    """The items that name a group (or panel) key: (name, text) pairs."""
    items = []
    values = dict(zip(SHAPE_COLUMNS, key))
    for column, label in (("batch", "B"), ("hq", "Hq"), ("hk", "Hk"), ("d", "d")):
        if values.get(column) is not None:
            items.append((column, f"{label}={values[column]}"))
    lq, lk = values.get("lq"), values.get("lk")
    if lq is not None and lq == lk and lq >= 0:
        items.append(("L", f"L={lq}"))
    elif lq is not None or lk is not None:
        items.append(("L", "varlen" if -1 in (lq, lk) else f"Lq={lq} Lk={lk}"))
    if values.get("causal") is not None:
        items.append(("causal", "causal" if values["causal"] else "not causal"))
    for column in ("state", "accum"):
        if values.get(column) is not None:
            items.append((column, f"{column} {values[column]}"))
    for k, v in key[len(SHAPE_COLUMNS):]:
        items.append((k, f"{k}={v}"))
    return items


def titles(keys):
    """A figure's common title and each panel's own: items equal in every key go to the figure
    (shape items only; equal numerics and inputs are left out), the others to the panels."""
    described = [dict(describe(k)) for k in keys]
    names = list(dict.fromkeys(n for d in described for n in d))
    common = [n for n in names if all(d.get(n) == described[0].get(n) for d in described)]
    shape = ("batch", "hq", "hk", "d", "L", "causal")
    figure = "  ".join(described[0][n] for n in common if n in shape and n in described[0])
    panels = ["  ".join(d[n] for n in names if n not in common and n in d) for d in described]
    return figure, panels


class Labels:
    """Series labels: a baseline's method name; a routed row's layout and ratio, with its mode
    and its P V precision where the file holds several, and its routing axes (a `seed` axis, say)."""

    def __init__(self, rows, settings):
        self.settings = settings
        self.modes_vary = len({r.get("mode") for r in rows if is_routed(r)}) > 1
        self.pvs_vary = len({r.get("pv") for r in rows if is_routed(r)}) > 1

    def routing(self, row):
        layout = row["layout"]
        text = layout if layout in ("zero", "one") or row.get("ratio") is None else \
            f"{layout} {100 * row['ratio']:g}%"
        if self.modes_vary and row.get("mode"):
            text += f" {row['mode']}"
        if self.pvs_vary and row.get("pv") not in (None, "fp16"):
            text += f" pv {row['pv']}"
        for k, v in self.settings.routing_axes(row["case"]).items():
            text += f" {k}={v}"
        return text

    def series(self, row):
        return f"tilemix {self.routing(row)}" if is_routed(row) else row["method"]


def check_unique(path, group, label_of):
    """Two rows of one group with the same label would be drawn as one: an input error."""
    seen = {}
    for row in group:
        label = label_of(row)
        if label in seen:
            raise InputError(
                f"{path}: rows '{seen[label]['case']}' and '{row['case']}' ({label}) fall in one group; "
                "they differ in a setting that is neither a column nor in the case name and config "
                "(provenance.config)")
        seen[label] = row


# ---- --accuracy ----

def join_accuracy(path, rows, accuracy_path):
    """Fills the rows' missing deviations from the accuracy file's rows with equal case keys
    (emulator rows stand for tilemix rows); returns how many rows gained one."""
    _, accuracy_rows = load_bench_json(accuracy_path)

    def key(row):
        method = "tilemix" if row["method"] in ROUTED_METHODS else row["method"]
        return (method,) + tuple(row.get(c) for c in JOIN_COLUMNS)

    by_key = {}
    for i, row in enumerate(accuracy_rows):
        if row.get("rel_l2_vs_ref") is None:
            continue
        if key(row) in by_key:
            raise InputError(f"{accuracy_path}: $.rows[{i}]: a second row of case '{row['case']}' "
                             f"({row['method']}) with the same case keys")
        by_key[key(row)] = row
    joined = 0
    for row in rows:
        match = by_key.get(key(row))
        if match is None or row.get("rel_l2_vs_ref") is not None:
            continue
        row["rel_l2_vs_ref"] = match["rel_l2_vs_ref"]
        if match.get("max_abs_vs_ref") is not None:
            row["max_abs_vs_ref"] = match["max_abs_vs_ref"]
        row["accuracy_from"] = Path(accuracy_path).name
        joined += 1
    if joined == 0:
        raise InputError(f"{accuracy_path}: no row matches a row of {path} that lacks rel_l2_vs_ref, "
                         f"by ({', '.join(JOIN_COLUMNS)}): run the same config (and --set) on the CPU")
    return joined


# ---- Figures ----

def figure_grid(metric_rows, panels, panel_size=(4.0, 3.2)):
    cols = min(panels, 4)
    grid_rows = metric_rows * math.ceil(panels / cols)
    fig, axes = plt.subplots(grid_rows, cols, figsize=(panel_size[0] * cols + 2.6, panel_size[1] * grid_rows),
                             squeeze=False)
    return fig, axes, cols


def panel_axes(axes, cols, metric, panel, panels):
    per_metric = math.ceil(panels / cols)
    return axes[metric * per_metric + panel // cols][panel % cols]


def hide_unused(axes, cols, metrics, panels):
    per_metric = math.ceil(panels / cols)
    for m in range(metrics):
        for p in range(panels, per_metric * cols):
            axes[m * per_metric + p // cols][p % cols].set_visible(False)


def finish(fig, title, notes, out_path, after_layout=None):
    handles = {}
    for ax in fig.axes:
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    fig.legend(list(handles.values()), list(handles), loc="upper left", bbox_to_anchor=(1.0, 0.95),
               frameon=False)
    fig.suptitle(title)
    if notes:
        fig.text(0.01, 0.005, "\n".join(notes), fontsize=7, va="bottom")
    # Room, in inches, for the title's lines above the panels and the notes below them.
    height = fig.get_figheight()
    fig.tight_layout(rect=(0, (0.05 + 0.13 * len(notes)) / height, 1, 1 - 0.12 * (title.count("\n") + 1) / height))
    if after_layout:
        after_layout()
    fig.savefig(out_path, format="svg", metadata=SVG_METADATA, bbox_inches="tight")
    plt.close(fig)


def source_title(provenance, what):
    device = provenance.get("device") if isinstance(provenance.get("device"), dict) else {}
    config = provenance.get("config") if isinstance(provenance.get("config"), dict) else {}
    where = device.get("name") or ("CPU emulator" if device.get("kind") == "cpu" else "")
    name = config.get("name") or Path(str(provenance.get("config_path") or "")).stem
    return f"{what}: {name}" + (f" on {where}" if where else "")


def accuracy_notes(rows):
    sources = sorted({r["accuracy_from"] for r in rows if r.get("accuracy_from")})
    return [f"deviations of routed rows joined from {s} (--accuracy)" for s in sources]


def point_style(row):
    if is_routed(row):
        return dict(color=LAYOUT_COLORS.get(row["layout"], "tab:gray"),
                    marker=RATIO_MARKERS.get(row.get("ratio"), "s"))
    return dict(color=BASELINE_COLORS.get(row["method"], "tab:gray"), marker="D")


def line_style(row):
    """Baselines dashed, routed rows solid, or dotted when they quantize on the fly."""
    if not is_routed(row):
        return "--"
    return ":" if row.get("mode") == "on_the_fly" else "-"


def place_labels(ax, labels):
    """Annotates each point (x, y, text, color) with its text, above or below it at the nearest
    offset where the text overlaps no point and no label placed before."""
    ax.get_xlim(), ax.get_ylim()  # settles the view limits that transData maps
    to_points = 72.0 / ax.figure.dpi
    spots = [tuple(v * to_points for v in ax.transData.transform((x, y))) for x, y, _, _ in labels]
    taken = [(px - 4, py - 4, px + 4, py + 4) for px, py in spots]

    def free(box):
        return not any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in taken)

    for (x, y, text, color), (px, py) in zip(labels, spots):
        half_width, half_height = 0.3 * LABEL_FONT_SIZE * len(text), 0.6 * LABEL_FONT_SIZE
        boxes = [(dy, (px - half_width, py + dy - half_height, px + half_width, py + dy + half_height))
                 for step in range(1, 9) for dy in (step * LABEL_STEP, -step * LABEL_STEP)]
        dy, box = next((candidate for candidate in boxes if free(candidate[1])), boxes[0])
        taken.append(box)
        ax.annotate(text, (x, y), textcoords="offset points", xytext=(0, dy), ha="center", va="center",
                    fontsize=LABEL_FONT_SIZE, color=color, arrowprops=dict(arrowstyle="-", linewidth=0.5, color=color))


def frontier(path, provenance, rows, settings, labels, base_method, out_path):
    if not any("median_ms" in r for r in rows):
        raise Unsupported("no GPU timings (median_ms): a CPU emulator run has no speedups to draw")
    if not any(r["method"] == base_method and ran(r) for r in rows):
        raise Unsupported(f"no {base_method} rows that ran: no base for the speedups")
    if not any(r.get("rel_l2_vs_ref") is not None for r in rows if is_routed(r)):
        raise Unsupported("no rel_l2_vs_ref values (a GPU run without --reference): run with --reference, "
                          "or pass --accuracy with a CPU emulator run of the same config")
    panels = []  # (group key, [(row, speedup)])
    for key, group in group_rows(rows, settings).items():
        check_unique(path, group, labels.series)
        base = next((r for r in group if r["method"] == base_method and ran(r) and r.get("median_ms")), None)
        if base is None:
            continue
        points = [(r, base["median_ms"] / r["median_ms"]) for r in group
                  if ran(r) and r.get("median_ms") and r.get("rel_l2_vs_ref") is not None]
        if any(is_routed(r) for r, _ in points):
            panels.append((key, points))
    if not panels:
        raise Unsupported(f"no group holds both a {base_method} row and a routed row with rel_l2_vs_ref")
    figure_title, panel_titles = titles([k for k, _ in panels])
    fig, axes, cols = figure_grid(1, len(panels), panel_size=(7.0, 5.0))
    print(f"frontier over {base_method} ({out_path.name}): speedup = {base_method} median / row median")
    labelled = []  # (axes, its point labels): placed once the layout has sized the axes
    for p, ((key, points), panel_title) in enumerate(zip(panels, panel_titles)):
        ax = panel_axes(axes, cols, 0, p, len(panels))
        print("  " + "  ".join(t for t in (figure_title, panel_title) if t))
        points.sort(key=lambda point: point[0]["rel_l2_vs_ref"])
        point_labels = []
        for row, speedup in points:
            label = labels.routing(row) if is_routed(row) else row["method"]
            print(f"    {label:<28} rel.L2 ref {row['rel_l2_vs_ref']:<10.3g} x{speedup:.3f}")
            style = point_style(row)
            ax.scatter([row["rel_l2_vs_ref"]], [speedup], color=style["color"], marker=style["marker"], s=30,
                       zorder=3, label=None if is_routed(row) else row["method"])
            point_labels.append((row["rel_l2_vs_ref"], speedup, label, style["color"]))
        # The legend: a layout's color, a ratio's marker (each point carries its own label).
        routed = [r for r, _ in points if is_routed(r)]
        for layout in dict.fromkeys(r["layout"] for r in routed):
            ax.scatter([], [], color=LAYOUT_COLORS.get(layout, "tab:gray"), marker="s", label=layout)
        for ratio in sorted({r["ratio"] for r in routed if r["ratio"] in RATIO_MARKERS}):
            ax.scatter([], [], color="0.4", marker=RATIO_MARKERS[ratio], label=f"{100 * ratio:g}% INT8")
        ax.axhline(1.0, color=BASELINE_COLORS.get(base_method, "black"), linewidth=0.8, linestyle=":")
        if all(r["rel_l2_vs_ref"] > 0 for r, _ in points):
            ax.set_xscale("log")
        ax.margins(x=0.08, y=0.12)
        ax.set_xlabel("relative L2 to the exact reference")
        ax.set_ylabel(f"speedup over {base_method}")
        ax.set_title(panel_title)
        ax.grid(True, linewidth=0.3)
        labelled.append((ax, point_labels))
    hide_unused(axes, cols, 1, len(panels))
    finish(fig, source_title(provenance, f"accuracy-efficiency frontier over {base_method}") +
           (f"\n{figure_title}" if figure_title else ""), accuracy_notes(rows), out_path,
           after_layout=lambda: [place_labels(ax, point_labels) for ax, point_labels in labelled])


def throughput(path, provenance, rows, settings, labels, out_path):
    metrics = [(c, label) for c, label in (("tops", "TOPS"), ("thpt_ktok_s", "K tokens/s"))
               if any(r.get(c) is not None for r in rows)]
    if not any(c == "tops" for c, _ in metrics):
        raise Unsupported("no tops column (not a prefill GPU run)")
    measured = [r for r in rows if ran(r) and r.get("tops") is not None]
    timed = [r for r in measured if r.get("lq") == r.get("lk") and (r.get("lq") or 0) > 0]
    if len(timed) < len(measured):
        print(f"{path}: throughput leaves out {len(measured) - len(timed)} rows whose Lq and Lk differ (or varlen)")
    panels = {}  # a group key without L: the rows of one panel
    for row in timed:
        key = group_key(row, settings)
        panel = tuple(None if c in ("lq", "lk") else v for c, v in zip(SHAPE_COLUMNS, key)) + key[len(SHAPE_COLUMNS):]
        panels.setdefault(panel, []).append(row)
    lengths = {r["lq"] for r in timed}
    if len(lengths) < 2:
        raise Unsupported(f"one sequence length only ({', '.join(map(str, sorted(lengths))) or 'none'}): "
                          "nothing to draw against L")
    for group in group_rows(timed, settings).values():
        check_unique(path, group, labels.series)
    figure_title, panel_titles = titles(list(panels))
    fig, axes, cols = figure_grid(len(metrics), len(panels))
    for p, (panel_rows, panel_title) in enumerate(zip(panels.values(), panel_titles)):
        series = {}
        for row in panel_rows:
            series.setdefault(labels.series(row), []).append(row)
        for m, (column, metric_label) in enumerate(metrics):
            ax = panel_axes(axes, cols, m, p, len(panels))
            for label, points in series.items():
                points = sorted(points, key=lambda r: r["lq"])
                style = point_style(points[0])
                ax.plot([r["lq"] for r in points], [r[column] for r in points], label=label,
                        color=style["color"], marker=style["marker"], markersize=3.5, linewidth=1.0,
                        linestyle=line_style(points[0]))
            ax.set_xscale("log", base=2)
            ax.set_xticks(sorted({r["lq"] for r in panel_rows}))
            ax.set_xticklabels([f"{L // 1024}k" if L % 1024 == 0 else str(L)
                                for L in sorted({r["lq"] for r in panel_rows})])
            ax.set_xlabel("L (Lq = Lk)")
            ax.set_ylabel(metric_label)
            ax.set_title(panel_title)
            ax.grid(True, linewidth=0.3)
    hide_unused(axes, cols, len(metrics), len(panels))
    finish(fig, source_title(provenance, "throughput") + (f"\n{figure_title}" if figure_title else ""), [],
           out_path)


def deviation(path, provenance, rows, settings, labels, out_path):
    deviation_columns = [c for c in ("rel_l2_vs_ref", "rel_l2_vs_flash")
                         if any(r.get(c) is not None for r in rows if is_routed(r))]
    if not deviation_columns:
        raise Unsupported("no rel_l2_vs_ref (nor rel_l2_vs_flash) values: a GPU run without --reference "
                          "or --deviation; pass --accuracy with a CPU emulator run of the same config")
    rel_l2 = deviation_columns[0]
    metrics = [(rel_l2, "relative L2 to " + ("the exact reference" if rel_l2 == "rel_l2_vs_ref" else "flash_fp16"))]
    if any(r.get("max_abs_vs_ref") is not None for r in rows if is_routed(r)):
        metrics.append(("max_abs_vs_ref", "max |d| to the exact reference"))
    panels = []
    for key, group in group_rows(rows, settings).items():
        routed = [r for r in group if is_routed(r) and ran(r) and r.get(rel_l2) is not None
                  and r.get("coverage") is not None]
        if routed:
            check_unique(path, routed, labels.routing)
            panels.append((key, routed, [r for r in group if not is_routed(r) and ran(r) and r.get(rel_l2) is not None]))
    if not panels:
        raise Unsupported(f"no routed row with both {rel_l2} and a coverage")
    figure_title, panel_titles = titles([k for k, _, _ in panels])
    fig, axes, cols = figure_grid(len(metrics), len(panels))
    for p, ((key, routed, baselines), panel_title) in enumerate(zip(panels, panel_titles)):
        series = {}
        for row in routed:
            name = row["layout"] + (f" {row['mode']}" if labels.modes_vary else "")
            if labels.pvs_vary and row.get("pv") not in (None, "fp16"):
                name += f" pv {row['pv']}"
            series.setdefault(name, []).append(row)
        for m, (column, metric_label) in enumerate(metrics):
            ax = panel_axes(axes, cols, m, p, len(panels))
            values = []
            for name, points in series.items():
                points = sorted((r for r in points if r.get(column) is not None), key=lambda r: r["coverage"])
                if not points:
                    continue
                ax.plot([r["coverage"] for r in points], [r[column] for r in points], label=name,
                        color=point_style(points[0])["color"], marker="o", markersize=3.5, linewidth=1.0,
                        linestyle=line_style(points[0]))
                values += [r[column] for r in points]
            for row in baselines:
                if row.get(column) is not None:
                    ax.axhline(row[column], color=BASELINE_COLORS.get(row["method"], "tab:gray"),
                               linestyle="--", linewidth=0.8, label=row["method"])
                    values.append(row[column])
            if values and all(v > 0 for v in values):
                ax.set_yscale("log")
            ax.set_xlabel("INT8 coverage (legal routing groups)")
            ax.set_ylabel(metric_label)
            ax.set_title(panel_title)
            ax.grid(True, linewidth=0.3)
    hide_unused(axes, cols, len(metrics), len(panels))
    finish(fig, source_title(provenance, "deviation against INT8 coverage") +
           (f"\n{figure_title}" if figure_title else ""), accuracy_notes(rows), out_path)


def render(path, plots, accuracy, out_dir):
    provenance, rows = load_bench_json(path)
    if accuracy:
        joined = join_accuracy(path, rows, accuracy)
        print(f"{path}: rel_l2_vs_ref of {joined} of {len(rows)} rows joined from {accuracy}")
    settings = CaseSettings(provenance)
    labels = Labels(rows, settings)
    out_dir = Path(out_dir) if out_dir else Path(path).parent
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = Path(path).stem
    kind = sweep_kind(rows)
    if kind != "prefill":
        print(f"{path}: a {kind} sweep; the plots read prefill rows: nothing to plot")
        return 1
    jobs = []
    for plot in dict.fromkeys(plots or PLOTS):
        if plot == "frontier":
            for base_method, short in FRONTIER_BASES:
                jobs.append((f"frontier over {base_method}", out_dir / f"{stem}-frontier-{short}.svg",
                             lambda out, b=base_method: frontier(path, provenance, rows, settings, labels, b, out)))
        elif plot == "throughput":
            jobs.append(("throughput", out_dir / f"{stem}-throughput.svg",
                         lambda out: throughput(path, provenance, rows, settings, labels, out)))
        else:
            jobs.append(("deviation", out_dir / f"{stem}-deviation.svg",
                         lambda out: deviation(path, provenance, rows, settings, labels, out)))
    written, skipped = 0, 0
    for what, out_path, draw in jobs:
        try:
            draw(out_path)
            print(f"wrote {out_path}")
            written += 1
        except Unsupported as why:
            print(f"{path}: {what} skipped: {why}")
            skipped += 1
    if plots:
        return 1 if skipped else 0
    if written == 0:
        print(f"{path}: nothing to plot")
        return 1
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", help="a tilemix-bench JSON (--format json or --out X.json)")
    parser.add_argument("--plot", action="append", choices=PLOTS,
                        help="render this plot (repeatable; default: every plot the file supports)")
    parser.add_argument("--accuracy", metavar="JSON",
                        help="a tilemix-bench JSON with rel_l2_vs_ref (a CPU emulator run of the same config), "
                             "joined by the case keys where the results lack it")
    parser.add_argument("--out", metavar="DIR", help="write the SVGs here (default: beside RESULTS_JSON)")
    args = parser.parse_args()
    try:
        return render(args.results, args.plot, args.accuracy, args.out)
    except InputError as e:
        print(f"plot_results: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
