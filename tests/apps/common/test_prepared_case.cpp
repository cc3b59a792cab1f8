// The host memory a case is estimated to need before it is built (SPEC 9: out-of-memory is
// reported with the bytes asked for): the estimates cover what the runs hold, and a count past
// 2^63 - 1 is an input error naming the case.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/common/prepared_case.hpp"
#include "core/config/experiment.hpp"
#include "core/decode/decode_case.hpp"
#include "core/error.hpp"
#include "core/host_memory.hpp"
#include "core/metrics.hpp"
#include "reference/emulator.hpp"
#include "reference/exact.hpp"

using namespace tilemix;
using namespace tilemix::app;
using Catch::Matchers::Contains;

namespace {

CaseSpec case_of(const std::string& text) {
  return parse_config(nlohmann::ordered_json::parse(text), "test.json").cases.at(0);
}

template <class T>
int64_t bytes_of(const std::vector<T>& v) {
  return static_cast<int64_t>(v.size() * sizeof(T));
}

}  // namespace

TEST_CASE("the estimate of a prefill case covers its inputs, plan, reference and emulator", "[cases]") {
  const CaseSpec spec = case_of(R"({"cases": [{"seqlens_q": [100, 300], "seqlens_k": [200, 300], "hq": 4, "hk": 2,
                                              "d": 64, "causal": true, "layout": "band", "ratio": 0.5}]})");
  const PreparedCase pc = prepare_case(spec, spec.routing.geometry);
  const ExactResult ref = exact_attention(spec.shape, pc.inputs);
  const EmulatorResult emu = emulate_attention(spec.shape, pc.inputs, pc.plan, {spec.numerics, KeyOrder::ascending});
  const int64_t held = bytes_of(pc.inputs.q) + bytes_of(pc.inputs.k) + bytes_of(pc.inputs.v) +
                       bytes_of(pc.plan.words) + bytes_of(ref.o) + bytes_of(ref.lse) + bytes_of(emu.o) +
                       bytes_of(emu.lse) + bytes_of(half_to_double(emu.o));
  const int64_t estimate = prefill_case_bytes(spec, spec.routing.geometry, {});
  CHECK(estimate >= held);
  // Each part of the work adds its buffers.
  CHECK(prefill_case_bytes(spec, spec.routing.geometry, {true, true, true, 0}) > estimate);
  CHECK(prefill_case_bytes(spec, spec.routing.geometry, {true, true, false, 1}) > estimate);
  CHECK(prefill_case_bytes(spec, spec.routing.geometry, {false, true, false, 0}) < estimate);
  CHECK(prefill_case_bytes(spec, spec.routing.geometry, {true, false, false, 0}) < estimate);
  // Layout adaptive also holds its pooled Q and K and its scores while it plans.
  const CaseSpec adaptive = case_of(R"({"cases": [{"seqlens_q": [100, 300], "seqlens_k": [200, 300], "hq": 4,
                                                  "hk": 2, "d": 64, "causal": true, "layout": "adaptive",
                                                  "ratio": 0.5}]})");
  CHECK(prefill_case_bytes(adaptive, adaptive.routing.geometry, {}) > estimate);
  // Key smoothing adds the emulator's smoothed keys, q . kbar and kbar.
  CaseSpec smoothed = spec;
  smoothed.numerics.smooth_k = true;
  CHECK(prefill_case_bytes(smoothed, spec.routing.geometry, {}) >=
        estimate + static_cast<int64_t>(sizeof(uint16_t)) * spec.shape.total_k() * spec.shape.hk * spec.shape.d +
            static_cast<int64_t>(sizeof(float)) * (spec.shape.total_q() * spec.shape.hq));
  CHECK(prefill_case_bytes(smoothed, spec.routing.geometry, {true, false, false, 0}) ==
        prefill_case_bytes(spec, spec.routing.geometry, {true, false, false, 0}));
}

TEST_CASE("the estimate of a decode check covers its inputs and both caches", "[cases]") {
  const CaseSpec spec = case_of(R"({"cases": [{"kind": "decode", "cache_lens": [100, 700], "new_tokens": [3, 16],
                                              "hq": 8, "hk": 2, "d": 64}]})");
  const PreparedDecode pd = prepare_decode(spec);
  const int64_t held = bytes_of(pd.q) + bytes_of(pd.k_src) + bytes_of(pd.v_src) + bytes_of(pd.int8.k8) +
                       bytes_of(pd.int8.v8) + bytes_of(pd.int8.k_scale) + bytes_of(pd.int8.v_scale) +
                       bytes_of(pd.fp16.k) + bytes_of(pd.fp16.v) + bytes_of(pd.plan.words);
  const int64_t estimate = decode_check_bytes(spec, 132, false);
  CHECK(estimate > held);
  CHECK(decode_check_bytes(spec, 132, true) > estimate);
  // Fewer key tiles per split: more split partials.
  CaseSpec short_splits = spec;
  short_splits.decode->tiles_per_split = 1;
  CHECK(decode_check_bytes(short_splits, 132, false) > decode_check_bytes(spec, 132, false));
  CHECK(decode_gpu_bytes(spec) < estimate);
}

TEST_CASE("estimates past 2^63 - 1 bytes are input errors naming the case and the sizes", "[cases]") {
  // 2^45 splits of one key tile each, 65536 query heads: the emulator's partial states overflow.
  const CaseSpec spec = case_of(R"({"cases": [{"kind": "decode", "cache_len": 2147483647, "batch": 1048576,
                                              "hq": 65536, "hk": 1, "tiles_per_split": 1}]})");
  CHECK_THROWS_WITH(decode_check_bytes(spec, 132, false),
                    "test.json: $.cases[0]: the emulator's split partials [splits, hq, 16 rows, d + 2] is "
                    "35184372088832 (splits) x 65536 (hq) x 16 (rows) x 130 (d + 2) x 4 (bytes), more than "
                    "9223372036854775807");
}

TEST_CASE("a case larger than the host memory is refused, naming the case and the bytes", "[cases]") {
  // 2^31 - 1 tokens of 65536 heads: 2^55 bytes of FP16 queries alone, within 64 bits.
  const CaseSpec spec = case_of(R"({"cases": [{"name": "big", "seq_len": 2147483647, "hq": 65536, "hk": 65536}]})");
  const int64_t bytes = prefill_case_bytes(spec, spec.routing.geometry, {});
  REQUIRE(bytes > int64_t{1} << 55);
  bool ran = false;
  try {
    run_case_within_host_memory(spec, bytes, [&] { ran = true; });
    FAIL("no error");
  } catch (const HostOutOfMemory& e) {
    CHECK(e.bytes_asked() == bytes);
    CHECK_THAT(e.what(), Contains("out of host memory: case 'big' (test.json: $.cases[0]) needs about ") &&
                             Contains("(" + std::to_string(bytes) + " bytes)"));
  }
  CHECK_FALSE(ran);
}
