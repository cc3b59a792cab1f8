#include "apps/bench/plan_command.hpp"

#include <fmt/core.h>

#include "core/error.hpp"
#include "core/routing/plan.hpp"
#include "core/routing/render.hpp"

namespace tilemix::app {

CLI::App* add_plan_command(CLI::App& cli, PlanOptions& o) {
  CLI::App* plan = cli.add_subcommand("plan", "print the routing plan (g, Tmask, parameters, coverage, map)");
  plan->add_option("--lq", o.lq, "query length")->required();
  plan->add_option("--lk", o.lk, "key length")->required();
  plan->add_option("--layout", o.layout, "routing layout (see --list)")->required();
  plan->add_option("--ratio", o.ratio, "requested INT8 group coverage in [0, 1]");
  plan->add_flag("--causal", o.causal, "bottom-right causal mask");
  plan->add_option("--block-m", o.block_m, "query rows per compute tile");
  plan->add_option("--block-n", o.block_n, "keys per compute tile");
  plan->add_option("--group", o.group, "key tiles per routing group g (default: auto)");
  plan->add_option("--seed", o.seed, "seed of the random layouts");
  plan->add_option("--words-file", o.words_file, "words for --layout file (JSON or .npy)");
  plan->add_flag("--json", o.json, "print a JSON object instead of text");
  return plan;
}

int run_plan_command(const PlanOptions& o) {
  const auto layout = parse_layout(o.layout);
  if (!layout) throw InputError("--layout", "unknown layout '" + o.layout + "' (see tilemix-bench --list)");
  if (o.lq < 0) throw InputError("--lq", "must be >= 0");
  if (o.lk < 0) throw InputError("--lk", "must be >= 0");
  AttentionShape shape;
  shape.hq = shape.hk = 1;
  shape.d = 128;
  shape.causal = o.causal;
  shape.cu_seqlens_q = {0, o.lq};
  shape.cu_seqlens_k = {0, o.lk};
  validate(shape);
  RoutingRequest req;
  req.layout = *layout;
  req.ratio = o.ratio;
  req.seed = o.seed;
  if (o.group != 0) req.group = o.group;
  req.geometry = {o.block_m, o.block_n};
  req.words_file = o.words_file;
  const RoutingPlan plan = make_plan(shape, req, "");
  if (o.json) {
    fmt::print("{}\n", plan_json(plan).dump(2));
  } else {
    fmt::print("{}\n{}", plan_summary(plan), render_map(plan.templates.at(0)));
  }
  return 0;
}

}  // namespace tilemix::app
