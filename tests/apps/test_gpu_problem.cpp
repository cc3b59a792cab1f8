// What apps/common/gpu_problem.hpp decides about running cases on a GPU, without a GPU.
#include <catch2/catch.hpp>

#include <string>

#include "apps/common/gpu_problem.hpp"
#include "core/config/experiment.hpp"
#include "core/error.hpp"

using namespace tilemix;
using Catch::Matchers::Contains;

namespace {

// The message of the InputError that require_gpu_support throws for `text` ("" if none).
std::string gpu_refusal(const std::string& text) {
  try {
    app::require_gpu_support(parse_config(nlohmann::ordered_json::parse(text), "g.json"));
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("the GPU kernels refuse smooth_k by name until they take it", "[cases]") {
  CHECK(gpu_refusal(R"({"cases": [{"seq_len": 64, "layout": "one"}, {"seq_len": 64, "smooth_k": false}]})").empty());
  CHECK_THAT(gpu_refusal(R"({"cases": [{"seq_len": 64}, {"seq_len": 64, "layout": "one", "smooth_k": true}]})"),
             Contains("g.json: $.cases[1].smooth_k: the GPU kernels do not support smooth_k yet"));
  CHECK_THAT(gpu_refusal(R"({"cases": [{"seq_len": 64, "compare_with": {"smooth_k": true}}]})"),
             Contains("g.json: $.cases[0].compare_with.smooth_k: the GPU kernels do not support smooth_k yet"));
  // A baseline compared with runs no smoothing.
  CHECK_THAT(gpu_refusal(R"({"cases": [{"seq_len": 64, "smooth_k": true, "compare_with": {"method": "flash_fp16"}}]})"),
             Contains("$.cases[0].smooth_k: the GPU kernels do not support smooth_k yet"));
  CHECK(gpu_refusal(R"({"defaults": {"kind": "model", "seq_len": 64}, "cases": [{"layout": "one"}]})").empty());
  CHECK_THAT(gpu_refusal(R"({"defaults": {"kind": "model", "seq_len": 64, "smooth_k": true}})"),
             Contains("$.defaults.smooth_k: the GPU kernels do not support smooth_k yet"));
}
