#include "apps/bench/case_groups.hpp"

#include <fmt/format.h>

#include <map>

namespace tilemix::app {

std::vector<CaseGroup> group_cases(const ExperimentConfig& config,
                                   const std::function<std::string(const CaseSpec&)>& key) {
  std::vector<std::string> keys;
  std::map<std::string, CaseGroup> by_key;
  for (const CaseSpec& spec : config.cases) {
    const std::string k = key(spec);
    if (!by_key.count(k)) keys.push_back(k);
    by_key[k].push_back(&spec);
  }
  std::vector<CaseGroup> groups;
  for (const auto& k : keys) groups.push_back(by_key[k]);
  return groups;
}

std::string prefill_group_key(const CaseSpec& spec) {
  const AttentionShape& s = spec.shape;
  return nlohmann::json{s.hq, s.hk, s.d, s.causal, s.softmax_scale, s.cu_seqlens_q, s.cu_seqlens_k,
                        to_string(spec.numerics.state), to_string(spec.numerics.accum),
                        to_string(spec.prefill_mainloop), spec.json.value("input", nlohmann::json::object())}
      .dump();
}

std::string decode_group_key(const CaseSpec& spec) {
  const DecodeShape& s = spec.decode->shape;
  std::string key = fmt::format("{}/{}/{}/{}|", s.hq, s.hk, s.d, spec.input.seed);
  for (size_t b = 0; b < s.cache_len.size(); ++b) key += fmt::format("{}:{},", s.cache_len[b], s.new_tokens[b]);
  return key;
}

std::string model_group_key(const CaseSpec& spec) {
  const AttentionShape& s = spec.shape;
  return nlohmann::json{s.hq,
                        s.hk,
                        s.d,
                        s.causal,
                        s.softmax_scale,
                        s.cu_seqlens_q,
                        spec.model->layers,
                        spec.model->vocab,
                        spec.input.seed,
                        to_string(spec.numerics.state),
                        to_string(spec.numerics.accum),
                        to_string(spec.prefill_mainloop)}
      .dump();
}

std::string group_key(const CaseSpec& spec) {
  switch (case_kind(spec)) {
    case CaseKind::decode:
      return decode_group_key(spec);
    case CaseKind::model:
      return model_group_key(spec);
    case CaseKind::prefill:
      break;
  }
  return prefill_group_key(spec);
}

}  // namespace tilemix::app
