// Built when the CUDA kernels are not: every baseline reports that the build has no CUDA kernels.
#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

#include "tilemix/baselines.hpp"

namespace tilemix::gpu {
namespace {
const char kNoCuda[] = "this build has no CUDA kernels";
}

bool baseline_available(Baseline, const AttentionShape&, std::string* why) {
  if (why) *why = kNoCuda;
  return false;
}

std::string cudnn_version_string() { return "unavailable"; }
std::string cublas_version_string() { return "unavailable"; }

// The size is known without a GPU (FP16 scores of the longest sequence plus cuBLAS's 32 MiB).
size_t torch_like_workspace_bytes(const AttentionShape& shape) {
  long double bytes = 0;
  for (int b = 0; b < shape.batch(); ++b) {
    bytes = std::max(bytes, 2.0L * shape.hq * shape.seqlen_q(b) * shape.seqlen_k(b));
  }
  bytes += 32.0L * 1024 * 1024;
  const long double cap = static_cast<long double>(std::numeric_limits<size_t>::max());
  return bytes >= cap ? std::numeric_limits<size_t>::max() : static_cast<size_t>(bytes);
}

struct TorchLikeRunner::Impl {};
TorchLikeRunner::TorchLikeRunner(const AttentionShape&) { throw std::runtime_error(kNoCuda); }
TorchLikeRunner::~TorchLikeRunner() = default;
TorchLikeRunner::TorchLikeRunner(TorchLikeRunner&&) noexcept = default;
TorchLikeRunner& TorchLikeRunner::operator=(TorchLikeRunner&&) noexcept = default;
size_t TorchLikeRunner::workspace_bytes(MemoryCount) const { return 0; }
void TorchLikeRunner::run(const PrefillParams&, void*) { throw std::runtime_error(kNoCuda); }

struct CudnnAttention::Impl {};
CudnnAttention::CudnnAttention(Baseline, const AttentionShape&) { throw std::runtime_error(kNoCuda); }
CudnnAttention::~CudnnAttention() = default;
CudnnAttention::CudnnAttention(CudnnAttention&&) noexcept = default;
CudnnAttention& CudnnAttention::operator=(CudnnAttention&&) noexcept = default;
Baseline CudnnAttention::baseline() const { return Baseline::cudnn_fp16; }
size_t CudnnAttention::workspace_bytes(MemoryCount) const { return 0; }
void CudnnAttention::prepare(const PrefillParams&, void*) { throw std::runtime_error(kNoCuda); }
void CudnnAttention::run(const PrefillParams&, void*) { throw std::runtime_error(kNoCuda); }

}  // namespace tilemix::gpu
