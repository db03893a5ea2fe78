// The device-side grouped form of the rowwise FP8 GEMM (f8f8bf16_rowwise_grouped_stacked and the
// 2D x 3D f8f8bf16_rowwise_grouped_mm): groups along M whose sizes stay in a device tensor, so
// the call never syncs with the host (CUDA-graph safe). Torch-free: kernel TUs include it.
//
//   group g owns rows [S_g, S_g + m_g) of x / out, clipped to [0, total_M), where m_g is
//   sizes[g] (counts) or sizes[g] - sizes[g - 1] (cumulative ends, sizes[-1] = 0), negatives
//   counting as 0, and S_g the sum of the earlier m's;
//   out[r, n] = bf16(x_scale[r] * (w_scale[g * N + n] * sum_k x[r, k] * w[g, n, k])) there,
//   and out rows past the last group are 0.
// The block/group-scaled grouped GEMM (fp8_blockwise.h) takes the same params with its own scale
// strides: group g's x scales start at element S_g * xs_rs, its w scales at g * ws_gs.
// Values are not validated on the device (the glue checks them wherever they are host-visible).
//
// fixed_rows > 0 (the _dynamic layout, x [G, fixed_rows, K] / out [G, fixed_rows, N]): group g
// owns rows [g * fixed_rows, (g + 1) * fixed_rows) of which the first clamp(sizes[g], 0,
// fixed_rows) are computed and the rest are written as zeros; total_M = G * fixed_rows.
//
// Groups known on the host (the list forms) come instead as a device array of descriptors,
// one GEMM each (any M, N, K per group, own pointers and row strides, no tail rows).
#pragma once
#include <cstdint>

#include "gemm/gemm_tuning.h"

namespace mslk::gemm {

struct Fp8GroupDesc {
  const uint8_t* a;   // [m, k], row stride lda
  const uint8_t* b;   // [n, k], row stride ldb
  void* d;            // [m, n] bfloat16, row stride ldd
  const float* xs;    // [m]
  const float* ws;    // [n], 16-byte aligned
  int64_t m, n, k, lda, ldb, ldd;
};

struct Fp8GroupedParams {
  const uint8_t* x = nullptr;        // [total_M, K] E4M3FN, row r at r * ldx
  const uint8_t* w = nullptr;        // [G, N, K] E4M3FN, (g, n) at g * w_gs + n * ldw
  const float* x_scale = nullptr;    // [total_M]
  const float* w_scale = nullptr;    // [G * N]
  void* out = nullptr;               // [total_M, N] bfloat16, contiguous
  const void* sizes = nullptr;       // [G] int32 / int64
  bool sizes_int64 = false;
  bool sizes_are_ends = false;       // cumulative ends (offsets) instead of counts (M_sizes)
  int64_t G = 0, total_M = 0, N = 0, K = 0;
  int64_t ldx = 0, ldw = 0, w_gs = 0;
  int64_t xs_rs = 1;  // x_scale elements a row (rowwise: 1; blockwise: K/128)
  int64_t ws_gs = 0;  // w_scale elements a group; 0: N (rowwise)
  bool fast_accum = true;
  int64_t fixed_rows = 0;
  GemmTuning tuning;  // forced_row: MSLK_FP8_GROUPED_CONFIG
  int raster = 0;     // tile walk: 1 along M first, 2 along N first (MSLK_GEMM_RASTER); 0: the family's default
  // Descriptor mode (non-null: x, w, scales, out and sizes are unused; total_M is the sum of the
  // groups' m, for the tile heuristic). The glue has checked every descriptor for TMA's rules.
  const Fp8GroupDesc* descs = nullptr;
};

}  // namespace mslk::gemm
