// The preshuffled INT4 ops (int4_gemm.h): preshuffle_i4, f8i4bf16_shuffled and the stacked grouped
// forms; bf16i4bf16_shuffled(_batched) are the rowwise ops under their own names (Int4Ops).
// The shuffled weight layout is the packed one (docs/design/int4_gemm.md says why); preshuffle_i4
// makes the FP8 group scale [G, 8, N] (the spec's shape, 8 equal copies), which the kernels read
// with the row scale as it is (no per-call scale tensors).
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <tuple>
#include <vector>

#include "common/checks.h"
#include "gemm/int4_gemm.h"

namespace mslk::gemm {
namespace {

using int4::Names;

// The FP8-shuffled scales: w_scale_group [..., G, 8, N] float8_e4m3fn, w_scale [..., N] float32.
void check_fp8_scales(const Tensor& gs, const Tensor& w_scale, int64_t N, int64_t dims, const char* op) {
  check_dtype(gs, op, "w_scale_group", {at::kFloat8_e4m3fn});
  check_dtype(w_scale, op, "w_scale", {at::kFloat});
  check_dim(gs, op, "w_scale_group", dims + 1, dims + 1);
  TORCH_CHECK_VALUE(gs.size(-2) == 8 && gs.size(-1) == N, op, ": argument 'w_scale_group' must be [K/group, 8, N] ",
                    "(preshuffle_i4's layout) with N=", N, ", got shape ", gs.sizes());
  check_same_device(w_scale, gs, op, "w_scale", "w_scale_group");
}

void check_x_scale(const Tensor& x_scale, const Tensor& XQ, const char* op) {
  check_dtype(x_scale, op, "x_scale", {at::kFloat});
  check_same_device(x_scale, XQ, op, "x_scale", "XQ");
  TORCH_CHECK_VALUE(x_scale.numel() == XQ.size(0) && x_scale.dim() >= 1 && x_scale.dim() <= 2, op,
                    ": argument 'x_scale' must be [M] or [M, 1] float32 with M=", XQ.size(0), ", got shape ",
                    x_scale.sizes());
}

// M_sizes [E] integers >= 0 summing to at most total_M, read on the host.
std::vector<int64_t> group_sizes(const Tensor& M_sizes, int64_t E, int64_t total, const char* op) {
  check_dtype(M_sizes, op, "M_sizes", {at::kInt, at::kLong});
  TORCH_CHECK_VALUE(M_sizes.dim() == 1 && M_sizes.size(0) == E, op, ": argument 'M_sizes' must be [E] with E=", E,
                    " (the groups of 'WQ'), got shape ", M_sizes.sizes());
  const Tensor h = M_sizes.to(at::kCPU, at::kLong).contiguous();
  std::vector<int64_t> v(h.const_data_ptr<int64_t>(), h.const_data_ptr<int64_t>() + E);
  int64_t sum = 0;
  for (int64_t m : v) {
    TORCH_CHECK_VALUE(m >= 0, op, ": argument 'M_sizes' must hold sizes >= 0, got ", m);
    sum += m;
  }
  TORCH_CHECK_VALUE(sum <= total, op, ": argument 'M_sizes' sums to ", sum, ", more than the ", total,
                    " rows of the activations");
  return v;
}

// One rowwise call a group into rows [off, off + m) of out; rows past the sum are zeroed.
Tensor grouped(const Int4Backend& be, const Tensor& X, const Tensor& WQ, const Tensor& s, const Tensor& z,
               const Tensor& x_scale, const Tensor& row_scale, const std::vector<int64_t>& sizes, const char* op) {
  Tensor out = at::empty({X.size(0), WQ.size(1)}, X.options().dtype(at::kBFloat16));
  int64_t off = 0;
  for (size_t e = 0; e < sizes.size(); ++e) {
    const int64_t m = sizes[e];
    if (m > 0) {
      const int64_t i = static_cast<int64_t>(e);
      int4::run_into(be, X.narrow(0, off, m).unsqueeze(0), WQ[i].unsqueeze(0), s[i].unsqueeze(0),
                     z.defined() ? z[i].unsqueeze(0) : Tensor(), x_scale.defined() ? x_scale.narrow(0, off, m) : Tensor(),
                     out.narrow(0, off, m).unsqueeze(0), op, row_scale.defined() ? row_scale[i] : Tensor());
    }
    off += m;
  }
  if (off < X.size(0)) out.narrow(0, off, X.size(0) - off).zero_();
  return out;
}

void check_stacked(const Tensor& X, const Tensor& WQ, const char* op, const char* xn) {
  check_dim(X, op, xn, 2, 2);
  check_dim(WQ, op, "WQ", 3, 3);
}

std::tuple<Tensor, Tensor> preshuffle_i4_impl(const Tensor& WQ, const Tensor& w_scale) {
  constexpr const char* op = "preshuffle_i4";
  check_dtype(WQ, op, "WQ", {at::kChar});
  check_dim(WQ, op, "WQ", 2, 3);
  check_dtype(w_scale, op, "w_scale", {at::kFloat8_e4m3fn, at::kBFloat16, at::kFloat});
  check_dim(w_scale, op, "w_scale", WQ.dim(), WQ.dim());
  check_same_device(w_scale, WQ, op, "w_scale", "WQ");
  TORCH_CHECK_VALUE(w_scale.size(-1) == WQ.size(-2) && (WQ.dim() == 2 || w_scale.size(0) == WQ.size(0)), op,
                    ": argument 'w_scale' must be [(E,) K/group, N] for 'WQ' ", WQ.sizes(), ", got shape ",
                    w_scale.sizes());
  const Tensor wq = WQ.contiguous().clone();
  if (w_scale.scalar_type() != at::kFloat8_e4m3fn) return {wq, w_scale.contiguous().clone()};
  std::vector<int64_t> shape(w_scale.sizes().begin(), w_scale.sizes().end());
  shape.insert(shape.end() - 1, 8);
  return {wq, w_scale.unsqueeze(-2).expand(shape).contiguous()};
}

}  // namespace

Tensor f8i4bf16_shuffled(const Int4Backend& be, const Tensor& XQ, const Tensor& WQ, const Tensor& x_scale,
                         const Tensor& w_scale, const Tensor& w_scale_group) {
  constexpr const char* op = "f8i4bf16_shuffled";
  check_dtype(XQ, op, "XQ", {at::kFloat8_e4m3fn});
  check_dim(XQ, op, "XQ", 2, 2);
  check_dim(WQ, op, "WQ", 2, 2);
  check_x_scale(x_scale, XQ, op);
  const int64_t N = WQ.size(0);
  check_fp8_scales(w_scale_group, w_scale, N, 2, op);
  TORCH_CHECK_VALUE(w_scale.numel() == N && w_scale.dim() <= 2, op, ": argument 'w_scale' must hold N=", N,
                    " float32 row scales, got shape ", w_scale.sizes());
  const Tensor s0 = w_scale_group.select(1, 0);
  int4::check_operands(XQ, WQ, s0, s0, 2, Names{op, "XQ", "WQ", "w_scale_group", "w_scale_group", true});
  Tensor out = at::empty({XQ.size(0), N}, XQ.options().dtype(at::kBFloat16));
  int4::run_into(be, XQ.unsqueeze(0), WQ.unsqueeze(0), w_scale_group.unsqueeze(0), Tensor(), x_scale,
                 out.unsqueeze(0), op, w_scale);
  return out;
}

Tensor bf16i4bf16_shuffled_grouped(const Int4Backend& be, const Tensor& X, const Tensor& WQ,
                                   const Tensor& w_scale_group, const Tensor& w_zero_group, const Tensor& M_sizes) {
  constexpr const char* op = "bf16i4bf16_shuffled_grouped";
  check_dtype(X, op, "X", {at::kBFloat16});
  check_stacked(X, WQ, op, "X");
  check_dim(w_scale_group, op, "w_scale_group", 3, 3);
  check_dim(w_zero_group, op, "w_zero_group", 3, 3);
  const int64_t E = WQ.size(0);
  TORCH_CHECK_VALUE(w_scale_group.size(0) == E && w_zero_group.size(0) == E, op,
                    ": 'w_scale_group' and 'w_zero_group' must be [E, K/group, N] with E=", E, ", got shapes ",
                    w_scale_group.sizes(), " and ", w_zero_group.sizes());
  int4::check_operands(X.unsqueeze(0).expand({E, X.size(0), X.size(1)}), WQ, w_scale_group, w_zero_group, 3,
                       Names{op, "X", "WQ", "w_scale_group", "w_zero_group"});
  const auto sizes = group_sizes(M_sizes, E, X.size(0), op);
  return grouped(be, X, WQ, w_scale_group, w_zero_group, Tensor(), Tensor(), sizes, op);
}

Tensor f8i4bf16_shuffled_grouped(const Int4Backend& be, const Tensor& XQ, const Tensor& WQ, const Tensor& x_scale,
                                 const Tensor& w_scale, const Tensor& w_scale_group, const Tensor& M_sizes) {
  constexpr const char* op = "f8i4bf16_shuffled_grouped";
  check_dtype(XQ, op, "XQ", {at::kFloat8_e4m3fn});
  check_stacked(XQ, WQ, op, "XQ");
  check_x_scale(x_scale, XQ, op);
  const int64_t E = WQ.size(0), N = WQ.size(1);
  check_fp8_scales(w_scale_group, w_scale, N, 3, op);
  TORCH_CHECK_VALUE(w_scale_group.size(0) == E && w_scale.dim() == 2 && w_scale.size(0) == E && w_scale.size(1) == N,
                    op, ": 'w_scale' must be [E, N] and 'w_scale_group' [E, K/group, 8, N] with E=", E, ", N=", N,
                    ", got shapes ", w_scale.sizes(), " and ", w_scale_group.sizes());
  const Tensor s0 = w_scale_group.select(2, 0);
  int4::check_operands(XQ.unsqueeze(0).expand({E, XQ.size(0), XQ.size(1)}), WQ, s0, s0, 3,
                       Names{op, "XQ", "WQ", "w_scale_group", "w_scale_group", true});
  const auto sizes = group_sizes(M_sizes, E, XQ.size(0), op);
  return grouped(be, XQ, WQ, w_scale_group, Tensor(), x_scale.reshape({-1}), w_scale, sizes, op);
}

}  // namespace mslk::gemm

// Layout only (plain tensor ops): one implementation for every device, the meta one included.
TORCH_LIBRARY_IMPL(mslk, CompositeExplicitAutograd, m) { m.impl("preshuffle_i4", &mslk::gemm::preshuffle_i4_impl); }
