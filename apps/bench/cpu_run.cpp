#include "apps/bench/cpu_run.hpp"

#include <chrono>
#include <map>
#include <optional>

#include "apps/bench/progress.hpp"
#include "apps/common/prepared_case.hpp"
#include "apps/common/table_columns.hpp"
#include "core/metrics.hpp"
#include "core/routing/layout.hpp"
#include "reference/emulator.hpp"
#include "reference/exact.hpp"

namespace tilemix::app {

const char* default_bench_config_json() {
  return R"json({
  "name": "default",
  "description": "Small built-in sweep: every layout at 50% INT8 coverage, B=1, Hq=8, Hk=2, d=128, L=1024",
  "defaults": {"batch": 1, "seq_len": 1024, "hq": 8, "hk": 2, "d": 128, "causal": true, "ratio": 0.5,
               "input": {"kind": "llm_like", "seed": 1}},
  "cases": [{"name": "zero", "layout": "zero"}, {"name": "one", "layout": "one"}, {"name": "band", "layout": "band"}, {"name": "global", "layout": "global"},
            {"name": "rowrand", "layout": "rowrand"}, {"name": "align_sparse", "layout": "align_sparse"}, {"name": "bigbird", "layout": "bigbird"}, {"name": "sptrans", "layout": "sptrans"}]
})json";
}

namespace {

// What the inputs and the exact reference depend on: the shape and the input spec as resolved.
std::string inputs_key(const CaseSpec& spec) {
  const AttentionShape& s = spec.shape;
  const InputSpec& in = spec.input;
  return nlohmann::json{s.hq, s.hk, s.d, s.causal, s.softmax_scale, s.cu_seqlens_q, s.cu_seqlens_k,
                        static_cast<int>(in.kind), in.seed, in.stddev, in.outlier_channels, in.outlier_scale,
                        in.sink_scale, in.local_bias, in.k_channel_bias, in.q_path, in.k_path, in.v_path}
      .dump();
}

// The exact reference and the compared runs of the last inputs: consecutive cases with the same
// shape and inputs (an axis over the ratio, say) compute them once.
struct SharedRuns {
  std::string inputs;
  std::optional<ExactResult> reference;
  std::map<std::string, std::vector<uint16_t>> compared;  // by comparison_key
};

// The routing of the run a comparison names on the CPU: the comparison's own for tilemix, all
// FP16 for flash_fp16 (whose numerics the emulator's zero layout models, as in the model sweep).
RoutingRequest compared_routing(const CaseSpec& spec, const Comparison& c) {
  RoutingRequest request = c.routing;
  if (c.method == Method::flash_fp16) {
    request = RoutingRequest{};
    request.layout = LayoutKind::zero;
  }
  request.geometry = spec.routing.geometry;
  return request;
}

// What the stand-in's output depends on: nothing but the inputs for torch_like's.
std::string comparison_key(const CaseSpec& spec, const Comparison& c) {
  if (c.method == Method::torch_like) return to_string(c.method);
  const RoutingRequest r = compared_routing(spec, c);
  return nlohmann::json{to_string(c.method), to_string(r.layout), r.ratio, r.seed, r.group.value_or(0),
                        r.geometry.block_m, r.geometry.block_n, to_string(c.numerics.state),
                        to_string(c.numerics.accum), to_string(c.numerics.mode), c.numerics.smooth_k,
                        to_string(c.numerics.pv)}
      .dump();
}

// The CPU stand-in of a comparison's run on `pc`'s inputs: the emulator for tilemix and
// flash_fp16, the exact output rounded once to FP16 for torch_like (the random model's CPU
// reference too).
ComparedDeviation compare(const PreparedCase& pc, const Comparison& c, const EmulatorResult& emu,
                          SharedRuns& shared) {
  const std::string key = comparison_key(pc.spec, c);
  auto it = shared.compared.find(key);
  if (it == shared.compared.end()) {
    std::vector<uint16_t> o;
    if (c.method == Method::torch_like) {
      o = rounded_to_fp16(*shared.reference);
    } else {
      const RoutingPlan plan = make_plan(pc.spec.shape, compared_routing(pc.spec, c), pc.inputs, pc.spec.where);
      o = emulate_attention(pc.spec.shape, pc.inputs, plan, {c.numerics, KeyOrder::ascending}).o;
    }
    it = shared.compared.emplace(key, std::move(o)).first;
  }
  const char* stand_in = c.method == Method::torch_like   ? " (cpu: exact, rounded to fp16)"
                         : c.method == Method::flash_fp16 ? " (cpu: emulator, all fp16)"
                                                          : "";
  return {c.label + stand_in, deviation(half_to_double(emu.o), half_to_double(it->second))};
}

}  // namespace

ResultTable run_emulator_bench(const ExperimentConfig& config, const std::string& dump_dir) {
  const TableLayout<EmulatorRow>& layout = emulator_table(compares(config));
  ResultTable table = layout.empty_table();
  Progress progress(static_cast<int>(config.cases.size()));
  SharedRuns shared;
  int index = 0;
  for (const CaseSpec& spec : config.cases) {
    progress.step(++index, spec.name);
    const PrefillWork work{true, true, true, 0};
    run_case_within_host_memory(spec, prefill_case_bytes(spec, spec.routing.geometry, work), [&] {
      const PreparedCase pc = prepare_case(spec, spec.routing.geometry);
      if (inputs_key(spec) != shared.inputs) shared = SharedRuns{inputs_key(spec), std::nullopt, {}};
      const auto t0 = std::chrono::steady_clock::now();
      const EmulatorResult emu =
          emulate_attention(spec.shape, pc.inputs, pc.plan, {spec.numerics, KeyOrder::ascending});
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (!shared.reference) shared.reference = exact_attention(spec.shape, pc.inputs);
      const ExactResult& ref = *shared.reference;
      const Deviation dev = deviation(half_to_double(emu.o), ref.o);
      const HeavyHitterExposure hh =
          heavy_hitter_exposure(spec.shape, pc.inputs, pc.plan, {0.05, 0.10, 0.20, 0.30});
      if (!dump_dir.empty()) dump_case(dump_dir, pc, emu, ref);
      EmulatorRow row{{spec, "emulator", true, &pc.plan}, ms, dev, hh};
      if (spec.compare_with) row.compared = compare(pc, *spec.compare_with, emu, shared);
      table.add_row(layout.cells(row));
    });
  }
  progress.finish();
  return table;
}

}  // namespace tilemix::app
