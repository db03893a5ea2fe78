// dot_out_dtype of matmul_fp8_row / matmul_fp8_block: the dtype of the result (None: bfloat16),
// as the spec's Triton ops allocate it. The accumulator is float32 whatever it names, so a
// bfloat16 or float16 request rounds once, at the end, rather than accumulating in 16 bits.
#pragma once
#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>

#include <optional>

#include "gemm/fp8_rowwise_params.h"

namespace mslk::gemm {

inline at::ScalarType dot_out_dtype_result(std::optional<at::ScalarType> d, const char* op) {
  if (!d) return at::kBFloat16;
  TORCH_CHECK_VALUE(*d == at::kBFloat16 || *d == at::kHalf || *d == at::kFloat, op,
                    ": argument 'dot_out_dtype' (the result's dtype) must be None, torch.bfloat16, torch.float16 or "
                    "torch.float32, got ",
                    *d);
  return *d;
}

// The kernels' OutDtype of a result dtype (bf16 unless fp16 / fp32), and back.
inline OutDtype out_dtype_of(at::ScalarType t) {
  return t == at::kHalf ? OutDtype::kFloat16 : t == at::kFloat ? OutDtype::kFloat32 : OutDtype::kBFloat16;
}
inline at::ScalarType scalar_type(OutDtype d) {
  return d == OutDtype::kFloat16 ? at::kHalf : d == OutDtype::kFloat32 ? at::kFloat : at::kBFloat16;
}

}  // namespace mslk::gemm
