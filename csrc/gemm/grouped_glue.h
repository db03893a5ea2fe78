// Glue shared by the BF16 and FP8 grouped ops (bf16_grouped.cpp, fp8_rowwise_grouped.cpp,
// fp8_blockwise.cpp).
#pragma once
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <vector>

#include "gemm/fp8_grouped_params.h"

namespace mslk::gemm {

// The _cat forms' output: [sum of the groups' rows, N] of `opts` (N = W[0].size(0), which every
// group must share) and, in *parts, the rows of each group. X non-empty; call under the device guard.
inline at::Tensor cat_output(at::TensorList X, at::TensorList W, const at::TensorOptions& opts, const char* op,
                             std::vector<at::Tensor>* parts) {
  const int64_t N = W[0].size(0);
  int64_t total = 0;
  for (size_t g = 0; g < X.size(); ++g) {
    TORCH_CHECK_VALUE(W[g].size(0) == N, op, ": every group must have the same N to concatenate, group 0 has ", N,
                      ", group ", g, " has ", W[g].size(0));
    total += X[g].size(0);
  }
  at::Tensor out = at::empty({total, N}, opts);
  int64_t r0 = 0;
  for (size_t g = 0; g < X.size(); ++g) {
    parts->push_back(out.narrow(0, r0, X[g].size(0)));
    r0 += X[g].size(0);
  }
  return out;
}

// The device-side grouped FP8 params (fp8_grouped_params.h) of x rows [total_M, K] at row stride
// ldx (K: XQ's last dimension), WQ [G, N, K] (unit stride along K), float32 scale buffers xs / ws,
// a contiguous device size vector and a contiguous bf16 out [total_M, N]. The caller sets its
// family's fields (sizes_are_ends, fixed_rows, the scale steps, fast_accum) and keeps `sizes`
// alive for the call.
inline Fp8GroupedParams fp8_grouped_params(const at::Tensor& XQ, int64_t ldx, int64_t total_M, const at::Tensor& WQ,
                                           const at::Tensor& xs, const at::Tensor& ws, const at::Tensor& sizes,
                                           const at::Tensor& out) {
  Fp8GroupedParams p;
  p.x = static_cast<const uint8_t*>(XQ.const_data_ptr());
  p.w = static_cast<const uint8_t*>(WQ.const_data_ptr());
  p.x_scale = xs.const_data_ptr<float>();
  p.w_scale = ws.const_data_ptr<float>();
  p.out = out.data_ptr();
  p.sizes = sizes.const_data_ptr();
  p.sizes_int64 = sizes.scalar_type() == at::kLong;
  p.G = WQ.size(0), p.total_M = total_M, p.N = WQ.size(1), p.K = XQ.size(-1);
  p.ldx = ldx;
  p.ldw = p.N > 1 ? WQ.stride(1) : p.K;
  p.w_gs = p.G > 1 ? WQ.stride(0) : p.N * p.ldw;
  return p;
}

}  // namespace mslk::gemm
