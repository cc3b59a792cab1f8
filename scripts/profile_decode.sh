#!/usr/bin/env bash
# Source-level ncu profile of the decode kernels at one bar shape, on the GPU machine after
# `scripts/device_batch.sh stage` (from the repository root): for each number of new tokens, the
# warm-up and the timed launch of the FP16-cache decode kernel and its combine, then the same for
# the INT8 cache with layout LAYOUT (one warm-up launch each: the config's warmup_seconds is tiny),
# the details page and the per-instruction SASS page (executed instructions, stall samples) as CSV.
# Usage: scripts/profile_decode.sh [NEW_TOKENS...]   (default 16 4; CACHE_LEN, BATCH, LAYOUT, COMBINE)
# Output in $OUT (default out/): details<N>.txt, sass<N>.csv.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/.device-bin:${LD_LIBRARY_PATH:-}"
ncu=/usr/local/cuda/bin/ncu
config=$(mktemp --suffix=.json)
cat > "$config" <<JSON
{"name": "profile", "defaults": {"kind": "decode", "hq": 32, "hk": 8, "d": 128, "seed": 0,
  "input": {"kind": "gaussian", "seed": 1}},
 "cases": [{"name": "profile", "cache_len": ${CACHE_LEN:-16384}, "batch": ${BATCH:-8}}],
 "axes": {"layout": ["${LAYOUT:-one}"], "combine": ["${COMBINE:-auto}"]},
 "timing": {"warmup": 0, "warmup_seconds": 1e-6, "min_reps": 1, "max_reps": 1, "max_seconds": 1.0, "noise": 1.0,
            "flush_l2": false}}
JSON
tokens=("$@")
((${#tokens[@]})) || tokens=(16 4)
for n in "${tokens[@]}"; do
  report=$(mktemp -u)
  "$ncu" --kernel-name-base demangled -k regex:decode --launch-count 8 --set full --import-source no -f -o "$report" \
    .device-bin/tilemix-bench --config "$config" --device gpu --set new_tokens="$n" --format md > "$out/ncu$n.log" 2>&1 \
    || tail -5 "$out/ncu$n.log"
  "$ncu" --import "$report.ncu-rep" --page details > "$out/details$n.txt" 2>&1
  "$ncu" --import "$report.ncu-rep" --page source --print-source sass --csv > "$out/sass$n.csv" 2>&1
  rm -f "$out/ncu$n.log"
  grep -E "^  [a-z].*decode|Duration|Issued Warp Per Scheduler" "$out/details$n.txt"
done
