// CUDA backend of the BF16 grouped GEMM ops: runs the contract on the current stream, with the
// group sizes read on the device (no host sync).
//
// Kernel choice, MSLK_BF16_GROUPED_KERNEL=auto|cutlass|simt (read on every call, so one process
// can time both): auto (default) and cutlass run the stacked forward, dgrad, wgrad and the list
// forms on the CUTLASS sm90 ptr-array grouped GEMMs with device-side argument setup, and fall
// back to the SIMT kernel where those do not apply (TMA alignment, fp32 output of the forward,
// built without CUTLASS); simt forces the SIMT kernel (far slower: docs/design/gemm_tables.md).
// A forced CUTLASS row (MSLK_BF16_GROUPED_CONFIG / MSLK_BF16_WGRAD_CONFIG) never falls back: a
// row that does not exist or cannot take the problem is a ValueError naming the variable.
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "gemm/bf16_grouped.h"
#include "gemm/kernels/bf16_grouped.h"
#include "gemm/kernels/bf16_grouped_configs.h"
#include "gemm/kernels/bf16_wgrad_configs.h"
#include "gemm/gemm_env.h"

namespace mslk::gemm {
namespace {

bool use_cutlass() {
  return read_env([] { return env::choice(env::Var::kBf16GroupedKernel, {"auto", "cutlass", "simt"}, 0); }) != 2;
}

// The tuning of this call's CUTLASS family (the wgrad has its own table).
env::Var row_var(const Bf16GroupedParams& p) {
  return p.mode == Bf16GroupedMode::kWgrad ? env::Var::kBf16WgradConfig : env::Var::kBf16GroupedConfig;
}

GemmTuning tuning(const Bf16GroupedParams& p) {
  return env_tuning(row_var(p), p.mode == Bf16GroupedMode::kWgrad ? kNumBf16WgradConfigs : kNumBf16GroupedConfigs);
}

// Runs the CUTLASS path; false when it does not apply (nothing launched) and no row is forced.
bool run_cutlass(const Bf16GroupedParams& p0, bool wgrad) {
  Bf16GroupedParams p = p0;
  p.tuning = tuning(p0);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  const cudaError_t e = wgrad ? bf16_wgrad_cutlass_run(p, stream) : bf16_grouped_cutlass_run(p, stream);
  if (e == cudaErrorNotSupported) {
    TORCH_CHECK_VALUE(p.tuning.forced_row < 0, env::name(row_var(p)), "=", p.tuning.forced_row,
                      " forces a row that cannot take this problem (G=", p.G, ", total_M=", p.total_M,
                      ", N=", p.N, ", K=", p.K, "; TMA needs 16-byte aligned operands and strides); unset it");
    return false;
  }
  C10_CUDA_CHECK(e);
  return true;
}

void cuda_run(const Bf16GroupedParams& p) {
  if (use_cutlass() && run_cutlass(p, p.mode == Bf16GroupedMode::kWgrad)) return;
  C10_CUDA_CHECK(bf16_grouped_run(p, c10::cuda::getCurrentCUDAStream().stream()));
}

// The list forms on the CUTLASS grouped kernel (descriptor mode) unless SIMT is forced.
bool cuda_list(const Bf16GroupedParams& p) { return use_cutlass() && run_cutlass(p, false); }

constexpr Bf16GroupedBackend kCudaBackend{cuda_run, false, cuda_list};
using CudaOps = Bf16GroupedOps<&kCudaBackend>;

}  // namespace
}  // namespace mslk::gemm

TORCH_LIBRARY_IMPL(mslk, CUDA, m) { mslk::gemm::CudaOps::register_mslk(m); }
