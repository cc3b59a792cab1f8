#!/usr/bin/env python3
"""configs/paper/paper_values.csv against the paper's own text.

Every table the file holds is read again from the paper's text (the text extraction of its HTML
version: table cells run together, numbers are written twice, once as text and once as LaTeX),
and every cell of the file must equal the paper's cell, and every numeric cell of those tables
must be in the file. A few cells that the paper's prose quotes as well are checked by hand, so
that a fault shared by this reader and the transcription cannot pass unseen.

    test_paper_values.py PAPER_TEXT VALUES_CSV

Exits 77 (ctest's skip) when the paper's text is not there.
"""
import csv
import re
import sys
import unittest

PAPER_GPU = "A100 40GB"

# A value as the paper writes it in LaTeX: 7\.27\{\\times\}10^\{\-5\} (tables 3, 18-20) or
# 2\.85\\\!\\times\\\!10^\{0\} (tables 15-17).
LATEX = re.compile(r"(\d)\\\.(\d+)(?:\\\{\\\\times\\\}|\\\\\\!\\\\times\\\\\\!)10\^\\\{(\\-)?(\d+)\\\}")
# Tables 2 and 11-14: lengths, metrics, OOM and two-decimal numbers, which run together.
THROUGHPUT_TOKEN = re.compile(r"(\d+)k \\\||(Thpt|TOPS) \\\||(OOM)|(\d+)\\\.(\d\d)")
LAYOUTS = ["AlignSparse", "Band", "BigBird", "Global", "RowRand", "SpTrans"]


def unescape(text):
    return re.sub(r"\\(.)", r"\1", text)


def latex_value(m):
    mantissa, decimals, minus, exponent = m.groups()
    return f"{mantissa}.{decimals}e{'-' if minus else ''}{exponent}"


def plain_value(m):
    """The text form the paper writes before a LaTeX value of tables 3 and 18-20: 7\\.27×10−5."""
    mantissa, decimals, minus, exponent = m.groups()
    return f"{mantissa}\\.{decimals}×10{'−' if minus else ''}{exponent}"


class Paper:
    def __init__(self, text):
        self.lines = text.split("\n")

    def line_with(self, needle, start=0):
        for i in range(start, len(self.lines)):
            if needle in self.lines[i]:
                return i
        raise ValueError(f"the paper has no line with {needle!r}")

    def next_text_line(self, i):
        i += 1
        while not self.lines[i].strip():
            i += 1
        return i


def cell(table, row, column, metric, value, unit):
    return {"table": str(table), "row": row, "column": column, "metric": metric, "value": value, "unit": unit,
            "gpu": PAPER_GPU}


def throughput_table(table, data, columns):
    """Rows 'Len | Metric | one value per column'; returns the cells in reading order."""
    data = data[data.index("1k \\|Thpt"):]
    cells, length, metric, values = [], None, None, []

    def flush():
        if metric is None:
            return
        if len(values) != len(columns):
            raise ValueError(f"table {table} {length} {metric}: {len(values)} values for {len(columns)} columns")
        unit = "K tokens/s" if metric == "Thpt" else "TOPS"
        cells.extend(cell(table, length, c, metric, v, unit) for c, v in zip(columns, values))

    for m in THROUGHPUT_TOKEN.finditer(data):
        if m.group(1):
            flush()
            length, metric, values = m.group(1) + "k", None, []
        elif m.group(2):
            flush()
            metric, values = m.group(2), []
        elif m.group(3):
            values.append("OOM")
        else:
            values.append(f"{m.group(4)}.{m.group(5)}")
    flush()
    return cells


def table2(paper):
    columns = ["Torch", "FlashAttn", "One", "SpTrans25", "SpTrans50", "SpTrans75", "BigBird25", "BigBird50",
               "BigBird75", "MInference", "FlexPrefill", "SageAttn"]
    i = paper.line_with("Len\\|Metric\\|" + "\\|".join(columns))
    if not paper.lines[paper.next_text_line(i)].startswith("Table 2:"):
        raise ValueError("table 2: its caption does not follow its data")
    return throughput_table(2, paper.lines[i], columns)


def tables11_14(paper):
    columns = ["Torch", "Flash", "One"] + [f"{layout}{r}" for layout in LAYOUTS for r in (25, 50, 75)]
    header = "Len\\|Metric\\|Torch\\|Flash\\|One\\|AlignSparseBandBigBirdGlobalRowRandSpTrans"
    cells, i = [], paper.line_with("## Appendix FEfficiency")
    for table in (11, 12, 13, 14):
        i = paper.line_with(header, i + 1)
        line = paper.lines[i]
        caption = f"Table {table}:"
        if caption not in line and not paper.lines[paper.next_text_line(i)].startswith(caption):
            raise ValueError(f"table {table}: its caption does not follow its data")
        cells += throughput_table(table, line.split(caption)[0], columns)
    return cells


def table3(paper):
    line = paper.lines[paper.line_with("Table 3:")]
    cells = []
    for half in line[:line.index("Table 3:")].split("Seq Len\\|")[1:]:
        columns = re.match(r"((?:\d+%)+)", half).group(1).rstrip("%").split("%")
        rows = re.findall(r"(\d+k) \\\|", half)
        values = [latex_value(m) for m in LATEX.finditer(half)]
        if len(values) != len(rows) * len(columns):
            raise ValueError("table 3: values do not fill the rows")
        for r, row in enumerate(rows):
            for c, column in enumerate(columns):
                cells.append(cell(3, row, column + "%", "mean abs deviation", values[r * len(columns) + c], ""))
    return cells


def table5(paper):
    line = paper.lines[paper.line_with("RouteResidentHBM")]
    columns = ["Resident HBM", "INT8 QK tile global/L2 read", "V8-backed PV tile global/L2 read",
               "FP QK tile on-SM live set", "FP PV tile on-SM live set", "FP QK/PV Tensor Core accumulator"]
    routes = [("FlashAttention", "FlashAttention"), ("TileMixquantize\\-once", "TileMix quantize-once"),
              ("TileMixfused on\\-the\\-fly", "TileMix fused on-the-fly")]
    cells = []
    for k, (written, route) in enumerate(routes):
        begin = line.index(written) + len(written)
        end = line.index(routes[k + 1][0]) if k + 1 < len(routes) else len(line)
        values = re.findall(r"—|(\d+(?:\\\.\d+)?) (MB|MiB|KB)", line[begin:end])
        if len(values) != len(columns):
            raise ValueError(f"table 5 {route}: {len(values)} values")
        for column, (number, unit) in zip(columns, values):
            if number:  # "—": the route has no such tile
                cells.append(cell(5, route, column, "bytes", unescape(number), unit))
    return cells


def tables15_17(paper):
    cells, i = [], 0
    for table in (15, 16, 17):
        i = paper.line_with("Seq Len\\|Torch Value\\|", i + 1)
        line = paper.lines[i]
        # "Seq Len|Torch Value|Flash|100% INT8|75% INT8|50% INT8|25% INT81024 |...": table 17 says FlashAttn.
        columns = line[:line.index("25% INT8") + len("25% INT8")].split("\\|")[1:]
        if len(columns) != 6 or columns[0] != "Torch Value":
            raise ValueError(f"table {table}: unexpected header {columns}")
        if not paper.lines[paper.next_text_line(i)].startswith(f"Table {table}:") and f"Table {table}:" not in line:
            raise ValueError(f"table {table}: its caption does not follow its data")
        data = line.split(f"Table {table}:")[0]
        rows = re.findall(r"(1024|2048|4096|8192) \\\|", data)
        values = [latex_value(m) for m in LATEX.finditer(data)]
        if rows != ["1024", "2048", "4096", "8192"] or len(values) != 4 * len(columns):
            raise ValueError(f"table {table}: unexpected rows")
        for r, row in enumerate(rows):
            for c, column in enumerate(columns):
                metric = "max abs logit" if c == 0 else "max abs logit deviation"
                cells.append(cell(table, row, column, metric, values[r * len(columns) + c], ""))
    return cells


def difference_table(table, data, columns):
    """Two-column layout of (config, max, mean) cells; a config's name comes before its values."""
    metrics = ["max abs difference", "mean abs difference"]
    cells, name, position, previous = [], None, 0, 0
    for m in LATEX.finditer(data):
        gap = data[previous:m.start()]
        previous = m.end()
        plain = plain_value(m)
        if not gap.endswith(plain):
            raise ValueError(f"table {table}: {gap!r} does not end with the value {plain!r}")
        for part in gap[:-len(plain)].split("\\|"):
            if not part:
                continue
            if part.endswith("0000"):  # "FP16 (fp32acc)": both values 0, written without LaTeX
                cells += [cell(table, unescape(part[:-4]), columns[k], metrics[k], "0", "") for k in (0, 1)]
                continue
            if position != 0:
                raise ValueError(f"table {table}: a name inside the cells of {name}")
            name = unescape(part)
        cells.append(cell(table, name, columns[position], metrics[position], latex_value(m), ""))
        position = 1 - position
    return cells


def table18(paper):
    line = paper.lines[paper.line_with("ConfigMaxDiffMeanDiff\\|ConfigMaxDiffMeanDiff")]
    header = "ConfigMaxDiffMeanDiff\\|ConfigMaxDiffMeanDiff"
    return difference_table(18, line[line.index(header) + len(header):], ["MaxDiff", "MeanDiff"])


def tables19_20(paper):
    header = "ConfigMaxAbsDiffMeanAbsDiff\\|ConfigMaxAbsDiffMeanAbsDiff"
    cells = []
    first = paper.line_with(header)
    second = paper.line_with(header, first + 1)
    for table, i in ((19, first), (20, second)):
        if not paper.lines[i + 1].startswith(f"Table {table}:") and \
                not paper.lines[paper.next_text_line(i)].startswith(f"Table {table}:"):
            raise ValueError(f"table {table}: its caption does not follow its data")
        cells += difference_table(table, paper.lines[i][len(header):], ["MaxAbsDiff", "MeanAbsDiff"])
    return cells


def table23(paper):
    line = paper.lines[paper.line_with("Table 23:")]
    data = line[:line.index("Table 23:")]
    if not data.startswith("ConfigTop5Top10Top20Top30"):
        raise ValueError("table 23: unexpected header")
    cells = []
    for ratio, values in re.findall(r"SpTrans(25|50|75)((?:\d+\\\.\d\d%){4})", data):
        for column, value in zip(["Top5", "Top10", "Top20", "Top30"], re.findall(r"(\d+\\\.\d\d)%", values)):
            cells.append(cell(23, f"SpTrans{ratio}", column, "weighted INT8 exposure", unescape(value), "%"))
    return cells


def paper_cells(text):
    paper = Paper(text)
    return (table2(paper) + table3(paper) + table5(paper) + tables11_14(paper) + tables15_17(paper) +
            table18(paper) + tables19_20(paper) + table23(paper))


def key(c):
    return (int(c["table"]), c["row"], c["column"], c["metric"])


class PaperValues(unittest.TestCase):
    paper_text = ""
    values_csv = ""

    @classmethod
    def setUpClass(cls):
        with open(cls.paper_text, encoding="utf-8") as f:
            cls.paper = {key(c): c for c in paper_cells(f.read())}
        with open(cls.values_csv, encoding="utf-8", newline="") as f:
            cls.rows = list(csv.DictReader(f))

    def test_every_cell_is_the_papers(self):
        self.assertGreater(len(self.rows), 0)
        seen = set()
        for row in self.rows:
            k = key(row)
            self.assertNotIn(k, seen, f"{k} is in the file twice")
            seen.add(k)
            self.assertIn(k, self.paper, f"{k} is no cell of the paper")
            self.assertEqual(row, self.paper[k], f"{k}")

    def test_every_cell_of_the_papers_tables_is_in_the_file(self):
        missing = sorted(set(self.paper) - {key(r) for r in self.rows})
        self.assertEqual(missing, [], "cells of the paper missing from the file")

    def test_each_table_has_its_cells(self):
        count = {}
        for row in self.rows:
            count[int(row["table"])] = count.get(int(row["table"]), 0) + 1
        # 4 lengths x 2 metrics x 12 methods; 4 x 6 coverages; 3 routes (flash has no INT8 tile);
        # 4 or 3 lengths x 2 x 21; 4 x 6; 26 configs x 2; 40 x 2; 20 x 2; 3 x 4.
        self.assertEqual(count, {2: 96, 3: 24, 5: 16, 11: 168, 12: 126, 13: 126, 14: 126, 15: 24, 16: 24, 17: 24,
                                 18: 52, 19: 80, 20: 40, 23: 12})

    def test_cells_the_prose_quotes(self):
        # Written out by hand from the paper's sentences, not read by the parser above.
        by_key = {key(r): r for r in self.rows}
        quoted = [
            # 5.3: "At 4k tokens, SpTrans75 reaches 31.80 K tokens/s, compared with 14.33 K tokens/s for
            # FlashAttention and 29.80 K tokens/s for One."
            ((2, "4k", "SpTrans75", "Thpt"), "31.80", "K tokens/s"),
            ((2, "4k", "FlashAttn", "Thpt"), "14.33", "K tokens/s"),
            ((2, "4k", "One", "Thpt"), "29.80", "K tokens/s"),
            ((11, "4k", "SpTrans75", "Thpt"), "31.80", "K tokens/s"),
            # Appendix D: "quantize-once uses 136.01 MiB of resident HBM", "reduces the operand read for
            # one INT8-routed QK tile event from 32 KB in fused on-the-fly execution to 16.25 KB",
            # "a 96 KB on-SM live set and a 32 KB Tensor Core accumulator, compared with 128 KB and 64 KB".
            ((5, "TileMix quantize-once", "Resident HBM", "bytes"), "136.01", "MiB"),
            ((5, "TileMix quantize-once", "INT8 QK tile global/L2 read", "bytes"), "16.25", "KB"),
            ((5, "TileMix fused on-the-fly", "INT8 QK tile global/L2 read", "bytes"), "32", "KB"),
            ((5, "TileMix fused on-the-fly", "Resident HBM", "bytes"), "96", "MB"),
            ((5, "TileMix quantize-once", "FP QK tile on-SM live set", "bytes"), "96", "KB"),
            ((5, "TileMix quantize-once", "FP QK/PV Tensor Core accumulator", "bytes"), "32", "KB"),
            ((5, "FlashAttention", "FP QK tile on-SM live set", "bytes"), "128", "KB"),
            ((5, "FlashAttention", "FP QK/PV Tensor Core accumulator", "bytes"), "64", "KB"),
        ]
        for k, value, unit in quoted:
            self.assertIn(k, by_key)
            self.assertEqual((by_key[k]["value"], by_key[k]["unit"]), (value, unit), f"{k}")
        # G.5: "SpTrans25 routes only about 8.5% of the selected high-importance mass to INT8".
        for column in ("Top5", "Top10", "Top20", "Top30"):
            self.assertAlmostEqual(float(by_key[(23, "SpTrans25", column, "weighted INT8 exposure")]["value"]),
                                   8.5, delta=0.2)
        # Table 19's FP16 (fp32acc) row is the reference itself.
        for column, metric in (("MaxAbsDiff", "max abs difference"), ("MeanAbsDiff", "mean abs difference")):
            self.assertEqual(by_key[(19, "FP16 (fp32acc)", column, metric)]["value"], "0")

    def test_every_cell_names_the_papers_gpu(self):
        self.assertEqual({r["gpu"] for r in self.rows}, {PAPER_GPU})


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    PaperValues.paper_text, PaperValues.values_csv = sys.argv[1], sys.argv[2]
    try:
        open(PaperValues.paper_text).close()
    except OSError as e:
        print(f"SKIPPED: the paper's text is not here ({e})")
        sys.exit(77)
    result = unittest.TextTestRunner(verbosity=2).run(
        unittest.defaultTestLoader.loadTestsFromTestCase(PaperValues))
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
