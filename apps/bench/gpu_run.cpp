#include "apps/bench/gpu_run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <optional>

#include "apps/bench/sweep.hpp"
#include "apps/common/case_columns.hpp"
#include "apps/common/gpu_problem.hpp"
#include "apps/common/prepared_case.hpp"
#include "apps/common/progress.hpp"
#include "core/metrics.hpp"
#include "reference/exact.hpp"
#include "tilemix/attention.hpp"
#include "tilemix/baselines.hpp"
#include "tilemix/gpu.hpp"
#include "tilemix/timing.hpp"

namespace tilemix::app {
namespace {

// What the inputs, flash_fp16 and the baselines depend on: the shape (every sequence length),
// the numerics and the input spec. Cases with equal keys share them.
std::string group_key(const CaseSpec& spec) {
  const AttentionShape& s = spec.shape;
  return nlohmann::json{s.hq, s.hk, s.d, s.causal, s.softmax_scale, s.cu_seqlens_q, s.cu_seqlens_k,
                        to_string(spec.numerics.state), to_string(spec.numerics.accum),
                        spec.json.value("input", nlohmann::json::object())}
      .dump();
}

struct MethodRun {
  std::optional<gpu::TimingResult> timing;  // empty when the method could not run
  std::string status = "ok";                // "ok", "OOM (...)", "unavailable (...)"
  int64_t resident_bytes = 0, resident_measured = 0;  // allocated; as the driver measured it
  std::vector<uint16_t> o;                  // FP16 output, fetched when a deviation is asked for
};

}  // namespace

ResultTable gpu_bench_table() {
  ResultTable t;
  t.columns = case_columns();
  const std::vector<Column> own = {
               {"median_ms", "median ms", 4},
               {"min_ms", "min ms", 4},
               {"max_ms", "max ms", 4},
               {"rel_std", "rel.std", 2},
               {"reps", "reps"},
               {"tops", "TOPS", 4},
               {"thpt_ktok_s", "K tok/s", 4},
               {"speedup_vs_flash", "x flash", 3},
               {"resident_mib", "HBM MiB", 4},
               {"resident_measured_mib", "HBM MiB meas.", 4},
               {"rel_l2_vs_flash", "rel.L2 flash", 3},
               {"rel_l2_vs_ref", "rel.L2 ref", 3},
               {"sm_clock_mhz", "SM MHz"},
               {"gpu", "gpu"},
               {"status", "status"}};
  t.columns.insert(t.columns.end(), own.begin(), own.end());
  return t;
}

namespace {

// Runs `groups` on one device, handing every finished row to `emit`.
void run_groups(const ExperimentConfig& config, const std::vector<const CaseGroup*>& groups,
                int device_index, const GpuBenchOptions& options, std::atomic<int>& cases_done,
                Progress& progress, const RowSink& emit, const std::function<bool()>& stop) {
  const std::vector<std::string> methods =
      config.methods.empty() ? std::vector<std::string>{"tilemix", "flash_fp16"} : config.methods;
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
  for (const CaseSpec* case_ptr : order_of_cases) {
    const CaseSpec& spec = *case_ptr;
    const int index = ++cases_done;
    if (stop()) return;
    const bool first_of_group = group_key(spec) != inputs_key;
    if (first_of_group) {
      inputs_key = group_key(spec);
      flash.reset();
      problem_ptr.reset();  // free the previous shape's device memory first
      inputs = make_inputs(spec.shape, spec.input, spec.where + ".input");
      problem_ptr = std::make_unique<GpuProblem>(spec.shape, inputs);
      reference.reset();
      if (options.deviation_vs_reference) reference = exact_attention(spec.shape, inputs);
    }
    GpuProblem& problem = *problem_ptr;
    RoutingRequest request = spec.routing;
    request.geometry = gpu::tilemix_geometry(spec.shape.d);
    const PreparedCase pc{spec, make_plan(spec.shape, request, spec.where), {}};
    problem.set_routing(pc.plan, pc.plan.words);
    const double ops = attention_ops(spec.shape);
    const double tokens = static_cast<double>(spec.shape.total_q());

    std::map<std::string, MethodRun> runs;
    // flash_fp16 first: every other method's speedup and deviation are relative to it.
    std::vector<std::string> order{"flash_fp16"};
    for (const auto& m : methods) {
      if (m != "flash_fp16") order.push_back(m);
    }
    for (const std::string& method : order) {
      if (stop()) return;
      const bool listed = std::find(methods.begin(), methods.end(), method) != methods.end();
      const bool is_baseline = method != "tilemix";
      if (method == "flash_fp16" && flash) {
        runs[method] = *flash;
        continue;
      }
      const bool print = listed && (!is_baseline || first_of_group);
      if (!print && method != "flash_fp16") continue;
      progress.step(index, fmt::format("gpu {}: {} {}", device_index, spec.name, method));

      MethodRun run;
      gpu::PrefillParams params = problem.params(spec.numerics);
      std::function<void()> launch;
      std::unique_ptr<gpu::TorchLikeRunner> torch_like;
      std::unique_ptr<gpu::CudnnAttention> cudnn;
      try {
        // Device memory of one call, as allocated and as measured.
        std::function<int64_t(gpu::MemoryCount)> resident;
        if (method == "tilemix") {
          launch = [&] { problem.launch_tilemix(spec.numerics); };
          resident = [&](gpu::MemoryCount how) { return problem.resident_bytes(true, spec.numerics, how); };
        } else if (method == "flash_fp16") {
          launch = [&] { problem.launch_flash(spec.numerics); };
          resident = [&](gpu::MemoryCount how) { return problem.resident_bytes(false, spec.numerics, how); };
        } else if (method == "torch_like") {
          std::string why;
          if (!gpu::baseline_available(gpu::Baseline::torch_like, spec.shape, &why)) throw std::invalid_argument(why);
          torch_like = std::make_unique<gpu::TorchLikeRunner>(spec.shape);
          launch = [&] { torch_like->run(params, nullptr); };
          resident = [&](gpu::MemoryCount how) {
            return problem.resident_bytes(false, spec.numerics, how) + static_cast<int64_t>(torch_like->workspace_bytes(how));
          };
        } else {
          const gpu::Baseline b = method == "cudnn_fp16" ? gpu::Baseline::cudnn_fp16 : gpu::Baseline::cudnn_fp8;
          std::string why;
          if (!gpu::baseline_available(b, spec.shape, &why)) throw std::invalid_argument(why);
          cudnn = std::make_unique<gpu::CudnnAttention>(b, spec.shape);
          cudnn->prepare(params, nullptr);
          launch = [&] { cudnn->run(params, nullptr); };
          resident = [&](gpu::MemoryCount how) {
            return problem.resident_bytes(false, spec.numerics, how) + static_cast<int64_t>(cudnn->workspace_bytes(how));
          };
        }
        run.resident_bytes = resident(gpu::MemoryCount::allocated);
        run.resident_measured = resident(gpu::MemoryCount::measured);
        run.timing = gpu::time_launches([&](int) { launch(); }, timing);
        if (run.timing->throttled) {
          fmt::print(stderr, "tilemix-bench: warning: {} {}: {}\n", spec.name, method, run.timing->clock_note);
        }
        if (options.deviation_vs_flash || options.deviation_vs_reference || method == "flash_fp16") {
          run.o = problem.fetch().o;
        }
      } catch (const gpu::OutOfMemory& e) {
        run.status = fmt::format("OOM ({:.1f} GiB asked)", e.bytes_asked / double(1ull << 30));
      } catch (const std::invalid_argument& e) {
        run.status = std::string("unavailable (") + e.what() + ")";
      }
      if (method == "flash_fp16") flash = run;
      runs[method] = std::move(run);
      if (!print) continue;

      const MethodRun& r = runs[method];
      Cell median, min_ms, max_ms, rel_std, reps, tops, thpt, speedup, dev_flash, dev_ref, clock;
      if (r.timing) {
        median = r.timing->median_ms;
        min_ms = r.timing->min_ms;
        max_ms = r.timing->max_ms;
        rel_std = r.timing->rel_std;
        reps = static_cast<int64_t>(r.timing->ms.size());
        tops = ops / (r.timing->median_ms * 1e-3) / 1e12;
        thpt = tokens / (r.timing->median_ms * 1e-3) / 1e3;
        clock = static_cast<int64_t>(r.timing->sm_clock_end_mhz);
        const MethodRun& flash = runs["flash_fp16"];
        if (flash.timing) speedup = flash.timing->median_ms / r.timing->median_ms;
        if (options.deviation_vs_flash && !flash.o.empty()) {
          dev_flash = deviation(half_to_double(r.o), half_to_double(flash.o)).rel_l2;
        }
        if (reference) dev_ref = deviation(half_to_double(r.o), reference->o).rel_l2;
      }
      std::vector<Cell> row = case_cells(spec, pc.plan, method, method == "tilemix");
      const std::vector<Cell> own = {median, min_ms, max_ms, rel_std, reps, tops, thpt, speedup,
                                     static_cast<double>(r.resident_bytes) / double(1 << 20),
                                     static_cast<double>(r.resident_measured) / double(1 << 20), dev_flash, dev_ref, clock,
                                     int64_t{device_index}, r.status};
      row.insert(row.end(), own.begin(), own.end());
      emit(std::move(row));
    }
  }
}

}  // namespace

void run_gpu_bench(const ExperimentConfig& config, const std::vector<int>& devices, const GpuBenchOptions& options,
                   ResultTable& table, const std::function<void()>& on_row, const std::function<bool()>& stop) {
  // Groups share shape and inputs: only the routing plan changes between a group's cases.
  const auto groups = group_cases(config, group_key);
  std::atomic<int> cases_done{0};
  Progress progress(static_cast<int>(config.cases.size()));
  shard_over_devices(groups, devices, table, on_row,
                     [&](const std::vector<const CaseGroup*>& share, int device, const RowSink& emit) {
                       run_groups(config, share, device, options, cases_done, progress, emit, stop);
                     });
  progress.finish();
}

}  // namespace tilemix::app
