// Torch glue shared by the CPU and CUDA implementations of mslk::fmha_fused_bwd (schema in
// attention_ops.cpp): argument checks. The CPU implementation is the reference backward
// (fmha_reference_bwd.h); the CUDA glue (fmha_bwd_cuda.cpp) runs the fused kernel where it applies.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include "attention/kernels/fmha_dropout.h"

namespace mslk::attention {

struct FmhaBwdArgs {
  const at::Tensor& grad_out;
  const at::Tensor& q;
  const at::Tensor& k;
  const at::Tensor& v;
  const at::Tensor& out;
  const at::Tensor& lse;
  const std::optional<at::Tensor>& bias;
  const std::optional<at::Tensor>& seqstart_q;
  const std::optional<at::Tensor>& seqstart_k;
  const std::optional<at::Tensor>& seqlen_k;
  int64_t max_seqlen_q;
  int64_t max_seqlen_k;
  int64_t mask_kind;
  int64_t window_left;
  int64_t window_right;
  double scale;
  double dropout_p;
  const std::optional<at::Tensor>& rng_state;
  bool bias_requires_grad;
};

// The forward's checks (fmha_fwd_check) plus grad_out / out / lse against q, k, v (no device
// sync). Returns the dropout parameters (p = 0: none).
FmhaDropout fmha_bwd_check(const FmhaBwdArgs& a);

}  // namespace mslk::attention
