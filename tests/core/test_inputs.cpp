#include <catch2/catch.hpp>

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <vector>

#include "core/error.hpp"
#include "core/fp16.hpp"
#include "core/inputs/inputs.hpp"
#include "core/inputs/npy.hpp"

using namespace tilemix;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

AttentionShape make_shape(int hq, int hk, int d, std::vector<int64_t> lens_q, std::vector<int64_t> lens_k) {
  AttentionShape s;
  s.hq = hq;
  s.hk = hk;
  s.d = d;
  s.cu_seqlens_q = prefix_sums(lens_q);
  s.cu_seqlens_k = prefix_sums(lens_k);
  validate(s);
  return s;
}

float at(const std::vector<uint16_t>& x, int64_t token, int heads, int d, int h, int c) {
  return half_to_float(x[(token * heads + h) * d + c]);
}

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("tilemix-inputs-" + std::to_string(::getpid()) + "-" + std::to_string(reinterpret_cast<uintptr_t>(this)));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

}  // namespace

TEST_CASE("gaussian inputs are seeded and deterministic", "[inputs]") {
  const AttentionShape shape = make_shape(4, 2, 64, {100, 37}, {80, 50});
  InputSpec spec;
  spec.seed = 11;
  const AttentionInputs a = make_inputs(shape, spec);
  const AttentionInputs b = make_inputs(shape, spec);
  REQUIRE(a.q.size() == static_cast<size_t>(137 * 4 * 64));
  REQUIRE(a.k.size() == static_cast<size_t>(130 * 2 * 64));
  REQUIRE(a.v.size() == a.k.size());
  CHECK(a.q == b.q);
  CHECK(a.k == b.k);
  CHECK(a.v == b.v);
  CHECK(a.k != a.v);  // independent streams

  spec.seed = 12;
  const AttentionInputs c = make_inputs(shape, spec);
  CHECK(a.q != c.q);
  CHECK(a.k != c.k);

  SECTION("the thread count does not change the values") {
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    spec.seed = 11;
    const AttentionInputs one = make_inputs(shape, spec);
    omp_set_num_threads(threads);
    CHECK(one.q == a.q);
    CHECK(one.v == a.v);
  }
  SECTION("moments follow stddev") {
    spec.stddev = 0.5f;
    const AttentionInputs s = make_inputs(shape, spec);
    double sum = 0, sum2 = 0;
    for (uint16_t h : s.q) {
      const double x = half_to_float(h);
      sum += x;
      sum2 += x * x;
    }
    const double n = static_cast<double>(s.q.size());
    CHECK(std::abs(sum / n) < 0.02);
    CHECK(std::sqrt(sum2 / n) == Approx(0.5).epsilon(0.03));
  }
}

TEST_CASE("llm_like inputs: sink key, outlier channels, local bias", "[inputs]") {
  const int hq = 2, hk = 1, d = 64;
  const int64_t L = 2048;
  const AttentionShape shape = make_shape(hq, hk, d, {L}, {L});
  InputSpec spec;
  spec.kind = InputKind::llm_like;
  spec.seed = 3;
  const AttentionInputs in = make_inputs(shape, spec);
  CHECK(make_inputs(shape, spec).k == in.k);

  SECTION("the key at position 0 has a much larger norm") {
    std::vector<double> norms;
    for (int64_t t = 0; t < L; ++t) {
      double n2 = 0;
      for (int c = 0; c < d; ++c) n2 += std::pow(at(in.k, t, hk, d, 0, c), 2);
      norms.push_back(std::sqrt(n2));
    }
    std::vector<double> rest(norms.begin() + 1, norms.end());
    std::nth_element(rest.begin(), rest.begin() + rest.size() / 2, rest.end());
    CHECK(norms[0] > 3.0 * rest[rest.size() / 2]);
  }
  SECTION("a few K channels are much larger, Q's are not") {
    std::vector<double> k_mean(d, 0.0), q_mean(d, 0.0);
    for (int64_t t = 1; t < L; ++t) {
      for (int c = 0; c < d; ++c) {
        k_mean[c] += std::abs(at(in.k, t, hk, d, 0, c));
        q_mean[c] += std::abs(at(in.q, t, hq, d, 0, c));
      }
    }
    std::vector<double> k_sorted = k_mean, q_sorted = q_mean;
    std::sort(k_sorted.begin(), k_sorted.end());
    std::sort(q_sorted.begin(), q_sorted.end());
    const int outliers = spec.outlier_channels;
    // The `outliers` largest K channels stand well above the median; the next one does not.
    CHECK(k_sorted[d - outliers] > 4.0 * k_sorted[d / 2]);
    CHECK(k_sorted[d - outliers - 1] < 2.0 * k_sorted[d / 2]);
    CHECK(q_sorted[d - 1] < 2.0 * q_sorted[d / 2]);
  }
  SECTION("nearby keys score higher on average") {
    double near = 0, far = 0;
    int64_t n_near = 0, n_far = 0;
    for (int64_t i = 0; i < L; ++i) {
      for (int64_t j = 1; j < L; ++j) {  // skip the sink
        const int64_t gap = std::abs(i - j);
        const bool is_near = gap < 16, is_far = gap >= 1200 && gap < 1800;
        if (!is_near && !is_far) continue;
        double s = 0;
        for (int c = 0; c < d; ++c) s += at(in.q, i, hq, d, 0, c) * at(in.k, j, hk, d, 0, c);
        if (is_near) {
          near += s;
          ++n_near;
        } else {
          far += s;
          ++n_far;
        }
      }
    }
    near /= static_cast<double>(n_near);
    far /= static_cast<double>(n_far);
    INFO("mean score near " << near << ", far " << far);
    CHECK(near > far + 1.0);
  }
}

TEST_CASE("llm_like k_channel_bias: one key offset per KV head and channel, shared by every token", "[inputs]") {
  const AttentionShape s = make_shape(4, 2, 64, {300, 77}, {300, 77});
  InputSpec spec;
  spec.kind = InputKind::llm_like;
  spec.seed = 5;
  const AttentionInputs base = make_inputs(s, spec);
  InputSpec zero = spec;
  zero.k_channel_bias = 0.0f;  // the default: no offset, the same inputs as before the key existed
  CHECK(make_inputs(s, zero).k == base.k);

  spec.k_channel_bias = 3.0f;
  const AttentionInputs biased = make_inputs(s, spec);
  CHECK(biased.q == base.q);
  CHECK(biased.v == base.v);
  const int64_t tokens = s.total_k();
  float largest = 0.0f;
  for (uint16_t x : biased.k) largest = std::max(largest, std::fabs(half_to_float(x)));
  // Two FP16 roundings of values up to `largest` apart: the offset is the same for every token.
  const float tolerance = 2.0f * largest / 1024.0f;
  for (int h = 0; h < s.hk; ++h) {
    std::vector<float> offset(s.d);
    for (int c = 0; c < s.d; ++c) {
      float lo = INFINITY, hi = -INFINITY;
      for (int64_t t = 0; t < tokens; ++t) {
        const size_t i = (static_cast<size_t>(t) * s.hk + h) * s.d + c;
        const float diff = half_to_float(biased.k[i]) - half_to_float(base.k[i]);
        lo = std::min(lo, diff);
        hi = std::max(hi, diff);
      }
      INFO("head " << h << " channel " << c);
      CHECK(hi - lo <= tolerance);
      offset[c] = std::fabs(0.5f * (lo + hi));
    }
    // One channel in 16 at least the bias (in stddevs), the rest an order of magnitude smaller.
    std::sort(offset.begin(), offset.end(), std::greater<float>());
    const int large = s.d / 16;
    CHECK(offset[large - 1] >= spec.k_channel_bias - tolerance);
    CHECK(offset[large] < 0.5f * spec.k_channel_bias);
    CHECK(offset[s.d / 2] < 0.15f * spec.k_channel_bias);
  }
  InputSpec other_seed = spec;
  other_seed.seed = 6;
  CHECK(make_inputs(s, other_seed).k != biased.k);

  spec.k_channel_bias = -1.0f;
  CHECK_THROWS_WITH(make_inputs(s, spec, "$.cases[0].input"), Contains("$.cases[0].input.k_channel_bias"));
}

TEST_CASE("llm_like queries use key-space positions when Lq != Lk", "[inputs]") {
  // With one query at the end of 512 keys the query matches the last keys, not the first ones.
  const AttentionShape shape = make_shape(1, 1, 64, {1}, {512});
  InputSpec spec;
  spec.kind = InputKind::llm_like;
  spec.local_bias = 50.0f;  // make the positional term dominate
  spec.outlier_channels = 0;
  const AttentionInputs in = make_inputs(shape, spec);
  const auto score = [&](int64_t j) {
    double s = 0;
    for (int c = 0; c < 64; ++c) s += at(in.q, 0, 1, 64, 0, c) * at(in.k, j, 1, 64, 0, c);
    return s;
  };
  double last = 0, early = 0;
  for (int64_t j = 500; j < 512; ++j) last += score(j);
  for (int64_t j = 200; j < 212; ++j) early += score(j);
  CHECK(last > early);
}

TEST_CASE("npy inputs are read and checked", "[inputs]") {
  TempDir dir;
  const AttentionShape shape = make_shape(2, 1, 64, {3}, {5});
  std::vector<float> q(3 * 2 * 64, 0.25f), k(5 * 64, -1.0f), v(5 * 64, 2.0f);
  write_npy(dir.file("q.npy"), NpyDtype::f32, {3, 2, 64}, q.data());
  write_npy(dir.file("k.npy"), NpyDtype::f32, {5, 1, 64}, k.data());
  write_npy(dir.file("v.npy"), NpyDtype::f32, {5, 1, 64}, v.data());
  InputSpec spec;
  spec.kind = InputKind::npy;
  spec.q_path = dir.file("q.npy");
  spec.k_path = dir.file("k.npy");
  spec.v_path = dir.file("v.npy");
  const AttentionInputs in = make_inputs(shape, spec);
  CHECK(in.q == std::vector<uint16_t>(q.size(), float_to_half(0.25f)));
  CHECK(in.k == std::vector<uint16_t>(k.size(), float_to_half(-1.0f)));
  CHECK(in.v == std::vector<uint16_t>(v.size(), float_to_half(2.0f)));

  SECTION("NaN in a file is an error naming the file, unless allowed") {
    k[64 * 3 + 7] = std::nanf("");
    k[64 * 4] = INFINITY;
    write_npy(dir.file("k.npy"), NpyDtype::f32, {5, 1, 64}, k.data());
    CHECK_THROWS_AS(make_inputs(shape, spec), InputError);
    CHECK_THROWS_WITH(make_inputs(shape, spec),
                      Contains(dir.file("k.npy") + ": 2 NaN/Inf values, the first at [token 3, head 0, channel 7]"));
    spec.allow_nonfinite = true;
    CHECK(std::isnan(half_to_float(make_inputs(shape, spec).k[64 * 3 + 7])));
  }
  SECTION("a mis-shaped file names the file and both shapes") {
    write_npy(dir.file("v.npy"), NpyDtype::f32, {4, 1, 64}, v.data());
    CHECK_THROWS_WITH(make_inputs(shape, spec), dir.file("v.npy") +
                                                    ": shape [4, 1, 64] does not match the config's [5, 1, 64] "
                                                    "([total_k, hk, d])");
  }
  SECTION("a missing file") {
    spec.q_path = dir.file("missing.npy");
    CHECK_THROWS_WITH(make_inputs(shape, spec), Contains(dir.file("missing.npy") + ": cannot open file"));
  }
}

TEST_CASE("generated inputs that overflow FP16 are reported", "[inputs]") {
  const AttentionShape shape = make_shape(1, 1, 64, {4}, {4});
  InputSpec spec;
  spec.stddev = 1e6f;
  CHECK_THROWS_WITH(make_inputs(shape, spec, "cfg.json: $.cases[0].input"),
                    Contains("cfg.json: $.cases[0].input (generated q): "));
  spec.allow_nonfinite = true;
  CHECK_NOTHROW(make_inputs(shape, spec));
  spec.stddev = 0.0f;
  CHECK_THROWS_WITH(make_inputs(shape, spec, "in"), Contains("in.stddev: must be a finite number > 0"));
}

TEST_CASE("check_finite counts NaN and Inf", "[inputs]") {
  CHECK_NOTHROW(check_finite({0x3c00, 0x7bff, 0xfbff}, "x"));
  CHECK_THROWS_WITH(check_finite({0x3c00, 0x7e00, 0x7c00, 0xfc00}, "x.npy"),
                    "x.npy: 3 NaN/Inf values, the first at element 1");
  CHECK(std::string(to_string(InputKind::llm_like)) == "llm_like");
}

TEST_CASE("inputs whose byte count passes 2^63 are refused before they are drawn", "[inputs]") {
  // Not validated: validate() refuses this shape too, make_inputs on its own as well.
  AttentionShape s;
  s.hq = 65536;
  s.hk = 1;
  s.d = 128;
  s.cu_seqlens_q = {0, int64_t{1} << 40};
  s.cu_seqlens_k = {0, 1};
  CHECK_THROWS_WITH(make_inputs(s, InputSpec{}, "$.cases[0].input"),
                    "$.cases[0].input: Q [total_q, hq, d] in FP16 is 1099511627776 (total_q) x 8388608 (hq x d) x 2 "
                    "(bytes), more than 9223372036854775807");
}
