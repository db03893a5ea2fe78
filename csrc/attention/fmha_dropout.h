// Dropout arguments of the fused attention ops (dropout_p, rng_state): their checks, and the
// keep-mask (kernels/fmha_dropout.h) written out as bool tensors for the reference paths.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include <functional>

#include "attention/kernels/fmha_dropout.h"

namespace torch {
class Library;
}

namespace mslk::attention {

// 0 <= dropout_p < 1; with dropout_p > 0, rng_state must be an int64 CPU tensor [seed, offset].
// Returns the mask parameters (p = 0: no dropout; rng_state is then not read).
FmhaDropout fmha_dropout_args(double dropout_p, const std::optional<at::Tensor>& rng_state, const char* op);

// bool [B, nh, nr, Mkv] on `device`: element (b, h, r, j) keeps P of head b * H + h0 + h, query row
// r0 + r, key j. CPU: a host loop; CUDA (CUDA builds): the kernel of kernels/fmha_dropout_mask.cu.
at::Tensor fmha_dropout_keep(const FmhaDropout& d, int64_t B, int64_t H, int64_t h0, int64_t nh, int64_t r0,
                             int64_t nr, int64_t Mkv, at::Device device);

// The keep-mask of a (heads, rows) chunk: (h0, nh, r0, nr) -> bool [B, nh, nr, Mkv].
using FmhaKeepFn = std::function<at::Tensor(int64_t h0, int64_t nh, int64_t r0, int64_t nr)>;

// Registers mslk::fmha_dropout_mask in a TORCH_LIBRARY_IMPL block (CPU here, CUDA in the CUDA glue:
// rng_state is a CPU tensor, `device` says where the mask goes).
void register_fmha_dropout_mask(torch::Library& m);

#if defined(MSLK_WITH_CUDA)
// The CUDA half of fmha_dropout_keep (fmha_dropout_cuda.cpp).
at::Tensor fmha_dropout_keep_cuda(const FmhaDropout& d, int64_t B, int64_t H, int64_t h0, int64_t nh, int64_t r0,
                                  int64_t nr, int64_t Mkv, at::Device device);
#endif

}  // namespace mslk::attention
