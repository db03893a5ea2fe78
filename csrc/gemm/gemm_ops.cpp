// Schemas of the GEMM domain (torch.ops.mslk.*, and torch.ops.triton.* for the ops the
// reference wrote in Triton; the kernels behind them are ours).
#include <torch/library.h>

#include <optional>

#include "common/out_router.h"

TORCH_LIBRARY_FRAGMENT(mslk, m) {
  // FP8 rowwise: out[..., M, N] = x_scale[..., m] * w_scale[n] * (XQ @ WQ^T) (+ bias[n]).
  m.def("f8f8bf16_rowwise(Tensor XQ, Tensor WQ, Tensor x_scale, Tensor w_scale, Tensor? bias=None, "
        "bool use_fast_accum=True) -> Tensor");
  m.def("f8f8bf16_rowwise_out(Tensor XQ, Tensor WQ, Tensor x_scale, Tensor w_scale, Tensor(a!) output, "
        "Tensor? bias=None, bool use_fast_accum=True) -> ()");
  m.def("f8f8bf16_rowwise_batched(Tensor XQ, Tensor WQ, Tensor x_scale, Tensor w_scale, Tensor? bias=None, "
        "bool use_fast_accum=True, Tensor(a!)? output=None) -> Tensor");
  m.def("_f8f8bf16_rowwise_batched_new(Tensor XQ, Tensor WQ, Tensor x_scale, Tensor w_scale, Tensor? bias=None, "
        "bool use_fast_accum=True) -> Tensor");
  m.def("_f8f8bf16_rowwise_batched_into(Tensor XQ, Tensor WQ, Tensor x_scale, Tensor w_scale, Tensor? bias, "
        "bool use_fast_accum, Tensor(a!) output) -> ()");
  m.def("f8f8bf16_rowwise_grouped(Tensor[] XQ, Tensor[] WQ, Tensor[] x_scale, Tensor[] w_scale) -> Tensor[]");
  m.def("f8f8bf16_rowwise_grouped_cat(Tensor[] XQ, Tensor[] WQ, Tensor[] x_scale, Tensor[] w_scale) -> Tensor");
  m.def("f8f8bf16_rowwise_grouped_stacked(Tensor XQ, Tensor WQ, Tensor x_scale, Tensor w_scale, Tensor M_sizes) "
        "-> Tensor");
  m.def("f8f8bf16_rowwise_grouped_dynamic(Tensor XQ, Tensor WQ, Tensor x_scale, Tensor w_scale, "
        "Tensor zero_start_index_M, bool zeroing_output_tensor=True) -> Tensor");
  m.def("f8f8f16_rowwise(Tensor XQ, Tensor WQ, Tensor x_scale, Tensor w_scale, Tensor? bias=None, "
        "bool use_fast_accum=True) -> Tensor");
  // The spec's ROCm preshuffled forms: here the preshuffled layout is the row-major [N, K] one
  // (mslk.quantize.shuffle.ck_preshuffle), which the Hopper kernels' TMA loads swizzle themselves.
  m.def("f8f8bf16_rowwise_preshuffle(Tensor XQ, Tensor WQ, Tensor x_scale, Tensor w_scale, Tensor? bias=None, "
        "bool use_fast_accum=True) -> Tensor");
  m.def("f8f8f16_rowwise_preshuffle(Tensor XQ, Tensor WQ, Tensor x_scale, Tensor w_scale, Tensor? bias=None, "
        "bool use_fast_accum=True) -> Tensor");
  m.def("f8f8bf16_rowwise_grouped_mm(Tensor XQ, Tensor WQ, Tensor x_scale, Tensor w_scale, Tensor? offsets=None, "
        "Tensor(a!)? output=None) -> Tensor");
  m.def("_f8f8bf16_rowwise_grouped_mm_new(Tensor XQ, Tensor WQ, Tensor x_scale, Tensor w_scale, "
        "Tensor? offsets=None) -> Tensor");
  m.def("_f8f8bf16_rowwise_grouped_mm_into(Tensor XQ, Tensor WQ, Tensor x_scale, Tensor w_scale, Tensor? offsets, "
        "Tensor(a!) output) -> ()");

  // FP8 block/group-scaled (csrc/gemm/fp8_blockwise.cpp): out[m, n] = sum over 128-K blocks of
  // x_scale(m, kb) * w_scale(n, kb) * (XQ @ WQ^T restricted to the block).
  m.def("f8f8bf16_blockwise(Tensor XQ, Tensor WQ, Tensor x_scale, Tensor w_scale, int block_m=128, "
        "int block_n=128, int block_k=128) -> Tensor");
  m.def("f8f8bf16_groupwise(Tensor XQ, Tensor WQ, Tensor x_scale, Tensor w_scale) -> Tensor");
  m.def("f8f8bf16_groupwise_grouped(Tensor XQ, Tensor WQ, Tensor x_scale, Tensor w_scale, Tensor M_sizes) "
        "-> Tensor");

  // INT8 (csrc/gemm/int8_gemm.cpp): out = bf16(float(int32 XQ @ WQ^T) * scale).
  m.def("i8i8bf16(Tensor XQ, Tensor WQ, float scale, int split_k=1) -> Tensor");
  m.def("i8i8bf16_dynamic(Tensor XQ, Tensor WQ, Tensor scale, int split_k=1) -> Tensor");
  // INT4 weights (csrc/gemm/int4_gemm.cpp): W [N, K/2] packed, group scale / zero [K/group, N].
  m.def("bf16i4bf16_rowwise(Tensor X, Tensor W, Tensor w_scale_group, Tensor w_zero_group) -> Tensor");
  m.def("bf16i4bf16_rowwise_batched(Tensor X, Tensor WQ, Tensor w_scale, Tensor w_zp) -> Tensor");
  m.def("f8i4bf16_rowwise(Tensor XQ, Tensor WQ, Tensor x_scale, Tensor w_scale, Tensor w_zp) -> Tensor");
  m.def("bf16i4bf16_shuffled(Tensor X, Tensor W, Tensor w_scale_group, Tensor w_zero_group) -> Tensor");
  m.def("bf16i4bf16_shuffled_batched(Tensor X, Tensor WQ, Tensor w_scale, Tensor w_zp) -> Tensor");
  m.def("bf16i4bf16_shuffled_grouped(Tensor X, Tensor WQ, Tensor w_scale_group, Tensor w_zero_group, "
        "Tensor M_sizes) -> Tensor");
  m.def("f8i4bf16_shuffled(Tensor XQ, Tensor WQ, Tensor x_scale, Tensor w_scale, Tensor w_scale_group) -> Tensor");
  m.def("f8i4bf16_shuffled_grouped(Tensor XQ, Tensor WQ, Tensor x_scale, Tensor w_scale, Tensor w_scale_group, "
        "Tensor M_sizes) -> Tensor");
  m.def("preshuffle_i4(Tensor WQ, Tensor w_scale) -> (Tensor, Tensor)");
  // FP32 from nine BF16 products (csrc/gemm/bf16x9.cpp): a router over the internal pair.
  m.def("bf16x9_gemm(Tensor A, Tensor B, Tensor(a!)? output=None) -> Tensor");
  m.def("_bf16x9_gemm_new(Tensor A, Tensor B) -> Tensor");
  m.def("_bf16x9_gemm_into(Tensor A, Tensor B, Tensor(a!) output) -> ()");

  // BF16 grouped (csrc/gemm/bf16_grouped.cpp): X [total_M, K], W [G, N, K], M_sizes [G].
  m.def("bf16bf16bf16_grouped(Tensor[] X, Tensor[] W) -> Tensor[]");
  m.def("bf16bf16bf16_grouped_cat(Tensor[] X, Tensor[] W) -> Tensor");
  m.def("bf16bf16bf16_grouped_dynamic(Tensor X, Tensor W, Tensor zero_start_index_M) -> Tensor");
  m.def("bf16bf16bf16_grouped_stacked(Tensor X, Tensor W, Tensor M_sizes, Tensor(a!)? out=None, "
        "int? num_sms=None) -> Tensor");
  m.def("bf16bf16bf16_grouped_grad(Tensor X, Tensor W, Tensor M_sizes, Tensor(a!)? out=None, "
        "int? num_sms=None) -> Tensor");
  m.def("bf16bf16bf16_grouped_wgrad(Tensor X, Tensor W, Tensor M_sizes, Tensor(a!)? output=None, "
        "bool output_accum=False, int? num_sms=None) -> Tensor");
  m.def("_bf16bf16bf16_grouped_stacked_new(Tensor X, Tensor W, Tensor M_sizes, int? num_sms=None) -> Tensor");
  m.def("_bf16bf16bf16_grouped_stacked_into(Tensor X, Tensor W, Tensor M_sizes, Tensor(a!) out, "
        "int? num_sms=None) -> ()");
  m.def("_bf16bf16bf16_grouped_grad_new(Tensor X, Tensor W, Tensor M_sizes, int? num_sms=None) -> Tensor");
  m.def("_bf16bf16bf16_grouped_grad_into(Tensor X, Tensor W, Tensor M_sizes, Tensor(a!) out, "
        "int? num_sms=None) -> ()");
  m.def("_bf16bf16bf16_grouped_wgrad_new(Tensor X, Tensor W, Tensor M_sizes, bool output_accum=False, "
        "int? num_sms=None) -> Tensor");
  m.def("_bf16bf16bf16_grouped_wgrad_into(Tensor X, Tensor W, Tensor M_sizes, Tensor(a!) output, "
        "bool output_accum=False, int? num_sms=None) -> ()");
}

// The public ops with an optional `out` route to their alias-free internal ops (common/out_router.h).
namespace {

using at::Tensor;
using OptT = std::optional<Tensor>;
using OptI = std::optional<int64_t>;

Tensor rowwise_batched(const Tensor& XQ, const Tensor& WQ, const Tensor& xs, const Tensor& ws, const OptT& bias,
                       bool fast, const OptT& output) {
  if (output) {
    static auto into = mslk::internal_op<void(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                              const OptT&, bool, const Tensor&)>("mslk::_f8f8bf16_rowwise_batched_into");
    into.call(XQ, WQ, xs, ws, bias, fast, *output);
    return *output;
  }
  static auto fresh = mslk::internal_op<Tensor(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                               const OptT&, bool)>("mslk::_f8f8bf16_rowwise_batched_new");
  return fresh.call(XQ, WQ, xs, ws, bias, fast);
}

Tensor rowwise_grouped_mm(const Tensor& XQ, const Tensor& WQ, const Tensor& xs, const Tensor& ws,
                          const OptT& offsets, const OptT& output) {
  if (output) {
    static auto into = mslk::internal_op<void(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                              const OptT&, const Tensor&)>("mslk::_f8f8bf16_rowwise_grouped_mm_into");
    into.call(XQ, WQ, xs, ws, offsets, *output);
    return *output;
  }
  static auto fresh = mslk::internal_op<Tensor(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                               const OptT&)>("mslk::_f8f8bf16_rowwise_grouped_mm_new");
  return fresh.call(XQ, WQ, xs, ws, offsets);
}

// bf16bf16bf16_grouped_stacked and _grad share a signature; the template picks the internal pair.
template <const char* Into, const char* New>
Tensor grouped_stacked_like(const Tensor& X, const Tensor& W, const Tensor& ms, const OptT& out, OptI num_sms) {
  if (out) {
    static auto into = mslk::internal_op<void(const Tensor&, const Tensor&, const Tensor&, const Tensor&, OptI)>(Into);
    into.call(X, W, ms, *out, num_sms);
    return *out;
  }
  static auto fresh = mslk::internal_op<Tensor(const Tensor&, const Tensor&, const Tensor&, OptI)>(New);
  return fresh.call(X, W, ms, num_sms);
}
constexpr char kStackedInto[] = "mslk::_bf16bf16bf16_grouped_stacked_into";
constexpr char kStackedNew[] = "mslk::_bf16bf16bf16_grouped_stacked_new";
constexpr char kGradInto[] = "mslk::_bf16bf16bf16_grouped_grad_into";
constexpr char kGradNew[] = "mslk::_bf16bf16bf16_grouped_grad_new";

Tensor grouped_wgrad(const Tensor& X, const Tensor& W, const Tensor& ms, const OptT& output, bool accum,
                     OptI num_sms) {
  if (output) {
    static auto into = mslk::internal_op<void(const Tensor&, const Tensor&, const Tensor&, const Tensor&, bool, OptI)>(
        "mslk::_bf16bf16bf16_grouped_wgrad_into");
    into.call(X, W, ms, *output, accum, num_sms);
    return *output;
  }
  static auto fresh = mslk::internal_op<Tensor(const Tensor&, const Tensor&, const Tensor&, bool, OptI)>(
      "mslk::_bf16bf16bf16_grouped_wgrad_new");
  return fresh.call(X, W, ms, accum, num_sms);
}

}  // namespace

TORCH_LIBRARY_IMPL(mslk, CompositeImplicitAutograd, m) {
  m.impl("f8f8bf16_rowwise_batched", &rowwise_batched);
  m.impl("f8f8bf16_rowwise_grouped_mm", &rowwise_grouped_mm);
  m.impl("bf16bf16bf16_grouped_stacked", &grouped_stacked_like<kStackedInto, kStackedNew>);
  m.impl("bf16bf16bf16_grouped_grad", &grouped_stacked_like<kGradInto, kGradNew>);
  m.impl("bf16bf16bf16_grouped_wgrad", &grouped_wgrad);
}

TORCH_LIBRARY_FRAGMENT(triton, m) {
  m.def("matmul_fp8_row(Tensor a, Tensor b, Tensor a_scale, Tensor b_scale, Tensor? bias=None, "
        "ScalarType? dot_out_dtype=None, bool allow_tf32=True, bool fp8_fast_accum=True, bool imprecise_acc=False, "
        "bool tma_persistent=True, bool? no_use_persistent=None, bool use_warp_specialization=False) -> Tensor");
  m.def("matmul_fp8_block(Tensor a, Tensor b, Tensor a_scale, Tensor b_scale, int scale_block_m=256, "
        "int scale_block_n=256, int scale_block_k=256, ScalarType? dot_out_dtype=None, bool allow_tf32=True, "
        "bool fp8_fast_accum=True) -> Tensor");
}
