// The MoE routing / token-movement ops, written once against a backend (CPU reference or CUDA):
// moe.cpp checks arguments, allocates outputs and fills the parameter structs of moe_params.h;
// the backend does the work. MoeOps<B> registers the ops for one dispatch key.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include <optional>
#include <tuple>

#include "moe/moe_params.h"

namespace mslk::moe {

using at::Tensor;
using OptTensor = std::optional<Tensor>;
using OptInt = std::optional<int64_t>;

struct MoeBackend {
  void (*index_shuffling)(const IndexShufflingParams&);
  void (*gather)(const GatherParams&);
  void (*gather_quant)(const GatherParams&);
  void (*scatter_add)(const ScatterAddParams&);
  void (*scatter_padded)(const ScatterPaddedParams&);
  void (*shuffling)(const ShufflingParams&);
  void (*silu_mul)(const SiluMulParams&);
  void (*silu_mul_quant)(const SiluMulParams&);
  // Returns false when the case is not handled (the caller falls back to ATen scatter_add_).
  bool (*scatter_first_dim)(const ScatterFirstDimParams&);
  bool needs_workspace;  // CUDA kernels take scratch buffers
};

std::tuple<Tensor, Tensor, Tensor> index_shuffling(const MoeBackend& b, const Tensor& scores, OptInt start,
                                                   OptInt end, const OptTensor& valid, int64_t top_k);
Tensor gather_scale_dense_tokens(const MoeBackend& b, const Tensor& x, const Tensor& tok, const Tensor& exp,
                                 const Tensor& scores, const OptTensor& valid);
std::tuple<Tensor, Tensor> gather_scale_quant_dense_tokens(const MoeBackend& b, const Tensor& x, const Tensor& tok,
                                                           const Tensor& exp, const Tensor& scores,
                                                           const OptTensor& scale_ub, const OptTensor& valid);
void scatter_add_dense_tokens(const MoeBackend& b, const Tensor& out, const Tensor& in, const Tensor& tok,
                              const OptTensor& valid);
void scatter_add_padded_tokens(const MoeBackend& b, const Tensor& in, const Tensor& counts, const Tensor& tok,
                               const Tensor& out);
std::tuple<Tensor, Tensor> combine_shuffling(const MoeBackend& b, const Tensor& tokens, const Tensor& counts,
                                             OptInt start, OptInt end, bool padded);
Tensor split_shuffling(const MoeBackend& b, const Tensor& tokens, const Tensor& counts, OptInt start, OptInt end,
                       bool padded, bool init_with_zeros);
Tensor silu_mul(const MoeBackend& b, const Tensor& x0, const Tensor& x1, const OptTensor& valid);
std::tuple<Tensor, Tensor> silu_mul_quant(const MoeBackend& b, const Tensor& x0, const Tensor& x1,
                                          const OptTensor& scale_ub, const OptTensor& valid);
void scatter_add_along_first_dim(const MoeBackend& b, const Tensor& dst, const Tensor& src, const Tensor& index);

template <const MoeBackend* B>
struct MoeOps {
  static std::tuple<Tensor, Tensor, Tensor> shuffle(const Tensor& s, OptInt a, OptInt e, const OptTensor& v,
                                                    int64_t k) {
    return index_shuffling(*B, s, a, e, v, k);
  }
  static Tensor gather(const Tensor& x, const Tensor& t, const Tensor& e, const Tensor& s, const OptTensor& v) {
    return gather_scale_dense_tokens(*B, x, t, e, s, v);
  }
  static std::tuple<Tensor, Tensor> gather_q(const Tensor& x, const Tensor& t, const Tensor& e, const Tensor& s,
                                             const OptTensor& ub, const OptTensor& v) {
    return gather_scale_quant_dense_tokens(*B, x, t, e, s, ub, v);
  }
  static void scatter(const Tensor& o, const Tensor& i, const Tensor& t, const OptTensor& v) {
    scatter_add_dense_tokens(*B, o, i, t, v);
  }
  static void padded(const Tensor& i, const Tensor& c, const Tensor& t, const Tensor& o) {
    scatter_add_padded_tokens(*B, i, c, t, o);
  }
  static std::tuple<Tensor, Tensor> combine(const Tensor& x, const Tensor& c, OptInt a, OptInt e, bool p) {
    return combine_shuffling(*B, x, c, a, e, p);
  }
  static Tensor split(const Tensor& x, const Tensor& c, OptInt a, OptInt e, bool p, bool z) {
    return split_shuffling(*B, x, c, a, e, p, z);
  }
  static Tensor silu(const Tensor& a, const Tensor& b, const OptTensor& v) { return silu_mul(*B, a, b, v); }
  static std::tuple<Tensor, Tensor> silu_q(const Tensor& a, const Tensor& b, const OptTensor& ub,
                                           const OptTensor& v) {
    return silu_mul_quant(*B, a, b, ub, v);
  }
  static void first_dim(const Tensor& d, const Tensor& s, const Tensor& i) { scatter_add_along_first_dim(*B, d, s, i); }

  static void register_ops(torch::Library& m) {
    m.impl("index_shuffling", &shuffle);
    m.impl("gather_scale_dense_tokens", &gather);
    m.impl("gather_scale_quant_dense_tokens", &gather_q);
    m.impl("scatter_add_dense_tokens", &scatter);
    m.impl("scatter_add_padded_tokens", &padded);
    m.impl("combine_shuffling", &combine);
    m.impl("split_shuffling", &split);
    m.impl("silu_mul", &silu);
    m.impl("silu_mul_quant", &silu_q);
    m.impl("scatter_add_along_first_dim", &first_dim);
  }
};

}  // namespace mslk::moe
