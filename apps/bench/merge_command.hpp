#pragma once
// `tilemix-bench merge OUT IN...`: joins the JSON outputs of a sweep's shards (--shard K/N) into
// OUT, as the unsharded run would have written it (apps/bench/shard_merge.hpp).
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace tilemix::app {

struct MergeOptions {
  std::string out;
  std::vector<std::string> inputs;
  bool partial = false;
};

CLI::App* add_merge_command(CLI::App& cli, MergeOptions& opts);
int run_merge_command(const MergeOptions& opts, const std::vector<std::string>& argv);

}  // namespace tilemix::app
