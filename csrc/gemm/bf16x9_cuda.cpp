// CUDA backend of bf16x9_gemm. Up to kBf16x9FmaMaxM rows (MSLK_BF16X9_KERNEL=auto) float32 FMAs
// stream B once (kernels/bf16x9_fma.cu); up to kBf16x9FusedMaxM rows the fused kernel splits the
// float32 operands itself (kernels/bf16x9_fused.cu).
// Otherwise, or where it does not apply, A and B are split into their segmented BF16 parts buffers
// (kernels/bf16x9.h: A' [M, 9 kp], B' [N, 9 kp], kp = K rounded up to 8) and one BF16 GEMM runs
// over K' = 9 kp. An output whose rows break TMA's 16-byte rule gets a padded temporary, copied back.
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "common/checks.h"
#include "common/require_sm90.h"
#include "gemm/bf16x9.h"
#include "gemm/kernels/bf16x9.h"
#include "gemm/kernels/bf16x9_configs.h"
#include "gemm/kernels/config_table.h"
#include "mslk/utils/env.h"

namespace mslk::gemm {
namespace {

Tensor split(const Tensor& x, int64_t kp, bool b_side, cudaStream_t stream) {
  Tensor parts = at::empty({x.size(0), 9 * kp}, x.options().dtype(at::kBFloat16));
  Bf16x9SplitParams p{x.const_data_ptr<float>(), parts.data_ptr(), x.size(0), x.size(1),
                      x.size(0) > 1 ? x.stride(0) : x.size(1), kp, b_side};
  C10_CUDA_CHECK(bf16x9_split(p, stream));
  return parts;
}

// The FMA or the fused kernel, where MSLK_BF16X9_KERNEL and the problem let one run; false: nothing
// launched (the parts path runs).
bool run_direct(const Tensor& A, const Tensor& B, const Tensor& out, int sms, cudaStream_t stream) {
  enum Mode { kAuto, kFused, kParts, kFma };
  const int mode =
      read_env([] { return env::choice(env::Var::kBf16x9Kernel, {"auto", "fused", "parts", "fma"}, kAuto); });
  const int64_t M = A.size(0), N = B.size(0), K = A.size(1);
  if (mode == kParts || (mode == kAuto && M > kBf16x9FusedMaxM)) return false;
  const Bf16x9FusedParams p{A.const_data_ptr<float>(), B.const_data_ptr<float>(), out.data_ptr<float>(),
                            M, N, K, M > 1 ? A.stride(0) : K, N > 1 ? B.stride(0) : K, M > 1 ? out.stride(0) : N,
                            bf16x9_fused_splits(M, N, K, sms)};
  const bool fma = mode == kFma || (mode == kAuto && M <= kBf16x9FmaMaxM);
  const int row = fma ? static_cast<int>(read_env([] {
    return env::integer(env::Var::kBf16x9FmaConfig, -1, 0, kNumBf16x9FmaConfigs - 1);
  })) : -1;
  if (!(fma ? bf16x9_fma_applies(p, row) : bf16x9_fused_applies(p))) {
    TORCH_CHECK_VALUE(mode != kFused && mode != kFma, "bf16x9_gemm: MSLK_BF16X9_KERNEL=", fma ? "fma" : "fused",
                      " needs K and the row strides of A and B multiples of 4 and 16-byte aligned A and B (K=", K,
                      ", row strides ", p.lda, "/", p.ldb, ")");
    return false;
  }
  C10_CUDA_CHECK(fma ? bf16x9_fma_run(p, row, stream) : bf16x9_fused_run(p, stream));
  return true;
}

void cuda_run(const Tensor& A, const Tensor& B, const Tensor& out) {
  const mslk::cuda::DeviceAttrs attrs = mslk::cuda::require_sm90("bf16x9_gemm");
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  if (run_direct(A, B, out, attrs.sms, stream)) return;
  const int64_t M = A.size(0), N = B.size(0), K = A.size(1), kp = (K + 7) / 8 * 8;
  const Tensor a = split(A, kp, false, stream);
  const Tensor b = split(B, kp, true, stream);
  const int64_t ldd = M > 1 ? out.stride(0) : N;
  const bool direct = ldd % 4 == 0 && aligned(out.data_ptr(), 16);
  const Tensor d = direct ? out : at::empty({M, (N + 3) / 4 * 4}, out.options());
  Bf16x9GemmParams p{a.const_data_ptr(), b.const_data_ptr(), d.data_ptr<float>(), M, N, 9 * kp,
                     direct ? ldd : d.stride(0)};
  const cudaError_t e = bf16x9_gemm_run(p, stream);
  TORCH_CHECK(e != cudaErrorNotSupported, "bf16x9_gemm: the CUDA kernel cannot take this problem (M=", M,
              ", N=", N, ", K=", K, "); this build may lack CUTLASS");
  C10_CUDA_CHECK(e);
  if (!direct) out.copy_(d.narrow(1, 0, N));
}

constexpr Bf16x9Backend kCudaBackend{cuda_run};

}  // namespace
}  // namespace mslk::gemm

TORCH_LIBRARY_IMPL(mslk, CUDA, m) { mslk::gemm::Bf16x9Ops<&mslk::gemm::kCudaBackend>::register_mslk(m); }
