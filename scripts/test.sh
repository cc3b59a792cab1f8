#!/usr/bin/env bash
# Fresh machine -> every test: installs what is missing, builds from scratch, runs ctest
# (GPU tests skip visibly where no GPU is present) and the CI check configs on the CPU, then the
# host code's tests again under the sanitizers, with the fuzz corpus replayed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh "$@"
build_dir=${BUILD_DIR:-build}
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)"
"$build_dir"/apps/tilemix-check --config configs/check/ci.json --device cpu
"$build_dir"/apps/tilemix-check --config configs/check/decode-ci.json --device cpu
# The host code again under AddressSanitizer and UndefinedBehaviorSanitizer (clang; every finding
# fails), with the fuzz targets replaying their corpus (tests/fuzz).
sanitize_dir=${SANITIZE_BUILD_DIR:-build-sanitize}
BUILD_DIR=$sanitize_dir scripts/setup.sh -DTILEMIX_CUDA=OFF -DTILEMIX_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_C_COMPILER=clang
ctest --test-dir "$sanitize_dir" --output-on-failure -j "$(nproc)"
