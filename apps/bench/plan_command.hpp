#pragma once
// `tilemix-bench plan`: prints the routing plan of one (Lq, Lk) geometry. Layout `adaptive` routes
// from Q and K, given as a config's `input` object (--input) or as .npy files (--q, --k).
#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

namespace tilemix::app {

struct PlanOptions {
  int64_t lq = 0, lk = 0;
  std::string layout = "zero";
  double ratio = 0.0;
  bool causal = false;
  int block_m = 128, block_n = 64;
  int group = 0;  // 0 = auto
  uint64_t seed = 0;
  std::string words_file;
  int hq = 1, hk = 1, d = 128;  // heads and head dimension of the plan's problem (and of its inputs)
  std::string input_config;     // a config whose first case's `input` object makes Q and K
  std::string q_file, k_file;   // or .npy files [lq, hq, d] and [lk, hk, d]
  std::string dump_file;        // writes every KV head's words as a words file
  bool json = false;
};

CLI::App* add_plan_command(CLI::App& cli, PlanOptions& opts);
int run_plan_command(const PlanOptions& opts);

}  // namespace tilemix::app
