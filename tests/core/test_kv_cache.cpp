#include <catch2/catch.hpp>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/decode/kv_cache.hpp"
#include "core/error.hpp"
#include "core/fp16.hpp"
#include "core/problem.hpp"
#include "core/quant.hpp"
#include "core/routing/rng.hpp"

using namespace tilemix;
using Catch::Matchers::Contains;

namespace {

// Seeded FP16 tokens [tokens, hk, d] with a spread of magnitudes: token t scaled by `scale(t)`.
template <typename Scale>
std::vector<uint16_t> tokens(int64_t count, int hk, int d, uint64_t seed, Scale scale) {
  SplitMix64 rng(seed);
  std::vector<uint16_t> out(static_cast<size_t>(count) * hk * d);
  for (int64_t t = 0; t < count; ++t) {
    for (size_t i = 0; i < static_cast<size_t>(hk) * d; ++i) {
      const double x = (2.0 * rng.uniform() - 1.0) * scale(t);
      out[static_cast<size_t>(t) * hk * d + i] = float_to_half(static_cast<float>(x));
    }
  }
  return out;
}

std::vector<uint16_t> tokens(int64_t count, int hk, int d, uint64_t seed) {
  return tokens(count, hk, d, seed, [](int64_t) { return 1.0; });
}

// Rows [first, first + count) of each sequence of `x` (packed by `cu`), packed again.
std::vector<uint16_t> slice(const std::vector<uint16_t>& x, const std::vector<int64_t>& cu, int hk, int d,
                            const std::vector<int64_t>& first, const std::vector<int64_t>& count) {
  std::vector<uint16_t> out;
  const size_t row = static_cast<size_t>(hk) * d;
  for (size_t b = 0; b < count.size(); ++b) {
    const auto begin = x.begin() + static_cast<std::ptrdiff_t>((cu[b] + first[b]) * row);
    out.insert(out.end(), begin, begin + static_cast<std::ptrdiff_t>(count[b] * row));
  }
  return out;
}

float k_scale_of(const Int8KvCache& c, int b, int64_t t, int h) {
  return c.k_scale[static_cast<size_t>(c.layout.cu_blocks[b] + t / kCacheBlock) * c.layout.hk + h];
}

}  // namespace

TEST_CASE("cache layout rounds capacities up to whole blocks", "[decode]") {
  const KvCacheLayout l = make_cache_layout(2, 64, {1, 64, 65, 0});
  CHECK(l.capacity == std::vector<int64_t>{64, 64, 128, 0});
  CHECK(l.cu_capacity == std::vector<int64_t>{0, 64, 128, 256, 256});
  CHECK(l.cu_blocks == std::vector<int64_t>{0, 1, 2, 4, 4});
  CHECK(l.length == std::vector<int64_t>{0, 0, 0, 0});
  const Int8KvCache c8 = make_int8_cache(l);
  CHECK(c8.k8.size() == 256u * 2 * 64);
  CHECK(c8.v_scale.size() == 4u * 2);
  CHECK(make_fp16_cache(l).v.size() == 256u * 2 * 64);
  CHECK_THROWS_WITH(make_cache_layout(2, 64, {8, -1}), Contains("capacity[1]: negative capacity -1"));
}

TEST_CASE("cache capacities past 2^31 - 1 tokens, or past 2^63 bytes in all, are input errors", "[decode]") {
  CHECK_THROWS_WITH(make_cache_layout(2, 64, {8, kMaxSeqLen + 1}),
                    "capacity[1]: capacity 2147483648 is more than 2147483647 tokens");
  // 2^20 sequences of 2^31 tokens (rounded up to whole blocks) x 65536 heads x 128 channels of FP16.
  CHECK_THROWS_WITH(make_cache_layout(65536, 128, std::vector<int64_t>(size_t{1} << 20, kMaxSeqLen)),
                    "capacity: the FP16 cache [capacity tokens, hk, d] is 2251799813685248 (capacity tokens) x 65536 "
                    "(hk) x 128 (d) x 2 (bytes), more than 9223372036854775807");
}

TEST_CASE("INT8 append follows the documented requantization, by hand", "[decode]") {
  // hk = 1, d = 2. Token A = (1, 0.25): scale 1/127, codes (127, round(31.75) = 32).
  // Token B = (4, -3) joins the block: scale 4/127; A dequantized = (1, 32/127) requantizes to
  // (round(31.75) = 32, 8) and B to (127, round(-95.25) = -95).
  Int8KvCache c = make_int8_cache(make_cache_layout(1, 2, {64}));
  append_tokens(c, {1}, {float_to_half(1.0f), float_to_half(0.25f)}, {float_to_half(0.5f), 0});
  CHECK(c.k8[0] == 127);
  CHECK(c.k8[1] == 32);
  CHECK(c.k_scale[0] == 1.0f / 127.0f);
  CHECK(c.v8[0] == 127);
  CHECK(c.v8[1] == 0);
  append_tokens(c, {1}, {float_to_half(4.0f), float_to_half(-3.0f)}, {float_to_half(0.5f), float_to_half(0.5f)});
  CHECK(c.layout.length[0] == 2);
  CHECK(c.k_scale[0] == 4.0f / 127.0f);
  CHECK(std::vector<int>(c.k8.begin(), c.k8.begin() + 4) == std::vector<int>{32, 8, 127, -95});
  // V's absmax (0.5) is unchanged: every code keeps its value.
  CHECK(c.v_scale[0] == 0.5f / 127.0f);
  CHECK(std::vector<int>(c.v8.begin(), c.v8.begin() + 4) == std::vector<int>{127, 0, 127, 127});
}

TEST_CASE("INT8 append: growing blocks move held tokens by at most half a scale, full blocks never", "[decode]") {
  const int hk = 2, d = 64;
  const std::vector<int64_t> lengths{200, 63, 130};
  const std::vector<int64_t> cu = prefix_sums(lengths);
  // Later tokens are larger, so the scale of a growing block keeps rising.
  const auto k = tokens(cu.back(), hk, d, 11, [](int64_t t) { return 0.5 + 0.05 * static_cast<double>(t % 97); });
  const auto v = tokens(cu.back(), hk, d, 12, [](int64_t t) { return 2.0 + 0.1 * static_cast<double>(t % 89); });
  Int8KvCache c = make_int8_cache(make_cache_layout(hk, d, lengths));
  const std::vector<std::vector<int64_t>> chunks{{5, 1, 64}, {60, 0, 1}, {70, 30, 0}, {65, 32, 65}};
  std::vector<int64_t> held(lengths.size(), 0);
  for (const auto& counts : chunks) {
    std::vector<float> k_before, v_before;
    dequantize_cache(c, k_before, v_before);
    const Int8KvCache before = c;
    const std::vector<int64_t> cu_before = prefix_sums(held);
    append_tokens(c, counts, slice(k, cu, hk, d, held, counts), slice(v, cu, hk, d, held, counts));
    std::vector<float> k_after, v_after;
    dequantize_cache(c, k_after, v_after);
    const std::vector<int64_t> cu_after = prefix_sums(c.layout.length);
    for (int b = 0; b < c.layout.batch(); ++b) {
      for (int64_t t = 0; t < held[b]; ++t) {
        const bool full_block = (t / kCacheBlock + 1) * kCacheBlock <= held[b];
        for (int h = 0; h < hk; ++h) {
          const size_t row = (static_cast<size_t>(c.layout.cu_capacity[b] + t) * hk + h) * d;
          const size_t old_at = (static_cast<size_t>(cu_before[b] + t) * hk + h) * d;
          const size_t new_at = (static_cast<size_t>(cu_after[b] + t) * hk + h) * d;
          const size_t scale = static_cast<size_t>(c.layout.cu_blocks[b] + t / kCacheBlock) * hk + h;
          if (full_block || counts[b] == 0) {
            REQUIRE(std::equal(&c.k8[row], &c.k8[row] + d, &before.k8[row]));
            REQUIRE(std::equal(&c.v8[row], &c.v8[row] + d, &before.v8[row]));
            REQUIRE(c.k_scale[scale] == before.k_scale[scale]);
            continue;
          }
          for (int i = 0; i < d; ++i) {
            REQUIRE(std::fabs(k_after[new_at + i] - k_before[old_at + i]) <= 0.5f * c.k_scale[scale] * 1.00001f);
            REQUIRE(std::fabs(v_after[new_at + i] - v_before[old_at + i]) <= 0.5f * c.v_scale[scale] * 1.00001f);
          }
        }
      }
      held[b] += counts[b];
    }
  }
  CHECK(c.layout.length == std::vector<int64_t>{200, 63, 130});
}

TEST_CASE("INT8 append in one chunk equals blockwise quantization; block-aligned chunks too", "[decode]") {
  const int hk = 3, d = 128;
  const std::vector<int64_t> lengths{1, 64, 65, 300};
  const std::vector<int64_t> cu = prefix_sums(lengths);
  const auto k = tokens(cu.back(), hk, d, 21), v = tokens(cu.back(), hk, d, 22);
  const QuantizedTensor qk = quantize_blockwise(k, cu, hk, d, kCacheBlock);
  const QuantizedTensor qv = quantize_blockwise(v, cu, hk, d, kCacheBlock);

  const auto check_equals_blockwise = [&](const Int8KvCache& c) {
    for (int b = 0; b < 4; ++b) {
      for (int64_t t = 0; t < lengths[b]; ++t) {
        for (int h = 0; h < hk; ++h) {
          const size_t src = (static_cast<size_t>(cu[b] + t) * hk + h) * d;
          const size_t dst = (static_cast<size_t>(c.layout.cu_capacity[b] + t) * hk + h) * d;
          REQUIRE(std::equal(&qk.codes[src], &qk.codes[src] + d, &c.k8[dst]));
          REQUIRE(std::equal(&qv.codes[src], &qv.codes[src] + d, &c.v8[dst]));
          REQUIRE(k_scale_of(c, b, t, h) == qk.scale(b, t, h));
        }
      }
    }
  };
  Int8KvCache one = make_int8_cache(make_cache_layout(hk, d, lengths));
  append_tokens(one, lengths, k, v);
  check_equals_blockwise(one);

  // Chunks that end on block boundaries never requantize a held token.
  Int8KvCache aligned = make_int8_cache(make_cache_layout(hk, d, lengths));
  const std::vector<int64_t> first{0, 0, 0, 0}, head{0, 64, 64, 128}, tail{1, 0, 1, 172};
  append_tokens(aligned, head, slice(k, cu, hk, d, first, head), slice(v, cu, hk, d, first, head));
  append_tokens(aligned, tail, slice(k, cu, hk, d, head, tail), slice(v, cu, hk, d, head, tail));
  check_equals_blockwise(aligned);
  CHECK(aligned.k8 == one.k8);

  // Unaligned chunks requantize: codes within one step of the one-chunk codes; a block whose
  // absmax arrives last gets the one-chunk scale exactly.
  Int8KvCache split = make_int8_cache(make_cache_layout(hk, d, lengths));
  const std::vector<int64_t> part{1, 30, 33, 150}, rest{0, 34, 32, 150};
  append_tokens(split, part, slice(k, cu, hk, d, first, part), slice(v, cu, hk, d, first, part));
  append_tokens(split, rest, slice(k, cu, hk, d, part, rest), slice(v, cu, hk, d, part, rest));
  for (size_t i = 0; i < one.k8.size(); ++i) REQUIRE(std::abs(split.k8[i] - one.k8[i]) <= 1);
  int exact_scales = 0;
  for (int b = 0; b < 4; ++b) {
    for (int h = 0; h < hk; ++h) {
      const int64_t blk_first = (part[b] / kCacheBlock) * kCacheBlock;
      const int64_t blk_end = std::min<int64_t>(lengths[b], blk_first + kCacheBlock);
      float held_max = 0.0f, new_max = 0.0f;
      for (int64_t t = blk_first; t < blk_end; ++t) {
        for (int i = 0; i < d; ++i) {
          float& block_max = t < part[b] ? held_max : new_max;
          const uint16_t x = k[(static_cast<size_t>(cu[b] + t) * hk + h) * d + i];
          block_max = std::max(block_max, std::fabs(half_to_float(x)));
        }
      }
      if (new_max > held_max && rest[b] > 0) {
        REQUIRE(k_scale_of(split, b, blk_first, h) == k_scale_of(one, b, blk_first, h));
        ++exact_scales;
      }
    }
  }
  CHECK(exact_scales > 0);
}

TEST_CASE("INT8 append of zero tokens: scale 0, codes 0, never NaN", "[decode]") {
  const int hk = 1, d = 64;
  Int8KvCache c = make_int8_cache(make_cache_layout(hk, d, {128}));
  const std::vector<uint16_t> zeros(3 * d, 0);
  append_tokens(c, {3}, zeros, zeros);
  CHECK(c.k_scale[0] == 0.0f);
  CHECK(c.v_scale[0] == 0.0f);
  std::vector<float> k, v;
  dequantize_cache(c, k, v);
  for (float x : k) REQUIRE(x == 0.0f);
  // Non-zero tokens joining the block set its scale; the held zeros stay zero.
  const auto more = tokens(2, hk, d, 31);
  append_tokens(c, {2}, more, more);
  CHECK(c.k_scale[0] > 0.0f);
  for (int i = 0; i < 3 * d; ++i) REQUIRE(c.k8[i] == 0);
  dequantize_cache(c, k, v);
  for (float x : k) REQUIRE(std::isfinite(x));
  // Zeros appended to a block of non-zero tokens leave its scale.
  const float scale = c.k_scale[0];
  append_tokens(c, {1}, std::vector<uint16_t>(d, 0), std::vector<uint16_t>(d, 0));
  CHECK(c.k_scale[0] == scale);
}

TEST_CASE("dequantized cache is within half a block scale of the FP16 tokens", "[decode]") {
  const int hk = 2, d = 128;
  const std::vector<int64_t> lengths{1, 63, 64, 65, 700};
  const std::vector<int64_t> cu = prefix_sums(lengths);
  const auto k = tokens(cu.back(), hk, d, 41, [](int64_t t) { return 1.0 + static_cast<double>(t % 7); });
  const auto v = tokens(cu.back(), hk, d, 42);
  Int8KvCache c = make_int8_cache(make_cache_layout(hk, d, lengths));
  append_tokens(c, lengths, k, v);
  std::vector<float> kd, vd;
  dequantize_cache(c, kd, vd);
  REQUIRE(kd.size() == k.size());
  for (int b = 0; b < 5; ++b) {
    for (int64_t t = 0; t < lengths[b]; ++t) {
      for (int h = 0; h < hk; ++h) {
        const size_t at = (static_cast<size_t>(cu[b] + t) * hk + h) * d;
        const size_t scale = static_cast<size_t>(c.layout.cu_blocks[b] + t / kCacheBlock) * hk + h;
        for (int i = 0; i < d; ++i) {
          REQUIRE(std::fabs(kd[at + i] - half_to_float(k[at + i])) <= 0.5f * c.k_scale[scale] * 1.00001f);
          REQUIRE(std::fabs(vd[at + i] - half_to_float(v[at + i])) <= 0.5f * c.v_scale[scale] * 1.00001f);
        }
      }
    }
  }
}

TEST_CASE("FP16 append copies tokens into the padded layout", "[decode]") {
  const int hk = 2, d = 64;
  const std::vector<int64_t> lengths{3, 70};
  const std::vector<int64_t> cu = prefix_sums(lengths);
  const auto k = tokens(cu.back(), hk, d, 51), v = tokens(cu.back(), hk, d, 52);
  Fp16KvCache c = make_fp16_cache(make_cache_layout(hk, d, lengths));
  const std::vector<int64_t> first{0, 0}, part{1, 65}, rest{2, 5};
  append_tokens(c, part, slice(k, cu, hk, d, first, part), slice(v, cu, hk, d, first, part));
  append_tokens(c, rest, slice(k, cu, hk, d, part, rest), slice(v, cu, hk, d, part, rest));
  CHECK(c.layout.length == lengths);
  for (int b = 0; b < 2; ++b) {
    const size_t row = static_cast<size_t>(hk) * d;
    const size_t src = static_cast<size_t>(cu[b]) * row, dst = static_cast<size_t>(c.layout.cu_capacity[b]) * row;
    REQUIRE(std::equal(&k[src], &k[src] + lengths[b] * row, &c.k[dst]));
    REQUIRE(std::equal(&v[src], &v[src] + lengths[b] * row, &c.v[dst]));
  }
}

TEST_CASE("appends past capacity or with mis-sized tokens are errors that change nothing", "[decode]") {
  const int hk = 1, d = 64;
  Int8KvCache c = make_int8_cache(make_cache_layout(hk, d, {10, 64}));
  Fp16KvCache f = make_fp16_cache(c.layout);
  const auto ok = tokens(3, hk, d, 61);
  append_tokens(c, {1, 2}, ok, ok);
  const Int8KvCache before = c;
  const auto too_many = tokens(65, hk, d, 62);
  CHECK_THROWS_WITH(append_tokens(c, {0, 65}, too_many, too_many),
                    Contains("counts[1]: sequence 1 would hold 67 tokens, capacity 64"));
  CHECK(c.layout.length == before.layout.length);
  CHECK(c.k8 == before.k8);
  CHECK(c.k_scale == before.k_scale);
  CHECK_THROWS_WITH(append_tokens(f, {65, 0}, too_many, too_many), Contains("would hold 65 tokens, capacity 64"));
  CHECK_THROWS_WITH(append_tokens(c, {1}, ok, ok), Contains("has 1 entries but the cache holds 2 sequences"));
  CHECK_THROWS_WITH(append_tokens(c, {-1, 1}, ok, ok), Contains("counts[0]: negative token count -1"));
  CHECK_THROWS_WITH(append_tokens(c, {1, 1}, ok, ok), Contains("expected 128 ([sum counts, hk, d])"));
  CHECK_THROWS_AS(append_tokens(c, {1, 1}, ok, ok), InputError);
}

TEST_CASE("INT8 append gives the same bytes with one thread or many", "[decode]") {
  const int hk = 4, d = 64;
  const std::vector<int64_t> lengths{100, 1, 257};
  const std::vector<int64_t> cu = prefix_sums(lengths);
  const auto k = tokens(cu.back(), hk, d, 71), v = tokens(cu.back(), hk, d, 72);
  const std::vector<int64_t> first{0, 0, 0}, part{37, 0, 100}, rest{63, 1, 157};
  const auto fill = [&] {
    Int8KvCache c = make_int8_cache(make_cache_layout(hk, d, lengths));
    append_tokens(c, part, slice(k, cu, hk, d, first, part), slice(v, cu, hk, d, first, part));
    append_tokens(c, rest, slice(k, cu, hk, d, part, rest), slice(v, cu, hk, d, part, rest));
    return c;
  };
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const Int8KvCache serial = fill();
  omp_set_num_threads(std::max(threads, 4));
  const Int8KvCache parallel = fill();
  omp_set_num_threads(threads);
  CHECK(serial.k8 == parallel.k8);
  CHECK(serial.v8 == parallel.v8);
  CHECK(serial.k_scale == parallel.k_scale);
  CHECK(serial.v_scale == parallel.v_scale);
}
