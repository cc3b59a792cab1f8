// quantize_qk against quantize_blockwise: codes and scales bit for bit.
#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "core/quant.hpp"
#include "apps/common/gpu_problem.hpp"
#include "tests/reference/attention_fixtures.hpp"

using namespace tilemix;
using namespace tilemix::app;
using namespace tilemix::testing;

namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("quantize_qk is bit-identical with quantize_blockwise", "[gpu][quant]") {
  for (int d : {64, 128}) {
    for (InputKind kind : {InputKind::gaussian, InputKind::llm_like}) {
      INFO("d=" << d << " input=" << to_string(kind));
      // Ragged and empty sequences; blocks restart at every sequence start.
      const AttentionShape s = make_shape(8, 2, d, true, {1000, 77, 0, 1, 300}, {1000, 77, 0, 1, 300});
      AttentionInputs in = seeded_inputs(s, 7 + d, kind);
      // An all-zero block of head 1 (scale 0, codes 0) in the second sequence's only Q block and K block.
      for (int64_t t = s.cu_seqlens_q[1]; t < s.cu_seqlens_q[2]; ++t) {
        std::memset(&in.q[(t * s.hq + 1) * d], 0, d * sizeof(uint16_t));
        std::memset(&in.k[(t * s.hk + 1) * d], 0, d * sizeof(uint16_t));
      }
      GpuProblem gpu(s, in);
      const QuantOutput got = gpu.quantize();
      const QuantizedTensor q = quantize_blockwise(in.q, s.cu_seqlens_q, s.hq, d, kBlockQ);
      const QuantizedTensor k = quantize_blockwise(in.k, s.cu_seqlens_k, s.hk, d, kBlockK);
      CHECK(got.q8 == q.codes);
      CHECK(got.k8 == k.codes);
      CHECK(same_bits(got.q_scale, q.scales));
      CHECK(same_bits(got.k_scale, k.scales));
      CHECK(q.scale(1, 0, 1) == 0.0f);
    }
  }
}
