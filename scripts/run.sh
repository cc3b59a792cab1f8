#!/usr/bin/env bash
# Fresh machine -> the main job: installs what is missing, builds, and runs tilemix-bench on the
# given config (default configs/bench/quick.json). Without a GPU the bench says so and runs the
# CPU emulator on the config's cases instead.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >&2
build_dir=${BUILD_DIR:-build}
config=${1:-configs/bench/quick.json}
shift || true
exec "$build_dir"/apps/tilemix-bench --config "$config" "$@"
