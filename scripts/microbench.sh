#!/usr/bin/env bash
# Copies the microbenchmarks of tools/microbench/ (built with the CUDA build, sm_90a, CUDA runtime
# linked statically) into .device-bin/, the folder that travels to the GPU machine
# (scripts/device_batch.sh). Each prints markdown; docs/perf/decode.md quotes their H200 runs.
set -euo pipefail
cd "$(dirname "$0")/.."
b=${BUILD_DIR:-build}
mkdir -p .device-bin
for src in tools/microbench/*.cu; do
  name=$(basename "$src" .cu)
  cmake --build "$b" --target "$name" >&2
  cp "$b/tools/$name" .device-bin/
  echo ".device-bin/$name"
done
