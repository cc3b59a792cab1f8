#pragma once
// tilemix-bench model cases (SPEC 8, paper G.1): the logits of the multi-layer random model
// (reference/random_model.hpp) with each method's attention, against the same model with the
// FP16 reference attention.
#include <functional>

#include "core/config/experiment.hpp"
#include "core/report/table.hpp"

namespace tilemix::app {

ResultTable model_bench_table();

// On the GPU (device index `device`): reference torch_like (the unfused cuBLAS FP16 path, the
// paper's "Torch" model), then the config's methods (flash_fp16 and tilemix when it lists none):
// flash_fp16 once per shape, tilemix with each case's routing. On the CPU (device < 0): reference
// the exact attention rounded to FP16, then the emulator of flash_fp16 (zero layout, its tiles)
// and of tilemix. Every finished row goes to `table`, then `on_row`.
void run_model_bench(const ExperimentConfig& config, int device, ResultTable& table,
                     const std::function<void()>& on_row, const std::function<bool()>& stop);

}  // namespace tilemix::app
