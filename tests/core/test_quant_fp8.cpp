#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "core/fp16.hpp"
#include "core/fp8.hpp"
#include "core/problem.hpp"
#include "core/quant_fp8.hpp"
#include "tests/reference/attention_fixtures.hpp"

using namespace tilemix;
using tilemix::testing::to_half_bits;

TEST_CASE("V8 columns follow the P fragment of the accumulator layout", "[quant][fp8]") {
  std::set<int> seen;
  for (int x = 0; x < 32; ++x) seen.insert(fp8_value_column(x));
  CHECK(seen.size() == 32);
  CHECK(*seen.begin() == 0);
  CHECK(*seen.rbegin() == 31);
  for (int x = 0; x < 32; ++x) CHECK(fp8_value_key(fp8_value_column(x)) == x);
  // Thread t of a quad holds keys 2t, 2t + 1, 2t + 8, 2t + 9 of each 16 as k = 4t .. 4t + 3.
  for (int half = 0; half < 2; ++half) {
    for (int t = 0; t < 4; ++t) {
      const int base = 16 * half;
      CHECK(fp8_value_column(base + 2 * t) == base + 4 * t);
      CHECK(fp8_value_column(base + 2 * t + 1) == base + 4 * t + 1);
      CHECK(fp8_value_column(base + 2 * t + 8) == base + 4 * t + 2);
      CHECK(fp8_value_column(base + 2 * t + 9) == base + 4 * t + 3);
    }
  }
}

TEST_CASE("quantize_values_fp8: a hand-worked block", "[quant][fp8]") {
  // One sequence of 3 keys, 1 head, d = 2. Channel 0: absmax 448 -> scale 1, codes the values
  // rounded to E4M3 (17 lies halfway between 16 and 18, whose steps are 2: to even, 16); channel
  // 1 all zero.
  const std::vector<float> v = {448, 0, 17, 0, -224, 0};
  const Fp8Values q = quantize_values_fp8(to_half_bits(v), {0, 3}, 1, 2);
  REQUIRE(q.block_offset == std::vector<int64_t>{0, 1});
  REQUIRE(q.columns() == 64);
  REQUIRE(q.codes.size() == 2 * 64);
  CHECK(q.scale(0, 0, 0, 0) == 1.0f);
  CHECK(q.scale(0, 0, 0, 1) == 0.0f);
  CHECK(fp8_e4m3_to_float(q.code(0, 0, 0, 0)) == 448.0f);
  CHECK(fp8_e4m3_to_float(q.code(0, 1, 0, 0)) == 16.0f);
  CHECK(fp8_e4m3_to_float(q.code(0, 2, 0, 0)) == -224.0f);
  for (int j = 0; j < 3; ++j) CHECK(q.code(0, j, 0, 1) == 0);
  // The padding of the block (keys 3 .. 63) holds code 0.
  int nonzero = 0;
  for (uint8_t c : q.codes) nonzero += c != 0;
  CHECK(nonzero == 3);
}

TEST_CASE("quantize_values_fp8: blocks restart per sequence, codes within half an E4M3 step", "[quant][fp8]") {
  const int heads = 2, d = 8;
  const std::vector<int64_t> cu = {0, 70, 75, 75, 139};  // 70 keys, 5, none, 64
  std::vector<float> v(static_cast<size_t>(cu.back()) * heads * d);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37 * static_cast<double>(i)) * (1 + i % 5) * 3;
  const std::vector<uint16_t> bits = to_half_bits(v);
  const Fp8Values q = quantize_values_fp8(bits, cu, heads, d);
  REQUIRE(q.block_offset == std::vector<int64_t>{0, 2, 3, 3, 4});
  REQUIRE(q.columns() == 4 * 64);
  for (int b = 0; b < 4; ++b) {
    for (int64_t j = 0; j < cu[b + 1] - cu[b]; ++j) {
      for (int h = 0; h < heads; ++h) {
        for (int c = 0; c < d; ++c) {
          const float x = half_to_float(bits[(static_cast<size_t>(cu[b] + j) * heads + h) * d + c]);
          const float scale = q.scale(b, j, h, c);
          const float back = fp8_e4m3_to_float(q.code(b, j, h, c)) * scale;
          // Normals keep 3 mantissa bits (half a step: 2^-4 relative); subnormals a step of 2^-9.
          INFO("b " << b << " j " << j << " h " << h << " c " << c << ": " << x << " -> " << back);
          REQUIRE(std::fabs(back - x) <= std::max(std::fabs(x) / 16.0f, scale * 0x1p-10f) * 1.0001f);
        }
      }
    }
  }
  // Every column holds one key or padding: 139 keys x 2 heads x 8 channels coded, the rest 0.
  std::vector<int> filled(q.codes.size(), 0);
  for (int b = 0; b < 4; ++b) {
    for (int64_t j = 0; j < cu[b + 1] - cu[b]; ++j) {
      for (int hc = 0; hc < heads * d; ++hc) ++filled[static_cast<size_t>(hc) * q.columns() + q.column(b, j)];
    }
  }
  for (size_t i = 0; i < filled.size(); ++i) {
    REQUIRE(filled[i] <= 1);
    if (!filled[i]) REQUIRE(q.codes[i] == 0);
  }
}

TEST_CASE("quantize_values_fp8: a scale covers 128 keys of a sequence (blocks 2i and 2i + 1)", "[quant][fp8]") {
  // Sequence 0: 200 keys (blocks 0-3: scales over keys 0-127 and 128-199); sequence 1: 70 keys
  // (blocks 4-5, one scale from its own keys: the blocks pair from each sequence start).
  const std::vector<int64_t> cu = {0, 200, 270};
  std::vector<float> v(270, 1.0f);
  v[100] = 8.0f;   // block 1 sets block 0's scale
  v[130] = -4.0f;  // block 2 sets block 3's
  v[269] = 2.0f;   // sequence 1's last key
  const Fp8Values q = quantize_values_fp8(to_half_bits(v), cu, 1, 1);
  REQUIRE(q.block_offset == std::vector<int64_t>{0, 4, 6});
  REQUIRE(q.scales.size() == 6);
  CHECK(q.scales[0] == 8.0f / 448.0f);
  CHECK(q.scales[1] == 8.0f / 448.0f);
  CHECK(q.scales[2] == 4.0f / 448.0f);
  CHECK(q.scales[3] == 4.0f / 448.0f);
  CHECK(q.scales[4] == 2.0f / 448.0f);
  CHECK(q.scales[5] == 2.0f / 448.0f);
  CHECK(q.scale(0, 5, 0, 0) == q.scale(0, 127, 0, 0));
  CHECK(q.scale(0, 199, 0, 0) == 4.0f / 448.0f);
  CHECK(fp8_e4m3_to_float(q.code(0, 5, 0, 0)) == 56.0f);    // 1 / (8 / 448)
  CHECK(fp8_e4m3_to_float(q.code(0, 199, 0, 0)) == 112.0f); // 1 / (4 / 448)
}

TEST_CASE("quantize_values_fp8: NaN leaves the scale and becomes the NaN code", "[quant][fp8]") {
  const std::vector<float> v = {std::numeric_limits<float>::quiet_NaN(), 2.0f, -1.0f};
  const Fp8Values q = quantize_values_fp8(to_half_bits(v), {0, 3}, 1, 1);
  CHECK(q.scale(0, 0, 0, 0) == 2.0f / 448.0f);
  CHECK(q.code(0, 0, 0, 0) == kFp8E4m3Nan);
  CHECK(fp8_e4m3_to_float(q.code(0, 1, 0, 0)) * q.scale(0, 1, 0, 0) == 2.0f);
}

TEST_CASE("FP8 row exponent: the group's maximum at 448, g to the row's scale, none without keys", "[quant][fp8]") {
  const Fp8RowExponent same = fp8_row_exponent(3.0f, 3.0f);
  CHECK(fp8_e4m3_to_float(float_to_fp8_e4m3(std::exp2(3.0f + same.c))) == 448.0f);
  CHECK(same.g * 448.0f == Approx(1.0f).epsilon(1e-6));
  // The group's maximum 2^-20 of the row's: its largest key still 448, g 2^-20 / 448.
  const Fp8RowExponent below = fp8_row_exponent(3.0f, -17.0f);
  CHECK(fp8_e4m3_to_float(float_to_fp8_e4m3(std::exp2(-17.0f + below.c))) == 448.0f);
  CHECK(below.g * 448.0f == Approx(0x1p-20f).epsilon(1e-6));
  // A key 2^-4 below the group's maximum keeps its ratio in P8.
  CHECK(fp8_e4m3_to_float(float_to_fp8_e4m3(std::exp2(-21.0f + below.c))) == 28.0f);
  // Far below the row's maximum: P8 keeps its range, g underflows to 0 (the group adds nothing).
  const Fp8RowExponent far = fp8_row_exponent(0.0f, -1000.0f);
  CHECK(std::isfinite(far.c));
  CHECK(fp8_e4m3_to_float(float_to_fp8_e4m3(std::exp2(-1000.0f + far.c))) == 448.0f);
  CHECK(far.g == 0.0f);
  const Fp8RowExponent empty = fp8_row_exponent(0.0f, -std::numeric_limits<float>::infinity());
  CHECK(empty.c == 0.0f);
  CHECK(empty.g == 0.0f);
}

TEST_CASE("Numerics::fp8_pv names the tiles that take FP8 P V", "[quant][fp8]") {
  Numerics n;
  CHECK_FALSE(n.fp8_pv(false));
  CHECK_FALSE(n.fp8_pv(true));
  n.pv = PvPrecision::fp8;
  CHECK(n.fp8_pv(false));
  CHECK(n.fp8_pv(true));
  n.pv = PvPrecision::routed;
  CHECK_FALSE(n.fp8_pv(false));
  CHECK(n.fp8_pv(true));
  CHECK(std::string(to_string(PvPrecision::routed)) == "routed");
}
