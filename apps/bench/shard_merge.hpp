#pragma once
// tilemix-bench merge OUT IN...: joins the JSON outputs of the shards of one sweep
// (tilemix-bench --shard K/N, sweep_shard.hpp) into the output the unsharded run would have
// written: its rows in the unsharded order, the sweep's config, and each shard's provenance.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/report/table.hpp"

namespace tilemix::app {

// One shard's output as written with --out FILE.json or --format json.
struct ShardOutput {
  std::string path;
  nlohmann::json provenance;  // holds "shard"
  nlohmann::json rows;
};

// Reads a shard's output; an InputError names the file when it cannot be read, is not JSON or
// was not written with --shard.
ShardOutput read_shard_output(const std::string& path);

struct MergedOutput {
  nlohmann::json document;              // {"provenance", "rows"}: what a .json OUT holds
  std::vector<std::string> missing;     // shards not given ("2/4"): only with allow_partial
  std::vector<std::string> unfinished;  // files of shards that did not finish: only with allow_partial
};

// Joins the shards. InputErrors name the files: shards of different sweeps (config, run options
// or N), the same shard or case in two files, a row of a case its file does not hold, rows with
// other columns, and, unless `allow_partial`, missing shards and shards that did not finish.
// `argv` is the merge command's, for the provenance.
MergedOutput merge_shards(const std::vector<ShardOutput>& shards, bool allow_partial,
                          const std::vector<std::string>& argv);

// The rows as the tilemix-bench table with the same columns (order, headers, precision), for CSV
// and Markdown; an InputError names `out_path` when no table has them.
ResultTable bench_table_of(const nlohmann::json& rows, const std::string& out_path);

}  // namespace tilemix::app
