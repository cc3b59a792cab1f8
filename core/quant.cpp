#include "core/quant.hpp"

#include <algorithm>
#include <cmath>

#include "core/fp16.hpp"

namespace tilemix {

int8_t int8_code(float x, float scale) {
  if (scale == 0.0f) return 0;
  const float r = std::nearbyint(x / scale);  // default FP environment: ties to even
  if (std::isnan(r)) return 0;                // non-finite inputs are rejected upstream unless allowed
  return static_cast<int8_t>(std::clamp(r, -127.0f, 127.0f));
}

std::vector<int64_t> scale_block_offsets(const std::vector<int64_t>& cu, int blk) {
  std::vector<int64_t> off(cu.size(), 0);
  for (size_t b = 0; b + 1 < cu.size(); ++b) off[b + 1] = off[b] + (cu[b + 1] - cu[b] + blk - 1) / blk;
  return off;
}

QuantizedTensor quantize_blockwise(const std::vector<uint16_t>& x, const std::vector<int64_t>& cu, int heads,
                                   int d, int blk) {
  QuantizedTensor out;
  out.heads = heads;
  out.d = d;
  out.blk = blk;
  out.block_offset = scale_block_offsets(cu, blk);
  out.codes.assign(x.size(), 0);
  const int64_t nblocks = out.block_offset.back();
  out.scales.assign(static_cast<size_t>(nblocks) * heads, 0.0f);
  const int batch = static_cast<int>(cu.size()) - 1;
  for (int b = 0; b < batch; ++b) {
    const int64_t len = cu[b + 1] - cu[b];
    const int64_t nb = out.block_offset[b + 1] - out.block_offset[b];
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t blkidx = 0; blkidx < nb; ++blkidx) {
      for (int h = 0; h < heads; ++h) {
        const int64_t t0 = cu[b] + blkidx * blk;
        const int64_t t1 = cu[b] + std::min<int64_t>(len, (blkidx + 1) * blk);
        float absmax = 0.0f;
        for (int64_t t = t0; t < t1; ++t) {
          const uint16_t* row = &x[(static_cast<size_t>(t) * heads + h) * d];
          for (int c = 0; c < d; ++c) absmax = std::max(absmax, std::fabs(half_to_float(row[c])));
        }
        const float scale = int8_scale(absmax);
        out.scales[static_cast<size_t>(out.block_offset[b] + blkidx) * heads + h] = scale;
        for (int64_t t = t0; t < t1; ++t) {
          const size_t base = (static_cast<size_t>(t) * heads + h) * d;
          for (int c = 0; c < d; ++c) out.codes[base + c] = int8_code(half_to_float(x[base + c]), scale);
        }
      }
    }
  }
  return out;
}

namespace {

size_t mean_index(int b, int h, int heads, int d, int c) { return (static_cast<size_t>(b) * heads + h) * d + c; }

}  // namespace

std::vector<float> key_means(const std::vector<uint16_t>& k, const std::vector<int64_t>& cu, int hk, int d) {
  const int batch = static_cast<int>(cu.size()) - 1;
  std::vector<float> kbar(static_cast<size_t>(batch) * hk * d, 0.0f);
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < batch; ++b) {
    for (int h = 0; h < hk; ++h) {
      const int64_t len = cu[b + 1] - cu[b];
      if (len == 0) continue;
      // Channels side by side, each with its own sequential sums: tokens are read in order.
      std::vector<float> total(d, 0.0f), partial(d);
      for (int64_t first = 0; first < len; first += kBlockK) {
        std::fill(partial.begin(), partial.end(), 0.0f);
        for (int64_t t = cu[b] + first; t < cu[b] + std::min<int64_t>(len, first + kBlockK); ++t) {
          const uint16_t* row = &k[(static_cast<size_t>(t) * hk + h) * d];
          for (int c = 0; c < d; ++c) partial[c] += half_to_float(row[c]);
        }
        for (int c = 0; c < d; ++c) total[c] += partial[c];
      }
      const float count = static_cast<float>(len);
      for (int c = 0; c < d; ++c) kbar[mean_index(b, h, hk, d, c)] = total[c] / count;
    }
  }
  return kbar;
}

std::vector<uint16_t> smoothed_keys(const std::vector<uint16_t>& k, const std::vector<int64_t>& cu, int hk, int d,
                                    const std::vector<float>& kbar) {
  const int batch = static_cast<int>(cu.size()) - 1;
  std::vector<uint16_t> ks(k.size());
  for (int b = 0; b < batch; ++b) {
#pragma omp parallel for schedule(static)
    for (int64_t t = cu[b]; t < cu[b + 1]; ++t) {
      for (int h = 0; h < hk; ++h) {
        const size_t row = (static_cast<size_t>(t) * hk + h) * d;
        const float* mean = &kbar[mean_index(b, h, hk, d, 0)];
        for (int c = 0; c < d; ++c) ks[row + c] = smoothed_key(half_to_float(k[row + c]), mean[c]);
      }
    }
  }
  return ks;
}

std::vector<float> query_key_means(const std::vector<uint16_t>& q, const std::vector<int64_t>& cu, int hq, int hk,
                                   int d, const std::vector<float>& kbar) {
  const int batch = static_cast<int>(cu.size()) - 1;
  const int group = hq / hk;
  std::vector<float> qkbar(static_cast<size_t>(cu.back()) * hq, 0.0f);
  for (int b = 0; b < batch; ++b) {
#pragma omp parallel for schedule(static)
    for (int64_t t = cu[b]; t < cu[b + 1]; ++t) {
      for (int h = 0; h < hq; ++h) {
        const uint16_t* row = &q[(static_cast<size_t>(t) * hq + h) * d];
        const float* mean = &kbar[mean_index(b, h / group, hk, d, 0)];
        float acc = 0.0f;
        for (int c = 0; c < d; ++c) acc = std::fmaf(half_to_float(row[c]), mean[c], acc);
        qkbar[static_cast<size_t>(t) * hq + h] = acc;
      }
    }
  }
  return qkbar;
}

SmoothedKeys smooth_keys(const AttentionShape& shape, const std::vector<uint16_t>& q, const std::vector<uint16_t>& k) {
  SmoothedKeys out;
  out.kbar = key_means(k, shape.cu_seqlens_k, shape.hk, shape.d);
  out.qkbar = query_key_means(q, shape.cu_seqlens_q, shape.hq, shape.hk, shape.d, out.kbar);
  out.ks = smoothed_keys(k, shape.cu_seqlens_k, shape.hk, shape.d, out.kbar);
  return out;
}

}  // namespace tilemix
