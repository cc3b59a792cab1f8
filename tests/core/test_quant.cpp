#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "core/fp16.hpp"
#include "core/quant.hpp"

using namespace tilemix;

namespace {

std::vector<uint16_t> to_half(const std::vector<float>& x) {
  std::vector<uint16_t> out;
  for (float v : x) out.push_back(float_to_half(v));
  return out;
}

}  // namespace

TEST_CASE("int8 codes round to nearest even under exact scales", "[quant]") {
  // absmax 127 -> scale 127 / 127 = 1: codes are the values rounded, ties to even.
  CHECK(int8_scale(127.0f) == 1.0f);
  CHECK(int8_code(0.5f, 1.0f) == 0);
  CHECK(int8_code(1.5f, 1.0f) == 2);
  CHECK(int8_code(2.5f, 1.0f) == 2);
  CHECK(int8_code(-3.5f, 1.0f) == -4);
  CHECK(int8_code(-0.5f, 1.0f) == 0);
  CHECK(int8_code(127.0f, 1.0f) == 127);
  CHECK(int8_code(-127.0f, 1.0f) == -127);
  // Zero scale (an all-zero block) gives code 0, never NaN or a trap.
  CHECK(int8_code(0.0f, 0.0f) == 0);
}

TEST_CASE("quantize_blockwise: hand-worked blocks", "[quant]") {
  // One sequence of 2 tokens, 1 head, d = 8: one block.
  // absmax 254 -> scale 254 / 127 = 2 exactly; x / 2:
  //   254 -> 127, 3 -> 1.5 -> 2, 5 -> 2.5 -> 2, 1 -> 0.5 -> 0, -7 -> -3.5 -> -4,
  //   -253 -> -126.5 -> -126, 6 -> 3, -0.75 -> -0.375 -> 0.
  const std::vector<float> x = {254, 3, 5, 1, -7, -253, 6, -0.75f,  //
                                0,   2, 4, 8, 9, -9,   11, -11};
  // Row 2: 2 -> 1, 4 -> 2, 8 -> 4, 9 -> 4.5 -> 4, -9 -> -4, 11 -> 5.5 -> 6, -11 -> -6.
  const std::vector<int8_t> expected = {127, 2, 2, 0, -4, -126, 3, 0,  //
                                        0,   1, 2, 4, 4, -4,   6, -6};
  const QuantizedTensor qt = quantize_blockwise(to_half(x), {0, 2}, 1, 8, kBlockQ);
  REQUIRE(qt.scales.size() == 1);
  CHECK(qt.scales[0] == 2.0f);
  CHECK(qt.codes == expected);
  CHECK(qt.block_offset == std::vector<int64_t>{0, 1});
}

TEST_CASE("quantize_blockwise: an all-zero block has scale 0 and codes 0", "[quant]") {
  std::vector<float> x(64 * 2 * 4, 0.0f);
  // Head 1 of the same tokens is not zero: absmax 12.5 -> scale 12.5f / 127.
  for (int t = 0; t < 64; ++t) x[(t * 2 + 1) * 4] = (t == 5 ? -12.5f : 1.0f);
  const QuantizedTensor qt = quantize_blockwise(to_half(x), {0, 64}, 2, 4, kBlockK);
  REQUIRE(qt.scales.size() == 2);
  CHECK(qt.scales[0] == 0.0f);
  CHECK(qt.scales[1] == 12.5f / 127.0f);
  CHECK(!std::isnan(qt.scales[0]));
  for (int t = 0; t < 64; ++t) {
    for (int c = 0; c < 4; ++c) CHECK(qt.codes[(t * 2) * 4 + c] == 0);
  }
  CHECK(qt.codes[(5 * 2 + 1) * 4] == -127);
  // 1 / (12.5 / 127) = 10.16 -> 10
  CHECK(qt.codes[(0 * 2 + 1) * 4] == 10);
}

TEST_CASE("quantize_blockwise: blocks restart at sequence starts, scales are [blocks][heads]", "[quant]") {
  // Sequences of 3, 0 and 197 tokens, 2 heads, d = 2, BLKQ = 128:
  // blocks per sequence 1, 0, 2 -> block_offset {0, 1, 1, 3}, scales [3][2].
  const int heads = 2, d = 2;
  const std::vector<int64_t> cu = {0, 3, 3, 200};
  std::vector<float> x(200 * heads * d, 0.0f);
  auto at = [&](int64_t token, int h, int c) -> float& { return x[(token * heads + h) * d + c]; };
  at(2, 0, 1) = 127.0f;  // sequence 0, head 0: scale 1
  at(0, 1, 0) = -254.0f;  // sequence 0, head 1: scale 2
  // Sequence 2 starts at token 3; its first block is tokens 3..130 and must not see sequence 0.
  at(3, 0, 0) = 63.5f;   // scale 63.5 / 127 = 0.5
  at(130, 0, 1) = 1.0f;  // last token of block 0 -> code 2
  at(131, 0, 0) = 0.0f;  // block 1 (tokens 131..199) of head 0 stays all zero
  at(130, 1, 0) = 25.4f;
  at(131, 1, 1) = -508.0f;  // block 1 of head 1: scale 4
  at(199, 1, 0) = 6.0f;     // 6 / 4 = 1.5 -> 2
  const QuantizedTensor qt = quantize_blockwise(to_half(x), cu, heads, d, kBlockQ);
  CHECK(qt.block_offset == std::vector<int64_t>{0, 1, 1, 3});
  REQUIRE(qt.scales.size() == 3 * heads);
  CHECK(qt.scales[0 * heads + 0] == 1.0f);
  CHECK(qt.scales[0 * heads + 1] == 2.0f);
  CHECK(qt.scales[1 * heads + 0] == 0.5f);
  CHECK(qt.scales[1 * heads + 1] == half_to_float(float_to_half(25.4f)) / 127.0f);
  CHECK(qt.scales[2 * heads + 0] == 0.0f);
  CHECK(qt.scales[2 * heads + 1] == 4.0f);
  CHECK(qt.scale(0, 2, 0) == 1.0f);
  CHECK(qt.scale(2, 0, 0) == 0.5f);
  CHECK(qt.scale(2, 127, 0) == 0.5f);
  CHECK(qt.scale(2, 128, 1) == 4.0f);
  CHECK(qt.codes[(2 * heads + 0) * d + 1] == 127);
  CHECK(qt.codes[(3 * heads + 0) * d + 0] == 127);
  CHECK(qt.codes[(130 * heads + 0) * d + 1] == 2);
  CHECK(qt.codes[(131 * heads + 1) * d + 1] == -127);
  CHECK(qt.codes[(199 * heads + 1) * d + 0] == 2);
}

TEST_CASE("scale_block_offsets counts ceil(L / BLK) per sequence", "[quant]") {
  CHECK(scale_block_offsets({0, 64, 65, 65, 300}, kBlockK) == std::vector<int64_t>{0, 1, 2, 2, 6});
  CHECK(scale_block_offsets({0, 128, 129}, kBlockQ) == std::vector<int64_t>{0, 1, 2});
}
