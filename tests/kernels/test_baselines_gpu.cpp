// The baselines against the exact reference on fresh random problems: torch_like (cuBLAS) and
// cuDNN's fused attention in FP16 and FP8. A baseline whose library is missing is reported with
// WARN and skipped; outputs are poisoned (every byte 0xFF, a NaN) before each run.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "core/metrics.hpp"
#include "reference/exact.hpp"
#include "tests/reference/attention_fixtures.hpp"
#include "tilemix/attention.hpp"
#include "tilemix/baselines.hpp"
#include "tilemix/device_buffer.hpp"

using namespace tilemix;
using namespace tilemix::testing;
using gpu::Baseline;

namespace {

// Inputs on the device, and the outputs a baseline writes.
struct DeviceProblem {
  DeviceProblem(const AttentionShape& s, const AttentionInputs& in)
      : shape(s),
        q(gpu::to_device(in.q)),
        k(gpu::to_device(in.k)),
        v(gpu::to_device(in.v)),
        cu_q(gpu::to_device(s.cu_seqlens_q)),
        cu_k(gpu::to_device(s.cu_seqlens_k)),
        o(in.q.size() * sizeof(uint16_t)),
        lse(static_cast<size_t>(s.total_q()) * s.hq * sizeof(float)) {}

  gpu::PrefillParams params() {
    gpu::PrefillParams p;
    p.q = q.data();
    p.k = k.data();
    p.v = v.data();
    p.o = o.data();
    p.lse = lse.as<float>();
    p.cu_seqlens_q = cu_q.as<const int64_t>();
    p.cu_seqlens_k = cu_k.as<const int64_t>();
    p.batch = shape.batch();
    for (int b = 0; b < shape.batch(); ++b) p.max_seqlen_q = std::max(p.max_seqlen_q, shape.seqlen_q(b));
    p.total_q = shape.total_q();
    p.total_k = shape.total_k();
    p.hq = shape.hq;
    p.hk = shape.hk;
    p.d = shape.d;
    p.causal = shape.causal;
    p.softmax_scale = shape.softmax_scale;
    return p;
  }

  void poison() {
    o.poison();
    lse.poison();
  }

  std::vector<uint16_t> fetch_o() {
    gpu::device_synchronize("baseline test run");
    return gpu::to_host<uint16_t>(o, o.bytes() / sizeof(uint16_t));
  }
  std::vector<float> fetch_lse() { return gpu::to_host<float>(lse, lse.bytes() / sizeof(float)); }

  AttentionShape shape;
  gpu::DeviceBuffer q, k, v, cu_q, cu_k, o, lse;
};

// Runs `b` on the problem (poisoned output), or returns false after a WARN naming why it cannot.
bool run_baseline(Baseline b, DeviceProblem& dev, std::vector<uint16_t>& o) {
  std::string why;
  if (!gpu::baseline_available(b, dev.shape, &why)) {
    WARN(gpu::baseline_name(b) << " unavailable: " << why);
    return false;
  }
  const gpu::PrefillParams p = dev.params();
  if (b == Baseline::torch_like) {
    gpu::TorchLikeRunner runner(dev.shape);
    dev.poison();
    runner.run(p, nullptr);
  } else {
    gpu::CudnnAttention attention(b, dev.shape);
    attention.prepare(p, nullptr);
    dev.poison();
    attention.run(p, nullptr);
  }
  o = dev.fetch_o();
  return true;
}

struct Case {
  int hq, hk, d;
  bool causal;
  std::vector<int64_t> lq, lk;
};

std::string describe(const Case& c) {
  std::string lengths;
  for (size_t i = 0; i < c.lq.size(); ++i) lengths += " " + std::to_string(c.lq[i]) + "x" + std::to_string(c.lk[i]);
  return "hq=" + std::to_string(c.hq) + " hk=" + std::to_string(c.hk) + " d=" + std::to_string(c.d) +
         (c.causal ? " causal" : " non-causal") + lengths;
}

// B = 2 sequences of equal lengths, MHA and GQA, d 64 and 128, L 256 and an awkward 300; then
// Lq < Lk, where the causal diagonal is bottom-right aligned.
std::vector<Case> reference_cases() {
  std::vector<Case> cases;
  for (auto [hq, hk] : {std::pair{6, 2}, std::pair{6, 6}}) {
    for (int d : {64, 128}) {
      for (int64_t l : {256, 300}) {
        for (bool causal : {false, true}) cases.push_back({hq, hk, d, causal, {l, l}, {l, l}});
      }
    }
  }
  cases.push_back({6, 2, 128, true, {128, 128}, {300, 300}});
  cases.push_back({6, 2, 64, true, {77, 77}, {256, 256}});
  cases.push_back({6, 6, 64, false, {77, 77}, {300, 300}});
  return cases;
}

}  // namespace

TEST_CASE("each available baseline matches the exact reference", "[gpu][baselines]") {
  uint64_t seed = 100;
  for (const Case& c : reference_cases()) {
    const AttentionShape s = make_shape(c.hq, c.hk, c.d, c.causal, c.lq, c.lk);
    const AttentionInputs in = seeded_inputs(s, ++seed);
    const ExactResult exact = exact_attention(s, in);
    DeviceProblem dev(s, in);
    for (Baseline b : {Baseline::torch_like, Baseline::cudnn_fp16, Baseline::cudnn_fp8}) {
      INFO(gpu::baseline_name(b) << " " << describe(c));
      std::vector<uint16_t> o;
      if (!run_baseline(b, dev, o)) continue;
      const Deviation dev_o = compare(o, exact.o);
      INFO("rel_l2=" << dev_o.rel_l2 << " cosine=" << dev_o.cosine << " max_abs=" << dev_o.max_abs
                     << " nonfinite=" << dev_o.nonfinite);
      CHECK(dev_o.nonfinite == 0);
      if (b == Baseline::cudnn_fp8) {
        CHECK(dev_o.rel_l2 < 0.1);
        CHECK(dev_o.cosine > 0.99);
      } else {
        CHECK(dev_o.rel_l2 < 3e-3);
      }
    }
  }
}

TEST_CASE("torch_like handles varlen, empty sequences and rows without keys", "[gpu][baselines]") {
  const std::vector<Case> cases = {
      {8, 2, 128, true, {300, 1, 0, 129}, {300, 1, 0, 129}},  // varlen with length-1 and empty
      {6, 2, 64, true, {300, 77}, {77, 300}},                  // Lq > Lk: rows 0..222 see no key
      {4, 1, 64, false, {5, 200}, {0, 333}},                   // a sequence with queries and no keys
  };
  for (const Case& c : cases) {
    INFO(describe(c));
    const AttentionShape s = make_shape(c.hq, c.hk, c.d, c.causal, c.lq, c.lk);
    const AttentionInputs in = seeded_inputs(s, 7);
    const ExactResult exact = exact_attention(s, in);
    DeviceProblem dev(s, in);
    std::vector<uint16_t> o;
    if (!run_baseline(Baseline::torch_like, dev, o)) return;
    const Deviation dev_o = compare(o, exact.o);
    INFO("rel_l2=" << dev_o.rel_l2 << " nonfinite=" << dev_o.nonfinite);
    CHECK(dev_o.nonfinite == 0);
    CHECK(dev_o.rel_l2 < 3e-3);
    // Rows without keys are exact zeros, and their LSE is -inf, as in the reference.
    int64_t nonzero_empty_rows = 0, lse_mismatch = 0;
    for (int b = 0; b < s.batch(); ++b) {
      for (int64_t i = 0; i < s.seqlen_q(b); ++i) {
        if (visible_keys(i, s.seqlen_q(b), s.seqlen_k(b), s.causal) > 0) continue;
        const size_t row = static_cast<size_t>(s.cu_seqlens_q[b] + i) * s.hq * s.d;
        for (size_t e = row; e < row + static_cast<size_t>(s.hq) * s.d; ++e) {
          if ((o[e] & 0x7fff) != 0) {
            ++nonzero_empty_rows;
            break;
          }
        }
      }
    }
    double max_lse_diff = 0.0;
    const std::vector<float> lse = dev.fetch_lse();
    for (size_t i = 0; i < lse.size(); ++i) {
      if (std::isinf(exact.lse[i]) || !std::isfinite(lse[i])) {
        lse_mismatch += static_cast<double>(lse[i]) != exact.lse[i];
      } else {
        max_lse_diff = std::max(max_lse_diff, std::fabs(lse[i] - exact.lse[i]));
      }
    }
    INFO("rows without keys but nonzero O=" << nonzero_empty_rows << " lse_mismatch=" << lse_mismatch
                                            << " max_lse_diff=" << max_lse_diff);
    CHECK(nonzero_empty_rows == 0);
    CHECK(lse_mismatch == 0);
    CHECK(max_lse_diff < 5e-3);
  }
}

TEST_CASE("cuDNN baselines name what they cannot run", "[gpu][baselines]") {
  std::string why;
  const AttentionShape varlen = make_shape(4, 2, 64, false, {100, 200}, {100, 200});
  CHECK_FALSE(gpu::baseline_available(Baseline::cudnn_fp16, varlen, &why));
  INFO(why);
  const bool library_missing = why.find("not found") != std::string::npos;
  CHECK((library_missing || why.find("varlen") != std::string::npos));
  const AttentionShape no_keys = make_shape(4, 2, 64, true, {300}, {77});
  CHECK_FALSE(gpu::baseline_available(Baseline::cudnn_fp16, no_keys, &why));
  CHECK((library_missing || why.find("Lq <= Lk") != std::string::npos));
  CHECK_THROWS_AS(gpu::CudnnAttention(Baseline::cudnn_fp16, varlen), std::runtime_error);
  const std::string version = gpu::cudnn_version_string();
  CHECK((version == "unavailable" || version.rfind("9.", 0) == 0));
}

TEST_CASE("torch_like reports out of memory with the bytes asked for", "[gpu][baselines]") {
  // One sequence of 2^20 tokens: the [32, 2^20, 2^20] FP16 score matrix is 64 TiB.
  const AttentionShape s = make_shape(32, 8, 128, true, {int64_t{1} << 20}, {int64_t{1} << 20});
  const size_t bytes = gpu::torch_like_workspace_bytes(s);
  CHECK(bytes == (size_t{64} << 40) + (size_t{32} << 20));
  try {
    gpu::TorchLikeRunner runner(s);
    FAIL("a 64 TiB workspace was allocated");
  } catch (const gpu::OutOfMemory& e) {
    CHECK(e.bytes_asked == bytes);
    CHECK_THAT(e.what(), Catch::Contains(std::to_string(bytes) + " bytes"));
  }
}
