// tilemix-check: numerical regression runs. Every case of a config is run through the exact
// reference and the emulator (and, on a GPU, the kernels) and compared against the tolerances
// kept in the config. Exit 0: all pass, 1: a case failed, 2: bad input, 3: runtime failure.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "apps/check/check_runner.hpp"
#include "apps/common/app_main.hpp"
#include "apps/common/device_choice.hpp"
#include "apps/common/gpu_support.hpp"
#include "core/config/experiment.hpp"
#include "core/report/table.hpp"

int main(int argc, char** argv) {
  using namespace tilemix;
  return app::guarded_main("tilemix-check", [&]() -> int {
    CLI::App cli{"tilemix-check: compare the emulator (and on a GPU the kernels) with the exact reference"};
    std::string config_path, device = "auto", json_out, filter;
    cli.add_option("--config", config_path, "experiment config (JSON)")->required();
    cli.add_option("--device", device, "auto | cpu | gpu (auto falls back to the CPU with a note)");
    cli.add_option("--json", json_out, "write the results with provenance to this file");
    cli.add_option("--filter", filter, "run only cases whose name contains this text");
    bool fresh = false;
    cli.add_flag("--fresh-inputs", fresh,
                 "draw a new random seed for every generated input (printed with the results), so each run checks new data");
    try {
      cli.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      const int rc = cli.exit(e);
      return rc == 0 ? app::kExitOk : app::kExitBadInput;
    }
    const app::DeviceChoice where = app::choose_device(device);
    if (!where.note.empty()) fmt::print(stderr, "tilemix-check: note: {}\n", where.note);
    ExperimentConfig config = load_config(config_path);
    app::require_cases_run_on(config, where);
    if (fresh) app::draw_fresh_input_seeds(config);

    app::CheckRun run = app::run_checks(config, where, filter);
    fmt::print("{}", render_terminal(run.table));
    fmt::print("{} passed, {} failed\n", run.passed, run.failed);
    if (!json_out.empty()) {
      Provenance prov{"tilemix-check", std::vector<std::string>(argv, argv + argc), config_path, config.json,
                      run.device};
      nlohmann::json out = {{"provenance", provenance_json(prov)},
                            {"summary", {{"passed", run.passed}, {"failed", run.failed}}},
                            {"rows", rows_json(run.table)}};
      write_text_file(json_out, out.dump(2) + "\n");
    }
    return run.failed == 0 ? app::kExitOk : app::kExitFailed;
  });
}
