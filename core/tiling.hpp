#pragma once
// Compute tiles, routing groups and legality for one sequence (SPEC 3).
#include <cstdint>
#include <optional>

namespace tilemix {

// Compute-tile geometry. The emulator takes the geometry of the kernel it is compared with.
struct TileGeometry {
  int block_m = 128;
  int block_n = 64;
};

// Paper appendix B: b64 = ceil(Lk/64); BLOCK_N_mask = BLOCK_N * ceil(max(b64, BLOCK_N) / BLOCK_N).
int auto_group(int64_t lk, int block_n);

constexpr int kMaxGroups = 64;  // bits in a routing word

// Tiles and groups of one sequence. Query tile m covers rows [m*block_m, min(lq, (m+1)*block_m));
// key group j covers keys [j*mask_width, min(lk, (j+1)*mask_width)).
struct SequenceTiling {
  int64_t lq = 0;
  int64_t lk = 0;
  bool causal = false;
  TileGeometry geometry;
  int tm = 0;          // query tiles
  int tn = 0;          // key tiles
  int g = 1;           // key tiles per routing group
  int64_t mask_width = 0;  // g * block_n keys per group
  int tmask = 0;       // groups per row (<= 64)

  int64_t row_begin(int m) const { return static_cast<int64_t>(m) * geometry.block_m; }
  int64_t row_end(int m) const;
  int64_t group_begin(int j) const { return static_cast<int64_t>(j) * mask_width; }
  int64_t group_end(int j) const;

  // Keys visible to any row of query tile m: [0, legal_key_end(m)); 0 when none.
  int64_t legal_key_end(int m) const;
  // Key tiles executed for query tile m: [0, legal_tile_end(m)).
  int legal_tile_end(int m) const;
  // Groups with at least one legal pair in query tile m: [0, legal_group_end(m)).
  int legal_group_end(int m) const;
  // Legal (query, key) pairs in query tile m x keys [kb, ke).
  int64_t legal_cells(int m, int64_t kb, int64_t ke) const;
};

// Builds the tiling; `group` is a user-given g (nullopt = auto). Throws InputError(where, ...)
// for a non-positive g or when Tmask would exceed 64.
SequenceTiling make_tiling(int64_t lq, int64_t lk, bool causal, TileGeometry geometry,
                           std::optional<int> group, const char* where = "group");

// Checks that a geometry is usable with the INT8 scale blocks (SPEC 5): each compute tile lies
// inside one scale block or covers a whole number of them. Throws InputError.
void validate_geometry(TileGeometry geometry, const char* where = "block_m/block_n");

}  // namespace tilemix
