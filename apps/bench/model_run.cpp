#include "apps/bench/model_run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "apps/bench/progress.hpp"
#include "apps/bench/sweep.hpp"
#include "apps/common/gpu_problem.hpp"
#include "apps/common/prepared_case.hpp"
#include "apps/common/table_columns.hpp"
#include "reference/emulator.hpp"
#include "reference/exact.hpp"
#include "reference/random_model.hpp"
#include "tilemix/attention.hpp"
#include "tilemix/baselines.hpp"
#include "tilemix/gpu.hpp"

namespace tilemix::app {
namespace {

RoutingPlan plan_for(const CaseSpec& spec, const TileGeometry& geometry, LayoutKind layout) {
  RoutingRequest request = spec.routing;
  request.layout = layout;
  if (layout == LayoutKind::zero) request.ratio = 0.0;
  request.geometry = geometry;
  return make_plan(spec.shape, request, spec.where);
}

// The plan of `method`'s attention: tilemix with the case's routing on its kernel's tiles (the
// config's tiles on the CPU), flash_fp16 as the zero layout on its own tiles.
RoutingPlan method_plan(const CaseSpec& spec, bool routed, bool gpu) {
  const TileGeometry geometry = !gpu ? spec.routing.geometry
                                     : routed ? gpu::tilemix_geometry(spec.shape.d) : gpu::flash_geometry(spec.shape.d);
  return plan_for(spec, geometry, routed ? spec.routing.layout : LayoutKind::zero);
}

// The reference model's attention: on the GPU torch_like (one runner, and score workspace, for
// every layer), on the CPU the exact attention rounded to FP16.
ModelAttention reference_attention(const CaseSpec& spec, bool gpu) {
  const AttentionShape shape = spec.shape;
  const Numerics numerics = spec.numerics;
  if (!gpu) return [shape](const AttentionInputs& qkv) { return exact_attention_fp16(shape, qkv); };
  std::string why;
  if (!gpu::baseline_available(gpu::Baseline::torch_like, shape, &why)) throw std::invalid_argument(why);
  auto runner = std::make_shared<gpu::TorchLikeRunner>(shape);
  return [shape, numerics, runner](const AttentionInputs& qkv) {
    GpuProblem problem(shape, qkv);
    runner->run(problem.params(numerics), nullptr);
    return problem.fetch().o;
  };
}

// `method`'s attention with `plan` (method_plan): its kernel on the GPU, the emulator on the CPU.
ModelAttention method_attention(const CaseSpec& spec, Method method, const RoutingPlan& plan, bool gpu) {
  const AttentionShape shape = spec.shape;
  const Numerics numerics = spec.numerics;
  const PrefillMainloop mainloop = spec.prefill_mainloop;
  switch (method) {
    case Method::tilemix:
      if (!gpu) break;
      return [shape, numerics, mainloop, plan](const AttentionInputs& qkv) {
        GpuProblem problem(shape, qkv);
        problem.set_mainloop(mainloop);
        return problem.tilemix(plan, numerics).o;
      };
    case Method::flash_fp16:
      if (!gpu) break;
      return [shape, numerics, mainloop](const AttentionInputs& qkv) {
        GpuProblem problem(shape, qkv);
        problem.set_mainloop(mainloop);
        return problem.flash(numerics).o;
      };
    case Method::torch_like:
    case Method::cudnn_fp16:
    case Method::cudnn_fp8:
    case Method::fp16_cache:  // the config reader refuses them for model cases
      throw std::logic_error(std::string(to_string(method)) + " runs no model cases");
  }
  return [shape, numerics, plan](const AttentionInputs& qkv) {
    return emulate_attention(shape, qkv, plan, {numerics, KeyOrder::ascending}).o;
  };
}

struct Logits {
  std::vector<float> values;
  double seconds = 0.0;
};

struct ModelRun {
  std::optional<Logits> logits;  // empty when it could not run
  std::string status;
};

Logits run_model(const CaseSpec& spec, const RandomModel& model, const std::vector<uint16_t>& input,
                 const ModelAttention& attention) {
  const auto start = std::chrono::steady_clock::now();
  Logits out;
  out.values = run_random_model(model, spec.shape, input, attention);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

double max_abs(const std::vector<float>& x) {
  double m = 0.0;
  for (float v : x) m = std::max(m, std::fabs(static_cast<double>(v)));
  return m;
}

LogitDeviation logit_deviation(const std::vector<float>& logits, const std::vector<float>& reference) {
  double worst = 0.0, sum = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const double d = std::fabs(static_cast<double>(logits[i]) - reference[i]);
    worst = std::max(worst, d);
    sum += d;
  }
  return {max_abs(reference), worst, sum / static_cast<double>(logits.size())};
}

}  // namespace

ResultTable model_bench_table() { return model_table().empty_table(); }

void run_model_bench(const ExperimentConfig& config, int device, ResultTable& table,
                     const std::function<void()>& on_row, const std::function<bool()>& stop) {
  const bool gpu = device >= 0;
  if (gpu) gpu::select_device(device);
  const std::string reference_name = gpu ? "torch_like" : "exact";
  // The baselines run once per group (they ignore the routing), the routed method once per case.
  std::vector<Method> baselines, routed;
  for (const Method m : methods_to_run(config, CaseKind::model)) (is_routed(m) ? routed : baselines).push_back(m);
  std::vector<std::string> group_labels{"reference"};
  for (const Method m : baselines) group_labels.push_back(to_string(m));
  Progress progress(static_cast<int>(config.cases.size()));
  int done = 0;
  for (const CaseGroup& group : group_cases(config, model_group_key)) {
    if (stop()) return;
    const CaseSpec& first = *group.front();
    // The group's model, input and logits, and one attention at a time.
    run_case_within_host_memory(first, model_case_bytes(first, gpu), [&] {
      const RandomModel model = make_random_model(first.shape, first.model->layers, first.model->vocab,
                                                  first.input.seed);
      const std::vector<uint16_t> input = random_model_input(first.shape, first.input.seed);
      std::optional<Logits> reference;
      // The model with `attention()`; an unavailable baseline or a full device is the row's status,
      // any other failure ends the run.
      const auto attempt = [&](const CaseSpec& spec, const std::function<ModelAttention()>& attention) {
        ModelRun run;
        run.status = run_status([&] { run.logits = run_model(spec, model, input, attention()); });
        return run;
      };
      const auto emit = [&](const CaseSpec& spec, const std::string& label, const RoutingPlan* plan,
                            const ModelRun& run) {
        ModelRow row{{spec, label, plan != nullptr, plan}, reference_name, std::nullopt, std::nullopt, run.status};
        if (run.logits) row.seconds = run.logits->seconds;
        if (run.logits && reference) row.deviation = logit_deviation(run.logits->values, reference->values);
        table.rows.push_back(model_table().cells(row));
        on_row();
      };
      progress.step(done + 1, fmt::format("{}: {} layers, {}", first.name, first.model->layers,
                                          fmt::join(group_labels, " and ")));
      const ModelRun reference_run = attempt(first, [&] { return reference_attention(first, gpu); });
      reference = reference_run.logits;
      emit(first, reference_name, nullptr, reference_run);
      for (const Method m : baselines) {
        const RoutingPlan plan = method_plan(first, false, gpu);
        emit(first, to_string(m), nullptr, attempt(first, [&] { return method_attention(first, m, plan, gpu); }));
      }
      for (const CaseSpec* spec : group) {
        if (stop()) return;  // the loop over the groups returns too
        ++done;
        for (const Method m : routed) {
          progress.step(done, fmt::format("{}: {} layers, {}", spec->name, spec->model->layers, to_string(m)));
          const RoutingPlan plan = method_plan(*spec, true, gpu);
          emit(*spec, to_string(m), &plan, attempt(*spec, [&] { return method_attention(*spec, m, plan, gpu); }));
        }
      }
    });
  }
  progress.finish();
}

}  // namespace tilemix::app
