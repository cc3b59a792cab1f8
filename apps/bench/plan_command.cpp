#include "apps/bench/plan_command.hpp"

#include <fmt/core.h>

#include "core/config/experiment.hpp"
#include "core/error.hpp"
#include "core/inputs/npy.hpp"
#include "core/report/table.hpp"
#include "core/routing/plan.hpp"
#include "core/routing/render.hpp"

namespace tilemix::app {
namespace {

bool has_inputs(const PlanOptions& o) { return !o.input_config.empty() || !o.q_file.empty() || !o.k_file.empty(); }

// Q and K of `shape` from the options; V is not read (routing looks at Q and K only).
AttentionInputs plan_inputs(const AttentionShape& shape, const PlanOptions& o) {
  if (!o.input_config.empty()) {
    if (!o.q_file.empty() || !o.k_file.empty()) {
      throw InputError("--input", "takes Q and K from the config's input; leave out --q and --k");
    }
    const ExperimentConfig config = load_config(o.input_config);
    const CaseSpec& first = config.cases.front();
    return make_inputs(shape, first.input, first.where + ".input");
  }
  if (o.q_file.empty()) throw InputError("--q", "is required with --k (a .npy file of shape [lq, hq, d])");
  if (o.k_file.empty()) throw InputError("--k", "is required with --q (a .npy file of shape [lk, hk, d])");
  AttentionInputs in;
  in.q = read_npy_as_half(o.q_file, {shape.total_q(), shape.hq, shape.d}, "[lq, hq, d]");
  in.k = read_npy_as_half(o.k_file, {shape.total_k(), shape.hk, shape.d}, "[lk, hk, d]");
  check_finite(in.q, o.q_file);
  check_finite(in.k, o.k_file);
  return in;
}

}  // namespace

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
  plan->add_option("--hq", o.hq, "query heads (of the inputs of --layout adaptive; default 1)");
  plan->add_option("--hk", o.hk, "KV heads: one word per KV head and query tile (default 1)");
  plan->add_option("--d", o.d, "head dimension (of the inputs of --layout adaptive; default 128)");
  plan->add_option("--input", o.input_config,
                   "--layout adaptive: a config whose first case's `input` object makes Q and K");
  plan->add_option("--q", o.q_file, "--layout adaptive: Q as .npy [lq, hq, d] (FP16 or FP32)");
  plan->add_option("--k", o.k_file, "--layout adaptive: K as .npy [lk, hk, d] (FP16 or FP32)");
  plan->add_option("--dump", o.dump_file, "write every KV head's words as a words file (JSON)");
  plan->add_flag("--json", o.json, "print a JSON object instead of text");
  return plan;
}

int run_plan_command(const PlanOptions& o) {
  const auto layout = parse_enum(kLayoutNames, o.layout);
  if (!layout) throw InputError("--layout", "unknown layout '" + o.layout + "' (see tilemix-bench --list)");
  if (o.lq < 0) throw InputError("--lq", "must be >= 0");
  if (o.lk < 0) throw InputError("--lk", "must be >= 0");
  if (o.hq < 1) throw InputError("--hq", "must be >= 1");
  if (o.hk < 1 || o.hq % o.hk != 0) throw InputError("--hk", "must be >= 1 and divide --hq");
  if (!supported_head_dim(o.d)) throw InputError("--d", "must be 64 or 128");
  const bool from_data = routes_from_data(*layout);
  if (from_data && !has_inputs(o)) {
    throw InputError("--input", "layout " + o.layout + " routes from Q and K: give --input CONFIG (its first "
                                "case's `input` object) or --q and --k (.npy files)");
  }
  if (!from_data && has_inputs(o)) {
    throw InputError(o.input_config.empty() ? "--q/--k" : "--input",
                     "is only used with a layout that routes from the data (adaptive), not " + o.layout);
  }
  AttentionShape shape;
  shape.hq = o.hq;
  shape.hk = o.hk;
  shape.d = o.d;
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
  const RoutingPlan plan = from_data ? make_plan(shape, req, plan_inputs(shape, o), "") : make_plan(shape, req, "");
  if (!o.dump_file.empty()) {
    const nlohmann::json words{{"layout", to_string(plan.request.layout)},
                               {"ratio", plan.request.ratio},
                               {"words", words_json(plan)}};
    write_text_file(o.dump_file, words.dump(2) + "\n");
  }
  if (o.json) {
    fmt::print("{}\n", plan_json(plan).dump(2));
  } else {
    fmt::print("{}\n{}", plan_summary(plan), render_map(plan.templates.at(0)));
  }
  return 0;
}

}  // namespace tilemix::app
