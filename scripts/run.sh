#!/usr/bin/env bash
# Fresh machine -> the main job: installs what is missing, builds, and runs tilemix-bench.
# With a GPU: the config given (default configs/bench/quick.json). Without one, tilemix-bench says
# so and this runs its small built-in CPU-emulator sweep instead (GPU-sized configs would take
# hours on the CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >&2
build_dir=${BUILD_DIR:-build}
bench="$build_dir"/apps/tilemix-bench
if "$bench" --list | grep -q '^  none'; then
  echo "run: no usable GPU here; running the CPU emulator sweep (tilemix-bench --device cpu)" >&2
  exec "$bench" --device cpu "${@:2}"
fi
exec "$bench" --config "${1:-configs/bench/quick.json}" "${@:2}"
