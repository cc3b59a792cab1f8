// The --set key=v1,v2 parser: one override per line of the input, over a small valid config.
#include <cstddef>
#include <cstdint>
#include <sstream>

#include "core/config/experiment.hpp"
#include "tests/fuzz/fuzz_contract.hpp"

using namespace tilemix;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::ordered_json base = nlohmann::ordered_json::parse(
      R"({"defaults": {"seq_len": 64, "hq": 4, "hk": 2, "d": 64}, "cases": [{"name": "a"}, {"name": "b", "layout": "band", "ratio": 0.5}]})");
  std::vector<std::string> overrides;
  std::istringstream lines(std::string(reinterpret_cast<const char*>(data), size));
  for (std::string line; std::getline(lines, line);) overrides.push_back(line);
  ExperimentConfig config;
  if (!fuzz::accepted([&] { config = parse_config(base, "fuzz.json", overrides); })) return 0;
  if (config.cases.empty()) fuzz::violation("valid config without cases", "");
  return 0;
}
