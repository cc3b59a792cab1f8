#pragma once
// A config case made ready to run: routing plan built for a tile geometry, inputs generated or
// read. Data flows one way: config -> (plan, inputs) -> reference | emulator | kernel -> metrics.
#include <string>
#include <vector>

#include "core/config/experiment.hpp"
#include "core/inputs/inputs.hpp"
#include "core/routing/plan.hpp"
#include "reference/emulator.hpp"
#include "reference/exact.hpp"

namespace tilemix::app {

struct PreparedCase {
  CaseSpec spec;
  RoutingPlan plan;
  AttentionInputs inputs;
};

// Builds the plan for `geometry` (the geometry of the kernel the case is compared with; the
// config's block_m/block_n when running on the CPU only).
PreparedCase prepare_case(const CaseSpec& spec, const TileGeometry& geometry);

// Short description of the shape for tables: "B=2 Hq=8 Hk=2 d=128 L=1000/1000 causal".
std::string shape_summary(const AttentionShape& shape);

// Writes <dir>/<case>_{q,k,v,o,o_ref}.npy and <dir>/<case>_meta.json (SPEC/issue 2 --dump).
void dump_case(const std::string& dir, const PreparedCase& pc, const EmulatorResult& out, const ExactResult& ref);

// File-name-safe version of a case name.
std::string file_stem(const std::string& case_name);

}  // namespace tilemix::app
