#!/usr/bin/python3
"""Renders SVG pictures of a tilemix-bench JSON (`tilemix-bench --format json`, or `--out X.json`):
1. frontier: the speedup of every tilemix row over flash_fp16 (X-frontier-flash.svg) and over
   cudnn_fp16 (X-frontier-cudnn.svg) against its relative L2 deviation from the exact reference,
   a panel per group of rows that share their inputs (shape, L, causal, numerics, mainloop,
   input). A point's color is its layout, its marker shape its INT8 share (ratio), a hollow or
   half-filled marker a numerics variant (smooth_k, pv fp8 or routed, on_the_fly), as the legend
   names them. The Pareto front of the tilemix points (none other is as fast or faster with as
   low or lower a deviation) is drawn as a line and its points are labelled; the other tilemix
   points are unlabelled markers (--label all labels every point). The baselines of the group
   whose deviation is known are drawn and labelled beside them. Speedups are the base's median
   over the row's, both measured in the same file. A GPU run carries the deviations only with
   --reference; --accuracy adds them from a second JSON (a CPU emulator run of the same config),
   joined by the case keys.
2. throughput (X-throughput.svg): TOPS, and K tokens/s where the file has them, against L, a
   panel per causal setting and per shape, each with its own legend. Baselines are greys and
   black; a tilemix layout has one color, its INT8 share the line style. FP8 P V rows (pv fp8,
   pv routed) get panels of their own, and a panel holds at most 8 lines: where a group has more,
   its series are split by numerics variant, then by layout (the first panel holds the baselines,
   the later ones flash_fp16 for reference), and the panel's title says what it holds.
3. deviation (X-deviation.svg): relative L2 deviation from the exact reference, and max |d|
   where the file has it (CPU emulator runs), against the realized INT8 group coverage, one
   series per layout and numerics variant, a panel per group; the baselines' deviations as
   horizontal lines.
Without --plot it renders every plot the file supports and says why it skips the others. The
SVGs are written beside the input (or into --out DIR) and are byte-identical from run to run.

Usage: scripts/plot_results.py RESULTS_JSON [--plot frontier|throughput|deviation]...
                               [--accuracy JSON] [--label front|all] [--out DIR]
Exit codes: 0 every asked plot rendered (without --plot: at least one), 1 a plot the file does
not support was asked for (or, without --plot, it supports none), 2 bad input.
Needs Debian's python3-matplotlib (/usr/bin/python3).
"""
import argparse
import json
import math
import re
import sys
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("svg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

# Reproducible SVG: fixed ids, text kept as text (searchable, no font paths), no date and no
# matplotlib version in the metadata.
matplotlib.rcParams.update({"svg.hashsalt": "tilemix", "svg.fonttype": "none", "font.size": 9})
SVG_METADATA = {"Date": None, "Creator": "TileMix scripts/plot_results.py"}

PLOTS = ("frontier", "throughput", "deviation")
LABEL_CHOICES = ("front", "all")  # --label: which frontier points carry their names
ROUTED_METHODS = ("tilemix", "emulator")  # rows with a routing (GPU kernel, CPU emulator)
FRONTIER_BASES = (("flash_fp16", "flash"), ("cudnn_fp16", "cudnn"))
REFERENCE_BASELINE = "flash_fp16"  # the baseline that every throughput panel keeps

# The columns and case keys that flash_fp16 and the baselines of a GPU run depend on: cases equal
# in all of them share inputs and baselines (prefill_group_key in apps/bench/case_groups.cpp). The
# case keys are not columns: they are read from the case name's /axis=value parts and the config
# as read.
SHAPE_COLUMNS = ("batch", "hq", "hk", "d", "lq", "lk", "causal", "state", "accum")
GROUP_CASE_KEYS = ("mainloop", "input", "softmax_scale", "seqlens_q", "seqlens_k")
# What --accuracy joins on: the case and everything that changes a routed output (an equal
# realized coverage also says that both runs made the same routing plan).
JOIN_COLUMNS = ("case", "layout", "ratio", "coverage", "mode") + SHAPE_COLUMNS
# Case axes that are row columns too: the labels name them from the columns (numerics_variant).
LABELLED_COLUMNS = ("seq_len", "layout", "ratio", "mode", "pv", "smooth_k")

# A color per layout; the baselines are black and greys, so that no layout is taken for one.
LAYOUT_COLORS = {"zero": "tab:blue", "one": "tab:orange", "band": "tab:green", "sptrans": "tab:red",
                 "bigbird": "tab:purple", "global": "tab:pink", "rowrand": "tab:cyan",
                 "align_sparse": "tab:brown", "adaptive": "tab:olive", "file": "#393b79"}
OTHER_LAYOUT_COLOR = "#637939"
BASELINE_STYLES = {"flash_fp16": ("black", "D"), "cudnn_fp16": ("0.4", "p"), "cudnn_fp8": ("0.6", "X"),
                   "torch_like": ("0.75", "P")}  # (color, marker)
OTHER_BASELINE_STYLE = ("0.5", "*")
# The INT8 share of a tilemix row: its marker, and its line style in the throughput plot. zero
# and one (0% and 100%) have layouts, and so colors, of their own.
RATIO_MARKERS = {0.25: "v", 0.5: "o", 0.75: "^"}
RATIO_LINESTYLES = {0.25: ":", 0.5: "--", 0.75: "-."}
WHOLE_MARKER, WHOLE_LINESTYLE = "s", "-"
# The marker fills of the numerics variants of a file, in the order they first appear (a plain
# row's marker is filled); the legend names them.
VARIANT_FILLS = (("none", "hollow"), ("bottom", "half filled"), ("left", "left half"), ("top", "top half"),
                 ("right", "right half"))
PV_TITLES = {"fp16": "FP16 P V", "fp8": "FP8 P V (pv fp8)", "routed": "FP8 P V on INT8 tiles (pv routed)"}
MAX_SERIES = 8  # lines in a throughput panel: more cannot be told apart at a glance
GROUPS_PER_ROW = 2  # throughput groups side by side, each as wide as its metrics
LABEL_FONT_SIZE, LABEL_STEP = 8, 11  # the frontier's point labels, and the steps (points) they move in


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
                if not is_group_setting(k) and k not in SHAPE_COLUMNS and k not in LABELLED_COLUMNS}

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


def numerics_variant(row, with_pv=True):
    """What a routed row's numerics change from the plain ones (quantize_once, FP16 P V, no key
    smoothing), as its label names it: "" for none, else e.g. "smooth_k" or "pv fp8"."""
    changes = []
    if row.get("mode") == "on_the_fly":
        changes.append("on_the_fly")
    if with_pv and row.get("pv") not in (None, "fp16"):
        changes.append(f"pv {row['pv']}")
    if row.get("smooth_k"):
        changes.append("smooth_k")
    return " ".join(changes)


def int8_share(row):
    """A routed row's ratio as its markers and line styles know it: None for zero and one."""
    ratio = row.get("ratio")
    return ratio if ratio in RATIO_MARKERS else None


class Labels:
    """Series labels and marker fills. A baseline is its method name; a routed row is its layout
    and ratio, its numerics variant and its routing axes (a `seed` axis, say)."""

    def __init__(self, rows, settings):
        self.settings = settings
        variants = dict.fromkeys(numerics_variant(r) for r in rows if is_routed(r) and numerics_variant(r))
        self.fills = {v: VARIANT_FILLS[i % len(VARIANT_FILLS)] for i, v in enumerate(variants)}

    def routing(self, row):
        layout = row["layout"]
        text = layout if layout in ("zero", "one") or row.get("ratio") is None else \
            f"{layout} {100 * row['ratio']:g}%"
        if numerics_variant(row):
            text += f" {numerics_variant(row)}"
        for k, v in self.settings.routing_axes(row["case"]).items():
            text += f" {k}={v}"
        return text

    def series(self, row):
        return f"tilemix {self.routing(row)}" if is_routed(row) else row["method"]

    def marker(self, row):
        """ax.plot's marker keywords: a layout's color (greys for the baselines), the INT8 share's
        shape (the method's for a baseline), the numerics variant's fill."""
        if not is_routed(row):
            color, marker = BASELINE_STYLES.get(row["method"], OTHER_BASELINE_STYLE)
            return dict(color=color, marker=marker)
        fill, _ = self.fills.get(numerics_variant(row), ("full", ""))
        return dict(color=LAYOUT_COLORS.get(row["layout"], OTHER_LAYOUT_COLOR),
                    marker=RATIO_MARKERS.get(int8_share(row), WHOLE_MARKER), fillstyle=fill,
                    markerfacecoloralt="white")


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

def figure_grid(metric_rows, panels, panel_size=(4.0, 3.2), max_cols=4):
    cols = min(panels, max_cols)
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


def legend_handles(axes):
    """The labelled artists of the panels `axes`, one per label: the entries of their legend."""
    handles = {}
    for ax in axes:
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    return list(handles.values())


def finish(fig, title, notes, out_path, legend=(), after_layout=None):
    """Titles, notes and the figure's legend (artists with labels) around the panels, and the SVG.
    Panel legends kept out of the layout (beside their panels) still count for the picture's size."""
    # The title an inch fraction below the top, whatever the figure's height (tight_layout keeps
    # the panels below it), and room, in inches, for the notes below the panels.
    height = fig.get_figheight()
    fig.suptitle(title, y=1 - 0.05 / height, va="top")
    if notes:
        fig.text(0.01, 0.005, "\n".join(notes), fontsize=7, va="bottom")
    fig.tight_layout(rect=(0, (0.05 + 0.13 * len(notes)) / height, 1, 1))
    if legend:
        fig.legend(legend, [h.get_label() for h in legend], loc="upper left",
                   bbox_to_anchor=(1.0, fig.subplotpars.top), frameon=False)
    if after_layout:
        after_layout()
    panel_legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    fig.savefig(out_path, format="svg", metadata=SVG_METADATA, bbox_inches="tight",
                bbox_extra_artists=fig.get_default_bbox_extra_artists() + panel_legends)
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


def percent_text(ratios):
    return ", ".join(f"{100 * r:g}%" for r in sorted(ratios)) + " INT8"


def marker_legend(rows, labels):
    """Legend entries of the markers of `rows`: baselines, layout colors, INT8 share shapes,
    numerics variant fills; each only where a row has it."""
    routed = [r for r in rows if is_routed(r)]
    entries = [Line2D([], [], linestyle="none", markersize=7, label=method, **labels.marker(row))
               for method, row in dict((r["method"], r) for r in rows if not is_routed(r)).items()]
    entries += [Line2D([], [], color=LAYOUT_COLORS.get(layout, OTHER_LAYOUT_COLOR), linewidth=5, label=layout)
                for layout in dict.fromkeys(r["layout"] for r in routed)]
    shares = {int8_share(r) for r in routed}
    entries += [Line2D([], [], linestyle="none", color="0.3", marker=RATIO_MARKERS[share], markersize=7,
                       label=percent_text([share])) for share in sorted(s for s in shares if s is not None)]
    if None in shares:
        entries.append(Line2D([], [], linestyle="none", color="0.3", marker=WHOLE_MARKER, markersize=7,
                              label=percent_text({r["ratio"] for r in routed if int8_share(r) is None})))
    variants = {numerics_variant(r) for r in routed}
    if len(variants) > 1:
        entries.append(Line2D([], [], linestyle="none", color="0.3", marker="o", markersize=7,
                              label="filled: plain numerics"))
    for variant, (fill, fill_name) in labels.fills.items():
        if variant in variants:
            entries.append(Line2D([], [], linestyle="none", color="0.3", marker="o", markersize=7, fillstyle=fill,
                                  markerfacecoloralt="white", label=f"{fill_name}: {variant}"))
    return entries


def pareto_front(points):
    """The (row, speedup) points that no other point beats: none has a deviation as low or lower
    and a speedup as high or higher, one of the two strictly."""
    def beats(a, b):
        (a_row, a_speedup), (b_row, b_speedup) = a, b
        a_l2, b_l2 = a_row["rel_l2_vs_ref"], b_row["rel_l2_vs_ref"]
        return a_l2 <= b_l2 and a_speedup >= b_speedup and (a_l2 < b_l2 or a_speedup > b_speedup)

    return [p for p in points if not any(beats(q, p) for q in points)]


def place_labels(ax, panel, labels, points):
    """Annotates each point (x, y, text, color) of `labels` with its text at the nearest offset
    where the text stays inside the axes and overlaps no point (x, y) of `points` and no label
    placed before. The label's SVG group has the id point-label-PANEL-N: a reader of the SVG can
    count them."""
    ax.get_xlim(), ax.get_ylim()  # settles the view limits that transData maps
    to_points = 72.0 / ax.figure.dpi
    frame = [v * to_points for v in ax.bbox.extents]

    def spot(x, y):
        return tuple(v * to_points for v in ax.transData.transform((x, y)))

    taken = [(px - 5, py - 5, px + 5, py + 5) for px, py in (spot(x, y) for x, y in points)]

    def inside(box):
        return frame[0] <= box[0] and box[2] <= frame[2] and frame[1] <= box[1] and box[3] <= frame[3]

    def free(box):
        return inside(box) and not any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3]
                                       for b in taken)

    for i, (x, y, text, color) in enumerate(labels):
        px, py = spot(x, y)
        half_width, half_height = 0.3 * LABEL_FONT_SIZE * len(text), 0.6 * LABEL_FONT_SIZE
        # Above or below the point, or beside it (a little higher or lower), nearest first.
        offsets = [(0, step * LABEL_STEP * sign) for step in range(1, 9) for sign in (1, -1)]
        offsets += [((half_width + 8) * side, step * LABEL_STEP * sign) for step in range(0, 8)
                    for sign in (1, -1) for side in (1, -1) if step or sign == 1]
        offsets.sort(key=lambda offset: math.hypot(offset[0], 1.5 * offset[1]))
        boxes = [((dx, dy), (px + dx - half_width, py + dy - half_height,
                             px + dx + half_width, py + dy + half_height)) for dx, dy in offsets]
        # Where every spot is taken, the nearest one inside the axes.
        (dx, dy), box = next((candidate for candidate in boxes if free(candidate[1])),
                             next((candidate for candidate in boxes if inside(candidate[1])), boxes[0]))
        taken.append(box)
        label = ax.annotate(text, (x, y), textcoords="offset points", xytext=(dx, dy), ha="center", va="center",
                            fontsize=LABEL_FONT_SIZE, color=color,
                            arrowprops=dict(arrowstyle="-", linewidth=0.5, color=color, shrinkA=1, shrinkB=3))
        label.set_gid(f"point-label-{panel}-{i}")


def frontier(path, provenance, rows, settings, labels, base_method, label_all, out_path):
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
    fig, axes, cols = figure_grid(1, len(panels), panel_size=(6.4, 4.6), max_cols=2)
    print(f"frontier over {base_method} ({out_path.name}): speedup = {base_method} median / row median")
    labelled = []  # (axes, its point labels, all its points): placed once the layout has sized the axes
    off_scale = False  # whether a baseline sits on a panel's edge
    for p, ((key, points), panel_title) in enumerate(zip(panels, panel_titles)):
        ax = panel_axes(axes, cols, 0, p, len(panels))
        print("  " + "  ".join(t for t in (figure_title, panel_title) if t))
        points.sort(key=lambda point: point[0]["rel_l2_vs_ref"])
        front = pareto_front([point for point in points if is_routed(point[0])])
        on_front = {id(row) for row, _ in front}
        # The speedups span the tilemix points and the base's 1.0: a baseline beyond them (cudnn_fp8,
        # say) would squeeze the tilemix points into a strip, so it sits on the panel's edge instead.
        spanned = [s for r, s in points if is_routed(r)] + [1.0]
        pad = max(0.12 * (max(spanned) - min(spanned)), 0.02 * max(spanned))
        bottom, top = min(spanned) - pad, max(spanned) + pad
        ax.plot([r["rel_l2_vs_ref"] for r, _ in front], [s for _, s in front], color="0.2", linewidth=1.0, zorder=2)
        point_labels, panel_points = [], []
        for row, speedup in points:
            label = labels.routing(row) if is_routed(row) else row["method"]
            print(f"    {label:<28} rel.L2 ref {row['rel_l2_vs_ref']:<10.3g} x{speedup:.3f}")
            shown = min(max(speedup, bottom), top)
            if shown != speedup:
                label += f" {'↑' if speedup > top else '↓'} x{speedup:.2f}"
                off_scale = True
            ax.plot([row["rel_l2_vs_ref"]], [shown], linestyle="none", markersize=6.5 if is_routed(row) else 8,
                    markeredgewidth=1.1, zorder=3, clip_on=False, **labels.marker(row))
            panel_points.append((row["rel_l2_vs_ref"], shown))
            if label_all or not is_routed(row) or id(row) in on_front:
                point_labels.append((row["rel_l2_vs_ref"], shown, label, labels.marker(row)["color"]))
        ax.axhline(1.0, color=BASELINE_STYLES.get(base_method, OTHER_BASELINE_STYLE)[0], linewidth=0.8, linestyle=":")
        if all(r["rel_l2_vs_ref"] > 0 for r, _ in points):
            ax.set_xscale("log")
        ax.margins(x=0.1)
        ax.set_ylim(bottom, top)
        ax.set_xlabel("relative L2 to the exact reference (lower is better)")
        ax.set_ylabel(f"speedup over {base_method} (higher is better)")
        ax.set_title(panel_title)
        ax.grid(True, linewidth=0.3)
        labelled.append((ax, point_labels, panel_points))
    hide_unused(axes, cols, 1, len(panels))
    drawn = {id(r) for _, points in panels for r, _ in points}
    drawn_rows = [r for r in rows if id(r) in drawn]
    legend = marker_legend(drawn_rows, labels)
    # The front's line after the baselines' markers.
    legend.insert(len({r["method"] for r in drawn_rows if not is_routed(r)}),
                  Line2D([], [], color="0.2", linewidth=1.0, label="Pareto front of tilemix (labelled)"))
    finish(fig, source_title(provenance, f"accuracy-efficiency frontier over {base_method}") +
           (f"\n{figure_title}" if figure_title else ""),
           accuracy_notes(rows) + (["a baseline beyond the speedups of the tilemix points sits on the panel's edge "
                                    "(arrow: its side); its label gives its speedup"] if off_scale else []),
           out_path, legend=legend,
           after_layout=lambda: [place_labels(ax, p, point_labels, panel_points)
                                 for p, (ax, point_labels, panel_points) in enumerate(labelled)])


def throughput_contents(series):
    """What the throughput panels of a group hold, the same for every group: [(title, labels)],
    at most MAX_SERIES labels each, from {label: a row of the series}. Each P V precision's
    tilemix series go beside the baselines in panels of their own; where they are too many, they
    are split by numerics variant, then by layout (a layout's INT8 shares together): the first
    panel holds the baselines, the later ones the reference baseline only."""
    baselines = [label for label, row in series.items() if not is_routed(row)]
    reference = [REFERENCE_BASELINE] if REFERENCE_BASELINE in baselines else baselines[:1]
    by_pv = {}
    for label, row in series.items():
        if is_routed(row):
            by_pv.setdefault(row.get("pv") or "fp16", []).append(label)
    contents = []
    for pv, routed in by_pv.items():
        pv_title = PV_TITLES.get(pv, f"pv {pv}") if len(by_pv) > 1 else ""
        if len(baselines) + len(routed) <= MAX_SERIES:
            contents.append((pv_title, baselines + routed))
            continue
        by_variant = {}
        for label in routed:
            by_variant.setdefault(numerics_variant(series[label], with_pv=False), []).append(label)
        for variant, variant_routed in by_variant.items():
            family = ", ".join(t for t in (pv_title, variant) if t)
            by_layout = {}
            for label in variant_routed:
                by_layout.setdefault(series[label]["layout"], []).append(label)
            # zero and one (a series each) first: they go beside all the baselines.
            units = sorted(by_layout.values(), key=lambda unit: len(unit) > 1)
            panels = [list(baselines)]
            for unit in units:
                room = MAX_SERIES - len(reference)
                for piece in (unit[i:i + room] for i in range(0, len(unit), room)):
                    if len(panels[-1]) + len(piece) > MAX_SERIES:
                        panels.append(list(reference))
                    panels[-1] += piece
            for held in panels:
                layouts = list(dict.fromkeys(series[label]["layout"] for label in held if label not in baselines))
                beside = "the baselines" if set(baselines) <= set(held) else " and ".join(reference)
                contents.append((f"{family + ': ' if family else ''}tilemix {', '.join(layouts)} and {beside}", held))
    return contents or [("", baselines)]


def throughput(path, provenance, rows, settings, labels, out_path):
    metrics = [(c, label) for c, label in (("tops", "TOPS"), ("thpt_ktok_s", "K tokens/s"))
               if any(r.get(c) is not None for r in rows)]
    if not any(c == "tops" for c, _ in metrics):
        raise Unsupported("no tops column (not a prefill GPU run)")
    measured = [r for r in rows if ran(r) and r.get("tops") is not None]
    timed = [r for r in measured if r.get("lq") == r.get("lk") and (r.get("lq") or 0) > 0]
    if len(timed) < len(measured):
        print(f"{path}: throughput leaves out {len(measured) - len(timed)} rows whose Lq and Lk differ (or varlen)")
    groups = {}  # a group key without L: the rows of one group's panels
    for row in timed:
        key = group_key(row, settings)
        group = tuple(None if c in ("lq", "lk") else v for c, v in zip(SHAPE_COLUMNS, key)) + key[len(SHAPE_COLUMNS):]
        groups.setdefault(group, []).append(row)
    lengths = {r["lq"] for r in timed}
    if len(lengths) < 2:
        raise Unsupported(f"one sequence length only ({', '.join(map(str, sorted(lengths))) or 'none'}): "
                          "nothing to draw against L")
    for group in group_rows(timed, settings).values():
        check_unique(path, group, labels.series)
    figure_title, group_titles = titles(list(groups))
    first_rows = {}  # each series' first row, in the order of the file
    for row in timed:
        first_rows.setdefault(labels.series(row), row)
    contents = throughput_contents(first_rows)
    # A grid row per content and GROUPS_PER_ROW groups, each group as wide as its metrics; the
    # row's legend in a column of its own at the right.
    per_row = min(GROUPS_PER_ROW, len(groups))
    group_keys = list(groups)
    grid_rows = [(content, range(i, min(i + per_row, len(groups)))) for content in contents
                 for i in range(0, len(groups), per_row)]
    columns = per_row * len(metrics)
    fig = plt.figure(figsize=(3.7 * columns + 2.8, 3.0 * len(grid_rows)))
    grid = fig.add_gridspec(len(grid_rows), columns + 1, width_ratios=[1] * columns + [0.62])
    for r, ((content_title, content_labels), groups_of_row) in enumerate(grid_rows):
        row_axes = []
        for g, group in enumerate(groups_of_row):
            series = {}
            for row in groups[group_keys[group]]:
                if labels.series(row) in content_labels:
                    series.setdefault(labels.series(row), []).append(row)
            ordered = sorted(series.items(), key=lambda item: content_labels.index(item[0]))
            # The group and the content, each wrapped to the width of a panel.
            title = "\n".join(textwrap.fill(t, 52) for t in (group_titles[group], content_title) if t)
            for m, (column, metric_label) in enumerate(metrics):
                ax = fig.add_subplot(grid[r, g * len(metrics) + m])
                for label, points in ordered:
                    points = sorted(points, key=lambda p: p["lq"])
                    routed = is_routed(points[0])
                    ax.plot([p["lq"] for p in points], [p[column] for p in points], label=label,
                            markersize=4 if routed else 5, linewidth=1.3 if routed else 1.8,
                            linestyle=RATIO_LINESTYLES.get(int8_share(points[0]), WHOLE_LINESTYLE) if routed else "-",
                            **labels.marker(points[0]))
                lengths = sorted({p["lq"] for _, points in ordered for p in points})
                ax.set_xscale("log", base=2)
                ax.set_xticks(lengths)
                ax.set_xticklabels([f"{L // 1024}k" if L % 1024 == 0 else str(L) for L in lengths])
                ax.set_xlabel("L (Lq = Lk)")
                ax.set_ylabel(metric_label)
                if title:
                    ax.set_title(title, fontsize=9)
                ax.grid(True, linewidth=0.3)
                row_axes.append(ax)
        handles = legend_handles(row_axes)
        legend = row_axes[-1].legend(handles, [h.get_label() for h in handles], loc="upper left",
                                     bbox_to_anchor=(1.04, 1.0), frameon=False)
        legend.set_in_layout(False)
    finish(fig, source_title(provenance, "throughput") + (f"\n{figure_title}" if figure_title else ""), [], out_path)


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
            name = " ".join(t for t in (row["layout"], numerics_variant(row)) if t)
            series.setdefault(name, []).append(row)
        for m, (column, metric_label) in enumerate(metrics):
            ax = panel_axes(axes, cols, m, p, len(panels))
            values = []
            for name, points in series.items():
                points = sorted((r for r in points if r.get(column) is not None), key=lambda r: r["coverage"])
                if not points:
                    continue
                style = dict(labels.marker(points[0]), marker="o")
                ax.plot([r["coverage"] for r in points], [r[column] for r in points], label=name, markersize=4.5,
                        linewidth=1.0, linestyle="--" if numerics_variant(points[0]) else "-", **style)
                values += [r[column] for r in points]
            for row in baselines:
                if row.get(column) is not None:
                    ax.axhline(row[column], color=BASELINE_STYLES.get(row["method"], OTHER_BASELINE_STYLE)[0],
                               linestyle=":", linewidth=1.2, label=row["method"])
                    values.append(row[column])
            if values and all(v > 0 for v in values):
                ax.set_yscale("log")
            if len({r["coverage"] for r in routed}) == 1:
                ax.set_xlim(-0.05, 1.05)  # one coverage (a group cut short): still an axis of shares
            ax.set_xlabel("INT8 coverage (legal routing groups)")
            ax.set_ylabel(metric_label)
            ax.set_title(panel_title)
            ax.grid(True, linewidth=0.3)
    hide_unused(axes, cols, len(metrics), len(panels))
    finish(fig, source_title(provenance, "deviation against INT8 coverage") +
           (f"\n{figure_title}" if figure_title else ""), accuracy_notes(rows), out_path,
           legend=legend_handles(fig.axes))


def render(path, plots, accuracy, label_all, out_dir):
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
                             lambda out, b=base_method: frontier(path, provenance, rows, settings, labels, b,
                                                                 label_all, out)))
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
    parser.add_argument("--label", choices=LABEL_CHOICES, default="front",
                        help="frontier points that carry their names: the Pareto front and the baselines (front, "
                             "the default) or every point (all)")
    parser.add_argument("--out", metavar="DIR", help="write the SVGs here (default: beside RESULTS_JSON)")
    args = parser.parse_args()
    try:
        return render(args.results, args.plot, args.accuracy, args.label == "all", args.out)
    except InputError as e:
        print(f"plot_results: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
