#include "core/decode/decode_case.hpp"

#include <stdexcept>

#include "core/config/experiment.hpp"
#include "core/inputs/inputs.hpp"

namespace tilemix {

std::vector<std::vector<int64_t>> append_chunks(const DecodeShape& shape, int append_steps) {
  if (append_steps < 1) throw std::invalid_argument("append_chunks: append_steps must be >= 1");
  if (append_steps == 1) return {shape.cache_len};
  const int64_t context_chunks = append_steps - 1;
  std::vector<std::vector<int64_t>> chunks(static_cast<size_t>(append_steps),
                                           std::vector<int64_t>(shape.cache_len.size()));
  for (size_t b = 0; b < shape.cache_len.size(); ++b) {
    const int64_t context = shape.cache_len[b] - shape.new_tokens[b];
    for (int64_t i = 0; i < context_chunks; ++i) {
      chunks[i][b] = context * (i + 1) / context_chunks - context * i / context_chunks;
    }
    chunks.back()[b] = shape.new_tokens[b];
  }
  return chunks;
}

namespace {

// Rows [start_b, start_b + counts_b) of every sequence of `x` ([sum L_b, hk, d], packed by
// `cu_len`), packed by prefix sums of counts.
std::vector<uint16_t> gather_rows(const std::vector<uint16_t>& x, const std::vector<int64_t>& cu_len,
                                  const std::vector<int64_t>& start, const std::vector<int64_t>& counts,
                                  size_t row_size) {
  std::vector<uint16_t> out;
  for (size_t b = 0; b < counts.size(); ++b) {
    const auto first = x.begin() + static_cast<std::ptrdiff_t>((cu_len[b] + start[b]) * row_size);
    out.insert(out.end(), first, first + static_cast<std::ptrdiff_t>(counts[b] * row_size));
  }
  return out;
}

}  // namespace

PreparedDecode prepare_decode(const CaseSpec& spec) {
  if (!spec.decode) throw std::invalid_argument("prepare_decode: " + spec.name + " is not a decode case");
  const DecodeCaseSpec& dc = *spec.decode;
  PreparedDecode pd;
  pd.shape = dc.shape;
  const AttentionShape attention = pd.shape.attention_shape();

  AttentionInputs inputs = make_inputs(attention, spec.input, spec.where + ".input");
  pd.q = std::move(inputs.q);
  pd.k_src = std::move(inputs.k);
  pd.v_src = std::move(inputs.v);

  const KvCacheLayout layout = make_cache_layout(pd.shape.hk, pd.shape.d, pd.shape.cache_len);
  pd.int8 = make_int8_cache(layout);
  pd.fp16 = make_fp16_cache(layout);
  pd.append_counts = append_chunks(pd.shape, dc.append_steps);
  const size_t row_size = static_cast<size_t>(pd.shape.hk) * pd.shape.d;
  std::vector<int64_t> start(pd.shape.cache_len.size(), 0);
  for (const auto& counts : pd.append_counts) {
    const auto k = gather_rows(pd.k_src, attention.cu_seqlens_k, start, counts, row_size);
    const auto v = gather_rows(pd.v_src, attention.cu_seqlens_k, start, counts, row_size);
    append_tokens(pd.int8, counts, k, v);
    append_tokens(pd.fp16, counts, k, v);
    for (size_t b = 0; b < counts.size(); ++b) start[b] += counts[b];
  }

  RoutingRequest request = spec.routing;
  request.geometry = kDecodeGeometry;
  pd.plan = make_plan(attention, request, spec.where);
  return pd;
}

}  // namespace tilemix
