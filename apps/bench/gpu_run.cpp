#include "apps/bench/gpu_run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>

#include "apps/bench/progress.hpp"
#include "apps/bench/sweep.hpp"
#include "apps/common/gpu_problem.hpp"
#include "apps/common/prepared_case.hpp"
#include "apps/common/table_columns.hpp"
#include "core/metrics.hpp"
#include "core/routing/layout.hpp"
#include "reference/exact.hpp"
#include "tilemix/attention.hpp"
#include "tilemix/baselines.hpp"
#include "tilemix/gpu.hpp"
#include "tilemix/timing.hpp"

namespace tilemix::app {
namespace {

struct MethodRun {
  std::optional<gpu::TimingResult> timing;  // empty when the method could not run
  std::string status = "ok";                // "ok", "OOM (...)", "unavailable (...)"
  int64_t resident_bytes = 0, resident_measured = 0;  // allocated; as the driver measured it
  std::optional<gpu::TimingResult> route;   // the GPU's word building alone (adaptive), part of `timing`
  std::optional<double> quant_ms;           // tilemix: its quantization passes alone, part of `timing` (0: none)
  std::vector<uint16_t> o;                  // FP16 output, fetched when a deviation is asked for
};

// The output of the run a case's compare_with names, on the case's inputs (untimed): "ok", or
// why it could not run (torch_like out of memory).
struct ComparedRun {
  std::vector<uint16_t> o;
  std::string status;
};

// What the comparison's output depends on; a baseline runs without the routing.
std::string comparison_key(const Comparison& c) {
  nlohmann::json key{to_string(c.method), to_string(c.numerics.state), to_string(c.numerics.accum)};
  if (c.method == Method::tilemix) {
    const RoutingRequest& r = c.routing;
    key.insert(key.end(), {to_string(r.layout), r.ratio, r.seed, r.group.value_or(0), to_string(c.numerics.mode),
                           c.numerics.smooth_k, to_string(c.numerics.pv)});
  }
  return key.dump();
}

// Runs the comparison on `problem` (made from `inputs`) with the mainloop set for the case; leaves
// the routing to be set again for the case's own runs.
ComparedRun compared_run(const CaseSpec& spec, const Comparison& c, const AttentionInputs& inputs,
                         GpuProblem& problem) {
  ComparedRun run;
  run.status = run_status([&] {
    switch (c.method) {
      case Method::tilemix: {
        RoutingRequest request = c.routing;
        request.geometry = gpu::tilemix_geometry(spec.shape.d);
        run.o = problem.tilemix(make_plan(spec.shape, request, inputs, spec.where), c.numerics).o;
        return;
      }
      case Method::flash_fp16:
        run.o = problem.flash(c.numerics).o;
        return;
      case Method::torch_like: {
        std::string why;
        if (!gpu::baseline_available(gpu::Baseline::torch_like, spec.shape, &why)) throw std::invalid_argument(why);
        gpu::TorchLikeRunner runner(spec.shape);
        runner.run(problem.params(c.numerics), nullptr);
        run.o = problem.fetch().o;
        return;
      }
      case Method::cudnn_fp16:
      case Method::cudnn_fp8:
      case Method::fp16_cache:  // the config reader refuses them in compare_with
        break;
    }
    throw std::logic_error(std::string("compare_with cannot run ") + to_string(c.method));
  });
  return run;
}

}  // namespace

ResultTable gpu_bench_table(const ExperimentConfig& config) {
  return prefill_gpu_table(compares(config)).empty_table();
}

namespace {

// Runs `groups` on one device, handing every finished row to `emit`.
void run_groups(const ExperimentConfig& config, const std::vector<const CaseGroup*>& groups,
                int device_index, const GpuBenchOptions& options, std::atomic<int>& cases_done,
                Progress& progress, const RowSink& emit, const std::function<bool()>& stop) {
  const std::vector<Method> methods = methods_to_run(config, CaseKind::prefill);
  const TableLayout<PrefillGpuRow>& layout = prefill_gpu_table(compares(config));
  gpu::select_device(device_index);
  const gpu::TimingOptions timing = timing_options(config.timing);
  std::vector<const CaseSpec*> order_of_cases;
  for (const auto* group : groups) order_of_cases.insert(order_of_cases.end(), group->begin(), group->end());
  std::string inputs_key;
  AttentionInputs inputs;
  std::unique_ptr<GpuProblem> problem_ptr;
  std::optional<ExactResult> reference;
  // flash_fp16 of the current group: timed once, with the group's first case, and the base of
  // every case's speedup and deviation. The baselines' rows are printed with the first case too.
  std::optional<MethodRun> flash;
  std::map<std::string, ComparedRun> compared_runs;  // the group's, by comparison_key
  for (const CaseSpec* case_ptr : order_of_cases) {
    const CaseSpec& spec = *case_ptr;
    const int index = ++cases_done;
    if (stop()) return;
    const bool first_of_group = prefill_group_key(spec) != inputs_key;
    if (first_of_group) {
      inputs_key = prefill_group_key(spec);
      flash.reset();
      compared_runs.clear();
      problem_ptr.reset();  // free the previous shape's device memory first
      inputs = {};          // and its host memory
      reference.reset();
      // flash_fp16's output is kept (twice: its run and the group's copy), every method's for the deviations.
      const bool deviations = options.deviation_vs_flash || options.deviation_vs_reference;
      const PrefillWork work{options.deviation_vs_reference, false, false,
                             deviations ? static_cast<int>(methods.size()) + 1 : 2};
      run_case_within_host_memory(spec, prefill_case_bytes(spec, gpu::tilemix_geometry(spec.shape.d), work), [&] {
        inputs = make_inputs(spec.shape, spec.input, spec.where + ".input");
        problem_ptr = std::make_unique<GpuProblem>(spec.shape, inputs);
        if (options.deviation_vs_reference) reference = exact_attention(spec.shape, inputs);
      });
    }
    GpuProblem& problem = *problem_ptr;
    RoutingRequest request = spec.routing;
    request.geometry = gpu::tilemix_geometry(spec.shape.d);
    const PreparedCase pc{spec, make_plan(spec.shape, request, inputs, spec.where), {}};
    problem.set_mainloop(spec.prefill_mainloop);
    const ComparedRun* compared = nullptr;
    if (spec.compare_with) {
      const std::string key = comparison_key(*spec.compare_with);
      auto it = compared_runs.find(key);
      if (it == compared_runs.end()) {
        progress.step(index, fmt::format("gpu {}: {} compare_with {}", device_index, spec.name,
                                         spec.compare_with->label));
        it = compared_runs.emplace(key, compared_run(spec, *spec.compare_with, inputs, problem)).first;
      }
      compared = &it->second;
    }
    problem.set_routing(pc.plan, pc.plan.words);
    const double ops = attention_ops(spec.shape);
    const double tokens = static_cast<double>(spec.shape.total_q());

    std::map<Method, MethodRun> runs;
    // flash_fp16 first: every other method's speedup and deviation are relative to it.
    std::vector<Method> order{Method::flash_fp16};
    for (const Method m : methods) {
      if (m != Method::flash_fp16) order.push_back(m);
    }
    for (const Method method : order) {
      if (stop()) return;
      const bool listed = std::find(methods.begin(), methods.end(), method) != methods.end();
      const bool is_flash = method == Method::flash_fp16;
      if (is_flash && flash) {
        runs[method] = *flash;
        continue;
      }
      // A baseline does not depend on the routing: its row is printed with the group's first case.
      const bool print = listed && (is_routed(method) || first_of_group);
      if (!print && !is_flash) continue;
      const char* name = to_string(method);
      progress.step(index, fmt::format("gpu {}: {} {}", device_index, spec.name, name));

      MethodRun run;
      gpu::PrefillParams params = problem.params(spec.numerics);
      std::function<void()> launch;
      std::unique_ptr<gpu::TorchLikeRunner> torch_like;
      std::unique_ptr<gpu::CudnnAttention> cudnn;
      run.status = run_status([&] {
        // Device memory of one call, as allocated and as measured.
        std::function<int64_t(gpu::MemoryCount)> resident;
        const auto require_available = [&](gpu::Baseline b) {
          std::string why;
          if (!gpu::baseline_available(b, spec.shape, &why)) throw std::invalid_argument(why);
        };
        const auto use_cudnn = [&](gpu::Baseline b) {
          require_available(b);
          cudnn = std::make_unique<gpu::CudnnAttention>(b, spec.shape);
          cudnn->prepare(params, nullptr);
          launch = [&] { cudnn->run(params, nullptr); };
          resident = [&](gpu::MemoryCount how) {
            return problem.resident_bytes(false, spec.numerics, how) +
                   static_cast<int64_t>(cudnn->workspace_bytes(how));
          };
        };
        switch (method) {
          case Method::tilemix:
            launch = [&] { problem.launch_tilemix(spec.numerics); };
            resident = [&](gpu::MemoryCount how) { return problem.resident_bytes(true, spec.numerics, how); };
            break;
          case Method::flash_fp16:
            launch = [&] { problem.launch_flash(spec.numerics); };
            resident = [&](gpu::MemoryCount how) { return problem.resident_bytes(false, spec.numerics, how); };
            break;
          case Method::torch_like:
            require_available(gpu::Baseline::torch_like);
            torch_like = std::make_unique<gpu::TorchLikeRunner>(spec.shape);
            launch = [&] { torch_like->run(params, nullptr); };
            resident = [&](gpu::MemoryCount how) {
              return problem.resident_bytes(false, spec.numerics, how) +
                     static_cast<int64_t>(torch_like->workspace_bytes(how));
            };
            break;
          case Method::cudnn_fp16:
            use_cudnn(gpu::Baseline::cudnn_fp16);
            break;
          case Method::cudnn_fp8:
            use_cudnn(gpu::Baseline::cudnn_fp8);
            break;
          case Method::fp16_cache:  // the config reader refuses it for prefill cases
            throw std::logic_error(std::string(name) + " runs no prefill cases");
        }
        run.resident_bytes = resident(gpu::MemoryCount::allocated);
        run.resident_measured = resident(gpu::MemoryCount::measured);
        run.timing = gpu::time_launches([&](int) { launch(); }, timing);
        if (method == Method::tilemix && problem.routes_on_gpu()) {
          run.route = gpu::time_launches([&](int) { problem.launch_routing(); }, timing);
        }
        if (method == Method::tilemix) {
          run.quant_ms = problem.quantizes(spec.numerics)
                             ? gpu::time_launches([&](int) { problem.launch_quantization(spec.numerics); }, timing)
                                   .median_ms
                             : 0.0;
        }
        if (run.timing->throttled) {
          fmt::print(stderr, "tilemix-bench: warning: {} {}: {}\n", spec.name, name, run.timing->clock_note);
        }
        if (options.deviation_vs_flash || options.deviation_vs_reference || is_flash || compared) {
          run.o = problem.fetch().o;
        }
      });
      if (is_flash) flash = run;
      runs[method] = std::move(run);
      if (!print) continue;

      const MethodRun& r = runs[method];
      const MethodRun& flash_run = runs[Method::flash_fp16];
      std::optional<double> rel_l2_vs_flash, rel_l2_vs_ref;
      if (r.timing) {
        if (options.deviation_vs_flash && !flash_run.o.empty()) {
          rel_l2_vs_flash = deviation(half_to_double(r.o), half_to_double(flash_run.o)).rel_l2;
        }
        if (reference) rel_l2_vs_ref = deviation(half_to_double(r.o), reference->o).rel_l2;
      }
      std::optional<ComparedDeviation> vs_compared;
      if (compared) {
        const std::string& label = spec.compare_with->label;
        vs_compared = ComparedDeviation{compared->status == "ok" ? label : label + ": " + compared->status, {}};
        if (r.timing && !compared->o.empty()) {
          vs_compared->deviation = deviation(half_to_double(r.o), half_to_double(compared->o));
        }
      }
      emit(layout.cells({{spec, name, is_routed(method), &pc.plan},
                         {timing_of(r.timing), device_index, r.status},
                         ops,
                         tokens,
                         timing_of(flash_run.timing),
                         {r.resident_bytes, r.resident_measured},
                         rel_l2_vs_flash,
                         rel_l2_vs_ref,
                         vs_compared,
                         timing_of(r.route),
                         r.quant_ms}));
    }
  }
}

}  // namespace

void run_gpu_bench(const ExperimentConfig& config, const std::vector<int>& devices, const GpuBenchOptions& options,
                   ResultTable& table, const std::function<void()>& on_row, const std::function<bool()>& stop) {
  // Groups share shape and inputs: only the routing plan changes between a group's cases.
  const auto groups = group_cases(config, prefill_group_key);
  std::atomic<int> cases_done{0};
  Progress progress(static_cast<int>(config.cases.size()));
  shard_over_devices(groups, devices, table, on_row,
                     [&](const std::vector<const CaseGroup*>& share, int device, const RowSink& emit) {
                       run_groups(config, share, device, options, cases_done, progress, emit, stop);
                     });
  progress.finish();
}

}  // namespace tilemix::app
