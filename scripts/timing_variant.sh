#!/usr/bin/env bash
# Builds a timing-only variant of tilemix-bench: the named kernel sources recompiled with extra
# defines (experiment switches such as -DTILEMIX_BOUND_NO_SOFTMAX), the kernels archive copied with
# those objects replaced, the app relinked, and the result copied to .device-bin/tilemix-bench-NAME.
# The build tree is left as it was. (Compiling an object by hand inside the build tree does not
# work: ninja finds its dependency record out of date and quietly rebuilds it without the switch.)
# Usage: scripts/timing_variant.sh NAME "-DSWITCH ..." [SOURCE...]
#   SOURCE: paths under kernels/ (default: the sm90 decode kernels, decode/mainloop_wgmma*.cu).
#   Needs a configured CUDA build in $BUILD_DIR (default build/).
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:?usage: $0 NAME DEFINES [SOURCE...]}
defines=${2:?usage: $0 NAME DEFINES [SOURCE...]}
shift 2
sources=("$@")
if ((${#sources[@]} == 0)); then
  for path in kernels/decode/mainloop_wgmma*.cu; do sources+=("${path#kernels/}"); done
fi
build=${BUILD_DIR:-build}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ninja -C "$build" apps/tilemix-bench >/dev/null
for src in "${sources[@]}"; do
  cmd=$(ninja -C "$build" -t commands kernels/libtilemix_kernels.a | grep -F "/kernels/$src -o" | head -1)
  [[ -n $cmd ]] || { echo "no compile command for kernels/$src" >&2; exit 1; }
  object="$work/$(basename "$src").o"  # the archive member's name
  cmd=$(sed -E "s# -o [^ ]+\.o\$# -o $object#; s# -MD -MT [^ ]+ -MF [^ ]+##" <<<"$cmd")
  (cd "$build" && eval "${cmd/nvcc /nvcc $defines }")
done
cp "$build"/kernels/libtilemix_kernels.a "$work"/kernels.a
ar r "$work"/kernels.a "$work"/*.o
link=$(ninja -C "$build" -t commands apps/tilemix-bench | tail -1)
link=${link//kernels\/libtilemix_kernels.a/$work\/kernels.a}
link=${link//-o apps\/tilemix-bench /-o $work\/tilemix-bench }
(cd "$build" && eval "${link#: && }")
mkdir -p .device-bin
cp "$work"/tilemix-bench .device-bin/tilemix-bench-"$name"
echo ".device-bin/tilemix-bench-$name ($defines)"
