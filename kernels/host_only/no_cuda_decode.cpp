// Decode entry points of a build without CUDA: each reports that the build has no CUDA kernels.
#include <stdexcept>

#include "tilemix/decode.hpp"

namespace tilemix::gpu {

void kv_append(const KvAppendParams&, void*) { throw std::runtime_error("this build has no CUDA kernels"); }
void decode_int8(const DecodeParams&, void*) { throw std::runtime_error("this build has no CUDA kernels"); }
void decode_fp16(const DecodeParams&, void*) { throw std::runtime_error("this build has no CUDA kernels"); }
void fill_random_fp16(void*, int64_t, uint64_t, float, void*) {
  throw std::runtime_error("this build has no CUDA kernels");
}

}  // namespace tilemix::gpu
