// CUDA glue of mslk::dequantize_kv_int4 / dequantize_kv_fp8 (kv_dequant.h): the kernel of
// kernels/kv_dequant.cu writes float16 / bfloat16 / float32 directly; float64 goes through float32.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "attention/kv_dequant.h"

namespace mslk::attention {
namespace {

at::Tensor dequant_cuda(const at::Tensor& cache, const std::optional<at::Tensor>& ss, int64_t groups,
                        at::ScalarType dtype, const char* op) {
  const c10::cuda::CUDAGuard guard(cache.device());
  const at::ScalarType compute = dtype == at::kDouble ? at::kFloat : dtype;
  KvDequantCall c = kv_dequant_prepare(cache, ss, groups, dtype, compute, op);
  const int code = compute == at::kHalf ? 0 : compute == at::kBFloat16 ? 1 : 2;
  C10_CUDA_CHECK(kv_dequant_cuda(c.params, code, c10::cuda::getCurrentCUDAStream().stream()));
  return compute == dtype ? c.out : c.out.to(dtype);
}

}  // namespace
}  // namespace mslk::attention

TORCH_LIBRARY_IMPL(mslk, CUDA, m) { mslk::attention::KvDequantOps<&mslk::attention::dequant_cuda>::register_mslk(m); }
