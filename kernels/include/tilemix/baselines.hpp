#pragma once
// Baselines for side-by-side runs (SPEC 6 item 5), behind a plain C++ API (no CUDA types):
//   torch_like  unfused cuBLAS attention: S = QK^T GEMM, a softmax kernel, O = PV GEMM (the
//               paper's "Torch" column, which runs out of memory when S does not fit);
//   cudnn_fp16  cuDNN's fused SDPA forward (backend graph API), FP16 Q/K/V/O;
//   cudnn_fp8   the same with E4M3 Q/K/V/P/O and per-tensor scales (the vendor's FP8 path).
// cuBLAS and cuDNN are loaded at run time (dlopen); where one is missing its baselines are
// unavailable and say why, and everything else runs. docs/baselines.md describes the numerics,
// layouts and limits. Pointers in PrefillParams are device pointers; `stream` is a cudaStream_t
// passed as void* (nullptr = default stream).
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>

#include "core/problem.hpp"
#include "tilemix/attention.hpp"
#include "tilemix/device_buffer.hpp"

namespace tilemix::gpu {

enum class Baseline { torch_like, cudnn_fp16, cudnn_fp8 };

// "torch_like", "cudnn_fp16", "cudnn_fp8".
inline const char* baseline_name(Baseline b) {
  switch (b) {
    case Baseline::torch_like: return "torch_like";
    case Baseline::cudnn_fp16: return "cudnn_fp16";
    case Baseline::cudnn_fp8: return "cudnn_fp8";
  }
  return "unknown baseline";
}

// A baseline's device memory does not fit; what() names the bytes asked for.
class OutOfMemory : public std::runtime_error {
 public:
  OutOfMemory(const std::string& what, size_t bytes)
      : std::runtime_error("out of memory: " + what + " needs " + std::to_string(bytes) + " bytes"),
        bytes_asked(bytes) {}
  size_t bytes_asked;
};

// True when `b` can run `shape` (validated) on the current device; otherwise `why` says why, e.g.
// "libcudnn.so.9 not found: <dlerror>" or "unavailable for varlen batches". For the cuDNN
// baselines this builds the execution plan once (answers are remembered per device and shape,
// and the plan is handed to the next CudnnAttention of that shape), so "no cuDNN engine supports
// ..." is reported here too. Memory is not checked: TorchLikeRunner throws OutOfMemory.
bool baseline_available(Baseline b, const AttentionShape& shape, std::string* why = nullptr);

// Provenance: the versions loaded at run time ("9.19.0", "13.1.0"), or "unavailable".
std::string cudnn_version_string();
std::string cublas_version_string();

// Device bytes a TorchLikeRunner for `shape` allocates: the FP16 score/probability matrix
// [hq, Lq, Lk] of the longest sequence (sequences run one after another and share it) plus
// cuBLAS's workspace.
size_t torch_like_workspace_bytes(const AttentionShape& shape);

class TorchLikeRunner {
 public:
  // Allocates the workspace on the current device. Throws OutOfMemory (before any allocation
  // when the bytes exceed the free memory), or std::runtime_error when cuBLAS is unavailable.
  explicit TorchLikeRunner(const AttentionShape& shape);
  ~TorchLikeRunner();
  TorchLikeRunner(TorchLikeRunner&&) noexcept;
  TorchLikeRunner& operator=(TorchLikeRunner&&) noexcept;

  size_t workspace_bytes(MemoryCount how = MemoryCount::allocated) const;
  // Writes O (and LSE when p.lse is set). `p` must describe the constructor's shape.
  void run(const PrefillParams& p, void* stream);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class CudnnAttention {
 public:
  // Builds and finalizes the execution plan of `b` (cudnn_fp16 or cudnn_fp8) for `shape` and
  // allocates its workspace, so that run() only launches. Throws std::runtime_error naming the
  // call and the shape when cuDNN is unavailable or no engine supports the shape.
  CudnnAttention(Baseline b, const AttentionShape& shape);
  ~CudnnAttention();
  CudnnAttention(CudnnAttention&&) noexcept;
  CudnnAttention& operator=(CudnnAttention&&) noexcept;

  Baseline baseline() const;
  // cuDNN's workspace, plus for cudnn_fp8 the E4M3 copies of Q, K, V and O.
  size_t workspace_bytes(MemoryCount how = MemoryCount::allocated) const;
  // Outside the timed region. cudnn_fp8: converts p.q/p.k/p.v to E4M3 with per-tensor scales and
  // calibrates the output scale with one run; run() then reads those copies and must be given
  // the same p.q/p.k/p.v. cudnn_fp16: nothing to do.
  void prepare(const PrefillParams& p, void* stream);
  // Writes O in FP16 (cudnn_fp8: the fused kernel writes E4M3, which one elementwise pass turns
  // into FP16 in p.o). LSE is not written.
  void run(const PrefillParams& p, void* stream);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tilemix::gpu
