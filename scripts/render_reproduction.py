#!/usr/bin/env python3
"""Renders docs/REPRODUCTION.md: the paper's tables beside this tool's runs of configs/paper/.

    render_reproduction.py [--results DIR]... [--values CSV] [--notes MD] [--out FILE]
    render_reproduction.py --index DIR

Each --results folder (default: every results/*/paper/ folder) holds the result JSON of
scripts/reproduce.sh, one file per config (<config>.json). Per table the document shows the
paper's value (A100), each folder's value, and the ratios that compare across GPUs: a method over
flash_fp16 and over `one`, a deviation over the deviation of a reference row. A ratio that differs
from the paper's by more than a factor FLAG_FACTOR is marked; configs/paper/notes.md says why,
per table. A table whose result is missing says "not measured yet" and the command that makes it;
no number is ever made up.

--index DIR writes DIR/README.md, the index of the result files there (config, command, commit,
date), from their provenance.

Python 3 standard library only.
"""
import argparse
import csv
import glob
import json
import math
import os
import re
import sys

FLAG_FACTOR = 1.5
FLAG = " ≠"

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

# Paper layout names -> this tool's.
LAYOUT = {"AlignSparse": "align_sparse", "Band": "band", "BigBird": "bigbird", "Global": "global",
          "RowRand": "rowrand", "SpTrans": "sptrans"}
LENGTHS = {"1k": 1024, "2k": 2048, "4k": 4096, "8k": 8192, "16k": 16384}

TITLES = {
    2: "prefill throughput and TOPS, LLaMA 3.2 3B",
    3: "mean |deviation| from the Torch FP16 reference against INT8 coverage",
    5: "memory and data movement of one attention call",
    11: "prefill throughput and TOPS, LLaMA 3.2 3B, every layout",
    12: "prefill throughput and TOPS, Qwen 2.5 7B",
    13: "prefill throughput and TOPS, Qwen 2 7B",
    14: "prefill throughput and TOPS, Vicuna 7B",
    15: "single-layer random model: max |logit deviation|",
    16: "12-layer random model: max |logit deviation|",
    17: "32-layer random model: max |logit deviation|",
    18: "difference from FlashAttention per layout and coverage",
    19: "difference from full FP16 with FP32 accumulation, FP16 and FP32 accumulation",
    20: "FP16 against FP32 accumulation of the same routing",
    23: "heavy-hitter INT8 exposure under sptrans",
}
CONFIG = {2: "table02-11-prefill-llama3b", 3: "table03-deviation", 5: "table05-memory",
          11: "table02-11-prefill-llama3b", 12: "table12-13-prefill-qwen7b", 13: "table12-13-prefill-qwen7b",
          14: "table14-prefill-vicuna7b", 15: "table15-17-multilayer", 16: "table15-17-multilayer",
          17: "table15-17-multilayer", 18: "table18-vs-flash", 19: "table19-accumulation",
          20: "table20-accumulation-direct", 23: "table23-heavy-hitter"}
GPU_ONLY = {2, 5, 11, 12, 13, 14}
MODEL_LAYERS = {15: 1, 16: 12, 17: 32}


# ---- Inputs ----

def load_values(path):
    values = {}
    with open(path, encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            values[(int(row["table"]), row["row"], row["column"], row["metric"])] = row
    return values


def load_notes(path):
    """'## table N' sections of the notes file -> text; '## all' goes before the tables and
    '## not reproduced' after them. A section may appear once: a second one is an error (the
    first would be lost without a word)."""
    notes, key, lines = {}, None, []
    if not os.path.exists(path):
        return notes
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            m = re.match(r"## (table \d+|all|not reproduced)\s*$", line)
            if m:
                if key:
                    notes[key] = "".join(lines).strip()
                if m.group(1) in notes or m.group(1) == key:
                    sys.exit(f"render_reproduction: {path}:{number}: a second '## {m.group(1)}' section")
                key, lines = m.group(1), []
            elif key:
                lines.append(line)
    if key:
        notes[key] = "".join(lines).strip()
    return notes


class ResultSet:
    """The result JSON files of one folder, by config name."""

    def __init__(self, folder):
        self.folder = folder
        self.files = {}
        for path in sorted(glob.glob(os.path.join(folder, "table*.json"))):
            with open(path, encoding="utf-8") as f:
                self.files[os.path.splitext(os.path.basename(path))[0]] = json.load(f)
        devices = [r["provenance"]["device"] for r in self.files.values()]
        gpus = [d for d in devices if d.get("kind") == "gpu"]
        self.gpu = bool(gpus)
        self.label = gpus[0]["name"].replace("NVIDIA ", "") if gpus else "CPU emulator"

    def rows(self, config):
        result = self.files.get(config)
        return None if result is None else result["rows"]

    def device_of(self, config):
        return self.files[config]["provenance"]["device"]


# ---- Numbers ----

def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def fmt(x, digits=3):
    """A measured value or a ratio: `digits` significant digits, whole numbers from 1000 up."""
    if x is None:
        return "—"
    if isinstance(x, str):
        return x
    if x == 0:
        return "0"
    if abs(x) >= 10 ** (digits - 1) and abs(x) >= 1000:
        return f"{x:.0f}"
    if abs(x) >= 1e-2:
        return f"{x:.{digits}g}"
    return sci(x)


def sci(x):
    """A deviation as the paper writes them: 7.27e-5."""
    if x is None:
        return "—"
    if x == 0:
        return "0"
    mantissa, exponent = f"{x:.2e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def paper_fmt(text):
    """A paper cell as the paper writes it ("7.27e-5", "2.85" for 2.85e0), or "—" without one."""
    if text is None:
        return "—"
    return re.sub(r"e0$", "", text)


def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def disagrees(ours, paper):
    return abs(math.log(ours / paper)) > math.log(FLAG_FACTOR)


class Flags:
    """Counts the ratios compared with the paper's and those that differ beyond FLAG_FACTOR."""

    def __init__(self):
        self.compared = 0
        self.flagged = 0

    def cell(self, ours, paper):
        text = fmt(ours)
        if ours is None or paper is None or ours <= 0 or paper <= 0:  # no factor between them
            return text
        self.compared += 1
        if disagrees(ours, paper):
            self.flagged += 1
            return text + FLAG
        return text

    def summary(self, label):
        if not self.compared:
            return ""
        return (f"{label}: {self.flagged} of {self.compared} ratios differ from the paper's by more than a factor "
                f"{FLAG_FACTOR:g} (marked{FLAG}).")


def table(header, rows, right_from=1):
    out = ["| " + " | ".join(cell.replace("|", "\\|") for cell in header) + " |",
           "| " + " | ".join("---" if i < right_from else "---:" for i in range(len(header))) + " |"]
    out += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(out)


def pick(rows, **want):
    """The first row whose keys have the wanted values (floats compared loosely)."""
    def matches(have, value):
        if isinstance(value, float) and isinstance(have, (int, float)):
            return abs(have - value) < 1e-9
        return have == value

    for row in rows or []:
        if all(matches(row.get(key), value) for key, value in want.items()):
            return row
    return None


def ok(row):
    return row is not None and row.get("status", "ok") == "ok"


def routed(row):
    return row is not None and row.get("method") in ("tilemix", "emulator")


def case_row(rows, case, accum=None):
    """The routed row of config case `case` (its name before any /axis=value suffix)."""
    for row in rows or []:
        if routed(row) and row["case"].split("/")[0] == case and (accum is None or row.get("accum") == accum):
            return row
    return None


def routed_row(rows, **want):
    for method in ("tilemix", "emulator"):
        row = pick(rows, method=method, **want)
        if row:
            return row
    return None


# ---- Sections ----

class Renderer:
    def __init__(self, values, notes, results):
        self.values = values
        self.notes = notes
        self.results = results

    def paper(self, table_no, row, column, metric):
        cell = self.values.get((table_no, row, column, metric))
        return None if cell is None else cell["value"]

    def sets_for(self, table_no):
        config = CONFIG[table_no]
        return [r for r in self.results if config in r.files]

    def missing_lines(self, table_no):
        config = CONFIG[table_no]
        have = self.sets_for(table_no)
        lines = []
        if not any(r.gpu for r in have) and table_no != 23:
            lines.append(f"GPU: not measured yet (`scripts/reproduce.sh --device gpu --only {config}`).")
        if table_no not in GPU_ONLY and not have:
            lines.append(f"CPU emulator: not measured yet (`scripts/reproduce.sh --device cpu --only {config}`).")
        return lines

    def provenance_lines(self, table_no):
        lines = []
        for r in self.sets_for(table_no):
            p = r.files[CONFIG[table_no]]["provenance"]
            device = p["device"]
            where = device.get("name", "CPU") if device.get("kind") == "gpu" else "the CPU"
            lines.append(f"{r.label}: `{os.path.relpath(os.path.join(r.folder, CONFIG[table_no] + '.json'), ROOT)}`,"
                         f" run on {where} at {p.get('git_sha', '?')}, {p.get('time_utc', '?')}"
                         f" (`{' '.join(os.path.basename(a) if i == 0 else a for i, a in enumerate(p.get('argv', [])))}`).")
        return lines

    def section(self, table_no, body, flags_lines=()):
        out = [f"## Table {table_no}: {TITLES[table_no]}", ""]
        out += [f"Config: `configs/paper/{CONFIG[table_no]}.json`."]
        out += self.provenance_lines(table_no) + self.missing_lines(table_no)
        out.append("")
        if body:
            out += [body, ""]
        out += [line for line in flags_lines if line]
        note = self.notes.get(f"table {table_no}")
        if note:
            if out[-1] != "":
                out.append("")
            out += [note]
        return "\n".join(out).rstrip() + "\n"

    # Tables 2, 11-14.
    def throughput(self, table_no):
        paper_columns = []
        for (t, _, column, _) in self.values:
            if t == table_no and column not in paper_columns:
                paper_columns.append(column)
        lengths = [l for l in LENGTHS if any(k[0] == table_no and k[1] == l for k in self.values)]
        flash_name = "FlashAttn" if table_no == 2 else "Flash"
        sets = [r for r in self.sets_for(table_no) if r.gpu]
        extra = [("zero", "tilemix zero (this tool's addition)"), ("cudnn_fp16", "cudnn_fp16 (this tool's addition)"),
                 ("cudnn_fp8", "cudnn_fp8 (this tool's addition)")]
        header = ["method", "A100 K tok/s", "A100 TOPS", "A100 x Flash", "A100 x One"]
        for r in sets:
            header += [f"{r.label} K tok/s", f"{r.label} TOPS", f"{r.label} x flash", f"{r.label} x one",
                       f"{r.label} x flash (non-causal)"]
        flags = {r.label: Flags() for r in sets}
        blocks = []
        our_lengths = lengths + (["16k"] if sets and table_no != 2 else [])
        for length in our_lengths:
            rows = []
            paper_flash = number(self.paper(table_no, length, flash_name, "Thpt"))
            paper_one = number(self.paper(table_no, length, "One", "Thpt"))
            additions = [label for _, label in extra] if table_no != 2 else []
            for column in paper_columns + additions:
                thpt = self.paper(table_no, length, column, "Thpt")
                tops = self.paper(table_no, length, column, "TOPS")
                p_thpt = number(thpt)
                p_flash = ratio(p_thpt, paper_flash)
                selector = self.throughput_selector(column, flash_name)
                mixed = selector is not None and selector[0] == "tilemix" and selector[1] not in ("one", "zero")
                p_one = ratio(p_thpt, paper_one) if mixed else None
                line = [column, fmt(thpt) if thpt else "—", fmt(tops) if tops else "—", fmt(p_flash), fmt(p_one)]
                for r in sets:
                    line += self.throughput_cells(r.rows(CONFIG[table_no]), column, LENGTHS[length], flash_name,
                                                  p_flash, p_one, flags[r.label])
                rows.append(line)
            blocks.append(f"L = {length}:\n\n" + table(header, rows))
        flag_lines = [flags[r.label].summary(f"{r.label}, causal x flash and x one") for r in sets]
        return self.section(table_no, "\n\n".join(blocks), flag_lines)

    def throughput_cells(self, rows, column, lq, flash_name, paper_flash, paper_one, flags):
        selector = self.throughput_selector(column, flash_name)
        if selector is None:
            return ["not in this tool", "", "", "", ""]

        def find(causal, sel=selector):
            method, layout, ratio_ = sel
            if method == "tilemix":
                want = {"layout": layout} if ratio_ is None else {"layout": layout, "ratio": ratio_}
                return pick(rows, method="tilemix", lq=lq, causal=causal, **want)
            return pick(rows, method=method, lq=lq, causal=causal)

        row = find(True)
        if row is None:
            return ["not measured", "", "", "", ""]
        if not ok(row):
            return [row.get("status", "?").split(" (")[0], "", "", "", ""]
        one = find(True, ("tilemix", "one", None))
        x_flash = row.get("speedup_vs_flash")
        x_one = ratio(row.get("thpt_ktok_s"), one.get("thpt_ktok_s")) if ok(one) and selector[0] == "tilemix" \
            and selector[1] not in ("one", "zero") else None
        non_causal = find(False)
        return [fmt(row.get("thpt_ktok_s"), 4), fmt(row.get("tops"), 4),
                flags.cell(x_flash, paper_flash) if column != flash_name else fmt(x_flash),
                flags.cell(x_one, paper_one),
                fmt(non_causal.get("speedup_vs_flash")) if ok(non_causal) else "—"]

    @staticmethod
    def throughput_selector(column, flash_name):
        """(method, layout, ratio) of a paper column or one of this tool's additions."""
        if column == "Torch":
            return ("torch_like", None, None)
        if column == flash_name:
            return ("flash_fp16", None, None)
        if column == "One":
            return ("tilemix", "one", None)
        if column.startswith("tilemix zero"):
            return ("tilemix", "zero", None)
        for method in ("cudnn_fp16", "cudnn_fp8"):
            if column.startswith(method):
                return (method, None, None)
        m = re.match(r"([A-Za-z]+)(\d+)$", column)
        if m and m.group(1) in LAYOUT:
            return ("tilemix", LAYOUT[m.group(1)], int(m.group(2)) / 100)
        return None

    # Table 3.
    def deviation_vs_coverage(self):
        sets = self.sets_for(3)
        header = ["L", "INT8 coverage", "A100 mean|d|", "A100 / 25%"]
        for r in sets:
            header += [f"{r.label} coverage", f"{r.label} mean|d|", f"{r.label} / 25%"]
        flags = {r.label: Flags() for r in sets}
        rows = []
        for length in ("1k", "2k", "4k", "8k"):
            paper25 = number(self.paper(3, length, "25%", "mean abs deviation"))
            for pct in (0, 5, 10, 15, 20, 25):
                text = self.paper(3, length, f"{pct}%", "mean abs deviation")
                p_ratio = ratio(number(text), paper25)
                line = [length, f"{pct}%", paper_fmt(text), fmt(p_ratio)]
                for r in sets:
                    rows_ = r.rows(CONFIG[3])
                    row = routed_row(rows_, lq=LENGTHS[length], ratio=pct / 100)
                    top = routed_row(rows_, lq=LENGTHS[length], ratio=0.25)
                    if row is None:
                        line += ["not measured", "", ""]
                        continue
                    mean = row.get("mean_abs_vs_compared")
                    our_ratio = ratio(mean, top.get("mean_abs_vs_compared") if top else None)
                    line += [fmt(row.get("coverage")), sci(mean),
                             fmt(our_ratio) if pct == 25 else flags[r.label].cell(our_ratio, p_ratio)]
                rows.append(line)
        return self.section(3, table(header, rows, 2), [flags[r.label].summary(r.label + ", / 25%") for r in sets])

    # Table 5.
    def memory(self):
        sets = [r for r in self.sets_for(5) if r.gpu]
        routes = [("FlashAttention", ("flash_fp16", None)), ("TileMix quantize-once", ("tilemix", "quantize_once")),
                  ("TileMix fused on-the-fly", ("tilemix", "on_the_fly"))]
        header = ["route", "A100 resident HBM", "A100 / FlashAttention"]
        for r in sets:
            header += [f"{r.label} HBM MiB", f"{r.label} HBM MiB meas.", f"{r.label} without O, LSE",
                       f"{r.label} / flash_fp16"]
        flags = {r.label: Flags() for r in sets}
        paper_bytes = {}
        for route, _ in routes:
            cell = self.values.get((5, route, "Resident HBM", "bytes"))
            paper_bytes[route] = number(cell["value"]) if cell else None
        rows = []
        for route, (method, mode) in routes:
            cell = self.values.get((5, route, "Resident HBM", "bytes"))
            p_ratio = ratio(paper_bytes[route], paper_bytes["FlashAttention"])
            line = [route, f"{cell['value']} {cell['unit']}" if cell else "—", fmt(p_ratio)]
            for r in sets:
                rows_ = r.rows(CONFIG[5])
                row = pick(rows_, method=method, mode=mode) if mode else pick(rows_, method=method)
                flash = pick(rows_, method="flash_fp16")
                if not ok(row):
                    line += ["not measured" if row is None else row.get("status"), "", "", ""]
                    continue
                mib = row.get("resident_mib")
                without = mib - self.output_mib(row) if mib is not None else None
                flash_without = flash["resident_mib"] - self.output_mib(flash) if ok(flash) else None
                our_ratio = ratio(without, flash_without)
                line += [fmt(mib, 5), fmt(row.get("resident_measured_mib"), 5), fmt(without, 5),
                         fmt(our_ratio) if method == "flash_fp16" else flags[r.label].cell(our_ratio, p_ratio)]
            rows.append(line)
        body = table(header, rows)
        per_tile = [k for k in self.values if k[0] == 5 and k[2] != "Resident HBM"]
        tile_rows = []
        for route, _ in routes:
            line = [route]
            for column in ("INT8 QK tile global/L2 read", "V8-backed PV tile global/L2 read",
                           "FP QK tile on-SM live set", "FP PV tile on-SM live set",
                           "FP QK/PV Tensor Core accumulator"):
                cell = self.values.get((5, route, column, "bytes"))
                line.append(f"{cell['value']} {cell['unit']}" if cell else "—")
            tile_rows.append(line)
        if per_tile:
            body += ("\n\nThe paper's per-tile accounting (A100; this tool measures none of these, see below):\n\n" +
                     table(["route", "INT8 QK tile read", "V8 PV tile read", "FP QK live set", "FP PV live set",
                            "accumulator"], tile_rows))
        return self.section(5, body, [flags[r.label].summary(r.label + ", / flash_fp16 without O and LSE")
                                      for r in sets])

    @staticmethod
    def output_mib(row):
        """O (FP16) and the LSE (FP32) of a row's shape, in MiB: the paper leaves them out."""
        tokens = row["batch"] * row["lq"]
        return tokens * row["hq"] * (row["d"] * 2 + 4) / 2 ** 20

    # Tables 15-17.
    def model(self, table_no):
        layers = MODEL_LAYERS[table_no]
        sets = self.sets_for(table_no)
        flash_name = "FlashAttn" if table_no == 17 else "Flash"
        columns = [("Torch Value", "max abs logit", None), (flash_name, "max abs logit deviation", ("flash_fp16",)),
                   ("100% INT8", "max abs logit deviation", ("tilemix", "one", None)),
                   ("75% INT8", "max abs logit deviation", ("tilemix", "sptrans", 0.75)),
                   ("50% INT8", "max abs logit deviation", ("tilemix", "sptrans", 0.5)),
                   ("25% INT8", "max abs logit deviation", ("tilemix", "sptrans", 0.25))]
        header = ["L", "column", "A100", "A100 x Flash"]
        for r in sets:
            header += [r.label, f"{r.label} x flash_fp16"]
        flags = {r.label: Flags() for r in sets}
        rows = []
        for length in ("1024", "2048", "4096", "8192"):
            p_flash = number(self.paper(table_no, length, flash_name, "max abs logit deviation"))
            for column, metric, selector in columns:
                text = self.paper(table_no, length, column, metric)
                p_ratio = ratio(number(text), p_flash) if selector and selector[0] == "tilemix" else None
                line = [length, column, paper_fmt(text), fmt(p_ratio)]
                for r in sets:
                    rows_ = [x for x in r.rows(CONFIG[table_no]) if x.get("layers") == layers]
                    flash = pick(rows_, method="flash_fp16", lq=int(length))
                    if selector is None:
                        row = next((x for x in rows_ if x.get("lq") == int(length) and
                                    x.get("method") == x.get("reference")), None)
                        value = row.get("max_abs_logit_ref") if ok(row) else None
                    elif selector[0] == "flash_fp16":
                        row = flash
                        value = row.get("max_abs_dev") if ok(row) else None
                    else:
                        want = {"layout": selector[1]} if selector[2] is None else {"layout": selector[1],
                                                                                      "ratio": selector[2]}
                        row = pick(rows_, method="tilemix", lq=int(length), **want)
                        value = row.get("max_abs_dev") if ok(row) else None
                    if row is None:
                        line += ["not measured", ""]
                        continue
                    our_ratio = ratio(value, flash.get("max_abs_dev") if ok(flash) else None) \
                        if selector and selector[0] == "tilemix" else None
                    line += [fmt(value) if selector is None else sci(value), flags[r.label].cell(our_ratio, p_ratio)]
                rows.append(line)
        return self.section(table_no, table(header, rows, 2),
                            [flags[r.label].summary(r.label + ", x flash_fp16") for r in sets])

    # Tables 18-20.
    def difference(self, table_no):
        if table_no == 18:
            columns, metric_names = ("MaxDiff", "MeanDiff"), ("max abs difference", "mean abs difference")
        else:
            columns, metric_names = ("MaxAbsDiff", "MeanAbsDiff"), ("max abs difference", "mean abs difference")
        paper_rows = []
        for (t, row, _, _) in self.values:
            if t == table_no and row not in paper_rows:
                paper_rows.append(row)
        paper_rows.sort(key=self.difference_order)
        sets = self.sets_for(table_no)
        header = ["config", "A100 max", "A100 mean", "A100 mean / One"]
        for r in sets:
            header += [f"{r.label} coverage", f"{r.label} max", f"{r.label} mean", f"{r.label} mean / one"]
        flags = {r.label: Flags() for r in sets}
        rows = []
        for name in paper_rows:
            base, accum = self.difference_case(name)
            one_name = "One" + (f" (fp{accum}acc)" if accum else "") if table_no != 18 else "One (100% INT8)"
            p_max = self.paper(table_no, name, columns[0], metric_names[0])
            p_mean = self.paper(table_no, name, columns[1], metric_names[1])
            p_ratio = ratio(number(p_mean), number(self.paper(table_no, one_name, columns[1], metric_names[1])))
            line = [name, paper_fmt(p_max), paper_fmt(p_mean), fmt(p_ratio)]
            for r in sets:
                rows_ = r.rows(CONFIG[table_no])
                precision = f"fp{accum}" if accum else None
                row = case_row(rows_, base, precision)
                one = case_row(rows_, "one", precision)
                if row is None:
                    line += ["not measured", "", "", ""]
                    continue
                mean = row.get("mean_abs_vs_compared")
                our_ratio = ratio(mean, one.get("mean_abs_vs_compared") if one else None)
                line += [fmt(row.get("coverage")), sci(row.get("max_abs_vs_compared")), sci(mean),
                         fmt(our_ratio) if base == "one" else flags[r.label].cell(our_ratio, p_ratio)]
            rows.append(line)
        return self.section(table_no, table(header, rows),
                            [flags[r.label].summary(r.label + ", mean / one") for r in sets])

    @staticmethod
    def difference_case(name):
        """Paper config name -> (case name of the config, accumulation '16', '32' or None)."""
        m = re.match(r"(.*?) \(fp(16|32)acc\)$", name)
        accum = m.group(2) if m else None
        base = m.group(1) if m else name
        if base.startswith("Zero") or base == "FP16":
            return "zero", accum
        if base.startswith("One"):
            return "one", accum
        m = re.match(r"([A-Za-z]+)(\d+)$", base)
        return f"{LAYOUT[m.group(1)]}{m.group(2)}", accum

    @staticmethod
    def difference_order(name):
        base = re.sub(r" \(.*\)$", "", name)
        accum = 0 if "fp16acc" in name else 1
        if base in ("Zero", "FP16"):
            return (0, 0, accum)
        if base == "One":
            return (1, 0, accum)
        m = re.match(r"([A-Za-z]+)(\d+)$", base)
        return (2 + list(LAYOUT).index(m.group(1)), int(m.group(2)), accum)

    # Table 23.
    def exposure(self):
        sets = self.sets_for(23)
        header = ["config", "top", "A100 exposure", "A100 / 25, 50, 75%"]
        for r in sets:
            header += [f"{r.label} coverage", f"{r.label} exposure", f"{r.label} / coverage"]
        flags = {r.label: Flags() for r in sets}
        rows = []
        for pct in (25, 50, 75):
            for k, top in enumerate(("Top5", "Top10", "Top20", "Top30")):
                text = self.paper(23, f"SpTrans{pct}", top, "weighted INT8 exposure")
                p_ratio = ratio(number(text), pct)
                line = [f"SpTrans{pct}", top[3:] + "%", paper_fmt(text) + "%" if text else "—", fmt(p_ratio)]
                for r in sets:
                    row = case_row(r.rows(CONFIG[23]), f"sptrans{pct}")
                    if row is None:
                        line += ["not measured", "", ""]
                        continue
                    exposure = float(row["hh_exposure"].split()[k])
                    line += [fmt(row.get("coverage")), fmt(100 * exposure) + "%",
                             flags[r.label].cell(ratio(exposure, row.get("coverage")), p_ratio)]
                rows.append(line)
        return self.section(23, table(header, rows, 2), [flags[r.label].summary(r.label + ", / coverage")
                                                         for r in sets])

    def document(self):
        out = ["# Reproducing the paper's tables", "",
               "Generated by `scripts/render_reproduction.py` from the result files of `scripts/reproduce.sh` "
               "(one per config of `configs/paper/`, folders: " +
               (", ".join(f"`{os.path.relpath(r.folder, ROOT)}` ({r.label})" for r in self.results) or "none yet") +
               ") and the paper's values, `configs/paper/paper_values.csv` (A100 40GB). Edit "
               "`configs/paper/notes.md`, not this file. Every number of a column named after a GPU or the CPU "
               "comes from the result file that the section names; a cell without a counterpart is `—`, a row "
               "the result file does not hold is `not measured`.", "",
               "Absolute values depend on the GPU, the inputs and the model; the ratios compare across GPUs: a "
               "method over flash_fp16 (`x flash`) and over `one`, a deviation over that of a reference row. A "
               f"ratio that differs from the paper's by more than a factor {FLAG_FACTOR:g} is marked{FLAG}.", ""]
        if self.notes.get("all"):
            out += [self.notes["all"], ""]
        sections = [self.throughput(2), self.deviation_vs_coverage(), self.memory()]
        sections += [self.throughput(t) for t in (11, 12, 13, 14)]
        sections += [self.model(t) for t in (15, 16, 17)]
        sections += [self.difference(t) for t in (18, 19, 20)]
        sections += [self.exposure()]
        out += ["\n".join(sections).rstrip(), ""]
        if self.notes.get("not reproduced"):
            out += [self.notes["not reproduced"], ""]
        return "\n".join(out)


# ---- The results index ----

def write_index(folder):
    rows = []
    for path in sorted(glob.glob(os.path.join(folder, "table*.json"))):
        with open(path, encoding="utf-8") as f:
            result = json.load(f)
        p = result["provenance"]
        name = os.path.splitext(os.path.basename(path))[0]
        device = p["device"].get("name", "GPU") if p["device"].get("kind") == "gpu" else "CPU (emulator)"
        argv = " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(p.get("argv", [])))
        tables = ", ".join(str(t) for t, c in sorted(CONFIG.items()) if c == name)
        md = f", `{name}.md`" if os.path.exists(os.path.join(folder, name + ".md")) else ""
        rows.append([f"`{name}.json`{md}", tables, device, str(len(result["rows"])), f"`{argv}`",
                     p.get("git_sha", "?"), p.get("time_utc", "?")])
    text = ["# Paper tables, as reproduced", "",
            "One file per config of `configs/paper/`, written by `scripts/reproduce.sh` (a `.md` beside a JSON "
            "file is the table the same run printed). Every JSON file carries its provenance (argv, config as "
            "read, git sha, device, UTC time). `docs/REPRODUCTION.md` sets them beside the paper's values. This "
            "index is written by `scripts/render_reproduction.py --index`.", "",
            table(["file", "paper tables", "device", "rows", "command", "commit", "date (UTC)"], rows, 7), ""]
    with open(os.path.join(folder, "README.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(text))


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", action="append", help="a folder of result JSON files (repeatable)")
    parser.add_argument("--values", default=os.path.join(ROOT, "configs/paper/paper_values.csv"))
    parser.add_argument("--notes", default=os.path.join(ROOT, "configs/paper/notes.md"))
    parser.add_argument("--out", default=os.path.join(ROOT, "docs/REPRODUCTION.md"))
    parser.add_argument("--index", metavar="DIR", help="write DIR/README.md, the index of its result files")
    args = parser.parse_args(argv)
    if args.index:
        write_index(args.index)
        return 0
    folders = args.results or sorted(d for d in glob.glob(os.path.join(ROOT, "results/*/paper"))
                                     if glob.glob(os.path.join(d, "table*.json")))
    results = [ResultSet(f) for f in folders]
    # GPU folders first: their columns are the ones the paper's GPU is compared with.
    results.sort(key=lambda r: not r.gpu)
    text = Renderer(load_values(args.values), load_notes(args.notes), results).document()
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
