// torch_like: unfused attention through cuBLAS, the way PyTorch's math path runs it. Per sequence:
//   S = softmax_scale * Q K^T   strided-batched GEMMs, FP16 in, FP32 accumulate, S stored FP16
//   P = softmax(mask(S))        masked_softmax_kernel, FP32 math, P written over S in FP16
//   O = P V                     strided-batched GEMMs writing the packed [total_q, hq, d] O in place
// S lives in one workspace [hq, Lq, Lk] sized for the longest sequence; sequences run in turn on
// the caller's stream and reuse it.
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "kernels/baselines/availability.hpp"
#include "kernels/baselines/shared_library.hpp"
#include "kernels/common/check.cuh"
#include "tilemix/baselines.hpp"
#include "tilemix/device_buffer.hpp"

namespace tilemix::gpu {
namespace {

constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;  // cuBLAS's advice for Hopper
constexpr int kMaxSoftmaxThreads = 512;

// The header also declares a C++ overload of this name, so the type is spelled out.
using GemmStridedBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                                const void*, const void*, cudaDataType, int, long long, const void*,
                                                cudaDataType, int, long long, const void*, void*, cudaDataType, int,
                                                long long, int, cublasComputeType_t, cublasGemmAlgo_t);

struct CublasApi {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetWorkspace_v2) set_workspace = nullptr;
  decltype(&cublasGetProperty) get_property = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
  GemmStridedBatchedEx gemm = nullptr;
  std::string error;  // empty when every symbol resolved
  std::string version;
};

const CublasApi& cublas() {
  static const CublasApi api = [] {
    static SharedLibrary lib{"libcublas.so.13", "libcublas.so", "/usr/local/cuda/lib64/libcublas.so.13"};
    CublasApi a;
    lib.resolve("cublasCreate_v2", a.create);
    lib.resolve("cublasDestroy_v2", a.destroy);
    lib.resolve("cublasSetStream_v2", a.set_stream);
    lib.resolve("cublasSetWorkspace_v2", a.set_workspace);
    lib.resolve("cublasGetProperty", a.get_property);
    lib.resolve("cublasGetStatusString", a.status_string);
    lib.resolve("cublasGemmStridedBatchedEx", a.gemm);
    if (!lib.loaded()) {
      a.error = lib.error();
      return a;
    }
    int major = 0, minor = 0, patch = 0;
    a.get_property(MAJOR_VERSION, &major);
    a.get_property(MINOR_VERSION, &minor);
    a.get_property(PATCH_LEVEL, &patch);
    a.version = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
    return a;
  }();
  return api;
}

void cublas_check(cublasStatus_t status, const char* call, const std::string& context) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string(call) + " failed: " + cublas().status_string(status) + " [" + context + "]");
  }
}

std::string describe(const AttentionShape& s) {
  int64_t max_lq = 0, max_lk = 0;
  for (int b = 0; b < s.batch(); ++b) {
    max_lq = std::max(max_lq, s.seqlen_q(b));
    max_lk = std::max(max_lk, s.seqlen_k(b));
  }
  return std::string("torch_like(hq=") + std::to_string(s.hq) + " hk=" + std::to_string(s.hk) +
         " d=" + std::to_string(s.d) + " batch=" + std::to_string(s.batch()) + " max_lq=" + std::to_string(max_lq) +
         " max_lk=" + std::to_string(max_lk) + " causal=" + (s.causal ? "1" : "0") + ")";
}

// a * b * c, saturating instead of wrapping, so absurd shapes report absurd sizes.
size_t saturating_product(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t ab = 0, abc = 0;
  if (__builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, &abc)) {
    return std::numeric_limits<size_t>::max();
  }
  return abc;
}

size_t score_bytes(const AttentionShape& s) {
  size_t bytes = 0;
  for (int b = 0; b < s.batch(); ++b) {
    bytes = std::max(bytes, saturating_product(s.hq, s.seqlen_q(b), s.seqlen_k(b)));
  }
  return bytes > std::numeric_limits<size_t>::max() / sizeof(__half) ? std::numeric_limits<size_t>::max()
                                                                      : bytes * sizeof(__half);
}

// Online softmax state of a row part: maximum and sum of exp(x - max).
struct RowState {
  float m;
  float l;
};

__device__ __forceinline__ void absorb(RowState& s, float x) {
  if (x > s.m) {
    s.l = s.l * expf(s.m - x) + 1.0f;
    s.m = x;
  } else {
    s.l += expf(x - s.m);
  }
}

__device__ __forceinline__ RowState combine(RowState a, RowState b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.0f};  // both parts empty
  return {m, a.l * expf(a.m - m) + b.l * expf(b.m - m)};
}

__device__ RowState warp_reduce(RowState s) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    const RowState other{__shfl_xor_sync(0xffffffffu, s.m, offset), __shfl_xor_sync(0xffffffffu, s.l, offset)};
    s = combine(s, other);
  }
  return s;
}

__device__ RowState block_reduce(RowState s) {
  __shared__ RowState warp_states[kMaxSoftmaxThreads / 32];
  __shared__ RowState result;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  s = warp_reduce(s);
  if (lane == 0) warp_states[warp] = s;
  __syncthreads();
  if (warp == 0) {
    s = lane < static_cast<int>(blockDim.x / 32) ? warp_states[lane] : RowState{-INFINITY, 0.0f};
    s = warp_reduce(s);
    if (lane == 0) result = s;
  }
  __syncthreads();
  return result;
}

template <int kVec>
__device__ __forceinline__ void load_halves(const __half* p, float (&x)[kVec]) {
  if constexpr (kVec == 8) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float2 f = __half22float2(h[e]);
      x[2 * e] = f.x;
      x[2 * e + 1] = f.y;
    }
  } else {
    x[0] = __half2float(*p);
  }
}

template <int kVec>
__device__ __forceinline__ void store_halves(__half* p, const float (&x)[kVec]) {
  if constexpr (kVec == 8) {
    uint4 raw;
    __half2* h = reinterpret_cast<__half2*>(&raw);
#pragma unroll
    for (int e = 0; e < 4; ++e) h[e] = __floats2half2_rn(x[2 * e], x[2 * e + 1]);
    *reinterpret_cast<uint4*>(p) = raw;
  } else {
    *p = __float2half_rn(x[0]);
  }
}

// One CTA per (query row i, head h) of one sequence. s: [hq, lq, lk] scaled scores, overwritten
// by P. Keys past the row's bottom-right causal limit get P = 0, so a row without legal keys is
// all zeros and O = P V is zero there, as SPEC 2 asks. lse (optional): [hq, total_q].
// kVec = 8 needs lk % 8 == 0 (16-byte aligned rows).
template <int kVec>
__global__ void __launch_bounds__(kMaxSoftmaxThreads)
    masked_softmax_kernel(__half* __restrict__ s, int64_t lq, int64_t lk, bool causal, float* __restrict__ lse,
                          int64_t lse_row0, int64_t total_q) {
  const int64_t i = blockIdx.x;
  const int h = blockIdx.y;
  __half* row = s + (static_cast<int64_t>(h) * lq + i) * lk;
  const int64_t visible = causal ? min(max(i + lk - lq + 1, int64_t{0}), lk) : lk;
  const int64_t step = static_cast<int64_t>(blockDim.x) * kVec;

  RowState state{-INFINITY, 0.0f};
  for (int64_t j0 = threadIdx.x * kVec; j0 < visible; j0 += step) {
    float x[kVec];
    load_halves<kVec>(row + j0, x);
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      if (j0 + e < visible) absorb(state, x[e]);
    }
  }
  state = block_reduce(state);
  const float inv_l = state.l > 0.0f ? 1.0f / state.l : 0.0f;

  for (int64_t j0 = threadIdx.x * kVec; j0 < lk; j0 += step) {
    float x[kVec] = {};
    if (j0 < visible) load_halves<kVec>(row + j0, x);
#pragma unroll
    for (int e = 0; e < kVec; ++e) x[e] = j0 + e < visible ? expf(x[e] - state.m) * inv_l : 0.0f;
    store_halves<kVec>(row + j0, x);
  }
  if (lse != nullptr && threadIdx.x == 0) {
    lse[static_cast<int64_t>(h) * total_q + lse_row0 + i] = visible > 0 ? state.m + logf(state.l) : -INFINITY;
  }
}

// How the hq query heads are spread over GEMM calls: call c covers query heads
// q_head(c) + n * q_batch_step for n < batch, which read KV heads kv_head(c) + n * kv_batch_step.
// GQA (g = hq / hk query heads per KV head): either one call per group member batched over the
// KV heads, or one call per KV head batched over its group with K/V stride 0; the fewer calls win.
struct HeadBatching {
  int calls, batch;
  int q_call_step, kv_call_step;
  int q_batch_step, kv_batch_step;
};

HeadBatching head_batching(int hq, int hk) {
  const int g = hq / hk;
  if (g <= hk) return {g, hk, 1, 0, g, 1};
  return {hk, g, g, 1, 1, 0};
}

}  // namespace

struct TorchLikeRunner::Impl {
  AttentionShape shape;
  std::string context;
  size_t scores_bytes = 0;
  DeviceBuffer scores;  // FP16 [hq, Lq, Lk] of the longest sequence
  DeviceBuffer cublas_workspace;
  cublasHandle_t handle = nullptr;

  ~Impl() {
    if (handle != nullptr) cublas().destroy(handle);
  }

  void check_params(const PrefillParams& p) const;
  void run_sequence(const PrefillParams& p, int b, cudaStream_t stream);
};

size_t torch_like_workspace_bytes(const AttentionShape& shape) {
  const size_t s = score_bytes(shape);
  return s > std::numeric_limits<size_t>::max() - kCublasWorkspaceBytes ? std::numeric_limits<size_t>::max()
                                                                         : s + kCublasWorkspaceBytes;
}

bool torch_like_available(const AttentionShape& shape, std::string* why) {
  const CublasApi& api = cublas();
  if (!api.error.empty()) {
    if (why) *why = api.error;
    return false;
  }
  const int64_t int_max = std::numeric_limits<int>::max();
  for (int b = 0; b < shape.batch(); ++b) {
    if (shape.seqlen_q(b) > int_max || shape.seqlen_k(b) > int_max) {
      if (why) *why = "sequence lengths above 2^31 - 1 do not fit cuBLAS's int dimensions";
      return false;
    }
  }
  if (static_cast<int64_t>(shape.hq) * shape.d > int_max) {
    if (why) *why = "hq * d above 2^31 - 1 does not fit cuBLAS's int leading dimension";
    return false;
  }
  return true;
}

std::string cublas_version_string() {
  const CublasApi& api = cublas();
  return api.error.empty() ? api.version : "unavailable";
}

TorchLikeRunner::TorchLikeRunner(const AttentionShape& shape) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.shape = shape;
  m.context = describe(shape);
  m.scores_bytes = score_bytes(shape);
  const size_t bytes = torch_like_workspace_bytes(shape);
  const std::string what = m.context + " score matrix [hq, Lq, Lk] FP16 and cuBLAS workspace";
  size_t free_bytes = 0, total_bytes = 0;
  TILEMIX_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes), m.context);
  if (bytes > free_bytes) {
    throw OutOfMemory(what + " (" + std::to_string(free_bytes) + " of " + std::to_string(total_bytes) +
                          " device bytes free)",
                      bytes);
  }
  std::string why;
  if (!torch_like_available(shape, &why)) throw std::runtime_error(m.context + ": unavailable: " + why);
  try {
    m.scores = DeviceBuffer(m.scores_bytes, "torch_like scores");
    m.cublas_workspace = DeviceBuffer(kCublasWorkspaceBytes, "cuBLAS workspace");
  } catch (const CudaError& e) {
    if (e.code != cudaErrorMemoryAllocation) throw;
    cudaGetLastError();  // the failed allocation is not sticky; clear it for later checks
    throw OutOfMemory(what, bytes);
  }
  cublas_check(cublas().create(&m.handle), "cublasCreate", m.context);
}

TorchLikeRunner::~TorchLikeRunner() = default;
TorchLikeRunner::TorchLikeRunner(TorchLikeRunner&&) noexcept = default;
TorchLikeRunner& TorchLikeRunner::operator=(TorchLikeRunner&&) noexcept = default;

size_t TorchLikeRunner::workspace_bytes(MemoryCount how) const {
  return impl_->scores.count(how) + impl_->cublas_workspace.count(how);
}

void TorchLikeRunner::Impl::check_params(const PrefillParams& p) const {
  const bool same = p.hq == shape.hq && p.hk == shape.hk && p.d == shape.d && p.batch == shape.batch() &&
                    p.total_q == shape.total_q() && p.total_k == shape.total_k() && p.causal == shape.causal;
  if (!same) {
    throw std::invalid_argument(context + ": run() with params of another shape (hq=" + std::to_string(p.hq) +
                                " hk=" + std::to_string(p.hk) + " d=" + std::to_string(p.d) +
                                " batch=" + std::to_string(p.batch) + " total_q=" + std::to_string(p.total_q) + ")");
  }
  if (!(std::isfinite(p.softmax_scale) && p.softmax_scale > 0.0f)) {
    throw std::invalid_argument(context + ": softmax_scale must be positive and finite");
  }
  if (shape.total_q() > 0 && (p.q == nullptr || p.k == nullptr || p.v == nullptr || p.o == nullptr)) {
    throw std::invalid_argument(context + ": q, k, v and o must be device pointers");
  }
}

void TorchLikeRunner::Impl::run_sequence(const PrefillParams& p, int b, cudaStream_t stream) {
  const int64_t q0 = shape.cu_seqlens_q[b], k0 = shape.cu_seqlens_k[b];
  const int lq = static_cast<int>(shape.seqlen_q(b)), lk = static_cast<int>(shape.seqlen_k(b));
  if (lq == 0) return;
  const int hq = shape.hq, hk = shape.hk, d = shape.d;
  const std::string where = context + " sequence " + std::to_string(b);
  const __half* q = static_cast<const __half*>(p.q) + q0 * hq * d;
  const __half* k = static_cast<const __half*>(p.k) + k0 * hk * d;
  const __half* v = static_cast<const __half*>(p.v) + k0 * hk * d;
  __half* o = static_cast<__half*>(p.o) + q0 * hq * d;
  __half* s = scores.as<__half>();
  const int64_t head_scores = static_cast<int64_t>(lq) * lk;
  const HeadBatching hb = head_batching(hq, hk);
  const CublasApi& api = cublas();

  if (lk > 0) {
    // cuBLAS is column-major: row-major S [lq, lk] is S^T [lk, lq] = K Q^T, K read transposed.
    const float alpha = p.softmax_scale, beta = 0.0f;
    for (int c = 0; c < hb.calls; ++c) {
      const int qh = c * hb.q_call_step, kvh = c * hb.kv_call_step;
      cublas_check(api.gemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, lk, lq, d, &alpha, k + kvh * d, CUDA_R_16F, hk * d,
                            static_cast<long long>(hb.kv_batch_step) * d, q + qh * d, CUDA_R_16F, hq * d,
                            static_cast<long long>(hb.q_batch_step) * d, &beta, s + qh * head_scores, CUDA_R_16F, lk,
                            hb.q_batch_step * head_scores, hb.batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                   "cublasGemmStridedBatchedEx(S = QK^T)", where);
    }
  } else {
    // No keys: every row of this sequence outputs zeros.
    TILEMIX_CUDA_CHECK(cudaMemsetAsync(o, 0, static_cast<size_t>(lq) * hq * d * sizeof(__half), stream), where);
    if (p.lse == nullptr) return;
  }

  const dim3 grid(static_cast<unsigned>(lq), static_cast<unsigned>(hq));
  const bool vectorized = lk % 8 == 0;
  const int64_t per_thread = vectorized ? 8 : 1;
  const int threads =
      static_cast<int>(std::clamp<int64_t>((lk / per_thread + 31) / 32 * 32, 32, kMaxSoftmaxThreads));
  if (vectorized) {
    masked_softmax_kernel<8><<<grid, threads, 0, stream>>>(s, lq, lk, shape.causal, p.lse, q0, shape.total_q());
  } else {
    masked_softmax_kernel<1><<<grid, threads, 0, stream>>>(s, lq, lk, shape.causal, p.lse, q0, shape.total_q());
  }
  TILEMIX_LAUNCH_CHECK("masked_softmax_kernel", where);
  if (lk == 0) return;

  // Row-major O [lq, d] with row stride hq * d is O^T [d, lq] = V^T P^T in column-major terms.
  const float one = 1.0f, zero = 0.0f;
  for (int c = 0; c < hb.calls; ++c) {
    const int qh = c * hb.q_call_step, kvh = c * hb.kv_call_step;
    cublas_check(api.gemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, d, lq, lk, &one, v + kvh * d, CUDA_R_16F, hk * d,
                          static_cast<long long>(hb.kv_batch_step) * d, s + qh * head_scores, CUDA_R_16F, lk,
                          hb.q_batch_step * head_scores, &zero, o + qh * d, CUDA_R_16F, hq * d,
                          static_cast<long long>(hb.q_batch_step) * d, hb.batch, CUBLAS_COMPUTE_32F,
                          CUBLAS_GEMM_DEFAULT),
                 "cublasGemmStridedBatchedEx(O = PV)", where);
  }
}

void TorchLikeRunner::run(const PrefillParams& p, void* stream) {
  Impl& m = *impl_;
  m.check_params(p);
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  // Setting the stream resets cuBLAS to its own workspace pool, so the workspace follows it.
  cublas_check(cublas().set_stream(m.handle, s), "cublasSetStream", m.context);
  cublas_check(cublas().set_workspace(m.handle, m.cublas_workspace.data(), m.cublas_workspace.bytes()),
               "cublasSetWorkspace", m.context);
  for (int b = 0; b < m.shape.batch(); ++b) m.run_sequence(p, b, s);
}

}  // namespace tilemix::gpu
