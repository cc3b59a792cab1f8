#pragma once
// Online softmax in the log2 domain, step for step as the emulator's header states: scores
// arrive already multiplied by softmax_scale * log2(e), so every exponential is one exp2.
//   m_new = max(m, rowmax(s))            [fp16 state: rounded]
//   ref   = m_new, or 0 when m_new = -inf (a row with no legal key so far)
//   p     = exp2(s - ref), alpha = exp2(m - ref)
//   l     = l * alpha + rowsum(p)        [fp16 state: rounded]
// Separate fp32 operations (__fsub_rn, __fmul_rn, __fadd_rn) keep the compiler from fusing
// them into FMAs the emulator does not perform.
#include <cfloat>
#include <cmath>

#include "core/quant_fp8.hpp"
#include "kernels/common/softmax_math.cuh"

namespace tilemix::gpu {

// Row state of the rows a thread holds: two per m16 slice (lane/4 and lane/4 + 8). Every thread of
// a quad keeps the full-row values.
template <int kRowSlices, int kKeyFrags>
struct OnlineSoftmax {
  static constexpr int kRows = 2 * kRowSlices;
  float row_max[kRows];
  float row_sum[kRows];

  __device__ __forceinline__ void init() {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      row_max[r] = -INFINITY;
      row_sum[r] = 0.0f;
    }
  }

  // Turns the scores of one key tile into p (fp32, in place) and returns each row's alpha. All of
  // the thread's rows go through each step together, maxima and sums as trees: short dependent
  // chains that interleave (a maximum is exact in any order; the fp32 sums change by rounding
  // noise only, far below the fp16 output's ulp).
  __device__ __forceinline__ void update(float (&s)[kRowSlices][kKeyFrags][4], bool fp16_state,
                                         float (&alpha)[kRows]) {
    float tile_max[kRows], ref[kRows];
    reduce_rows(s, tile_max, [](float a, float b) { return fmaxf(a, b); });
#pragma unroll
    for (int r = 0; r < kRows; ++r) ref[r] = move_max(r, tile_max[r], fp16_state, alpha[r]);
#pragma unroll
    for (int mi = 0; mi < kRowSlices; ++mi)
#pragma unroll
      for (int ni = 0; ni < kKeyFrags; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mi][ni][e] = exp2_approx(__fsub_rn(s[mi][ni][e], ref[mi * 2 + e / 2]));
    add_sums(s, alpha, fp16_state);
  }

  // The same with the scale folded into the exponent (prefill v3): s holds raw scores (the FP16
  // path's fp32 sums, the INT8 path's exact float(C)), fragments [0, kKeyFrags / 2) of each row
  // scaled by scale[0] and the rest by scale[1] (a step's two routing tiles). The row maximum is
  // max over halves of round(max(raw) * scale), which equals the maximum of the rounded scaled
  // scores (scale > 0), and p = exp2(fma(raw, scale, -ref)): one FMA per element.
  __device__ __forceinline__ void update_fused(float (&s)[kRowSlices][kKeyFrags][4], const float (&raw_scale)[2],
                                               bool fp16_state, float (&alpha)[kRows]) {
    float unused[kRows];
    update_fused_groups<false>(s, raw_scale, fp16_state, alpha, 0u, unused);
  }

  // update_fused with an FP8 group (core/quant_fp8.hpp): the halves in `fp8_halves` (bit h: half
  // h; kEveryHalf: both, whatever fp8_halves says) turn into p' = exp2(fma(raw, scale, c)) with
  // c = log2(448) - (the group's row maximum), the others into p; group_g[r] is row r's g =
  // exp2(-ref - c) (0 for a row without a legal key in the group), and l takes the group's sum
  // of p' times g.
  template <bool kEveryHalf>
  __device__ __forceinline__ void update_fused_fp8(float (&s)[kRowSlices][kKeyFrags][4], const float (&raw_scale)[2],
                                                   bool fp16_state, float (&alpha)[kRows], unsigned fp8_halves,
                                                   float (&group_g)[kRows]) {
    update_fused_groups<true, kEveryHalf>(s, raw_scale, fp16_state, alpha, kEveryHalf ? 3u : fp8_halves, group_g);
  }

  template <bool kFp8Group, bool kEveryHalf = false>
  __device__ __forceinline__ void update_fused_groups(float (&s)[kRowSlices][kKeyFrags][4],
                                                      const float (&raw_scale)[2], bool fp16_state,
                                                      float (&alpha)[kRows], unsigned fp8_halves,
                                                      float (&group_g)[kRows]) {
    static_assert(kKeyFrags % 2 == 0, "two halves");
    constexpr int kHalfFrags = kKeyFrags / 2;
    // A scale below FLT_MIN (0 where a block's codes are all 0: an all-zero K or Q block, a key
    // block of one smoothed key) is taken as FLT_MIN, so that a masked -inf times it stays -inf
    // instead of NaN; the raw scores under such a scale are 0 or too small to matter.
    const float scale[2] = {fused_scale(raw_scale[0]), fused_scale(raw_scale[1])};
    float half_max[2 * kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        half_max[2 * r + h] = reduce_half(s, r, h, [](float a, float b) { return fmaxf(a, b); });
      }
    }
    quad_reduce(half_max, [](float a, float b) { return fmaxf(a, b); });
    float offset[kRows][2];  // what each half's exponent adds to raw * scale
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float scaled[2] = {__fmul_rn(half_max[2 * r], scale[0]), __fmul_rn(half_max[2 * r + 1], scale[1])};
      const float neg_ref = -move_max(r, fmaxf(scaled[0], scaled[1]), fp16_state, alpha[r]);
      offset[r][0] = offset[r][1] = neg_ref;
      if constexpr (kFp8Group) {
        float group_max = -INFINITY;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if (fp8_halves >> h & 1u) group_max = fmaxf(group_max, scaled[h]);
        }
        const bool any = group_max != -INFINITY;
        const float c = any ? __fsub_rn(kFp8E4m3MaxLog2, group_max) : 0.0f;
        group_g[r] = any ? exp2_approx(__fsub_rn(neg_ref, c)) : 0.0f;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if (fp8_halves >> h & 1u) offset[r][h] = c;
        }
      }
    }
#pragma unroll
    for (int mi = 0; mi < kRowSlices; ++mi)
#pragma unroll
      for (int ni = 0; ni < kKeyFrags; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          s[mi][ni][e] =
              exp2_approx(__fmaf_rn(s[mi][ni][e], scale[ni / kHalfFrags], offset[mi * 2 + e / 2][ni / kHalfFrags]));
        }
    if constexpr (kFp8Group) {
      add_sums_fp8<kEveryHalf>(s, alpha, fp16_state, fp8_halves, group_g);
    } else {
      add_sums(s, alpha, fp16_state);
    }
  }

  // The scale update_fused multiplies by: at least FLT_MIN (a NaN stays NaN).
  __device__ __forceinline__ static float fused_scale(float scale) { return scale < FLT_MIN ? FLT_MIN : scale; }

  // Row r's step from its tile maximum: m_new = max(m, tile max) [fp16 state: rounded], alpha =
  // exp2(m - ref); returns the reference ref (m_new, or 0 for a row with no legal key so far).
  __device__ __forceinline__ float move_max(int r, float tile_max, bool fp16_state, float& alpha) {
    float m_new = fmaxf(row_max[r], tile_max);
    if (fp16_state) m_new = round_to_half(m_new);
    const float ref = m_new == -INFINITY ? 0.0f : m_new;
    alpha = exp2_approx(__fsub_rn(row_max[r], ref));
    row_max[r] = m_new;
    return ref;
  }

  // l = l * alpha + rowsum(p) [fp16 state: rounded].
  __device__ __forceinline__ void add_sums(const float (&p)[kRowSlices][kKeyFrags][4], const float (&alpha)[kRows],
                                           bool fp16_state) {
    float sum[kRows];
    reduce_rows(p, sum, [](float a, float b) { return __fadd_rn(a, b); });
    add_row_sums(sum, alpha, fp16_state);
  }

  // The same with an FP8 group (update_fused_fp8): per row g times the group halves' sum of p'
  // plus the other halves' sum of p, each half's sum a tree of its own (add_sums' tree mixes the
  // halves). With every half in the group (kEveryHalf: pv fp8) the quad's sum comes first, so
  // that only the last multiply waits for g's exponential; else g weighs each thread's sums
  // before the quad's sum (g is the row's).
  template <bool kEveryHalf>
  __device__ __forceinline__ void add_sums_fp8(const float (&p)[kRowSlices][kKeyFrags][4], const float (&alpha)[kRows],
                                               bool fp16_state, unsigned fp8_halves, const float (&group_g)[kRows]) {
    const auto add = [](float a, float b) { return __fadd_rn(a, b); };
    float group[kRows], rest[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      group[r] = rest[r] = 0.0f;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float half_sum = reduce_half(p, r, h, add);
        if (fp8_halves >> h & 1u) {
          group[r] = __fadd_rn(group[r], half_sum);
        } else {
          rest[r] = __fadd_rn(rest[r], half_sum);
        }
      }
    }
    float sum[kRows];
    if constexpr (kEveryHalf) {
      quad_reduce(group, add);
#pragma unroll
      for (int r = 0; r < kRows; ++r) sum[r] = __fmul_rn(group_g[r], group[r]);
    } else {
#pragma unroll
      for (int r = 0; r < kRows; ++r) sum[r] = __fmaf_rn(group_g[r], group[r], rest[r]);
      quad_reduce(sum, add);
    }
    add_row_sums(sum, alpha, fp16_state);
  }

  // l = l * alpha + sum [fp16 state: rounded], sum a row's sum of the step.
  __device__ __forceinline__ void add_row_sums(const float (&sum)[kRows], const float (&alpha)[kRows],
                                               bool fp16_state) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float l = __fadd_rn(__fmul_rn(row_sum[r], alpha[r]), sum[r]);
      if (fp16_state) l = round_to_half(l);
      row_sum[r] = l;
    }
  }

  // op over this thread's part of row r (of kRows) in half h of the key fragments: pairs, then a
  // tree over the half's fragments.
  template <class Op>
  __device__ __forceinline__ static float reduce_half(const float (&s)[kRowSlices][kKeyFrags][4], int r, int h, Op op) {
    constexpr int kHalfFrags = kKeyFrags / 2;
    const int mi = r / 2, e0 = (r % 2) * 2;
    float t[kHalfFrags];
#pragma unroll
    for (int ni = 0; ni < kHalfFrags; ++ni) {
      t[ni] = op(s[mi][h * kHalfFrags + ni][e0], s[mi][h * kHalfFrags + ni][e0 + 1]);
    }
    return tree_reduce(t, op);
  }

  // op over each of the thread's rows of s (pairs, then a tree over the key fragments), then over
  // the quad of lanes that shares the row.
  template <class Op>
  __device__ __forceinline__ static void reduce_rows(const float (&s)[kRowSlices][kKeyFrags][4], float (&out)[kRows],
                                                     Op op) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int mi = r / 2, e0 = (r % 2) * 2;
      float t[kKeyFrags];
#pragma unroll
      for (int ni = 0; ni < kKeyFrags; ++ni) t[ni] = op(s[mi][ni][e0], s[mi][ni][e0 + 1]);
      out[r] = tree_reduce(t, op);
    }
    quad_reduce(out, op);
  }

  // Whether some row of the warp moved its maximum this tile (alpha != 1): otherwise O * alpha
  // is O and the rescale can be skipped.
  __device__ __forceinline__ static bool any_moved(const float (&alpha)[kRows]) {
    bool moved = false;
#pragma unroll
    for (int r = 0; r < kRows; ++r) moved = moved || alpha[r] != 1.0f;
    return __any_sync(0xffffffffu, moved);
  }
};

}  // namespace tilemix::gpu
