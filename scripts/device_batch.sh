#!/usr/bin/env bash
# One check-and-bench batch on a GPU machine, in two halves:
#   scripts/device_batch.sh stage   (here) builds with CUDA and copies the binaries and the
#                                   libraries the GPU machine may lack into .device-bin/,
#                                   the binaries xz-compressed (a call carries 64 MiB at most)
#   scripts/device_batch.sh stage-ab REV   (here) the same, plus REV's tilemix-bench built in a
#                                   worktree (build-ab/) as .device-bin/tilemix-bench-base
#   scripts/device_batch.sh stage-build NAME   (here) adds the current build's tilemix-bench as
#                                   .device-bin/tilemix-bench-NAME: a further side of the A/B
#                                   (NAME: letters, digits, _, no digit last; then
#                                   AB_BUILDS="new NAME ...")
#   scripts/device_batch.sh run [STEP...]   (on the GPU machine, from the repository root)
#                                   unpacks the binaries, runs the steps and leaves logs and JSON
#                                   in $OUT (default out/)
# Steps: unpack info gpu-tests check sanitizer sanitizer-decode bench ab profile pack (default: all
# but unpack, bench, ab, profile and pack; every run unpacks the binaries first, and `unpack` alone
# does only that, for commands of one's own after it: a call carries .device-bin anew, compressed).
# CHECK_CONFIGS, BENCH_CONFIGS, AB_CONFIGS and PROFILE_CONFIGS name the configs to run: NAME stands
# for configs/check/NAME.json, configs/bench/NAME.json, configs/bench/ab/NAME.json and
# configs/bench/profile/NAME.json. BENCH_ARGS are further tilemix-bench options for `bench` (such as
# --deviation, or --shard K/N with BENCH_SUFFIX=-K: the files are bench-NAME$BENCH_SUFFIX.*). `ab`
# runs each AB_CONFIGS config with the base and each build of AB_BUILDS (default `new`, the current
# tilemix-bench) in turn, AB_REPS (default 2) times each, in one process per run: a same-run A/B
# (compare with scripts/ab_compare.py). `profile` runs scripts/profile_prefill.sh on each
# PROFILE_CONFIGS config (PROFILE_KERNELS: its kernel regex) into $OUT/ncu-NAME/. `pack` moves
# everything in $OUT into one results.tgz (the device returns a few files per call). A failing step
# is reported and the next one runs.
set -euo pipefail
cd "$(dirname "$0")/.."
stage_dir=.device-bin

# What a call carries, the working tree (tracked files and untracked ones git does not ignore)
# with the staged binaries, against the 64 MiB it may: a call over it is refused after the wait
# for a machine, so it is told here.
report_size() {
  local tree staged limit=$((64 * 1024 * 1024))
  tree=$(git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
  staged=$(du -sb "$stage_dir" | cut -f1)
  echo "a call carries $(((tree + staged) / 1048576)) MiB of 64: the working tree $((tree / 1048576))," \
       "$stage_dir $((staged / 1048576))" >&2
  if ((tree + staged > limit)); then
    echo "over the limit: leave a binary out of $stage_dir (tilemix-check, a side of the A/B)" >&2
  fi
}

stage() {
  BUILD_DIR=${BUILD_DIR:-build} scripts/setup.sh -DTILEMIX_CUDA=ON >&2
  local b=${BUILD_DIR:-build}
  rm -rf "$stage_dir" && mkdir -p "$stage_dir"
  cp "$b"/apps/tilemix-check "$b"/apps/tilemix-bench "$b"/tests/kernels/tilemix_gpu_tests "$stage_dir"/
  cp "$(g++ -print-file-name=libgomp.so.1)" "$stage_dir"/
  xz -9 -T2 "$stage_dir"/tilemix*
  report_size
}

stage_build() {
  local name=${1:?usage: $0 stage-build NAME}
  # The run number follows the name in the A/B files (ab-CONFIG-NAME1.json): no digit at its end.
  [[ $name =~ ^[A-Za-z]([A-Za-z0-9_]*[A-Za-z_])?$ && $name != base ]] ||
    { echo "NAME: letters, digits and _, a letter or _ last, not base (got $name)" >&2; exit 2; }
  xz -9 -T2 -c "${BUILD_DIR:-build}"/apps/tilemix-bench > "$stage_dir"/tilemix-bench-"$name".xz
  report_size
}

# The staged binaries, decompressed where they arrived compressed (xz, or Python's lzma where the
# machine has no xz).
unpack() {
  local f
  for f in "$stage_dir"/*.xz; do
    [[ -e $f ]] || continue
    if command -v xz > /dev/null; then
      xz -d -f "$f"
    else
      python3 -c "import lzma, sys; open(sys.argv[1][:-3], 'wb').write(lzma.open(sys.argv[1]).read())" "$f" && rm "$f"
    fi
  done
  chmod +x "$stage_dir"/tilemix* 2> /dev/null || true
}

stage_ab() {
  local rev=${1:?usage: $0 stage-ab REV}
  stage
  local tree=build-ab/src
  git worktree remove --force "$tree" 2>/dev/null || rm -rf "$tree"
  git worktree add --detach "$tree" "$rev" >&2
  (cd "$tree" && BUILD_DIR=../build scripts/setup.sh -DTILEMIX_CUDA=ON >&2)
  xz -9 -T2 -c build-ab/build/apps/tilemix-bench > "$stage_dir"/tilemix-bench-base.xz
  git rev-parse --short "$rev" > "$stage_dir"/base-rev
  git worktree remove --force "$tree"  # the build folder stays for the next stage-ab
  report_size
}

run_steps() {
  local out=${OUT:-out}
  mkdir -p "$out"
  unpack
  export LD_LIBRARY_PATH="$PWD/$stage_dir:/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:${LD_LIBRARY_PATH:-}"
  local steps=("$@")
  ((${#steps[@]})) || steps=(info gpu-tests check sanitizer sanitizer-decode)
  for step in "${steps[@]}"; do
    echo "=== $step"
    case "$step" in
      unpack) ;;
      info)
        nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
        "$stage_dir"/tilemix-bench --list ;;
      gpu-tests)
        "$stage_dir"/tilemix_gpu_tests 2>&1 | tee "$out"/gpu-tests.log | tail -25 || true ;;
      check)
        for name in ${CHECK_CONFIGS:-gpu}; do
          "$stage_dir"/tilemix-check --config configs/check/"$name".json --device gpu --fresh-inputs \
            --json "$out"/check-"$name".json > "$out"/check-"$name".log 2>&1 || true
          tail -1 "$out"/check-"$name".log; grep -E "FAIL" "$out"/check-"$name".log | head -20 || true
        done ;;
      sanitizer)
        : > "$out"/sanitizer.log
        for tool in memcheck racecheck initcheck synccheck; do
          echo "### compute-sanitizer --tool $tool tilemix-check --config configs/check/sanitizer.json --device gpu" \
            >> "$out"/sanitizer.log
          /usr/local/cuda/bin/compute-sanitizer --tool "$tool" --error-exitcode 9 \
            "$stage_dir"/tilemix-check --config configs/check/sanitizer.json --device gpu >> "$out"/sanitizer.log 2>&1 \
            && echo "$tool: exit 0" || echo "$tool: exit $?"
        done
        grep -E "SUMMARY|passed," "$out"/sanitizer.log ;;
      sanitizer-decode)
        : > "$out"/sanitizer-decode.log
        for tool in memcheck racecheck initcheck synccheck; do
          echo "### compute-sanitizer --tool $tool tilemix_gpu_tests \"[decode]\"" >> "$out"/sanitizer-decode.log
          /usr/local/cuda/bin/compute-sanitizer --tool "$tool" --error-exitcode 9 \
            "$stage_dir"/tilemix_gpu_tests "[decode]" >> "$out"/sanitizer-decode.log 2>&1 \
            && echo "$tool: exit 0" || echo "$tool: exit $?"
        done
        grep -E "SUMMARY|passed" "$out"/sanitizer-decode.log ;;
      ab)
        for name in ${AB_CONFIGS:?AB_CONFIGS names the configs}; do
          for i in $(seq 1 "${AB_REPS:-2}"); do
            for side in base ${AB_BUILDS:-new}; do
              local bin="$stage_dir"/tilemix-bench-"$side"
              [[ $side == new ]] && bin="$stage_dir"/tilemix-bench
              local rc=0
              "$bin" --config configs/bench/ab/"$name".json --device gpu --format md \
                --out "$out"/ab-"$name"-"$side$i".json > "$out"/ab-"$name"-"$side$i".md 2>"$out"/ab-"$name"-"$side$i".err \
                || rc=$?
              echo "ab $name $side$i: exit $rc"
            done
          done
        done ;;
      profile)
        for name in ${PROFILE_CONFIGS:?PROFILE_CONFIGS names the configs}; do
          OUT="$out"/ncu-"$name" scripts/profile_prefill.sh configs/bench/profile/"$name".json \
            ${PROFILE_KERNELS:+"$PROFILE_KERNELS"} || echo "profile $name: exit $?"
        done ;;
      pack)
        local packed; packed=$(mktemp --suffix=.tgz)
        tar czf "$packed" -C "$out" . && rm -rf "${out:?}"/* && mv "$packed" "$out"/results.tgz
        echo "packed into $out/results.tgz" ;;
      bench)
        for name in ${BENCH_CONFIGS:-quick}; do
          local rc=0 file="$out"/bench-"$name"${BENCH_SUFFIX:-}
          # shellcheck disable=SC2086  # BENCH_ARGS: options, split at spaces
          "$stage_dir"/tilemix-bench --config configs/bench/"$name".json --device gpu ${BENCH_ARGS:-} --format md \
            --out "$file".json > "$file".md 2>"$file".err || rc=$?
          echo "$name: exit $rc"; tail -2 "$file".err
        done ;;
      *) echo "unknown step $step" >&2; exit 2 ;;
    esac
  done
}

case "${1:-}" in
  stage) stage ;;
  stage-ab) shift; stage_ab "$@" ;;
  stage-build) shift; stage_build "$@" ;;
  run) shift; run_steps "$@" ;;
  *) echo "usage: $0 stage | stage-ab REV | stage-build NAME | run [unpack info gpu-tests check sanitizer sanitizer-decode bench ab profile pack]" >&2; exit 2 ;;
esac
