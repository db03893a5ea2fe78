// Exact reference of the fused attention with dropout and its backward, on ATen ops (any device),
// in float32 (float64 for float64 inputs). Materializes scores a chunk of heads / query rows at a
// time, so a large problem on the GPU (the CUDA glue's general path) stays within ~1-2 GB.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include <tuple>

#include "attention/fmha_dropout.h"
#include "attention/fmha_mask.h"

namespace mslk::attention {

struct FmhaRefInputs {
  const at::Tensor& q;  // [B, Mq, H, K]
  const at::Tensor& k;  // [B, Mkv, H, K]
  const at::Tensor& v;  // [B, Mkv, H, Kv]
  const std::optional<at::Tensor>& bias;  // broadcastable to [B, H, Mq, Mkv]
  const FmhaMask& mask;
  double scale;
  double dropout_p;         // 0: no dropout
  const FmhaKeepFn* keep;   // the keep-mask when dropout_p > 0
};

// out [B, Mq, H, Kv] (q's dtype) = (P * keep / (1 - p)) V with P the undropped softmax, and its
// undropped LSE [B, H, Mq] (float32; float64 for float64). Rows with no allowed key: 0 and -inf.
std::tuple<at::Tensor, at::Tensor> fmha_reference_fwd_dropout(const FmhaRefInputs& in);

// Gradients of that forward given grad_out [B, Mq, H, Kv] and the forward's lse [B, H, Mq]
// (P = exp(S - lse); rows with lse = -inf have P = 0): dq, dk, dv (contiguous, q's dtype; per
// head) and dbias (bias's shape and dtype) when bias_requires_grad, else an empty tensor.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fmha_reference_bwd(const FmhaRefInputs& in,
                                                                              const at::Tensor& grad_out,
                                                                              const at::Tensor& lse,
                                                                              bool bias_requires_grad);

}  // namespace mslk::attention
