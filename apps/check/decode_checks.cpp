#include "apps/check/decode_checks.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "apps/check/check_runner.hpp"
#include "apps/common/decode_gpu.hpp"

namespace tilemix::app {
namespace {

// "64" for equal values, "1,63,64,65" for a few, "1..3000" for many.
std::string value_list(const std::vector<int64_t>& v) {
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  if (*lo == *hi) return std::to_string(*lo);
  if (v.size() > 4) return fmt::format("{}..{}", *lo, *hi);
  return fmt::format("{}", fmt::join(v, ","));
}

}  // namespace

std::string decode_shape_summary(const DecodeShape& s, const DecodeLaunchPlan& launch) {
  // "x~" marks cuts balanced by route (balance_decode_splits): tiles_per_split is then nominal.
  const DecodeSplitPlan& splits = launch.splits;
  return fmt::format("B={} Hq={} Hk={} d={} cache={} new={} splits={}x{}{} sm={}", s.batch(), s.hq, s.hk, s.d,
                     value_list(s.cache_len), value_list(s.new_tokens), splits.total_splits(),
                     splits.first_tile.empty() ? "" : "~", splits.tiles_per_split, launch.sm_count);
}

void add_decode_row(ResultTable& table, const CaseSpec& spec, const DecodeCheck& check, const std::string& compare,
                    const Deviation& dev, const Tolerance& tol, bool& ok) {
  // Decode keeps fp32 softmax state and fp32 PV accumulation.
  const CheckedCase checked{spec,
                            check.prepared.plan.coverage,
                            decode_shape_summary(check.prepared.shape, check.launch),
                            "fp32",
                            "fp32",
                            std::string("decode-") + to_string(spec.decode->cache),
                            std::nullopt,
                            std::nullopt};
  add_check_row(table, checked, compare, dev, tol, ok);
}

DecodeCheck run_decode_check(const CaseSpec& spec, DecodeTarget target, ResultTable& table, bool& ok) {
  DecodeCheck check;
  check.prepared = prepare_decode(spec);
  const PreparedDecode& pd = check.prepared;
  check.launch =
      plan_decode_launch(pd.shape, spec.decode->cache, target, decode_launch_choices(*spec.decode), &pd.plan);
  check.emulator = spec.decode->cache == CacheKind::int8
                       ? emulate_decode_int8(pd.shape, pd.q, pd.int8, pd.plan, check.launch.splits)
                       : emulate_decode_fp16(pd.shape, pd.q, pd.fp16, check.launch.splits);
  check.emulator_o = half_to_double(check.emulator.o);
  check.reference = exact_attention(pd.shape.attention_shape(), {pd.q, pd.k_src, pd.v_src});
  add_decode_row(table, spec, check, "emulator~reference", deviation(check.emulator_o, check.reference.o),
                 require_tolerance(spec, spec.tolerance.emulator_vs_reference, "emulator_vs_reference"), ok);
  return check;
}

}  // namespace tilemix::app
