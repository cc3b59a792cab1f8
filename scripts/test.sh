#!/usr/bin/env bash
# Fresh machine -> every test: installs what is missing, builds from scratch, runs ctest
# (GPU tests skip visibly where no GPU is present) and the CI check config on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh "$@"
build_dir=${BUILD_DIR:-build}
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)"
"$build_dir"/apps/tilemix-check --config configs/check/ci.json --device cpu
"$build_dir"/apps/tilemix-check --config configs/check/decode-ci.json --device cpu
