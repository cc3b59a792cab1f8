// The prefill mainloop each GPU generation runs, and which cases a GPU refuses before any runs,
// with made-up compute capabilities: sm_80 and sm_89 (the mma.sync kernel alone), sm_90 (every
// kernel) and sm_100 (sm_90a code does not run there); and auto's choice on sm_90 against the
// committed measurement of both sm_90 mainloops.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "apps/common/gpu_support.hpp"
#include "core/config/experiment.hpp"
#include "core/error.hpp"
#include "core/problem.hpp"
#include "tilemix/attention.hpp"

using namespace tilemix;
using Catch::Matchers::Contains;

namespace {

constexpr ComputeCapability kA100{8, 0}, kL40S{8, 9}, kH100{9, 0}, kB200{10, 0};

CaseSpec case_of(const std::string& fields) {
  const std::string text = R"({"cases": [{"name": "c", "batch": 1, "seq_len": 256, "hq": 2, "hk": 1, "d": 128)" +
                           fields + "}]}";
  return parse_config(nlohmann::ordered_json::parse(text), "test.json").cases.at(0);
}

Numerics numerics_of(QuantMode mode, PvPrecision pv = PvPrecision::fp16) {
  Numerics n;
  n.mode = mode;
  n.pv = pv;
  return n;
}

}  // namespace

TEST_CASE("auto takes the mma.sync kernel on every GPU but sm_90", "[cases]") {
  for (const ComputeCapability cc : {kA100, kL40S, kB200}) {
    INFO("sm_" << cc.sm());
    CHECK(gpu::flash_mainloop(PrefillMainloop::automatic, cc) == PrefillMainloop::mma_sync);
    for (const QuantMode mode : {QuantMode::quantize_once, QuantMode::on_the_fly}) {
      CHECK(gpu::tilemix_mainloop(PrefillMainloop::automatic, numerics_of(mode), cc) == PrefillMainloop::mma_sync);
    }
    CHECK(gpu::prefill_mainloop_runs_on(PrefillMainloop::mma_sync, cc));
    CHECK_FALSE(gpu::prefill_mainloop_runs_on(PrefillMainloop::wgmma, cc));
    CHECK_FALSE(gpu::prefill_mainloop_runs_on(PrefillMainloop::warp_specialized, cc));
  }
  // sm_90: the measured choice, every kernel runs (the default is sm_90).
  CHECK(gpu::flash_mainloop(PrefillMainloop::automatic, kH100) == PrefillMainloop::warp_specialized);
  CHECK(gpu::tilemix_mainloop(PrefillMainloop::automatic, numerics_of(QuantMode::quantize_once), kH100) ==
        PrefillMainloop::warp_specialized);
  CHECK(gpu::tilemix_mainloop(PrefillMainloop::automatic, numerics_of(QuantMode::on_the_fly), kH100) ==
        PrefillMainloop::wgmma);
  CHECK(gpu::flash_mainloop(PrefillMainloop::automatic) == PrefillMainloop::warp_specialized);
  for (const PrefillMainloop m : {PrefillMainloop::mma_sync, PrefillMainloop::wgmma, PrefillMainloop::warp_specialized}) {
    CHECK(gpu::prefill_mainloop_runs_on(m, kH100));
    // A mainloop asked for by name stays, on any GPU.
    CHECK(gpu::flash_mainloop(m, kA100) == m);
  }
  CHECK(kL40S.has_fp8_mma());
  CHECK_FALSE(kA100.has_fp8_mma());
}

TEST_CASE("a GPU refuses the cases it cannot run, naming the GPU and the mainloop", "[cases]") {
  const std::string gpu = "NVIDIA A100-SXM4-40GB";
  // auto and mma_sync run anywhere; on sm_90 every mainloop runs.
  CHECK_NOTHROW(app::require_case_runs_on(case_of(""), kA100, gpu));
  CHECK_NOTHROW(app::require_case_runs_on(case_of(R"(, "mainloop": "mma_sync")"), kL40S, gpu));
  CHECK_NOTHROW(app::require_case_runs_on(case_of(R"(, "mainloop": "warp_specialized")"), kH100, gpu));
  CHECK_NOTHROW(app::require_case_runs_on(case_of(R"(, "pv": "fp8")"), kH100, gpu));
  for (const char* m : {"wgmma", "warp_specialized"}) {
    INFO(m);
    const CaseSpec spec = case_of(std::string(R"(, "mainloop": ")") + m + "\"");
    CHECK_THROWS_WITH(app::require_case_runs_on(spec, kA100, gpu),
                      Contains("$.cases[0].mainloop") && Contains(gpu) && Contains("sm_80") && Contains(m));
    CHECK_THROWS_AS(app::require_case_runs_on(spec, kB200, gpu), InputError);
  }
  // FP8 P V: the warp-specialized kernel, sm_90a alone (auto takes mma_sync on sm_89).
  CHECK_THROWS_WITH(app::require_case_runs_on(case_of(R"(, "pv": "fp8")"), kL40S, gpu),
                    Contains("$.cases[0].pv") && Contains("sm_89"));
  // Decode: the wgmma mainloop asked for by name is sm_90a's.
  const auto decode_case = [](const std::string& mainloop) {
    return parse_config(nlohmann::ordered_json::parse(
                            R"({"cases": [{"name": "d", "kind": "decode", "cache_lens": [1024], "new_tokens": [1],
                                "hq": 8, "hk": 1, "d": 128, "mainloop": ")" + mainloop + "\"}]}"),
                        "test.json")
        .cases.at(0);
  };
  CHECK_NOTHROW(app::require_case_runs_on(decode_case("mma_sync"), kA100, gpu));
  CHECK_NOTHROW(app::require_case_runs_on(decode_case("wgmma"), kH100, gpu));
  CHECK_THROWS_WITH(app::require_case_runs_on(decode_case("wgmma"), kL40S, gpu),
                    Contains("$.cases[0].mainloop") && Contains("sm_89"));
}

TEST_CASE("on sm_90 auto takes the faster mainloop of every case in results/h100/prefill-mainloops.json", "[cases]") {
  // Each case of the committed run (every d, accumulation, L, causal and mode) timed on both
  // sm_90 mainloops in one process: the one auto resolves to must be the faster, or within 5% of
  // it (the run's own spread between repetitions of a row reaches a few percent at 1k).
  const std::string path = std::string(TILEMIX_SOURCE_DIR) + "/results/h100/prefill-mainloops.json";
  std::ifstream file(path);
  REQUIRE(file);
  const nlohmann::json run = nlohmann::json::parse(file);
  // (case without its mainloop, method) -> its mode and each mainloop's median time.
  struct Timed {
    QuantMode mode = QuantMode::quantize_once;  // flash_fp16's rows keep it
    std::map<std::string, double> ms;
  };
  std::map<std::pair<std::string, std::string>, Timed> cases;
  for (const auto& row : run.at("rows")) {
    const std::string method = row.at("method");
    if (method != "tilemix" && method != "flash_fp16") continue;
    REQUIRE(row.at("status") == "ok");
    std::string rest, mainloop;
    std::istringstream parts(row.at("case").get<std::string>());
    for (std::string part; std::getline(parts, part, '/');) {
      if (part.rfind("mainloop=", 0) == 0) {
        mainloop = part.substr(9);
      } else {
        rest += "/" + part;
      }
    }
    REQUIRE(!mainloop.empty());
    Timed& timed = cases[{rest, method}];
    timed.ms[mainloop] = row.at("median_ms");
    if (method == "tilemix") {
      const auto mode = parse_enum(kQuantModeNames, row.at("mode").get<std::string>());
      REQUIRE(mode.has_value());
      timed.mode = *mode;
    }
  }
  REQUIRE(cases.size() >= 100);
  for (const auto& [key, timed] : cases) {
    INFO(key.second << " " << key.first);
    REQUIRE(timed.ms.size() == 2);
    const PrefillMainloop chosen = key.second == "flash_fp16"
                                       ? gpu::flash_mainloop(PrefillMainloop::automatic, kH100)
                                       : gpu::tilemix_mainloop(PrefillMainloop::automatic, numerics_of(timed.mode), kH100);
    const double fastest = std::min(timed.ms.at("wgmma"), timed.ms.at("warp_specialized"));
    const double taken = timed.ms.at(std::string(to_string(chosen)));
    INFO("auto's " << to_string(chosen) << " " << taken << " ms, the faster " << fastest << " ms");
    CHECK(taken <= 1.05 * fastest);
  }
}
