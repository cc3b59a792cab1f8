#include "core/report/table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace tilemix {
namespace {

bool is_number(const Cell& c) { return std::holds_alternative<int64_t>(c) || std::holds_alternative<double>(c); }

// Numbers right-aligned, text left-aligned: a column is numeric when every non-empty cell is.
std::vector<bool> numeric_columns(const ResultTable& t) {
  std::vector<bool> numeric(t.columns.size(), true);
  for (const auto& row : t.rows) {
    for (size_t c = 0; c < row.size(); ++c) {
      if (!std::holds_alternative<std::monostate>(row[c]) && !is_number(row[c])) numeric[c] = false;
    }
  }
  return numeric;
}

std::string rstrip(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// Machine-readable text: shortest round-trip doubles, true/false.
std::string exact_cell(const Cell& c) {
  if (const auto* d = std::get_if<double>(&c)) return fmt::format("{}", *d);
  if (const auto* b = std::get_if<bool>(&c)) return *b ? "true" : "false";
  return format_cell(c, 17);
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"') out += '"';
    out += ch;
  }
  return out + "\"";
}

std::string markdown_cell(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '|') out += '\\';
    out += (ch == '\n' || ch == '\r') ? ' ' : ch;
  }
  return out;
}

}  // namespace

void ResultTable::add_row(std::vector<Cell> row) {
  if (row.size() != columns.size()) {
    throw std::invalid_argument("ResultTable::add_row: " + std::to_string(row.size()) + " cells for " +
                                std::to_string(columns.size()) + " columns");
  }
  rows.push_back(std::move(row));
}

int ResultTable::column(const std::string& key) const {
  for (size_t i = 0; i < columns.size(); ++i) {
    if (columns[i].key == key) return static_cast<int>(i);
  }
  return -1;
}

std::string format_cell(const Cell& c, int precision) {
  struct Visitor {
    int precision;
    std::string operator()(std::monostate) const { return ""; }
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return fmt::format("{:.{}g}", v, precision); }
    std::string operator()(const std::string& s) const { return s; }
    std::string operator()(bool b) const { return b ? "yes" : "no"; }
  };
  return std::visit(Visitor{precision}, c);
}

std::string render_terminal(const ResultTable& t) {
  const size_t n = t.columns.size();
  std::vector<std::vector<std::string>> text;
  std::vector<size_t> width(n);
  for (size_t c = 0; c < n; ++c) width[c] = t.columns[c].header.size();
  for (const auto& row : t.rows) {
    std::vector<std::string> cells;
    for (size_t c = 0; c < n; ++c) {
      cells.push_back(format_cell(row[c], t.columns[c].precision));
      width[c] = std::max(width[c], cells.back().size());
    }
    text.push_back(std::move(cells));
  }
  const std::vector<bool> numeric = numeric_columns(t);
  const auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t c = 0; c < n; ++c) {
      if (c) out += "  ";
      out += numeric[c] ? fmt::format("{:>{}}", cells[c], width[c]) : fmt::format("{:<{}}", cells[c], width[c]);
    }
    return rstrip(out) + "\n";
  };
  std::vector<std::string> headers, rules;
  for (size_t c = 0; c < n; ++c) {
    headers.push_back(t.columns[c].header);
    rules.emplace_back(width[c], '-');
  }
  std::string out = line(headers) + line(rules);
  for (const auto& cells : text) out += line(cells);
  return out;
}

std::string render_markdown(const ResultTable& t) {
  const std::vector<bool> numeric = numeric_columns(t);
  std::string head = "|", rule = "|";
  for (size_t c = 0; c < t.columns.size(); ++c) {
    head += " " + markdown_cell(t.columns[c].header) + " |";
    rule += numeric[c] ? " ---: |" : " --- |";
  }
  std::string out = head + "\n" + rule + "\n";
  for (const auto& row : t.rows) {
    out += "|";
    for (size_t c = 0; c < t.columns.size(); ++c) {
      out += " " + markdown_cell(format_cell(row[c], t.columns[c].precision)) + " |";
    }
    out += "\n";
  }
  return out;
}

std::string render_csv(const ResultTable& t) {
  std::string out;
  for (size_t c = 0; c < t.columns.size(); ++c) out += (c ? "," : "") + csv_field(t.columns[c].key);
  out += "\n";
  for (const auto& row : t.rows) {
    for (size_t c = 0; c < t.columns.size(); ++c) out += (c ? "," : "") + csv_field(exact_cell(row[c]));
    out += "\n";
  }
  return out;
}

nlohmann::json rows_json(const ResultTable& t) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : t.rows) {
    nlohmann::json obj = nlohmann::json::object();
    for (size_t c = 0; c < t.columns.size(); ++c) {
      std::visit(
          [&](const auto& v) {
            using V = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<V, std::monostate>) {
              obj[t.columns[c].key] = nullptr;
            } else {
              obj[t.columns[c].key] = v;
            }
          },
          row[c]);
    }
    rows.push_back(std::move(obj));
  }
  return rows;
}

}  // namespace tilemix
