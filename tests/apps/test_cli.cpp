// The apps as a user runs them: exit codes and messages for bad input (SPEC 9), the plan command,
// and a passing CPU check. Each test runs the real executable in a shell.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/inputs/inputs.hpp"
#include "core/inputs/npy.hpp"
#include "core/problem.hpp"
#include "tests/apps/run_command.hpp"

namespace fs = std::filesystem;
using tilemix::testing::run;
using tilemix::testing::Run;

namespace {

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("tilemix-cli-" + name + "-" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

std::string write_config(const fs::path& dir, const nlohmann::json& j, const std::string& name = "cfg.json") {
  const fs::path p = dir / name;
  std::ofstream(p) << j.dump(2);
  return p.string();
}

// A small valid case; tests break one field at a time.
nlohmann::json valid_config() {
  return {{"name", "t"},
          {"defaults",
           {{"batch", 1}, {"seq_len", 100}, {"hq", 2}, {"hk", 1}, {"d", 64}, {"causal", true},
            {"tolerance", {{"emulator_vs_reference", {{"rel_l2", 0.05}}}}}}},
          {"cases", {{{"layout", "band"}, {"ratio", 0.5}}}}};
}

Run check(const std::string& config_path) {
  return run(std::string(TILEMIX_CHECK_EXE) + " --device cpu --config '" + config_path + "'");
}

}  // namespace

TEST_CASE("tilemix-check passes a small valid config on the CPU", "[cli]") {
  const auto dir = temp_dir("valid");
  const Run r = check(write_config(dir, valid_config()));
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(r.out.find("1 passed, 0 failed") != std::string::npos);
}

TEST_CASE("tilemix-check exits 1 when a case leaves its tolerance", "[cli]") {
  const auto dir = temp_dir("fail");
  auto j = valid_config();
  j["cases"][0]["layout"] = "one";
  j["defaults"]["tolerance"]["emulator_vs_reference"]["rel_l2"] = 1e-9;  // no INT8 run is this close
  const Run r = check(write_config(dir, j));
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK(r.out.find("FAIL") != std::string::npos);
}

TEST_CASE("every bad-input class exits 2 naming the field or file", "[cli]") {
  const auto dir = temp_dir("bad");
  struct Bad {
    const char* what;
    std::function<void(nlohmann::json&)> edit;
    const char* expect;  // substring of the message
  };
  const std::string qpath = (dir / "q.npy").string();
  const std::vector<Bad> cases = {
      {"unknown key", [](auto& j) { j["cases"][0]["hqq"] = 3; }, "hqq"},
      {"wrong type", [](auto& j) { j["defaults"]["hq"] = "eight"; }, "hq"},
      {"unknown layout", [](auto& j) { j["cases"][0]["layout"] = "bandd"; }, "bandd"},
      {"ratio above 1", [](auto& j) { j["cases"][0]["ratio"] = 1.5; }, "ratio"},
      {"ratio below 0", [](auto& j) { j["cases"][0]["ratio"] = -0.1; }, "ratio"},
      {"hq % hk", [](auto& j) { j["defaults"]["hk"] = 3; }, "hk"},
      {"unsupported d", [](auto& j) { j["defaults"]["d"] = 96; }, "d"},
      {"negative length", [](auto& j) { j["defaults"]["seq_len"] = -5; }, "seq_len"},
      {"inconsistent varlen",
       [](auto& j) {
         j["defaults"].erase("seq_len");
         j["defaults"].erase("batch");
         j["cases"][0]["seqlens_q"] = {10, 20};
         j["cases"][0]["seqlens_k"] = {10};
       },
       "seqlens"},
      {"Tmask > 64", [](auto& j) { j["defaults"]["seq_len"] = 10000; j["cases"][0]["group"] = 1; }, "Tmask"},
      {"unknown state", [](auto& j) { j["cases"][0]["state"] = "bf16"; }, "state"},
      {"model key in a prefill case", [](auto& j) { j["cases"][0]["layers"] = 2; }, "layers"},
      {"model case with Lq != Lk",
       [](auto& j) {
         j["defaults"].erase("seq_len");
         j["cases"][0]["kind"] = "model";
         j["cases"][0]["lq"] = 50;
         j["cases"][0]["lk"] = 100;
       },
       "Lq must equal Lk"},
      {"model case in tilemix-check", [](auto& j) { j["cases"][0]["kind"] = "model"; }, "tilemix-bench runs those"},
      {"missing npy",
       [&](auto& j) {
         j["cases"][0]["input"] = {{"kind", "npy"}, {"q", qpath + ".missing"}, {"k", qpath}, {"v", qpath}};
       },
       "q.npy.missing"},
  };
  for (const Bad& b : cases) {
    DYNAMIC_SECTION(b.what) {
      auto j = valid_config();
      b.edit(j);
      const Run r = check(write_config(dir, j));
      INFO(r.out);
      CHECK(r.code == 2);
      CHECK(r.out.find(b.expect) != std::string::npos);
    }
  }
}

TEST_CASE("bad npy inputs exit 2 naming the file", "[cli]") {
  using tilemix::NpyDtype;
  const auto dir = temp_dir("npy");
  // Case: B=1, L=100, hq=2, hk=1, d=64 -> q [100,2,64], k/v [100,1,64].
  std::vector<float> q(100 * 2 * 64, 0.25f), kv(100 * 64, 0.5f);
  const std::string qp = (dir / "q.npy").string(), kp = (dir / "k.npy").string(), vp = (dir / "v.npy").string();
  tilemix::write_npy(qp, NpyDtype::f32, {100, 2, 64}, q.data());
  tilemix::write_npy(kp, NpyDtype::f32, {100, 1, 64}, kv.data());
  tilemix::write_npy(vp, NpyDtype::f32, {100, 1, 64}, kv.data());
  auto with_inputs = [&](const std::string& q_, const std::string& k_) {
    auto j = valid_config();
    j["cases"][0]["input"] = {{"kind", "npy"}, {"q", q_}, {"k", k_}, {"v", vp}};
    return write_config(dir, j);
  };
  SECTION("valid files pass") {
    const Run r = check(with_inputs(qp, kp));
    INFO(r.out);
    CHECK(r.code == 0);
  }
  SECTION("mis-shaped") {
    const Run r = check(with_inputs(kp, kp));  // k's shape where q is expected
    INFO(r.out);
    CHECK(r.code == 2);
    CHECK(r.out.find("k.npy") != std::string::npos);
  }
  SECTION("wrong dtype") {
    std::vector<int8_t> bytes(100 * 2 * 64, 1);
    const std::string bad = (dir / "q_int8.npy").string();
    tilemix::write_npy(bad, NpyDtype::i8, {100, 2, 64}, bytes.data());
    const Run r = check(with_inputs(bad, kp));
    INFO(r.out);
    CHECK(r.code == 2);
    CHECK(r.out.find("q_int8.npy") != std::string::npos);
  }
  SECTION("short file") {
    const std::string cut = (dir / "q_short.npy").string();
    fs::copy_file(qp, cut, fs::copy_options::overwrite_existing);
    fs::resize_file(cut, fs::file_size(cut) - 100);
    const Run r = check(with_inputs(cut, kp));
    INFO(r.out);
    CHECK(r.code == 2);
    CHECK(r.out.find("q_short.npy") != std::string::npos);
  }
  SECTION("NaN in an input, then allowed") {
    std::vector<float> qn = q;
    qn[777] = std::nanf("");
    const std::string nanp = (dir / "q_nan.npy").string();
    tilemix::write_npy(nanp, NpyDtype::f32, {100, 2, 64}, qn.data());
    const Run r = check(with_inputs(nanp, kp));
    INFO(r.out);
    CHECK(r.code == 2);
    CHECK(r.out.find("q_nan.npy") != std::string::npos);
    auto j = valid_config();
    j["cases"][0]["input"] = {{"kind", "npy"}, {"q", nanp}, {"k", kp}, {"v", vp}, {"allow_nonfinite", true}};
    const Run allowed = check(write_config(dir, j, "allowed.json"));
    INFO(allowed.out);
    CHECK(allowed.code == 1);  // runs, and NaN never passes
  }
}

TEST_CASE("missing config file and bad JSON exit 2 naming the file", "[cli]") {
  const auto dir = temp_dir("json");
  const Run missing = check((dir / "nope.json").string());
  CHECK(missing.code == 2);
  CHECK(missing.out.find("nope.json") != std::string::npos);
  const fs::path broken = dir / "broken.json";
  std::ofstream(broken) << "{\"name\": \"x\", ";
  const Run syntax = check(broken.string());
  CHECK(syntax.code == 2);
  CHECK(syntax.out.find("broken.json") != std::string::npos);
}

TEST_CASE("tilemix-bench plan prints g, coverage and the map, and JSON with the documented keys", "[cli]") {
  const std::string exe = TILEMIX_BENCH_EXE;
  const Run text = run(exe + " plan --lq 8192 --lk 8192 --layout band --ratio 0.5 --causal");
  INFO(text.out);
  REQUIRE(text.code == 0);
  CHECK(text.out.find("g=2") != std::string::npos);
  const Run js = run(exe + " plan --lq 8192 --lk 8192 --layout band --ratio 0.5 --causal --json");
  REQUIRE(js.code == 0);
  const auto j = nlohmann::json::parse(js.out);
  for (const char* key : {"lq", "lk", "causal", "block_m", "block_n", "group", "tmask", "tm", "layout", "ratio",
                          "params", "coverage", "words"}) {
    CHECK(j.contains(key));
  }
  CHECK(j["group"] == 2);
  CHECK(j["tmask"] == 64);
  CHECK(j["tm"] == 64);
  CHECK(j["words"].size() == 64);
  CHECK(std::abs(j["coverage"]["groups"].get<double>() - 0.5) < 0.05);
  const Run bad = run(exe + " plan --lq 8192 --lk 8192 --layout band --ratio 0.5 --group 1");
  CHECK(bad.code == 2);
  CHECK(bad.out.find("Tmask") != std::string::npos);
  const Run badlayout = run(exe + " plan --lq 100 --lk 100 --layout nope");
  CHECK(badlayout.code == 2);
}

TEST_CASE("tilemix-bench plan --layout adaptive routes from a config's input or .npy files", "[cli]") {
  const std::string exe = TILEMIX_BENCH_EXE;
  const auto dir = temp_dir("plan-adaptive");
  const std::string geometry = " plan --lq 1000 --lk 1000 --causal --layout adaptive --ratio 0.5 --hq 4 --hk 2 --d 64";
  const Run missing = run(exe + geometry);
  CHECK(missing.code == 2);
  CHECK(missing.out.find("--input: layout adaptive routes from Q and K: give --input CONFIG") != std::string::npos);
  CHECK(run(exe + geometry + " --q '" + (dir / "q.npy").string() + "'").out.find("--k: is required with --q") !=
        std::string::npos);

  const nlohmann::json input = {{"kind", "llm_like"}, {"seed", 3}, {"k_channel_bias", 8}};
  const std::string cfg = write_config(dir, {{"defaults", {{"seq_len", 64}, {"input", input}}}});
  const Run static_layout = run(exe + " plan --lq 1000 --lk 1000 --layout band --ratio 0.5 --input '" + cfg + "'");
  CHECK(static_layout.code == 2);
  CHECK(static_layout.out.find("--input: is only used with a layout that routes from the data") != std::string::npos);

  const std::string words = (dir / "words.json").string();
  const Run text = run(exe + geometry + " --input '" + cfg + "' --dump '" + words + "'");
  INFO(text.out);
  REQUIRE(text.code == 0);
  CHECK(text.out.find("params    score=share*absmax select=sequence sinks=1") != std::string::npos);
  CHECK(text.out.find("coverage  groups 0.50") != std::string::npos);
  const std::string map = text.out.substr(text.out.find("\n\n") + 2);
  CHECK(std::count(map.begin(), map.end(), '\n') == 8);  // Tm rows
  CHECK(map.find('8') != std::string::npos);
  CHECK(map.find('F') != std::string::npos);
  std::ifstream words_in(words);
  const auto dumped = nlohmann::json::parse(words_in);
  CHECK(dumped["layout"] == "adaptive");
  REQUIRE(dumped["words"].size() == 2);  // KV heads
  CHECK(dumped["words"][0].size() == 8);

  // The dump is a words file: layout file draws the same map.
  const Run again = run(exe + " plan --lq 1000 --lk 1000 --causal --layout file --hq 4 --hk 2 --words-file '" + words +
                        "'");
  REQUIRE(again.code == 0);
  CHECK(again.out.substr(again.out.find("\n\n") + 2) == map);

  // The same Q and K as .npy files route the same.
  tilemix::AttentionShape shape;
  shape.hq = 4;
  shape.hk = 2;
  shape.d = 64;
  shape.causal = true;
  shape.cu_seqlens_q = shape.cu_seqlens_k = {0, 1000};
  tilemix::validate(shape);
  tilemix::InputSpec spec;
  spec.kind = tilemix::InputKind::llm_like;
  spec.seed = 3;
  spec.k_channel_bias = 8.0f;
  const tilemix::AttentionInputs in = tilemix::make_inputs(shape, spec);
  const std::string qp = (dir / "q.npy").string(), kp = (dir / "k.npy").string();
  tilemix::write_npy(qp, tilemix::NpyDtype::f16, {1000, 4, 64}, in.q.data());
  tilemix::write_npy(kp, tilemix::NpyDtype::f16, {1000, 2, 64}, in.k.data());
  const Run npy = run(exe + geometry + " --q '" + qp + "' --k '" + kp + "'");
  REQUIRE(npy.code == 0);
  CHECK(npy.out.substr(npy.out.find("\n\n") + 2) == map);
  const Run wrong_heads = run(exe + " plan --lq 1000 --lk 1000 --causal --layout adaptive --ratio 0.5 --hq 2 --hk 2 "
                                    "--d 64 --q '" + qp + "' --k '" + kp + "'");
  CHECK(wrong_heads.code == 2);
  CHECK(wrong_heads.out.find(qp) != std::string::npos);
}

TEST_CASE("tilemix-check and tilemix-bench run layout adaptive on the CPU emulator", "[cli]") {
  const auto dir = temp_dir("adaptive");
  auto j = valid_config();
  j["defaults"]["input"] = {{"kind", "llm_like"}, {"seed", 4}};
  j["cases"] = {{{"name", "adaptive"}, {"layout", "adaptive"}, {"ratio", 0.5}}};
  const std::string cfg = write_config(dir, j);
  const Run checked = check(cfg);
  INFO(checked.out);
  CHECK(checked.code == 0);
  CHECK(checked.out.find("1 passed, 0 failed") != std::string::npos);
  const Run bench = run(std::string(TILEMIX_BENCH_EXE) + " --device cpu --config '" + cfg + "'");
  INFO(bench.out);
  REQUIRE(bench.code == 0);
  CHECK(bench.out.find("score=share*absmax select=sequence sinks=1") != std::string::npos);
}

TEST_CASE("tilemix-bench without a GPU says so and runs the emulator; --dump writes re-checkable files", "[cli]") {
  const auto dir = temp_dir("bench");
  auto j = valid_config();
  j["cases"] = {{{"name", "mixed"}, {"layout", "sptrans"}, {"ratio", 0.5}}};
  const std::string cfg = write_config(dir, j);
  const Run r = run(std::string(TILEMIX_BENCH_EXE) + " --device cpu --config '" + cfg + "' --dump '" +
                    (dir / "dump").string() + "'");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("emulator") != std::string::npos);
  for (const char* f : {"mixed_q.npy", "mixed_k.npy", "mixed_v.npy", "mixed_o.npy", "mixed_o_ref.npy",
                        "mixed_meta.json"}) {
    CHECK(fs::exists(dir / "dump" / f));
  }
  std::ifstream meta(dir / "dump" / "mixed_meta.json");
  const auto m = nlohmann::json::parse(meta);
  for (const char* key : {"layout", "ratio", "causal", "hq", "hk", "d", "cu_seqlens_q", "cu_seqlens_k",
                          "softmax_scale", "block_m", "block_n", "group", "state", "accum", "smooth_k", "words"}) {
    CHECK(m.contains(key));
  }
  CHECK(m["words"].size() == 1);  // one KV head
}

TEST_CASE("tilemix-bench refuses a method that does not run the config's cases", "[cli]") {
  const auto dir = temp_dir("methods");
  const std::string bench = std::string(TILEMIX_BENCH_EXE) + " --device cpu --config '";
  auto prefill = valid_config();
  prefill["methods"] = nlohmann::json::array({"fp16_cache"});
  const Run r = run(bench + write_config(dir, prefill, "prefill.json") + "'");
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK(r.out.find("prefill.json: $.methods[0]: method 'fp16_cache' runs decode cases only; case 't-0' "
                   "($.cases[0]) is a prefill case") != std::string::npos);
  CHECK(r.out.find("emulator") == std::string::npos);  // nothing ran

  const nlohmann::json decode = {{"name", "d"},
                                 {"defaults", {{"kind", "decode"}, {"cache_len", 64}}},
                                 {"methods", nlohmann::json::array({"tilemix", "flash_fp16"})}};
  const Run d = run(bench + write_config(dir, decode, "decode.json") + "'");
  INFO(d.out);
  CHECK(d.code == 2);
  CHECK(d.out.find("decode.json: $.methods[1]: method 'flash_fp16' runs prefill and model cases only; case 'd-0' "
                   "($.defaults) is a decode case") != std::string::npos);
}

TEST_CASE("tilemix-bench --timeline needs decode cases on a GPU", "[cli]") {
  const auto dir = temp_dir("timeline");
  const std::string prefill = write_config(dir, valid_config());
  const Run r = run(std::string(TILEMIX_BENCH_EXE) + " --device cpu --config '" + prefill + "' --timeline '" +
                    (dir / "tl").string() + "'");
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK(r.out.find("--timeline") != std::string::npos);
  CHECK(r.out.find("decode") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "tl"));
}

TEST_CASE("tilemix-bench runs model cases on the CPU: deviations grow with INT8 coverage", "[cli]") {
  const auto dir = temp_dir("model");
  const nlohmann::json config = {
      {"name", "tiny-model"},
      {"defaults",
       {{"kind", "model"}, {"batch", 1}, {"seq_len", 192}, {"hq", 4}, {"hk", 2}, {"d", 64}, {"causal", true},
        {"vocab", 64}, {"layers", 3}}},
      {"cases", {{{"name", "one"}, {"layout", "one"}}, {{"name", "zero"}, {"layout", "zero"}}}}};
  const std::string out = (dir / "model.json").string();
  const Run r = run(std::string(TILEMIX_BENCH_EXE) + " --device cpu --format md --config '" +
                    write_config(dir, config) + "' --out '" + out + "'");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const nlohmann::json result = nlohmann::json::parse(std::ifstream(out));
  std::map<std::string, double> dev;  // method or layout -> max |logit deviation|
  for (const auto& row : result.at("rows")) {
    REQUIRE(row.at("status") == "ok");
    CHECK(row.at("layers") == 3);
    CHECK(row.at("reference") == "exact");
    const std::string key = row.at("method") == "tilemix" ? row.at("layout").get<std::string>()
                                                            : row.at("method").get<std::string>();
    dev[key] = row.at("max_abs_dev").get<double>();
    CHECK(row.at("max_abs_logit_ref").get<double>() > 0.5);
  }
  REQUIRE(dev.size() == 4);
  CHECK(dev.at("exact") == 0.0);
  CHECK(dev.at("flash_fp16") > 0.0);
  // The same FP16 path on the same tiles as flash_fp16; all-INT8 scores deviate several times more.
  CHECK(dev.at("zero") == dev.at("flash_fp16"));
  CHECK(dev.at("one") > 3.0 * dev.at("flash_fp16"));
}

TEST_CASE("tilemix-bench compare_with on the CPU: each row's deviation from the run it names", "[cli]") {
  const auto dir = temp_dir("compare");
  const nlohmann::json config = {
      {"name", "cmp"},
      {"defaults",
       {{"batch", 1}, {"seq_len", 300}, {"hq", 4}, {"hk", 2}, {"d", 64}, {"causal", true},
        {"input", {{"kind", "llm_like"}, {"seed", 3}}}}},
      {"cases",
       {{{"name", "zero-vs-flash"}, {"layout", "zero"}, {"compare_with", {{"method", "flash_fp16"}}}},
        {{"name", "one-vs-flash"}, {"layout", "one"}, {"compare_with", {{"method", "flash_fp16"}}}},
        {{"name", "one-vs-zero"}, {"layout", "one"}, {"compare_with", {{"layout", "zero"}}}},
        {{"name", "one-vs-torch"}, {"layout", "one"}, {"compare_with", {{"method", "torch_like"}}}},
        {{"name", "band-fp16acc"}, {"layout", "band"}, {"ratio", 0.5}, {"accum", "fp16"},
         {"compare_with", {{"accum", "fp32"}}}},
        {{"name", "band-plain"}, {"layout", "band"}, {"ratio", 0.5}}}}};
  const std::string out = (dir / "cmp.json").string();
  const Run r = run(std::string(TILEMIX_BENCH_EXE) + " --device cpu --format md --config '" +
                    write_config(dir, config) + "' --out '" + out + "'");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("| compared with |") != std::string::npos);
  const nlohmann::json result = nlohmann::json::parse(std::ifstream(out));
  std::map<std::string, nlohmann::json> rows;
  for (const auto& row : result.at("rows")) rows[row.at("case").get<std::string>()] = row;
  REQUIRE(rows.size() == 6);
  const auto mean = [&](const std::string& name) { return rows.at(name).at("mean_abs_vs_compared").get<double>(); };

  // flash_fp16's CPU stand-in is the emulator's all-FP16 route: zero matches it exactly, and one
  // differs from it as from tilemix zero.
  CHECK(rows.at("zero-vs-flash").at("compared_with") == "flash_fp16 (cpu: emulator, all fp16)");
  CHECK(rows.at("zero-vs-flash").at("max_abs_vs_compared").get<double>() == 0.0);
  CHECK(rows.at("one-vs-zero").at("compared_with") == "tilemix layout=zero");
  CHECK(mean("one-vs-flash") > 0.0);
  CHECK(mean("one-vs-flash") == mean("one-vs-zero"));
  // torch_like's stand-in is the exact output rounded to FP16: all-INT8's deviation from it is
  // within an FP16 rounding of its deviation from the exact reference.
  CHECK(rows.at("one-vs-torch").at("compared_with") == "torch_like (cpu: exact, rounded to fp16)");
  CHECK(rows.at("one-vs-torch").at("max_abs_vs_compared").get<double>() ==
        Approx(rows.at("one-vs-torch").at("max_abs_vs_ref").get<double>()).epsilon(0.01));
  // FP16 against FP32 accumulation of the same routing: small, but not zero.
  CHECK(mean("band-fp16acc") > 0.0);
  CHECK(mean("band-fp16acc") < 0.1 * mean("one-vs-zero"));
  // A case without compare_with leaves the comparison's cells empty.
  CHECK(rows.at("band-plain").at("compared_with").is_null());

  // Without compare_with in the config the table keeps its own columns.
  auto plain = config;
  plain["cases"] = {{{"name", "band"}, {"layout", "band"}, {"ratio", 0.5}}};
  const std::string plain_out = (dir / "plain.json").string();
  const Run p = run(std::string(TILEMIX_BENCH_EXE) + " --device cpu --config '" +
                    write_config(dir, plain, "plain.json") + "' --out '" + plain_out + "'");
  INFO(p.out);
  REQUIRE(p.code == 0);
  CHECK_FALSE(nlohmann::json::parse(std::ifstream(plain_out)).at("rows").at(0).contains("compared_with"));
}

TEST_CASE("tilemix-bench and tilemix-check take smooth_k on the CPU", "[cli]") {
  const auto dir = temp_dir("smooth");
  const nlohmann::json config = {
      {"name", "smooth"},
      {"defaults",
       {{"batch", 1}, {"seq_len", 300}, {"hq", 4}, {"hk", 2}, {"d", 64}, {"causal", true}, {"layout", "one"},
        // The sink key's block keeps its wide scale either way (docs/config.md): without it the
        // offsets are the INT8 path's largest error at this length.
        {"input", {{"kind", "llm_like"}, {"seed", 5}, {"outlier_scale", 1}, {"sink_scale", 1}, {"k_channel_bias", 8}}},
        {"tolerance", {{"emulator_vs_reference", {{"rel_l2", 0.05}}}}}}},
      {"cases",
       {{{"name", "plain"}},
        {{"name", "smoothed"}, {"smooth_k", true}, {"compare_with", {{"smooth_k", false}}}},
        {{"name", "smoothed-vs-flash"}, {"smooth_k", true}, {"compare_with", {{"method", "flash_fp16"}}}}}}};
  const std::string cfg = write_config(dir, config);
  const std::string out = (dir / "bench.json").string();
  const Run r = run(std::string(TILEMIX_BENCH_EXE) + " --device cpu --config '" + cfg + "' --out '" + out + "'");
  INFO(r.out);
  REQUIRE(r.code == 0);
  std::map<std::string, nlohmann::json> rows;
  const nlohmann::json result = nlohmann::json::parse(std::ifstream(out));
  for (const auto& row : result.at("rows")) rows[row.at("case").get<std::string>()] = row;
  REQUIRE(rows.size() == 3);
  CHECK(rows.at("plain").at("smooth_k") == false);
  CHECK(rows.at("smoothed").at("smooth_k") == true);
  // The keys' offsets cost the unsmoothed INT8 path accuracy that smoothing recovers; the run
  // compared with is the same routing without smoothing, so it differs by about that much.
  const double plain_error = rows.at("plain").at("rel_l2_vs_ref"), smooth_error = rows.at("smoothed").at("rel_l2_vs_ref");
  CHECK(smooth_error < 0.75 * plain_error);
  CHECK(rows.at("smoothed").at("compared_with") == "tilemix smooth_k=false");
  CHECK(rows.at("smoothed").at("rel_l2_vs_compared").get<double>() > 0.5 * smooth_error);
  // flash_fp16 runs without smoothing: its CPU stand-in is the unsmoothed all-FP16 route.
  CHECK(rows.at("smoothed-vs-flash").at("compared_with") == "flash_fp16 (cpu: emulator, all fp16)");

  const std::string checked = (dir / "check.json").string();
  const Run c = run(std::string(TILEMIX_CHECK_EXE) + " --device cpu --config '" + cfg + "' --json '" + checked + "'");
  INFO(c.out);
  CHECK(c.code == 0);
  CHECK(c.out.find("3 passed, 0 failed") != std::string::npos);
  const nlohmann::json check_result = nlohmann::json::parse(std::ifstream(checked));
  for (const auto& row : check_result.at("rows")) {
    CHECK(row.at("smooth_k") == (row.at("case") != "plain"));
  }

  // --set reaches it as any case key; a decode case refuses it.
  const Run set = run(std::string(TILEMIX_BENCH_EXE) + " --device cpu --config '" + cfg + "' --set smooth_k=yes");
  INFO(set.out);
  CHECK(set.code == 2);
  CHECK(set.out.find("--set smooth_k: expected boolean, got string \"yes\"") != std::string::npos);
  const nlohmann::json decode = {{"defaults", {{"kind", "decode"}, {"cache_len", 64}, {"smooth_k", true}}}};
  const Run d = check(write_config(dir, decode, "decode.json"));
  INFO(d.out);
  CHECK(d.code == 2);
  CHECK(d.out.find("decode.json: $.defaults.smooth_k: is a prefill key") != std::string::npos);
}

TEST_CASE("limits a user can hit are errors, not crashes", "[cli]") {
  const auto dir = temp_dir("limits");
  const std::string bench = std::string(TILEMIX_BENCH_EXE) + " --device cpu --config '";
  SECTION("a byte count past 64 bits exits 2 naming the case and the sizes") {
    auto j = valid_config();
    j["defaults"]["batch"] = 1048576;
    j["defaults"]["seq_len"] = 2147483647;
    j["defaults"]["hq"] = 65536;
    j["defaults"]["hk"] = 65536;
    const Run r = check(write_config(dir, j));
    INFO(r.out);
    CHECK(r.code == 2);
    CHECK(r.out.find("$.cases[0]: Q [total_q, hq, d] in doubles is 2251799812636672 (total_q) x 65536 (hq) x 64 "
                     "(d) x 8 (bytes), more than 9223372036854775807") != std::string::npos);
  }
  SECTION("a case larger than the host memory exits 3 with the bytes asked for, before anything is built") {
    auto j = valid_config();
    j["cases"][0]["name"] = "huge";
    j["defaults"]["seq_len"] = 2147483647;
    j["defaults"]["hq"] = 65536;
    j["defaults"]["hk"] = 65536;
    const std::string cfg = write_config(dir, j);
    for (const std::string& cmd : {std::string(TILEMIX_CHECK_EXE) + " --device cpu --config '" + cfg + "'",
                                   bench + cfg + "'"}) {
      const Run r = run(cmd);
      INFO(r.out);
      CHECK(r.code == 3);
      CHECK(r.out.find("error: out of host memory: case 'huge' (" + cfg + ": $.cases[0]) needs about ") !=
            std::string::npos);
      CHECK(r.out.find(" bytes); ") != std::string::npos);
    }
  }
  SECTION("a sweep of 10^12 cases exits 2 naming the axes and the count") {
    std::string values = "0";
    for (int i = 1; i < 1000; ++i) values += "," + std::to_string(i);
    const Run r = run(bench + write_config(dir, valid_config()) + "' --set seed=" + values + " --set block_m=" +
                      values + " --set input.seed=" + values + " --set hq=" + values);
    INFO(r.out.substr(0, 2000));
    CHECK(r.code == 2);
    CHECK(r.out.find("$.axes: the number of cases is 1 (cases) x 1000 (--set seed) x 1000 (--set block_m) x 1000 "
                     "(--set input.seed) x 1000 (--set hq) = 1000000000000, at most 100000") != std::string::npos);
  }
  SECTION("a decode case whose split partials pass 64 bits exits 2") {
    const nlohmann::json decode = {
        {"name", "d"},
        {"defaults",
         {{"kind", "decode"}, {"cache_len", 2147483647}, {"batch", 1048576}, {"hq", 65536}, {"hk", 1},
          {"tiles_per_split", 1}, {"tolerance", {{"emulator_vs_reference", {{"rel_l2", 0.05}}}}}}}};
    const Run r = check(write_config(dir, decode, "decode.json"));
    INFO(r.out);
    CHECK(r.code == 2);
    CHECK(r.out.find("the emulator's split partials [splits, hq, 16 rows, d + 2] is 35184372088832 (splits)") !=
          std::string::npos);
  }
  SECTION("config files that are FIFOs, devices or too large exit 2 without being read") {
    const std::string fifo = (dir / "fifo.json").string();
    fs::remove(fifo);
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    const std::string big = write_config(dir, valid_config(), "big.json");
    fs::resize_file(big, std::uintmax_t{300} << 20);  // sparse
    for (const std::string& path : {fifo, std::string("/dev/zero"), big}) {
      // A reader that waited for a writer, or read /dev/zero to its end, would meet the timeout.
      const Run r = run("timeout 60 " + std::string(TILEMIX_CHECK_EXE) + " --device cpu --config '" + path + "'");
      INFO(r.out);
      CHECK(r.code == 2);
      CHECK(r.out.find(path + ": is ") != std::string::npos);
    }
  }
}
