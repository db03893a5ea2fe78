// Which kernel quantizes rows, blocks and K-groups: the shape picks a schedule's kernel by default,
// Fp8Tuning::schedule (MSLK_FP8_SCHEDULE, read by the glue) forces one where it can take the shape.
//   rows:    a team of 1-4 warps a row for rows of <= 64 KB (fp8_warp_rows.cu), else the register
//            kernels (fp8_reg.cu); bulk: the bulk-copy ring (fp8_bulk.cu).
//   blocks:  256x256 blocks of 16-bit input on the TMA ring (fp8_block_ring.cu; ring: its other
//            tilings too), else the register kernels; cluster: large blocks over a thread-block
//            cluster (fp8_cluster.cu).
//   groups:  the register kernels; warp / bulk: fp8_warp_rows.cu / fp8_bulk.cu.
// Every path computes the same bits. Why these defaults: docs/design/quantize.md.
#include "quantize/kernels/fp8_quantize.h"

namespace mslk::quantize {
namespace {

// The one tiling measured on the ring so far (quantize_fp8_block's default).
bool ring_default_tile(const Fp8TileParams& p) {
  return p.in.dtype != Dtype::kFloat32 && p.tile_m == 256 && p.tile_k == 256;
}

}  // namespace

cudaError_t fp8_quantize_rows(const Fp8TileParams& p, const Fp8Tuning& tuning, cudaStream_t s) {
  const Fp8Schedule sched = tuning.schedule;
  if (sched == Fp8Schedule::kBulk && fp8_quantize_rows_bulk(p, s, false)) return cudaGetLastError();
  if ((sched == Fp8Schedule::kWarp || sched == Fp8Schedule::kAuto) && fp8_quantize_rows_warp(p, s, false, tuning.row_team))
    return cudaGetLastError();
  return fp8_quantize_reg(p, Fp8Mode::kRows, sched, s);
}

cudaError_t fp8_quantize_blocks(const Fp8TileParams& p, const Fp8Tuning& tuning, cudaStream_t s) {
  const Fp8Schedule sched = tuning.schedule;
  if (sched == Fp8Schedule::kCluster && p.in.M > 0 && p.in.K > 0 && fp8_quantize_blocks_cluster(p, s))
    return cudaGetLastError();
  if ((sched == Fp8Schedule::kRing || (sched == Fp8Schedule::kAuto && ring_default_tile(p))) &&
      fp8_quantize_blocks_ring(p, s))
    return cudaGetLastError();
  return fp8_quantize_reg(p, Fp8Mode::kBlocks, sched, s);
}

cudaError_t fp8_quantize_groups(const Fp8TileParams& p, const Fp8Tuning& tuning, cudaStream_t s) {
  const Fp8Schedule sched = tuning.schedule;
  if (sched == Fp8Schedule::kBulk && fp8_quantize_rows_bulk(p, s, true)) return cudaGetLastError();
  if (sched == Fp8Schedule::kWarp && fp8_quantize_rows_warp(p, s, true, tuning.row_team)) return cudaGetLastError();
  return fp8_quantize_reg(p, Fp8Mode::kGroups, sched, s);
}

}  // namespace mslk::quantize
