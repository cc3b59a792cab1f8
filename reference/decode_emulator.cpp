#include "reference/decode_emulator.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "core/fp16.hpp"
#include "core/quant.hpp"

namespace tilemix {
namespace {

constexpr float kLog2e = 1.44269504088896340736f;
constexpr float kLn2 = 0.69314718055994530942f;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int kTile = kDecodeGeometry.block_n;
static_assert(kTile == kCacheBlock, "a decode key tile is one cache scale block");

// Partial softmax state of every (split, query head, row); rows padded to kMaxDecodeTokens.
struct Partials {
  int hq = 0;
  std::vector<float> m, l, o;
  size_t row(int64_t split, int h, int r) const {
    return (static_cast<size_t>(split) * hq + h) * kMaxDecodeTokens + r;
  }
};

// One key tile of one (sequence, KV head) as the kernel holds it on chip: K transposed so that
// score loops run over keys, V row-major, both as fp32 (codes for the INT8 cache).
struct TileBuffers {
  std::vector<float> k_t;  // [d][kTile]
  std::vector<float> v;    // [kTile][d]
  float k_scale = 0.0f, v_scale = 0.0f;
  std::vector<float> score, prob;  // one row [kTile]: raw scores x, FP16 P
  float factor = 0.0f;             // the row's s = x * factor
  int legal = 0;                   // keys [0, legal) of the tile are legal for the row
  std::vector<double> dot;         // FP16-path sums of one row [kTile]
  std::vector<double> pv;          // [d]
  // Running state of the task's rows: [query head in group][row]
  std::vector<float> row_max, row_sum, acc;
};

// All query heads of one KV head, as the kernel serves them from one read of the cache; each
// (head, row) keeps its own state, so the grouping does not change any result.
struct SplitTask {
  int b;
  int kv_head;
  int split;  // within the sequence
};

class DecodeEmulator {
 public:
  DecodeEmulator(const DecodeShape& shape, const std::vector<uint16_t>& q, const Int8KvCache* int8,
                 const Fp16KvCache* fp16, const RoutingPlan* plan, const DecodeSplitPlan& splits)
      : shape_(shape), int8_(int8), fp16_(fp16), plan_(plan), splits_(splits),
        layout_(int8 ? int8->layout : fp16->layout), scale_log2_(shape.softmax_scale * kLog2e),
        cu_new_(prefix_sums(shape.new_tokens)) {
    q_.resize(q.size());
    for (size_t i = 0; i < q.size(); ++i) q_[i] = half_to_float(q[i]);
    const auto routed = [](uint64_t w) { return w != 0; };
    if (plan_ && std::any_of(plan_->words.begin(), plan_->words.end(), routed)) {
      q8_ = quantize_blockwise(q, cu_new_, shape.hq, shape.d, kBlockQ);
      q8_codes_.assign(q8_.codes.begin(), q8_.codes.end());
    }
  }

  void run(const SplitTask& task, TileBuffers& buf, Partials& out) const {
    const int b = task.b, d = shape_.d, group = shape_.hq / shape_.hk;
    const int rows = static_cast<int>(shape_.new_tokens[b]);
    const int64_t tiles = decode_key_tiles(shape_.cache_len[b]);
    const auto [first, last] = splits_.tile_range(b, task.split, tiles);
    buf.k_t.resize(static_cast<size_t>(d) * kTile);
    buf.v.resize(static_cast<size_t>(kTile) * d);
    buf.score.resize(kTile);
    buf.prob.resize(kTile);
    buf.dot.resize(kTile);
    buf.pv.resize(d);
    buf.row_max.assign(static_cast<size_t>(group) * rows, kNegInf);
    buf.row_sum.assign(static_cast<size_t>(group) * rows, 0.0f);
    buf.acc.assign(static_cast<size_t>(group) * rows * d, 0.0f);

    for (int64_t n = first; n < last; ++n) {
      const int width = static_cast<int>(std::min<int64_t>(kTile, shape_.cache_len[b] - n * kTile));
      load_tile(b, task.kv_head, n, width, buf);
      const bool int8_scores = plan_ && plan_->int8_route(task.kv_head, b, 0, static_cast<int>(n));
      for (int g = 0; g < group; ++g) {
        const int h = task.kv_head * group + g;
        for (int r = 0; r < rows; ++r) {
          const size_t state = static_cast<size_t>(g) * rows + r;
          scores(b, h, r, n, width, int8_scores, buf);
          update_state(width, buf, buf.row_max[state], buf.row_sum[state], &buf.acc[state * d]);
        }
      }
    }

    const int64_t split = splits_.split_offset[b] + task.split;
    for (int g = 0; g < group; ++g) {
      const int h = task.kv_head * group + g;
      for (int r = 0; r < rows; ++r) {
        const size_t state = static_cast<size_t>(g) * rows + r, dst = out.row(split, h, r);
        out.m[dst] = buf.row_max[state];
        out.l[dst] = buf.row_sum[state];
        std::copy_n(&buf.acc[state * d], d, &out.o[dst * d]);
      }
    }
  }

 private:
  void load_tile(int b, int kvh, int64_t n, int width, TileBuffers& buf) const {
    const int hk = shape_.hk, d = shape_.d;
    const int64_t first = layout_.cu_capacity[b] + n * kTile;
    for (int j = 0; j < width; ++j) {
      const size_t row = (static_cast<size_t>(first + j) * hk + kvh) * d;
      float* k = &buf.k_t[j];
      float* v = &buf.v[static_cast<size_t>(j) * d];
      if (int8_) {
        for (int c = 0; c < d; ++c) k[static_cast<size_t>(c) * kTile] = static_cast<float>(int8_->k8[row + c]);
        for (int c = 0; c < d; ++c) v[c] = static_cast<float>(int8_->v8[row + c]);
      } else {
        for (int c = 0; c < d; ++c) k[static_cast<size_t>(c) * kTile] = half_to_float(fp16_->k[row + c]);
        for (int c = 0; c < d; ++c) v[c] = half_to_float(fp16_->v[row + c]);
      }
    }
    if (int8_) {
      const size_t scale = static_cast<size_t>(layout_.cu_blocks[b] + n) * hk + kvh;
      buf.k_scale = int8_->k_scale[scale];
      buf.v_scale = int8_->v_scale[scale];
    }
  }

  // Row r of query head h against the loaded tile: the raw scores x (INT8 path: the exact
  // integer dot as fp32; FP16 paths: the fp32 dot) of the legal keys and the row's factor f into
  // the log2 domain, s = x * f.
  void scores(int b, int h, int r, int64_t n, int width, bool int8_scores, TileBuffers& buf) const {
    const int d = shape_.d, hq = shape_.hq;
    const int64_t lq = shape_.new_tokens[b], lk = shape_.cache_len[b];
    const int legal = static_cast<int>(std::clamp<int64_t>(visible_keys(r, lq, lk, true) - n * kTile, 0, width));
    const size_t q_offset = (static_cast<size_t>(cu_new_[b] + r) * hq + h) * d;
    float* x = buf.score.data();
    buf.legal = legal;
    if (int8_scores) {
      // Every partial sum of d code products is an integer below 2^24: exact in fp32 (int32 MMA).
      const float* q = &q8_codes_[q_offset];
      std::fill(x, x + legal, 0.0f);
      for (int c = 0; c < d; ++c) {
        const float* k = &buf.k_t[static_cast<size_t>(c) * kTile];
        const float qc = q[c];
        for (int j = 0; j < legal; ++j) x[j] += qc * k[j];
      }
      buf.factor = (q8_.scale(b, r, h) * scale_log2_) * buf.k_scale;
    } else {
      // fp16 x fp16 and fp16 x code products are exact in fp32; the sum is kept in double.
      const float* q = &q_[q_offset];
      double* acc = buf.dot.data();
      std::fill(acc, acc + legal, 0.0);
      for (int c = 0; c < d; ++c) {
        const float* k = &buf.k_t[static_cast<size_t>(c) * kTile];
        const float qc = q[c];
        for (int j = 0; j < legal; ++j) acc[j] += static_cast<double>(qc * k[j]);
      }
      for (int j = 0; j < legal; ++j) x[j] = static_cast<float>(acc[j]);
      // The INT8 cache's K8 is dequantized on chip: its block scale is applied after the dot.
      buf.factor = int8_ ? buf.k_scale * scale_log2_ : scale_log2_;
    }
  }

  void update_state(int width, TileBuffers& buf, float& row_max, float& row_sum, float* o) const {
    const int d = shape_.d, legal = buf.legal;
    const float* x = buf.score.data();
    const float f = buf.factor;
    float* p16 = buf.prob.data();
    // f >= 0 and rounding is monotone, so the largest s = x * f is the largest x times f.
    float x_max = kNegInf;
    for (int j = 0; j < legal; ++j) x_max = std::max(x_max, x[j]);
    const float tile_max = legal > 0 ? x_max * f : kNegInf;
    const float m_new = tile_max > row_max + kDecodeRescaleLog2 ? tile_max : row_max;
    const float reference = m_new == kNegInf ? 0.0f : m_new;
    const float alpha = std::exp2(row_max - reference);

    float p_sum = 0.0f;
    for (int j = 0; j < legal; ++j) {
      const float p = std::exp2(std::fma(x[j], f, -reference));
      p_sum += p;
      // The INT8 cache folds V's block scale into P before the FP16 rounding.
      p16[j] = round_to_half(int8_ ? p * buf.v_scale : p);
    }
    std::fill(p16 + legal, p16 + width, 0.0f);
    row_max = m_new;
    row_sum = row_sum * alpha + p_sum;

    double* pv = buf.pv.data();
    std::fill(pv, pv + d, 0.0);
    for (int j = 0; j < width; ++j) {
      const float p = p16[j];
      const float* v = &buf.v[static_cast<size_t>(j) * d];
      for (int c = 0; c < d; ++c) pv[c] += static_cast<double>(p * v[c]);
    }
    for (int c = 0; c < d; ++c) o[c] = o[c] * alpha + static_cast<float>(pv[c]);
  }

  const DecodeShape& shape_;
  const Int8KvCache* int8_;
  const Fp16KvCache* fp16_;
  const RoutingPlan* plan_;
  const DecodeSplitPlan& splits_;
  const KvCacheLayout& layout_;
  const float scale_log2_;
  const std::vector<int64_t> cu_new_;
  std::vector<float> q_;          // [total_new, hq, d]
  QuantizedTensor q8_;            // present when some tile is routed to INT8
  std::vector<float> q8_codes_;   // [total_new, hq, d]
};

void check_inputs(const DecodeShape& shape, const std::vector<uint16_t>& q, const KvCacheLayout& layout,
                  const DecodeSplitPlan& splits, const char* who) {
  const auto fail = [&](const char* what) { throw std::invalid_argument(std::string(who) + ": " + what); };
  if (!(shape.softmax_scale > 0.0f)) fail("softmax_scale is not resolved (validate_decode)");
  if (shape.hk < 1 || shape.hq % shape.hk != 0 || shape.d < 1) fail("the shape is not validated (validate_decode)");
  if (shape.d > (1 << 24) / (127 * 127)) fail("head dimension too large for exact INT8 sums");
  if (q.size() != static_cast<size_t>(shape.total_new()) * shape.hq * shape.d) fail("q is not [total_new, hq, d]");
  if (layout.hk != shape.hk || layout.d != shape.d || layout.batch() != shape.batch()) {
    fail("the cache was built for another shape");
  }
  if (static_cast<int>(splits.split_offset.size()) != shape.batch() + 1) fail("the split plan is for another batch");
  for (int b = 0; b < shape.batch(); ++b) {
    if (layout.length[b] != shape.cache_len[b]) fail("the cache does not hold cache_len tokens");
  }
  if (!splits.fits(shape)) fail("the split plan does not cover the cache");
}

void check_plan(const DecodeShape& shape, const RoutingPlan& plan) {
  bool ok = plan_fits(shape.attention_shape(), plan);
  for (int b = 0; ok && b < shape.batch(); ++b) {
    const TileGeometry& g = plan.tilings[b].geometry;
    ok = g.block_m == kDecodeGeometry.block_m && g.block_n == kDecodeGeometry.block_n;
  }
  if (!ok) throw std::invalid_argument("emulate_decode_int8: the routing plan was not built for this decode shape");
}

DecodeResult emulate(const DecodeShape& shape, const DecodeEmulator& emulator, const DecodeSplitPlan& splits) {
  const int hq = shape.hq, hk = shape.hk, d = shape.d;
  Partials partials;
  partials.hq = hq;
  const size_t rows = static_cast<size_t>(splits.total_splits()) * hq * kMaxDecodeTokens;
  partials.m.assign(rows, kNegInf);
  partials.l.assign(rows, 0.0f);
  partials.o.assign(rows * d, 0.0f);

  std::vector<SplitTask> tasks;
  for (int b = 0; b < shape.batch(); ++b) {
    for (int h = 0; h < hk; ++h) {
      for (int s = 0; s < splits.splits(b); ++s) tasks.push_back({b, h, s});
    }
  }
#pragma omp parallel
  {
    TileBuffers buffers;
#pragma omp for schedule(dynamic)
    for (size_t i = 0; i < tasks.size(); ++i) emulator.run(tasks[i], buffers, partials);
  }

  // Combine, per (sequence, query head, row), splits in ascending order.
  const int64_t total_new = shape.total_new();
  const std::vector<int64_t> cu_new = prefix_sums(shape.new_tokens);
  DecodeResult result;
  result.o.assign(static_cast<size_t>(total_new) * hq * d, 0);
  result.lse.assign(static_cast<size_t>(total_new) * hq, kNegInf);
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < shape.batch(); ++b) {
    for (int h = 0; h < hq; ++h) {
      std::vector<float> acc(d);
      const int64_t first = splits.split_offset[b], last = splits.split_offset[b + 1];
      for (int r = 0; r < shape.new_tokens[b]; ++r) {
        float m = kNegInf;
        for (int64_t s = first; s < last; ++s) m = std::max(m, partials.m[partials.row(s, h, r)]);
        if (m == kNegInf) continue;  // no legal key: o = 0, lse = -inf
        float l = 0.0f;
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t s = first; s < last; ++s) {
          const size_t src = partials.row(s, h, r);
          if (partials.m[src] == kNegInf) continue;
          const float w = std::exp2(partials.m[src] - m);
          l += w * partials.l[src];
          const float* o = &partials.o[src * d];
          for (int c = 0; c < d; ++c) acc[c] += w * o[c];
        }
        const int64_t t = cu_new[b] + r;
        uint16_t* o = &result.o[(static_cast<size_t>(t) * hq + h) * d];
        for (int c = 0; c < d; ++c) o[c] = float_to_half(acc[c] / l);
        result.lse[static_cast<size_t>(h) * total_new + t] = (m + std::log2(l)) * kLn2;
      }
    }
  }
  return result;
}

}  // namespace

DecodeResult emulate_decode_int8(const DecodeShape& shape, const std::vector<uint16_t>& q, const Int8KvCache& cache,
                                 const RoutingPlan& plan, const DecodeSplitPlan& splits) {
  check_inputs(shape, q, cache.layout, splits, "emulate_decode_int8");
  check_plan(shape, plan);
  const DecodeEmulator emulator(shape, q, &cache, nullptr, &plan, splits);
  return emulate(shape, emulator, splits);
}

DecodeResult emulate_decode_fp16(const DecodeShape& shape, const std::vector<uint16_t>& q, const Fp16KvCache& cache,
                                 const DecodeSplitPlan& splits) {
  check_inputs(shape, q, cache.layout, splits, "emulate_decode_fp16");
  const DecodeEmulator emulator(shape, q, nullptr, &cache, nullptr, splits);
  return emulate(shape, emulator, splits);
}

}  // namespace tilemix
