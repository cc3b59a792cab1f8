#pragma once
// Merging the layers of one case of a config (its defaults, the case object, one value of each
// axis) into one JSON object, remembering the JSON path each value came from so that an error names
// the place where the value was written. Internal to core/config.
#include <filesystem>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "core/config/json_reader.hpp"

namespace tilemix::config_reading {

// The config file being read: errors name it, and relative file names in it are resolved against
// its folder.
struct Context {
  std::string file;
  std::filesystem::path base_dir;
  std::string at(const std::string& path) const { return file.empty() ? path : file + ": " + path; }
};

// "$.a.b", or "$.a[\"x.y\"]" when the key is not a plain identifier.
std::string member_path(const std::string& parent, const std::string& key);

// Dotted key ("hq", "input.kind") -> JSON path of the value that won the merge.
using Origins = std::map<std::string, std::string>;

// Removes `key` and what was merged below it.
void erase_key(nlohmann::json& merged, Origins& origins, const std::string& key);

// Sets `node` (at dotted `key`) to `value`, written at `path`; objects merge key by key.
void assign(nlohmann::json& node, Origins& origins, const std::string& key, const nlohmann::json& value,
            const std::string& path);

// Merges the object `layer` (written at `layer_path`) over `merged`. Sequence lengths come in
// several forms (seq_len, lq and lk, seqlens_q and seqlens_k; decode: cache_len, cache_lens): a
// layer that gives one form replaces the lengths of lower layers given in another.
void merge_layer(nlohmann::json& merged, Origins& origins, const nlohmann::json& layer, const std::string& layer_path,
                 const Context& ctx);

// When `key` gives sequence lengths, drops the lengths `merged` has in the other forms.
void drop_lengths_replaced_by(nlohmann::json& merged, Origins& origins, const std::string& key);

// Sets one axis value, written at `path`, at a possibly dotted key ("ratio", "input.kind").
void apply_axis_value(nlohmann::json& merged, Origins& origins, const std::string& key, const nlohmann::json& value,
                      const std::string& path, const Context& ctx);

// Points the reader's keys at the paths their merged values came from; `prefix` is the dotted key
// of `obj` with its dot ("input.").
void apply_origins(JsonObjectReader& r, const nlohmann::json& obj, const Origins& origins, const std::string& prefix);

}  // namespace tilemix::config_reading
