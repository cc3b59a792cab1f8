#!/usr/bin/env bash
# Builds the microbenchmarks of tools/microbench/ (sm_90a, CUDA runtime linked statically) into
# .device-bin/, the folder that travels to the GPU machine (scripts/device_batch.sh). Each one
# prints markdown; docs/perf-notes.md quotes their H200 runs.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .device-bin
for src in tools/microbench/*.cu; do
  name=$(basename "$src" .cu)
  nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -I. -cudart static "$src" -o .device-bin/"$name"
  echo ".device-bin/$name"
done
