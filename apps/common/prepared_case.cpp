#include "apps/common/prepared_case.hpp"

#include <fmt/format.h>

#include <filesystem>

#include "core/inputs/npy.hpp"
#include "core/report/table.hpp"

namespace tilemix::app {

PreparedCase prepare_case(const CaseSpec& spec, const TileGeometry& geometry) {
  PreparedCase pc{spec, {}, {}};
  RoutingRequest request = spec.routing;
  request.geometry = geometry;
  pc.plan = make_plan(spec.shape, request, spec.where);
  pc.inputs = make_inputs(spec.shape, spec.input, spec.where + ".input");
  return pc;
}

std::string shape_summary(const AttentionShape& s) {
  std::string lens;
  bool equal = true;
  for (int b = 1; b < s.batch(); ++b) {
    equal = equal && s.seqlen_q(b) == s.seqlen_q(0) && s.seqlen_k(b) == s.seqlen_k(0);
  }
  if (equal) {
    lens = s.seqlen_q(0) == s.seqlen_k(0) ? fmt::format("L={}", s.seqlen_q(0))
                                          : fmt::format("Lq={} Lk={}", s.seqlen_q(0), s.seqlen_k(0));
  } else {
    lens = "varlen";
  }
  return fmt::format("B={} Hq={} Hk={} d={} {}{}", s.batch(), s.hq, s.hk, s.d, lens, s.causal ? " causal" : "");
}

std::string file_stem(const std::string& name) {
  std::string out;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                    c == '_' || c == '.';
    out += ok ? c : '_';
  }
  return out;
}

void dump_case(const std::string& dir, const PreparedCase& pc, const EmulatorResult& out, const ExactResult& ref) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  const auto& s = pc.spec.shape;
  const std::string base = file_stem(pc.spec.name);
  const std::string stem = (fs::path(dir) / base).string();
  const std::vector<int64_t> qshape{s.total_q(), s.hq, s.d}, kshape{s.total_k(), s.hk, s.d};
  write_npy(stem + "_q.npy", NpyDtype::f16, qshape, pc.inputs.q.data());
  write_npy(stem + "_k.npy", NpyDtype::f16, kshape, pc.inputs.k.data());
  write_npy(stem + "_v.npy", NpyDtype::f16, kshape, pc.inputs.v.data());
  write_npy(stem + "_o.npy", NpyDtype::f16, qshape, out.o.data());
  write_npy(stem + "_o_ref.npy", NpyDtype::f64, qshape, ref.o.data());

  nlohmann::json words = nlohmann::json::array();
  for (int h = 0; h < pc.plan.hk; ++h) {
    nlohmann::json head = nlohmann::json::array();
    for (int64_t t = 0; t < pc.plan.total_tiles(); ++t) {
      head.push_back(word_hex(pc.plan.words[static_cast<size_t>(h) * pc.plan.total_tiles() + t]));
    }
    words.push_back(std::move(head));
  }
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& t : pc.plan.tilings) groups.push_back(t.g);
  const nlohmann::json meta = {
      {"case", pc.spec.name},
      {"layout", to_string(pc.plan.request.layout)},
      {"ratio", pc.plan.request.ratio},
      {"causal", s.causal},
      {"hq", s.hq},
      {"hk", s.hk},
      {"d", s.d},
      {"cu_seqlens_q", s.cu_seqlens_q},
      {"cu_seqlens_k", s.cu_seqlens_k},
      {"softmax_scale", s.softmax_scale},
      {"block_m", pc.plan.request.geometry.block_m},
      {"block_n", pc.plan.request.geometry.block_n},
      {"group", groups},
      {"state", to_string(pc.spec.numerics.state)},
      {"accum", to_string(pc.spec.numerics.accum)},
      {"mode", to_string(pc.spec.numerics.mode)},
      {"coverage",
       {{"groups", pc.plan.coverage.groups()}, {"tiles", pc.plan.coverage.tiles()}, {"cells", pc.plan.coverage.cells()}}},
      {"words", words},
      {"files",
       {{"q", base + "_q.npy"}, {"k", base + "_k.npy"}, {"v", base + "_v.npy"}, {"o", base + "_o.npy"},
        {"o_ref", base + "_o_ref.npy"}}},
  };
  write_text_file(stem + "_meta.json", meta.dump(2) + "\n");
}

}  // namespace tilemix::app
