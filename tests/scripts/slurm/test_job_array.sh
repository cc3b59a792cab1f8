#!/usr/bin/env bash
# scripts/slurm/ for real: starts a single-node Slurm on this host (single_node_cluster.sh),
# submits a small CPU config as a 2-task job array with its dependent merge (scripts/slurm/submit.sh),
# waits for the merge (at most 3 minutes) and compares the merged rows with an unsharded run of
# the same config, the wall times aside. Skips (exit 77, with the reason) where the daemons cannot
# run here: not root, Slurm not installable, or munged, slurmctld or slurmd not starting.
#   tests/scripts/slurm/test_job_array.sh TILEMIX_BENCH
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
bench=$(realpath "${1:?usage: $0 TILEMIX_BENCH}")
skip() { echo "SKIPPED: $*"; exit 77; }
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
