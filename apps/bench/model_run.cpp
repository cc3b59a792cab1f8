#include "apps/bench/model_run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "apps/bench/sweep.hpp"
#include "apps/common/case_columns.hpp"
#include "apps/common/gpu_problem.hpp"
#include "apps/common/progress.hpp"
#include "reference/emulator.hpp"
#include "reference/exact.hpp"
#include "reference/random_model.hpp"
#include "tilemix/attention.hpp"
#include "tilemix/baselines.hpp"
#include "tilemix/gpu.hpp"

namespace tilemix::app {
namespace {

// What the reference model and flash_fp16 depend on; cases with equal keys share them.
std::string group_key(const CaseSpec& spec) {
  const AttentionShape& s = spec.shape;
  return nlohmann::json{s.hq,
                        s.hk,
                        s.d,
                        s.causal,
                        s.softmax_scale,
                        s.cu_seqlens_q,
                        spec.model->layers,
                        spec.model->vocab,
                        spec.input.seed,
                        to_string(spec.numerics.state),
                        to_string(spec.numerics.accum)}
      .dump();
}

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

// One attention of the model: the reference (plan unused), flash_fp16 or tilemix with `plan`.
ModelAttention attention_for(const CaseSpec& spec, const std::string& method, const RoutingPlan& plan, bool gpu) {
  const AttentionShape shape = spec.shape;
  const Numerics numerics = spec.numerics;
  const bool routed = method == "tilemix";
  if (gpu) {
    if (method == "reference") {
      std::string why;
      if (!gpu::baseline_available(gpu::Baseline::torch_like, shape, &why)) throw std::invalid_argument(why);
      // One runner (and score workspace) for every layer of the model.
      auto runner = std::make_shared<gpu::TorchLikeRunner>(shape);
      return [shape, numerics, runner](const AttentionInputs& qkv) {
        GpuProblem problem(shape, qkv);
        runner->run(problem.params(numerics), nullptr);
        return problem.fetch().o;
      };
    }
    return [shape, numerics, plan, routed](const AttentionInputs& qkv) {
      GpuProblem problem(shape, qkv);
      return routed ? problem.tilemix(plan, numerics).o : problem.flash(numerics).o;
    };
  }
  if (method == "reference") {
    return [shape](const AttentionInputs& qkv) { return exact_attention_fp16(shape, qkv); };
  }
  return [shape, numerics, plan](const AttentionInputs& qkv) {
    return emulate_attention(shape, qkv, plan, {numerics, KeyOrder::ascending}).o;
  };
}

struct Logits {
  std::vector<float> values;
  double seconds = 0.0;
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

}  // namespace

ResultTable model_bench_table() {
  ResultTable t;
  t.columns = case_columns();
  const std::vector<Column> own = {{"layers", "layers"},
                                   {"vocab", "vocab"},
                                   {"reference", "reference"},
                                   {"max_abs_logit_ref", "max|logit| ref", 4},
                                   {"max_abs_dev", "max|dev|", 3},
                                   {"mean_abs_dev", "mean|dev|", 3},
                                   {"seconds", "seconds", 3},
                                   {"status", "status"}};
  t.columns.insert(t.columns.end(), own.begin(), own.end());
  return t;
}

void run_model_bench(const ExperimentConfig& config, int device, ResultTable& table,
                     const std::function<void()>& on_row, const std::function<bool()>& stop) {
  const bool gpu = device >= 0;
  if (gpu) gpu::select_device(device);
  const std::string reference_name = gpu ? "torch_like" : "exact";
  Progress progress(static_cast<int>(config.cases.size()));
  int done = 0;
  for (const CaseGroup& group : group_cases(config, group_key)) {
    const CaseSpec& first = *group.front();
    const RandomModel model = make_random_model(first.shape, first.model->layers, first.model->vocab,
                                                first.input.seed);
    const std::vector<uint16_t> input = random_model_input(first.shape, first.input.seed);
    std::optional<Logits> reference;
    const auto emit = [&](const CaseSpec& spec, const std::string& method, const RoutingPlan* plan,
                          const std::optional<Logits>& logits, const std::string& status) {
      std::vector<Cell> row = case_cells(spec, plan ? *plan : RoutingPlan{}, method, plan != nullptr);
      Cell ref_max, max_dev, mean_dev, seconds;
      if (logits) seconds = logits->seconds;
      if (logits && reference) {
        double worst = 0.0, sum = 0.0;
        for (size_t i = 0; i < logits->values.size(); ++i) {
          const double d = std::fabs(static_cast<double>(logits->values[i]) - reference->values[i]);
          worst = std::max(worst, d);
          sum += d;
        }
        ref_max = max_abs(reference->values);
        max_dev = worst;
        mean_dev = sum / static_cast<double>(logits->values.size());
      }
      const std::vector<Cell> own = {int64_t{spec.model->layers}, int64_t{spec.model->vocab}, reference_name, ref_max,
                                     max_dev,                      mean_dev,                   seconds,        status};
      row.insert(row.end(), own.begin(), own.end());
      table.rows.push_back(std::move(row));
      on_row();
    };
    // The model with `method`'s attention; an unavailable baseline or a full device is a status,
    // any other failure ends the run.
    const auto attempt = [&](const CaseSpec& spec, const std::string& method, const RoutingPlan& plan,
                             std::string& status) {
      std::optional<Logits> logits;
      try {
        logits = run_model(spec, model, input, attention_for(spec, method, plan, gpu));
      } catch (const gpu::OutOfMemory& e) {
        status = fmt::format("OOM ({:.1f} GiB asked)", e.bytes_asked / double(1ull << 30));
      } catch (const std::invalid_argument& e) {
        status = std::string("unavailable (") + e.what() + ")";
      }
      return logits;
    };
    if (stop()) return;
    progress.step(done + 1, fmt::format("{}: {} layers, reference and flash_fp16", first.name, first.model->layers));
    std::string status = "ok";
    reference = attempt(first, "reference", RoutingPlan{}, status);
    emit(first, reference_name, nullptr, reference, status);
    status = "ok";
    const RoutingPlan flash_plan = method_plan(first, false, gpu);
    emit(first, "flash_fp16", nullptr, attempt(first, "flash_fp16", flash_plan, status), status);
    for (const CaseSpec* spec : group) {
      if (stop()) return;
      progress.step(++done, fmt::format("{}: {} layers, tilemix", spec->name, spec->model->layers));
      const RoutingPlan plan = method_plan(*spec, true, gpu);
      status = "ok";
      emit(*spec, "tilemix", &plan, attempt(*spec, "tilemix", plan, status), status);
    }
  }
  progress.finish();
}

}  // namespace tilemix::app
