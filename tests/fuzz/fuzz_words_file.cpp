// The routing-words file reader (JSON or .npy), for a few plan sizes.
#include <cstddef>
#include <cstdint>

#include "core/routing/plan.hpp"
#include "tests/fuzz/fuzz_contract.hpp"

using namespace tilemix;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the format and the plan's size; the rest is the file.
  const bool npy = data[0] & 1;
  const int hk = 1 + ((data[0] >> 1) & 3);
  const int64_t tiles = 1 + (data[0] >> 3);
  const std::string path = fuzz::write_input(data + 1, size - 1, npy ? ".npy" : ".json");
  std::vector<uint64_t> words;
  if (!fuzz::accepted([&] { words = read_words_file(path, hk, tiles); })) return 0;
  if (words.size() != static_cast<size_t>(hk) * tiles) fuzz::violation("word count", path);
  return 0;
}
