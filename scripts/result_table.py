#!/usr/bin/env python3
"""Renders the rows of a tilemix-bench JSON output as a markdown table, for a run whose own
markdown did not come back (an interrupted run writes its JSON row by row, its table at the end).

Usage: scripts/result_table.py RESULT.json [--columns key,key,...] > RESULT.md
The columns are JSON row keys (default: the prefill sweep's main ones); a missing value is left
empty and floats keep 4 significant digits.
"""
import argparse
import json
import sys

DEFAULT = ("case,method,layout,ratio,pv,mode,batch,hq,hk,d,lq,lk,causal,median_ms,rel_std,reps,tops,"
           "speedup_vs_flash,rel_l2_vs_flash,route_ms,sm_clock_mhz,status")


def cell(value):
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value).replace("|", "\\|")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("result")
    parser.add_argument("--columns", default=DEFAULT)
    args = parser.parse_args()
    with open(args.result) as f:
        rows = json.load(f)["rows"]
    columns = args.columns.split(",")
    out = sys.stdout
    out.write("| " + " | ".join(columns) + " |\n")
    out.write("| " + " | ".join("---" for _ in columns) + " |\n")
    for row in rows:
        out.write("| " + " | ".join(cell(row.get(c)) for c in columns) + " |\n")


if __name__ == "__main__":
    main()
