// CUDA backend of the rowwise FP8 GEMM ops: plans the call (MSLK_FP8_GEMM_KERNEL, read on every
// call), allocates the kernel's workspace from the caching allocator on the current stream
// (CUDA-graph safe) and runs the contract there.
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <cstdlib>
#include <cstring>

#include "gemm/fp8_rowwise.h"
#include "gemm/kernels/fp8_grouped.h"
#include "gemm/kernels/fp8_rowwise.h"

namespace mslk::gemm {
namespace {

constexpr const char* kEnv = "MSLK_FP8_GEMM_KERNEL";

void cuda_run(const RowwiseGemmParams& p0) {
  const char* env_raw = std::getenv(kEnv);
  const char* env = env_raw ? env_raw : "";
  Fp8GemmKernel want = Fp8GemmKernel::kAuto;
  TORCH_CHECK(parse_fp8_gemm_kernel(env_raw, &want), kEnv, " must be auto, skinny, cutlass or simt, got '", env, "'");
  const Fp8RowwisePlan plan = fp8_rowwise_plan(p0, want);
  const auto refused = [&] {
    return c10::str(kEnv, "=", env, " forces a kernel that cannot take this problem (M=", p0.M, ", N=", p0.N,
                    ", K=", p0.K, ", L=", p0.L, ", row strides ", p0.lda, "/", p0.ldb, ", ",
                    p0.out_dtype == OutDtype::kFloat16 ? "fp16" : "bf16",
                    " output); the skinny kernel needs sm_89+, M <= 64, K % 16 == 0 and 16-byte aligned rows, CUTLASS "
                    "bf16 output and TMA alignment; unset it or use auto");
  };
  TORCH_CHECK(plan.ok, refused());
  RowwiseGemmParams p = p0;
  at::Tensor workspace;
  if (const size_t bytes = fp8_rowwise_workspace_bytes(p, plan)) {
    workspace = at::empty({static_cast<int64_t>(bytes / sizeof(float))},
                          at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, c10::cuda::current_device()));
    p.workspace = workspace.data_ptr<float>();
  }
  const cudaError_t e = fp8_rowwise_run(p, plan, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(!(e == cudaErrorNotSupported && want != Fp8GemmKernel::kAuto), refused());
  C10_CUDA_CHECK(e);
}

// MSLK_FP8_GROUPED_KERNEL=host: one GEMM per group with the sizes read to the host (the old
// path, kept to compare against); default: the device-side grouped kernel when it applies.
bool cuda_grouped(const Fp8GroupedParams& p) {
  const char* k = std::getenv("MSLK_FP8_GROUPED_KERNEL");
  if (k && std::strcmp(k, "host") == 0) return false;
  const cudaError_t e = fp8_grouped_cutlass_run(p, c10::cuda::getCurrentCUDAStream().stream());
  if (e == cudaErrorNotSupported) return false;  // nothing launched
  C10_CUDA_CHECK(e);
  return true;
}

constexpr RowwiseBackend kCudaBackend{cuda_run, cuda_grouped};
using CudaOps = RowwiseOps<&kCudaBackend>;

}  // namespace
}  // namespace mslk::gemm

TORCH_LIBRARY_IMPL(mslk, CUDA, m) { mslk::gemm::CudaOps::register_mslk(m); }
TORCH_LIBRARY_IMPL(triton, CUDA, m) { mslk::gemm::CudaOps::register_triton(m); }
