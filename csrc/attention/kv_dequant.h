// mslk::dequantize_kv_int4 / mslk::dequantize_kv_fp8: quantized K/V cache rows (the layouts of
// kernels/kv_dequant.h) to a float tensor [..., D]. Checks and parameter set-up shared by the CPU
// reference (kv_dequant.cpp) and the CUDA glue (kv_dequant_cuda.cpp).
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

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

// The two ops over one backend: Run(cache, scale_shift, num_groups, dtype, op) dequantizes
// (num_groups 0: FP8). Each backend registers KvDequantOps<its Run>.
using KvDequantRun = at::Tensor (*)(const at::Tensor&, const std::optional<at::Tensor>&, int64_t, at::ScalarType,
                                    const char*);

template <KvDequantRun Run>
struct KvDequantOps {
  static at::Tensor int4(const at::Tensor& cache, int64_t num_groups, at::ScalarType dtype) {
    TORCH_CHECK_VALUE(num_groups >= 1, "mslk.dequantize_kv_int4: argument 'num_groups' must be 1, 2, 4 or 8, got ",
                      num_groups);
    return Run(cache, std::nullopt, num_groups, dtype, "mslk.dequantize_kv_int4");
  }
  static at::Tensor fp8(const at::Tensor& cache, const at::Tensor& scale_shift, at::ScalarType dtype) {
    return Run(cache, scale_shift, 0, dtype, "mslk.dequantize_kv_fp8");
  }
  static void register_mslk(torch::Library& m) {
    m.impl("dequantize_kv_int4", &int4);
    m.impl("dequantize_kv_fp8", &fp8);
  }
};

}  // namespace mslk::attention
