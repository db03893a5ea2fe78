// Tile-contiguous float32 dQ sums of the Hopper attention backward (FmhaBwdParams::sm90_dq_tiles):
// one 64-row query tile of one head is 64 * K contiguous floats, K / 64 parts of 64 x 64, each in
// the register order of a 64 x 64 wgmma accumulator, so that a warpgroup's part leaves shared
// memory as one bulk reduction (a row-major part would need 64 of them) and the dQ conversion
// (fmha_bwd.cu) reads it back. Part layout: float4 j * 128 + t holds thread t's values 4j .. 4j + 3,
// rows r = 16 (t / 32) + (t % 32) / 4 and r + 8, columns c = 8j + 2 (t % 4) and c + 1, as
// (r, c), (r, c + 1), (r + 8, c), (r + 8, c + 1).
// Tile index: batches of dq_tiles_per_batch tiles; in a varlen batch, sequence s's tiles start at
// q0 / 64 + s (q0 its first row), which keeps the sequences' tiles apart (each adds at most one
// partial tile) within Mq / 64 + num_seqs + 1 tiles.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "attention/kernels/fmha_bwd.h"

namespace mslk::attention {

constexpr int kDqTileRows = 64, kDqPartCols = 64;

__host__ __device__ inline int64_t dq_tiles_per_batch(const FmhaBwdParams& p) {
  return p.seqstart_q != nullptr ? int64_t(p.Mq) / kDqTileRows + p.num_seqs + 1
                                 : (int64_t(p.Mq) + kDqTileRows - 1) / kDqTileRows;
}

// Floats of the tile-contiguous sums.
__host__ __device__ inline int64_t dq_tiles_floats(const FmhaBwdParams& p) {
  return int64_t(p.B) * dq_tiles_per_batch(p) * p.H * kDqTileRows * p.K;
}

// First float of (tile of rows m0 .. m0 + 63 of sequence s, head h); bq, q0: the sequence's batch
// and first row (sm80::SeqBlock), m0 a multiple of 64.
__host__ __device__ inline int64_t dq_tile_offset(const FmhaBwdParams& p, int bq, int q0, int s, int m0, int h) {
  const int64_t tile =
      int64_t(bq) * dq_tiles_per_batch(p) + (p.seqstart_q != nullptr ? q0 / kDqTileRows + s : 0) + m0 / kDqTileRows;
  return (tile * p.H + h) * kDqTileRows * p.K;
}

// The one decision of whether a call uses the tiles (the workspace size, the Hopper kernel variant and
// the dQ conversion all follow it): asked for (sm90_dq_tiles), a head dim of the d64 / d128 kernel,
// atomic mode, and at most twice the floats of the row layout (short sequences would pad every 1 to
// 63 rows to 64: a decode-like Mq = 1 would clear and convert 64 times the rows).
__host__ __device__ inline bool dq_tiles_used(const FmhaBwdParams& p) {
  return p.sm90_dq_tiles != 0 && (p.K == 64 || p.K == 128) && p.K == p.Kv && !p.deterministic &&
         dq_tiles_floats(p) <= 2 * int64_t(p.B) * p.Mq * p.H * p.K;
}

}  // namespace mslk::attention
