// The config reader: JSON text -> validated experiment, axes expanded.
#include <cstddef>
#include <cstdint>
#include <set>

#include "core/config/experiment.hpp"
#include "tests/fuzz/fuzz_contract.hpp"

using namespace tilemix;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_input(data, size, ".json");
  ExperimentConfig config;
  if (!fuzz::accepted([&] { config = load_config(path); })) return 0;
  // A valid config has cases with unique names, valid shapes and a resolved softmax scale.
  if (config.cases.empty()) fuzz::violation("valid config without cases", path);
  std::set<std::string> names;
  for (const CaseSpec& c : config.cases) {
    if (!names.insert(c.name).second) fuzz::violation("duplicate case name", c.name);
    if (c.shape.hq <= 0 || c.shape.hk <= 0 || c.shape.hq % c.shape.hk != 0) fuzz::violation("bad heads", c.name);
    if (!(c.shape.softmax_scale > 0.0f)) fuzz::violation("unresolved softmax scale", c.name);
  }
  return 0;
}
