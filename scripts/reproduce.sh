#!/usr/bin/env bash
# The paper's reproducible tables in one command: runs every config of configs/paper/ and writes
# one result per config (<config>.json with its provenance, and the table it printed, <config>.md)
# and an index (README.md) into the output folder, then renders docs/generated/REPRODUCTION.md
# from every results/*/paper/ folder and configs/paper/paper_values.csv.
#
#   scripts/reproduce.sh [--device gpu|cpu] [--out DIR] [--only NAME[,NAME...]] [--doc FILE]
#                        [-- BENCH_ARGS...]
#
# --device gpu (the default when nvidia-smi lists a GPU) runs every table; the heavy-hitter
#   exposure (table 23) is computed on the CPU in both modes, as tilemix-bench computes it.
# --device cpu runs the accuracy tables alone on the CPU emulator (tables 3, 15-17, 18, 19, 20,
#   23); the timing and memory tables (2, 5, 11-14) need a GPU and are skipped with a note.
# --out DIR (default results/<gpu>/paper, e.g. results/h200/paper, or results/cpu/paper)
# --only selects configs by name or name prefix (table03,table18); BENCH_ARGS go to every run
#   (--set seq_len=1024 to try a smaller size: the provenance of each file keeps its argv).
# --doc FILE (default docs/generated/REPRODUCTION.md) is rendered from results/*/paper/ and DIR.
# The tilemix-bench used is $TILEMIX_BENCH, else .device-bin/tilemix-bench (scripts/device_batch.sh
# stages it there), else ${BUILD_DIR:-build}/apps/tilemix-bench.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }

device="" out="" only="" doc=docs/generated/REPRODUCTION.md
bench_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device=${2:?--device needs gpu or cpu}; shift 2 ;;
    --out) out=${2:?--out needs a folder}; shift 2 ;;
    --only) only=${2:?--only needs config names}; shift 2 ;;
    --doc) doc=${2:?--doc needs a file}; shift 2 ;;
    --) shift; bench_args=("$@"); break ;;
    -h|--help) usage ;;
    *) echo "reproduce: unknown argument '$1'" >&2; usage ;;
  esac
done

gpu_name=""
if command -v nvidia-smi >/dev/null 2>&1; then
  gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1 || true)
fi
if [ -z "$device" ]; then
  device=$([ -n "$gpu_name" ] && echo gpu || echo cpu)
  echo "reproduce: --device $device${gpu_name:+ ($gpu_name)}"
fi
case "$device" in
  gpu) [ -n "$gpu_name" ] || { echo "reproduce: --device gpu, but nvidia-smi lists no GPU" >&2; exit 2; } ;;
  cpu) ;;
  *) echo "reproduce: --device must be gpu or cpu, got '$device'" >&2; exit 2 ;;
esac
if [ -z "$out" ]; then
  if [ "$device" = gpu ]; then
    # "NVIDIA H200" -> h200: the results folder of that GPU model.
    model=$(echo "$gpu_name" | sed -e 's/^NVIDIA //' -e 's/ .*//' | tr '[:upper:]' '[:lower:]')
    out="results/$model/paper"
  else
    out="results/cpu/paper"
  fi
fi

bench=${TILEMIX_BENCH:-}
if [ -z "$bench" ]; then
  bench=.device-bin/tilemix-bench
  [ -x "$bench" ] || bench="${BUILD_DIR:-build}/apps/tilemix-bench"
fi
[ -x "$bench" ] || { echo "reproduce: no tilemix-bench at $bench (build first: scripts/setup.sh)" >&2; exit 2; }

# The timing and memory tables time GPU kernels; the others are accuracy tables.
gpu_only=" table02-11-prefill-llama3b table12-13-prefill-qwen7b table14-prefill-vicuna7b table05-memory "
# Exposure is computed on the CPU, whatever the device.
cpu_always=" table23-heavy-hitter "

selected() {
  [ -z "$only" ] && return 0
  local sel
  for sel in ${only//,/ }; do
    case "$1" in "$sel"*) return 0 ;; esac
  done
  return 1
}

mkdir -p "$out"
ran=0
for config in configs/paper/table*.json; do
  name=$(basename "$config" .json)
  selected "$name" || continue
  run_device=$device
  if [ "$device" = cpu ] && [[ "$gpu_only" == *" $name "* ]]; then
    echo "reproduce: $name: needs a GPU (times and device memory of the kernels); skipped"
    continue
  fi
  [[ "$cpu_always" == *" $name "* ]] && run_device=cpu
  echo "reproduce: $name (--device $run_device) -> $out/$name.json"
  "$bench" --config "$config" --device "$run_device" --format md --out "$out/$name.json" \
    ${bench_args[@]+"${bench_args[@]}"} > "$out/$name.md"
  ran=$((ran + 1))
done
[ "$ran" -gt 0 ] || { echo "reproduce: no config of configs/paper matches --only '$only'" >&2; exit 2; }

python3 scripts/render_reproduction.py --index "$out"
results=()
for folder in results/*/paper "$out"; do
  [ -n "$(ls "$folder"/table*.json 2>/dev/null)" ] || continue
  [[ " ${results[*]+"${results[*]}"} " == *" --results $(realpath "$folder") "* ]] && continue
  results+=(--results "$(realpath "$folder")")
done
python3 scripts/render_reproduction.py "${results[@]}" --out "$doc"
echo "reproduce: $doc rendered from ${#results[@]} result folder(s)"
