#include "apps/common/prepared_case.hpp"

#include <fmt/format.h>

#include <omp.h>

#include <algorithm>
#include <filesystem>

#include "core/decode/kv_cache.hpp"
#include "core/host_memory.hpp"
#include "core/inputs/npy.hpp"
#include "core/quant_fp8.hpp"
#include "core/report/table.hpp"
#include "core/routing/render.hpp"
#include "core/sizes.hpp"
#include "kernels/decode/plan.hpp"

namespace tilemix::app {
namespace {

// A case's host bytes, buffer by buffer: each a checked product of its sizes, summed checked.
class HostBytes {
 public:
  explicit HostBytes(std::string where) : where_(std::move(where)) {}
  void add(const std::string& buffer, const std::vector<SizeFactor>& sizes) {
    total_ = checked_sum(where_, "the host bytes of the case", {total_, checked_product(where_, buffer, sizes)});
  }
  int64_t total() const { return total_; }

 private:
  std::string where_;
  int64_t total_ = 0;
};

int64_t threads() { return omp_get_max_threads(); }

int64_t longest(const std::vector<int64_t>& cu) {
  int64_t n = 0;
  for (size_t b = 0; b + 1 < cu.size(); ++b) n = std::max(n, cu[b + 1] - cu[b]);
  return n;
}

int64_t blocks_of(const std::vector<int64_t>& cu, int64_t block) {
  int64_t n = 0;
  for (size_t b = 0; b + 1 < cu.size(); ++b) n += (cu[b + 1] - cu[b] + block - 1) / block;
  return n;
}

void add_inputs(HostBytes& bytes, const CaseSpec& spec) {
  const AttentionShape& s = spec.shape;
  bytes.add("Q [total_q, hq, d] in FP16", {{s.total_q(), "total_q"}, {s.hq, "hq"}, {s.d, "d"}, {2, "bytes"}});
  bytes.add("K and V [total_k, hk, d] in FP16",
            {{s.total_k(), "total_k"}, {s.hk, "hk"}, {s.d, "d"}, {2 * 2, "bytes"}});
  // An FP32 .npy file is read whole before it is rounded to FP16.
  if (spec.input.kind == InputKind::npy) {
    const bool q_larger = s.total_q() * s.hq > s.total_k() * s.hk;  // each below 2^63 / 8 (validate)
    bytes.add("the largest .npy file's data in FP32", {{q_larger ? s.total_q() : s.total_k(), "tokens"},
                                                      {q_larger ? s.hq : s.hk, "heads"},
                                                      {s.d, "d"},
                                                      {4, "bytes"}});
  }
}

void add_plan(HostBytes& bytes, const AttentionShape& s, int64_t query_tiles) {
  bytes.add("the routing words and templates", {{s.hk + 1, "hk + 1"}, {query_tiles, "query tiles"}, {8, "bytes"}});
  bytes.add("the tilings of the sequences", {{s.batch(), "batch"}, {128, "bytes"}});
}

// Layout adaptive's builder (core/routing/layouts/adaptive.hpp): the pooled queries with their
// maxima, the scores and the schedule per query tile, and the pooled keys of at most 64 groups per
// sequence.
void add_adaptive_routing(HostBytes& bytes, const AttentionShape& s, int64_t query_tiles) {
  bytes.add("the adaptive layout's pooled queries, scores and schedule",
            {{s.hk + 1, "hk + 1"}, {query_tiles, "query tiles"}, {s.d + 1 + kMaxGroups + 2, "values"}, {4, "bytes"}});
  bytes.add("the adaptive layout's pooled keys",
            {{s.hk, "hk"}, {s.batch(), "batch"}, {kMaxGroups, "groups"}, {s.d + 1, "values"}, {4, "bytes"}});
}

// reference/exact.cpp: the output and log-sum-exp in doubles, its tasks, and per thread one block of
// query rows against every key of a sequence: scores (and the product's temporary), Q, K, V, O.
void add_exact_reference(HostBytes& bytes, const AttentionShape& s) {
  const int64_t rows = std::min(kExactRowBlock, longest(s.cu_seqlens_q)), keys = longest(s.cu_seqlens_k);
  bytes.add("the reference output [total_q, hq, d] in doubles",
            {{s.total_q(), "total_q"}, {s.hq, "hq"}, {s.d, "d"}, {8, "bytes"}});
  bytes.add("the reference log-sum-exp [hq, total_q]", {{s.total_q(), "total_q"}, {s.hq, "hq"}, {8, "bytes"}});
  bytes.add("the reference's row blocks",
            {{blocks_of(s.cu_seqlens_q, kExactRowBlock), "row blocks"}, {s.hq, "hq"}, {16, "bytes"}});
  bytes.add("the reference's score blocks",
            {{threads(), "threads"}, {keys, "longest Lk"}, {2 * rows + 2 * s.d, "scores and K, V rows"}, {8, "bytes"}});
}

// reference/emulator.cpp: Q, K^T and V in fp32, the INT8 codes (and as fp32), the output, and the
// query tiles of every head.
void add_emulator(HostBytes& bytes, const AttentionShape& s, int64_t query_tiles) {
  bytes.add("the emulator's Q operands", {{s.total_q(), "total_q"}, {s.hq, "hq"}, {s.d, "d"}, {4 + 1 + 4, "bytes"}});
  bytes.add("the emulator's K and V operands",
            {{s.total_k(), "total_k"}, {s.hk, "hk"}, {s.d, "d"}, {4 + 4 + 1 + 4, "bytes"}});
  bytes.add("the emulator's output and its doubles",
            {{s.total_q(), "total_q"}, {s.hq, "hq"}, {s.d, "d"}, {2 + 8, "bytes"}});
  bytes.add("the emulator's log-sum-exp", {{s.total_q(), "total_q"}, {s.hq, "hq"}, {4, "bytes"}});
  bytes.add("the emulator's query tiles", {{query_tiles, "query tiles"}, {s.hq, "hq"}, {12, "bytes"}});
}

// Kernel outputs fetched and kept in FP16, the log-sum-exp of one, and two outputs compared at a
// time as doubles.
void add_gpu_outputs(HostBytes& bytes, const AttentionShape& s, int outputs) {
  bytes.add("the kernel outputs kept",
            {{outputs, "outputs"}, {s.total_q(), "total_q"}, {s.hq, "hq"}, {s.d, "d"}, {2, "bytes"}});
  bytes.add("the kernel log-sum-exp fetched", {{s.total_q(), "total_q"}, {s.hq, "hq"}, {4, "bytes"}});
  bytes.add("two outputs compared as doubles", {{s.total_q(), "total_q"}, {s.hq, "hq"}, {s.d, "d"}, {2 * 8, "bytes"}});
}

}  // namespace

int64_t prefill_case_bytes(const CaseSpec& spec, const TileGeometry& geometry, const PrefillWork& work) {
  const AttentionShape& s = spec.shape;
  const int64_t query_tiles = blocks_of(s.cu_seqlens_q, geometry.block_m);
  HostBytes bytes(spec.where);
  add_inputs(bytes, spec);
  add_plan(bytes, s, query_tiles);
  const bool compared_adaptive = spec.compare_with && routes_from_data(spec.compare_with->routing.layout);
  if (routes_from_data(spec.routing.layout) || compared_adaptive) add_adaptive_routing(bytes, s, query_tiles);
  if (work.reference) add_exact_reference(bytes, s);
  if (work.emulator) add_emulator(bytes, s, query_tiles);
  if (work.emulator && spec.numerics.smooth_k) {
    bytes.add("the emulator's smoothed keys (smooth_k)", {{s.total_k(), "total_k"}, {s.hk, "hk"}, {s.d, "d"}, {2, "bytes"}});
    bytes.add("the emulator's q . kbar and kbar (smooth_k)",
              {{s.total_q() * s.hq + int64_t{s.batch()} * s.hk * s.d, "total_q x hq + batch x hk x d"}, {4, "bytes"}});
  }
  if (work.emulator && spec.numerics.pv != PvPrecision::fp16) {
    bytes.add("the emulator's V8 codes and their values (pv)",
              {{s.total_k() + int64_t{s.batch()} * kBlockV, "total_k + batch x 64"}, {s.hk, "hk"}, {s.d, "d"}, {5, "bytes"}});
    bytes.add("the emulator's V8 scales (pv)",
              {{s.total_k() / kBlockV + s.batch(), "V blocks"}, {s.hk, "hk"}, {s.d, "d"}, {4, "bytes"}});
  }
  if (work.exposure) {
    bytes.add("the exposure's keys per thread",
              {{threads(), "threads"}, {longest(s.cu_seqlens_k), "longest Lk"}, {s.d + 2, "d + 2"}, {8, "bytes"}});
  }
  if (work.gpu_outputs > 0) add_gpu_outputs(bytes, s, work.gpu_outputs);
  return bytes.total();
}

int64_t decode_check_bytes(const CaseSpec& spec, int sm_count, bool gpu) {
  const DecodeShape& shape = spec.decode->shape;
  const AttentionShape s = shape.attention_shape();
  HostBytes bytes(spec.where);
  add_inputs(bytes, spec);
  int64_t capacity = 0;
  for (const int64_t len : shape.cache_len) capacity += (len + kCacheBlock - 1) / kCacheBlock * kCacheBlock;
  bytes.add("the INT8 and FP16 caches [capacity, hk, d]",
            {{capacity, "capacity tokens"}, {s.hk, "hk"}, {s.d, "d"}, {2 + 4, "bytes"}});
  bytes.add("the cache scales", {{capacity / kCacheBlock, "blocks"}, {s.hk, "hk"}, {2 * 4, "bytes"}});
  bytes.add("the K and V of one append", {{s.total_k(), "total_k"}, {s.hk, "hk"}, {s.d, "d"}, {2 * 2, "bytes"}});
  add_plan(bytes, s, s.batch());
  const int64_t splits = plan_decode_launch(shape, spec.decode->cache, sm_count, decode_launch_choices(*spec.decode))
                             .splits.total_splits();
  bytes.add("the emulator's queries", {{s.total_q(), "total_new"}, {s.hq, "hq"}, {s.d, "d"}, {4 + 1 + 4, "bytes"}});
  bytes.add("the emulator's split partials [splits, hq, 16 rows, d + 2]",
            {{splits, "splits"}, {s.hq, "hq"}, {kMaxDecodeTokens, "rows"}, {s.d + 2, "d + 2"}, {4, "bytes"}});
  bytes.add("the emulator's split tasks", {{splits, "splits"}, {s.hk, "hk"}, {12, "bytes"}});
  bytes.add("the emulator's output and its doubles",
            {{s.total_q(), "total_new"}, {s.hq, "hq"}, {s.d + 1, "d + lse"}, {2 + 8, "bytes"}});
  add_exact_reference(bytes, s);
  if (gpu) add_gpu_outputs(bytes, s, 1);
  return bytes.total();
}

int64_t decode_gpu_bytes(const CaseSpec& spec) {
  const DecodeShape& shape = spec.decode->shape;
  HostBytes bytes(spec.where);
  bytes.add("the queries [total_new, hq, d] in FP16",
            {{shape.total_new(), "total_new"}, {shape.hq, "hq"}, {shape.d, "d"}, {2, "bytes"}});
  bytes.add("the K and V drawn with them",
            {{shape.total_new(), "total_new"}, {shape.hk, "hk"}, {shape.d, "d"}, {2 * 2, "bytes"}});
  return bytes.total();
}

int64_t model_case_bytes(const CaseSpec& spec, bool gpu) {
  const AttentionShape& s = spec.shape;
  const int64_t hidden = static_cast<int64_t>(s.hq) * s.d, kv_dim = static_cast<int64_t>(s.hk) * s.d;
  const int64_t tokens = s.total_q(), layers = spec.model->layers, vocab = spec.model->vocab;
  HostBytes bytes(spec.where);
  bytes.add("the model's layer weights",
            {{layers, "layers"}, {hidden, "hq x d"}, {2 * hidden + 2 * kv_dim, "projection widths"}, {4, "bytes"}});
  bytes.add("the model's vocabulary weights", {{hidden, "hq x d"}, {vocab, "vocab"}, {4, "bytes"}});
  bytes.add("the model's input and activations",
            {{tokens, "tokens"}, {hidden, "hq x d"}, {2 + 3 * 4 + 2 + 4, "bytes"}});
  bytes.add("the model's Q, K and V", {{tokens, "tokens"}, {hidden + 2 * kv_dim, "widths"}, {4 + 2, "bytes"}});
  bytes.add("the logits, their copy and the reference's", {{tokens, "tokens"}, {vocab, "vocab"}, {3 * 4, "bytes"}});
  if (gpu) {
    add_gpu_outputs(bytes, s, 1);
    return bytes.total();
  }
  // On the CPU one attention runs at a time: the exact reference or the emulator.
  const TileGeometry geometry = spec.routing.geometry;
  const int64_t query_tiles = blocks_of(s.cu_seqlens_q, geometry.block_m);
  HostBytes reference(spec.where), emulator(spec.where);
  add_exact_reference(reference, s);
  reference.add("the reference output in FP16", {{tokens, "tokens"}, {hidden, "hq x d"}, {2, "bytes"}});
  add_plan(emulator, s, query_tiles);
  add_emulator(emulator, s, query_tiles);
  bytes.add("the attention of one layer", {std::max(reference.total(), emulator.total())});
  return bytes.total();
}

void run_case_within_host_memory(const CaseSpec& spec, int64_t bytes, const std::function<void()>& body) {
  run_within_host_memory("case '" + spec.name + "' (" + spec.where + ")", bytes, body);
}

PreparedCase prepare_case(const CaseSpec& spec, const TileGeometry& geometry) {
  PreparedCase pc{spec, {}, {}};
  RoutingRequest request = spec.routing;
  request.geometry = geometry;
  pc.inputs = make_inputs(spec.shape, spec.input, spec.where + ".input");
  pc.plan = make_plan(spec.shape, request, pc.inputs, spec.where);
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
      {"smooth_k", pc.spec.numerics.smooth_k},
      {"pv", to_string(pc.spec.numerics.pv)},
      {"coverage",
       {{"groups", pc.plan.coverage.groups()}, {"tiles", pc.plan.coverage.tiles()}, {"cells", pc.plan.coverage.cells()}}},
      {"words", words_json(pc.plan)},
      {"files",
       {{"q", base + "_q.npy"}, {"k", base + "_k.npy"}, {"v", base + "_v.npy"}, {"o", base + "_o.npy"},
        {"o_ref", base + "_o_ref.npy"}}},
  };
  write_text_file(stem + "_meta.json", meta.dump(2) + "\n");
}

}  // namespace tilemix::app
