// quantize_queries and quantize_keys against quantize_blockwise, and with smooth_k smooth_keys +
// quantize_keys against smooth_keys and quantize_blockwise of Ks on the CPU: kbar, qkbar, Ks, codes
// and scales bit for bit;
// quantize_values_fp8 against its CPU twin (pv fp8): V8 codes in the FP8 MMA layout and scales.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "apps/common/gpu_problem.hpp"
#include "core/fp8.hpp"
#include "core/quant.hpp"
#include "core/quant_fp8.hpp"
#include "tests/kernels/gpu_checks.hpp"
#include "tests/reference/attention_fixtures.hpp"

using namespace tilemix;
using namespace tilemix::app;
using namespace tilemix::testing;

TEST_CASE("quantize_queries and quantize_keys are bit-identical with quantize_blockwise", "[gpu][quant]") {
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

TEST_CASE("smooth_keys and quantize_keys with smooth_k are bit-identical with the CPU's Ks and its codes",
          "[gpu][quant]") {
  // Fresh lengths and inputs every run (printed on failure): varlen with partial K blocks, an
  // empty and a length-1 sequence, GQA 1, 3 and 8, keys with and without channel offsets.
  std::random_device entropy;
  std::mt19937_64 rng((static_cast<uint64_t>(entropy()) << 32) | entropy());
  struct Heads {
    int hq, hk;
  };
  for (int d : {64, 128}) {
    for (const Heads heads : {Heads{4, 4}, Heads{6, 2}, Heads{8, 1}}) {
      std::vector<int64_t> lens_q, lens_k;
      for (int b = 0; b < 5; ++b) {
        const int64_t len = b == 1 ? 0 : b == 3 ? 1 : static_cast<int64_t>(1 + rng() % 700);
        lens_q.push_back(len);
        lens_k.push_back(len == 0 ? 0 : len + static_cast<int64_t>(rng() % 200));
      }
      InputSpec spec;
      spec.kind = InputKind::llm_like;
      spec.seed = rng();
      spec.k_channel_bias = static_cast<float>(rng() % 2) * 8.0f;
      const AttentionShape s = make_shape(heads.hq, heads.hk, d, true, lens_q, lens_k);
      std::string lengths;
      for (size_t b = 0; b < lens_q.size(); ++b) {
        lengths += " " + std::to_string(lens_q[b]) + "/" + std::to_string(lens_k[b]);
      }
      INFO("d=" << d << " hq=" << heads.hq << " hk=" << heads.hk << " Lq/Lk" << lengths << " seed=" << spec.seed
                << " k_channel_bias=" << spec.k_channel_bias);
      const AttentionInputs in = make_inputs(s, spec);
      GpuProblem gpu(s, in);
      const QuantOutput got = gpu.quantize(true);
      const SmoothedKeys want = smooth_keys(s, in.q, in.k);
      const QuantizedTensor q = quantize_blockwise(in.q, s.cu_seqlens_q, s.hq, d, kBlockQ);
      const QuantizedTensor k = quantize_blockwise(want.ks, s.cu_seqlens_k, s.hk, d, kBlockK);
      CHECK(same_bits(got.kbar, want.kbar));
      CHECK(same_bits(got.qkbar, want.qkbar));
      CHECK(got.ks == want.ks);
      CHECK(got.k8 == k.codes);
      CHECK(same_bits(got.k_scale, k.scales));
      // Q is quantized as without smoothing.
      CHECK(got.q8 == q.codes);
      CHECK(same_bits(got.q_scale, q.scales));
    }
  }
}

TEST_CASE("quantize_values_fp8 is bit-identical with the CPU's FP8 V codes, scales and layout", "[gpu][quant]") {
  // Fresh lengths and inputs every run (printed on failure): partial V blocks, empty and length-1
  // sequences, one all-zero channel of a block (scale 0) and one NaN; each channel's maximum
  // codes to 448, the top of the range.
  std::random_device entropy;
  std::mt19937_64 rng((static_cast<uint64_t>(entropy()) << 32) | entropy());
  for (int d : {64, 128}) {
    for (InputKind kind : {InputKind::gaussian, InputKind::llm_like}) {
      std::vector<int64_t> lengths = {static_cast<int64_t>(rng() % 300) + 1, 0, 1, static_cast<int64_t>(rng() % 200) + 65};
      const uint64_t seed = rng();
      INFO("d=" << d << " input=" << to_string(kind) << " seed " << seed << " lengths " << lengths[0] << ","
                << lengths[3]);
      const AttentionShape s = make_shape(6, 3, d, true, lengths, lengths);
      AttentionInputs in = seeded_inputs(s, seed, kind);
      // Channel 5 of KV head 1 is zero over the last sequence's first scale block (128 keys, or
      // all of them); one NaN in head 2.
      const int64_t zero_end = std::min(s.cu_seqlens_k[4], s.cu_seqlens_k[3] + kVScaleKeys);
      for (int64_t t = s.cu_seqlens_k[3]; t < zero_end; ++t) in.v[(t * s.hk + 1) * d + 5] = 0;
      in.v[(static_cast<size_t>(s.cu_seqlens_k[3]) * s.hk + 2) * d + 7] = 0x7e00;
      GpuProblem gpu(s, in);
      const ValueCodes got = gpu.quantize_values();
      const Fp8Values want = quantize_values_fp8(in.v, s.cu_seqlens_k, s.hk, d);
      CHECK(want.scale(3, 0, 1, 5) == 0.0f);
      CHECK(want.code(3, 0, 2, 7) == kFp8E4m3Nan);
      REQUIRE(got.v8.size() == want.codes.size());
      CHECK(got.v8 == want.codes);
      CHECK(same_bits(got.v_scale, want.scales));
    }
  }
}
