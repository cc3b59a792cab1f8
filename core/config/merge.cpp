#include "core/config/merge.hpp"

#include <algorithm>
#include <vector>

#include "core/error.hpp"

namespace tilemix::config_reading {
namespace {

using nlohmann::json;

const std::vector<std::string> kLengthKeys = {"seq_len",   "lq",        "lk",        "seqlens_q",
                                              "seqlens_k", "cache_len", "cache_lens"};

void erase_origins_below(Origins& origins, const std::string& key) {
  const std::string prefix = key + ".";
  for (auto it = origins.lower_bound(prefix);
       it != origins.end() && it->first.compare(0, prefix.size(), prefix) == 0;) {
    it = origins.erase(it);
  }
}

enum class LengthForm { none, equal, pair, varlen, cache_equal, cache_varlen };

LengthForm length_form(const std::string& key) {
  if (key == "seq_len") return LengthForm::equal;
  if (key == "lq" || key == "lk") return LengthForm::pair;
  if (key == "seqlens_q" || key == "seqlens_k") return LengthForm::varlen;
  if (key == "cache_len") return LengthForm::cache_equal;
  if (key == "cache_lens") return LengthForm::cache_varlen;
  return LengthForm::none;
}

void drop_other_length_forms(json& merged, Origins& origins, LengthForm keep) {
  for (const auto& key : kLengthKeys) {
    if (length_form(key) != keep) erase_key(merged, origins, key);
  }
  if (keep == LengthForm::varlen || keep == LengthForm::cache_varlen) erase_key(merged, origins, "batch");
}

}  // namespace

std::string member_path(const std::string& parent, const std::string& key) {
  const bool plain = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
  return plain ? parent + "." + key : parent + "[" + json(key).dump() + "]";
}

void erase_key(json& merged, Origins& origins, const std::string& key) {
  merged.erase(key);
  origins.erase(key);
  erase_origins_below(origins, key);
}

void assign(json& node, Origins& origins, const std::string& key, const json& value, const std::string& path) {
  origins[key] = path;
  if (!value.is_object()) {
    erase_origins_below(origins, key);
    node = value;
    return;
  }
  if (!node.is_object()) {
    erase_origins_below(origins, key);
    node = json::object();
  }
  for (const auto& item : value.items()) {
    assign(node[item.key()], origins, key + "." + item.key(), item.value(), member_path(path, item.key()));
  }
}

void merge_layer(json& merged, Origins& origins, const json& layer, const std::string& layer_path, const Context& ctx) {
  LengthForm form = LengthForm::none;
  std::string form_key;
  for (const auto& item : layer.items()) {
    const LengthForm f = length_form(item.key());
    if (f == LengthForm::none) continue;
    if (form != LengthForm::none && f != form) {
      throw InputError(
          ctx.at(member_path(layer_path, item.key())),
          "cannot be combined with " + form_key +
              " (give seq_len, or lq and lk, or seqlens_q and seqlens_k; decode: cache_len or cache_lens)");
    }
    form = f;
    form_key = item.key();
  }
  if ((form == LengthForm::varlen || form == LengthForm::cache_varlen) && layer.contains("batch")) {
    throw InputError(ctx.at(member_path(layer_path, "batch")),
                     "cannot be combined with " + form_key + " (the batch is the number of lengths given)");
  }
  if (form != LengthForm::none) drop_other_length_forms(merged, origins, form);
  for (const auto& item : layer.items()) {
    assign(merged[item.key()], origins, item.key(), item.value(), member_path(layer_path, item.key()));
  }
}

void drop_lengths_replaced_by(json& merged, Origins& origins, const std::string& key) {
  const LengthForm form = length_form(key);
  if (form != LengthForm::none) drop_other_length_forms(merged, origins, form);
}

void apply_axis_value(json& merged, Origins& origins, const std::string& key, const json& value,
                      const std::string& path, const Context& ctx) {
  drop_lengths_replaced_by(merged, origins, key);
  json* node = &merged;
  std::string dotted;
  size_t begin = 0;
  for (;;) {
    const size_t dot = key.find('.', begin);
    const std::string part = key.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin);
    dotted += (dotted.empty() ? "" : ".") + part;
    if (dot == std::string::npos) {
      assign((*node)[part], origins, dotted, value, path);
      return;
    }
    json& child = (*node)[part];
    if (child.is_null()) child = json::object();
    if (!child.is_object()) {
      const auto it = origins.find(dotted);
      json_type_error(ctx.at(it != origins.end() ? it->second : dotted), "object", child);
    }
    node = &child;
    begin = dot + 1;
  }
}

void apply_origins(JsonObjectReader& r, const json& obj, const Origins& origins, const std::string& prefix) {
  for (const auto& item : obj.items()) {
    const auto it = origins.find(prefix + item.key());
    if (it != origins.end()) r.set_key_path(item.key(), it->second);
  }
}

}  // namespace tilemix::config_reading
