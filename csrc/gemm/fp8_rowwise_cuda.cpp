// CUDA backend of the rowwise FP8 GEMM ops: plans the call (MSLK_FP8_GEMM_KERNEL,
// MSLK_FP8_ROWWISE_TILE and MSLK_GEMM_SWIZZLE, read on every call), allocates the kernel's workspace from the caching allocator on the current stream
// (CUDA-graph safe) and runs the contract there.
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "gemm/fp8_grouped_cuda.h"
#include "gemm/fp8_rowwise.h"
#include "gemm/gemm_env.h"
#include "gemm/kernels/fp8_grouped.h"
#include "gemm/kernels/fp8_grouped_configs.h"
#include "gemm/kernels/fp8_rowwise.h"
#include "gemm/kernels/fp8_rowwise_configs.h"

namespace mslk::gemm {
namespace {

constexpr const char* kEnv = "MSLK_FP8_GEMM_KERNEL";
constexpr const char* kTileEnv = "MSLK_FP8_ROWWISE_TILE";

void cuda_run(const RowwiseGemmParams& p0) {
  const char* env = env::raw(env::Var::kFp8GemmKernel);
  env = env ? env : "auto";
  const auto want = static_cast<Fp8GemmKernel>(
      read_env([] { return env::choice(env::Var::kFp8GemmKernel, {"auto", "skinny", "cutlass", "simt"}, 0); }));
  RowwiseGemmParams p = p0;
  p.tuning = env_tuning(env::Var::kFp8RowwiseTile, kNumFp8RowwiseConfigs);
  const Fp8RowwisePlan plan = fp8_rowwise_plan(p, want);
  const auto refused = [&] {
    return c10::str(kEnv, "=", env, " forces a kernel that cannot take this problem (M=", p0.M, ", N=", p0.N,
                    ", K=", p0.K, ", L=", p0.L, ", row strides ", p0.lda, "/", p0.ldb, ", ",
                    p0.out_dtype == OutDtype::kFloat16   ? "fp16"
                    : p0.out_dtype == OutDtype::kFloat32 ? "fp32"
                                                         : "bf16",
                    " output); the skinny kernel needs sm_89+, M <= 64, K % 16 == 0 and 16-byte aligned rows, CUTLASS "
                    "bf16 output and TMA alignment; unset it or use auto");
  };
  // A forced CUTLASS row never falls back to another kernel silently.
  const auto row_refused = [&] {
    return c10::str(kTileEnv, "=", p.tuning.forced_row, " forces a row that cannot take this problem (M=",
                    p0.M, ", N=", p0.N, ", K=", p0.K, ", L=", p0.L,
                    "; CUTLASS needs bf16 output and TMA alignment); unset it");
  };
  const bool cutlass_wanted = want == Fp8GemmKernel::kCutlass || want == Fp8GemmKernel::kAuto;
  TORCH_CHECK_VALUE(!(p.tuning.forced_row >= 0 && cutlass_wanted && (!plan.ok || plan.kernel == Fp8GemmKernel::kSimt)),
                    row_refused());
  TORCH_CHECK(plan.ok, refused());
  at::Tensor workspace;
  if (const size_t bytes = fp8_rowwise_workspace_bytes(p, plan)) {
    workspace = at::empty({static_cast<int64_t>(bytes / sizeof(float))},
                          at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, c10::cuda::current_device()));
    p.workspace = workspace.data_ptr<float>();
  }
  const cudaError_t e = fp8_rowwise_run(p, plan, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK_VALUE(!(e == cudaErrorNotSupported && p.tuning.forced_row >= 0), row_refused());
  TORCH_CHECK(!(e == cudaErrorNotSupported && want != Fp8GemmKernel::kAuto), refused());
  C10_CUDA_CHECK(e);
}

// The device-side grouped kernel (fp8_grouped_cuda.h); MSLK_FP8_GROUPED_CONFIG forces its row.
bool cuda_grouped(const Fp8GroupedParams& p) {
  return run_fp8_grouped(p, env::Var::kFp8GroupedConfig, "MSLK_FP8_GROUPED_CONFIG", kNumFp8GroupedConfigs,
                         fp8_grouped_cutlass_run);
}

constexpr RowwiseBackend kCudaBackend{cuda_run, cuda_grouped};
using CudaOps = RowwiseOps<&kCudaBackend>;

}  // namespace
}  // namespace mslk::gemm

TORCH_LIBRARY_IMPL(mslk, CUDA, m) { mslk::gemm::CudaOps::register_mslk(m); }
TORCH_LIBRARY_IMPL(triton, CUDA, m) { mslk::gemm::CudaOps::register_triton(m); }
