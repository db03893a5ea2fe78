// Coarse GEMM shape classes that pick a CUTLASS tile family.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <c10/util/accumulate.h>

#include <cstdint>

namespace mslk {

enum class KernelMode { Small, Medium, Large, Default };

// Small: a thin side (M or N <= 128). Large: at least two of M, N, K are >= 2048.
inline KernelMode get_kernel_mode(int64_t M, int64_t N, int64_t K) {
  const int big = (M >= 2048) + (N >= 2048) + (K >= 2048);
  if (M <= 128 || N <= 128) {
    return KernelMode::Small;
  }
  return big >= 2 ? KernelMode::Large : KernelMode::Default;
}

// XQ [..., K] (leading dims flattened into M), WQ [..., K] (leading dims flattened into N).
inline KernelMode get_kernel_mode(at::Tensor XQ, at::Tensor WQ) {
  TORCH_CHECK(XQ.dim() >= 1 && WQ.dim() >= 2, "get_kernel_mode: expected XQ.dim() >= 1 and ",
              "WQ.dim() >= 2, got ", XQ.dim(), " and ", WQ.dim());
  const int64_t K = XQ.size(-1);
  const int64_t M = c10::multiply_integers(XQ.sizes().slice(0, XQ.dim() - 1));
  const int64_t N = c10::multiply_integers(WQ.sizes().slice(0, WQ.dim() - 1));
  return get_kernel_mode(M, N, K);
}

// Batched: B*M rows. Small: B*M or N <= 128. Medium: B*M <= 512 with N, K both <= 8192
// and not both equal to 8192. Large: B*M > 512 with N or K >= 1024.
inline KernelMode get_batched_kernel_mode(int64_t B, int64_t M, int64_t N, int64_t K) {
  const int64_t BM = B * M;
  if (BM <= 128 || N <= 128) {
    return KernelMode::Small;
  }
  if (BM <= 512 && N <= 8192 && K <= 8192 && (N < 8192 || K < 8192)) {
    return KernelMode::Medium;
  }
  if (BM > 512 && (N >= 1024 || K >= 1024)) {
    return KernelMode::Large;
  }
  return KernelMode::Default;
}

// XQ [B, M, K], WQ [B, N, K].
inline KernelMode get_batched_kernel_mode(at::Tensor XQ, at::Tensor WQ) {
  TORCH_CHECK(XQ.dim() == 3 && WQ.dim() == 3, "get_batched_kernel_mode: expected 3-d XQ [B,M,K] ",
              "and WQ [B,N,K], got ", XQ.dim(), "-d and ", WQ.dim(), "-d");
  return get_batched_kernel_mode(XQ.size(0), XQ.size(1), WQ.size(1), XQ.size(2));
}

}  // namespace mslk
