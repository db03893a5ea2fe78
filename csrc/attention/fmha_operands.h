// Operand preparation shared by the CUDA glues of the fused attention ops: the kernels load
// 16-byte chunks of head dims padded to a multiple of 8, and take every other layout as strides
// (so expand()ed K/V are read in place).
#pragma once
#include <ATen/ATen.h>

#include <cstdint>

namespace mslk::attention {

// Zero-pads the last dim of [B, M, H, D] to a multiple of 8 and makes the tensor 16-byte loadable.
inline at::Tensor fmha_prepare_operand(const at::Tensor& x) {
  at::Tensor y = x;
  const int64_t d = x.size(3);
  if (d % 8 != 0) y = at::constant_pad_nd(y, {0, 8 - d % 8}, 0);
  bool ok = reinterpret_cast<uintptr_t>(y.data_ptr()) % 16 == 0 && y.stride(3) == 1;
  for (int i = 0; i < 3; ++i) ok = ok && (y.size(i) == 1 || y.stride(i) % 8 == 0);
  return ok ? y : y.contiguous();
}

// Element stride of dim i, 0 when the dim has size 1 (its index is always 0).
inline int64_t fmha_stride(const at::Tensor& x, int i) { return x.size(i) == 1 ? 0 : x.stride(i); }

}  // namespace mslk::attention
