// Glue shared by the BF16 and FP8 grouped ops (bf16_grouped.cpp, fp8_rowwise_grouped.cpp).
#pragma once
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <vector>

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

}  // namespace mslk::gemm
