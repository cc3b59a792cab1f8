#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>

#include "core/report/table.hpp"

using namespace tilemix;
namespace fs = std::filesystem;

namespace {

ResultTable sample_table() {
  ResultTable t;
  t.columns = {{"case", "case"}, {"ratio", "ratio", 3}, {"reps", "reps"}, {"ok", "ok"}, {"note", "note"}};
  t.add_row({std::string("band-50"), 0.123456, int64_t{12}, true, std::string("a, \"b\"")});
  t.add_row({std::string("zero"), 1234567.0, int64_t{3}, false, std::monostate{}});
  return t;
}

}  // namespace

TEST_CASE("cells format by type", "[report]") {
  CHECK(format_cell(std::monostate{}, 3).empty());
  CHECK(format_cell(int64_t{-42}, 3) == "-42");
  CHECK(format_cell(0.000123456, 3) == "0.000123");
  CHECK(format_cell(1234567.0, 3) == "1.23e+06");
  CHECK(format_cell(2.0, 3) == "2");
  CHECK(format_cell(std::nan(""), 3) == "nan");
  CHECK(format_cell(std::string("x"), 3) == "x");
  CHECK(format_cell(true, 3) == "yes");
  CHECK(format_cell(false, 3) == "no");
}

TEST_CASE("tables render as terminal text, Markdown, CSV and JSON", "[report]") {
  const ResultTable t = sample_table();
  CHECK(t.column("reps") == 2);
  CHECK(t.column("nope") == -1);
  CHECK_THROWS_AS(ResultTable(t).add_row({int64_t{1}}), std::invalid_argument);

  CHECK(render_terminal(t) ==
        "case        ratio  reps  ok   note\n"
        "-------  --------  ----  ---  ------\n"
        "band-50     0.123    12  yes  a, \"b\"\n"
        "zero     1.23e+06     3  no\n");
  CHECK(render_markdown(t) ==
        "| case | ratio | reps | ok | note |\n"
        "| --- | ---: | ---: | --- | --- |\n"
        "| band-50 | 0.123 | 12 | yes | a, \"b\" |\n"
        "| zero | 1.23e+06 | 3 | no |  |\n");
  CHECK(render_csv(t) ==
        "case,ratio,reps,ok,note\n"
        "band-50,0.123456,12,true,\"a, \"\"b\"\"\"\n"
        "zero,1234567,3,false,\n");
  const nlohmann::json rows = rows_json(t);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0] ==
        nlohmann::json{{"case", "band-50"}, {"ratio", 0.123456}, {"reps", 12}, {"ok", true}, {"note", "a, \"b\""}});
  CHECK(rows[1]["note"].is_null());
  CHECK(rows[1]["ok"] == false);
}

TEST_CASE("Markdown escapes pipes", "[report]") {
  ResultTable t;
  t.columns = {{"k", "a|b"}};
  t.add_row({std::string("x|y")});
  CHECK(render_markdown(t) == "| a\\|b |\n| --- |\n| x\\|y |\n");
}

TEST_CASE("provenance names the tool, build, host, time and config", "[report]") {
  Provenance p{"tilemix-check", {"tilemix-check", "--config", "c.json"}, "c.json", {{"name", "c"}}, {{"kind", "cpu"}}};
  const nlohmann::json j = provenance_json(p);
  for (const char* key :
       {"tool", "version", "git_sha", "argv", "config_path", "config", "host", "time_utc", "device"}) {
    CHECK(j.contains(key));
  }
  CHECK(j["tool"] == "tilemix-check");
  CHECK(j["argv"][1] == "--config");
  CHECK(j["config"]["name"] == "c");
  CHECK(j["device"]["kind"] == "cpu");
  CHECK_FALSE(j["version"].get<std::string>().empty());
  CHECK_FALSE(j["git_sha"].get<std::string>().empty());
  CHECK_FALSE(j["host"].get<std::string>().empty());
  CHECK(std::regex_match(j["time_utc"].get<std::string>(), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")));
}

TEST_CASE("write_text_file creates directories and replaces the file whole", "[report]") {
  const fs::path dir = fs::temp_directory_path() / ("tilemix-report-" + std::to_string(::getpid()));
  const std::string path = (dir / "a" / "b" / "out.md").string();
  write_text_file(path, "first\n");
  write_text_file(path, "second\n");
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  CHECK(text == "second\n");
  CHECK_FALSE(fs::exists(path + ".tmp"));
  fs::remove_all(dir);
}
