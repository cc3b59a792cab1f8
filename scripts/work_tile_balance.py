#!/usr/bin/env python3
"""Counts how evenly the persistent CTAs of the warp-specialized prefill kernel share their work
tiles (kernels/prefill/tile_scheduler.cuh). The work tiles of B sequences of L tokens and HQ query
heads are taken in the kernel's order (sections of eight (head, sequence) pairs, highest query
tile first across a section's pairs), each costed as its steps of 128 keys (query tile m under a
causal mask: the steps up to its last row's key; else all of them) plus a fixed cost per work
tile, in steps. Then they are given out
1. by the static stride: CTA i takes tiles i, i + CTAS, ...;
2. as the CTAs free up: each next tile to the CTA with the least work so far (the lowest index
   among equals), as the launch's work tile counters hand them out.
Prints per shape the largest CTA's work over the mean for both, and the time the count predicts
for the second over the first (the ratio of the two largest CTAs' work).

Usage: scripts/work_tile_balance.py [--ctas N] [--fixed STEPS] SHAPE...
  SHAPE    B,HQ,L or B,HQ,L,causal (e.g. 8,24,2048,causal)
  --ctas   persistent CTAs, one per SM (default 132: H100 and H200)
  --fixed  a work tile's fixed cost in steps (default 3.5: `one`'s 10,175 cycles per work tile
           against 2,905 per step on the H100, docs/perf/prefill.md)
"""
import argparse
import heapq
import sys

BLOCK_M, ROUTE_TILE_N, SECTION_PAIRS = 128, 64, 8


def tile_costs(batch, heads, length, causal, fixed):
    """Cost in steps of every work tile, in the kernel's order (PersistentTiles::block_in)."""
    query_tiles = -(-length // BLOCK_M)
    pairs = batch * heads
    costs = []
    for t in range(query_tiles * pairs):
        section, in_section = divmod(t, SECTION_PAIRS * query_tiles)
        in_this = min(SECTION_PAIRS, pairs - section * SECTION_PAIRS)
        m = query_tiles - 1 - in_section // in_this
        key_end = min(length, (m + 1) * BLOCK_M) if causal else length
        key_tiles = -(-key_end // ROUTE_TILE_N)
        costs.append(-(-key_tiles // 2) + fixed)
    return costs


def static_stride(costs, ctas):
    work = [0.0] * ctas
    for t, cost in enumerate(costs):
        work[t % ctas] += cost
    return max(work)


def as_ctas_free_up(costs, ctas):
    work = [(0.0, i) for i in range(ctas)]
    heapq.heapify(work)
    for cost in costs:
        done, cta = heapq.heappop(work)
        heapq.heappush(work, (done + cost, cta))
    return max(done for done, _ in work)


def parse_shape(text):
    parts = text.split(",")
    if len(parts) not in (3, 4) or (len(parts) == 4 and parts[3] != "causal"):
        raise argparse.ArgumentTypeError(f"'{text}': expected B,HQ,L or B,HQ,L,causal")
    try:
        batch, heads, length = (int(p) for p in parts[:3])
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}': B, HQ and L must be integers") from None
    if min(batch, heads, length) <= 0:
        raise argparse.ArgumentTypeError(f"'{text}': B, HQ and L must be positive")
    return batch, heads, length, len(parts) == 4


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("shapes", nargs="+", type=parse_shape, metavar="SHAPE")
    parser.add_argument("--ctas", type=int, default=132)
    parser.add_argument("--fixed", type=float, default=3.5)
    args = parser.parse_args()
    if args.ctas <= 0 or args.fixed < 0:
        parser.error("--ctas must be positive and --fixed at least 0")
    print(f"{args.ctas} CTAs, {args.fixed} steps of fixed cost per work tile\n")
    print("| B | HQ | L | causal | work tiles | static stride: max / mean | as CTAs free up: max / mean "
          "| predicted time, free up / static |")
    print("| ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    for batch, heads, length, causal in args.shapes:
        costs = tile_costs(batch, heads, length, causal, args.fixed)
        ctas = min(args.ctas, len(costs))
        mean = sum(costs) / ctas
        fixed, free = static_stride(costs, ctas), as_ctas_free_up(costs, ctas)
        print(f"| {batch} | {heads} | {length} | {'yes' if causal else 'no'} | {len(costs)} | {fixed / mean:.3f} "
              f"| {free / mean:.3f} | {free / fixed:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
