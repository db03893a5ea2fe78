// CUDA half of the attention dropout keep-mask (fmha_dropout.h): the kernel of
// kernels/fmha_dropout_mask.cu, and mslk::fmha_dropout_mask's CUDA registration.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "attention/fmha_dropout.h"
#include "attention/kernels/fmha_dropout_mask.h"

namespace mslk::attention {

at::Tensor fmha_dropout_keep_cuda(const FmhaDropout& d, int64_t B, int64_t H, int64_t h0, int64_t nh, int64_t r0,
                                  int64_t nr, int64_t Mkv, at::Device device) {
  const c10::cuda::CUDAGuard guard(device);
  auto out = at::empty({B, nh, nr, Mkv}, at::TensorOptions().dtype(at::kBool).device(device));
  C10_CUDA_CHECK(fmha_dropout_mask_cuda({d, out.data_ptr<bool>(), B, H, h0, nh, r0, nr, Mkv},
                                        c10::cuda::getCurrentCUDAStream().stream()));
  return out;
}

}  // namespace mslk::attention

// Reached only when rng_state is (wrongly) on the GPU: the shared implementation names the error.
TORCH_LIBRARY_IMPL(mslk, CUDA, m) { mslk::attention::register_fmha_dropout_mask(m); }
