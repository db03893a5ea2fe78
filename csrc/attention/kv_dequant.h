// mslk::dequantize_kv_int4 / mslk::dequantize_kv_fp8: quantized K/V cache rows (the layouts of
// kernels/kv_dequant.h) to a float tensor [..., D]. Checks and parameter set-up shared by the CPU
// reference (kv_dequant.cpp) and the CUDA glue (kv_dequant_cuda.cpp).
#pragma once
#include <ATen/core/Tensor.h>

#include <optional>

#include "attention/kernels/kv_dequant.h"

namespace mslk::attention {

// A checked call: `cache2d` the cache as [rows, words] (a view where possible), `ss1d` the FP8
// scale/shift as [rows], `out` the [..., D] result allocated in `compute_dtype`.
struct KvDequantCall {
  at::Tensor cache2d, ss1d, out;
  KvDequantParams params;
};

// num_groups > 0: INT4 (scale_shift must be empty); num_groups == 0: FP8 with scale_shift.
KvDequantCall kv_dequant_prepare(const at::Tensor& cache, const std::optional<at::Tensor>& scale_shift,
                                 int64_t num_groups, at::ScalarType dtype, at::ScalarType compute_dtype,
                                 const char* op);

}  // namespace mslk::attention
