// The dropout keep-mask of the fused attention ops (fmha_dropout.h) written out as a bool tensor,
// for the reference paths and mslk::fmha_dropout_mask. Torch-free: one indexing rule for the
// host loop and the CUDA kernel.
#pragma once
#include <cstdint>

#include "attention/kernels/fmha_dropout.h"

namespace mslk::attention {

// out[b, h, r, j] (contiguous [B, nh, nr, Mkv]) = fmha_dropout_keep(d, b * H + h0 + h, r0 + r, j).
struct FmhaDropoutMaskParams {
  FmhaDropout d;
  bool* out;
  int64_t B, H, h0, nh, r0, nr, Mkv;
};

// Element group g (four keys 4 * j4 .. 4 * j4 + 3 of one row) of the mask; g < groups(p).
inline int64_t fmha_dropout_mask_groups(const FmhaDropoutMaskParams& p) {
  return p.B * p.nh * p.nr * ((p.Mkv + 3) / 4);
}

MSLK_DROPOUT_FN void fmha_dropout_mask_group(const FmhaDropoutMaskParams& p, int64_t g) {
  const int64_t n4 = (p.Mkv + 3) / 4;
  const int64_t j4 = g % n4, row = g / n4;  // row over [B, nh, nr]
  const int64_t r = row % p.nr, bh = row / p.nr;
  const int64_t b = bh / p.nh, h = bh % p.nh;
  const uint32_t bits = fmha_dropout_keep4(p.d, b * p.H + p.h0 + h, p.r0 + r, j4);
  bool* dst = p.out + row * p.Mkv + 4 * j4;
  for (int e = 0; e < 4 && 4 * j4 + e < p.Mkv; ++e) dst[e] = (bits >> e) & 1u;
}

inline void fmha_dropout_mask_host(const FmhaDropoutMaskParams& p) {
  const int64_t n = fmha_dropout_mask_groups(p);
  for (int64_t g = 0; g < n; ++g) fmha_dropout_mask_group(p, g);
}

}  // namespace mslk::attention

// The kernel exists in CUDA builds only; the host loop above serves CPU-only builds.
#if defined(MSLK_WITH_CUDA) || defined(__CUDACC__)
#include <cuda_runtime.h>

namespace mslk::attention {
// Launches on `stream`; returns the launch error.
cudaError_t fmha_dropout_mask_cuda(const FmhaDropoutMaskParams& p, cudaStream_t stream);

}  // namespace mslk::attention
#endif
