// What the FP8 tensor-core product (wgmma m64n64k32 e4m3, FP32 accumulators) keeps: the
// operand layouts against a double-precision product, the bits of a sum 1 + 2^-e that it keeps
// within one product and when added into an accumulator, and how it drops the others.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "core/fp8.hpp"
#include "tilemix/fp8_mma.hpp"

using namespace tilemix;

namespace {

// E4M3 code of 2^-e (e in [0, 9]: normals down to 2^-6, subnormals 2^-7 .. 2^-9).
uint8_t power_of_two_code(int e) { return float_to_fp8_e4m3(std::ldexp(1.0f, -e)); }

// The smallest 2^-e (e up to 18) with D = 1 + 2^-e exact, and whether every larger one is.
int exact_down_to(const std::vector<float>& d, const std::vector<int>& exponent_of) {
  int deepest = 0;
  for (int e = 1; e <= 18; ++e) {
    bool all = true, seen = false;
    for (size_t i = 0; i < d.size(); ++i) {
      if (exponent_of[i] != e) continue;
      seen = true;
      all = all && d[i] == 1.0f + std::ldexp(1.0f, -e);
    }
    if (!seen) continue;
    if (!all) break;
    deepest = e;
  }
  return deepest;
}

}  // namespace

TEST_CASE("the FP8 MMA's operands land where the layout says", "[gpu][fp8]") {
  std::mt19937 rng(91);
  std::vector<uint8_t> a(64 * 32), b(64 * 32);
  // Small codes (|x| <= 2, 2 mantissa bits) so that every partial sum is exact in 13 bits.
  const float values[] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, -0.5f, -1.0f, -1.5f, -2.0f};
  for (auto& x : a) x = float_to_fp8_e4m3(values[rng() % 9]);
  for (auto& x : b) x = float_to_fp8_e4m3(values[rng() % 9]);
  std::vector<float> c(64 * 64);
  for (size_t i = 0; i < c.size(); ++i) c[i] = static_cast<float>(i % 7) - 3.0f;
  for (const bool accumulate : {false, true}) {
    const std::vector<float> d = gpu::fp8_mma_m64n64k32(a, b, c, accumulate);
    int wrong = 0;
    for (int r = 0; r < 64; ++r) {
      for (int n = 0; n < 64; ++n) {
        double want = accumulate ? c[r * 64 + n] : 0.0;
        for (int k = 0; k < 32; ++k) want += double{fp8_e4m3_to_float(a[r * 32 + k])} * fp8_e4m3_to_float(b[n * 32 + k]);
        wrong += d[r * 64 + n] != static_cast<float>(want);
      }
    }
    INFO("accumulate " << accumulate);
    CHECK(wrong == 0);
  }
}

TEST_CASE("the FP8 MMA's accumulator: the bits of 1 + 2^-e it keeps", "[gpu][fp8]") {
  // Row r, column n: A[r] = (1, 2^-er), B[n] = (1, 2^-en), so D = 1 + 2^-(er + en), e from 1 to
  // 18, within one product; then C = 1 and A[r][0] B[n][0] = 2^-(er + en), the add into C.
  std::vector<uint8_t> a(64 * 32, 0), b(64 * 32, 0);
  std::vector<int> exponent_of(64 * 64);
  for (int r = 0; r < 64; ++r) {
    a[r * 32] = power_of_two_code(0);
    a[r * 32 + 1] = power_of_two_code(r % 10);
  }
  for (int n = 0; n < 64; ++n) {
    b[n * 32] = power_of_two_code(0);
    b[n * 32 + 1] = power_of_two_code(n % 10);
  }
  for (int r = 0; r < 64; ++r) {
    for (int n = 0; n < 64; ++n) exponent_of[r * 64 + n] = r % 10 + n % 10;
  }
  const std::vector<float> zero(64 * 64, 0.0f), one(64 * 64, 1.0f);
  const std::vector<float> inside = gpu::fp8_mma_m64n64k32(a, b, zero, false);
  std::vector<uint8_t> a_small(64 * 32, 0), b_small(64 * 32, 0);
  for (int r = 0; r < 64; ++r) a_small[r * 32] = power_of_two_code(r % 10);
  for (int n = 0; n < 64; ++n) b_small[n * 32] = power_of_two_code(n % 10);
  const std::vector<float> into_c = gpu::fp8_mma_m64n64k32(a_small, b_small, one, true);
  const int kept_inside = exact_down_to(inside, exponent_of), kept_into_c = exact_down_to(into_c, exponent_of);
  WARN("FP8 MMA: 1 + 2^-e exact within one product down to e = " << kept_inside << ", added into C down to e = "
                                                                  << kept_into_c);
  // Measured on the H200 (sm_90a): 13 bits below the leading one, inside the product and in the
  // add into C alike (SageAttention2 reports the same 22-bit accumulator). Summing a long row of
  // P V tiles in it would lose up to 2^-13 of O per tile; the FP8 path therefore sums each tile
  // from zero and adds it into an FP32 O (core/quant_fp8.hpp).
  CHECK(kept_inside == 13);
  CHECK(kept_into_c == 13);
}

TEST_CASE("the FP8 MMA's accumulator: how it rounds what it drops", "[gpu][fp8]") {
  // Row 0: 1 + 2^-13 + 2^-14 (a tie at 13 kept bits: to even gives 1 + 2^-12, truncation
  // 1 + 2^-13); row 1: 1 + 2^-14 + 2^-15 (3/4 of a unit: to nearest gives 1 + 2^-13, truncation
  // 1); rows 2 and 3 the same sums with the 1 in C.
  // Products below 2^-9 take two factors: 2^-7 in A, the rest in B's row 0 (column 0 of the product).
  std::vector<uint8_t> a(64 * 32, 0), b(64 * 32, 0);
  std::vector<float> c(64 * 64, 0.0f);
  // B[0][k] for k = 0 .. 3: 1, 2^-6, 2^-7, 2^-8 (each term is A[r][k] B[0][k]).
  b[0] = power_of_two_code(0);
  b[1] = power_of_two_code(6);
  b[2] = power_of_two_code(7);
  b[3] = power_of_two_code(8);
  // Row 0: 1 * 1 + 2^-7 * 2^-6 + 2^-7 * 2^-7 = 1 + 2^-13 + 2^-14.
  a[0 * 32 + 0] = power_of_two_code(0);
  a[0 * 32 + 1] = power_of_two_code(7);
  a[0 * 32 + 2] = power_of_two_code(7);
  // Row 1: 1 + 2^-7 * 2^-7 + 2^-7 * 2^-8 = 1 + 2^-14 + 2^-15.
  a[1 * 32 + 0] = power_of_two_code(0);
  a[1 * 32 + 2] = power_of_two_code(7);
  a[1 * 32 + 3] = power_of_two_code(7);
  // Rows 2 and 3: the same small terms, the 1 from C.
  a[2 * 32 + 1] = power_of_two_code(7);
  a[2 * 32 + 2] = power_of_two_code(7);
  a[3 * 32 + 2] = power_of_two_code(7);
  a[3 * 32 + 3] = power_of_two_code(7);
  c[2 * 64] = c[3 * 64] = 1.0f;
  const std::vector<float> d = gpu::fp8_mma_m64n64k32(a, b, c, true);
  WARN("FP8 MMA rounding: 1 + 2^-13 + 2^-14 -> 1 + " << (d[0] - 1.0f) * 8192.0f << " x 2^-13; 1 + 2^-14 + 2^-15 -> 1 + "
                                                    << (d[64] - 1.0f) * 8192.0f << " x 2^-13; with the 1 in C: "
                                                    << (d[128] - 1.0f) * 8192.0f << " and "
                                                    << (d[192] - 1.0f) * 8192.0f << " x 2^-13");
  // Measured on the H200: the bits below the 13th are truncated, not rounded, in both places.
  CHECK(d[0] == 1.0f + 0x1p-13f);
  CHECK(d[64] == 1.0f);
  CHECK(d[128] == 1.0f + 0x1p-13f);
  CHECK(d[192] == 1.0f);
}
