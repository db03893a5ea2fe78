// Attention-merge ops (torch.ops.mslk.fmha_merge_attentions_varargs, _backward, and the in-place
// _fmha_merge_attentions_into behind triton_splitk.merge_attentions), written once against a
// backend that runs the contract of merge_params.h, and the template that registers them.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include <optional>
#include <tuple>
#include <vector>

#include "attention/merge_params.h"

namespace mslk::attention {

struct MergeBackend {
  void (*fwd)(const MergeFwdParams&);
  void (*bwd)(const MergeBwdParams&);
};

using at::Tensor;
using at::TensorList;

std::vector<Tensor> merge_varargs(const MergeBackend& be, TensorList attn, TensorList lse, bool write_lse,
                                  std::optional<at::ScalarType> output_dtype, int64_t B, int64_t M, int64_t G,
                                  int64_t H, int64_t Kq);
std::tuple<std::vector<Tensor>, std::vector<Tensor>> merge_varargs_backward(
    const MergeBackend& be, TensorList attn, TensorList lse, const Tensor& attn_out, const Tensor& lse_out,
    const Tensor& grad_attn, const std::optional<Tensor>& grad_lse);
void merge_into(const MergeBackend& be, const Tensor& attn_out, const std::optional<Tensor>& lse_out,
                const Tensor& attn_split, const Tensor& lse_split);

template <const MergeBackend* Be>
struct MergeOps {
  static std::vector<Tensor> fwd(TensorList attn, TensorList lse, bool write_lse,
                                 std::optional<at::ScalarType> dt, int64_t B, int64_t M, int64_t G, int64_t H,
                                 int64_t Kq) {
    return merge_varargs(*Be, attn, lse, write_lse, dt, B, M, G, H, Kq);
  }
  static std::tuple<std::vector<Tensor>, std::vector<Tensor>> bwd(TensorList attn, TensorList lse,
                                                                  const Tensor& out, const Tensor& lse_out,
                                                                  const Tensor& d_out,
                                                                  const std::optional<Tensor>& d_lse) {
    return merge_varargs_backward(*Be, attn, lse, out, lse_out, d_out, d_lse);
  }
  static void into(const Tensor& out, const std::optional<Tensor>& lse_out, const Tensor& attn,
                   const Tensor& lse) {
    merge_into(*Be, out, lse_out, attn, lse);
  }
  static void register_mslk(torch::Library& m) {
    m.impl("fmha_merge_attentions_varargs", &fwd);
    m.impl("merge_attentions_varargs_backward", &bwd);
    m.impl("_fmha_merge_attentions_into", &into);
  }
};

}  // namespace mslk::attention
