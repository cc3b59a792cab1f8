// The warp-specialized kernel's on-chip INT8 coding (quantize_resident_rows, as the consumers code
// Q8 and the quantizer warps K8) against quantize_blockwise, bit for bit: fresh random blocks of
// both row counts and head dimensions, partial blocks whose rows past the tokens hold values that
// must not enter the absmax, exact ties, NaNs and an all-zero block.
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
  uint32_t got_bits = 0, want_bits = 0;
  std::memcpy(&got_bits, &got.scale, sizeof(float));
  std::memcpy(&want_bits, &want.scales[0], sizeof(float));
  CHECK(got_bits == want_bits);
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
