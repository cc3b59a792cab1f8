#pragma once
// The multi-layer random model of SPEC 8 (paper G.1): a seeded stack of attention blocks,
//   x <- fp16(x + fp16(Attn(Q, K, V) Wo)),  Q, K, V = fp16(RMSNorm(x) Wq, Wk, Wv),
// then logits = fp16(RMSNorm(x) W_vocab). Activations are FP16 values; the projections run here
// on the CPU (fp32 sums), identically for every attention method, so the logits of two methods
// differ only by what their attention contributes, compounded over the layers.
#include <cstdint>
#include <functional>
#include <vector>

#include "core/inputs/inputs.hpp"
#include "core/problem.hpp"

namespace tilemix {

struct RandomModel {
  int layers = 0;
  int hidden = 0;  // hq * d
  int q_dim = 0, kv_dim = 0, vocab = 0;
  // Row-major [fan_in, fan_out], N(0, 1 / fan_in) draws rounded to FP16: per layer wq, wk, wv
  // [hidden, q_dim | kv_dim] and wo [q_dim, hidden]; w_vocab [hidden, vocab].
  std::vector<std::vector<float>> wq, wk, wv, wo;
  std::vector<float> w_vocab;
};

// `shape` must be self-attention (Lq = Lk for every sequence) and validated.
RandomModel make_random_model(const AttentionShape& shape, int layers, int vocab, uint64_t seed);

// The model input: FP16 [total tokens, hq * d], N(0, 1) draws (one stream per token).
std::vector<uint16_t> random_model_input(const AttentionShape& shape, uint64_t seed);

// One attention of the model: FP16 Q [total_q, hq, d], K and V [total_k, hk, d] in; FP16 O
// [total_q, hq, d] out.
using ModelAttention = std::function<std::vector<uint16_t>(const AttentionInputs& qkv)>;

// Logits [total tokens, vocab] (FP16 values as fp32).
std::vector<float> run_random_model(const RandomModel& model, const AttentionShape& shape,
                                    const std::vector<uint16_t>& input, const ModelAttention& attention);

}  // namespace tilemix
