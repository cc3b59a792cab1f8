#pragma once
// Exact attention in double precision (Eigen): full softmax, bottom-right causal, GQA, varlen.
#include <cstdint>
#include <vector>

#include "core/inputs/inputs.hpp"
#include "core/problem.hpp"

namespace tilemix {

// Query rows per score block: a block holds at most kExactRowBlock x Lk scores, never Lq x Lk
// (each thread holds one block at a time).
constexpr int64_t kExactRowBlock = 256;

struct ExactResult {
  std::vector<double> o;    // [total_q, hq, d]; zero rows where a query sees no key
  std::vector<double> lse;  // [hq, total_q], natural log; -inf where a query sees no key
};

// `shape` must be validated (softmax_scale resolved). Uses every OpenMP thread.
ExactResult exact_attention(const AttentionShape& shape, const AttentionInputs& inputs);

// The exact output rounded once to FP16 bits [total_q, hq, d]: an FP16 attention without any
// rounding of its own (the reference attention of the random model on the CPU).
std::vector<uint16_t> exact_attention_fp16(const AttentionShape& shape, const AttentionInputs& inputs);
// The same from an exact result already at hand.
std::vector<uint16_t> rounded_to_fp16(const ExactResult& exact);

}  // namespace tilemix
