#include "core/config/json_reader.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <vector>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/sizes.hpp"

namespace tilemix {
namespace {

// "string \"8\"", "number 3.5", "array [1,2]": what a user sees next to "expected integer".
std::string describe(const nlohmann::json& v) {
  std::string text = v.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean " + text;
  if (v.is_number()) return "number " + text;
  if (v.is_string()) return "string " + text;
  if (v.is_array()) return "array " + text;
  return "object " + text;
}

}  // namespace

std::string comma_list(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

void json_type_error(const std::string& where, const char* expected, const nlohmann::json& got) {
  throw InputError(where, std::string("expected ") + expected + ", got " + describe(got));
}

JsonObjectReader::JsonObjectReader(const nlohmann::json& obj, std::string file, std::string path)
    : obj_(&obj), file_(std::move(file)), path_(std::move(path)) {
  if (!obj.is_object()) json_type_error(file_.empty() ? path_ : file_ + ": " + path_, "object", obj);
}

bool JsonObjectReader::has(const std::string& key) const {
  if (std::find(asked_.begin(), asked_.end(), key) == asked_.end()) asked_.push_back(key);
  return obj_->contains(key);
}

std::string JsonObjectReader::path_of(const std::string& key) const {
  const auto it = key_paths_.find(key);
  return it != key_paths_.end() ? it->second : path_ + "." + key;
}

std::string JsonObjectReader::where(const std::string& key) const {
  return file_.empty() ? path_of(key) : file_ + ": " + path_of(key);
}

const nlohmann::json* JsonObjectReader::require(const std::string& key) {
  if (!has(key)) return nullptr;
  const auto it = obj_->find(key);
  used_.insert(key);
  return &*it;
}

const nlohmann::json& JsonObjectReader::raw(const std::string& key) {
  const nlohmann::json* v = require(key);
  if (!v) throw InputError(where(key), "is required");
  return *v;
}

std::optional<int64_t> JsonObjectReader::integer(const std::string& key) {
  const nlohmann::json* v = require(key);
  if (!v) return std::nullopt;
  if (v->is_number_unsigned()) {
    const auto u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      throw InputError(where(key), "integer " + v->dump() + " is out of range");
    }
    return static_cast<int64_t>(u);
  }
  if (!v->is_number_integer()) json_type_error(where(key), "integer", *v);
  return v->get<int64_t>();
}

std::optional<double> JsonObjectReader::number(const std::string& key) {
  const nlohmann::json* v = require(key);
  if (!v) return std::nullopt;
  if (!v->is_number()) json_type_error(where(key), "number", *v);
  return v->get<double>();
}

std::optional<bool> JsonObjectReader::boolean(const std::string& key) {
  const nlohmann::json* v = require(key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) json_type_error(where(key), "boolean", *v);
  return v->get<bool>();
}

std::optional<std::string> JsonObjectReader::string(const std::string& key) {
  const nlohmann::json* v = require(key);
  if (!v) return std::nullopt;
  if (!v->is_string()) json_type_error(where(key), "string", *v);
  return v->get<std::string>();
}

std::optional<std::string> JsonObjectReader::choice(const std::string& key, const std::vector<std::string>& allowed) {
  auto s = string(key);
  if (s && std::find(allowed.begin(), allowed.end(), *s) == allowed.end()) {
    throw InputError(where(key), "unknown " + key + " '" + *s + "' (expected one of: " + comma_list(allowed) + ")");
  }
  return s;
}

std::optional<std::vector<int64_t>> JsonObjectReader::integer_array(const std::string& key) {
  const nlohmann::json* v = require(key);
  if (!v) return std::nullopt;
  if (!v->is_array()) json_type_error(where(key), "array of integers", *v);
  std::vector<int64_t> out;
  out.reserve(v->size());
  for (size_t i = 0; i < v->size(); ++i) {
    const nlohmann::json& e = (*v)[i];
    const std::string elem = where(key) + "[" + std::to_string(i) + "]";
    if (e.is_number_unsigned() && e.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      throw InputError(elem, "integer " + e.dump() + " is out of range");
    }
    if (!e.is_number_integer()) json_type_error(elem, "integer", e);
    out.push_back(e.get<int64_t>());
  }
  return out;
}

std::optional<JsonObjectReader> JsonObjectReader::object(const std::string& key) {
  const nlohmann::json* v = require(key);
  if (!v) return std::nullopt;
  if (!v->is_object()) json_type_error(where(key), "object", *v);
  return JsonObjectReader(*v, file_, path_of(key));
}

void JsonObjectReader::finish() const {
  for (const auto& item : obj_->items()) {
    if (used_.count(item.key())) continue;
    std::string msg = "unknown key '" + item.key() + "'";
    if (!asked_.empty()) msg += " (expected one of: " + comma_list(asked_) + ")";
    throw InputError(where(item.key()), msg);
  }
}

namespace {

// nlohmann's message without its "[json.exception.parse_error.101] " prefix.
std::string without_id(const nlohmann::json::exception& e) {
  std::string detail = e.what();
  const auto close = detail.find("] ");
  return close == std::string::npos ? detail : detail.substr(close + 2);
}

void require_shallow(const std::string& text, const std::string& path) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) {
        throw InputError(path, "JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels at byte " +
                                   std::to_string(i));
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

[[noreturn]] void too_large(const std::string& path, int64_t bytes, bool at_least) {
  throw InputError(path, std::string("is ") + (at_least ? "at least " : "") + bytes_text(bytes) + " (" +
                             std::to_string(bytes) + " bytes), more than the " + bytes_text(kMaxJsonFileBytes) +
                             " a JSON file may hold");
}

template <class Json>
Json parse_json_file(const std::string& path) {
  const std::string text = read_json_text(path);
  try {
    return Json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(path, "invalid JSON at byte " + std::to_string(e.byte) + ": " + without_id(e));
  } catch (const nlohmann::json::exception& e) {  // e.g. a number too large for a double
    throw InputError(path, "invalid JSON: " + without_id(e));
  }
}

}  // namespace

std::string read_json_text(const std::string& path) {
  const int64_t size = regular_file_size(path, "a JSON file");
  if (size > kMaxJsonFileBytes) too_large(path, size, false);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, std::string("cannot open file: ") + std::strerror(errno));
  // Read in chunks up to the limit: a file may grow after its size was taken.
  std::string text;
  text.reserve(static_cast<size_t>(size));
  std::vector<char> chunk(size_t{1} << 16);
  while (in.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || in.gcount() > 0) {
    text.append(chunk.data(), static_cast<size_t>(in.gcount()));
    if (static_cast<int64_t>(text.size()) > kMaxJsonFileBytes) too_large(path, static_cast<int64_t>(text.size()), true);
  }
  if (in.bad()) throw InputError(path, "cannot read file");
  require_shallow(text, path);
  return text;
}

nlohmann::json read_json_file(const std::string& path) { return parse_json_file<nlohmann::json>(path); }

nlohmann::ordered_json read_ordered_json_file(const std::string& path) {
  return parse_json_file<nlohmann::ordered_json>(path);
}

}  // namespace tilemix
