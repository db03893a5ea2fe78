// The one tile-config record of the CUTLASS GEMM tables (bf16_grouped_configs.h,
// bf16_wgrad_configs.h, fp8_grouped_configs.h, fp8_rowwise_configs.h) and the helpers every
// dispatcher uses over a table: the id check, the row lookup by tile, the average-group-size
// buckets, the forced-row check and TMA's alignment test. Plain C++ (the glue includes the
// tables to validate a forced row); the row history is in docs/design/gemm_tables.md.
#pragma once
#include <cstdint>

namespace mslk::gemm {

// One CUTLASS instantiation. fast_accum only matters for FP8 (the BF16 tables leave it false);
// swap only for the rowwise FP8 table (out^T = W X^T).
struct TileConfig {
  int tile_m, tile_n, tile_k, cluster_m, cluster_n;
  bool cooperative, fast_accum, swap;
};

// A bucket of the grouped tables: the first whose max_avg_m >= ceil(total_M / G) wins
// (max_avg_m < 0: no limit). The average is known on the host without reading the sizes.
struct AvgMBucket {
  long long max_avg_m;
  TileConfig tile;  // fast_accum ignored: the call's mode picks the row
};

constexpr bool same_tile(const TileConfig& a, const TileConfig& b) {
  return a.tile_m == b.tile_m && a.tile_n == b.tile_n && a.tile_k == b.tile_k && a.cluster_m == b.cluster_m &&
         a.cluster_n == b.cluster_n && a.cooperative == b.cooperative && a.swap == b.swap;
}

// The row of `t` with the tile of `want` in accumulation mode `fast` (-1: none).
template <int N>
constexpr int find_row(const TileConfig (&t)[N], const TileConfig& want, bool fast) {
  for (int i = 0; i < N; ++i)
    if (same_tile(t[i], want) && t[i].fast_accum == fast) return i;
  return -1;
}

// X(id, ...) ids must be 0..n-1 in order (the generated TUs and the run tables index by id).
template <int N>
constexpr bool ids_in_order(const int (&ids)[N]) {
  for (int i = 0; i < N; ++i)
    if (ids[i] != i) return false;
  return true;
}

// Every bucket names a row present in each accumulation mode the table has, and the last
// bucket takes every size.
template <int N, int NB>
constexpr bool buckets_consistent(const TileConfig (&t)[N], const AvgMBucket (&b)[NB], bool has_fast) {
  for (int j = 0; j < NB; ++j)
    if (find_row(t, b[j].tile, false) < 0 || (has_fast && find_row(t, b[j].tile, true) < 0)) return false;
  return b[NB - 1].max_avg_m < 0;
}

// The row of the first bucket that takes avg_m = ceil(total_M / G), in mode `fast`.
template <int N, int NB>
constexpr int bucket_row(const TileConfig (&t)[N], const AvgMBucket (&b)[NB], int64_t total_M, int64_t G,
                         bool fast) {
  const int64_t avg_m = (total_M + G - 1) / G;
  for (int j = 0; j < NB; ++j)
    if (b[j].max_avg_m < 0 || avg_m <= b[j].max_avg_m) return find_row(t, b[j].tile, fast);
  return -1;
}

// A forced row in mode `fast`: the row itself when its mode matches, else the row of the same
// tile in that mode; -1 when the table has no such row.
template <int N>
constexpr int forced_row_in_mode(const TileConfig (&t)[N], int row, bool fast) {
  if (row < 0 || row >= N) return -1;
  return t[row].fast_accum == fast ? row : find_row(t, t[row], fast);
}

inline bool aligned(const void* ptr, int bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; }

}  // namespace mslk::gemm
