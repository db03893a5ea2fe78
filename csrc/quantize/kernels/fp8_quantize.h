// Launchers of the FP8 quantize/dequantize kernels. Raw pointers and sizes only: this header
// is shared by the torch glue (fp8_quantize_cuda.cpp) and the kernel TUs, which never see torch.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "quantize/fp8_params.h"
#include "quantize/fp8_schedule.h"

namespace mslk::quantize {

// The entry points (fp8_dispatch.cu): each picks a schedule's kernel by shape and `tuning`.
cudaError_t fp8_quantize_rows(const Fp8TileParams& p, const Fp8Tuning& tuning, cudaStream_t stream);    // 1 x K
cudaError_t fp8_quantize_blocks(const Fp8TileParams& p, const Fp8Tuning& tuning, cudaStream_t stream);  // block_m x block_k
cudaError_t fp8_quantize_groups(const Fp8TileParams& p, const Fp8Tuning& tuning, cudaStream_t stream);  // 1 x group

// The schedules behind them.
enum class Fp8Mode { kRows, kBlocks, kGroups };
// The register kernels of fp8_reg.cu: one-shot, staged (whole rows of <= 16 KB, or when `schedule`
// asks) and the register + shared-memory kernel for 256x256 blocks; tiles they cannot hold, or
// inputs that are not 16-byte aligned, go to the two-pass tile kernel. Always launches.
cudaError_t fp8_quantize_reg(const Fp8TileParams& p, Fp8Mode mode, Fp8Schedule schedule, cudaStream_t stream);
// Blocks larger than one CTA's registers, split over a thread-block cluster; false when the
// tiling does not suit it (the caller then takes another path).
bool fp8_quantize_blocks_cluster(const Fp8TileParams& p, cudaStream_t stream);
// Blocks of 64 or 128 KB of input on a persistent TMA ring (fp8_block_ring.cu); false, having
// launched nothing, when the tiling does not suit it.
bool fp8_quantize_blocks_ring(const Fp8TileParams& p, cudaStream_t stream);
// Rows (groups = false) or K-groups of one row on the bulk-copy ring of fp8_bulk.cu
// (MSLK_FP8_SCHEDULE=bulk); false, having launched nothing, when the shape does not suit it.
bool fp8_quantize_rows_bulk(const Fp8TileParams& p, cudaStream_t stream, bool groups);
// Rows of <= 64 KB (groups = false; a team of 1-4 warps a row, `row_team` when not 0) or K-groups
// of rows of <= 16 KB (one warp a row), fp8_warp_rows.cu: rows by default, K-groups with
// MSLK_FP8_SCHEDULE=warp; false, having launched nothing, when the shape does not suit it.
bool fp8_quantize_rows_warp(const Fp8TileParams& p, cudaStream_t stream, bool groups, int row_team);
// Two-pass fallback for any tiling (tiles too large for registers or not 16-byte aligned).
cudaError_t fp8_quantize_tiles(const Fp8TileParams& p, cudaStream_t stream);
// One scale for the whole tensor; amax_scratch is one float of device memory.
cudaError_t fp8_quantize_tensor(const Rows& in, uint8_t* out, float* scale, float* amax_scratch,
                                cudaStream_t stream);

cudaError_t fp8_dequantize(const Fp8DequantParams& p, cudaStream_t stream);

}  // namespace mslk::quantize
