#pragma once
// The attention problem of SPEC 2: shapes, varlen prefix sums, masking rule, and validation.
#include <cstdint>
#include <string>
#include <vector>

#include "core/enum_names.hpp"

namespace tilemix {

enum class StatePrecision { fp32, fp16 };  // online-softmax state (m, l, O)
inline constexpr EnumName<StatePrecision> kStatePrecisionNames[] = {{StatePrecision::fp32, "fp32"},
                                                                    {StatePrecision::fp16, "fp16"}};
inline const char* to_string(StatePrecision p) { return enum_name(kStatePrecisionNames, p); }

enum class AccumPrecision { fp32, fp16 };  // PV product accumulation
inline constexpr EnumName<AccumPrecision> kAccumPrecisionNames[] = {{AccumPrecision::fp32, "fp32"},
                                                                    {AccumPrecision::fp16, "fp16"}};
inline const char* to_string(AccumPrecision p) { return enum_name(kAccumPrecisionNames, p); }

enum class QuantMode { quantize_once, on_the_fly };
inline constexpr EnumName<QuantMode> kQuantModeNames[] = {{QuantMode::quantize_once, "quantize_once"},
                                                          {QuantMode::on_the_fly, "on_the_fly"}};
inline const char* to_string(QuantMode m) { return enum_name(kQuantModeNames, m); }

// Precision of the P V product (SPEC 5 `pv`): FP16 on every tile, FP8 E4M3 on every tile, or FP8 on
// the INT8-routed tiles and FP16 on the others.
enum class PvPrecision { fp16, fp8, routed };
inline constexpr EnumName<PvPrecision> kPvPrecisionNames[] = {
    {PvPrecision::fp16, "fp16"}, {PvPrecision::fp8, "fp8"}, {PvPrecision::routed, "routed"}};
inline const char* to_string(PvPrecision p) { return enum_name(kPvPrecisionNames, p); }

// Numerics of one attention call. The kernel, the emulator and the check share this description.
struct Numerics {
  StatePrecision state = StatePrecision::fp32;
  AccumPrecision accum = AccumPrecision::fp32;
  QuantMode mode = QuantMode::quantize_once;
  // Key smoothing (SPEC 5, tilemix only): both score paths read the smoothed keys
  // Ks = fp16(k - kbar) in place of K, the LSE adds q . kbar back (core/quant.hpp states the
  // operations).
  bool smooth_k = false;
  // P V precision (SPEC 5, tilemix only; with accum fp32): FP8 tiles take P and V in E4M3, P scaled
  // per row and softmax step (its FP8 tiles), V per channel and 128-key block (core/quant_fp8.hpp
  // states the operations).
  PvPrecision pv = PvPrecision::fp16;

  // Whether key tile `int8_route` (its routing bit) takes the FP8 P V product.
  bool fp8_pv(bool int8_route) const {
    return pv == PvPrecision::fp8 || (pv == PvPrecision::routed && int8_route);
  }
};

// Q: [total_q, hq, d], K/V: [total_k, hk, d], FP16 row-major, packed over sequences.
struct AttentionShape {
  int hq = 0;
  int hk = 0;
  int d = 0;
  bool causal = false;
  float softmax_scale = 0.0f;  // 0 means 1/sqrt(d); resolved by validate()
  std::vector<int64_t> cu_seqlens_q;  // batch + 1 prefix sums
  std::vector<int64_t> cu_seqlens_k;

  int batch() const { return static_cast<int>(cu_seqlens_q.size()) - 1; }
  int64_t total_q() const { return cu_seqlens_q.back(); }
  int64_t total_k() const { return cu_seqlens_k.back(); }
  int64_t seqlen_q(int b) const { return cu_seqlens_q[b + 1] - cu_seqlens_q[b]; }
  int64_t seqlen_k(int b) const { return cu_seqlens_k[b + 1] - cu_seqlens_k[b]; }
  int group_size() const { return hq / hk; }  // query heads per KV head
  int kv_head_of(int h) const { return h / group_size(); }
};

// Longest sequence (queries or keys): compute tiles and routing groups are counted in int.
constexpr int64_t kMaxSeqLen = (int64_t{1} << 31) - 1;

// Builds prefix sums from per-sequence lengths.
std::vector<int64_t> prefix_sums(const std::vector<int64_t>& lengths);

// Checks SPEC 2 and 9 rules and resolves the default softmax scale. Throws InputError whose
// message names `where` + the field (e.g. "$.cases[2].hq"). Q and K/V of a valid shape hold at most
// 2^63 - 1 bytes as doubles (kMaxElementBytes each), so counts of their elements and of any buffer
// with as many elements of up to 8 bytes do not overflow.
void validate(AttentionShape& shape, const std::string& where = "");

constexpr int64_t kMaxElementBytes = 8;

// Supported head dimensions; the kernels and the emulator share this list.
bool supported_head_dim(int d);

// Bottom-right causal rule: query i sees key j iff j <= i + (lk - lq). Returns the number of
// visible keys of query row i (0 when the row sees none), or lk when not causal.
inline int64_t visible_keys(int64_t i, int64_t lq, int64_t lk, bool causal) {
  if (!causal) return lk;
  const int64_t n = i + (lk - lq) + 1;
  return n < 0 ? 0 : (n > lk ? lk : n);
}

// Number of legal (query, key) pairs of the whole problem (per head).
int64_t legal_pairs(const AttentionShape& shape);

// SPEC 8 operation count: 4 * d * hq * legal pairs.
double attention_ops(const AttentionShape& shape);

}  // namespace tilemix
