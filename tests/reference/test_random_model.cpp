// The multi-layer random model (SPEC 8, paper G.1): seeded and deterministic, its residual and
// normalization plumbing, and its refusal of shapes it does not model.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "reference/exact.hpp"
#include "reference/random_model.hpp"
#include "tests/reference/attention_fixtures.hpp"

using namespace tilemix;
using namespace tilemix::testing;

namespace {

ModelAttention exact_fp16(const AttentionShape& shape) {
  return [shape](const AttentionInputs& qkv) { return exact_attention_fp16(shape, qkv); };
}

}  // namespace

TEST_CASE("the random model is a function of its seed", "[model]") {
  const AttentionShape shape = make_shape(4, 2, 64, true, {40, 25}, {40, 25});
  const auto logits = [&](uint64_t seed) {
    return run_random_model(make_random_model(shape, 2, 32, seed), shape, random_model_input(shape, seed),
                            exact_fp16(shape));
  };
  const std::vector<float> a = logits(7), b = logits(7), c = logits(8);
  REQUIRE(a.size() == static_cast<size_t>(shape.total_q()) * 32);
  CHECK(a == b);
  CHECK(a != c);
  CHECK(std::all_of(a.begin(), a.end(), [](float x) { return std::isfinite(x); }));
}

TEST_CASE("with zero attention the random model's logits do not depend on its depth", "[model]") {
  // Every block adds fp16(0 @ Wo) = 0 to the residual, so x stays the input; the vocabulary
  // projection has its own seed stream and is the same at every depth.
  const AttentionShape shape = make_shape(2, 2, 64, true, {33}, {33});
  const ModelAttention zero = [&](const AttentionInputs&) {
    return std::vector<uint16_t>(static_cast<size_t>(shape.total_q()) * shape.hq * shape.d, 0);
  };
  const std::vector<uint16_t> input = random_model_input(shape, 3);
  const std::vector<float> shallow = run_random_model(make_random_model(shape, 1, 16, 3), shape, input, zero);
  const std::vector<float> deep = run_random_model(make_random_model(shape, 3, 16, 3), shape, input, zero);
  CHECK(shallow == deep);
  // ...and with attention the depth shows.
  const std::vector<float> attended =
      run_random_model(make_random_model(shape, 3, 16, 3), shape, input, exact_fp16(shape));
  CHECK(attended != deep);
}

TEST_CASE("the random model refuses logits past 2^63 bytes before it draws a weight", "[model]") {
  // About 2^31 tokens and 2^31 words: 2^64 bytes of logits (and 2^39 of vocabulary weights).
  const AttentionShape shape = make_shape(1, 1, 64, false, {kMaxSeqLen}, {kMaxSeqLen});
  CHECK_THROWS_WITH(make_random_model(shape, 1, 2147483647, 0),
                    "vocab: the logits [tokens, vocab] in floats is 2147483647 (tokens) x 2147483647 (vocab) x 4 "
                    "(bytes), more than 9223372036854775807");
}

TEST_CASE("the random model refuses cross-attention shapes and mis-sized inputs", "[model]") {
  const AttentionShape cross = make_shape(2, 2, 64, false, {10}, {20});
  CHECK_THROWS_AS(make_random_model(cross, 1, 8, 0), std::invalid_argument);
  const AttentionShape shape = make_shape(2, 2, 64, true, {10}, {10});
  const RandomModel model = make_random_model(shape, 1, 8, 0);
  CHECK_THROWS_AS(run_random_model(model, shape, std::vector<uint16_t>(5), exact_fp16(shape)), std::invalid_argument);
}
