#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/config/experiment.hpp"
#include "core/config/json_reader.hpp"
#include "core/error.hpp"

using namespace tilemix;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

ExperimentConfig parse(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return parse_config(nlohmann::ordered_json::parse(text), "test.json", overrides);
}

// The message of the InputError that parsing `text` throws ("" if none).
std::string parse_error(const std::string& text, const std::vector<std::string>& overrides = {}) {
  try {
    parse(text, overrides);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("tilemix-config-" + std::to_string(::getpid()) + "-" + std::to_string(reinterpret_cast<uintptr_t>(this)));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string write(const std::string& name, const std::string& text) const {
    const fs::path p = path / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }
};

}  // namespace

TEST_CASE("a minimal config gets the documented defaults", "[config]") {
  const auto cfg = parse(R"({"defaults": {"seq_len": 1024, "layout": "band", "ratio": 0.5}})");
  REQUIRE(cfg.cases.size() == 1);
  const CaseSpec& c = cfg.cases[0];
  CHECK(cfg.name == "test");
  CHECK(c.name == "test-0");
  CHECK(c.where == "test.json: $.defaults");
  CHECK(c.shape.hq == 8);
  CHECK(c.shape.hk == 2);
  CHECK(c.shape.d == 128);
  CHECK_FALSE(c.shape.causal);
  CHECK(c.shape.cu_seqlens_q == std::vector<int64_t>{0, 1024});
  CHECK(c.shape.cu_seqlens_k == std::vector<int64_t>{0, 1024});
  CHECK(c.shape.softmax_scale == Approx(1.0 / std::sqrt(128.0)));
  CHECK(c.routing.layout == LayoutKind::band);
  CHECK(c.routing.ratio == 0.5);
  CHECK(c.routing.seed == 0);
  CHECK_FALSE(c.routing.group.has_value());
  CHECK(c.routing.geometry.block_m == 128);
  CHECK(c.routing.geometry.block_n == 64);
  CHECK(c.numerics.mode == QuantMode::quantize_once);
  CHECK(c.numerics.state == StatePrecision::fp32);
  CHECK(c.numerics.accum == AccumPrecision::fp32);
  CHECK_FALSE(c.numerics.smooth_k);
  CHECK(c.input.kind == InputKind::gaussian);
  CHECK(c.input.stddev == 1.0f);
  CHECK(c.tolerance.emulator_vs_reference.empty());
  CHECK(cfg.methods.empty());
  CHECK(cfg.timing.warmup == 3);
  CHECK(cfg.timing.warmup_seconds == 0.02);
}

TEST_CASE("every case key is read", "[config]") {
  const auto cfg = parse(R"({
    "name": "full", "description": "all keys",
    "defaults": {"hq": 16, "hk": 4, "d": 64, "causal": true, "softmax_scale": 0.25, "seed": 7,
                 "group": 2, "block_m": 64, "block_n": 128, "mode": "on_the_fly", "state": "fp16",
                 "accum": "fp16", "smooth_k": true, "layout": "rowrand", "ratio": 0.25,
                 "input": {"kind": "llm_like", "stddev": 0.5, "outlier_channels": 2, "outlier_scale": 4,
                           "sink_scale": 3, "local_bias": 0.25, "k_channel_bias": 1.5, "allow_nonfinite": true},
                 "tolerance": {"emulator_vs_reference": {"max_abs": 0.01, "mean_abs": 0.001, "rel_l2": 0.02,
                                                         "min_cosine": 0.999},
                               "gpu_vs_emulator": {"max_abs": 0}}},
    "cases": [{"name": "lens", "batch": 3, "lq": 10, "lk": 300}],
    "methods": ["tilemix", "flash_fp16"],
    "timing": {"warmup": 1, "warmup_seconds": 0.5, "min_reps": 2, "max_reps": 5, "max_seconds": 0.5, "noise": 0.02, "flush_l2": false}
  })");
  REQUIRE(cfg.cases.size() == 1);
  const CaseSpec& c = cfg.cases[0];
  CHECK(cfg.description == "all keys");
  CHECK(c.name == "lens");
  CHECK(c.where == "test.json: $.cases[0]");
  CHECK(c.shape.cu_seqlens_q == std::vector<int64_t>{0, 10, 20, 30});
  CHECK(c.shape.cu_seqlens_k == std::vector<int64_t>{0, 300, 600, 900});
  CHECK(c.shape.hq == 16);
  CHECK(c.shape.hk == 4);
  CHECK(c.shape.d == 64);
  CHECK(c.shape.causal);
  CHECK(c.shape.softmax_scale == 0.25f);
  CHECK(c.routing.layout == LayoutKind::rowrand);
  CHECK(c.routing.ratio == 0.25);
  CHECK(c.routing.seed == 7);
  CHECK(c.routing.group == 2);
  CHECK(c.routing.geometry.block_m == 64);
  CHECK(c.routing.geometry.block_n == 128);
  CHECK(c.numerics.mode == QuantMode::on_the_fly);
  CHECK(c.numerics.state == StatePrecision::fp16);
  CHECK(c.numerics.accum == AccumPrecision::fp16);
  CHECK(c.numerics.smooth_k);
  CHECK(c.input.kind == InputKind::llm_like);
  CHECK(c.input.seed == 7);  // the case seed unless the input names its own
  CHECK(c.input.stddev == 0.5f);
  CHECK(c.input.outlier_channels == 2);
  CHECK(c.input.outlier_scale == 4.0f);
  CHECK(c.input.sink_scale == 3.0f);
  CHECK(c.input.local_bias == 0.25f);
  CHECK(c.input.k_channel_bias == 1.5f);
  CHECK(c.input.allow_nonfinite);
  CHECK(c.tolerance.emulator_vs_reference.max_abs == 0.01);
  CHECK(c.tolerance.emulator_vs_reference.mean_abs == 0.001);
  CHECK(c.tolerance.emulator_vs_reference.rel_l2 == 0.02);
  CHECK(c.tolerance.emulator_vs_reference.min_cosine == 0.999);
  CHECK(c.tolerance.gpu_vs_emulator.max_abs == 0.0);
  CHECK(c.tolerance.gpu_vs_reference.empty());
  CHECK(cfg.methods == std::vector<Method>{Method::tilemix, Method::flash_fp16});
  CHECK(cfg.timing.warmup == 1);
  CHECK(cfg.timing.warmup_seconds == 0.5);
  CHECK(cfg.timing.min_reps == 2);
  CHECK(cfg.timing.max_reps == 5);
  CHECK(cfg.timing.max_seconds == 0.5);
  CHECK(cfg.timing.noise == 0.02);
  CHECK_FALSE(cfg.timing.flush_l2);
  CHECK(c.json["input"]["kind"] == "llm_like");
  CHECK(cfg.json["name"] == "full");
}

TEST_CASE("varlen lengths and length forms", "[config]") {
  SECTION("seqlens arrays, zero-length sequences allowed") {
    const auto cfg = parse(R"({"cases": [{"seqlens_q": [5, 0, 1], "seqlens_k": [7, 0, 3]}]})");
    CHECK(cfg.cases[0].shape.cu_seqlens_q == std::vector<int64_t>{0, 5, 5, 6});
    CHECK(cfg.cases[0].shape.cu_seqlens_k == std::vector<int64_t>{0, 7, 7, 10});
  }
  SECTION("a case's length form replaces the defaults' form") {
    const auto cfg = parse(R"({"defaults": {"seq_len": 64, "batch": 4},
                              "cases": [{}, {"seqlens_q": [1], "seqlens_k": [2]}, {"lq": 3, "lk": 9}]})");
    CHECK(cfg.cases[0].shape.cu_seqlens_q == std::vector<int64_t>{0, 64, 128, 192, 256});
    CHECK(cfg.cases[1].shape.cu_seqlens_q == std::vector<int64_t>{0, 1});
    CHECK(cfg.cases[1].shape.cu_seqlens_k == std::vector<int64_t>{0, 2});
    CHECK(cfg.cases[2].shape.cu_seqlens_q == std::vector<int64_t>{0, 3, 6, 9, 12});
    CHECK(cfg.cases[2].shape.cu_seqlens_k == std::vector<int64_t>{0, 9, 18, 27, 36});
  }
  SECTION("mixing forms in one object names the key") {
    CHECK_THAT(parse_error(R"({"cases": [{"seq_len": 4, "lq": 4, "lk": 4}]})"),
               Contains("test.json: $.cases[0].seq_len: cannot be combined with lq"));
    CHECK_THAT(parse_error(R"({"cases": [{"batch": 2, "seqlens_q": [4], "seqlens_k": [4]}]})"),
               Contains("test.json: $.cases[0].batch: cannot be combined with seqlens_"));
  }
  SECTION("incomplete forms") {
    CHECK_THAT(parse_error(R"({"cases": [{"lq": 4}]})"), Contains("$.cases[0].lk: is required with lq"));
    CHECK_THAT(parse_error(R"({"cases": [{"seqlens_q": [4]}]})"), Contains("$.cases[0].seqlens_k: is required"));
    CHECK_THAT(parse_error(R"({"cases": [{"hq": 8}]})"), Contains("$.cases[0]: sequence lengths are required"));
    CHECK_THAT(parse_error(R"({"cases": [{"seqlens_q": [], "seqlens_k": []}]})"),
               Contains("$.cases[0].seqlens_q: needs at least one"));
    CHECK_THAT(parse_error(R"({"cases": [{"seq_len": 4, "batch": 0}]})"), Contains("$.cases[0].batch: must be in [1,"));
  }
}

TEST_CASE("bad input names the field", "[config]") {
  const std::string ok = R"("seq_len": 128, "layout": "band", "ratio": 0.5)";
  const auto with = [&](const std::string& extra) { return R"({"cases": [{)" + ok + ", " + extra + "}]}"; };
  SECTION("unknown key") {
    CHECK_THAT(parse_error(with(R"("hqq": 8)")), Contains("test.json: $.cases[0].hqq: unknown key 'hqq'"));
    CHECK_THAT(parse_error(with(R"("hqq": 8)")), Contains("expected one of: name, "));
    CHECK_THAT(parse_error(R"({"defaults": {"seq_len": 8}, "cases": [{}, {"x": 1}]})"),
               Contains("test.json: $.cases[1].x: unknown key 'x'"));
    CHECK_THAT(parse_error(R"({"defaults": {"seq_len": 8}, "casse": []})"),
               Contains("test.json: $.casse: unknown key"));
    CHECK_THAT(parse_error(with(R"("input": {"kind": "gaussian", "sed": 1})")),
               Contains("test.json: $.cases[0].input.sed: unknown key 'sed'"));
    CHECK_THAT(parse_error(with(R"("tolerance": {"emulator_vs_reference": {"max": 1}})")),
               Contains("$.cases[0].tolerance.emulator_vs_reference.max: unknown key 'max'"));
    CHECK_THAT(parse_error(R"({"defaults": {"seq_len": 8}, "timing": {"reps": 3}})"),
               Contains("test.json: $.timing.reps: unknown key 'reps'"));
  }
  SECTION("wrong type") {
    CHECK_THAT(parse_error(with(R"("hq": "8")")),
               Contains("test.json: $.cases[0].hq: expected integer, got string \"8\""));
    CHECK_THAT(parse_error(with(R"("hq": 3.5)")), Contains("$.cases[0].hq: expected integer, got number 3.5"));
    CHECK_THAT(parse_error(with(R"("hq": 8.0)")), Contains("$.cases[0].hq: expected integer"));
    CHECK_THAT(parse_error(with(R"("causal": 1)")), Contains("$.cases[0].causal: expected boolean, got number 1"));
    CHECK_THAT(parse_error(with(R"("softmax_scale": "x")")), Contains("$.cases[0].softmax_scale: expected number"));
    CHECK_THAT(parse_error(with(R"("input": [1])")), Contains("$.cases[0].input: expected object, got array"));
    CHECK_THAT(parse_error(with(R"("group": "big")")),
               Contains("$.cases[0].group: expected \"auto\" or a positive integer, got string \"big\""));
    CHECK_THAT(parse_error(R"({"cases": [{"seqlens_q": [1, "2"], "seqlens_k": [1, 2]}]})"),
               Contains("$.cases[0].seqlens_q[1]: expected integer"));
    CHECK_THAT(parse_error(R"({"cases": {"seq_len": 8}})"), Contains("test.json: $.cases: expected non-empty array"));
    CHECK_THAT(parse_error(R"({"cases": [3]})"), Contains("test.json: $.cases[0]: expected object, got number 3"));
    CHECK_THAT(parse_error("[1]"), Contains("test.json: $: expected object"));
  }
  SECTION("unknown enum strings") {
    CHECK_THAT(parse_error(R"({"cases": [{"seq_len": 8, "layout": "bandd", "ratio": 0.5}]})"),
               Contains("test.json: $.cases[0].layout: unknown layout 'bandd' (expected one of: zero, one, band,"));
    CHECK_THAT(parse_error(with(R"("mode": "fast")")),
               Contains("$.cases[0].mode: unknown mode 'fast' (expected one of: quantize_once, on_the_fly)"));
    CHECK_THAT(parse_error(with(R"("state": "bf16")")),
               Contains("$.cases[0].state: unknown state 'bf16' (expected one of: fp32, fp16)"));
    CHECK_THAT(parse_error(with(R"("accum": "int32")")), Contains("$.cases[0].accum: unknown accum 'int32'"));
    CHECK_THAT(parse_error(with(R"("input": {"kind": "uniform"})")),
               Contains("$.cases[0].input.kind: unknown kind 'uniform' (expected one of: gaussian, llm_like, npy)"));
    CHECK(parse_error(R"({"defaults": {"seq_len": 8}, "methods": ["tilemix", "fa3"]})") ==
          "test.json: $.methods[1]: unknown method 'fa3' (expected one of: tilemix, flash_fp16, torch_like, "
          "cudnn_fp16, cudnn_fp8, fp16_cache)");
  }
  SECTION("ratio outside [0, 1], or missing") {
    CHECK_THAT(parse_error(R"({"cases": [{"seq_len": 8, "layout": "band", "ratio": 1.5}]})"),
               Contains("test.json: $.cases[0].ratio: must be in [0, 1]"));
    CHECK_THAT(parse_error(R"({"cases": [{"seq_len": 8, "layout": "band", "ratio": -0.25}]})"),
               Contains("$.cases[0].ratio: must be in [0, 1] (the requested INT8 coverage), got -0.25"));
    // The path is where the value was written, here in the defaults.
    CHECK_THAT(parse_error(R"({"defaults": {"ratio": 2}, "cases": [{"seq_len": 8, "layout": "band"}]})"),
               Contains("test.json: $.defaults.ratio: must be in [0, 1]"));
    CHECK_THAT(parse_error(R"({"cases": [{"seq_len": 8, "layout": "band"}]})"),
               Contains("test.json: $.cases[0]: ratio is required for layout band"));
  }
  SECTION("shape rules") {
    CHECK_THAT(parse_error(with(R"("hq": 8, "hk": 3)")), Contains("test.json: $.cases[0].hk: hq % hk must be 0"));
    CHECK_THAT(parse_error(with(R"("d": 96)")), Contains("test.json: $.cases[0].d: unsupported head dimension 96"));
    CHECK_THAT(parse_error(with(R"("hq": 0)")), Contains("$.cases[0].hq: must be in [1,"));
    CHECK_THAT(parse_error(R"({"cases": [{"seq_len": -4}]})"),
               Contains("test.json: $.cases[0].seq_len: negative sequence length -4"));
    CHECK_THAT(parse_error(R"({"cases": [{"lq": 4, "lk": -1}]})"), Contains("$.cases[0].lk: negative sequence length"));
    CHECK_THAT(parse_error(R"({"cases": [{"seqlens_q": [4, -1], "seqlens_k": [4, 4]}]})"),
               Contains("test.json: $.cases[0].seqlens_q[1]: negative sequence length -1"));
    CHECK_THAT(parse_error(R"({"cases": [{"seqlens_q": [4, 4], "seqlens_k": [4, 4, 4]}]})"),
               Contains("test.json: $.cases[0].seqlens_k: has 3 lengths but seqlens_q has 2"));
    CHECK_THAT(parse_error(with(R"("softmax_scale": 0)")),
               Contains("$.cases[0].softmax_scale: must be a finite number > 0"));
    CHECK_THAT(parse_error(with(R"("block_m": 100)")), Contains("test.json: $.cases[0]: block_m 100"));
  }
  SECTION("a user group with more than 64 routing groups") {
    CHECK_THAT(parse_error(R"({"cases": [{"seq_len": 8192, "group": 1}]})"),
               Contains("test.json: $.cases[0].group: g=1 gives Tmask=128"));
    CHECK(parse(R"({"cases": [{"seq_len": 8192, "group": 2}]})").cases[0].routing.group == 2);
  }
  SECTION("input parameters") {
    CHECK_THAT(parse_error(with(R"("input": {"stddev": 0})")),
               Contains("$.cases[0].input.stddev: must be a finite number > 0"));
    CHECK_THAT(parse_error(with(R"("input": {"outlier_channels": 200})")),
               Contains("$.cases[0].input.outlier_channels: must be in [0, 118]"));
    CHECK_THAT(parse_error(with(R"("input": {"kind": "npy", "q": "q.npy"})")),
               Contains("$.cases[0].input.q: file not found: q.npy"));
    CHECK_THAT(parse_error(with(R"("input": {"kind": "npy"})")),
               Contains("$.cases[0].input.q: is required for input kind npy"));
    CHECK_THAT(parse_error(with(R"("input": {"q": "q.npy"})")),
               Contains("$.cases[0].input.q: is only used with input kind npy"));
    CHECK_THAT(parse_error(with(R"("input": {"kind": "llm_like", "k_channel_bias": -0.5})")),
               Contains("$.cases[0].input.k_channel_bias: must be"));
  }
  SECTION("tolerances, methods and timing") {
    CHECK_THAT(parse_error(with(R"("tolerance": {"emulator_vs_reference": {"max_abs": -1}})")),
               Contains("$.cases[0].tolerance.emulator_vs_reference.max_abs: must be a finite number >= 0"));
    CHECK_THAT(parse_error(with(R"("tolerance": {"emulator_vs_reference": {"min_cosine": 2}})")),
               Contains("min_cosine: must be in [-1, 1]"));
    CHECK_THAT(parse_error(with(R"("tolerance": {"gpu": {}})")),
               Contains("$.cases[0].tolerance.gpu: unknown key 'gpu'"));
    CHECK_THAT(parse_error(R"({"defaults": {"seq_len": 8}, "methods": ["tilemix", "tilemix"]})"),
               Contains("$.methods[1]: method 'tilemix' is listed twice"));
    CHECK_THAT(parse_error(R"({"defaults": {"seq_len": 8}, "timing": {"min_reps": 5, "max_reps": 2}})"),
               Contains("$.timing.max_reps: must be >= min_reps"));
  }
  SECTION("layout file needs words") {
    CHECK_THAT(parse_error(R"({"cases": [{"seq_len": 8, "layout": "file"}]})"),
               Contains("$.cases[0].words_file: is required for layout file"));
    CHECK_THAT(parse_error(with(R"("words_file": "w.json")")),
               Contains("$.cases[0].words_file: is only used with layout file"));
  }
  SECTION("duplicate case names") {
    CHECK_THAT(parse_error(R"({"defaults": {"seq_len": 8}, "cases": [{"name": "a"}, {"name": "a"}]})"),
               Contains("test.json: $.cases[1]: case name 'a' is also used by test.json: $.cases[0]"));
  }
}

TEST_CASE("JSON the parser refuses is an input error naming the file", "[config]") {
  const TempDir dir;
  const auto load_error = [&](const std::string& name, const std::string& text) {
    const std::string path = dir.write(name, text);
    try {
      load_config(path);
    } catch (const InputError& e) {
      CHECK(e.where().rfind(path, 0) == 0);  // the file, then the JSON path where there is one
      return std::string(e.what());
    }
    return std::string();
  };
  // A number past the double range (found by the config fuzz target).
  CHECK_THAT(load_error("overflow.json", R"({"defaults": {"seq_len": 1e6384}})"),
             Contains("invalid JSON") && Contains("number overflow"));
  CHECK_THAT(load_error("deep.json", std::string(100, '[') + std::string(100, ']')), Contains("nested deeper than 64"));
  // Brackets inside strings do not count as nesting.
  CHECK_THAT(load_error("strings.json", R"({"name": ")" + std::string(100, '[') + R"(", "defaults": {"seq_len": 8, "hq": "x"}})"),
             Contains("$.defaults.hq"));
}

TEST_CASE("a --set override that is not UTF-8 is an input error", "[config]") {
  // Found by the set_override fuzz target: the bytes reached a JSON dump, which threw.
  CHECK_THAT(parse_error(R"({"defaults": {"seq_len": 8}})", {"d=\xb2&8"}), Contains("--set: is not UTF-8 text"));
  CHECK_THAT(parse_error(R"({"defaults": {"seq_len": 8}})", {"layout=\xc0\x80"}), Contains("is not UTF-8 text"));
}

TEST_CASE("the prefill mainloop key", "[config]") {
  CHECK(parse(R"({"defaults": {"seq_len": 8}})").cases[0].prefill_mainloop == PrefillMainloop::automatic);
  const ExperimentConfig c =
      parse(R"({"defaults": {"seq_len": 8}, "axes": {"mainloop": ["wgmma", "warp_specialized", "mma_sync"]}})");
  REQUIRE(c.cases.size() == 3);
  CHECK(c.cases[0].prefill_mainloop == PrefillMainloop::wgmma);
  CHECK(c.cases[1].prefill_mainloop == PrefillMainloop::warp_specialized);
  CHECK(c.cases[2].prefill_mainloop == PrefillMainloop::mma_sync);
  CHECK_THAT(parse_error(R"({"defaults": {"seq_len": 8, "mainloop": "sm80"}})"),
             Contains("$.defaults.mainloop") && Contains("unknown mainloop 'sm80'"));
  // Every head dimension, accumulation and mode runs on it.
  CHECK(parse(R"({"defaults": {"seq_len": 8, "d": 64, "accum": "fp16", "mode": "on_the_fly",
                               "mainloop": "warp_specialized"}})")
            .cases[0]
            .prefill_mainloop == PrefillMainloop::warp_specialized);
  // Decode cases keep their own mainloop names.
  CHECK(parse(R"({"defaults": {"kind": "decode", "cache_len": 64, "new_tokens": 1, "mainloop": "mma_sync"}})")
            .cases[0]
            .decode->mainloop == DecodeMainloop::mma_sync);
}

TEST_CASE("zero and one fix the ratio; other layouts keep it", "[config]") {
  const auto cfg = parse(R"({"defaults": {"seq_len": 64, "ratio": 0.5},
                            "cases": [{"layout": "zero"}, {"layout": "one"}, {"layout": "global"}]})");
  CHECK(cfg.cases[0].routing.ratio == 0.0);
  CHECK(cfg.cases[1].routing.ratio == 1.0);
  CHECK(cfg.cases[2].routing.ratio == 0.5);
}

TEST_CASE("compare_with replaces the case's routing and numerics keys for the run it names", "[config]") {
  const auto cfg = parse(R"({"defaults": {"seq_len": 256, "layout": "band", "ratio": 0.5, "accum": "fp16",
                                          "compare_with": {"layout": "zero", "accum": "fp32"}},
                            "cases": [{"name": "vs-zero"},
                                      {"name": "vs-band25", "compare_with": {"layout": "band", "ratio": 0.25}}],
                            "axes": {"compare_with.state": ["fp16"]}})");
  REQUIRE(cfg.cases.size() == 2);
  // The case's object merges key by key with the defaults' one, and an axis reaches inside it as
  // it does inside input.
  const Comparison& vs_zero = *cfg.cases[0].compare_with;
  CHECK(vs_zero.method == Method::tilemix);
  CHECK(vs_zero.label == "tilemix layout=zero state=fp16 accum=fp32");
  CHECK(vs_zero.routing.layout == LayoutKind::zero);
  CHECK(vs_zero.routing.ratio == 0.0);
  CHECK(vs_zero.numerics.accum == AccumPrecision::fp32);
  CHECK(vs_zero.numerics.state == StatePrecision::fp16);
  const CaseSpec& own = cfg.cases[0];  // the case keeps its own routing and numerics
  CHECK(own.routing.layout == LayoutKind::band);
  CHECK(own.routing.ratio == 0.5);
  CHECK(own.numerics.accum == AccumPrecision::fp16);
  CHECK(own.numerics.state == StatePrecision::fp32);
  const Comparison& vs_band = *cfg.cases[1].compare_with;
  CHECK(vs_band.label == "tilemix layout=band ratio=0.25 state=fp16 accum=fp32");
  CHECK(vs_band.routing.layout == LayoutKind::band);
  CHECK(vs_band.routing.ratio == 0.25);

  const auto only = parse(R"({"cases": [{"seq_len": 256, "layout": "band", "ratio": 0.5, "accum": "fp16",
                                         "compare_with": {"accum": "fp32"}}]})");
  const Comparison& same_routing = *only.cases[0].compare_with;
  CHECK(same_routing.label == "tilemix accum=fp32");
  CHECK(same_routing.routing.layout == LayoutKind::band);
  CHECK(same_routing.routing.ratio == 0.5);
  CHECK(same_routing.numerics.accum == AccumPrecision::fp32);

  // A baseline keeps the case's numerics; torch_like takes no keys. The defaults' compare_with
  // keys that a baseline refuses are the error's subject, so these cases give their own object.
  const auto baselines = parse(R"({"defaults": {"seq_len": 256, "state": "fp16"},
                                  "cases": [{"name": "f", "compare_with": {"method": "flash_fp16", "accum": "fp16"}},
                                            {"name": "t", "compare_with": {"method": "torch_like"}},
                                            {"name": "p"}]})");
  CHECK(baselines.cases[0].compare_with->method == Method::flash_fp16);
  CHECK(baselines.cases[0].compare_with->label == "flash_fp16 accum=fp16");
  CHECK(baselines.cases[0].compare_with->numerics.state == StatePrecision::fp16);
  CHECK(baselines.cases[0].compare_with->numerics.accum == AccumPrecision::fp16);
  CHECK(baselines.cases[1].compare_with->label == "torch_like");
  CHECK_FALSE(baselines.cases[2].compare_with);
}

TEST_CASE("smooth_k: a prefill and model numerics key of the routed kernel", "[config]") {
  const auto cfg = parse(R"({"defaults": {"seq_len": 256, "layout": "one"},
                            "cases": [{"name": "plain"}, {"name": "smooth", "smooth_k": true},
                                      {"name": "model", "kind": "model", "smooth_k": true}],
                            "axes": {"mode": ["quantize_once", "on_the_fly"]}})");
  REQUIRE(cfg.cases.size() == 6);
  CHECK_FALSE(cfg.cases[0].numerics.smooth_k);
  CHECK(cfg.cases[2].numerics.smooth_k);
  CHECK(cfg.cases[3].numerics.smooth_k);
  CHECK(cfg.cases[3].numerics.mode == QuantMode::on_the_fly);
  CHECK(cfg.cases[5].numerics.smooth_k);
  // An axis or --set of it, as of any case key.
  const auto axis = parse(R"({"defaults": {"seq_len": 64}})", {"smooth_k=false,true"});
  REQUIRE(axis.cases.size() == 2);
  CHECK(axis.cases[0].name == "test-0/smooth_k=false");
  CHECK_FALSE(axis.cases[0].numerics.smooth_k);
  CHECK(axis.cases[1].numerics.smooth_k);

  CHECK_THAT(parse_error(R"({"defaults": {"seq_len": 64, "smooth_k": "yes"}})"),
             Contains("test.json: $.defaults.smooth_k: expected boolean, got string \"yes\""));
  CHECK_THAT(parse_error(R"({"defaults": {"seq_len": 64}, "axes": {"smooth_k": [true, 1]}})"),
             Contains("$.axes.smooth_k[1]: expected boolean"));
  // The INT8 KV cache of decode takes no smoothing.
  CHECK_THAT(parse_error(R"({"cases": [{"kind": "decode", "cache_len": 64, "smooth_k": true}]})"),
             Contains("$.cases[0].smooth_k: is a prefill key; this case has \"kind\": \"decode\""));

  // compare_with: the routed kernel's run with or without it; a baseline has no quantization pass,
  // so it neither takes the key nor inherits the case's.
  const auto compared = parse(R"({"defaults": {"seq_len": 256, "layout": "one", "smooth_k": true},
                                 "cases": [{"name": "t", "compare_with": {"smooth_k": false}},
                                           {"name": "f", "compare_with": {"method": "flash_fp16"}},
                                           {"name": "s", "smooth_k": false, "compare_with": {"smooth_k": true}}]})");
  CHECK(compared.cases[0].compare_with->label == "tilemix smooth_k=false");
  CHECK_FALSE(compared.cases[0].compare_with->numerics.smooth_k);
  CHECK(compared.cases[0].numerics.smooth_k);
  CHECK_FALSE(compared.cases[1].compare_with->numerics.smooth_k);
  CHECK(compared.cases[2].compare_with->numerics.smooth_k);
  CHECK_FALSE(compared.cases[2].numerics.smooth_k);
  CHECK_THAT(parse_error(R"({"cases": [{"seq_len": 64, "compare_with": {"method": "flash_fp16", "smooth_k": true}}]})"),
             Contains("$.cases[0].compare_with.smooth_k: has no meaning for flash_fp16"));
  CHECK_THAT(parse_error(R"({"cases": [{"seq_len": 64, "compare_with": {"smooth_k": 0}}]})"),
             Contains("$.cases[0].compare_with.smooth_k: expected boolean, got number 0"));
}

TEST_CASE("compare_with errors name the key where it was written", "[config]") {
  const auto with = [](const std::string& compare) {
    return R"({"defaults": {"seq_len": 128, "layout": "band", "ratio": 0.5},
              "cases": [{"compare_with": )" + compare + "}]}";
  };
  CHECK_THAT(parse_error(with(R"({"hq": 4})")),
             Contains("test.json: $.cases[0].compare_with.hq: unknown key 'hq' (expected one of: method, layout"));
  CHECK_THAT(parse_error(with(R"({"method": "cudnn_fp16"})")),
             Contains("$.cases[0].compare_with.method: unknown method 'cudnn_fp16' (expected one of: tilemix, "
                      "flash_fp16, torch_like)"));
  CHECK_THAT(parse_error(with(R"({"method": "flash_fp16", "layout": "zero"})")),
             Contains("$.cases[0].compare_with.layout: is a routing key; flash_fp16 runs without routing"));
  CHECK_THAT(parse_error(with(R"({"method": "flash_fp16", "mode": "on_the_fly"})")),
             Contains("$.cases[0].compare_with.mode: has no meaning for flash_fp16"));
  CHECK_THAT(parse_error(with(R"({"method": "torch_like", "accum": "fp16"})")),
             Contains("$.cases[0].compare_with.accum: has no meaning for torch_like"));
  // The replaced keys are read like the case's own, and their errors point into compare_with.
  CHECK_THAT(parse_error(with(R"({"layout": "stripes"})")),
             Contains("test.json: $.cases[0].compare_with.layout: unknown layout 'stripes'"));
  CHECK_THAT(parse_error(with(R"({"ratio": 1.5})")), Contains("$.cases[0].compare_with.ratio: must be in [0, 1]"));
  CHECK_THAT(parse_error(with(R"({"accum": 32})")),
             Contains("$.cases[0].compare_with.accum: expected string, got number 32"));
  CHECK_THAT(parse_error(with(R"("zero")")), Contains("$.cases[0].compare_with: expected object"));
  CHECK_THAT(parse_error(R"({"cases": [{"kind": "decode", "cache_len": 64, "compare_with": {}}]})"),
             Contains("$.cases[0].compare_with: is only used in prefill cases"));
  CHECK_THAT(parse_error(R"({"cases": [{"kind": "model", "seq_len": 64, "compare_with": {}}]})"),
             Contains("$.cases[0].compare_with: is only used in prefill cases"));
  CHECK_THAT(parse_error(R"({"cases": [{"seq_len": 64, "layout": "one", "compare_with": {"layout": "band"}}]})"),
             Contains("ratio is required for layout band"));
  CHECK_THAT(parse_error(R"({"defaults": {"seq_len": 8}, "axes": {"compare_with.hq": [1]}})"),
             Contains("$.axes[\"compare_with.hq\"]: unknown case key 'compare_with.hq'"));
}

TEST_CASE("objects merge key by key: defaults, then the case", "[config]") {
  const auto cfg = parse(R"({"defaults": {"seq_len": 64, "seed": 3, "input": {"kind": "llm_like", "stddev": 2},
                                          "tolerance": {"emulator_vs_reference": {"max_abs": 0.1}}},
                            "cases": [{"input": {"seed": 9},
                                       "tolerance": {"emulator_vs_reference": {"rel_l2": 0.2}}}]})");
  const CaseSpec& c = cfg.cases[0];
  CHECK(c.input.kind == InputKind::llm_like);
  CHECK(c.input.stddev == 2.0f);
  CHECK(c.input.seed == 9);
  CHECK(c.routing.seed == 3);
  CHECK(c.tolerance.emulator_vs_reference.max_abs == 0.1);
  CHECK(c.tolerance.emulator_vs_reference.rel_l2 == 0.2);
  CHECK(c.json["input"]["stddev"] == 2);
  CHECK(c.json["input"]["seed"] == 9);
}

TEST_CASE("axes expand every case in file order", "[config]") {
  const auto cfg = parse(R"({"name": "sweep",
    "defaults": {"ratio": 0.5},
    "cases": [{"layout": "band"}, {"name": "g", "layout": "global"}],
    "axes": {"seq_len": [64, 128], "input.kind": ["gaussian", "llm_like"], "causal": [false, true]}})");
  REQUIRE(cfg.cases.size() == 16);
  CHECK(cfg.cases[0].name == "sweep-0/seq_len=64/input.kind=gaussian/causal=false");
  CHECK(cfg.cases[1].name == "sweep-0/seq_len=64/input.kind=gaussian/causal=true");
  CHECK(cfg.cases[2].name == "sweep-0/seq_len=64/input.kind=llm_like/causal=false");
  CHECK(cfg.cases[4].name == "sweep-0/seq_len=128/input.kind=gaussian/causal=false");
  CHECK(cfg.cases[8].name == "g/seq_len=64/input.kind=gaussian/causal=false");
  CHECK(cfg.cases[4].shape.total_q() == 128);
  CHECK(cfg.cases[2].input.kind == InputKind::llm_like);
  CHECK(cfg.cases[1].shape.causal);
  CHECK(cfg.cases[8].routing.layout == LayoutKind::global);
  CHECK(cfg.cases[8].where == "test.json: $.cases[1]");
  CHECK(cfg.cases[3].json["seq_len"] == 64);
}

TEST_CASE("axis values override the case, and their errors name the axis", "[config]") {
  const auto cfg = parse(R"({"cases": [{"seq_len": 64, "layout": "band", "ratio": 0.1}],
                            "axes": {"ratio": [0.25, 0.75]}})");
  REQUIRE(cfg.cases.size() == 2);
  CHECK(cfg.cases[0].routing.ratio == 0.25);
  CHECK(cfg.cases[1].routing.ratio == 0.75);
  CHECK_THAT(parse_error(R"({"cases": [{"seq_len": 64, "layout": "band"}], "axes": {"ratio": [0.5, 2]}})"),
             Contains("test.json: $.axes.ratio[1]: must be in [0, 1]"));
  CHECK_THAT(parse_error(R"({"defaults": {"seq_len": 8}, "axes": {"hqq": [1]}})"),
             Contains("test.json: $.axes.hqq: unknown case key 'hqq'"));
  CHECK_THAT(parse_error(R"({"defaults": {"seq_len": 8}, "axes": {"hq": []}})"),
             Contains("test.json: $.axes.hq: expected non-empty array"));
  // An axis of lengths replaces the case's lengths of another form.
  const auto lens = parse(R"({"cases": [{"seqlens_q": [1, 2], "seqlens_k": [1, 2]}], "axes": {"seq_len": [16]}})");
  CHECK(lens.cases[0].shape.cu_seqlens_q == std::vector<int64_t>{0, 16});
}

TEST_CASE("command-line --set overrides replace or add axes", "[config]") {
  const std::string text = R"({"name": "s", "defaults": {"seq_len": 64, "layout": "band", "ratio": 0.5},
                               "axes": {"seq_len": [64, 128], "causal": [false]}})";
  const auto cfg = parse(text, {"seq_len=256,512,1024", "layout=global,rowrand", "causal=true", "input.seed=5"});
  REQUIRE(cfg.cases.size() == 6);
  CHECK(cfg.cases[0].name == "s-0/seq_len=256/causal=true/layout=global/input.seed=5");
  CHECK(cfg.cases[1].routing.layout == LayoutKind::rowrand);
  CHECK(cfg.cases[5].shape.total_q() == 1024);
  CHECK(cfg.cases[5].shape.causal);
  CHECK(cfg.cases[5].input.seed == 5);
  CHECK(cfg.json["axes"]["seq_len"] == nlohmann::json::array({256, 512, 1024}));
  CHECK(cfg.json["axes"]["layout"] == nlohmann::json::array({"global", "rowrand"}));

  CHECK_THAT(parse_error(text, {"hqq=4"}), Contains("--set hqq: unknown case key 'hqq'"));
  CHECK_THAT(parse_error(text, {"seq_len"}), Contains("--set seq_len: expected key=value"));
  CHECK_THAT(parse_error(text, {"seq_len=64,"}), Contains("--set seq_len: empty value"));
  CHECK_THAT(parse_error(text, {"ratio=1.5"}), Contains("--set ratio: must be in [0, 1]"));
  CHECK_THAT(parse_error(text, {"hq=eight"}), Contains("--set hq: expected integer, got string \"eight\""));
}

TEST_CASE("config files: paths, syntax errors, missing files", "[config]") {
  TempDir dir;
  SECTION("relative input and word files resolve against the config's directory") {
    dir.write("sub/data/q.npy", "x");
    dir.write("sub/data/k.npy", "x");
    dir.write("sub/data/v.npy", "x");
    dir.write("sub/words.json", "{}");
    const std::string path = dir.write("sub/cfg.json", R"({"cases": [
        {"seq_len": 8, "input": {"kind": "npy", "q": "data/q.npy", "k": "data/k.npy", "v": "data/v.npy"}},
        {"seq_len": 8, "layout": "file", "words_file": "words.json"}]})");
    const auto cfg = load_config(path);
    CHECK(cfg.name == "cfg");
    CHECK(cfg.cases[0].input.q_path == (dir.path / "sub/data/q.npy").string());
    CHECK(cfg.cases[0].input.v_path == (dir.path / "sub/data/v.npy").string());
    CHECK(cfg.cases[1].routing.words_file == (dir.path / "sub/words.json").string());
    CHECK(cfg.cases[0].where == path + ": $.cases[0]");
  }
  SECTION("a missing word file") {
    const std::string path =
        dir.write("cfg.json", R"({"cases": [{"seq_len": 8, "layout": "file", "words_file": "w.json"}]})");
    CHECK_THROWS_WITH(load_config(path),
                      Contains(path + ": $.cases[0].words_file: file not found: " + (dir.path / "w.json").string()));
  }
  SECTION("syntax error") {
    const std::string path = dir.write("bad.json", "{\"defaults\": {\"seq_len\": 8,}}");
    CHECK_THROWS_AS(load_config(path), InputError);
    CHECK_THROWS_WITH(load_config(path), Contains(path + ": invalid JSON at byte 28"));
    CHECK_THROWS_WITH(read_json_file(path), Contains("line 1, column 28"));
  }
  SECTION("missing file and directory") {
    const std::string missing = (dir.path / "nope.json").string();
    CHECK_THROWS_WITH(load_config(missing), Contains(missing + ": cannot open file"));
    CHECK_THROWS_WITH(read_json_file(dir.path.string()), Contains("is a directory"));
  }
}

TEST_CASE("JsonObjectReader getters are strict", "[config]") {
  const auto j = nlohmann::json::parse(
      R"({"i": 3, "big": 18446744073709551615, "f": 2.5, "b": true, "s": "x", "a": [1, 2], "o": {"k": 1}})");
  JsonObjectReader r(j, "f.json", "$.top");
  CHECK(r.integer("i") == 3);
  CHECK(r.number("i") == 3.0);
  CHECK(r.number("f") == 2.5);
  CHECK(r.boolean("b") == true);
  CHECK(r.string("s") == "x");
  CHECK(r.choice("s", {"x", "y"}) == "x");
  CHECK(r.integer_array("a") == std::vector<int64_t>{1, 2});
  CHECK_FALSE(r.integer("absent").has_value());
  CHECK(r.where("i") == "f.json: $.top.i");
  CHECK_THROWS_WITH(r.integer("big"), Contains("f.json: $.top.big: integer 18446744073709551615 is out of range"));
  CHECK_THROWS_WITH(r.integer("f"), "f.json: $.top.f: expected integer, got number 2.5");
  CHECK_THROWS_WITH(r.string("b"), "f.json: $.top.b: expected string, got boolean true");
  CHECK_THROWS_WITH(r.choice("s", {"y", "z"}), "f.json: $.top.s: unknown s 'x' (expected one of: y, z)");
  CHECK_THROWS_WITH(r.raw("missing"), "f.json: $.top.missing: is required");
  CHECK_THROWS_WITH(r.finish(), Contains("f.json: $.top.o: unknown key 'o'"));
  auto o = r.object("o");
  REQUIRE(o);
  CHECK_THROWS_WITH(o->finish(), "f.json: $.top.o.k: unknown key 'k'");
  CHECK(o->integer("k") == 1);
  o->set_key_path("k", "$.elsewhere");
  CHECK(o->where("k") == "f.json: $.elsewhere");
  CHECK_NOTHROW(o->finish());
  CHECK_NOTHROW(r.finish());
}

TEST_CASE("model cases read layers and vocab and are self-attention", "[config]") {
  const auto cfg = parse(R"({"defaults": {"kind": "model", "seq_len": 64, "hq": 4, "hk": 2, "d": 64, "causal": true},
      "cases": [{"layout": "one", "layers": 12, "vocab": 500}, {"layout": "zero"}]})");
  REQUIRE(cfg.cases[0].model);
  CHECK(cfg.cases[0].model->layers == 12);
  CHECK(cfg.cases[0].model->vocab == 500);
  CHECK(cfg.cases[1].model->layers == 1);
  CHECK(cfg.cases[1].model->vocab == 1000);
  CHECK_FALSE(cfg.cases[0].decode);
  CHECK_THAT(parse_error(R"({"cases": [{"kind": "model", "seq_len": 8, "layers": 0}]})"),
             Contains("$.cases[0].layers: must be in [1, "));
  CHECK_THAT(parse_error(R"({"cases": [{"kind": "model", "lq": 8, "lk": 16}]})"),
             Contains("a model case is self-attention: Lq must equal Lk"));
  CHECK_THAT(parse_error(R"({"cases": [{"seq_len": 8, "vocab": 10}]})"),
             Contains("$.cases[0].vocab: is only used in model cases"));
  CHECK_THAT(parse_error(R"({"cases": [{"kind": "decode", "cache_len": 8, "layers": 2}]})"),
             Contains("$.cases[0].layers: is only used in model cases"));
  CHECK_THAT(parse_error(R"({"cases": [{"kind": "model", "seq_len": 8, "input": {"kind": "llm_like"}}]})"),
             Contains("$.cases[0].input: a model case draws its own N(0, 1) input"));
  CHECK_THAT(parse_error(R"({"cases": [{"kind": "model", "seq_len": 8, "input": {"stddev": 2}}]})"),
             Contains("$.cases[0].input: a model case draws its own N(0, 1) input"));
}

TEST_CASE("the method registry names each method once, with its kinds of case", "[config]") {
  // The names are the configs' strings and the tables' "method" cells.
  CHECK(enum_names(kMethodNames) == std::vector<std::string>{"tilemix", "flash_fp16", "torch_like", "cudnn_fp16",
                                                             "cudnn_fp8", "fp16_cache"});
  for (const Method m : enum_values(kMethodNames)) {
    INFO(to_string(m));
    CHECK_FALSE(case_kinds(m).empty());
    CHECK(std::string(method_description(m)).size() > 10);
    for (const CaseKind k : enum_values(kCaseKindNames)) {
      const std::vector<Method> of_kind = methods_for(k);
      CHECK(runs(m, k) == (std::count(of_kind.begin(), of_kind.end(), m) == 1));
    }
  }
  CHECK_FALSE(parse_enum(kMethodNames, "fa3"));
  CHECK_FALSE(parse_enum(kMethodNames, "reference"));

  CHECK(methods_for(CaseKind::prefill) == std::vector<Method>{Method::tilemix, Method::flash_fp16, Method::torch_like,
                                                              Method::cudnn_fp16, Method::cudnn_fp8});
  CHECK(methods_for(CaseKind::decode) == std::vector<Method>{Method::tilemix, Method::fp16_cache});
  CHECK(methods_for(CaseKind::model) == std::vector<Method>{Method::tilemix, Method::flash_fp16});
  CHECK(default_methods(CaseKind::prefill) == std::vector<Method>{Method::tilemix, Method::flash_fp16});
  CHECK(default_methods(CaseKind::decode) == std::vector<Method>{Method::tilemix, Method::fp16_cache});
  CHECK(default_methods(CaseKind::model) == std::vector<Method>{Method::tilemix, Method::flash_fp16});
  for (const Method m : enum_values(kMethodNames)) CHECK(is_routed(m) == (m == Method::tilemix));
}

TEST_CASE("a listed method must run every case of the config", "[config]") {
  const std::string decode_case = R"({"name": "dec", "kind": "decode", "cache_len": 64})";
  const std::string prefill_case = R"({"name": "pre", "seq_len": 64})";
  const std::string model_case = R"({"name": "mod", "kind": "model", "seq_len": 64})";
  const auto config = [](const std::string& cases, const std::string& methods) {
    return R"({"cases": [)" + cases + R"(], "methods": )" + methods + "}";
  };
  CHECK(parse_error(config(prefill_case, R"(["tilemix", "fp16_cache"])")) ==
        "test.json: $.methods[1]: method 'fp16_cache' runs decode cases only; case 'pre' ($.cases[0]) is a prefill "
        "case");
  CHECK(parse_error(config(decode_case, R"(["tilemix", "flash_fp16"])")) ==
        "test.json: $.methods[1]: method 'flash_fp16' runs prefill and model cases only; case 'dec' ($.cases[0]) is "
        "a decode case");
  CHECK(parse_error(config(decode_case, R"(["cudnn_fp8"])")) ==
        "test.json: $.methods[0]: method 'cudnn_fp8' runs prefill cases only; case 'dec' ($.cases[0]) is a decode "
        "case");
  CHECK(parse_error(config(model_case, R"(["torch_like"])")) ==
        "test.json: $.methods[0]: method 'torch_like' runs prefill cases only; case 'mod' ($.cases[0]) is a model "
        "case");
  // Every case counts: the first one a method cannot run is named, with its axis values.
  CHECK(parse_error(config(decode_case + ", " + prefill_case, R"(["fp16_cache"])")) ==
        "test.json: $.methods[0]: method 'fp16_cache' runs decode cases only; case 'pre' ($.cases[1]) is a prefill "
        "case");
  CHECK_THAT(parse_error(R"({"defaults": {"seq_len": 64}, "axes": {"d": [64, 128]}, "methods": ["fp16_cache"]})"),
             Contains("case 'test-0/d=64' ($.defaults) is a prefill case"));

  // A method that runs every kind of the config's cases is accepted, and the defaults fill in.
  CHECK(parse(config(decode_case + ", " + prefill_case, R"(["tilemix"])")).methods ==
        std::vector<Method>{Method::tilemix});
  const ExperimentConfig decode = parse(config(decode_case, "[]"));
  CHECK(case_kind(decode.cases[0]) == CaseKind::decode);
  CHECK(methods_to_run(decode, CaseKind::decode) == default_methods(CaseKind::decode));
  const ExperimentConfig model = parse(config(model_case, R"(["flash_fp16"])"));
  CHECK(case_kind(model.cases[0]) == CaseKind::model);
  CHECK(methods_to_run(model, CaseKind::model) == std::vector<Method>{Method::flash_fp16});
  CHECK(case_kind(parse(config(prefill_case, "[]")).cases[0]) == CaseKind::prefill);
}

TEST_CASE("every paper config loads, is named after its tables and says what it reproduces", "[config]") {
  const fs::path dir = fs::path(TILEMIX_SOURCE_DIR) / "configs/paper";
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    INFO(entry.path().string());
    const ExperimentConfig cfg = load_config(entry.path().string());
    REQUIRE_FALSE(cfg.cases.empty());
    // scripts/reproduce.sh writes <name>.json and the renderer finds a table's result by it.
    CHECK(cfg.name == entry.path().stem().string());
    CHECK(cfg.name.rfind("table", 0) == 0);
    CHECK(cfg.description.rfind("Paper table", 0) == 0);
    // tilemix-bench runs one kind of case per config.
    const CaseKind kind = case_kind(cfg.cases.front());
    for (const CaseSpec& spec : cfg.cases) CHECK(case_kind(spec) == kind);
    names.push_back(cfg.name);
  }
  std::sort(names.begin(), names.end());
  // One config per reproducible table of the paper (tables 2, 3, 5, 11-20 and 23).
  CHECK(names == std::vector<std::string>{"table02-11-prefill-llama3b", "table03-deviation", "table05-memory",
                                          "table12-13-prefill-qwen7b", "table14-prefill-vicuna7b",
                                          "table15-17-multilayer", "table18-vs-flash", "table19-accumulation",
                                          "table20-accumulation-direct", "table23-heavy-hitter"});
}

TEST_CASE("every shipped config and the README's example parse", "[config]") {
  const fs::path root = TILEMIX_SOURCE_DIR;
  int parsed = 0;
  for (const char* dir : {"configs/bench", "configs/bench/ab", "configs/bench/profile", "configs/check"}) {
    for (const auto& entry : fs::directory_iterator(root / dir)) {
      if (entry.path().extension() != ".json") continue;
      INFO(entry.path().string());
      const ExperimentConfig cfg = load_config(entry.path().string());
      CHECK_FALSE(cfg.cases.empty());
      ++parsed;
    }
  }
  CHECK(parsed >= 10);

  // The README's config example: the ```json block that follows "## Config format".
  std::ifstream readme(root / "README.md");
  REQUIRE(readme);
  const std::string text((std::istreambuf_iterator<char>(readme)), std::istreambuf_iterator<char>());
  const size_t section = text.find("## Config format");
  REQUIRE(section != std::string::npos);
  const size_t begin = text.find("```json\n", section);
  REQUIRE(begin != std::string::npos);
  const size_t end = text.find("```", begin + 8);
  REQUIRE(end != std::string::npos);
  const ExperimentConfig example = parse(text.substr(begin + 8, end - begin - 8));
  CHECK(example.timing.warmup_seconds == 0.02);
  CHECK(example.cases.size() == 4);  // two cases x two head dimensions
}

TEST_CASE("sizes whose byte counts pass 64 bits are input errors naming the sizes", "[config]") {
  // 2^20 sequences of 2^31 - 1 tokens, 65536 heads of 128 channels: 2^77 bytes of doubles.
  CHECK(parse_error(R"({"cases": [{"batch": 1048576, "seq_len": 2147483647, "hq": 65536, "hk": 65536}]})") ==
        "test.json: $.cases[0]: Q [total_q, hq, d] in doubles is 2251799812636672 (total_q) x 65536 (hq) x 128 (d) x "
        "8 (bytes), more than 9223372036854775807");
  // The same tokens fit with one head of 64 channels, but not a model's logits over 2^20 words.
  CHECK(parse_error(R"({"cases": [{"kind": "model", "batch": 1048576, "seq_len": 2147483647, "hq": 1, "hk": 1,
                                   "d": 64, "vocab": 1048576}]})") ==
        "test.json: $.cases[0].vocab: the logits [tokens, vocab] in floats is 2251799812636672 (tokens) x 1048576 "
        "(vocab) x 4 (bytes), more than 9223372036854775807");
}

TEST_CASE("a config expands to at most 100000 cases; the error names the axes and the count", "[config]") {
  std::string values = "[0";
  for (int i = 1; i < 1000; ++i) values += "," + std::to_string(i);
  values += "]";
  // 1000^4 = 10^12 cases: refused before any case is built.
  CHECK(parse_error(R"({"defaults": {"seq_len": 8}, "axes": {"seed": )" + values + R"(, "hq": )" + values +
                    R"(, "hk": )" + values + R"(, "block_m": )" + values + "}}") ==
        "test.json: $.axes: the number of cases is 1 (cases) x 1000 ($.axes.seed) x 1000 ($.axes.hq) x 1000 "
        "($.axes.hk) x 1000 ($.axes.block_m) = 1000000000000, at most 100000");
  std::string list = "0";
  for (int i = 1; i < 1000; ++i) list += "," + std::to_string(i);
  CHECK_THAT(parse_error(R"({"cases": [{"seq_len": 8}, {"seq_len": 16}]})", {"seed=" + list, "input.seed=" + list}),
             Contains("test.json: $.axes: the number of cases is 2 (cases) x 1000 (--set seed) x 1000 (--set "
                      "input.seed) = 2000000, at most 100000"));
  // Without axes too.
  std::string cases = "[{}";
  for (int i = 1; i <= 100000; ++i) cases += ",{}";
  CHECK(parse_error(R"({"defaults": {"seq_len": 8}, "cases": )" + cases + "]}") ==
        "test.json: $.cases: the number of cases is 100001 (cases) = 100001, at most 100000");
  CHECK(parse(R"({"defaults": {"seq_len": 8}, "axes": {"seed": )" + values + "}}").cases.size() == 1000);
}

TEST_CASE("the expanded cases hold at most 2^22 sequences and names of at most 1024 bytes", "[config]") {
  // Each case keeps its lengths: five cases of 2^20 sequences are more than 2^22.
  CHECK(parse_error(R"({"defaults": {"seq_len": 1, "batch": 1048576}, "axes": {"seed": [0, 1, 2, 3, 4]}})") ==
        "test.json: $.defaults: the number of sequences of the cases up to this one is 4194304 + 1048576 = 5242880, "
        "at most 4194304");
  CHECK(parse(R"({"defaults": {"seq_len": 1, "batch": 1048576}, "axes": {"seed": [0, 1, 2, 3]}})").cases.size() == 4);
  const std::string long_name(1020, 'n');
  CHECK(parse(R"({"cases": [{"seq_len": 8, "name": ")" + long_name + R"("}]})").cases[0].name == long_name);
  CHECK_THAT(parse_error(R"({"cases": [{"seq_len": 8, "name": ")" + long_name + R"("}], "axes": {"seed": [1]}})"),
             Contains("test.json: $.cases[0]: case name 'nnnn") && Contains("...' is 1027 bytes long, at most 1024"));
}

TEST_CASE("axes of lengths replace the lengths of the defaults and of the case", "[config]") {
  const auto cfg = parse(R"({"defaults": {"seqlens_q": [1, 2, 3], "seqlens_k": [1, 2, 3]},
                            "cases": [{}, {"lq": 4, "lk": 5, "batch": 2}],
                            "axes": {"seq_len": [8, 16], "batch": [1, 3]}})");
  REQUIRE(cfg.cases.size() == 8);
  CHECK(cfg.cases[0].shape.cu_seqlens_q == std::vector<int64_t>{0, 8});
  CHECK(cfg.cases[3].shape.cu_seqlens_k == std::vector<int64_t>{0, 16, 32, 48});
  CHECK(cfg.cases[5].shape.cu_seqlens_q == std::vector<int64_t>{0, 8, 16, 24});
  CHECK_FALSE(cfg.cases[5].json.contains("lq"));
  CHECK(cfg.cases[5].json["batch"] == 3);
  // Varlen axes drop the batch of the layers below them.
  const auto varlen = parse(R"({"defaults": {"seq_len": 8, "batch": 2},
                               "axes": {"seqlens_q": [[1, 2, 3]], "seqlens_k": [[4, 5, 6]]}})");
  CHECK(varlen.cases[0].shape.cu_seqlens_k == std::vector<int64_t>{0, 4, 9, 15});
  CHECK_FALSE(varlen.cases[0].json.contains("batch"));
}

TEST_CASE("config files that are not regular files, or too large, are refused before they are read", "[config]") {
  TempDir dir;
  // A sparse file: 300 MiB long, no disk blocks, nothing read.
  const std::string big = dir.write("big.json", "{}");
  fs::resize_file(big, std::uintmax_t{300} << 20);
  CHECK_THROWS_WITH(load_config(big),
                    big + ": is 300.0 MiB (314572800 bytes), more than the 256.0 MiB a JSON file may hold");
  const std::string fifo = (dir.path / "fifo.json").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(load_config(fifo),
                    fifo + ": is not a regular file (a device, FIFO or socket), expected a JSON file");
  CHECK_THROWS_WITH(load_config("/dev/zero"), Contains("/dev/zero: is not a regular file"));
  CHECK_THROWS_WITH(load_config(dir.path.string()), dir.path.string() + ": is a directory, expected a JSON file");
}

TEST_CASE("layout adaptive routes prefill cases, and compare_with may name it", "[config]") {
  const auto cfg = parse(R"({"cases": [{"seq_len": 256, "layout": "adaptive", "ratio": 0.5,
                                        "compare_with": {"layout": "adaptive", "ratio": 0.25}}]})");
  CHECK(cfg.cases[0].routing.layout == LayoutKind::adaptive);
  CHECK(cfg.cases[0].compare_with->routing.layout == LayoutKind::adaptive);
  CHECK_THAT(parse_error(R"({"cases": [{"seq_len": 256, "layout": "adaptive"}]})"),
             Contains("ratio is required for layout adaptive"));
  // A decode case routes a tile of new tokens; a model's layers make their own Q and K.
  CHECK_THAT(parse_error(R"({"cases": [{"kind": "decode", "cache_len": 64, "layout": "adaptive", "ratio": 0.5}]})"),
             Contains("test.json: $.cases[0].layout: adaptive routes prefill cases from their Q and K; a decode case"));
  CHECK_THAT(parse_error(R"({"cases": [{"kind": "model", "seq_len": 64, "layout": "adaptive", "ratio": 0.5}]})"),
             Contains("test.json: $.cases[0].layout: adaptive routes prefill cases from their Q and K; a model case"));
}

TEST_CASE("pv: a prefill and model numerics key of the routed kernel, FP8 with fp32 accumulation and 64-key tiles",
          "[config]") {
  const auto cfg = parse(R"({"defaults": {"seq_len": 256, "layout": "one"},
                            "cases": [{"name": "plain"}, {"name": "fp8", "pv": "fp8"},
                                      {"name": "model", "kind": "model", "pv": "routed"},
                                      {"name": "t", "pv": "fp8", "compare_with": {"pv": "fp16"}},
                                      {"name": "flash", "pv": "routed", "compare_with": {"method": "flash_fp16"}}]})");
  REQUIRE(cfg.cases.size() == 5);
  CHECK(cfg.cases[0].numerics.pv == PvPrecision::fp16);
  CHECK(cfg.cases[1].numerics.pv == PvPrecision::fp8);
  CHECK(cfg.cases[2].numerics.pv == PvPrecision::routed);
  REQUIRE(cfg.cases[3].compare_with);
  CHECK(cfg.cases[3].compare_with->numerics.pv == PvPrecision::fp16);
  CHECK(cfg.cases[3].compare_with->label == "tilemix pv=fp16");
  // A baseline does not inherit the routed kernel's P V precision.
  CHECK(cfg.cases[4].compare_with->numerics.pv == PvPrecision::fp16);
  const auto axis = parse(R"({"defaults": {"seq_len": 64}})", {"pv=fp16,fp8,routed"});
  REQUIRE(axis.cases.size() == 3);
  CHECK(axis.cases[2].numerics.pv == PvPrecision::routed);

  CHECK_THAT(parse_error(R"({"defaults": {"seq_len": 64, "pv": "int8"}})"), Contains("$.defaults.pv"));
  CHECK_THAT(parse_error(R"({"defaults": {"seq_len": 64, "pv": "fp8", "accum": "fp16"}})"),
             Contains("$.defaults.pv: is fp8: FP8 P V accumulates in FP32"));
  CHECK_THAT(parse_error(R"({"defaults": {"seq_len": 64, "pv": "routed", "block_n": 32}})"),
             Contains("block_n 64 (block_n is 32)"));
  CHECK_THAT(parse_error(R"({"cases": [{"kind": "decode", "cache_len": 64, "pv": "fp8"}]})"),
             Contains("$.cases[0].pv: is a prefill key"));
  CHECK_THAT(parse_error(R"({"defaults": {"seq_len": 64, "pv": "fp8", "mainloop": "wgmma"}})"),
             Contains("$.defaults.mainloop: is wgmma: FP8 P V (pv fp8) runs on the warp_specialized mainloop"));
  CHECK_THAT(parse_error(R"({"defaults": {"seq_len": 64, "pv": "routed", "mainloop": "mma_sync"}})"),
             Contains("$.defaults.mainloop: is mma_sync: FP8 P V (pv routed) runs on the warp_specialized mainloop"));
  CHECK_THAT(parse_error(R"({"cases": [{"seq_len": 64, "compare_with": {"method": "flash_fp16", "pv": "fp8"}}]})"),
             Contains("has no meaning for flash_fp16"));
}
