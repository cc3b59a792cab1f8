#!/usr/bin/env bash
# Runs a suite of tilemix-bench configs as a Slurm job array: one array task per shard
# (tilemix-bench --shard K/N, every config of the suite in each task), then a merge job that waits
# for the whole array (--dependency=afterok) and joins each config's shards with tilemix-bench
# merge. Prints the two job ids. docs/usage.md#sweeps-on-a-slurm-cluster describes the run folder.
#
#   scripts/slurm/submit.sh [--shards N] [--device gpu|cpu] [--gpus-per-task G] [--partition NAME]
#                           [--out DIR] [--bench PATH] [--sbatch-arg ARG]... CONFIG...
#
#   --shards N        slices of every config, one array task each (default 4)
#   --device gpu|cpu  where tilemix-bench runs (default gpu: each array task asks for G GPUs)
#   --gpus-per-task G GPUs of one node per array task (--gres=gpu:G, default 1); the task shards
#                     its slice over the GPUs Slurm grants it (tilemix-bench --devices all)
#   --partition NAME  the partition of both jobs (default: the cluster's default partition)
#   --out DIR         the run folder (default out/slurm-<UTC date and time>)
#   --bench PATH      tilemix-bench, reachable from the nodes (default $BUILD_DIR/apps/tilemix-bench)
#   --sbatch-arg ARG  one more sbatch option for the array tasks (repeatable: --time=2:00:00, --account=...)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" >&2; exit "${1:-2}"; }

shards=4 device=gpu gpus=1 partition="" out="" bench="${BUILD_DIR:-$repo/build}/apps/tilemix-bench"
task_args=() configs=()
while (($#)); do
  case $1 in
    --shards) shards=${2:?--shards needs N}; shift 2 ;;
    --device) device=${2:?--device needs gpu or cpu}; shift 2 ;;
    --gpus-per-task) gpus=${2:?--gpus-per-task needs G}; shift 2 ;;
    --partition) partition=${2:?--partition needs a name}; shift 2 ;;
    --out) out=${2:?--out needs a folder}; shift 2 ;;
    --bench) bench=${2:?--bench needs a path}; shift 2 ;;
    --sbatch-arg) task_args+=("${2:?--sbatch-arg needs an option}"); shift 2 ;;
    -h | --help) usage 0 ;;
    -*) echo "submit: unknown option $1" >&2; usage ;;
    *) configs+=("$1"); shift ;;
  esac
done
fail() { echo "submit: $*" >&2; exit 2; }
((${#configs[@]})) || fail "no configs given (for the paper suite: configs/paper/*.json)"
[[ $shards =~ ^[1-9][0-9]*$ ]] || fail "--shards: expected a positive integer, got '$shards'"
[[ $device == gpu || $device == cpu ]] || fail "--device: expected gpu or cpu, got '$device'"
[[ $gpus =~ ^[1-9][0-9]*$ ]] || fail "--gpus-per-task: expected a positive integer, got '$gpus'"
[[ -x $bench ]] || fail "--bench: $bench is not an executable (build first: scripts/setup.sh)"
command -v sbatch > /dev/null || fail "sbatch not found: run this on a Slurm login node"

out=${out:-out/slurm-$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$out/shards" "$out/logs"
out=$(cd "$out" && pwd)
# Every config by absolute path; the outputs are named after the configs, so names must differ.
: > "$out/configs.txt"
declare -A seen=()
for config in "${configs[@]}"; do
  [[ -f $config ]] || fail "$config: no such config file"
  name=$(basename "$config" .json)
  [[ -z ${seen[$name]:-} ]] || fail "$config and ${seen[$name]} would both write $name.json"
  seen[$name]=$config
  realpath "$config" >> "$out/configs.txt"
done
# What the batch scripts read: sbatch copies them to the node's spool, away from the repository.
printf 'TILEMIX_BENCH=%q\nSHARDS=%q\nDEVICE=%q\n' "$(realpath "$bench")" "$shards" "$device" > "$out/suite.env"

common=(--parsable)
[[ -n $partition ]] && common+=(--partition="$partition")
[[ $device == gpu ]] && task_args=(--gres="gpu:$gpus" "${task_args[@]}")
array_id=$(sbatch "${common[@]}" "${task_args[@]}" --job-name=tilemix-shards --array="1-$shards" \
  --output="$out/logs/shard-%a.out" "$repo/scripts/slurm/shard.sbatch" "$out")
array_id=${array_id%%;*}  # "id;cluster" on a federation
merge_id=$(sbatch "${common[@]}" --job-name=tilemix-merge --dependency="afterok:$array_id" \
  --output="$out/logs/merge.out" "$repo/scripts/slurm/merge.sbatch" "$out")
merge_id=${merge_id%%;*}
echo "submit: ${#configs[@]} config(s) x $shards shards ($device) -> $out"
echo "submit: array job $array_id, merge job $merge_id (after the whole array succeeds)"
echo "$array_id $merge_id" > "$out/jobs.txt"
