#include "apps/bench/merge_command.hpp"

#include <fmt/core.h>
#include <fmt/format.h>

#include "apps/bench/shard_merge.hpp"
#include "apps/common/app_main.hpp"
#include "core/report/table.hpp"

namespace tilemix::app {

CLI::App* add_merge_command(CLI::App& cli, MergeOptions& o) {
  CLI::App* merge = cli.add_subcommand(
      "merge", "join the JSON outputs of a sweep's shards (--shard K/N) into OUT (.json, .csv or .md)");
  merge->add_option("OUT", o.out, "the merged output; format from the extension (.md, .csv, else JSON)")->required();
  merge->add_option("IN", o.inputs, "the shards' JSON outputs")->required();
  merge->add_flag("--partial", o.partial,
                  "join what is given when shards are missing or did not finish (flagged in the provenance)");
  return merge;
}

int run_merge_command(const MergeOptions& o, const std::vector<std::string>& argv) {
  std::vector<ShardOutput> shards;
  for (const std::string& path : o.inputs) shards.push_back(read_shard_output(path));
  const MergedOutput merged = merge_shards(shards, o.partial, argv);
  const nlohmann::json& rows = merged.document.at("rows");
  const std::string ext = o.out.substr(o.out.find_last_of('.') + 1);
  if (ext == "csv") {
    write_text_file(o.out, render_csv(bench_table_of(rows, o.out)));
  } else if (ext == "md") {
    write_text_file(o.out, render_markdown(bench_table_of(rows, o.out)));
  } else {
    write_text_file(o.out, merged.document.dump(2) + "\n");
  }
  const nlohmann::json& provenance = merged.document.at("provenance");
  fmt::print(stderr, "tilemix-bench merge: {} rows of '{}' from {} of {} shards -> {}\n", rows.size(),
             provenance.at("config").value("name", ""), shards.size(), provenance.at("merge").at("shard_count").dump(),
             o.out);
  if (!merged.missing.empty()) {
    fmt::print(stderr, "tilemix-bench merge: warning: partial merge, missing shards: {}\n",
               fmt::join(merged.missing, ", "));
  }
  if (!merged.unfinished.empty()) {
    fmt::print(stderr, "tilemix-bench merge: warning: partial merge: {} did not finish\n",
               fmt::join(merged.unfinished, ", "));
  }
  return kExitOk;
}

}  // namespace tilemix::app
