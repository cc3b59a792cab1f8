#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/fp16.hpp"
#include "core/quant.hpp"
#include "tests/reference/attention_fixtures.hpp"

using namespace tilemix;
using tilemix::testing::to_half_bits;

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

// The GPU codes without a division per element (kernels/quant/int8_codes.cuh, Int8Encoder): with
// inv = rn(1 / scale), t = fma(x, inv, 1.5 * 2^23) - 1.5 * 2^23 is the code unless the distance
// fma(x, inv, -t) comes within 2^-14 of 1/2 (then a correctly rounded division decides). The
// argument, checked here on the CPU on every FP16 value of a block of each of 560 scales (random
// FP16 maxima, the smallest ones and some whose reciprocals round badly): every code it keeps is
// int8_code's.
TEST_CASE("int8 codes from the reciprocal equal int8_code wherever no near-tie is flagged", "[quant]") {
  std::vector<uint16_t> maxima;
  uint32_t state = 12345u;
  for (int i = 0; i < 500; ++i) {
    state = state * 1664525u + 1013904223u;
    maxima.push_back(static_cast<uint16_t>(1 + (state >> 8) % 0x7bff));
  }
  for (uint16_t h = 1; h <= 50; ++h) maxima.push_back(h);  // subnormal maxima: the smallest scales
  for (const float m : {889.0f, 1778.0f, 444.5f, 127.0f, 65504.0f}) maxima.push_back(float_to_half(m));
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23
  int64_t kept = 0, near_ties = 0;
  for (const uint16_t m : maxima) {
    const float scale = int8_scale(half_to_float(m));
    const float inv = 1.0f / scale;
    for (uint16_t h = 0; h < 0x7c00 && half_to_float(h) <= half_to_float(m); ++h) {
      for (const float x : {half_to_float(h), -half_to_float(h)}) {
        const float t = std::fmaf(x, inv, kRound) - kRound;
        if (!(std::fabs(std::fmaf(x, inv, -t)) < 0.5f - 0x1p-14f)) {
          ++near_ties;
        } else if (++kept; static_cast<int>(t) != int8_code(x, scale)) {
          FAIL("code of " << x << " at scale " << scale << " from the reciprocal: " << t);
        }
      }
    }
  }
  CHECK(kept > 10000000);
  CHECK(near_ties > 1000);
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
  const QuantizedTensor qt = quantize_blockwise(to_half_bits(x), {0, 2}, 1, 8, kBlockQ);
  REQUIRE(qt.scales.size() == 1);
  CHECK(qt.scales[0] == 2.0f);
  CHECK(qt.codes == expected);
  CHECK(qt.block_offset == std::vector<int64_t>{0, 1});
}

TEST_CASE("quantize_blockwise: an all-zero block has scale 0 and codes 0", "[quant]") {
  std::vector<float> x(64 * 2 * 4, 0.0f);
  // Head 1 of the same tokens is not zero: absmax 12.5 -> scale 12.5f / 127.
  for (int t = 0; t < 64; ++t) x[(t * 2 + 1) * 4] = (t == 5 ? -12.5f : 1.0f);
  const QuantizedTensor qt = quantize_blockwise(to_half_bits(x), {0, 64}, 2, 4, kBlockK);
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
  const QuantizedTensor qt = quantize_blockwise(to_half_bits(x), cu, heads, d, kBlockQ);
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

TEST_CASE("key_means: per-block sums in token order, then the blocks in order, then one division", "[quant]") {
  // Sequences of 134 keys (blocks of 64, 64 and a partial 6), 0 keys and 3 keys; 2 KV heads, d = 2.
  const int hk = 2, d = 2;
  const std::vector<int64_t> cu = {0, 134, 134, 137};
  std::vector<float> k(137 * hk * d, 0.0f);
  auto at = [&](int64_t token, int h, int c) -> float& { return k[(token * hk + h) * d + c]; };
  // Head 0, channel 0: 2048 then 63 x 2^-13 (block 0), 64 x 2^-13 (block 1), 6 x 1 (block 2).
  // In fp32 2048 + 2^-13 is a tie that rounds back to 2048, so the sum depends on the order:
  //   block 0 in token order: 2048; block 1: 64 x 2^-13 = 2^-7 exactly; block 2: 6;
  //   blocks in order: 2048 + 2^-7 + 6 = 2054.0078125, exact; the mean one fp32 division by 134.
  // One sequential sum over all 134 tokens would stay at 2048 until the last six (2054 / 134);
  // summing block 0 from its small keys up would give 2048 + 63 x 2^-13 rounded.
  at(0, 0, 0) = 2048.0f;
  for (int t = 1; t < 128; ++t) at(t, 0, 0) = 0x1p-13f;
  for (int t = 128; t < 134; ++t) at(t, 0, 0) = 1.0f;
  // Head 1, channel 1: -3 on every token of the first sequence; 1, 2, 4 on the third.
  for (int t = 0; t < 134; ++t) at(t, 1, 1) = -3.0f;
  at(134, 1, 1) = 1.0f;
  at(135, 1, 1) = 2.0f;
  at(136, 1, 1) = 4.0f;
  const std::vector<float> kbar = key_means(to_half_bits(k), cu, hk, d);
  REQUIRE(kbar.size() == 3 * hk * d);
  auto mean = [&](int b, int h, int c) { return kbar[(b * hk + h) * d + c]; };
  CHECK(mean(0, 0, 0) == 2054.0078125f / 134.0f);
  float flat = 0.0f;
  for (int t = 0; t < 134; ++t) flat += at(t, 0, 0);
  CHECK(flat / 134.0f != mean(0, 0, 0));  // the flat order gives other bits
  CHECK(mean(0, 1, 1) == -3.0f);
  CHECK(mean(0, 0, 1) == 0.0f);
  // The sequence without keys has kbar 0 (not 0 / 0); the third sees only its own keys.
  for (int h = 0; h < hk; ++h) {
    for (int c = 0; c < d; ++c) CHECK(mean(1, h, c) == 0.0f);
  }
  CHECK(mean(2, 1, 1) == 7.0f / 3.0f);
  CHECK(mean(2, 0, 0) == 0.0f);
}

TEST_CASE("smoothed_keys: fp16 of the fp32 difference from the sequence's mean, per KV head and channel",
          "[quant]") {
  SECTION("two roundings: the fp32 subtract, then RNE to FP16") {
    // (1 + 2^-10) - (2^-11 - 2^-25) = 1 + 2^-11 + 2^-25 exactly. fp32 rounds it to 1 + 2^-11 (a
    // quarter ulp off), an FP16 tie that goes to the even 1; rounding the exact difference once
    // would give 1 + 2^-10.
    CHECK(smoothed_key(1.0f + 0x1p-10f, 0x1p-11f - 0x1p-25f) == float_to_half(1.0f));
    CHECK(smoothed_key(1.0f + 0x1p-10f, 0x1p-11f - 0x1p-23f) == float_to_half(1.0f + 0x1p-10f));  // past the tie
    CHECK(smoothed_key(-3.0f, 0.25f) == float_to_half(-3.25f));
    // Beyond the FP16 range the difference becomes infinite, as __float2half_rn makes it.
    CHECK(smoothed_key(60000.0f, -10000.0f) == 0x7c00);
  }
  SECTION("hand-worked block: Ks and its blockwise codes") {
    // One sequence of 4 keys, 1 head, d = 2. Channel 0: 100, 102, 98, 100 (mean 100); channel 1:
    // 1 on every key (mean 1). Ks: 0, 2, -2, 0 and zeros: absmax 2, scale 2 / 127, codes
    // 0, 127, -127, 0. Without smoothing the scale would be 102 / 127.
    const std::vector<float> k = {100, 1, 102, 1, 98, 1, 100, 1};
    const std::vector<int64_t> cu = {0, 4};
    const std::vector<float> kbar = key_means(to_half_bits(k), cu, 1, 2);
    CHECK(kbar == std::vector<float>{100.0f, 1.0f});
    const std::vector<uint16_t> ks = smoothed_keys(to_half_bits(k), cu, 1, 2, kbar);
    CHECK(ks == to_half_bits({0, 0, 2, 0, -2, 0, 0, 0}));
    const QuantizedTensor qt = quantize_blockwise(ks, cu, 1, 2, kBlockK);
    REQUIRE(qt.scales.size() == 1);
    CHECK(qt.scales[0] == 2.0f / 127.0f);
    CHECK(qt.codes == std::vector<int8_t>{0, 0, 127, 0, -127, 0, 0, 0});
    CHECK(quantize_blockwise(to_half_bits(k), cu, 1, 2, kBlockK).scales[0] == 102.0f / 127.0f);
  }
  SECTION("varlen: every key against its own sequence's, head's and channel's mean") {
    // Sequences of 150, 0 and 37 keys, 3 heads, d = 8, an offset of 20 on channel 5 and of 5 * h
    // on channel 2 of head h that the second sequence does not have.
    const int hk = 3, d = 8;
    const std::vector<int64_t> cu = {0, 150, 150, 187};
    std::vector<float> k(187 * hk * d);
    for (size_t i = 0; i < k.size(); ++i) {
      const int c = static_cast<int>(i % d), h = static_cast<int>(i / d % hk);
      const bool first = i < static_cast<size_t>(150 * hk * d);
      k[i] = std::sin(0.37f * static_cast<float>(i)) * 3.0f + (c == 5 ? 20.0f : 0.0f) +
             (c == 2 && first ? 5.0f * static_cast<float>(h) : 0.0f);
    }
    const std::vector<uint16_t> k16 = to_half_bits(k);
    const std::vector<float> kbar = key_means(k16, cu, hk, d);
    const std::vector<uint16_t> ks = smoothed_keys(k16, cu, hk, d, kbar);
    REQUIRE(ks.size() == k16.size());
    for (int b : {0, 2}) {
      for (int64_t t = cu[b]; t < cu[b + 1]; ++t) {
        for (int h = 0; h < hk; ++h) {
          for (int c = 0; c < d; ++c) {
            const size_t i = (t * hk + h) * d + c;
            INFO("sequence " << b << " token " << t << " head " << h << " channel " << c);
            CHECK(ks[i] == float_to_half(half_to_float(k16[i]) - kbar[(b * hk + h) * d + c]));
          }
        }
      }
    }
    // The offsets are gone from every K block's scale.
    const QuantizedTensor qt = quantize_blockwise(ks, cu, hk, d, kBlockK);
    for (float scale : qt.scales) CHECK(scale < 7.0f / 127.0f);
  }
}

TEST_CASE("query_key_means: an fmaf chain over the channels in order, against the row's sequence and KV head",
          "[quant]") {
  // Two sequences (1 and 2 queries), hq = 4 query heads on hk = 2 KV heads, d = 2.
  const int hq = 4, hk = 2, d = 2;
  const std::vector<int64_t> cu_q = {0, 1, 3};
  // kbar [batch 2, hk 2, d 2]. Head 1 of sequence 0: (-1, 1 + 2^-20). With q = (1, 1 + 2^-10):
  // fmaf(1 + 2^-10, 1 + 2^-20, -1) = 2^-10 + 2^-20 + 2^-30 exactly; a rounded product first, or
  // the channels in the other order, loses the 2^-30.
  const std::vector<float> kbar = {0.5f, 0.25f, -1.0f, 1.0f + 0x1p-20f,  //
                                   2.0f, -4.0f, 0.0f,  8.0f};
  std::vector<float> q(3 * hq * d, 0.0f);
  auto at = [&](int64_t token, int h, int c) -> float& { return q[(token * hq + h) * d + c]; };
  for (int h = 0; h < hq; ++h) {
    at(0, h, 0) = 1.0f;
    at(0, h, 1) = 1.0f + 0x1p-10f;
  }
  at(1, 0, 0) = 3.0f;
  at(1, 1, 1) = 0.5f;
  at(2, 2, 1) = -2.0f;
  at(2, 3, 0) = 1.5f;
  const std::vector<float> qkbar = query_key_means(to_half_bits(q), cu_q, hq, hk, d, kbar);
  REQUIRE(qkbar.size() == 3 * hq);
  // Sequence 0: heads 0 and 1 use KV head 0, heads 2 and 3 KV head 1.
  CHECK(qkbar[0] == 0.5f + (1.0f + 0x1p-10f) * 0.25f);
  CHECK(qkbar[2] == 0x1p-10f + 0x1p-20f + 0x1p-30f);
  CHECK(qkbar[3] == qkbar[2]);
  const float rounded_product = (1.0f + 0x1p-10f) * (1.0f + 0x1p-20f);
  CHECK(qkbar[2] != rounded_product - 1.0f);
  // Sequence 1 (tokens 1 and 2) against its own means.
  CHECK(qkbar[1 * hq + 0] == 6.0f);
  CHECK(qkbar[1 * hq + 1] == -2.0f);
  CHECK(qkbar[1 * hq + 2] == 0.0f);
  CHECK(qkbar[2 * hq + 2] == -16.0f);
  CHECK(qkbar[2 * hq + 3] == 0.0f);
}

TEST_CASE("smooth_keys: the means, q . kbar and Ks of an attention call", "[quant]") {
  AttentionShape s;
  s.hq = 4;
  s.hk = 2;
  s.d = 64;
  s.cu_seqlens_q = {0, 70, 75};
  s.cu_seqlens_k = {0, 90, 100};
  validate(s);
  std::vector<float> q(75 * s.hq * s.d), k(100 * s.hk * s.d);
  for (size_t i = 0; i < q.size(); ++i) q[i] = std::cos(0.11f * static_cast<float>(i));
  for (size_t i = 0; i < k.size(); ++i) k[i] = std::sin(0.23f * static_cast<float>(i)) + 2.0f;
  const std::vector<uint16_t> q16 = to_half_bits(q), k16 = to_half_bits(k);
  const SmoothedKeys got = smooth_keys(s, q16, k16);
  const std::vector<float> kbar = key_means(k16, s.cu_seqlens_k, s.hk, s.d);
  CHECK(got.kbar == kbar);
  CHECK(got.qkbar == query_key_means(q16, s.cu_seqlens_q, s.hq, s.hk, s.d, kbar));
  CHECK(got.ks == smoothed_keys(k16, s.cu_seqlens_k, s.hk, s.d, kbar));
  CHECK(got.ks != k16);
}
