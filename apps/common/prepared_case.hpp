#pragma once
// A config case made ready to run: routing plan built for a tile geometry, inputs generated or
// read. Data flows one way: config -> (plan, inputs) -> reference | emulator | kernel -> metrics.
#include <cstdint>
#include <functional>
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

// What a prefill case's run holds in host memory besides its inputs and routing plan.
struct PrefillWork {
  bool reference = true;  // the exact reference, with its per-thread score blocks
  bool emulator = true;   // the emulator, its operands, and its output as doubles
  bool exposure = false;  // the heavy-hitter exposure (tilemix-bench --device cpu)
  int gpu_outputs = 0;    // kernel outputs fetched and kept (compared two at a time as doubles)
};

// Host bytes a case needs at its peak, estimated from its shape before anything is built (SPEC 9:
// out-of-memory is reported with the bytes asked for). A count past 2^63 - 1 is an InputError
// naming the case and the sizes.
int64_t prefill_case_bytes(const CaseSpec& spec, const TileGeometry& geometry, const PrefillWork& work);
// tilemix-check of a decode case: inputs, both caches, emulator (with the split plan of `sm_count`
// multiprocessors), reference, and with `gpu` the kernel's output.
int64_t decode_check_bytes(const CaseSpec& spec, int sm_count, bool gpu);
// The host side of a decode case on the GPU (tilemix-bench): its queries.
int64_t decode_gpu_bytes(const CaseSpec& spec);
// A model case: the weights, activations and logits of the random model, and each attention's
// own buffers (the reference and the emulator on the CPU, or the kernel's output on a GPU).
int64_t model_case_bytes(const CaseSpec& spec, bool gpu);

// Runs `body` for `spec` when `bytes` (its estimate) fit in the host memory available now; throws
// HostOutOfMemory naming the case and the bytes otherwise, and when an allocation in `body` fails.
void run_case_within_host_memory(const CaseSpec& spec, int64_t bytes, const std::function<void()>& body);

// Makes the inputs and builds the plan for `geometry` (the geometry of the kernel the case is
// compared with; the config's block_m/block_n when running on the CPU only) from them.
PreparedCase prepare_case(const CaseSpec& spec, const TileGeometry& geometry);

// Short description of the shape for tables: "B=2 Hq=8 Hk=2 d=128 L=1000/1000 causal".
std::string shape_summary(const AttentionShape& shape);

// Writes <dir>/<case>_{q,k,v,o,o_ref}.npy and <dir>/<case>_meta.json (SPEC/issue 2 --dump).
void dump_case(const std::string& dir, const PreparedCase& pc, const EmulatorResult& out, const ExactResult& ref);

// File-name-safe version of a case name.
std::string file_stem(const std::string& case_name);

}  // namespace tilemix::app
