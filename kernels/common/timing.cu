// CUDA-event timing with noise-based stopping, L2 flush and clock readings.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "kernels/common/check.cuh"
#include "kernels/common/nvml.cuh"
#include "tilemix/timing.hpp"

namespace tilemix::gpu {
namespace {

struct Event {
  cudaEvent_t e{};
  Event() { TILEMIX_CUDA_CHECK(cudaEventCreate(&e), "timing event"); }
  ~Event() { cudaEventDestroy(e); }
};

// Reads `words` 16-byte words with every thread of the grid, so that L2 ends up holding clean
// lines of this buffer only. A memset flush would leave L2 full of dirty lines, and the timed
// kernel would pay for writing them back: about 50 MB at 4.4 TB/s, 11 us, which was a fifth of
// a 268 MB decode call (docs/perf/decode.md). The sum is stored only if it is impossible, so the
// loads stay.
__global__ void read_flush_kernel(const uint4* buffer, int64_t words, unsigned* sink) {
  unsigned acc = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < words;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint4 x = __ldcg(buffer + i);
    acc ^= x.x ^ x.y ^ x.z ^ x.w;
  }
  if (acc == 0x9e3779b9u && threadIdx.x == 0xffffu) *sink = acc;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

TimingResult time_launches(const std::function<void(int)>& launch, const TimingOptions& opt) {
  int dev = 0;
  TILEMIX_CUDA_CHECK(cudaGetDevice(&dev), "timing");
  int l2_bytes = 0;
  TILEMIX_CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, dev), "timing");
  void* flush = nullptr;
  const size_t flush_bytes = static_cast<size_t>(l2_bytes) * 4;
  if (opt.flush_l2) {
    TILEMIX_CUDA_CHECK(cudaMalloc(&flush, flush_bytes), "L2 flush buffer");
    TILEMIX_CUDA_CHECK(cudaMemset(flush, 0, flush_bytes), "L2 flush buffer");
  }
  int sms = 0;
  TILEMIX_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "timing");

  TimingResult r;
  r.sm_clock_max_mhz = nvml().sm_mhz(true);
  int warmups = 0;
  const auto w0 = std::chrono::steady_clock::now();
  while (warmups < opt.warmup ||
         std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count() < opt.warmup_seconds) {
    launch(warmups++);
    TILEMIX_CUDA_CHECK(cudaDeviceSynchronize(), "warm-up");
  }
  r.sm_clock_start_mhz = nvml().sm_mhz(false);

  Event start, stop;
  const auto t0 = std::chrono::steady_clock::now();
  for (int rep = 0; rep < opt.max_reps; ++rep) {
    if (flush) {
      read_flush_kernel<<<4 * sms, 512>>>(static_cast<const uint4*>(flush), static_cast<int64_t>(flush_bytes / 16),
                                          static_cast<unsigned*>(flush));
      TILEMIX_CUDA_CHECK(cudaGetLastError(), "L2 flush");
    }
    TILEMIX_CUDA_CHECK(cudaEventRecord(start.e), "timing");
    launch(warmups + rep);
    TILEMIX_CUDA_CHECK(cudaEventRecord(stop.e), "timing");
    TILEMIX_CUDA_CHECK(cudaEventSynchronize(stop.e), "timed launch");
    float ms = 0;
    TILEMIX_CUDA_CHECK(cudaEventElapsedTime(&ms, start.e, stop.e), "timing");
    r.ms.push_back(ms);
    const int n = static_cast<int>(r.ms.size());
    if (n >= opt.min_reps) {
      const double mean = std::accumulate(r.ms.begin(), r.ms.end(), 0.0) / n;
      double var = 0;
      for (double x : r.ms) var += (x - mean) * (x - mean);
      const double sem = std::sqrt(var / (n - 1) / n);
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (sem / median_of(r.ms) < opt.noise || elapsed > opt.max_seconds) break;
    }
  }
  if (flush) cudaFree(flush);
  r.sm_clock_end_mhz = nvml().sm_mhz(false);

  r.median_ms = median_of(r.ms);
  r.min_ms = *std::min_element(r.ms.begin(), r.ms.end());
  r.max_ms = *std::max_element(r.ms.begin(), r.ms.end());
  const double mean = std::accumulate(r.ms.begin(), r.ms.end(), 0.0) / r.ms.size();
  double var = 0;
  for (double x : r.ms) var += (x - mean) * (x - mean);
  r.rel_std = r.ms.size() > 1 ? std::sqrt(var / (r.ms.size() - 1)) / mean : 0.0;
  if (r.sm_clock_max_mhz == 0) {
    r.clock_note = nvml().note().empty() ? "SM clock unreadable" : nvml().note();
  } else if (r.sm_clock_end_mhz < 0.9 * r.sm_clock_max_mhz) {
    r.throttled = true;
    r.clock_note = "SM clock " + std::to_string(r.sm_clock_end_mhz) + " MHz after the run, max " +
                   std::to_string(r.sm_clock_max_mhz);
  }
  return r;
}

double measure_copy_bandwidth_gbps(size_t bytes) {
  void *a = nullptr, *b = nullptr;
  TILEMIX_CUDA_CHECK(cudaMalloc(&a, bytes), "copy bandwidth source (" + std::to_string(bytes) + " bytes)");
  TILEMIX_CUDA_CHECK(cudaMalloc(&b, bytes), "copy bandwidth destination (" + std::to_string(bytes) + " bytes)");
  TILEMIX_CUDA_CHECK(cudaMemset(a, 1, bytes), "copy bandwidth");
  TimingOptions opt;
  opt.min_reps = 20;
  opt.max_reps = 50;
  const TimingResult t = time_launches(
      [&](int) { TILEMIX_CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice), "copy bandwidth"); },
      opt);
  cudaFree(a);
  cudaFree(b);
  return 2.0 * static_cast<double>(bytes) / (t.median_ms * 1e-3) / 1e9;
}

}  // namespace tilemix::gpu
