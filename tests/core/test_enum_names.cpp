#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "core/choices/decode.hpp"
#include "core/choices/prefill.hpp"
#include "core/config/experiment.hpp"
#include "core/config/method.hpp"
#include "core/enum_names.hpp"
#include "core/error.hpp"
#include "core/inputs/inputs.hpp"
#include "core/inputs/npy.hpp"
#include "core/problem.hpp"
#include "core/routing/layout.hpp"

using namespace tilemix;

namespace {

// Every enumerator of the enum (`count` of them, from 0) has a name in `table`, and every name reads
// back as its value and prints as itself through the enum's to_string.
template <class Enum, size_t N>
void check_round_trip(const EnumName<Enum> (&table)[N], int count) {
  CHECK(enum_values(table).size() == static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) CHECK(std::string(enum_name(table, static_cast<Enum>(i))) != "?");
  for (const auto& entry : table) {
    INFO(entry.name);
    const auto value = parse_enum(table, entry.name);
    REQUIRE(value);
    CHECK(*value == entry.value);
    CHECK(std::string(to_string(*value)) == entry.name);
  }
  CHECK_FALSE(parse_enum(table, "unknown"));
  CHECK_FALSE(parse_enum(table, ""));
}

// The message of the InputError that reading the config `text` throws ("" if none).
std::string config_error(const std::string& text) {
  try {
    parse_config(nlohmann::ordered_json::parse(text), "test.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::string prefill_case_with(const std::string& key_value) {
  return R"({"cases": [{"seq_len": 8, )" + key_value + "}]}";
}

std::string decode_case_with(const std::string& key_value) {
  return R"({"cases": [{"kind": "decode", "cache_len": 8, )" + key_value + "}]}";
}

// Every name of `table`, given at `key` of a case made by `case_with`, reads as its value (which
// `read` takes from the case).
template <class Enum, size_t N, class Read>
void check_reads(const EnumName<Enum> (&table)[N], const std::string& key, std::string (*case_with)(const std::string&),
                 Read read) {
  for (const auto& entry : table) {
    INFO(key << ": " << entry.name);
    const std::string text = case_with("\"" + key + "\": \"" + entry.name + "\"");
    CHECK(read(parse_config(nlohmann::ordered_json::parse(text), "test.json").cases.at(0)) == entry.value);
  }
}

}  // namespace

TEST_CASE("every enum's name table reads back what it prints", "[config]") {
  check_round_trip(kCaseKindNames, 3);
  check_round_trip(kMethodNames, 6);
  check_round_trip(kLayoutNames, 10);
  check_round_trip(kStatePrecisionNames, 2);
  check_round_trip(kAccumPrecisionNames, 2);
  check_round_trip(kQuantModeNames, 2);
  check_round_trip(kPvPrecisionNames, 3);
  check_round_trip(kInputKindNames, 3);
  check_round_trip(kPrefillMainloopNames, 4);
  check_round_trip(kCacheKindNames, 2);
  check_round_trip(kDecodeMainloopNames, 3);
  check_round_trip(kDecodeCombineWaitNames, 3);
  check_round_trip(kDecodeRoutesNames, 3);
  // The automatic choices print and read as "auto".
  CHECK(std::string(to_string(PrefillMainloop::automatic)) == "auto");
  CHECK(std::string(to_string(DecodeMainloop::automatic)) == "auto");
  CHECK(std::string(to_string(DecodeCombineWait::automatic)) == "auto");
}

TEST_CASE("a second name of a value reads but does not print", "[config]") {
  // An INT8 .npy array says '|i1' or '<i1'; it is written as '|i1'.
  CHECK(parse_enum(kNpyDescrs, "<i1") == NpyDtype::i8);
  CHECK(parse_enum(kNpyDescrs, "|i1") == NpyDtype::i8);
  CHECK(std::string(npy_descr(NpyDtype::i8)) == "|i1");
  CHECK(enum_values(kNpyDescrs) ==
        std::vector<NpyDtype>{NpyDtype::f16, NpyDtype::f32, NpyDtype::f64, NpyDtype::i8, NpyDtype::u64});
  CHECK(enum_names(kNpyDescrs) == std::vector<std::string>{"<f2", "<f4", "<f8", "|i1", "<i1", "<u8"});
  for (NpyDtype dtype : enum_values(kNpyDescrs)) CHECK(parse_enum(kNpyDescrs, npy_descr(dtype)) == dtype);
  CHECK_FALSE(parse_enum(kNpyDescrs, ">f4"));
}

TEST_CASE("a config's unknown name is refused with the names its table reads", "[config]") {
  const std::pair<std::string, std::string> refusals[] = {
      {prefill_case_with(R"("kind": "prefil")"),
       "kind: unknown kind 'prefil' (expected one of: prefill, decode, model)"},
      {prefill_case_with(R"("layout": "bandd")"),
       "layout: unknown layout 'bandd' (expected one of: zero, one, band, global, rowrand, align_sparse, bigbird, "
       "sptrans, adaptive, file)"},
      {prefill_case_with(R"("mode": "fast")"),
       "mode: unknown mode 'fast' (expected one of: quantize_once, on_the_fly)"},
      {prefill_case_with(R"("state": "bf16")"), "state: unknown state 'bf16' (expected one of: fp32, fp16)"},
      {prefill_case_with(R"("accum": "int32")"), "accum: unknown accum 'int32' (expected one of: fp32, fp16)"},
      {prefill_case_with(R"("pv": "fp4")"), "pv: unknown pv 'fp4' (expected one of: fp16, fp8, routed)"},
      {prefill_case_with(R"("mainloop": "sm80")"),
       "mainloop: unknown mainloop 'sm80' (expected one of: auto, wgmma, warp_specialized, mma_sync)"},
      {prefill_case_with(R"("input": {"kind": "uniform"})"),
       "input.kind: unknown kind 'uniform' (expected one of: gaussian, llm_like, npy)"},
      {prefill_case_with(R"("compare_with": {"method": "cudnn_fp16"})"),
       "compare_with.method: unknown method 'cudnn_fp16' (expected one of: tilemix, flash_fp16, torch_like)"},
      {decode_case_with(R"("cache": "int4")"), "cache: unknown cache 'int4' (expected one of: int8, fp16)"},
      {decode_case_with(R"("mainloop": "warp_specialized")"),
       "mainloop: unknown mainloop 'warp_specialized' (expected one of: auto, mma_sync, wgmma)"},
      {decode_case_with(R"("combine": "never")"),
       "combine: unknown combine 'never' (expected one of: auto, grid, sequence)"},
  };
  for (const auto& [text, message] : refusals) CHECK(config_error(text) == "test.json: $.cases[0]." + message);
  CHECK(config_error(R"({"cases": [{"seq_len": 8}], "methods": ["tilemix", "fa3"]})") ==
        "test.json: $.methods[1]: unknown method 'fa3' (expected one of: tilemix, flash_fp16, torch_like, "
        "cudnn_fp16, cudnn_fp8, fp16_cache)");
}

TEST_CASE("a config reads every name of the tables it takes", "[config]") {
  check_reads(kQuantModeNames, "mode", prefill_case_with, [](const CaseSpec& c) { return c.numerics.mode; });
  check_reads(kStatePrecisionNames, "state", prefill_case_with, [](const CaseSpec& c) { return c.numerics.state; });
  check_reads(kAccumPrecisionNames, "accum", prefill_case_with, [](const CaseSpec& c) { return c.numerics.accum; });
  check_reads(kPrefillMainloopNames, "mainloop", prefill_case_with,
              [](const CaseSpec& c) { return c.prefill_mainloop; });
  check_reads(kCacheKindNames, "cache", decode_case_with, [](const CaseSpec& c) { return c.decode->cache; });
  check_reads(kDecodeMainloopNames, "mainloop", decode_case_with,
              [](const CaseSpec& c) { return c.decode->mainloop; });
  check_reads(kDecodeCombineWaitNames, "combine", decode_case_with,
              [](const CaseSpec& c) { return c.decode->combine; });
}
