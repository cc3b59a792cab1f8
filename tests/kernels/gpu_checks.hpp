#pragma once
// Comparisons of kernel outputs with the emulator (tight: the same operations at the same
// rounding points) and with the exact reference (no worse than the emulator itself).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/metrics.hpp"
#include "reference/emulator.hpp"
#include "reference/exact.hpp"
#include "apps/common/gpu_problem.hpp"

namespace tilemix::testing {

using app::KernelOutput;
using app::half_ulp_distance;

// Bit for bit, NaN payloads included (the CPU and GPU builders of codes, scales and words).
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Kernel vs emulator. What may differ: fp32 summation order inside the tensor cores and in the
// quad reductions of row sums, and ex2.approx against libm exp2. Each shows as an occasional
// one-ulp difference of an FP16 output.
inline Tolerance tight_vs_emulator() {
  Tolerance t;
  t.rel_l2 = 2e-3;
  return t;
}

struct Agreement {
  Deviation dev;
  int64_t unwritten = 0;      // O elements still holding the poison (NaN) pattern, or any NaN
  int64_t lse_unwritten = 0;  // LSE NaNs
  double within_2ulp = 0.0;   // share of O elements within 2 FP16 ulps of the emulator
  int max_ulp = 0;
  int64_t lse_inf_mismatch = 0;  // -inf on one side only
  double max_lse_diff = 0.0;

  std::string describe() const {
    return "rel_l2=" + std::to_string(dev.rel_l2) + " max_abs=" + std::to_string(dev.max_abs) +
           " unwritten=" + std::to_string(unwritten) + " lse_unwritten=" + std::to_string(lse_unwritten) +
           " within_2ulp=" + std::to_string(within_2ulp) + " max_ulp=" + std::to_string(max_ulp) +
           " lse_inf_mismatch=" + std::to_string(lse_inf_mismatch) + " max_lse_diff=" + std::to_string(max_lse_diff);
  }
};

inline Agreement compare_outputs(const KernelOutput& got, const EmulatorResult& want) {
  Agreement a;
  a.dev = deviation(half_to_double(got.o), half_to_double(want.o));
  int64_t close = 0;
  for (size_t i = 0; i < got.o.size(); ++i) {
    const uint16_t h = got.o[i];
    if ((h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0) ++a.unwritten;
    const int ulp = half_ulp_distance(h, want.o[i]);
    a.max_ulp = std::max(a.max_ulp, ulp);
    close += ulp <= 2;
  }
  a.within_2ulp = got.o.empty() ? 1.0 : static_cast<double>(close) / static_cast<double>(got.o.size());
  for (size_t i = 0; i < got.lse.size(); ++i) {
    const float g = got.lse[i], w = want.lse[i];
    if (std::isnan(g)) {
      ++a.lse_unwritten;
    } else if (std::isinf(g) || std::isinf(w)) {
      a.lse_inf_mismatch += g != w;
    } else {
      a.max_lse_diff = std::max(a.max_lse_diff, static_cast<double>(std::fabs(g - w)));
    }
  }
  return a;
}

// Tight agreement: every element written, no NaN, the output within the tight tolerance with
// nearly every element within two ulps (the rest are values near zero, where FP16 ulps are finer
// than the fp32 summation noise), the same empty rows and LSE within fp32 noise. With fp16 state l
// is rounded to fp16, and one ulp of l moves LSE by ln(1 + 2^-10) ~ 1e-3. With fp16 accumulation
// O is rounded after every 16 keys (the emulator: the k16 sum in fp32, then one rounding); where
// the tensor core's sum rounds to the other neighbour, the one-ulp differences add up along the
// row: at 4200 keys 0.992-0.995 of the elements stay within two ulps (wgmma, H200), at rel_l2
// 1e-4, so the share asked there is 0.99.
inline bool tight(const Agreement& a, StatePrecision state = StatePrecision::fp32,
                  AccumPrecision accum = AccumPrecision::fp32) {
  const double lse_tol = state == StatePrecision::fp16 ? 2.5e-3 : 1e-4;
  const double close_share = accum == AccumPrecision::fp16 ? 0.99 : 0.995;
  return a.unwritten == 0 && a.lse_unwritten == 0 && within(a.dev, tight_vs_emulator()) &&
         a.within_2ulp >= close_share && a.lse_inf_mismatch == 0 && a.max_lse_diff < lse_tol;
}

// Kernel vs exact reference, relative to the emulator's own distance from it: the kernel may not
// be measurably less accurate than the model of its numerics.
inline bool as_accurate_as_emulator(const KernelOutput& got, const EmulatorResult& emu, const ExactResult& exact,
                                    std::string* why) {
  const Deviation k = deviation(half_to_double(got.o), exact.o);
  const Deviation e = deviation(half_to_double(emu.o), exact.o);
  if (why) {
    *why = "kernel rel_l2=" + std::to_string(k.rel_l2) + " emulator rel_l2=" + std::to_string(e.rel_l2) +
           " kernel cosine=" + std::to_string(k.cosine);
  }
  return k.nonfinite == 0 && k.rel_l2 <= 1.1 * e.rel_l2 + 1e-4 && k.cosine >= 0.999 * e.cosine;
}

}  // namespace tilemix::testing
