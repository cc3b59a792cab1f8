#include "core/tiling.hpp"

#include <algorithm>
#include <string>

#include "core/error.hpp"
#include "core/problem.hpp"
#include "core/quant.hpp"

namespace tilemix {

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int auto_group(int64_t lk, int block_n) {
  const int64_t b64 = ceil_div(lk, 64);
  const int64_t mask_width = block_n * ceil_div(std::max<int64_t>(b64, block_n), block_n);
  return static_cast<int>(mask_width / block_n);
}

int64_t SequenceTiling::row_end(int m) const { return std::min(lq, row_begin(m) + geometry.block_m); }
int64_t SequenceTiling::group_end(int j) const { return std::min(lk, group_begin(j) + mask_width); }

int64_t SequenceTiling::legal_key_end(int m) const {
  const int64_t last = row_end(m) - 1;
  if (last < row_begin(m)) return 0;
  return visible_keys(last, lq, lk, causal);
}

int SequenceTiling::legal_tile_end(int m) const {
  return static_cast<int>(ceil_div(legal_key_end(m), geometry.block_n));
}

int SequenceTiling::legal_group_end(int m) const {
  return static_cast<int>(ceil_div(legal_key_end(m), mask_width));
}

int64_t SequenceTiling::legal_cells(int m, int64_t kb, int64_t ke) const {
  ke = std::min(ke, lk);
  if (ke <= kb) return 0;
  const int64_t rb = row_begin(m), re = row_end(m);
  if (!causal) return (re - rb) * (ke - kb);
  int64_t cells = 0;
  for (int64_t i = rb; i < re; ++i) {
    const int64_t vis = visible_keys(i, lq, lk, true);
    cells += std::clamp(vis, kb, ke) - kb;
  }
  return cells;
}

void validate_geometry(TileGeometry geo, const char* where) {
  auto aligned = [](int tile, int blk) { return tile > 0 && (blk % tile == 0 || tile % blk == 0); };
  if (!aligned(geo.block_m, kBlockQ)) {
    throw InputError(where, "block_m " + std::to_string(geo.block_m) + " must divide or be a multiple of BLKQ=" +
                                std::to_string(kBlockQ));
  }
  if (!aligned(geo.block_n, kBlockK)) {
    throw InputError(where, "block_n " + std::to_string(geo.block_n) + " must divide or be a multiple of BLKK=" +
                                std::to_string(kBlockK));
  }
  if (geo.block_m % 16 != 0 || geo.block_n % 16 != 0) {
    throw InputError(where, "block_m and block_n must be multiples of 16");
  }
}

SequenceTiling make_tiling(int64_t lq, int64_t lk, bool causal, TileGeometry geo, std::optional<int> group,
                           const char* where) {
  SequenceTiling t;
  t.lq = lq;
  t.lk = lk;
  t.causal = causal;
  t.geometry = geo;
  t.tm = static_cast<int>(ceil_div(lq, geo.block_m));
  t.tn = static_cast<int>(ceil_div(lk, geo.block_n));
  if (group && *group <= 0) throw InputError(where, "group must be positive, got " + std::to_string(*group));
  t.g = group ? *group : auto_group(lk, geo.block_n);
  t.mask_width = static_cast<int64_t>(t.g) * geo.block_n;
  t.tmask = static_cast<int>(ceil_div(lk, t.mask_width));
  if (t.tmask > kMaxGroups) {
    throw InputError(where, "g=" + std::to_string(t.g) + " gives Tmask=" + std::to_string(t.tmask) +
                                " routing groups for Lk=" + std::to_string(lk) + " (at most 64; use a larger g or auto)");
  }
  return t;
}

}  // namespace tilemix
