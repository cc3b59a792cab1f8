#pragma once
// A prepared decode case, as the decode emulator's tests build it.
#include <cstdint>
#include <vector>

#include "core/config/experiment.hpp"
#include "core/decode/decode_case.hpp"

namespace tilemix::testing {

struct DecodeProblem {
  CaseSpec spec;
  PreparedDecode pd;
};

inline DecodeProblem make_problem(int hq, int hk, int d, const std::vector<int64_t>& cache_len,
                                  const std::vector<int64_t>& new_tokens, LayoutKind layout, double ratio,
                                  InputKind input, uint64_t seed, int append_steps = 2) {
  DecodeProblem p;
  DecodeCaseSpec dc;
  dc.shape.hq = hq;
  dc.shape.hk = hk;
  dc.shape.d = d;
  dc.shape.cache_len = cache_len;
  dc.shape.new_tokens = new_tokens;
  validate_decode(dc.shape);
  dc.append_steps = append_steps;
  p.spec.name = "decode";
  p.spec.where = "test";
  p.spec.shape = dc.shape.attention_shape();
  p.spec.decode = dc;
  p.spec.routing.layout = layout;
  p.spec.routing.ratio = ratio;
  p.spec.routing.seed = seed;
  p.spec.input.kind = input;
  p.spec.input.seed = seed;
  p.pd = prepare_decode(p.spec);
  return p;
}

}  // namespace tilemix::testing
