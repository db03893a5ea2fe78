// Schemas of the GEMM domain (torch.ops.mslk.*, and torch.ops.triton.* for the ops the
// reference wrote in Triton; the kernels behind them are ours).
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mslk, m) {
  // FP8 rowwise: out[..., M, N] = x_scale[..., m] * w_scale[n] * (XQ @ WQ^T) (+ bias[n]).
  m.def("f8f8bf16_rowwise(Tensor XQ, Tensor WQ, Tensor x_scale, Tensor w_scale, Tensor? bias=None, "
        "bool use_fast_accum=True) -> Tensor");
  m.def("f8f8bf16_rowwise_out(Tensor XQ, Tensor WQ, Tensor x_scale, Tensor w_scale, Tensor(a!) output, "
        "Tensor? bias=None, bool use_fast_accum=True) -> ()");
  m.def("f8f8bf16_rowwise_batched(Tensor XQ, Tensor WQ, Tensor x_scale, Tensor w_scale, Tensor? bias=None, "
        "bool use_fast_accum=True, Tensor(a!)? output=None) -> Tensor");
  m.def("f8f8bf16_rowwise_grouped(Tensor[] XQ, Tensor[] WQ, Tensor[] x_scale, Tensor[] w_scale) -> Tensor[]");
  m.def("f8f8bf16_rowwise_grouped_cat(Tensor[] XQ, Tensor[] WQ, Tensor[] x_scale, Tensor[] w_scale) -> Tensor");
  m.def("f8f8bf16_rowwise_grouped_stacked(Tensor XQ, Tensor WQ, Tensor x_scale, Tensor w_scale, Tensor M_sizes) "
        "-> Tensor");
  m.def("f8f8bf16_rowwise_grouped_dynamic(Tensor XQ, Tensor WQ, Tensor x_scale, Tensor w_scale, "
        "Tensor zero_start_index_M, bool zeroing_output_tensor=True) -> Tensor");
  m.def("f8f8f16_rowwise(Tensor XQ, Tensor WQ, Tensor x_scale, Tensor w_scale, Tensor? bias=None, "
        "bool use_fast_accum=True) -> Tensor");
  m.def("f8f8bf16_rowwise_grouped_mm(Tensor XQ, Tensor WQ, Tensor x_scale, Tensor w_scale, Tensor? offsets=None, "
        "Tensor(a!)? output=None) -> Tensor");

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
}

TORCH_LIBRARY_FRAGMENT(triton, m) {
  m.def("matmul_fp8_row(Tensor a, Tensor b, Tensor a_scale, Tensor b_scale, Tensor? bias=None, "
        "ScalarType? dot_out_dtype=None, bool allow_tf32=True, bool fp8_fast_accum=True, bool imprecise_acc=False, "
        "bool tma_persistent=True, bool? no_use_persistent=None, bool use_warp_specialization=False) -> Tensor");
}
