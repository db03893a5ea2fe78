// Argument checks, output allocation and shape logic of the rowwise FP8 GEMM ops; every op
// reduces to one or more calls of the backend's single contract (fp8_rowwise_params.h), so
// the CPU reference and the CUDA kernels see identical inputs.
//
// The grouped forms are in fp8_rowwise_grouped.cpp; the helpers both use: fp8_rowwise_glue.h.
#include "gemm/fp8_rowwise.h"

#include <ATen/core/DimVector.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/accumulate.h>

#include <cstring>
#include <utility>

#include "common/checks.h"
#include "gemm/dot_out_dtype.h"
#include "gemm/fp8_rowwise_glue.h"

namespace mslk::gemm {
// Helpers of the rowwise ops; the ones the grouped ops share are declared in fp8_rowwise_glue.h.
namespace rowwise_glue {

constexpr auto kFp8 = at::kFloat8_e4m3fn;

void check_fp8(const Tensor& t, const char* op, const char* arg) {
  check_dtype(t, op, arg, {kFp8});
  check_last_dim_contiguous(t, op, arg);
}

// t itself when it already is a 1-D vector of unit stride, as reshape({n}).contiguous() would
// return it, but without the view (a dispatcher round trip and a TensorImpl per call).
bool is_unit_vec(const Tensor& t) { return t.dim() == 1 && (t.size(0) <= 1 || t.stride(0) == 1); }

// A float32 scale/bias vector of n values with unit stride (copies only when it must).
Tensor as_vec(const Tensor& s, int64_t n, const Tensor& ref, const char* op, const char* arg, const char* what) {
  check_same_device(s, ref, op, arg, "XQ");
  TORCH_CHECK_VALUE(s.numel() == n, op, ": argument '", arg, "' must hold ", n, " values (", what,
                    "), got shape ", s.sizes());
  return is_unit_vec(s) ? s : s.reshape({n}).contiguous();
}

Tensor scale_vec(const Tensor& s, int64_t n, const Tensor& ref, const char* op, const char* arg, const char* what) {
  check_dtype(s, op, arg, {at::kFloat});
  return as_vec(s, n, ref, op, arg, what);
}

// Bias: bf16 or fp32, n values (or n_alt, e.g. one row per batch); applied in float32.
std::optional<Tensor> bias_vec(const std::optional<Tensor>& bias, int64_t n, int64_t n_alt, const Tensor& ref,
                               const char* op) {
  if (!bias) return std::nullopt;
  check_dtype(*bias, op, "bias", {at::kBFloat16, at::kFloat});
  check_same_device(*bias, ref, op, "bias", "XQ");
  const int64_t len = bias->numel();
  TORCH_CHECK_VALUE(len == n || len == n_alt, op, ": argument 'bias' must hold ", n,
                    n_alt != n ? " or " + std::to_string(n_alt) : std::string(), " values, got shape ", bias->sizes());
  if (is_unit_vec(*bias) && bias->scalar_type() == at::kFloat) return *bias;
  return bias->reshape({len}).to(at::kFloat).contiguous();
}

// What gemm() reads of a 3-D operand [L, rows, cols] (unit stride over cols): sizes, batch and
// row strides. Taken from a 3-D tensor, or from a 2-D one as the [1, rows, cols] that
// unsqueeze(0) / reshape({1, rows, cols}) would give, without making that view.
struct Mat3 {
  int64_t L, rows, cols, batch_stride, row_stride;
};
Mat3 mat3(const Tensor& t) { return {t.size(0), t.size(1), t.size(2), t.stride(0), t.stride(1)}; }
Mat3 mat3_of_2d(const Tensor& t) { return {1, t.size(0), t.size(1), t.size(0) * t.stride(0), t.stride(0)}; }

// One backend call on raw operands (K > 0; the shapes as gemm() below takes them).
void run_gemm(const RowwiseBackend& be, const void* a, const Mat3& A, const void* b, const Mat3& B, const Tensor& xs,
              const Tensor& ws, const std::optional<Tensor>& bias, void* out, at::ScalarType out_type, const Mat3& D,
              bool fast) {
  const int64_t L = A.L, M = A.rows, K = A.cols, N = B.rows;
  RowwiseGemmParams p;
  p.a = static_cast<const uint8_t*>(a);
  p.b = static_cast<const uint8_t*>(b);
  p.x_scale = xs.const_data_ptr<float>();
  p.w_scale = ws.const_data_ptr<float>();
  p.bias = bias ? bias->const_data_ptr<float>() : nullptr;
  p.out = out;
  p.out_dtype = out_dtype_of(out_type);
  p.M = M, p.N = N, p.K = K, p.L = L;
  p.lda = M > 1 ? A.row_stride : K;
  p.ldb = N > 1 ? B.row_stride : K;
  p.ldd = M > 1 ? D.row_stride : N;
  p.batch_a = L > 1 ? A.batch_stride : 0;
  p.batch_b = B.L > 1 ? B.batch_stride : 0;
  p.batch_d = L > 1 ? D.batch_stride : 0;
  p.batch_xs = M;
  p.batch_ws = ws.numel() == N ? 0 : N;
  p.batch_bias = bias && bias->numel() != N ? N : 0;
  p.fast_accum = fast;
  be.run(p);
}

// One backend call: A [L, M, K], B [1 or L, N, K], xs [L*M], ws [N or L*N], bias [N or L*N],
// out [L, M, N] (bf16/fp16, unit stride over n).
void gemm(const RowwiseBackend& be, const Tensor& A, const Tensor& B, const Tensor& xs, const Tensor& ws,
          const std::optional<Tensor>& bias, const Tensor& out, bool fast) {
  const int64_t L = A.size(0), M = A.size(1), K = A.size(2), N = B.size(1);
  if (L == 0 || M == 0 || N == 0) return;
  if (K == 0) {  // empty sum: the accumulator is 0, the result is the bias (or 0)
    if (bias)
      out.copy_(bias->view({bias->numel() / N, 1, N}).expand({L, M, N}));
    else
      out.zero_();
    return;
  }
  run_gemm(be, A.const_data_ptr(), mat3(A), B.const_data_ptr(), mat3(B), xs, ws, bias, out.data_ptr(),
           out.scalar_type(), mat3(out), fast);
}


at::DimVector out_shape(const Tensor& XQ, int64_t N) {
  at::DimVector s(XQ.sizes().begin(), XQ.sizes().end() - 1);
  s.push_back(N);
  return s;
}

void check_out(const Tensor& out, at::IntArrayRef shape, const Tensor& ref, const char* op) {
  check_dtype(out, op, "output", {at::kBFloat16});
  check_same_device(out, ref, op, "output", "XQ");
  TORCH_CHECK_VALUE(out.sizes() == shape, op, ": argument 'output' must have shape ", shape, ", got ", out.sizes());
  check_last_dim_contiguous(out, op, "output");
}

// An output sharing bytes with an input would overwrite operands other tiles still read.
void check_disjoint(const Tensor& out, const Tensor& in, const char* op, const char* arg) {
  if (out.numel() == 0 || in.numel() == 0 || !out.has_storage() || !in.has_storage() ||
      !out.storage().is_alias_of(in.storage()))
    return;
  auto range = [](const Tensor& t) {
    int64_t span = 1;
    for (int64_t d = 0; d < t.dim(); ++d) span += (t.size(d) - 1) * t.stride(d);
    const auto* lo = static_cast<const char*>(t.const_data_ptr());
    return std::make_pair(lo, lo + span * int64_t(t.element_size()));
  };
  const auto [olo, ohi] = range(out);
  const auto [ilo, ihi] = range(in);
  TORCH_CHECK_VALUE(ohi <= ilo || ihi <= olo, op, ": argument 'output' overlaps argument '", arg,
                    "' in memory; pass an output that shares no memory with the inputs");
}

void check_out_disjoint(const Tensor& out, const Tensor& XQ, const Tensor& WQ, const Tensor& x_scale,
                        const Tensor& w_scale, const std::optional<Tensor>& bias, const char* op) {
  check_disjoint(out, XQ, op, "XQ");
  check_disjoint(out, WQ, op, "WQ");
  check_disjoint(out, x_scale, op, "x_scale");
  check_disjoint(out, w_scale, op, "w_scale");
  if (bias) check_disjoint(out, *bias, op, "bias");
}

// The checks every op starts with: 'XQ' and 'WQ' fp8, of dims [x_lo, x_hi] and [w_lo, w_hi], on one device.
void check_operands(const Tensor& XQ, const Tensor& WQ, const char* op, int64_t x_lo, int64_t x_hi, int64_t w_lo,
                    int64_t w_hi) {
  check_fp8(XQ, op, "XQ");
  check_fp8(WQ, op, "WQ");
  check_dim(XQ, op, "XQ", x_lo, x_hi);
  check_dim(WQ, op, "WQ", w_lo, w_hi);
  check_same_device(WQ, XQ, op, "WQ", "XQ");
}

// f8f8bf16_rowwise[_out]: 'XQ' [..., M, K] (2 to 64 dims) times 'WQ' [N, K].
void check_rowwise_operands(const Tensor& XQ, const Tensor& WQ, const char* op) {
  check_operands(XQ, WQ, op, 2, 64, 2, 2);
  TORCH_CHECK_VALUE(WQ.size(1) == XQ.size(-1), op, ": 'XQ' and 'WQ' must have the same K (last dim), got shapes ",
                    XQ.sizes(), " and ", WQ.sizes());
}

// [..., M, N] output with unit last stride as [1, R, N] (a view when the leading dims collapse).
Tensor rows_view(const Tensor& out, const char* op) {
  const int64_t N = out.size(-1), R = N == 0 ? c10::multiply_integers(out.sizes().begin(), out.sizes().end() - 1)
                                             : out.numel() / N;
  if (out.dim() == 2) return out.unsqueeze(0);
  TORCH_CHECK_VALUE(out.is_contiguous(), op, ": argument 'output' with more than 2 dimensions must be contiguous, ",
                    "got strides ", out.strides());
  return out.view({1, R, N});
}

// gemm(XQ.reshape({1, R, K}), WQ.unsqueeze(0), ..., [1, R, N] view of out) for 'XQ' [..., M, K],
// 'WQ' [N, K] and out [..., M, N] (the caller's 'output' when out_is_arg: rows_view's rule). A 2-D
// 'XQ' with K > 0 (every decode and prefill call) goes to the backend as it is: no view is made.
void gemm_rows(const RowwiseBackend& be, const Tensor& XQ, const Tensor& WQ, const Tensor& xs, const Tensor& ws,
               const std::optional<Tensor>& bias, const Tensor& out, bool fast, const char* op, bool out_is_arg) {
  const int64_t K = XQ.size(-1), N = WQ.size(0);
  if (XQ.dim() == 2 && out.dim() == 2 && K > 0) {
    if (XQ.size(0) == 0 || N == 0) return;
    run_gemm(be, XQ.const_data_ptr(), mat3_of_2d(XQ), WQ.const_data_ptr(), mat3_of_2d(WQ), xs, ws, bias,
             out.data_ptr(), out.scalar_type(), mat3_of_2d(out), fast);
    return;
  }
  const int64_t R = c10::multiply_integers(XQ.sizes().begin(), XQ.sizes().end() - 1);
  gemm(be, XQ.reshape({1, R, K}), WQ.unsqueeze(0), xs, ws, bias, out_is_arg ? rows_view(out, op) : out.view({1, R, N}),
       fast);
}

}  // namespace rowwise_glue

using namespace rowwise_glue;

Tensor rowwise(const RowwiseBackend& b, const Tensor& XQ, const Tensor& WQ, const Tensor& x_scale,
               const Tensor& w_scale, const std::optional<Tensor>& bias, bool use_fast_accum, OutDtype out_dtype,
               const char* op) {
  check_rowwise_operands(XQ, WQ, op);
  const int64_t N = WQ.size(0);
  c10::OptionalDeviceGuard guard(XQ.device());
  const int64_t R = c10::multiply_integers(XQ.sizes().begin(), XQ.sizes().end() - 1);
  const Tensor xs = scale_vec(x_scale, R, XQ, op, "x_scale", "one per row of XQ");
  const Tensor ws = scale_vec(w_scale, N, XQ, op, "w_scale", "one per row of WQ");
  const auto bv = bias_vec(bias, N, N, XQ, op);
  Tensor out = at::empty(out_shape(XQ, N), XQ.options().dtype(scalar_type(out_dtype)));
  gemm_rows(b, XQ, WQ, xs, ws, bv, out, use_fast_accum, op, /*out_is_arg=*/false);
  return out;
}

void rowwise_out(const RowwiseBackend& b, const Tensor& XQ, const Tensor& WQ, const Tensor& x_scale,
                 const Tensor& w_scale, const Tensor& output, const std::optional<Tensor>& bias,
                 bool use_fast_accum) {
  constexpr const char* op = "f8f8bf16_rowwise_out";
  check_rowwise_operands(XQ, WQ, op);
  const int64_t N = WQ.size(0);
  check_out(output, out_shape(XQ, N), XQ, op);
  check_out_disjoint(output, XQ, WQ, x_scale, w_scale, bias, op);
  c10::OptionalDeviceGuard guard(XQ.device());
  const int64_t R = c10::multiply_integers(XQ.sizes().begin(), XQ.sizes().end() - 1);
  const Tensor xs = scale_vec(x_scale, R, XQ, op, "x_scale", "one per row of XQ");
  const Tensor ws = scale_vec(w_scale, N, XQ, op, "w_scale", "one per row of WQ");
  gemm_rows(b, XQ, WQ, xs, ws, bias_vec(bias, N, N, XQ, op), output, use_fast_accum, op, /*out_is_arg=*/true);
}

Tensor rowwise_batched(const RowwiseBackend& b, const Tensor& XQ, const Tensor& WQ, const Tensor& x_scale,
                       const Tensor& w_scale, const std::optional<Tensor>& bias, bool use_fast_accum,
                       const std::optional<Tensor>& output) {
  constexpr const char* op = "f8f8bf16_rowwise_batched";
  check_operands(XQ, WQ, op, 3, 3, 2, 3);
  const int64_t B = XQ.size(0), M = XQ.size(1), K = XQ.size(2);
  const Tensor W3 = WQ.dim() == 2 ? WQ.unsqueeze(0) : WQ;
  const int64_t N = W3.size(1);
  TORCH_CHECK_VALUE(W3.size(2) == K && (WQ.dim() == 2 || W3.size(0) == B), op,
                    ": 'WQ' must be [B, N, K] (or [N, K]) for 'XQ' [B, M, K], got shapes ", XQ.sizes(), " and ",
                    WQ.sizes());
  c10::OptionalDeviceGuard guard(XQ.device());
  const Tensor xs = scale_vec(x_scale, B * M, XQ, op, "x_scale", "one per row of XQ");
  const Tensor ws = scale_vec(w_scale, W3.size(0) * N, XQ, op, "w_scale", "one per row of WQ");
  const auto bv = bias_vec(bias, N, B * N, XQ, op);
  Tensor out;
  if (output) {
    check_out(*output, {B, M, N}, XQ, op);
    check_out_disjoint(*output, XQ, WQ, x_scale, w_scale, bias, op);
    out = *output;
  } else {
    out = at::empty({B, M, N}, XQ.options().dtype(at::kBFloat16));
  }
  gemm(b, XQ, W3, xs, ws, bv, out, use_fast_accum);
  return out;
}

Tensor matmul_fp8_row(const RowwiseBackend& b, const Tensor& a, const Tensor& bmat, const Tensor& a_scale,
                      const Tensor& b_scale, const std::optional<Tensor>& bias,
                      std::optional<at::ScalarType> dot_out_dtype, bool /*allow_tf32*/, bool fp8_fast_accum,
                      bool /*imprecise_acc*/, bool /*tma_persistent*/, std::optional<bool> /*no_use_persistent*/,
                      bool /*use_warp_specialization*/) {
  constexpr const char* op = "matmul_fp8_row";
  const at::ScalarType st = dot_out_dtype_result(dot_out_dtype, op);
  const OutDtype out_dtype = out_dtype_of(st);
  // The spec names this op's arguments a / b / a_scale / b_scale; check them under those names
  // before the shared f8f8bf16_rowwise path (whose messages say XQ / WQ / x_scale / w_scale).
  check_fp8(a, op, "a");
  check_fp8(bmat, op, "b");
  check_dim(a, op, "a", 2, 64);
  check_dim(bmat, op, "b", 2, 2);
  check_same_device(bmat, a, op, "b", "a");
  TORCH_CHECK_VALUE(bmat.size(1) == a.size(-1), op, ": 'a' and 'b' must have the same K (last dim), got shapes ",
                    a.sizes(), " and ", bmat.sizes());
  check_dtype(a_scale, op, "a_scale", {at::kFloat});
  check_dtype(b_scale, op, "b_scale", {at::kFloat});
  const int64_t rows = c10::multiply_integers(a.sizes().begin(), a.sizes().end() - 1);
  TORCH_CHECK_VALUE(a_scale.numel() == rows, op, ": argument 'a_scale' must hold ", rows,
                    " values (one per row of a), got shape ", a_scale.sizes());
  TORCH_CHECK_VALUE(b_scale.numel() == bmat.size(0), op, ": argument 'b_scale' must hold ", bmat.size(0),
                    " values (one per row of b), got shape ", b_scale.sizes());
  return rowwise(b, a, bmat, a_scale, b_scale, bias, fp8_fast_accum, out_dtype, op);
}

}  // namespace mslk::gemm
