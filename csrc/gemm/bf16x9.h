// bf16x9_gemm: an FP32 GEMM out [M, N] = A [M, K] @ B [N, K]^T (float32 in and out), written once
// against a backend (CPU reference or CUDA) and registered by the template below. The public op
// returns its optional `output`, so it is a router (common/out_router.h) over two alias-free
// internal ops, _bf16x9_gemm_new and _bf16x9_gemm_into, which the backends implement.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/library.h>

namespace mslk::gemm {

using at::Tensor;

// One call as the backend takes it: A [M, K], B [N, K] float32 with unit stride along K, out
// [M, N] float32 with unit stride along N; M, N, K > 0, all on one device.
struct Bf16x9Backend {
  void (*run)(const Tensor& A, const Tensor& B, const Tensor& out);
};

Tensor bf16x9_gemm_new(const Bf16x9Backend& be, const Tensor& A, const Tensor& B);
void bf16x9_gemm_into(const Bf16x9Backend& be, const Tensor& A, const Tensor& B, const Tensor& output);

template <const Bf16x9Backend* Be>
struct Bf16x9Ops {
  static Tensor fresh(const Tensor& A, const Tensor& B) { return bf16x9_gemm_new(*Be, A, B); }
  static void into(const Tensor& A, const Tensor& B, const Tensor& out) { bf16x9_gemm_into(*Be, A, B, out); }
  static void register_mslk(torch::Library& m) {
    m.impl("_bf16x9_gemm_new", &fresh);
    m.impl("_bf16x9_gemm_into", &into);
  }
};

}  // namespace mslk::gemm
