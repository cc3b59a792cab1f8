#include "reference/emulator.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

#include "core/fp16.hpp"
#include "core/quant.hpp"
#include "core/quant_fp8.hpp"

namespace tilemix {
namespace {

constexpr float kLog2e = 1.44269504088896340736f;
constexpr float kLn2 = 0.69314718055994530942f;
constexpr int kAccumChunk = 16;  // keys per MMA k-step; accum fp16 rounds O after each
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr size_t kParallelConversion = size_t{1} << 18;  // smaller conversions are not worth a thread team

// Every partial sum of d products of INT8 codes is an integer below 2^24, so summing the codes
// in fp32 is the exact int32 accumulation (and vectorizes like the FP16 path).
constexpr int kMaxExactInt8Dim = (1 << 24) / (127 * 127);

std::vector<float> half_to_float_array(const std::vector<uint16_t>& x) {
  std::vector<float> out(x.size());
#pragma omp parallel for schedule(static) if (x.size() >= kParallelConversion)
  for (size_t i = 0; i < x.size(); ++i) out[i] = half_to_float(x[i]);
  return out;
}

// [total, heads, d] -> [heads, d, total]: the keys of one channel are contiguous, so the score
// loops run over keys and each score keeps one sequential sum over channels.
template <typename T, typename Convert>
std::vector<float> transpose_keys(const std::vector<T>& x, int64_t total, int heads, int d, Convert convert) {
  std::vector<float> out(x.size());
#pragma omp parallel for collapse(2) schedule(static) if (x.size() >= kParallelConversion)
  for (int h = 0; h < heads; ++h) {
    for (int c = 0; c < d; ++c) {
      float* dst = &out[(static_cast<size_t>(h) * d + c) * total];
      for (int64_t t = 0; t < total; ++t) dst[t] = convert(x[(static_cast<size_t>(t) * heads + h) * d + c]);
    }
  }
  return out;
}

// The operands as the emulated kernel reads them, converted once.
struct Operands {
  std::vector<float> q;    // [total_q, hq, d]
  std::vector<float> k_t;  // [hk, d, total_k]
  std::vector<float> v;    // [total_k, hk, d]
  // INT8 operands, present only when some tile is routed to INT8.
  QuantizedTensor q8, k8;  // codes and scales of quantize_blockwise
  std::vector<float> q8_codes;   // [total_q, hq, d]
  std::vector<float> k8_codes_t;  // [hk, d, total_k]
  std::vector<float> qkbar;       // smooth_k: q . kbar of every row [total_q, hq]; empty otherwise
  // FP8 P V operands, present only when some tile takes FP8 P V.
  Fp8Values v8;
  std::vector<float> v8_values;  // the codes' values [total_k, hk, d]
};

struct QueryTile {
  int b;
  int h;
  int m;
};

// Online-softmax state and scratch of one query tile.
struct TileState {
  std::vector<float> row_max, row_sum, acc;  // m, l, O [rows, d]
  std::vector<float> score;                  // s of the current step [rows, softmax_tiles * block_n]
  std::vector<float> score_scale;            // fused_score_scale: each raw score's scale [as score]
  std::vector<float> prob;                   // the fp32 p of one row of the step (p' on an FP8 group)
  std::vector<float> group_sum;              // FP8 P V: t[c], the P8 V8 sums of one group [d]
  std::vector<double> dot;                   // FP16-path sums of one row [block_n]
  std::vector<float> int8_dot;               // INT8-path sums of one row [block_n]
};

class TileEmulator {
 public:
  TileEmulator(const AttentionShape& shape, const RoutingPlan& plan, const EmulatorOptions& options,
               const Operands& ops, EmulatorResult& result)
      : shape_(shape), plan_(plan), options_(options), ops_(ops), result_(result),
        scale_log2_(shape.softmax_scale * kLog2e) {}

  void run(const QueryTile& tile, TileState& st) const {
    const SequenceTiling& t = plan_.tilings[tile.b];
    const int d = shape_.d, block_n = t.geometry.block_n;
    const int per_step = options_.softmax_tiles, stride = per_step * block_n;
    const int64_t i0 = t.row_begin(tile.m), rows = t.row_end(tile.m) - i0;
    st.row_max.assign(rows, kNegInf);
    st.row_sum.assign(rows, 0.0f);
    st.acc.assign(static_cast<size_t>(rows) * d, 0.0f);
    st.score.resize(static_cast<size_t>(rows) * stride);
    if (options_.fused_score_scale) st.score_scale.resize(st.score.size());
    st.prob.resize(stride);
    st.group_sum.resize(d);
    st.dot.resize(block_n);
    st.int8_dot.resize(block_n);

    // Steps of per_step key tiles (the last may hold fewer); each updates the softmax state once.
    const int tiles = t.legal_tile_end(tile.m), steps = (tiles + per_step - 1) / per_step;
    for (int i = 0; i < steps; ++i) {
      const int step = options_.key_order == KeyOrder::ascending ? i : steps - 1 - i;
      const int first = step * per_step, end = std::min(tiles, first + per_step);
      for (int n = first; n < end; ++n) scores(tile, n, st, (n - first) * block_n, stride);
      const int64_t j0 = static_cast<int64_t>(first) * block_n;
      update_state(tile, j0, std::min<int64_t>(t.lk, static_cast<int64_t>(end) * block_n) - j0, stride, st);
    }
    write_output(tile, st);
  }

 private:
  // s of key tile n in the log2 domain, at column `col` of the step's rows (`stride` apart);
  // illegal elements -inf. With fused_score_scale: the raw score (float(C), or the fp32 sum) and
  // its scale beside it.
  void scores(const QueryTile& tile, int n, TileState& st, int col, int stride) const {
    const SequenceTiling& t = plan_.tilings[tile.b];
    const int d = shape_.d, hq = shape_.hq, block_n = t.geometry.block_n;
    const int kvh = shape_.kv_head_of(tile.h);
    const int64_t i0 = t.row_begin(tile.m), rows = t.row_end(tile.m) - i0;
    const int64_t j0 = static_cast<int64_t>(n) * block_n, width = std::min<int64_t>(t.lk, j0 + block_n) - j0;
    const int64_t q_first = shape_.cu_seqlens_q[tile.b] + i0, k_first = shape_.cu_seqlens_k[tile.b] + j0;
    const int64_t total_k = shape_.total_k();
    const bool int8 = plan_.int8_route(kvh, tile.b, tile.m, n);

    for (int64_t r = 0; r < rows; ++r) {
      float* s = &st.score[static_cast<size_t>(r) * stride + col];
      float* scale = options_.fused_score_scale ? &st.score_scale[static_cast<size_t>(r) * stride + col] : nullptr;
      const int64_t legal = std::clamp<int64_t>(visible_keys(i0 + r, t.lq, t.lk, t.causal) - j0, 0, width);
      const size_t q_offset = (static_cast<size_t>(q_first + r) * hq + tile.h) * d;
      const auto store = [&](int64_t j, float raw, float factor) {
        if (scale) {
          s[j] = raw;
          scale[j] = factor;
        } else {
          s[j] = raw * factor;
        }
      };
      if (int8) {
        const float* q = &ops_.q8_codes[q_offset];
        float* acc = st.int8_dot.data();
        std::fill(acc, acc + legal, 0.0f);
        for (int c = 0; c < d; ++c) {
          const float* k = &ops_.k8_codes_t[(static_cast<size_t>(kvh) * d + c) * total_k + k_first];
          const float qc = q[c];
          for (int64_t j = 0; j < legal; ++j) acc[j] += qc * k[j];
        }
        const float q_scale = ops_.q8.scale(tile.b, i0 + r, tile.h) * scale_log2_;
        for (int64_t j = 0; j < legal; ++j) store(j, acc[j], q_scale * ops_.k8.scale(tile.b, j0 + j, kvh));
      } else {
        const float* q = &ops_.q[q_offset];
        double* acc = st.dot.data();
        std::fill(acc, acc + legal, 0.0);
        for (int c = 0; c < d; ++c) {
          const float* k = &ops_.k_t[(static_cast<size_t>(kvh) * d + c) * total_k + k_first];
          const float qc = q[c];
          // fp16 x fp16 products are exact in fp32; the sum is kept in double.
          for (int64_t j = 0; j < legal; ++j) acc[j] += static_cast<double>(qc * k[j]);
        }
        for (int64_t j = 0; j < legal; ++j) store(j, static_cast<float>(acc[j]), scale_log2_);
      }
      std::fill(s + legal, s + width, kNegInf);
      if (scale) std::fill(scale + legal, scale + width, 1.0f);
    }
  }

  // One online-softmax update over the step's keys [j0, j0 + width) (whole key tiles from j0).
  void update_state(const QueryTile& tile, int64_t j0, int64_t width, int stride, TileState& st) const {
    const SequenceTiling& t = plan_.tilings[tile.b];
    const int d = shape_.d, hk = shape_.hk, block_n = t.geometry.block_n;
    const int kvh = shape_.kv_head_of(tile.h);
    const int64_t i0 = t.row_begin(tile.m), rows = t.row_end(tile.m) - i0;
    const int64_t k_first = shape_.cu_seqlens_k[tile.b] + j0;
    const bool fp16_state = options_.numerics.state == StatePrecision::fp16;
    const bool fp16_accum = options_.numerics.accum == AccumPrecision::fp16;
    // The P V precision of each of the step's key tiles.
    const int first_tile = static_cast<int>(j0 / block_n);
    const int step_tiles = static_cast<int>((width + block_n - 1) / block_n);
    bool fp8_tile[64];
    for (int i = 0; i < step_tiles; ++i) {
      fp8_tile[i] = options_.numerics.fp8_pv(plan_.int8_route(kvh, tile.b, tile.m, first_tile + i));
    }

    for (int64_t r = 0; r < rows; ++r) {
      const float* s = &st.score[static_cast<size_t>(r) * stride];
      const float* scale = options_.fused_score_scale ? &st.score_scale[static_cast<size_t>(r) * stride] : nullptr;
      float* p16 = st.prob.data();
      float* o = &st.acc[static_cast<size_t>(r) * d];

      // Fused: a scale below FLT_MIN is taken as FLT_MIN (a NaN stays NaN), so that a masked -inf
      // times it stays -inf, as the kernel does.
      const auto fused = [&](int64_t j) {
        return scale[j] < std::numeric_limits<float>::min() ? std::numeric_limits<float>::min() : scale[j];
      };
      // Fused: the maxima of the rounded scaled scores, as the kernel's scaled maxima of raw ones.
      const auto scaled = [&](int64_t j) { return scale ? s[j] * fused(j) : s[j]; };
      float tile_max[64];
      for (int i = 0; i < step_tiles; ++i) {
        tile_max[i] = kNegInf;
        for (int64_t j = int64_t{i} * block_n; j < std::min<int64_t>(width, int64_t{i + 1} * block_n); ++j) {
          tile_max[i] = std::max(tile_max[i], scaled(j));
        }
      }
      const float step_max = *std::max_element(tile_max, tile_max + step_tiles);
      float m_new = std::max(st.row_max[r], step_max);
      if (fp16_state) m_new = round_to_half(m_new);
      const float reference = m_new == kNegInf ? 0.0f : m_new;
      const float alpha = std::exp2(st.row_max[r] - reference);
      // The step's FP8 group (core/quant_fp8.hpp): its keys' p' from their own exponential.
      float group_max = kNegInf;
      for (int i = 0; i < step_tiles; ++i) {
        if (fp8_tile[i]) group_max = std::max(group_max, tile_max[i]);
      }
      const Fp8RowExponent group = fp8_row_exponent(reference, group_max);

      // p of the FP16 tiles, p' of the FP8 group's, each summed apart.
      float p_sum = 0.0f, group_p_sum = 0.0f;
      for (int64_t j = 0; j < width; ++j) {
        const bool in_group = fp8_tile[j / block_n];
        const float offset = in_group ? group.c : -reference;
        const float p = std::exp2(scale ? std::fma(s[j], fused(j), offset) : s[j] + offset);
        (in_group ? group_p_sum : p_sum) += p;
        p16[j] = p;
      }
      st.row_max[r] = m_new;
      st.row_sum[r] = st.row_sum[r] * alpha + std::fma(group.g, group_p_sum, p_sum);
      if (fp16_state) st.row_sum[r] = round_to_half(st.row_sum[r]);

      for (int c = 0; c < d; ++c) o[c] *= alpha;
      if (fp16_accum) {
        for (int c = 0; c < d; ++c) o[c] = round_to_half(o[c]);
      }
      // The FP16 tiles in order, then the step's FP8 group in one fold.
      for (int i = 0; i < step_tiles; ++i) {
        if (fp8_tile[i]) continue;
        const int64_t begin = int64_t{i} * block_n, end = std::min<int64_t>(width, begin + block_n);
        for (int64_t chunk = begin; chunk < end; chunk += kAccumChunk) {
          const int64_t chunk_end = std::min<int64_t>(end, chunk + kAccumChunk);
          for (int64_t j = chunk; j < chunk_end; ++j) {
            const float p = round_to_half(p16[j]);
            const float* v = &ops_.v[(static_cast<size_t>(k_first + j) * hk + kvh) * d];
            for (int c = 0; c < d; ++c) o[c] += p * v[c];
          }
          if (fp16_accum) {
            for (int c = 0; c < d; ++c) o[c] = round_to_half(o[c]);
          }
        }
      }
      if (group_max != kNegInf) add_fp8_group(tile.b, kvh, j0, width, block_n, fp8_tile, p16, group.g, o, st);
      if (fp16_state) {
        for (int c = 0; c < d; ++c) o[c] = round_to_half(o[c]);
      }
    }
  }

  // The FP8 group of one row and step (core/quant_fp8.hpp): the keys of the tiles fp8_tile names
  // among the step's [j0, j0 + width) of sequence b, p their p' (FP32), g the group's factor,
  // added into the row's accumulator o.
  void add_fp8_group(int b, int kvh, int64_t j0, int64_t width, int block_n, const bool* fp8_tile, const float* p,
                     float g, float* o, TileState& st) const {
    const int d = shape_.d, hk = shape_.hk;
    float* sum = st.group_sum.data();
    std::fill(sum, sum + d, 0.0f);
    const int64_t k_first = shape_.cu_seqlens_k[b] + j0;
    for (int64_t j = 0; j < width; ++j) {
      if (!fp8_tile[j / block_n]) continue;
      const float p8 = fp8_e4m3_to_float(float_to_fp8_e4m3(p[j]));
      const float* v = &ops_.v8_values[(static_cast<size_t>(k_first + j) * hk + kvh) * d];
      for (int c = 0; c < d; ++c) sum[c] += p8 * v[c];
    }
    for (int c = 0; c < d; ++c) o[c] = std::fma(sum[c] * ops_.v8.scale(b, j0, kvh, c), g, o[c]);
  }

  void write_output(const QueryTile& tile, const TileState& st) const {
    const SequenceTiling& t = plan_.tilings[tile.b];
    const int d = shape_.d, hq = shape_.hq;
    const int64_t i0 = t.row_begin(tile.m), rows = t.row_end(tile.m) - i0;
    const int64_t q_first = shape_.cu_seqlens_q[tile.b] + i0;
    for (int64_t r = 0; r < rows; ++r) {
      const float l = st.row_sum[r];
      uint16_t* o = &result_.o[(static_cast<size_t>(q_first + r) * hq + tile.h) * d];
      float& lse = result_.lse[static_cast<size_t>(tile.h) * shape_.total_q() + q_first + r];
      if (l == 0.0f) {
        std::fill(o, o + d, uint16_t{0});
        lse = kNegInf;
        continue;
      }
      const float* acc = &st.acc[static_cast<size_t>(r) * d];
      const float inv_l = 1.0f / l;  // one reciprocal per row, as the kernels' epilogue
      for (int c = 0; c < d; ++c) o[c] = float_to_half(acc[c] * inv_l);
      lse = (st.row_max[r] + std::log2(l)) * kLn2;
      if (!ops_.qkbar.empty()) {
        lse = unsmoothed_lse(lse, ops_.qkbar[static_cast<size_t>(q_first + r) * hq + tile.h], shape_.softmax_scale);
      }
    }
  }

  const AttentionShape& shape_;
  const RoutingPlan& plan_;
  const EmulatorOptions& options_;
  const Operands& ops_;
  EmulatorResult& result_;
  const float scale_log2_;
};

}  // namespace

EmulatorResult emulate_attention(const AttentionShape& shape, const AttentionInputs& inputs, const RoutingPlan& plan,
                                 const EmulatorOptions& options) {
  if (!(shape.softmax_scale > 0.0f)) throw std::invalid_argument("emulate_attention: softmax_scale is not resolved");
  if (shape.d > kMaxExactInt8Dim) throw std::invalid_argument("emulate_attention: head dimension too large");
  if (options.softmax_tiles < 1 || options.softmax_tiles > 64) {
    throw std::invalid_argument("emulate_attention: softmax_tiles must be in [1, 64]");
  }
  if (!plan_fits(shape, plan)) {
    throw std::invalid_argument("emulate_attention: the routing plan was built for another shape");
  }
  if (options.numerics.pv != PvPrecision::fp16) {
    if (options.numerics.accum != AccumPrecision::fp32) {
      throw std::invalid_argument("emulate_attention: FP8 P V accumulates in FP32 (accum fp16 given)");
    }
    if (options.softmax_tiles > kVScaleKeys / kBlockV) {
      throw std::invalid_argument(
          "emulate_attention: FP8 P V needs softmax steps within one V scale block (softmax_tiles <= 2)");
    }
    for (const SequenceTiling& t : plan.tilings) {
      if (t.geometry.block_n != kBlockV) {
        throw std::invalid_argument("emulate_attention: FP8 P V needs key tiles of one V block (block_n 64)");
      }
    }
  }
  const int hq = shape.hq, hk = shape.hk, d = shape.d;
  const int64_t total_q = shape.total_q(), total_k = shape.total_k();

  // smooth_k: both score paths read the smoothed keys in place of K.
  SmoothedKeys smoothed;
  if (options.numerics.smooth_k) smoothed = smooth_keys(shape, inputs.q, inputs.k);
  const std::vector<uint16_t>& keys = options.numerics.smooth_k ? smoothed.ks : inputs.k;
  Operands ops;
  ops.q = half_to_float_array(inputs.q);
  ops.k_t = transpose_keys(keys, total_k, hk, d, [](uint16_t x) { return half_to_float(x); });
  ops.v = half_to_float_array(inputs.v);
  const bool any_int8 = std::any_of(plan.words.begin(), plan.words.end(), [](uint64_t w) { return w != 0; });
  if (any_int8) {
    ops.q8 = quantize_blockwise(inputs.q, shape.cu_seqlens_q, hq, d, kBlockQ);
    ops.k8 = quantize_blockwise(keys, shape.cu_seqlens_k, hk, d, kBlockK);
    ops.q8_codes.assign(ops.q8.codes.begin(), ops.q8.codes.end());
    ops.k8_codes_t = transpose_keys(ops.k8.codes, total_k, hk, d, [](int8_t x) { return static_cast<float>(x); });
  }
  ops.qkbar = std::move(smoothed.qkbar);
  // FP8 P V operands where some tile takes FP8 P V: every tile with pv fp8, the INT8-routed ones
  // with pv routed.
  const PvPrecision pv = options.numerics.pv;
  if (total_k > 0 && (pv == PvPrecision::fp8 || (pv == PvPrecision::routed && any_int8))) {
    ops.v8 = quantize_values_fp8(inputs.v, shape.cu_seqlens_k, hk, d);
    ops.v8_values.resize(inputs.v.size());
    for (int b = 0; b < shape.batch(); ++b) {
      for (int64_t j = 0; j < shape.seqlen_k(b); ++j) {
        for (int h = 0; h < hk; ++h) {
          float* dst = &ops.v8_values[(static_cast<size_t>(shape.cu_seqlens_k[b] + j) * hk + h) * d];
          for (int c = 0; c < d; ++c) dst[c] = fp8_e4m3_to_float(ops.v8.code(b, j, h, c));
        }
      }
    }
  }

  EmulatorResult result;
  result.o.assign(static_cast<size_t>(total_q) * hq * d, 0);
  result.lse.assign(static_cast<size_t>(total_q) * hq, kNegInf);

  std::vector<QueryTile> tiles;
  for (int b = 0; b < shape.batch(); ++b) {
    for (int h = 0; h < hq; ++h) {
      for (int m = 0; m < plan.tilings[b].tm; ++m) tiles.push_back({b, h, m});
    }
  }
  const TileEmulator emulator(shape, plan, options, ops, result);
#pragma omp parallel
  {
    TileState state;
#pragma omp for schedule(dynamic)
    for (size_t i = 0; i < tiles.size(); ++i) emulator.run(tiles[i], state);
  }
  return result;
}

}  // namespace tilemix
