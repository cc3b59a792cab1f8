// The .npy reader: header and payload of every dtype and shape.
#include <cstddef>
#include <cstdint>

#include "core/inputs/npy.hpp"
#include "tests/fuzz/fuzz_contract.hpp"

using namespace tilemix;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_input(data, size, ".npy");
  NpyArray a;
  if (!fuzz::accepted([&] { a = read_npy(path); })) return 0;
  // A valid array holds exactly the bytes its shape and dtype ask for.
  size_t elements = 1;
  for (int64_t n : a.shape) {
    if (n < 0) fuzz::violation("negative extent", path);
    elements *= static_cast<size_t>(n);
  }
  if (a.data.size() != elements * npy_item_size(a.dtype)) fuzz::violation("payload size", path);
  // The FP16 view of the same file, with the shape it holds.
  fuzz::accepted([&] { read_npy_as_half(path, a.shape, "[fuzz]"); });
  return 0;
}
