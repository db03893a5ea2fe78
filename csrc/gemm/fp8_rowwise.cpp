// Argument checks, output allocation and shape logic of the rowwise FP8 GEMM ops; every op
// reduces to one or more calls of the backend's single contract (fp8_rowwise_params.h), so
// the CPU reference and the CUDA kernels see identical inputs.
//
// Grouped forms whose group sizes live in a tensor, grouped along M (_grouped_stacked with
// M_sizes, the 2D x 3D _grouped_mm with offsets), go to the backend's device-side grouped GEMM
// (no host sync, CUDA-graph safe; group-size values are then not validated). Where it does not
// apply (the CPU reference, unaligned operands, the other _grouped_mm layouts) the sizes are read
// to the host and one GEMM runs per group. f8f8bf16_rowwise_grouped_dynamic needs no sync (it
// runs the full batch and zeroes the rows past zero_start_index_M on the device).
#include "gemm/fp8_rowwise.h"

#include <ATen/core/DimVector.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/accumulate.h>

#include <cstring>

#include "common/checks.h"

namespace mslk::gemm {
namespace {

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
  p.out_dtype = out_type == at::kHalf ? OutDtype::kFloat16 : OutDtype::kBFloat16;
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

// Group sizes / offsets to the host (see the note at the top of the file).
std::vector<int64_t> host_ints(const Tensor& t, const char* op, const char* arg, const Tensor& ref) {
  check_dtype(t, op, arg, {at::kInt, at::kLong});
  check_dim(t, op, arg, 1, 1);
  check_same_device(t, ref, op, arg, "XQ");
  Tensor c = t.to(at::kCPU, at::kLong).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

// Groups along M on the device (see the note at the top). out [total_M, N] contiguous bf16;
// xs [total_M], ws [G * N] float32 vectors. Returns false when the backend cannot take it.
bool try_device_grouped(const RowwiseBackend& be, const Tensor& XQ, const Tensor& WQ, const Tensor& xs,
                        const Tensor& ws, const Tensor& sizes, bool ends, const Tensor& out, const char* op,
                        const char* arg) {
  if (!be.grouped || !out.is_contiguous()) return false;
  check_dtype(sizes, op, arg, {at::kInt, at::kLong});
  check_dim(sizes, op, arg, 1, 1);
  check_same_device(sizes, XQ, op, arg, "XQ");
  const int64_t G = WQ.size(0);
  TORCH_CHECK_VALUE(sizes.size(0) == G, op, ": argument '", arg, "' must hold one size per group (", G,
                    "), got shape ", sizes.sizes());
  const Tensor sz = sizes.contiguous();
  Fp8GroupedParams p;
  p.x = static_cast<const uint8_t*>(XQ.const_data_ptr());
  p.w = static_cast<const uint8_t*>(WQ.const_data_ptr());
  p.x_scale = xs.const_data_ptr<float>();
  p.w_scale = ws.const_data_ptr<float>();
  p.out = out.data_ptr();
  p.sizes = sz.const_data_ptr();
  p.sizes_int64 = sz.scalar_type() == at::kLong;
  p.sizes_are_ends = ends;
  p.G = G, p.total_M = XQ.size(0), p.N = WQ.size(1), p.K = XQ.size(1);
  p.ldx = XQ.size(0) > 1 ? XQ.stride(0) : p.K;
  p.ldw = p.N > 1 ? WQ.stride(1) : p.K;
  p.w_gs = G > 1 ? WQ.stride(0) : p.N * p.ldw;
  p.fast_accum = true;
  return be.grouped(p);
}

void check_out(const Tensor& out, at::IntArrayRef shape, const Tensor& ref, const char* op) {
  check_dtype(out, op, "output", {at::kBFloat16});
  check_same_device(out, ref, op, "output", "XQ");
  TORCH_CHECK_VALUE(out.sizes() == shape, op, ": argument 'output' must have shape ", shape, ", got ", out.sizes());
  check_last_dim_contiguous(out, op, "output");
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

}  // namespace

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
  Tensor out = at::empty(out_shape(XQ, N), XQ.options().dtype(out_dtype == OutDtype::kFloat16 ? at::kHalf
                                                                                               : at::kBFloat16));
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
    out = *output;
  } else {
    out = at::empty({B, M, N}, XQ.options().dtype(at::kBFloat16));
  }
  gemm(b, XQ, W3, xs, ws, bv, out, use_fast_accum);
  return out;
}

namespace {

void check_lists(TensorList XQ, TensorList WQ, TensorList xs, TensorList ws, const char* op) {
  const size_t G = XQ.size();
  TORCH_CHECK_VALUE(WQ.size() == G && xs.size() == G && ws.size() == G, op,
                    ": 'XQ', 'WQ', 'x_scale' and 'w_scale' must hold one tensor per group, got ", XQ.size(), ", ",
                    WQ.size(), ", ", xs.size(), " and ", ws.size(), " tensors");
  for (size_t g = 0; g < G; ++g) {
    check_fp8(XQ[g], op, "XQ");
    check_fp8(WQ[g], op, "WQ");
    check_dim(XQ[g], op, "XQ", 2, 2);
    check_dim(WQ[g], op, "WQ", 2, 2);
    check_same_device(XQ[g], XQ[0], op, "XQ", "XQ[0]");
    check_same_device(WQ[g], XQ[0], op, "WQ", "XQ");
    TORCH_CHECK_VALUE(WQ[g].size(1) == XQ[g].size(1), op, ": group ", g,
                      ": 'XQ' and 'WQ' must have the same K, got shapes ", XQ[g].sizes(), " and ", WQ[g].sizes());
  }
}

void run_group(const RowwiseBackend& b, const Tensor& X, const Tensor& W, const Tensor& xs, const Tensor& ws,
               const Tensor& out2d, const char* op) {
  const Tensor xv = scale_vec(xs, X.size(0), X, op, "x_scale", "one per row of XQ");
  const Tensor wv = scale_vec(ws, W.size(0), X, op, "w_scale", "one per row of WQ");
  gemm(b, X.unsqueeze(0), W.unsqueeze(0), xv, wv, std::nullopt, out2d.unsqueeze(0), true);
}

// The list forms in one device-side grouped launch: descriptors built here (sizes are known on the
// host), copied to the device from pinned memory without a sync. False: some group breaks TMA's
// rules (or K == 0), nothing was launched, and the caller loops over the groups.
bool try_device_list(const RowwiseBackend& be, TensorList XQ, TensorList WQ, TensorList x_scale,
                     TensorList w_scale, const std::vector<Tensor>& outs, const char* op) {
  if (!be.grouped) return false;
  auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  std::vector<Fp8GroupDesc> descs;  // scale copies made below are stream-ordered: safe to free on return
  int64_t total_m = 0;
  for (size_t g = 0; g < XQ.size(); ++g) {
    const int64_t m = XQ[g].size(0), n = WQ[g].size(0), k = XQ[g].size(1);
    const Tensor xv = scale_vec(x_scale[g], m, XQ[g], op, "x_scale", "one per row of XQ");
    const Tensor wv = scale_vec(w_scale[g], n, XQ[g], op, "w_scale", "one per row of WQ");
    if (m == 0 || n == 0) continue;
    Fp8GroupDesc d{};
    d.a = static_cast<const uint8_t*>(XQ[g].const_data_ptr());
    d.b = static_cast<const uint8_t*>(WQ[g].const_data_ptr());
    d.d = outs[g].data_ptr();
    d.xs = xv.const_data_ptr<float>();
    d.ws = wv.const_data_ptr<float>();
    d.m = m, d.n = n, d.k = k;
    d.lda = m > 1 ? XQ[g].stride(0) : k;
    d.ldb = n > 1 ? WQ[g].stride(0) : k;
    d.ldd = m > 1 ? outs[g].stride(0) : n;
    const bool ok = k > 0 && k % 16 == 0 && d.lda % 16 == 0 && d.ldb % 16 == 0 && d.ldd % 8 == 0 && aligned(d.a) &&
                    aligned(d.b) && aligned(d.d) && aligned(d.ws) && m <= INT32_MAX && n <= INT32_MAX &&
                    k <= INT32_MAX;
    if (!ok) return false;
    descs.push_back(d);
    total_m += m;
  }
  if (descs.empty()) return true;  // every group is empty
  const int64_t bytes = static_cast<int64_t>(descs.size() * sizeof(Fp8GroupDesc));
  Tensor host = at::empty({bytes}, at::TensorOptions().dtype(at::kByte).pinned_memory(true));
  std::memcpy(host.data_ptr(), descs.data(), static_cast<size_t>(bytes));
  const Tensor dev = host.to(XQ[0].device(), /*non_blocking=*/true);  // pinned: no sync, kept alive until copied
  Fp8GroupedParams p;
  p.descs = static_cast<const Fp8GroupDesc*>(dev.const_data_ptr());
  p.G = static_cast<int64_t>(descs.size());
  p.total_M = total_m;
  p.fast_accum = true;
  return be.grouped(p);
}

}  // namespace

std::vector<Tensor> rowwise_grouped(const RowwiseBackend& b, TensorList XQ, TensorList WQ, TensorList x_scale,
                                    TensorList w_scale, const char* op) {
  check_lists(XQ, WQ, x_scale, w_scale, op);
  std::vector<Tensor> outs;
  if (XQ.empty()) return outs;
  c10::OptionalDeviceGuard guard(XQ[0].device());
  for (size_t g = 0; g < XQ.size(); ++g)
    outs.push_back(at::empty({XQ[g].size(0), WQ[g].size(0)}, XQ[g].options().dtype(at::kBFloat16)));
  if (try_device_list(b, XQ, WQ, x_scale, w_scale, outs, op)) return outs;
  for (size_t g = 0; g < XQ.size(); ++g) run_group(b, XQ[g], WQ[g], x_scale[g], w_scale[g], outs[g], op);
  return outs;
}

Tensor rowwise_grouped_cat(const RowwiseBackend& b, TensorList XQ, TensorList WQ, TensorList x_scale,
                           TensorList w_scale) {
  constexpr const char* op = "f8f8bf16_rowwise_grouped_cat";
  check_lists(XQ, WQ, x_scale, w_scale, op);
  TORCH_CHECK_VALUE(!XQ.empty(), op, ": needs at least one group");
  const int64_t N = WQ[0].size(0);
  int64_t total = 0;
  for (size_t g = 0; g < XQ.size(); ++g) {
    TORCH_CHECK_VALUE(WQ[g].size(0) == N, op, ": every group must have the same N to concatenate, group 0 has ", N,
                      ", group ", g, " has ", WQ[g].size(0));
    total += XQ[g].size(0);
  }
  c10::OptionalDeviceGuard guard(XQ[0].device());
  Tensor out = at::empty({total, N}, XQ[0].options().dtype(at::kBFloat16));
  std::vector<Tensor> parts;
  int64_t r0 = 0;
  for (size_t g = 0; g < XQ.size(); ++g) {
    parts.push_back(out.narrow(0, r0, XQ[g].size(0)));
    r0 += XQ[g].size(0);
  }
  if (try_device_list(b, XQ, WQ, x_scale, w_scale, parts, op)) return out;
  for (size_t g = 0; g < XQ.size(); ++g) run_group(b, XQ[g], WQ[g], x_scale[g], w_scale[g], parts[g], op);
  return out;
}

Tensor rowwise_grouped_stacked(const RowwiseBackend& b, const Tensor& XQ, const Tensor& WQ, const Tensor& x_scale,
                               const Tensor& w_scale, const Tensor& M_sizes) {
  constexpr const char* op = "f8f8bf16_rowwise_grouped_stacked";
  check_operands(XQ, WQ, op, 2, 2, 3, 3);
  const int64_t total_M = XQ.size(0), K = XQ.size(1), G = WQ.size(0), N = WQ.size(1);
  TORCH_CHECK_VALUE(WQ.size(2) == K, op, ": 'XQ' [total_M, K] and 'WQ' [G, N, K] must have the same K, got shapes ",
                    XQ.sizes(), " and ", WQ.sizes());
  c10::OptionalDeviceGuard guard(XQ.device());
  const Tensor xs = scale_vec(x_scale, total_M, XQ, op, "x_scale", "one per row of XQ");
  const Tensor ws = scale_vec(w_scale, G * N, XQ, op, "w_scale", "[G, N]");
  if (total_M > 0 && N > 0 && G > 0 && K > 0) {
    Tensor out = at::empty({total_M, N}, XQ.options().dtype(at::kBFloat16));
    if (try_device_grouped(b, XQ, WQ, xs, ws, M_sizes, false, out, op, "M_sizes")) return out;
  }
  const auto sizes = host_ints(M_sizes, op, "M_sizes", XQ);
  TORCH_CHECK_VALUE(static_cast<int64_t>(sizes.size()) == G, op, ": argument 'M_sizes' must hold one size per group (",
                    G, "), got shape ", M_sizes.sizes());
  int64_t sum = 0;
  for (int64_t m : sizes) {
    TORCH_CHECK_VALUE(m >= 0, op, ": argument 'M_sizes' must be non-negative, got ", m);
    sum += m;
  }
  TORCH_CHECK_VALUE(sum <= total_M, op, ": argument 'M_sizes' sums to ", sum, ", more than the ", total_M,
                    " rows of 'XQ'");
  Tensor out = at::empty({total_M, N}, XQ.options().dtype(at::kBFloat16));
  if (sum < total_M) out.narrow(0, sum, total_M - sum).zero_();  // rows past every group
  int64_t r0 = 0;
  for (int64_t g = 0; g < G; ++g) {
    const int64_t m = sizes[g];
    if (m > 0)
      gemm(b, XQ.narrow(0, r0, m).unsqueeze(0), WQ.narrow(0, g, 1), xs.narrow(0, r0, m), ws.narrow(0, g * N, N),
           std::nullopt, out.narrow(0, r0, m).unsqueeze(0), true);
    r0 += m;
  }
  return out;
}

Tensor rowwise_grouped_dynamic(const RowwiseBackend& b, const Tensor& XQ, const Tensor& WQ, const Tensor& x_scale,
                               const Tensor& w_scale, const Tensor& zero_start_index_M, bool zeroing_output_tensor) {
  constexpr const char* op = "f8f8bf16_rowwise_grouped_dynamic";
  check_operands(XQ, WQ, op, 3, 3, 3, 3);
  const int64_t G = XQ.size(0), M = XQ.size(1), K = XQ.size(2), N = WQ.size(1);
  TORCH_CHECK_VALUE(WQ.size(0) == G && WQ.size(2) == K, op,
                    ": 'WQ' must be [G, N, K] for 'XQ' [G, M, K], got shapes ", XQ.sizes(), " and ", WQ.sizes());
  const Tensor& zs = zero_start_index_M;
  check_dtype(zs, op, "zero_start_index_M", {at::kInt, at::kLong});
  check_same_device(zs, XQ, op, "zero_start_index_M", "XQ");
  TORCH_CHECK_VALUE(zs.numel() == G, op, ": argument 'zero_start_index_M' must hold one count per group (", G,
                    "), got shape ", zs.sizes());
  c10::OptionalDeviceGuard guard(XQ.device());
  const Tensor xs = scale_vec(x_scale, G * M, XQ, op, "x_scale", "[G, M]");
  const Tensor ws = scale_vec(w_scale, G * N, XQ, op, "w_scale", "[G, N]");
  Tensor out = at::empty({G, M, N}, XQ.options().dtype(at::kBFloat16));
  // Rows m >= zero_start_index_M[g] are zero (on the device: no host sync). With
  // zeroing_output_tensor=False the reference leaves them unspecified; we zero them anyway.
  (void)zeroing_output_tensor;
  if (b.grouped && G > 0 && M > 0 && N > 0 && K > 0 && (M == 1 || XQ.stride(0) == M * XQ.stride(1))) {
    // Only the first zero_start_index_M[g] rows of each group are computed (device-side grouped GEMM).
    Fp8GroupedParams p;
    const Tensor zc = zs.contiguous();
    p.x = static_cast<const uint8_t*>(XQ.const_data_ptr());
    p.w = static_cast<const uint8_t*>(WQ.const_data_ptr());
    p.x_scale = xs.const_data_ptr<float>();
    p.w_scale = ws.const_data_ptr<float>();
    p.out = out.data_ptr();
    p.sizes = zc.const_data_ptr();
    p.sizes_int64 = zc.scalar_type() == at::kLong;
    p.G = G, p.total_M = G * M, p.N = N, p.K = K, p.fixed_rows = M;
    p.ldx = M > 1 ? XQ.stride(1) : (G > 1 ? XQ.stride(0) : K);
    p.ldw = N > 1 ? WQ.stride(1) : K;
    p.w_gs = G > 1 ? WQ.stride(0) : N * p.ldw;
    p.fast_accum = true;
    if (b.grouped(p)) return out;
  }
  gemm(b, XQ, WQ, xs, ws, std::nullopt, out, true);
  const Tensor rows = at::arange(M, zs.options().dtype(at::kLong)).view({1, M, 1});
  out.masked_fill_(at::ge(rows, zs.reshape({G, 1, 1}).to(at::kLong)), 0);
  return out;
}

Tensor rowwise_grouped_mm(const RowwiseBackend& b, const Tensor& XQ, const Tensor& WQ, const Tensor& x_scale,
                          const Tensor& w_scale, const std::optional<Tensor>& offsets,
                          const std::optional<Tensor>& output) {
  constexpr const char* op = "f8f8bf16_rowwise_grouped_mm";
  check_operands(XQ, WQ, op, 2, 3, 2, 3);
  c10::OptionalDeviceGuard guard(XQ.device());
  const bool x3 = XQ.dim() == 3, w3 = WQ.dim() == 3;
  TORCH_CHECK_VALUE(x3 == w3 ? (x3 ? !offsets : offsets.has_value()) : offsets.has_value(), op,
                    x3 && w3 ? ": 'offsets' must be omitted for 3D x 3D (batched) inputs"
                             : ": 'offsets' is required unless 'XQ' and 'WQ' are both 3D");
  auto make_out = [&](at::IntArrayRef shape) {
    if (output) {
      check_out(*output, shape, XQ, op);
      return *output;
    }
    return at::empty(shape, XQ.options().dtype(at::kBFloat16));
  };
  auto ends = [&](int64_t limit, const char* what) {
    auto v = host_ints(*offsets, op, "offsets", XQ);
    int64_t prev = 0;
    for (int64_t e : v) {
      TORCH_CHECK_VALUE(e >= prev && e <= limit, op, ": argument 'offsets' must be non-decreasing cumulative ends ",
                        "of the groups along ", what, ", within [0, ", limit, "], got ", offsets->cpu());
      prev = e;
    }
    return v;
  };
  if (x3 && w3) {  // batched: [G, M, K] x [G, N, K] -> [G, M, N]
    const int64_t G = XQ.size(0), M = XQ.size(1), K = XQ.size(2), N = WQ.size(1);
    TORCH_CHECK_VALUE(WQ.size(0) == G && WQ.size(2) == K, op, ": 'WQ' must be [G, N, K] for 'XQ' [G, M, K], got ",
                      XQ.sizes(), " and ", WQ.sizes());
    Tensor out = make_out({G, M, N});
    gemm(b, XQ, WQ, scale_vec(x_scale, G * M, XQ, op, "x_scale", "[G, M]"),
         scale_vec(w_scale, G * N, XQ, op, "w_scale", "[G, N]"), std::nullopt, out, true);
    return out;
  }
  if (!x3 && w3) {  // 2D x 3D, groups along M: [total_M, K] x [G, N, K] -> [total_M, N]
    const int64_t TM = XQ.size(0), K = XQ.size(1), G = WQ.size(0), N = WQ.size(1);
    TORCH_CHECK_VALUE(WQ.size(2) == K, op, ": 'XQ' and 'WQ' must have the same K, got ", XQ.sizes(), " and ",
                      WQ.sizes());
    const Tensor xs = scale_vec(x_scale, TM, XQ, op, "x_scale", "one per row of XQ");
    const Tensor ws = scale_vec(w_scale, G * N, XQ, op, "w_scale", "[G, N]");
    Tensor out = make_out({TM, N});
    if (TM > 0 && N > 0 && G > 0 && K > 0 && try_device_grouped(b, XQ, WQ, xs, ws, *offsets, true, out, op, "offsets"))
      return out;
    const auto e = ends(TM, "M");
    TORCH_CHECK_VALUE(static_cast<int64_t>(e.size()) == G, op, ": 'offsets' must hold one end per group (", G,
                      "), got ", e.size());
    int64_t r0 = 0;
    for (int64_t g = 0; g < G; ++g) {
      const int64_t m = e[g] - r0;
      if (m > 0)
        gemm(b, XQ.narrow(0, r0, m).unsqueeze(0), WQ.narrow(0, g, 1), xs.narrow(0, r0, m), ws.narrow(0, g * N, N),
             std::nullopt, out.narrow(0, r0, m).unsqueeze(0), true);
      r0 = e[g];
    }
    if (r0 < TM) out.narrow(0, r0, TM - r0).zero_();
    return out;
  }
  if (x3 && !w3) {  // 3D x 2D, groups along N: [G, M, K] x [total_N, K] -> [M, total_N]
    const int64_t G = XQ.size(0), M = XQ.size(1), K = XQ.size(2), TN = WQ.size(0);
    TORCH_CHECK_VALUE(WQ.size(1) == K, op, ": 'XQ' and 'WQ' must have the same K, got ", XQ.sizes(), " and ",
                      WQ.sizes());
    const Tensor xs = scale_vec(x_scale, G * M, XQ, op, "x_scale", "[G, M]");
    const Tensor ws = scale_vec(w_scale, TN, XQ, op, "w_scale", "one per row of WQ");
    const auto e = ends(TN, "N");
    TORCH_CHECK_VALUE(static_cast<int64_t>(e.size()) == G, op, ": 'offsets' must hold one end per group (", G,
                      "), got ", e.size());
    Tensor out = make_out({M, TN});
    int64_t n0 = 0;
    for (int64_t g = 0; g < G; ++g) {
      const int64_t n = e[g] - n0;
      if (n > 0)
        gemm(b, XQ.narrow(0, g, 1), WQ.narrow(0, n0, n).unsqueeze(0), xs.narrow(0, g * M, M), ws.narrow(0, n0, n),
             std::nullopt, out.narrow(1, n0, n).unsqueeze(0), true);
      n0 = e[g];
    }
    if (n0 < TN) out.narrow(1, n0, TN - n0).zero_();
    return out;
  }
  // 2D x 2D, groups along K: [M, total_K] x [N, total_K] -> [G, M, N]
  const int64_t M = XQ.size(0), TK = XQ.size(1), N = WQ.size(0);
  TORCH_CHECK_VALUE(WQ.size(1) == TK, op, ": 'XQ' and 'WQ' must have the same total K, got ", XQ.sizes(), " and ",
                    WQ.sizes());
  const auto e = ends(TK, "K");
  const int64_t G = static_cast<int64_t>(e.size());
  const Tensor xs = scale_vec(x_scale, G * M, XQ, op, "x_scale", "[G, M]");
  const Tensor ws = scale_vec(w_scale, G * N, XQ, op, "w_scale", "[G, N]");
  Tensor out = make_out({G, M, N});
  int64_t k0 = 0;
  for (int64_t g = 0; g < G; ++g) {
    gemm(b, XQ.narrow(1, k0, e[g] - k0).unsqueeze(0), WQ.narrow(1, k0, e[g] - k0).unsqueeze(0), xs.narrow(0, g * M, M),
         ws.narrow(0, g * N, N), std::nullopt, out.narrow(0, g, 1), true);
    k0 = e[g];
  }
  return out;
}

Tensor matmul_fp8_row(const RowwiseBackend& b, const Tensor& a, const Tensor& bmat, const Tensor& a_scale,
                      const Tensor& b_scale, const std::optional<Tensor>& bias,
                      std::optional<at::ScalarType> dot_out_dtype, bool /*allow_tf32*/, bool fp8_fast_accum,
                      bool /*imprecise_acc*/, bool /*tma_persistent*/, std::optional<bool> /*no_use_persistent*/,
                      bool /*use_warp_specialization*/) {
  constexpr const char* op = "matmul_fp8_row";
  TORCH_CHECK_VALUE(!dot_out_dtype || *dot_out_dtype == at::kFloat, op,
                    ": argument 'dot_out_dtype' (the accumulator type) must be None or torch.float32, got ",
                    *dot_out_dtype);
  return rowwise(b, a, bmat, a_scale, b_scale, bias, fp8_fast_accum, OutDtype::kBFloat16, op);
}

}  // namespace mslk::gemm
