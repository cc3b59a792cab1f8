#pragma once
// Decode cases of tilemix-check: the decode emulator over the case's INT8 or FP16 cache against
// the exact reference of the FP16 tokens the cache was filled with.
#include <string>
#include <vector>

#include "core/config/experiment.hpp"
#include "core/decode/decode_case.hpp"
#include "core/metrics.hpp"
#include "core/report/table.hpp"
#include "kernels/decode/plan.hpp"
#include "reference/decode_emulator.hpp"
#include "reference/exact.hpp"

namespace tilemix::app {

// Multiprocessors the split plan is made for when no GPU is used (an H200's count), so CPU runs
// emulate the splits a GPU run uses.
constexpr int kCpuSmCount = 132;

// What a decode case was checked with. Kernel rows launch the same `launch` plan, whose cuts the
// emulator ran, and compare with `emulator_o` and `reference.o` through add_decode_row.
struct DecodeCheck {
  PreparedDecode prepared;
  DecodeLaunchPlan launch;
  DecodeResult emulator;
  std::vector<double> emulator_o;
  ExactResult reference;
};

// Prepares the case, runs the emulator (the cuts of the case's launch plan for `sm_count`
// multiprocessors) and the exact reference, and adds the emulator~reference row to `table`; `ok`
// becomes false when the row fails.
DecodeCheck run_decode_check(const CaseSpec& spec, DecodeTarget target, ResultTable& table, bool& ok);

// Adds one comparison row of a decode case, in the columns of the check table.
void add_decode_row(ResultTable& table, const CaseSpec& spec, const DecodeCheck& check, const std::string& compare,
                    const Deviation& dev, const Tolerance& tol, bool& ok);

// "B=4 Hq=8 Hk=2 d=128 cache=1,63,64,3000 new=1,4,16,4 splits=40x4 sm=132".
std::string decode_shape_summary(const DecodeShape& shape, const DecodeLaunchPlan& launch);

}  // namespace tilemix::app
