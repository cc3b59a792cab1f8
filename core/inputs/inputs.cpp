#include "core/inputs/inputs.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.hpp"
#include "core/fp16.hpp"
#include "core/inputs/normal.hpp"
#include "core/inputs/npy.hpp"
#include "core/routing/rng.hpp"
#include "core/sizes.hpp"

namespace tilemix {
namespace {

// llm_like positional component: one channel pair per wavelength (in tokens), at the top of d.
constexpr double kWavelengths[] = {256.0, 512.0, 1024.0, 2048.0, 4096.0};
constexpr int kPositionalPairs = static_cast<int>(std::size(kWavelengths));
constexpr double kTwoPi = 6.283185307179586476925;

// Independent streams per tensor; rows draw from mix_seed(tensor stream, token).
enum Stream : uint64_t { kStreamQ = 1, kStreamK = 2, kStreamV = 3, kStreamOutliers = 4, kStreamChannelBias = 5 };

// Fills [tokens, row_len] with N(0, stddev) draws, lets `modify(token, row)` adjust each row in
// FP32, and rounds to FP16. One stream per token row: the result does not depend on threads.
template <class Modify>
std::vector<uint16_t> generate(int64_t tokens, int64_t row_len, uint64_t seed, float stddev, Modify modify) {
  std::vector<uint16_t> out(static_cast<size_t>(tokens * row_len));
#pragma omp parallel
  {
    std::vector<float> row(static_cast<size_t>(row_len));
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tokens; ++t) {
      NormalStream normal(mix_seed(seed, static_cast<uint64_t>(t)));
      for (int64_t i = 0; i < row_len; ++i) row[i] = static_cast<float>(stddev * normal.next());
      modify(t, row.data());
      uint16_t* dst = out.data() + t * row_len;
      for (int64_t i = 0; i < row_len; ++i) dst[i] = float_to_half(row[i]);
    }
  }
  return out;
}

// Position of packed token t inside its sequence, and that sequence's index.
struct Position {
  int b;
  int64_t pos;
};
Position locate(const std::vector<int64_t>& cu, int64_t t) {
  // The last sequence starting at or before t that is not empty.
  const auto it = std::upper_bound(cu.begin(), cu.end(), t);
  const int b = static_cast<int>(it - cu.begin()) - 1;
  return {b, t - cu[b]};
}

// `count` distinct channels of [0, limit), fixed by the seed (partial Fisher-Yates).
std::vector<int> outlier_channels(uint64_t seed, int count, int limit) {
  std::vector<int> channels(static_cast<size_t>(limit));
  std::iota(channels.begin(), channels.end(), 0);
  SplitMix64 rng(mix_seed(seed, kStreamOutliers));
  for (int i = 0; i < count; ++i) {
    const int j = i + static_cast<int>(rng.below(static_cast<uint64_t>(limit - i)));
    std::swap(channels[i], channels[j]);
  }
  channels.resize(static_cast<size_t>(count));
  std::sort(channels.begin(), channels.end());
  return channels;
}

// Adds a * (cos(w pos), sin(w pos)) on each positional channel pair of every head, so that the
// dot product of a query and a key gains a^2 * sum cos(w (pos_q - pos_k)): largest nearby.
void add_positional(float* row, int heads, int d, double pos, double amplitude) {
  for (int f = 0; f < kPositionalPairs; ++f) {
    const double angle = kTwoPi * pos / kWavelengths[f];
    const float c = static_cast<float>(amplitude * std::cos(angle));
    const float s = static_cast<float>(amplitude * std::sin(angle));
    const int channel = d - 2 * kPositionalPairs + 2 * f;
    for (int h = 0; h < heads; ++h) {
      row[h * d + channel] += c;
      row[h * d + channel + 1] += s;
    }
  }
}

// Per-channel key offsets, one vector per KV head that every token of the head shares: the
// channel-wise mean that real models' keys carry (SageAttention, Zhang et al. 2024, section 3 and
// figure 4: K has channel-wise outliers common to all tokens, so subtracting the mean key "smooths"
// it; KIVI, Liu et al. 2024, section 3: key outliers sit in fixed channels). A few channels (one
// in 16, at least one) are large and the rest small: offset = bias * stddev * z with
// z = +-(1 + |N(0, 1)| / 2) (random sign) on the large channels and N(0, 0.1^2) on the others,
// [hk, d], drawn from their own stream.
std::vector<float> channel_offsets(uint64_t seed, int hk, int d, float bias, float stddev) {
  std::vector<float> offsets(static_cast<size_t>(hk) * d);
  const int large = std::max(1, d / 16);
  for (int h = 0; h < hk; ++h) {
    const uint64_t head_seed = mix_seed(seed, static_cast<uint64_t>(h));
    const std::vector<int> big = outlier_channels(head_seed, large, d);
    NormalStream normal(mix_seed(head_seed, 1));
    for (int c = 0; c < d; ++c) {
      const double n = normal.next();
      const double z = std::binary_search(big.begin(), big.end(), c)
                           ? std::copysign(1.0 + 0.5 * std::fabs(n), normal.next())
                           : 0.1 * n;
      offsets[static_cast<size_t>(h) * d + c] = static_cast<float>(bias * stddev * z);
    }
  }
  return offsets;
}

struct Nonfinite {
  int64_t count = 0;
  int64_t first = -1;
};

Nonfinite find_nonfinite(const std::vector<uint16_t>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  int64_t count = 0, first = n;
#pragma omp parallel for reduction(+ : count) reduction(min : first) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    if ((x[i] & 0x7c00u) == 0x7c00u) {  // exponent all ones: Inf or NaN
      ++count;
      first = std::min(first, i);
    }
  }
  return {count, count ? first : -1};
}

void check_tensor(const std::vector<uint16_t>& x, int heads, int d, const std::string& what) {
  const Nonfinite bad = find_nonfinite(x);
  if (bad.count == 0) return;
  const int64_t row = static_cast<int64_t>(heads) * d;
  throw InputError(what, std::to_string(bad.count) + " NaN/Inf values, the first at [token " +
                             std::to_string(bad.first / row) + ", head " + std::to_string(bad.first % row / d) +
                             ", channel " + std::to_string(bad.first % d) +
                             "] (set input.allow_nonfinite to run anyway)");
}

}  // namespace

int max_outlier_channels(int d) { return std::max(0, d - 2 * kPositionalPairs); }

void check_finite(const std::vector<uint16_t>& x, const std::string& what) {
  const Nonfinite bad = find_nonfinite(x);
  if (bad.count == 0) return;
  throw InputError(what,
                   std::to_string(bad.count) + " NaN/Inf values, the first at element " + std::to_string(bad.first));
}

AttentionInputs make_inputs(const AttentionShape& shape, const InputSpec& spec, const std::string& where) {
  const int64_t total_q = shape.total_q(), total_k = shape.total_k();
  const int64_t q_row = static_cast<int64_t>(shape.hq) * shape.d, k_row = static_cast<int64_t>(shape.hk) * shape.d;
  // validate() bounds these for the shapes of a config; a shape from elsewhere may not have passed it.
  checked_product(where, "Q [total_q, hq, d] in FP16", {{total_q, "total_q"}, {q_row, "hq x d"}, {2, "bytes"}});
  checked_product(where, "K [total_k, hk, d] in FP16", {{total_k, "total_k"}, {k_row, "hk x d"}, {2, "bytes"}});
  AttentionInputs in;
  if (spec.kind == InputKind::npy) {
    in.q = read_npy_as_half(spec.q_path, {total_q, shape.hq, shape.d}, "[total_q, hq, d]");
    in.k = read_npy_as_half(spec.k_path, {total_k, shape.hk, shape.d}, "[total_k, hk, d]");
    in.v = read_npy_as_half(spec.v_path, {total_k, shape.hk, shape.d}, "[total_k, hk, d]");
    if (!spec.allow_nonfinite) {
      check_tensor(in.q, shape.hq, shape.d, spec.q_path);
      check_tensor(in.k, shape.hk, shape.d, spec.k_path);
      check_tensor(in.v, shape.hk, shape.d, spec.v_path);
    }
    return in;
  }

  if (!(spec.stddev > 0.0f) || !std::isfinite(spec.stddev)) {
    throw InputError(where + ".stddev", "must be a finite number > 0");
  }
  const uint64_t seed_q = mix_seed(spec.seed, kStreamQ), seed_k = mix_seed(spec.seed, kStreamK),
                 seed_v = mix_seed(spec.seed, kStreamV);
  const auto unchanged = [](int64_t, float*) {};
  if (spec.kind == InputKind::gaussian) {
    in.q = generate(total_q, q_row, seed_q, spec.stddev, unchanged);
    in.k = generate(total_k, k_row, seed_k, spec.stddev, unchanged);
  } else {
    if (spec.outlier_channels < 0 || spec.outlier_channels > max_outlier_channels(shape.d)) {
      throw InputError(where + ".outlier_channels", "must be in [0, " + std::to_string(max_outlier_channels(shape.d)) +
                                                        "] for d=" + std::to_string(shape.d));
    }
    if (!(spec.local_bias >= 0.0f) || !std::isfinite(spec.local_bias)) {
      throw InputError(where + ".local_bias", "must be a finite number >= 0");
    }
    if (!(spec.k_channel_bias >= 0.0f) || !std::isfinite(spec.k_channel_bias)) {
      throw InputError(where + ".k_channel_bias", "must be a finite number >= 0");
    }
    const std::vector<float> offsets =
        spec.k_channel_bias > 0.0f
            ? channel_offsets(mix_seed(spec.seed, kStreamChannelBias), shape.hk, shape.d, spec.k_channel_bias,
                              spec.stddev)
            : std::vector<float>();
    const double amplitude = std::sqrt(static_cast<double>(spec.local_bias)) * spec.stddev;
    const std::vector<int> outliers = outlier_channels(spec.seed, spec.outlier_channels, max_outlier_channels(shape.d));
    const int hq = shape.hq, hk = shape.hk, d = shape.d;
    in.q = generate(total_q, q_row, seed_q, spec.stddev, [&](int64_t t, float* row) {
      const Position p = locate(shape.cu_seqlens_q, t);
      // Queries sit at key-space positions (bottom-right aligned, as the causal mask).
      const int64_t pos = p.pos + shape.seqlen_k(p.b) - shape.seqlen_q(p.b);
      add_positional(row, hq, d, static_cast<double>(pos), amplitude);
    });
    in.k = generate(total_k, k_row, seed_k, spec.stddev, [&](int64_t t, float* row) {
      const Position p = locate(shape.cu_seqlens_k, t);
      add_positional(row, hk, d, static_cast<double>(p.pos), amplitude);
      for (int h = 0; h < hk; ++h) {
        for (int c : outliers) row[h * d + c] *= spec.outlier_scale;
      }
      if (p.pos == 0) {
        for (int64_t i = 0; i < k_row; ++i) row[i] *= spec.sink_scale;
      }
      // Last, so that every token of the head, the sink too, carries the same offset.
      for (size_t i = 0; i < offsets.size(); ++i) row[i] += offsets[i];
    });
  }
  in.v = generate(total_k, k_row, seed_v, spec.stddev, unchanged);
  if (!spec.allow_nonfinite) {
    // Large stddev or scales can overflow FP16.
    check_tensor(in.q, shape.hq, shape.d, where + " (generated q)");
    check_tensor(in.k, shape.hk, shape.d, where + " (generated k)");
    check_tensor(in.v, shape.hk, shape.d, where + " (generated v)");
  }
  return in;
}

}  // namespace tilemix
