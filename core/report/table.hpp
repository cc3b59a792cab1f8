#pragma once
// Result tables and their writers: terminal, Markdown, CSV and JSON, with provenance.
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace tilemix {

using Cell = std::variant<std::monostate, int64_t, double, std::string, bool>;

struct Column {
  std::string key;     // JSON/CSV key
  std::string header;  // terminal/Markdown header
  int precision = 3;   // significant digits for doubles
};

struct ResultTable {
  std::vector<Column> columns;
  std::vector<std::vector<Cell>> rows;

  void add_row(std::vector<Cell> row);  // must match columns
  int column(const std::string& key) const;  // -1 when absent
};

std::string format_cell(const Cell& c, int precision);
std::string render_terminal(const ResultTable& t);
std::string render_markdown(const ResultTable& t);
std::string render_csv(const ResultTable& t);
nlohmann::json rows_json(const ResultTable& t);  // array of objects keyed by column key

// Provenance of a run: tool version, git sha, argv, config, seed, host, UTC time, device.
struct Provenance {
  std::string tool;
  std::vector<std::string> argv;
  std::string config_path;
  nlohmann::json config;
  nlohmann::json device;  // filled by the app (GPU name, clocks, driver...) or {"kind":"cpu"}
};
nlohmann::json provenance_json(const Provenance& p);

std::string tool_version();
std::string git_sha();
std::string host_name();
std::string utc_time();

// Writes `text` to `path` atomically enough for interrupted sweeps (write + rename).
void write_text_file(const std::string& path, const std::string& text);

}  // namespace tilemix
