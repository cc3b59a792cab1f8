#include "core/quant_fp8.hpp"

#include <algorithm>
#include <cmath>

#include "core/fp16.hpp"
#include "core/quant.hpp"

namespace tilemix {

Fp8Values quantize_values_fp8(const std::vector<uint16_t>& v, const std::vector<int64_t>& cu, int heads, int d) {
  Fp8Values out;
  out.heads = heads;
  out.d = d;
  out.block_offset = scale_block_offsets(cu, kBlockV);
  const int64_t blocks = out.block_offset.back();
  out.codes.assign(static_cast<size_t>(heads) * d * static_cast<size_t>(out.columns()), 0);  // padding: code 0
  out.scales.assign(static_cast<size_t>(blocks) * heads * d, 0.0f);
  const int batch = static_cast<int>(cu.size()) - 1;
  constexpr int64_t kPair = kVScaleKeys / kBlockV;  // blocks per scale
  for (int b = 0; b < batch; ++b) {
    const int64_t len = cu[b + 1] - cu[b], nb = out.block_offset[b + 1] - out.block_offset[b];
    const int64_t groups = (nb + kPair - 1) / kPair;
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t group = 0; group < groups; ++group) {
      for (int h = 0; h < heads; ++h) {
        const int64_t first = group * kVScaleKeys, end = std::min<int64_t>(len, first + kVScaleKeys);
        const int64_t block_end = std::min(nb, (group + 1) * kPair);
        for (int c = 0; c < d; ++c) {
          float absmax = 0.0f;
          for (int64_t j = first; j < end; ++j) {
            absmax = std::max(absmax, std::fabs(half_to_float(v[(static_cast<size_t>(cu[b] + j) * heads + h) * d + c])));
          }
          const float scale = fp8_scale(absmax);
          for (int64_t block = group * kPair; block < block_end; ++block) {
            out.scales[(static_cast<size_t>(out.block_offset[b] + block) * heads + h) * d + c] = scale;
          }
          uint8_t* row = &out.codes[(static_cast<size_t>(h) * d + c) * static_cast<size_t>(out.columns())];
          for (int64_t j = first; j < end; ++j) {
            row[out.column(b, j)] = fp8_code(half_to_float(v[(static_cast<size_t>(cu[b] + j) * heads + h) * d + c]), scale);
          }
        }
      }
    }
  }
  return out;
}

}  // namespace tilemix
