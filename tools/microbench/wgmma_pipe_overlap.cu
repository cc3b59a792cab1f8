// What runs beside a warpgroup MMA on one multiprocessor (docs/perf/decode.md, "What a wgmma
// shares the SM with"). An MMA group is the decode kernel's Q K^T of one 64-key tile at d = 128:
// 8 x wgmma.m64n64k16 FP16 -> FP32 with both operands in shared memory (`f16 ss`) or A in
// registers (`f16 rs`, as the all-FP16 instance holds Q), or 4 x m64n64k32 INT8 -> INT32 (`s8 ss`).
// Every group accumulates into the previous result (a group that starts with scale-d = 0 ran
// faster than the tensor cores' peak here, so it is no measure of the work). Two experiments,
// clocks per iteration as medians over the CTAs:
//   own:       one CTA per SM: the f16 ss group issued, N x 8 FFMA of the same warps, then the wait
//              for the group; against each alone
//   neighbour: two CTAs per SM: CTAs 0..131 an MMA group, CTAs 132..263 one kind of CUDA-core work
//              (FFMA, FADD, FMUL, FMNMX, F2FP, I2F, LOP3 + IADD, MUFU.EX2, HFMA2, LDS, PRMT + IADD);
//              against each alone; only SMs that got one CTA of each count
// Built with the CUDA build (tools/CMakeLists.txt); scripts/microbench.sh stages it. Run on an sm_90a GPU with 132 SMs.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/common/check.cuh"
#include "kernels/common/wgmma.cuh"

using namespace tilemix::gpu;

#define CHECK_CUDA(call) TILEMIX_CUDA_CHECK(call, "wgmma_pipe_overlap")

namespace {

constexpr int kSms = 132, kIters = 1000, kSmemBytes = 100 * 1024;  // 100 KB: at most two CTAs per SM

enum Work { kNone, kFfma, kFadd, kFmul, kFmnmx, kF2fp, kI2f, kLop3Iadd, kMufuEx2, kHfma2, kLds, kPrmtIadd };
enum Mma { kF16Ss, kF16Rs, kS8Ss };

template <Mma kMma>
using Accumulator = std::conditional_t<kMma == kS8Ss, int, float>;

// Issues the MMA group; the caller waits for it (wgmma_wait_all) after its own work, if any.
// `a_frag` is the register A operand of the rs group (its values do not matter for the timing).
template <Mma kMma>
__device__ __forceinline__ void issue_mma_group(Accumulator<kMma> (&acc)[32], uint64_t a_desc, uint64_t b_desc,
                                                const uint32_t (&a_frag)[4]) {
  wgmma_fence_operands(acc);
  wgmma_fence();
  if constexpr (kMma == kS8Ss) {
#pragma unroll
    for (int k = 0; k < 4; ++k) wgmma_m64n64k32_s8(acc, desc_advance(a_desc, 32 * k), desc_advance(b_desc, 32 * k), 1);
  } else {
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const uint32_t step = 32 * (k % 4) + (k / 4) * 8192;
      if constexpr (kMma == kF16Rs) {
        wgmma_m64n64k16_f16_rs(acc, a_frag, desc_advance(b_desc, step), 1);
      } else {
        wgmma_m64n64k16_f16(acc, desc_advance(a_desc, step), desc_advance(b_desc, step), 1);
      }
    }
  }
  wgmma_commit();
}

// `rounds` x 8 independent operations of one kind per thread.
template <Work kWork>
__device__ __forceinline__ void cuda_core_work(int rounds, float (&f)[8], uint32_t (&u)[8], const char* smem) {
  for (int r = 0; r < rounds; ++r) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      if constexpr (kWork == kFfma) f[j] = __fmaf_rn(f[j], 1.0001f, 0.5f);
      if constexpr (kWork == kFadd) f[j] = __fadd_rn(f[j], 0.5f);
      if constexpr (kWork == kFmul) f[j] = __fmul_rn(f[j], 1.0001f);
      if constexpr (kWork == kFmnmx) f[j] = fmaxf(f[j], f[(j + 1) % 8]);
      if constexpr (kWork == kF2fp) {
        const __half2 h = __floats2half2_rn(f[j], __uint_as_float(u[j]));
        u[j] = *reinterpret_cast<const uint32_t*>(&h);
      }
      if constexpr (kWork == kI2f) u[j] = __float_as_uint(__int2float_rn(static_cast<int>(u[j])));
      if constexpr (kWork == kLop3Iadd) u[j] = (u[j] ^ (u[j] >> 3)) + 0x9e3779b9u;
      if constexpr (kWork == kMufuEx2) asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(f[j]));
      if constexpr (kWork == kHfma2) {
        __half2 h = *reinterpret_cast<__half2*>(&u[j]);
        h = __hfma2(h, h, h);
        u[j] = *reinterpret_cast<uint32_t*>(&h);
      }
      if constexpr (kWork == kLds) u[j] += *reinterpret_cast<const uint32_t*>(smem + ((u[j] + threadIdx.x * 4 + r * 512) & 0x3ffc));
      if constexpr (kWork == kPrmtIadd) u[j] = __byte_perm(u[j], 0x64646464u, 0x7250) + r;
    }
  }
}

// CTAs below `mma_ctas` run the MMA group (then `own_rounds` of FFMA), the others `rounds` of kWork.
template <Work kWork, Mma kMma>
__global__ void __launch_bounds__(128) probe_kernel(int mma_ctas, int own_rounds, int rounds, long long* cycles, int* sm_of_cta,
                                                    float* sink) {
  extern __shared__ __align__(1024) char smem_raw[];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t base = (raw + 1023u) & ~1023u;
  for (int i = threadIdx.x; i < 8192; i += 128) reinterpret_cast<uint32_t*>(smem_raw)[i] = 0x3c003c00u ^ (i & 0xff);
  __syncthreads();
  fence_proxy_async_shared();
  const uint64_t a_desc = sw128_desc(base), b_desc = sw128_desc(base + 16384);
  Accumulator<kMma> acc[32];
  float f[8];
  uint32_t u[8], a_frag[4];
  for (int i = 0; i < 32; ++i) acc[i] = 0;
  for (int i = 0; i < 4; ++i) a_frag[i] = 0x3c003c00u ^ (threadIdx.x + i);
  for (int j = 0; j < 8; ++j) f[j] = threadIdx.x * 0.001f + j, u[j] = threadIdx.x + j;
  __syncthreads();
  const bool mma = static_cast<int>(blockIdx.x) < mma_ctas;
  const long long start = clock64();
  for (int it = 0; it < kIters; ++it) {
    if (mma) {
      issue_mma_group<kMma>(acc, a_desc, b_desc, a_frag);
      cuda_core_work<kFfma>(own_rounds, f, u, smem_raw);  // while the group runs
      wgmma_wait_all();
      wgmma_fence_operands(acc);
    } else {
      cuda_core_work<kWork>(rounds, f, u, smem_raw);
    }
  }
  const long long end = clock64();
  if (threadIdx.x == 0) {
    cycles[blockIdx.x] = end - start;
    int sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    sm_of_cta[blockIdx.x] = sm;
  }
  float total = 0.0f;
  for (int i = 0; i < 32; ++i) total += static_cast<float>(acc[i]);
  for (int j = 0; j < 8; ++j) total += f[j] + static_cast<float>(u[j]);
  sink[blockIdx.x * 128 + threadIdx.x] = total;
}

struct Probe {
  long long* cycles;
  int* sm_of_cta;
  float* sink;
};

// One launch of `ctas` CTAs: median clocks per iteration of the MMA CTAs and of the work CTAs, and
// the SMs that got one of each.
template <Work kWork, Mma kMma = kF16Ss>
std::vector<double> launch(const Probe& pr, int ctas, int mma_ctas, int own_rounds, int rounds) {
  CHECK_CUDA(cudaFuncSetAttribute(probe_kernel<kWork, kMma>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  probe_kernel<kWork, kMma><<<ctas, 128, kSmemBytes>>>(mma_ctas, own_rounds, rounds, pr.cycles, pr.sm_of_cta, pr.sink);
  TILEMIX_LAUNCH_CHECK("probe_kernel", "ctas=" + std::to_string(ctas));
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<long long> c(ctas);
  std::vector<int> sm(ctas);
  CHECK_CUDA(cudaMemcpy(c.data(), pr.cycles, sizeof(long long) * ctas, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(sm.data(), pr.sm_of_cta, sizeof(int) * ctas, cudaMemcpyDeviceToHost));
  // The neighbour experiment counts only SMs that got one MMA CTA and one work CTA (the block
  // scheduler does not promise that pairing).
  std::map<int, std::pair<int, int>> on;  // %smid -> MMA CTAs, work CTAs
  for (int i = 0; i < ctas; ++i) ++(i < mma_ctas ? on[sm[i]].first : on[sm[i]].second);
  const bool neighbours = ctas > kSms && mma_ctas < ctas;
  const auto counted = [&](int i) { return !neighbours || (on[sm[i]].first == 1 && on[sm[i]].second == 1); };
  int paired = 0;
  for (const auto& [id, n] : on) paired += n.first == 1 && n.second == 1;
  const auto median = [&](int first, int last) {
    std::vector<long long> v;
    for (int i = first; i < last; ++i) {
      if (counted(i)) v.push_back(c[i]);
    }
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : static_cast<double>(v[v.size() / 2]) / kIters;
  };
  return {median(0, std::min(mma_ctas, ctas)), median(std::min(mma_ctas, ctas), ctas), static_cast<double>(paired)};
}

template <Work kWork, Mma kMma>
void neighbour_row(const Probe& pr, const char* name, int rounds) {
  const double mma_alone = launch<kWork, kMma>(pr, kSms, kSms, 0, rounds)[0];
  const double work_alone = launch<kWork, kMma>(pr, kSms, 0, 0, rounds)[1];
  const std::vector<double> both = launch<kWork, kMma>(pr, 2 * kSms, kSms, 0, rounds);
  std::printf("| %s x %d | %.1f | %.1f | %.1f (%+.0f%%) | %.1f (%+.0f%%) | %.0f |\n", name, 8 * rounds, mma_alone, work_alone,
              both[0], 100.0 * (both[0] / mma_alone - 1.0), both[1], 100.0 * (both[1] / work_alone - 1.0), both[2]);
}

template <Mma kMma>
void neighbour_table(const Probe& pr, const char* mma_name) {
  std::printf("\n## neighbour, MMA group %s: an MMA CTA and a CUDA-core CTA on each SM, clocks per iteration\n\n",
              mma_name);
  std::printf("| work per thread | MMA alone | work alone | MMA beside work | work beside MMA | SMs counted |\n"
              "| --- | ---: | ---: | ---: | ---: | ---: |\n");
  neighbour_row<kFfma, kMma>(pr, "FFMA", 32);
  neighbour_row<kFadd, kMma>(pr, "FADD", 32);
  neighbour_row<kFmul, kMma>(pr, "FMUL", 32);
  neighbour_row<kFmnmx, kMma>(pr, "FMNMX", 32);
  neighbour_row<kF2fp, kMma>(pr, "F2FP (pack to half2)", 32);
  neighbour_row<kI2f, kMma>(pr, "I2F", 32);
  neighbour_row<kLop3Iadd, kMma>(pr, "LOP3 + IADD", 32);
  neighbour_row<kMufuEx2, kMma>(pr, "MUFU.EX2", 32);
  neighbour_row<kHfma2, kMma>(pr, "HFMA2", 32);
  neighbour_row<kLds, kMma>(pr, "LDS", 32);
  neighbour_row<kPrmtIadd, kMma>(pr, "PRMT + IADD", 32);
}

void run() {
  int sms = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  if (sms != kSms) std::printf("note: %d SMs; the CTA placement assumes %d\n", sms, kSms);
  Probe pr{};
  CHECK_CUDA(cudaMalloc(&pr.cycles, sizeof(long long) * 2 * kSms));
  CHECK_CUDA(cudaMalloc(&pr.sm_of_cta, sizeof(int) * 2 * kSms));
  CHECK_CUDA(cudaMalloc(&pr.sink, sizeof(float) * 2 * kSms * 128));

  std::printf("## own: FFMA of the warps that issued the MMA group, before they wait for it (one CTA per SM), clocks per iteration\n\n");
  std::printf("| FFMA per thread | MMA alone | FFMA alone | MMA with FFMA under it | sum of the two |\n| ---: | ---: | ---: | ---: | ---: |\n");
  for (int rounds : {8, 32, 64}) {
    const double mma = launch<kNone>(pr, kSms, kSms, 0, 0)[0];
    const double ffma = launch<kFfma>(pr, kSms, 0, 0, rounds)[1];
    const double both = launch<kNone>(pr, kSms, kSms, rounds, 0)[0];
    std::printf("| %d | %.1f | %.1f | %.1f | %.1f |\n", 8 * rounds, mma, ffma, both, mma + ffma);
  }
  neighbour_table<kF16Ss>(pr, "f16 ss (8 x m64n64k16, A and B in shared memory)");
  neighbour_table<kF16Rs>(pr, "f16 rs (8 x m64n64k16, A in registers)");
  neighbour_table<kS8Ss>(pr, "s8 ss (4 x m64n64k32 INT8 -> INT32)");
  CHECK_CUDA(cudaFree(pr.cycles));
  CHECK_CUDA(cudaFree(pr.sm_of_cta));
  CHECK_CUDA(cudaFree(pr.sink));
}

}  // namespace

int main() {
  try {
    run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "wgmma_pipe_overlap: %s\n", e.what());
    return 1;
  }
  return 0;
}
