// The one contract every rowwise FP8 GEMM op reduces to, shared by the CPU reference and the
// CUDA kernels (torch-free: kernel TUs include it).
//
//   out[l, m, n] = round_out( x_scale[l, m] * (w_scale[l, n] * acc[l, m, n]) + bias[l, n] )
//   acc[l, m, n] = sum_k float(a[l, m, k]) * float(b[l, n, k])
//
// a, b are FP8 E4M3FN bytes; scales and bias are float32 with unit stride over m / n; the
// batch strides may be 0 (broadcast: one weight for every batch). The accumulator is float32
// on the GPU (wgmma; use_fast_accum=false promotes it to a separate float32 register every few
// k-blocks). The CPU reference accumulates in double, which is exact for E4M3 products, then
// rounds once to float32 before the float32 epilogue above (fused multiply-add for the bias)
// and a round-to-nearest-even conversion to the output type.
#pragma once
#include <cstdint>

#include "gemm/gemm_tuning.h"

namespace mslk::gemm {

enum class OutDtype : int { kBFloat16 = 0, kFloat16 = 1, kFloat32 = 2 };

struct RowwiseGemmParams {
  const uint8_t* a = nullptr;  // [L, M, K] E4M3FN, element (l, m, k) at l*batch_a + m*lda + k
  const uint8_t* b = nullptr;  // [L, N, K] E4M3FN, element (l, n, k) at l*batch_b + n*ldb + k
  const float* x_scale = nullptr;  // [L, M]: l*batch_xs + m
  const float* w_scale = nullptr;  // [L, N]: l*batch_ws + n
  const float* bias = nullptr;     // [L, N] or null: l*batch_bias + n
  void* out = nullptr;             // [L, M, N] of out_dtype: l*batch_d + m*ldd + n
  OutDtype out_dtype = OutDtype::kBFloat16;
  int64_t M = 0, N = 0, K = 0, L = 1;
  int64_t lda = 0, ldb = 0, ldd = 0;
  int64_t batch_a = 0, batch_b = 0, batch_d = 0, batch_xs = 0, batch_ws = 0, batch_bias = 0;
  bool fast_accum = true;
  // CUTLASS tile-scheduler swizzle of the shape's bucket (set by the dispatch; 0: kDefaultSwizzle);
  // tuning.swizzle (MSLK_GEMM_SWIZZLE) overrides it.
  int swizzle = 0;
  // Scratch of the chosen kernel (fp8_rowwise_workspace_bytes), owned by the caller; null when
  // that is 0. The CPU reference ignores it.
  float* workspace = nullptr;
  GemmTuning tuning;  // forced_row: MSLK_FP8_ROWWISE_TILE (last: the kernels' parameter offsets stay)
};

}  // namespace mslk::gemm
