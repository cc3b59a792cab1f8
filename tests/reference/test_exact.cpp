#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <limits>
#include <vector>

#include "reference/exact.hpp"
#include "tests/reference/attention_fixtures.hpp"

using namespace tilemix;
using namespace tilemix::testing;

namespace {

// Scalar attention in long double, one query row at a time, straight from the definition.
ExactResult naive_attention(const AttentionShape& s, const AttentionInputs& in) {
  ExactResult r;
  r.o.assign(static_cast<size_t>(s.total_q()) * s.hq * s.d, 0.0);
  r.lse.assign(static_cast<size_t>(s.total_q()) * s.hq, -std::numeric_limits<double>::infinity());
  for (int b = 0; b < s.batch(); ++b) {
    const int64_t lq = s.seqlen_q(b), lk = s.seqlen_k(b);
    for (int h = 0; h < s.hq; ++h) {
      const int kvh = h / (s.hq / s.hk);
      for (int64_t i = 0; i < lq; ++i) {
        const int64_t qi = s.cu_seqlens_q[b] + i;
        std::vector<long double> score;
        for (int64_t j = 0; j < lk; ++j) {
          if (s.causal && j > i + lk - lq) break;
          const int64_t kj = s.cu_seqlens_k[b] + j;
          long double dot = 0;
          for (int c = 0; c < s.d; ++c) {
            dot += static_cast<long double>(half_to_float(in.q[(qi * s.hq + h) * s.d + c])) *
                   half_to_float(in.k[(kj * s.hk + kvh) * s.d + c]);
          }
          score.push_back(dot * static_cast<long double>(s.softmax_scale));
        }
        if (score.empty()) continue;
        long double mx = score[0], sum = 0;
        for (long double x : score) mx = std::max(mx, x);
        for (long double& x : score) sum += (x = std::exp(x - mx));
        r.lse[h * s.total_q() + qi] = static_cast<double>(mx + std::log(sum));
        for (int c = 0; c < s.d; ++c) {
          long double acc = 0;
          for (size_t j = 0; j < score.size(); ++j) {
            const int64_t kj = s.cu_seqlens_k[b] + static_cast<int64_t>(j);
            acc += score[j] / sum * half_to_float(in.v[(kj * s.hk + kvh) * s.d + c]);
          }
          r.o[(qi * s.hq + h) * s.d + c] = static_cast<double>(acc);
        }
      }
    }
  }
  return r;
}

void require_matches_naive(const AttentionShape& s, uint64_t seed) {
  const AttentionInputs in = seeded_inputs(s, seed);
  const ExactResult got = exact_attention(s, in);
  const ExactResult want = naive_attention(s, in);
  REQUIRE(got.o.size() == want.o.size());
  REQUIRE(got.lse.size() == want.lse.size());
  for (size_t i = 0; i < want.o.size(); ++i) REQUIRE(got.o[i] == Approx(want.o[i]).margin(1e-12));
  for (size_t i = 0; i < want.lse.size(); ++i) {
    if (std::isinf(want.lse[i])) {
      REQUIRE(got.lse[i] == want.lse[i]);
    } else {
      REQUIRE(got.lse[i] == Approx(want.lse[i]).margin(1e-12));
    }
  }
}

}  // namespace

TEST_CASE("exact attention matches a scalar implementation", "[exact]") {
  SECTION("MHA, causal square") { require_matches_naive(make_shape(2, 2, 64, true, {37}, {37}), 1); }
  SECTION("non-causal, Lq != Lk") { require_matches_naive(make_shape(2, 1, 64, false, {20}, {45}), 2); }
  SECTION("causal, Lq < Lk") { require_matches_naive(make_shape(3, 1, 64, true, {9}, {40}), 3); }
  SECTION("causal, Lq > Lk: early rows see no key") {
    require_matches_naive(make_shape(2, 2, 64, true, {30}, {12}), 4);
  }
  SECTION("GQA ratios 1, 3, 8") {
    require_matches_naive(make_shape(4, 4, 128, true, {19}, {19}), 5);
    require_matches_naive(make_shape(3, 1, 128, true, {19}, {19}), 6);
    require_matches_naive(make_shape(8, 1, 64, false, {11}, {19}), 7);
  }
  SECTION("varlen with a length-1 and a zero-length sequence") {
    require_matches_naive(make_shape(4, 2, 64, true, {17, 1, 0, 33}, {17, 1, 0, 40}), 8);
    require_matches_naive(make_shape(2, 2, 64, false, {5, 0, 1}, {7, 3, 1}), 9);
  }
  SECTION("row blocks: more query rows than one block") {
    require_matches_naive(make_shape(1, 1, 64, true, {600}, {600}), 10);
  }
  SECTION("explicit softmax scale") { require_matches_naive(make_shape(2, 1, 64, false, {13}, {21}, 0.3f), 11); }
}

TEST_CASE("exact attention: masked rows, scale and LSE by hand", "[exact]") {
  // Lq = 3 > Lk = 2, causal: query i sees keys j <= i - 1, so row 0 sees nothing.
  AttentionShape s = make_shape(1, 1, 64, true, {3}, {2}, 0.5f);
  AttentionInputs in;
  in.q.assign(3 * 64, float_to_half(0.0f));
  in.k.assign(2 * 64, float_to_half(0.0f));
  in.v.assign(2 * 64, float_to_half(0.0f));
  // q2 . k0 = 2, q2 . k1 = 4 -> scores 1 and 2 under scale 0.5; v0 = 1, v1 = 3 in channel 0.
  in.q[2 * 64] = float_to_half(2.0f);
  in.k[0 * 64] = float_to_half(1.0f);
  in.k[1 * 64] = float_to_half(2.0f);
  in.v[0 * 64] = float_to_half(1.0f);
  in.v[1 * 64] = float_to_half(3.0f);
  const ExactResult r = exact_attention(s, in);
  CHECK(r.lse[0] == -std::numeric_limits<double>::infinity());
  for (int c = 0; c < 64; ++c) CHECK(r.o[c] == 0.0);
  // Row 1 sees key 0 only: p = 1, o = v0, lse = score 0.
  CHECK(r.o[1 * 64] == Approx(1.0));
  CHECK(r.lse[1] == Approx(0.0).margin(1e-15));
  // Row 2: p = softmax(1, 2); o = p0 * 1 + p1 * 3; lse = log(e + e^2).
  const double p1 = std::exp(2.0) / (std::exp(1.0) + std::exp(2.0));
  CHECK(r.o[2 * 64] == Approx((1.0 - p1) * 1.0 + p1 * 3.0).epsilon(1e-14));
  CHECK(r.lse[2] == Approx(std::log(std::exp(1.0) + std::exp(2.0))).epsilon(1e-14));
}

TEST_CASE("exact attention: B=1 Hq=8 Hk=2 L=2048 d=128 causal within 10 s", "[.][perf]") {
  const AttentionShape s = make_shape(8, 2, 128, true, {2048}, {2048});
  const AttentionInputs in = seeded_inputs(s, 42);
  const auto start = std::chrono::steady_clock::now();
  const ExactResult r = exact_attention(s, in);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  WARN("exact_attention B=1 Hq=8 Hk=2 L=2048 d=128 causal: " << seconds << " s");
  CHECK(r.o.size() == static_cast<size_t>(2048) * 8 * 128);
#ifndef TILEMIX_SANITIZED  // the sanitized build runs several times slower
  CHECK(seconds < 10.0);
#endif
}
