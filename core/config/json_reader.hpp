#pragma once
// Strict JSON reading with paths: every error names the file and the JSON path ("$.cases[2].hq")
// and what was expected; unknown keys, wrong types and unknown enum strings are errors.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tilemix {

class JsonObjectReader {
 public:
  // `file` prefixes every error; `path` is this object's JSON path.
  JsonObjectReader(const nlohmann::json& obj, std::string file, std::string path);

  bool has(const std::string& key) const;  // counts `key` as accepted, but not as read
  std::string path_of(const std::string& key) const;
  // Names `key` by another path in errors, e.g. where a merged value came from ("$.defaults.hq").
  void set_key_path(const std::string& key, std::string path) { key_paths_[key] = std::move(path); }
  std::string where(const std::string& key) const;  // "file: $.a.b"
  const nlohmann::json& raw(const std::string& key);  // marks the key used

  std::optional<int64_t> integer(const std::string& key);
  std::optional<double> number(const std::string& key);
  std::optional<bool> boolean(const std::string& key);
  std::optional<std::string> string(const std::string& key);
  // One of `allowed` (error lists them).
  std::optional<std::string> choice(const std::string& key, const std::vector<std::string>& allowed);
  std::optional<std::vector<int64_t>> integer_array(const std::string& key);
  std::optional<JsonObjectReader> object(const std::string& key);

  // Throws for the first key not read, listing the keys this object accepts (those asked for).
  void finish() const;

 private:
  const nlohmann::json* require(const std::string& key);  // nullptr when absent

  const nlohmann::json* obj_;
  std::string file_, path_;
  std::map<std::string, std::string> key_paths_;
  std::set<std::string> used_;
  mutable std::vector<std::string> asked_;  // in the order asked, for the list of accepted keys
};

// "a, b, c": how errors list the names a value may take.
std::string comma_list(const std::vector<std::string>& items);

[[noreturn]] void json_type_error(const std::string& where, const char* expected, const nlohmann::json& got);

// Configs and words files nest a few levels; deeper text is refused before it is parsed, so that no
// recursion over the document (destruction, traversal, dump) can exhaust the stack.
constexpr int kMaxJsonDepth = 64;
// Configs and words files are read whole and parsed in memory (several times their size).
constexpr int64_t kMaxJsonFileBytes = int64_t{256} << 20;

// The text of a JSON file a user names. InputError naming the file when it is missing, not a
// regular file, larger than kMaxJsonFileBytes (refused before it is read) or nested deeper than
// kMaxJsonDepth.
std::string read_json_text(const std::string& path);

// Parses a file as JSON; errors name the file (missing, unreadable, syntax with position, and
// the limits of read_json_text).
nlohmann::json read_json_file(const std::string& path);
// The same, keeping the order of object keys as written (axes expand in file order).
nlohmann::ordered_json read_ordered_json_file(const std::string& path);

}  // namespace tilemix
