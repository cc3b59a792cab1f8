// The warp-specialized kernel's on-chip INT8 coding (quantize_resident_half, as each consumer
// warpgroup codes its rows of Q8, and quantize_resident_rows, as the quantizer warps code K8)
// against quantize_blockwise, bit for bit: fresh random blocks of both row counts and head
// dimensions, partial blocks whose rows past the tokens hold values that must not enter the
// absmax, exact ties, ties that the reciprocal misrounds in a few chunks only, NaNs and an
// all-zero block.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/fp16.hpp"
#include "core/quant.hpp"
#include "tilemix/onchip_codes.hpp"

using namespace tilemix;

namespace {

// The codes and scale of the block's first `valid` rows as quantize_blockwise makes them (one
// sequence of `valid` tokens, one head, one block).
QuantizedTensor blockwise(const std::vector<uint16_t>& x, int rows, int d, int valid) {
  const std::vector<uint16_t> tokens(x.begin(), x.begin() + static_cast<size_t>(valid) * d);
  return quantize_blockwise(tokens, {0, valid}, 1, d, rows);
}

void check_block(const std::vector<uint16_t>& x, int rows, int d, int valid) {
  const gpu::ResidentCodes got = gpu::code_resident_rows(x, rows, d, valid);
  const QuantizedTensor want = blockwise(x, rows, d, valid);
  REQUIRE(want.scales.size() == 1);
  // One scale per coding group (two consumer warpgroups for Q8, one for K8), each the block's.
  REQUIRE(got.scales.size() == (rows == 128 ? 2u : 1u));
  uint32_t want_bits = 0;
  std::memcpy(&want_bits, &want.scales[0], sizeof(float));
  for (const float scale : got.scales) {
    uint32_t got_bits = 0;
    std::memcpy(&got_bits, &scale, sizeof(float));
    CHECK(got_bits == want_bits);
  }
  const std::vector<int8_t> tokens(got.codes.begin(), got.codes.begin() + static_cast<size_t>(valid) * d);
  CHECK(tokens == want.codes);
}

}  // namespace

TEST_CASE("Q8 and K8 coded on chip are quantize_blockwise's codes and scales", "[gpu][quant]") {
  std::random_device entropy;
  const uint64_t seed = (static_cast<uint64_t>(entropy()) << 32) | entropy();
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const int rows : {128, 64}) {
    for (const int d : {64, 128}) {
      for (const int valid : {rows, rows - 1, rows / 2 + 3, 1}) {
        INFO("rows=" << rows << " d=" << d << " valid=" << valid << " seed=" << seed);
        std::vector<uint16_t> x(static_cast<size_t>(rows) * d);
        // Random values of a random magnitude; the rows past the tokens larger than any token's.
        const float magnitude = std::ldexp(1.0f, static_cast<int>(rng() % 16) - 8);
        for (size_t i = 0; i < x.size(); ++i) {
          const bool token = static_cast<int>(i / d) < valid;
          x[i] = float_to_half(normal(rng) * magnitude * (token ? 1.0f : 300.0f));
        }
        check_block(x, rows, d, valid);
        // Exact ties: absmax 127 makes the scale 1, so every k + 0.5 rounds to even.
        for (size_t i = 0; i < static_cast<size_t>(valid) * d; ++i) {
          x[i] = float_to_half(static_cast<float>(static_cast<int>(rng() % 254) - 127) + 0.5f);
        }
        x[0] = float_to_half(-127.0f);
        check_block(x, rows, d, valid);
        // Ties in a few chunks only, of which the reciprocal misrounds about a third: absmax 889
        // makes the scale 7, and x = 7 k + 3.5 is a tie of the exact quotient that x * rn(1 / 7)
        // may miss; the other values are 7 k, far from any tie.
        for (size_t i = 0; i < static_cast<size_t>(valid) * d; ++i) {
          const int k = static_cast<int>(rng() % 253) - 126;
          x[i] = float_to_half(7.0f * static_cast<float>(k) + (rng() % 50 == 0 ? 3.5f : 0.0f));
        }
        x[0] = float_to_half(889.0f);
        check_block(x, rows, d, valid);
        // NaNs stay out of the absmax and code as 0.
        x[static_cast<size_t>(valid - 1) * d] = float_to_half(std::numeric_limits<float>::quiet_NaN());
        check_block(x, rows, d, valid);
        // An all-zero block: scale 0, codes 0 (the rows past it still large).
        std::fill(x.begin(), x.begin() + static_cast<size_t>(valid) * d, uint16_t{0});
        check_block(x, rows, d, valid);
      }
    }
  }
}

TEST_CASE("code_resident_rows rejects shapes the kernel does not code", "[gpu][quant]") {
  const std::vector<uint16_t> x(128 * 128);
  CHECK_THROWS_AS(gpu::code_resident_rows(x, 96, 128, 10), std::invalid_argument);
  CHECK_THROWS_AS(gpu::code_resident_rows(x, 128, 96, 10), std::invalid_argument);
  CHECK_THROWS_AS(gpu::code_resident_rows(x, 128, 128, 0), std::invalid_argument);
  CHECK_THROWS_AS(gpu::code_resident_rows(x, 128, 128, 129), std::invalid_argument);
  CHECK_THROWS_AS(gpu::code_resident_rows(x, 64, 128, 64), std::invalid_argument);
}
