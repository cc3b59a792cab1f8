#pragma once
// `tilemix-bench plan`: prints the routing plan of one (Lq, Lk) geometry.
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
  bool json = false;
};

CLI::App* add_plan_command(CLI::App& cli, PlanOptions& opts);
int run_plan_command(const PlanOptions& opts);

}  // namespace tilemix::app
