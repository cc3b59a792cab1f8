#!/usr/bin/env bash
# scripts/slurm/ for real: starts a single-node Slurm on this host (single_node_cluster.sh),
# submits a small CPU config as a 2-task job array with its dependent merge (scripts/slurm/submit.sh),
# waits for the merge (at most 3 minutes) and compares the merged rows with an unsharded run of
# the same config, the wall times aside. First, without Slurm: the GPUs per task are checked, and a
# GPU array task runs tilemix-bench over every GPU granted to it. Skips (exit 77, with the reason)
# where the daemons cannot run here: not root, Slurm not installable, or munged, slurmctld or
# slurmd not starting.
#   tests/scripts/slurm/test_job_array.sh TILEMIX_BENCH
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
bench=$(realpath "${1:?usage: $0 TILEMIX_BENCH}")
skip() { echo "SKIPPED: $*"; exit 77; }
# Without Slurm: a GPU count that is no positive integer is refused before anything is submitted,
# and a GPU task hands tilemix-bench --devices all (the GPUs Slurm shows it), a CPU task does not.
refused=$("$repo/scripts/slurm/submit.sh" --gpus-per-task 0 --bench "$bench" "$repo/configs/bench/quick.json" 2>&1) &&
  { echo "FAILED: --gpus-per-task 0 was accepted"; exit 1; }
[[ $refused == *"--gpus-per-task: expected a positive integer, got '0'"* ]] ||
  { echo "FAILED: --gpus-per-task 0: $refused"; exit 1; }
task_dir=$(mktemp -d /tmp/tilemix-task.XXXXXX)
trap 'rm -rf "$task_dir"' EXIT
printf '#!/usr/bin/env bash\necho "$@" >> %q/argv\n' "$task_dir" > "$task_dir/bench" && chmod +x "$task_dir/bench"
echo "$repo/configs/bench/quick.json" > "$task_dir/configs.txt"
for device in gpu cpu; do
  printf 'TILEMIX_BENCH=%q\nSHARDS=2\nDEVICE=%s\n' "$task_dir/bench" "$device" > "$task_dir/suite.env"
  SLURM_ARRAY_TASK_ID=2 bash "$repo/scripts/slurm/shard.sbatch" "$task_dir" > /dev/null
done
expected="--config $repo/configs/bench/quick.json --device gpu --devices all --shard 2/2 --out $task_dir/shards/quick.shard-2-of-2.json
--config $repo/configs/bench/quick.json --device cpu --shard 2/2 --out $task_dir/shards/quick.shard-2-of-2.json"
[[ $(cat "$task_dir/argv") == "$expected" ]] || { echo "FAILED: the array task ran: $(cat "$task_dir/argv")"; exit 1; }
rm -rf "$task_dir"
echo "slurm: --gpus-per-task checked; a GPU task runs tilemix-bench --devices all"
fail() { echo "FAILED: $*"; cluster_logs; for log in "$work"/run/logs/*; do echo "---- $log"; cat "$log"; done; exit 1; }

[[ $(id -u) -eq 0 ]] || skip "starting munged, slurmctld and slurmd needs root"
command -v python3 > /dev/null || skip "no python3 to compare the results"
# shellcheck source-path=SCRIPTDIR source=single_node_cluster.sh
source "$here/single_node_cluster.sh"
install_slurm || skip "$cluster_why"
work=$(mktemp -d /tmp/tilemix-slurm.XXXXXX)
trap 'stop_cluster; rm -rf "$work"' EXIT
start_cluster "$work/cluster" || skip "$cluster_why"
echo "slurm: munged, slurmctld and slurmd are up; node $(hostname -s) is idle in partition $cluster_partition"

# Three groups of unequal work (one per length), two layouts each: both shards get rows.
cat > "$work/array-test.json" << 'JSON'
{"name": "array-test",
 "defaults": {"batch": 1, "hq": 2, "hk": 1, "d": 64, "causal": true, "ratio": 0.5, "input": {"kind": "llm_like", "seed": 7}},
 "cases": [{"name": "band", "layout": "band"}, {"name": "sptrans", "layout": "sptrans"}],
 "axes": {"seq_len": [128, 256, 384]}}
JSON
"$bench" --device cpu --config "$work/array-test.json" --out "$work/unsharded.json" > /dev/null 2>&1 ||
  fail "the unsharded run failed"

submitted=$("$repo/scripts/slurm/submit.sh" --shards 2 --device cpu --partition "$cluster_partition" \
  --out "$work/run" --bench "$bench" "$work/array-test.json") || fail "submit.sh failed: $submitted"
echo "$submitted"
read -r array_id merge_id < "$work/run/jobs.txt"

job_state() { scontrol show job -o "$1" 2> /dev/null | grep -o 'JobState=[A-Z_]*' | sort -u | cut -d= -f2 | tr '\n' ' '; }
merge_done() { [[ $(job_state "$merge_id") =~ COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY ]]; }
wait_for 180 merge_done || fail "the merge job did not end within 3 minutes (array: $(job_state "$array_id"), merge: $(job_state "$merge_id"))"
echo "slurm: array job $array_id: $(job_state "$array_id"); merge job $merge_id: $(job_state "$merge_id")"
[[ $(job_state "$array_id") == "COMPLETED " ]] || fail "not every array task completed"
[[ $(job_state "$merge_id") == "COMPLETED " ]] || fail "the merge job did not complete"

python3 - "$work/unsharded.json" "$work/run/array-test.json" "$work/run/shards" << 'PY' || fail "the merged rows differ"
import json, sys, pathlib
unsharded, merged = (json.load(open(p)) for p in sys.argv[1:3])
strip = lambda rows: [{k: v for k, v in r.items() if k != "cpu_ms"} for r in rows]
assert strip(merged["rows"]) == strip(unsharded["rows"]), "merged rows differ from the unsharded run"
assert merged["provenance"]["config"] == unsharded["provenance"]["config"]
shards = merged["provenance"]["merge"]["shards"]
assert [s["shard"]["spec"] for s in shards] == ["1/2", "2/2"], shards
for k, s in enumerate(shards, 1):
    assert s["argv"][s["argv"].index("--shard") + 1] == f"{k}/2", s["argv"]
    assert s["shard"]["complete"] and s["shard"]["cases"], s["shard"]
    assert all(s.get(key) for key in ("host", "time_utc", "git_sha", "device")), s
sizes = [len(json.load(open(p))["rows"]) for p in sorted(pathlib.Path(sys.argv[3]).glob("*.json"))]
print(f"slurm: merged {len(merged['rows'])} rows of 2 array tasks ({' + '.join(map(str, sizes))}) = the unsharded run")
PY
