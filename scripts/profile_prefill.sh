#!/usr/bin/env bash
# ncu profile (--set full) of the prefill kernels of one bench config, on the GPU machine after
# `scripts/device_batch.sh stage` (from the repository root): every launch whose name matches
# KERNEL_REGEX (default: the tilemix prefill kernels and cuDNN's attention kernels), then the
# details page, the raw page (scripts/ncu_kernel_counters.py) and the per-instruction SASS page
# with executed instructions and stall samples (scripts/ncu_sass_summary.py), the pages gzipped.
# Usage: scripts/profile_prefill.sh CONFIG [KERNEL_REGEX]   (e.g. configs/bench/profile/profile-pv.json)
# Output in $OUT (default out/): details.txt, raw.csv.gz, sass.csv.gz.
set -uo pipefail
cd "$(dirname "$0")/.."
config=${1:?usage: $0 CONFIG [KERNEL_REGEX]}
regex=${2:-prefill_kernel|sdpa|fmha|fprop}
out=${OUT:-out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/.device-bin:/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:${LD_LIBRARY_PATH:-}"
ncu=/usr/local/cuda/bin/ncu
report=$(mktemp -u)
"$ncu" --kernel-name-base demangled -k "regex:$regex" --set full --import-source no -f -o "$report" \
  .device-bin/tilemix-bench --config "$config" --device gpu --format md > "$out/ncu.log" 2>&1 || tail -5 "$out/ncu.log"
"$ncu" --import "$report.ncu-rep" --page details > "$out/details.txt" 2>&1
"$ncu" --import "$report.ncu-rep" --page raw --csv | gzip > "$out/raw.csv.gz"
"$ncu" --import "$report.ncu-rep" --page source --print-source sass --csv | gzip > "$out/sass.csv.gz"
grep -E "^  [a-zA-Z_].*\(|Duration|Issued Warp Per Scheduler" "$out/details.txt"
