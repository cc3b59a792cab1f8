#include <catch2/catch.hpp>

#include <vector>

#include "core/error.hpp"
#include "core/problem.hpp"

using namespace tilemix;

namespace {

AttentionShape shape_of(int hq, int hk, const std::vector<int64_t>& lens) {
  AttentionShape s;
  s.hq = hq;
  s.hk = hk;
  s.d = 128;
  s.cu_seqlens_q = prefix_sums(lens);
  s.cu_seqlens_k = prefix_sums(lens);
  return s;
}

}  // namespace

TEST_CASE("validate bounds sequence lengths, so tiles and groups fit an int", "[sizes]") {
  AttentionShape ok = shape_of(1, 1, {kMaxSeqLen});
  validate(ok);
  AttentionShape s = shape_of(1, 1, {8, kMaxSeqLen + 1});
  CHECK_THROWS_WITH(validate(s, "plan"), "plan.seqlens_q: sequence 1 has length 2147483648 (at most 2147483647)");
}

TEST_CASE("validate refuses Q and K/V whose bytes as doubles pass 2^63 - 1", "[sizes]") {
  // Two sequences of 2^31 - 1 tokens of 65536 x 128 channels: 2^58 bytes fit; 2^20 sequences do not.
  AttentionShape fits = shape_of(65536, 65536, std::vector<int64_t>(2, kMaxSeqLen));
  validate(fits);
  AttentionShape s = shape_of(65536, 1, std::vector<int64_t>(size_t{1} << 20, kMaxSeqLen));
  CHECK_THROWS_WITH(validate(s, "cfg.json: $.cases[0]"),
                    "cfg.json: $.cases[0]: Q [total_q, hq, d] in doubles is 2251799812636672 (total_q) x 65536 (hq) x "
                    "128 (d) x 8 (bytes), more than 9223372036854775807");
  // One query per sequence: the keys overflow with their own heads; without a path the error names the shape.
  s.hk = 65536;
  s.cu_seqlens_q = prefix_sums(std::vector<int64_t>(size_t{1} << 20, 1));
  CHECK_THROWS_WITH(validate(s), "shape: K [total_k, hk, d] in doubles is 2251799812636672 (total_k) x 65536 (hk) x "
                                 "128 (d) x 8 (bytes), more than 9223372036854775807");
}
