#!/usr/bin/env bash
# Fuzzes the input readers: builds the libFuzzer targets (clang, AddressSanitizer and
# UndefinedBehaviorSanitizer; tests/fuzz/) into build-fuzz/ and runs each for SECONDS (default
# 600), JOBS at a time (default: the cores), starting from tests/fuzz/corpus/<target>/. New inputs
# go to build-fuzz/found/<target>/, crashes, leaks and contract violations to
# build-fuzz/crashes/ (libFuzzer prints the command that replays one).
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]   (targets: config npy words_file set_override)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(config npy words_file set_override)
build=${FUZZ_BUILD_DIR:-build-fuzz}
BUILD_DIR=$build scripts/setup.sh -DTILEMIX_CUDA=OFF -DTILEMIX_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_C_COMPILER=clang >&2
mkdir -p "$build"/crashes
jobs=${JOBS:-$(nproc)}
running=0
for t in "${targets[@]}"; do
  mkdir -p "$build"/found/"$t"
  "$build"/tests/fuzz/fuzz_"$t" -max_total_time="$seconds" -print_final_stats=1 \
    -artifact_prefix="$build"/crashes/"$t"- "$build"/found/"$t" tests/fuzz/corpus/"$t" \
    > "$build"/fuzz-"$t".log 2>&1 &
  running=$((running + 1))
  if ((running >= jobs)); then wait -n || true; running=$((running - 1)); fi  # a crash ends one target
done
wait || true
for t in "${targets[@]}"; do
  echo "== $t"
  grep -E "^stat::(number_of_executed_units|peak_rss_mb)|cov: |ERROR|contract violation" "$build"/fuzz-"$t".log | tail -4
done
ls "$build"/crashes
