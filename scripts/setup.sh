#!/usr/bin/env bash
# Installs the Debian packages TileMix builds with (when missing) and builds it into build/.
# Usage: scripts/setup.sh [extra cmake args...]   (BUILD_DIR overrides build/)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ libcli11-dev libfmt-dev nlohmann-json3-dev libeigen3-dev catch2 python3 python3-matplotlib
          clang libclang-rt-dev libomp-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}"
fi

build_dir=${BUILD_DIR:-build}
cuda_args=()
if [[ -x /usr/local/cuda/bin/nvcc ]]; then
  cuda_args=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
fi
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "${cuda_args[@]}" "$@"
cmake --build "$build_dir" -j "$(nproc)"
