#include "apps/bench/gpu_run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <map>
#include <memory>
#include <optional>

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

// The shape (and numerics) a baseline row depends on: baselines run once per distinct key.
std::string baseline_key(const CaseSpec& spec, const std::string& method) {
  return method + "|" + shape_summary(spec.shape) + "|" + to_string(spec.numerics.state) + "|" +
         to_string(spec.numerics.accum) + "|" + spec.json.value("input", nlohmann::json::object()).dump();
}

gpu::TimingOptions timing_options(const TimingSpec& t) {
  gpu::TimingOptions o;
  o.warmup = t.warmup;
  o.min_reps = t.min_reps;
  o.max_reps = t.max_reps;
  o.max_seconds = t.max_seconds;
  o.noise = t.noise;
  o.flush_l2 = t.flush_l2;
  return o;
}

struct MethodRun {
  std::optional<gpu::TimingResult> timing;  // empty when the method could not run
  std::string status = "ok";                // "ok", "OOM (...)", "unavailable (...)"
  int64_t resident_bytes = 0;
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
               {"rel_l2_vs_flash", "rel.L2 flash", 3},
               {"rel_l2_vs_ref", "rel.L2 ref", 3},
               {"sm_clock_mhz", "SM MHz"},
               {"gpu", "gpu"},
               {"status", "status"}};
  t.columns.insert(t.columns.end(), own.begin(), own.end());
  return t;
}

namespace {

// Cases grouped by shape and inputs (first-appearance order): a group's inputs are generated and
// uploaded once, and only the routing plan changes between its cases.
std::vector<std::vector<const CaseSpec*>> shape_groups(const ExperimentConfig& config) {
  std::vector<std::string> keys;
  std::map<std::string, std::vector<const CaseSpec*>> groups;
  for (const CaseSpec& spec : config.cases) {
    const std::string key = baseline_key(spec, "");
    if (!groups.count(key)) keys.push_back(key);
    groups[key].push_back(&spec);
  }
  std::vector<std::vector<const CaseSpec*>> out;
  for (const auto& key : keys) out.push_back(groups[key]);
  return out;
}

using RowSink = std::function<void(std::vector<Cell>)>;

// Runs `groups` on one device, handing every finished row to `emit`.
void run_groups(const ExperimentConfig& config, const std::vector<const std::vector<const CaseSpec*>*>& groups,
                int device_index, const GpuBenchOptions& options, std::atomic<int>& cases_done,
                Progress& progress, const RowSink& emit, const std::function<bool()>& stop) {
  const std::vector<std::string> methods =
      config.methods.empty() ? std::vector<std::string>{"tilemix", "flash_fp16"} : config.methods;
  gpu::select_device(device_index);
  const gpu::TimingOptions timing = timing_options(config.timing);
  std::map<std::string, bool> baseline_done;
  std::vector<const CaseSpec*> order_of_cases;
  for (const auto* group : groups) order_of_cases.insert(order_of_cases.end(), group->begin(), group->end());
  std::string inputs_key;
  AttentionInputs inputs;
  std::unique_ptr<GpuProblem> problem_ptr;
  std::optional<ExactResult> reference;
  for (const CaseSpec* case_ptr : order_of_cases) {
    const CaseSpec& spec = *case_ptr;
    const int index = ++cases_done;
    if (stop()) return;
    if (baseline_key(spec, "") != inputs_key) {
      inputs_key = baseline_key(spec, "");
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
      const std::string key = baseline_key(spec, method);
      // A baseline row is printed once per shape; flash_fp16 still runs for the speedup column.
      const bool print = listed && (!is_baseline || !baseline_done[key]);
      if (!print && method != "flash_fp16") continue;
      progress.step(index, fmt::format("gpu {}: {} {}", device_index, spec.name, method));

      MethodRun run;
      gpu::PrefillParams params = problem.params(spec.numerics);
      std::function<void()> launch;
      std::unique_ptr<gpu::TorchLikeRunner> torch_like;
      std::unique_ptr<gpu::CudnnAttention> cudnn;
      try {
        if (method == "tilemix") {
          launch = [&] { problem.launch_tilemix(spec.numerics); };
          run.resident_bytes = problem.resident_bytes(true, spec.numerics);
        } else if (method == "flash_fp16") {
          launch = [&] { problem.launch_flash(spec.numerics); };
          run.resident_bytes = problem.resident_bytes(false, spec.numerics);
        } else if (method == "torch_like") {
          std::string why;
          if (!gpu::baseline_available(gpu::Baseline::torch_like, spec.shape, &why)) throw std::invalid_argument(why);
          torch_like = std::make_unique<gpu::TorchLikeRunner>(spec.shape);
          launch = [&] { torch_like->run(params, nullptr); };
          run.resident_bytes = problem.resident_bytes(false, spec.numerics) + torch_like->workspace_bytes();
        } else {
          const gpu::Baseline b = method == "cudnn_fp16" ? gpu::Baseline::cudnn_fp16 : gpu::Baseline::cudnn_fp8;
          std::string why;
          if (!gpu::baseline_available(b, spec.shape, &why)) throw std::invalid_argument(why);
          cudnn = std::make_unique<gpu::CudnnAttention>(b, spec.shape);
          cudnn->prepare(params, nullptr);
          launch = [&] { cudnn->run(params, nullptr); };
          run.resident_bytes = problem.resident_bytes(false, spec.numerics) + cudnn->workspace_bytes();
        }
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
      runs[method] = std::move(run);
      if (!print) continue;
      if (is_baseline) baseline_done[key] = true;

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
                                     static_cast<double>(r.resident_bytes) / double(1 << 20), dev_flash, dev_ref, clock,
                                     int64_t{device_index}, r.status};
      row.insert(row.end(), own.begin(), own.end());
      emit(std::move(row));
    }
  }
}

}  // namespace

void run_gpu_bench(const ExperimentConfig& config, const std::vector<int>& devices, const GpuBenchOptions& options,
                   ResultTable& table, const std::function<void()>& on_row, const std::function<bool()>& stop) {
  const auto groups = shape_groups(config);
  std::mutex table_mutex;
  const RowSink emit = [&](std::vector<Cell> row) {
    const std::lock_guard<std::mutex> lock(table_mutex);
    table.add_row(std::move(row));
    on_row();
  };
  std::atomic<int> cases_done{0};
  Progress progress(static_cast<int>(config.cases.size()));
  // Shape groups are dealt round-robin to the devices; each device runs its share in a thread.
  std::vector<std::thread> workers;
  std::vector<std::exception_ptr> errors(devices.size());
  for (size_t i = 0; i < devices.size(); ++i) {
    std::vector<const std::vector<const CaseSpec*>*> share;
    for (size_t g = i; g < groups.size(); g += devices.size()) share.push_back(&groups[g]);
    workers.emplace_back([&, i, share] {
      try {
        run_groups(config, share, devices[i], options, cases_done, progress, emit, stop);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  }
  for (auto& w : workers) w.join();
  progress.finish();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace tilemix::app
