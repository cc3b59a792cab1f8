#include "core/routing/render.hpp"

#include <cmath>
#include <stdexcept>

#include <fmt/core.h>

namespace tilemix {

namespace {

std::vector<uint64_t> sequence_words(const RoutingPlan& plan, int kv_head, int b) {
  std::vector<uint64_t> w(plan.tilings[b].tm);
  for (int m = 0; m < plan.tilings[b].tm; ++m) w[m] = plan.word(kv_head, b, m);
  return w;
}

// Coverage of sequence 0 over every KV head.
Coverage first_sequence_coverage(const RoutingPlan& plan) {
  Coverage c;
  for (int h = 0; h < plan.hk; ++h) c += measure_coverage(plan.tilings[0], sequence_words(plan, h, 0));
  return c;
}

void require_sequence(const RoutingPlan& plan) {
  if (plan.tilings.empty() || plan.hk <= 0) throw std::invalid_argument("routing plan has no sequence to show");
}

}  // namespace

std::string render_map(const SequenceTiling& t, const std::vector<uint64_t>& words) {
  std::string out;
  out.reserve(static_cast<size_t>(t.tm) * (t.tmask + 1));
  for (int m = 0; m < t.tm; ++m) {
    const int legal = t.legal_group_end(m);
    for (int j = 0; j < t.tmask; ++j) {
      out += j >= legal ? '.' : ((words.at(m) >> j) & 1ull) ? '8' : 'F';
    }
    out += '\n';
  }
  return out;
}

std::string render_map(const RouteTemplate& tpl) { return render_map(tpl.tiling, tpl.words); }

nlohmann::json plan_json(const RoutingPlan& plan) {
  require_sequence(plan);
  const SequenceTiling& t = plan.tilings[0];
  const RouteTemplate& tpl = plan.templates[plan.seq_template[0]];
  const Coverage cov = first_sequence_coverage(plan);
  nlohmann::json params = nlohmann::json::object();
  for (const auto& [name, choice] : tpl.params.choices) params[name] = choice;
  for (const auto& [name, value] : tpl.params.values) {
    if (std::nearbyint(value) == value && std::fabs(value) < 1e15) {
      params[name] = static_cast<int64_t>(value);
    } else {
      params[name] = value;
    }
  }
  nlohmann::json words = nlohmann::json::array();
  for (int m = 0; m < t.tm; ++m) words.push_back(word_hex(plan.word(0, 0, m)));
  return {{"lq", t.lq},
          {"lk", t.lk},
          {"causal", t.causal},
          {"block_m", t.geometry.block_m},
          {"block_n", t.geometry.block_n},
          {"group", t.g},
          {"tmask", t.tmask},
          {"tm", t.tm},
          {"layout", to_string(plan.request.layout)},
          {"ratio", plan.request.ratio},
          {"params", params},
          {"coverage", {{"groups", cov.groups()}, {"tiles", cov.tiles()}, {"cells", cov.cells()}}},
          {"words", words}};
}

nlohmann::json words_json(const RoutingPlan& plan) {
  nlohmann::json heads = nlohmann::json::array();
  for (int h = 0; h < plan.hk; ++h) {
    nlohmann::json head = nlohmann::json::array();
    for (int64_t t = 0; t < plan.total_tiles(); ++t) {
      head.push_back(word_hex(plan.words[static_cast<size_t>(h) * plan.total_tiles() + t]));
    }
    heads.push_back(std::move(head));
  }
  return heads;
}

std::string plan_summary(const RoutingPlan& plan) {
  require_sequence(plan);
  const SequenceTiling& t = plan.tilings[0];
  const RouteTemplate& tpl = plan.templates[plan.seq_template[0]];
  const Coverage cov = first_sequence_coverage(plan);
  const std::string params = tpl.params.to_string().empty() ? "none" : tpl.params.to_string();
  std::string s;
  s += fmt::format("layout    {} (requested INT8 coverage {:.4f})\n", to_string(plan.request.layout),
                   plan.request.ratio);
  s += fmt::format("problem   Lq={} Lk={} {}  tile {}x{}\n", t.lq, t.lk, t.causal ? "causal" : "non-causal",
                   t.geometry.block_m, t.geometry.block_n);
  s += fmt::format("routing   g={} (group width {} keys)  Tmask={}  Tm={}\n", t.g, t.mask_width, t.tmask, t.tm);
  s += fmt::format("params    {}\n", params);
  s += fmt::format("coverage  groups {:.4f}  tiles {:.4f}  cells {:.4f}\n", cov.groups(), cov.tiles(), cov.cells());
  return s;
}

}  // namespace tilemix
