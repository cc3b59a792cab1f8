#include "core/routing/plan.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/config/json_reader.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/inputs/npy.hpp"
#include "core/routing/layouts/adaptive.hpp"

namespace tilemix {

namespace {

std::string field(const std::string& where, const char* name) {
  return where.empty() ? std::string(name) : where + "." + name;
}

// Recomputes the plan's coverage from its words, over every KV head and sequence.
void measure_plan(RoutingPlan& plan) {
  plan.coverage = Coverage{};
  for (int h = 0; h < plan.hk; ++h) {
    for (size_t b = 0; b < plan.tilings.size(); ++b) {
      const auto first = plan.words.begin() + static_cast<int64_t>(h) * plan.total_tiles() + plan.tile_offset[b];
      const std::vector<uint64_t> seq(first, first + plan.tilings[b].tm);
      plan.coverage += measure_coverage(plan.tilings[b], seq);
    }
  }
}

const char* kWordsForm =
    "a JSON object {\"words\": [[\"0x...\" per query tile] per KV head]} or a .npy uint64 array [hk, query tiles]";

std::string shape_text(int hk, int64_t total_tiles) {
  return "[" + std::to_string(hk) + ", " + std::to_string(total_tiles) + "]";
}

bool parse_hex(const std::string& s, uint64_t& out) {
  if (s.size() < 3 || s.size() > 18 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) return false;
  uint64_t v = 0;
  for (size_t i = 2; i < s.size(); ++i) {
    const char c = s[i];
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      d = c - 'A' + 10;
    } else {
      return false;
    }
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  out = v;
  return true;
}

std::vector<uint64_t> read_words_npy(const std::string& path, int hk, int64_t total_tiles) {
  // Dtype and shape are checked from the header, before the data is read.
  const NpyArray a = read_npy(path, [&](const NpyArray& header) {
    if (header.dtype != NpyDtype::u64) throw InputError(path, "words must be a uint64 array (dtype '<u8')");
    if (header.shape != std::vector<int64_t>{hk, total_tiles}) {
      std::string got = "[";
      for (size_t i = 0; i < header.shape.size(); ++i) got += (i ? ", " : "") + std::to_string(header.shape[i]);
      throw InputError(path, "words must have shape " + shape_text(hk, total_tiles) +
                                 " (KV heads, query tiles), got " + got + "]");
    }
  });
  const size_t n = static_cast<size_t>(hk) * static_cast<size_t>(total_tiles);
  if (a.data.size() < n * 8) throw InputError(path, "file is shorter than its header says");
  std::vector<uint64_t> words(n);
  for (size_t i = 0; i < n; ++i) {
    uint64_t w = 0;
    for (int byte = 7; byte >= 0; --byte) w = (w << 8) | a.data[i * 8 + byte];  // little-endian
    words[i] = w;
  }
  return words;
}

std::vector<uint64_t> read_words_json(const std::string& path, int hk, int64_t total_tiles) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(read_json_text(path));
  } catch (const nlohmann::json::exception& e) {  // parse errors, and numbers past the double range
    throw InputError(path, std::string("not a valid JSON words file (") + e.what() + "); expected " + kWordsForm);
  }
  if (!doc.is_object() || !doc.contains("words")) throw InputError(path, std::string("expected ") + kWordsForm);
  const nlohmann::json& heads = doc["words"];
  if (!heads.is_array() || heads.size() != static_cast<size_t>(hk)) {
    throw InputError(path, "$.words must be an array of " + std::to_string(hk) + " KV heads, each an array of " +
                               std::to_string(total_tiles) + " hex words");
  }
  std::vector<uint64_t> words;
  words.reserve(static_cast<size_t>(hk) * static_cast<size_t>(total_tiles));
  for (int h = 0; h < hk; ++h) {
    const nlohmann::json& row = heads[h];
    const std::string at = "$.words[" + std::to_string(h) + "]";
    if (!row.is_array() || row.size() != static_cast<size_t>(total_tiles)) {
      throw InputError(path, at + " must be an array of " + std::to_string(total_tiles) +
                                 " hex words (one per query tile), got " +
                                 (row.is_array() ? std::to_string(row.size()) + " entries" : row.type_name()));
    }
    for (int64_t m = 0; m < total_tiles; ++m) {
      const nlohmann::json& v = row[m];
      uint64_t w = 0;
      if (!v.is_string() || !parse_hex(v.get<std::string>(), w)) {
        throw InputError(path, at + "[" + std::to_string(m) + "] must be a hex string like \"0x00000000000000ff\", got " +
                                   v.dump());
      }
      words.push_back(w);
    }
  }
  return words;
}

}  // namespace

std::vector<int> RoutingPlan::groups() const {
  std::vector<int> g;
  g.reserve(tilings.size());
  for (const auto& t : tilings) g.push_back(t.g);
  return g;
}

std::string word_hex(uint64_t w) {
  char buf[19];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(w));
  return buf;
}

bool uniform_steps(const RoutingPlan& plan, const std::vector<uint64_t>& words, int tiles_per_step) {
  const int64_t total = plan.total_tiles();
  for (size_t b = 0; b < plan.tilings.size(); ++b) {
    const SequenceTiling& t = plan.tilings[b];
    if (t.g % tiles_per_step == 0) continue;  // a step never straddles two groups
    for (int m = 0; m < t.tm; ++m) {
      const int tiles = t.legal_tile_end(m);
      for (int kvh = 0; kvh < plan.hk; ++kvh) {
        const uint64_t w = words[static_cast<size_t>(kvh) * total + plan.tile_offset[b] + m];
        for (int first = 0; first < tiles; first += tiles_per_step) {
          const uint64_t route = (w >> (first / t.g)) & 1ull;
          for (int n = first + 1; n < std::min(tiles, first + tiles_per_step); ++n) {
            if (((w >> (n / t.g)) & 1ull) != route) return false;
          }
        }
      }
    }
  }
  return true;
}

bool routes_from_data(LayoutKind layout) { return layout == LayoutKind::adaptive; }

namespace {

// The templates of a plan whose words came whole (file, adaptive): each geometry's is KV head 0's
// words of its first sequence.
void take_templates_from_words(RoutingPlan& plan) {
  std::vector<bool> filled(plan.templates.size(), false);
  for (size_t b = 0; b < plan.tilings.size(); ++b) {
    const int k = plan.seq_template[b];
    if (filled[k]) continue;
    filled[k] = true;
    RouteTemplate& tpl = plan.templates[k];
    const auto first = plan.words.begin() + plan.tile_offset[b];
    tpl.words.assign(first, first + tpl.tiling.tm);
    tpl.coverage = measure_coverage(tpl.tiling, tpl.words);
  }
}

RoutingPlan build_plan(const AttentionShape& shape, const RoutingRequest& request, const AttentionInputs* inputs,
                       const std::string& where) {
  if (!(request.ratio >= 0.0 && request.ratio <= 1.0)) {
    throw InputError(field(where, "ratio"), "must be in [0, 1], got " + std::to_string(request.ratio));
  }
  if (shape.hk <= 0) throw InputError(field(where, "hk"), "must be positive, got " + std::to_string(shape.hk));
  validate_geometry(request.geometry, field(where, "block_m/block_n").c_str());
  const bool whole_words = request.layout == LayoutKind::file || routes_from_data(request.layout);
  if (routes_from_data(request.layout) && !inputs) {
    throw std::invalid_argument(std::string("make_plan: layout `") + to_string(request.layout) +
                                "` routes from Q and K; build its plan with the inputs");
  }

  RoutingPlan plan;
  plan.request = request;
  plan.hk = shape.hk;
  const int batch = shape.batch();
  const std::string group_field = field(where, "group");
  plan.tile_offset.assign(1, 0);
  std::map<std::pair<int64_t, int64_t>, int> cache;  // (lq, lk) -> template
  for (int b = 0; b < batch; ++b) {
    const int64_t lq = shape.seqlen_q(b), lk = shape.seqlen_k(b);
    plan.tilings.push_back(make_tiling(lq, lk, shape.causal, request.geometry, request.group, group_field.c_str()));
    const SequenceTiling& t = plan.tilings.back();
    plan.tile_offset.push_back(plan.tile_offset.back() + t.tm);
    const auto [it, added] = cache.try_emplace({lq, lk}, static_cast<int>(plan.templates.size()));
    if (added) {
      if (whole_words) {
        // Its words are filled below, from the file or the inputs.
        RouteTemplate tpl;
        tpl.tiling = t;
        tpl.layout = request.layout;
        tpl.ratio = request.ratio;
        tpl.seed = request.seed;
        if (request.layout == LayoutKind::adaptive) tpl.params = layouts::adaptive_params();
        plan.templates.push_back(std::move(tpl));
      } else {
        plan.templates.push_back(search_layout(t, request.layout, request.ratio, request.seed));
      }
    }
    plan.seq_template.push_back(it->second);
  }

  if (request.layout == LayoutKind::file) {
    set_explicit_words(plan, read_words_file(request.words_file, plan.hk, plan.total_tiles()),
                       field(where, "words_file") + " (" + request.words_file + ")");
    take_templates_from_words(plan);
    return plan;
  }
  if (request.layout == LayoutKind::adaptive) {
    const size_t q_size = static_cast<size_t>(shape.total_q()) * shape.hq * shape.d;
    const size_t k_size = static_cast<size_t>(shape.total_k()) * shape.hk * shape.d;
    if (inputs->q.size() != q_size || inputs->k.size() != k_size) {
      throw std::invalid_argument("make_plan: Q and K do not have the shape's sizes");
    }
    const layouts::AdaptiveSchedule schedule =
        layouts::adaptive_schedule(plan.tilings, plan.tile_offset, request.ratio);
    plan.words = layouts::adaptive_words(shape, schedule, inputs->q, inputs->k);
    measure_plan(plan);
    take_templates_from_words(plan);
    return plan;
  }

  const int64_t total = plan.total_tiles();
  plan.words.assign(static_cast<size_t>(plan.hk) * static_cast<size_t>(total), 0);
  for (int h = 0; h < plan.hk; ++h) {
    for (int b = 0; b < batch; ++b) {
      const RouteTemplate& tpl = plan.templates[plan.seq_template[b]];
      std::copy(tpl.words.begin(), tpl.words.end(),
                plan.words.begin() + static_cast<int64_t>(h) * total + plan.tile_offset[b]);
      plan.coverage += tpl.coverage;
    }
  }
  return plan;
}

}  // namespace

RoutingPlan make_plan(const AttentionShape& shape, const RoutingRequest& request, const std::string& where) {
  return build_plan(shape, request, nullptr, where);
}

RoutingPlan make_plan(const AttentionShape& shape, const RoutingRequest& request, const AttentionInputs& inputs,
                      const std::string& where) {
  return build_plan(shape, request, &inputs, where);
}

bool plan_fits(const AttentionShape& shape, const RoutingPlan& plan) {
  bool ok = plan.hk == shape.hk && static_cast<int>(plan.tilings.size()) == shape.batch() &&
            static_cast<int>(plan.tile_offset.size()) == shape.batch() + 1 &&
            plan.words.size() == static_cast<size_t>(plan.hk) * plan.total_tiles();
  for (int b = 0; ok && b < shape.batch(); ++b) {
    const SequenceTiling& t = plan.tilings[b];
    ok = t.lq == shape.seqlen_q(b) && t.lk == shape.seqlen_k(b) && t.causal == shape.causal &&
         plan.tile_offset[b + 1] - plan.tile_offset[b] == t.tm;
  }
  return ok;
}

void set_explicit_words(RoutingPlan& plan, std::vector<uint64_t> words, const std::string& where) {
  const int64_t total = plan.total_tiles();
  const size_t expected = static_cast<size_t>(plan.hk) * static_cast<size_t>(total);
  if (words.size() != expected) {
    throw InputError(where, "expected " + std::to_string(expected) + " words (KV heads x query tiles = " +
                                shape_text(plan.hk, total) + "), got " + std::to_string(words.size()));
  }
  for (int h = 0; h < plan.hk; ++h) {
    for (size_t b = 0; b < plan.tilings.size(); ++b) {
      const SequenceTiling& t = plan.tilings[b];
      if (t.tmask >= kMaxGroups) continue;
      for (int m = 0; m < t.tm; ++m) {
        const uint64_t extra = words[static_cast<size_t>(h) * total + plan.tile_offset[b] + m] >> t.tmask;
        if (extra == 0) continue;
        const int bit = t.tmask + __builtin_ctzll(extra);
        throw InputError(where, "word for KV head " + std::to_string(h) + ", sequence " + std::to_string(b) +
                                    ", query tile " + std::to_string(m) + " sets bit " + std::to_string(bit) +
                                    " but Tmask is " + std::to_string(t.tmask));
      }
    }
  }
  plan.words = std::move(words);
  measure_plan(plan);
}

std::vector<uint64_t> read_words_file(const std::string& path, int hk, int64_t total_tiles) {
  if (path.empty()) throw InputError("words_file", std::string("layout `file` needs a words file: ") + kWordsForm);
  regular_file_size(path, kWordsForm);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, std::string("cannot open words file; expected ") + kWordsForm);
  char magic[6] = {};
  in.read(magic, sizeof magic);
  const bool npy = in.gcount() == 6 && std::string(magic, 6) == "\x93NUMPY";
  in.close();
  return npy ? read_words_npy(path, hk, total_tiles) : read_words_json(path, hk, total_tiles);
}

}  // namespace tilemix
