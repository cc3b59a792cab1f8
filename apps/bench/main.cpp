// tilemix-bench: routing plans, and sweeps of the routed kernel against its baselines.
//   tilemix-bench plan --lq N --lk N --layout NAME --ratio R [...] [--json]
//   tilemix-bench [--config FILE] [--device auto|cpu|gpu] [--set key=v1,v2] [--format md|csv|json]
//                 [--out FILE] [--shard K/N] [--dump DIR] [--timeline DIR] [--list]
//   tilemix-bench merge OUT IN... [--partial]
// A config's cases are all prefill, all decode ("kind": "decode") or all model ("kind": "model":
// the multi-layer random model's logits with each method's attention, apps/bench/model_run.hpp).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <csignal>
#include <optional>
#include <fmt/core.h>

#include "apps/bench/cpu_run.hpp"
#include "apps/bench/decode_run.hpp"
#include "apps/bench/gpu_run.hpp"
#include "apps/bench/merge_command.hpp"
#include "apps/bench/model_run.hpp"
#include "apps/bench/plan_command.hpp"
#include "apps/bench/sweep_shard.hpp"
#include "apps/common/app_main.hpp"
#include "apps/common/device_choice.hpp"
#include "apps/common/gpu_support.hpp"
#include "core/config/experiment.hpp"
#include "core/error.hpp"
#include "core/report/table.hpp"
#include "core/routing/layout.hpp"
#include "tilemix/gpu.hpp"

namespace tilemix::app {
namespace {

void print_list() {
  fmt::print("methods, by the kind of case they run (* runs when a config lists no methods):\n");
  for (const CaseKind kind : enum_values(kCaseKindNames)) {
    const char* name = to_string(kind);
    switch (kind) {
      case CaseKind::prefill:
        fmt::print("  {} cases (the default kind):\n", name);
        break;
      case CaseKind::decode:
        fmt::print("  {} cases (\"kind\": \"{}\"):\n", name, name);
        break;
      case CaseKind::model:
        fmt::print("  {} cases (\"kind\": \"{}\"; the reference model always runs):\n", name, name);
        break;
    }
    const std::vector<Method> defaults = default_methods(kind);
    for (const Method m : methods_for(kind)) {
      const bool by_default = std::find(defaults.begin(), defaults.end(), m) != defaults.end();
      fmt::print("    {:<11} {} {}\n", to_string(m), by_default ? '*' : ' ', method_description(m));
    }
  }
  fmt::print("layouts:\n");
  for (LayoutKind k : enum_values(kLayoutNames)) fmt::print("  {:<13} {}\n", to_string(k), layout_description(k));
  fmt::print("devices:\n");
  std::string why;
  const int n = gpu::device_count(&why);
  if (n == 0) fmt::print("  none ({})\n  cpu: emulator and exact reference\n", why);
  for (int i = 0; i < n; ++i) {
    const gpu::DeviceInfo d = gpu::device_info(i);
    fmt::print("  {}: {} (sm_{}{}, {} SMs, {:.1f} GiB)\n", i, d.name, d.cc_major, d.cc_minor, d.sm_count,
               d.global_mem_bytes / double(1ull << 30));
  }
}

volatile std::sig_atomic_t g_interrupted = 0;

// Ctrl-C ends the sweep after the row in flight; every finished row is already in --out.
void install_interrupt_handler() {
  std::signal(SIGINT, [](int) { g_interrupted = 1; });
  std::signal(SIGTERM, [](int) { g_interrupted = 1; });
}
bool interrupted() { return g_interrupted != 0; }

// --devices: "" (the default device), "all", or a comma-separated list of indices.
std::vector<int> parse_devices(const std::string& arg, int default_index) {
  if (arg.empty()) return {default_index};
  const int count = gpu::device_count();
  std::vector<int> out;
  if (arg == "all") {
    for (int i = 0; i < count; ++i) out.push_back(i);
    return out;
  }
  size_t pos = 0;
  while (pos <= arg.size()) {
    const size_t comma = std::min(arg.find(',', pos), arg.size());
    const std::string item = arg.substr(pos, comma - pos);
    int index = -1;
    try {
      size_t used = 0;
      index = std::stoi(item, &used);
      if (used != item.size()) index = -1;
    } catch (const std::exception&) {
    }
    if (index < 0 || index >= count) {
      throw InputError("--devices", "'" + item + "' is not a device index (this machine has " + std::to_string(count) +
                                        " devices)");
    }
    if (std::find(out.begin(), out.end(), index) != out.end()) {
      throw InputError("--devices", "device " + item + " is listed twice");
    }
    out.push_back(index);
    pos = comma + 1;
  }
  return out;
}

std::string render(const ResultTable& t, const std::string& format, const nlohmann::json& provenance) {
  if (format == "md") return render_markdown(t);
  if (format == "csv") return render_csv(t);
  if (format == "json") return nlohmann::json{{"provenance", provenance}, {"rows", rows_json(t)}}.dump(2) + "\n";
  return render_terminal(t);
}

}  // namespace
}  // namespace tilemix::app

int main(int argc, char** argv) {
  using namespace tilemix;
  return app::guarded_main("tilemix-bench", [&]() -> int {
    CLI::App cli{"tilemix-bench: routing plans and FP16/INT8 tile-routed attention sweeps"};
    cli.require_subcommand(0, 1);
    std::string config_path, device = "auto", format = "table", out_path, dump_dir;
    std::vector<std::string> sets;
    bool list = false, deviation = false, reference = false;
    std::string devices_arg, shard_arg;
    cli.add_option("--config", config_path, "experiment config (JSON); a small built-in sweep when absent");
    cli.add_option("--device", device, "auto | cpu | gpu");
    cli.add_option("--set", sets, "replace or add a sweep axis: key=v1,v2 (repeatable)");
    cli.add_option("--format", format, "stdout format: table | md | csv | json")
        ->check(CLI::IsMember({"table", "md", "csv", "json"}));
    cli.add_option("--out", out_path, "also write the results (format from the extension: .json .csv .md)");
    cli.add_option("--dump", dump_dir, "write each case's q, k, v, o, o_ref .npy and <case>_meta.json here");
    std::string timeline_dir;
    cli.add_option("--timeline", timeline_dir,
                   "decode, GPU: write each row's per-CTA timestamps (one more call) as CSV files here");
    cli.add_option("--devices", devices_arg, "GPU indices to shard the sweep over: 0,1,... or all (default 0)");
    cli.add_option("--shard", shard_arg,
                   "run the K-th of N slices of the sweep (K from 1; whole groups of cases, balanced by work); "
                   "tilemix-bench merge joins the outputs");
    cli.add_flag("--list", list, "list methods, layouts and devices");
    cli.add_flag("--deviation", deviation, "GPU: add each method's relative L2 deviation from flash_fp16");
    cli.add_flag("--reference", reference, "GPU: add the deviation from the exact CPU reference (slow at long L)");
    app::PlanOptions plan_opts;
    CLI::App* plan = app::add_plan_command(cli, plan_opts);
    app::MergeOptions merge_opts;
    CLI::App* merge = app::add_merge_command(cli, merge_opts);
    try {
      cli.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      const int rc = cli.exit(e);
      return rc == 0 ? app::kExitOk : app::kExitBadInput;
    }
    if (plan->parsed()) return app::run_plan_command(plan_opts);
    if (merge->parsed()) return app::run_merge_command(merge_opts, std::vector<std::string>(argv, argv + argc));
    if (list) {
      app::print_list();
      return app::kExitOk;
    }

    const std::optional<app::ShardSpec> shard_spec =
        shard_arg.empty() ? std::nullopt : std::optional<app::ShardSpec>(app::parse_shard(shard_arg));
    const app::DeviceChoice where = app::choose_device(device);
    if (!where.note.empty()) fmt::print(stderr, "tilemix-bench: note: {}\n", where.note);
    if (!where.gpu && !devices_arg.empty()) throw InputError("--devices", "needs a GPU run (--device gpu or auto)");
    const ExperimentConfig sweep =
        config_path.empty() ? parse_config(nlohmann::json::parse(app::default_bench_config_json()), "<built-in>", sets)
                            : load_config(config_path, sets);
    app::require_cases_run_on(sweep, where);
    Provenance prov{"tilemix-bench", std::vector<std::string>(argv, argv + argc),
                    config_path.empty() ? "<built-in>" : config_path, sweep.json, app::device_provenance(where)};

    const CaseKind kind = case_kind(sweep.cases.front());
    const auto other_kind = [&](const CaseSpec& c) { return case_kind(c) != kind; };
    if (std::any_of(sweep.cases.begin(), sweep.cases.end(), other_kind)) {
      throw InputError(prov.config_path, "mixes case kinds (prefill, decode, model); give each kind its own config");
    }
    const bool decode = kind == CaseKind::decode, model = kind == CaseKind::model;

    nlohmann::json provenance = provenance_json(prov);
    std::optional<app::SweepShard> shard;
    if (shard_spec) {
      // Only the CPU emulator sweep writes its rows in the config's order; the others group by group.
      const bool by_case = kind == CaseKind::prefill && !where.gpu;
      shard = app::select_shard(sweep, *shard_spec, by_case ? app::RowOrder::by_case : app::RowOrder::by_group);
      nlohmann::json& recorded = provenance["shard"] = shard->provenance;
      // What else shapes the rows: merge joins only shards run alike.
      recorded["run"] = {{"device", where.gpu ? "gpu" : "cpu"}, {"deviation", deviation}, {"reference", reference}};
      const double total_work = recorded["total_work"];
      fmt::print(stderr, "tilemix-bench: shard {}: {} of {} groups of cases that share inputs, {} of {} cases, "
                 "{:.0f}% of the estimated work\n",
                 app::to_string(*shard_spec), recorded["groups"].size(), recorded["group_count"].dump(),
                 shard->config.cases.size(), sweep.cases.size(),
                 total_work > 0.0 ? 100.0 * recorded["work"].get<double>() / total_work : 100.0);
    }
    const ExperimentConfig& config = shard ? shard->config : sweep;
    const auto write_out = [&](const ResultTable& table) {
      if (out_path.empty()) return;
      const auto ext = out_path.substr(out_path.find_last_of('.') + 1);
      write_text_file(out_path, app::render(table, ext == "md" ? "md" : ext == "csv" ? "csv" : "json", provenance));
    };
    if (!timeline_dir.empty() && !(decode && where.gpu)) {
      throw InputError("--timeline", "records the GPU decode kernels: use it with decode cases on a GPU");
    }
    ResultTable table;
    if (model) {
      if (deviation || reference) throw InputError("--deviation/--reference", "are prefill options");
      if (!dump_dir.empty()) throw InputError("--dump", "writes prefill emulator cases");
      if (where.gpu) {
        app::install_interrupt_handler();
        const std::vector<int> devices = app::parse_devices(devices_arg, where.index);
        if (devices.size() != 1) throw InputError("--devices", "model cases run on one GPU");
        table = app::model_bench_table();
        app::run_model_bench(config, devices.front(), table, [&] { write_out(table); }, app::interrupted);
      } else {
        fmt::print(stderr, "tilemix-bench: CPU run of the model cases of '{}' (exact reference, emulated kernels)\n",
                   config.name);
        table = app::model_bench_table();
        app::run_model_bench(config, -1, table, [&] { write_out(table); }, [] { return false; });
      }
    } else if (where.gpu) {
      app::install_interrupt_handler();
      if (!dump_dir.empty()) throw InputError("--dump", "writes emulator cases; use it with --device cpu");
      const std::vector<int> devices = app::parse_devices(devices_arg, where.index);
      if (decode) {
        if (deviation || reference) throw InputError("--deviation/--reference", "are prefill options");
        table = app::decode_bench_table();
        app::run_decode_bench(config, devices, app::DecodeBenchOptions{timeline_dir}, table,
                              [&] { write_out(table); }, app::interrupted);
      } else {
        table = app::gpu_bench_table(config);
        const app::GpuBenchOptions options{deviation, reference};
        app::run_gpu_bench(config, devices, options, table, [&] { write_out(table); }, app::interrupted);
      }
      if (app::interrupted()) fmt::print(stderr, "tilemix-bench: interrupted; the finished rows are kept\n");
    } else if (decode) {
      throw InputError("--device", "decode sweeps time the GPU kernels and need a GPU (tilemix-check runs decode "
                                   "cases on the CPU emulator)");
    } else {
      fmt::print(stderr, "tilemix-bench: CPU emulator run of '{}' ({} cases); times are CPU wall time, not GPU\n",
                 config.name, config.cases.size());
      table = app::run_emulator_bench(config, dump_dir);
    }
    if (shard) provenance["shard"]["complete"] = !app::interrupted();
    fmt::print("{}", app::render(table, format, provenance));
    if (!where.gpu && format == "table" && !model) {
      fmt::print("hh INT8: share of each query's heavy-hitter attention mass (smallest key sets reaching 5/10/20/30%\n"
                 "of the row) computed on the INT8 path; importance = attention probability P (the paper's\n"
                 "gradient-weighted importance needs a model loss)\n");
    }
    write_out(table);
    return app::interrupted() ? app::kExitRuntime : app::kExitOk;
  });
}
