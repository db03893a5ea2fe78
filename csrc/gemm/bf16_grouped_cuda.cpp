// CUDA backend of the BF16 grouped GEMM ops: runs the contract on the current stream, with the
// group sizes read on the device (no host sync).
//
// Kernel choice, MSLK_BF16_GROUPED_KERNEL=auto|cutlass|simt (read on every call, so one process
// can time both): auto (default) and cutlass run the stacked forward, dgrad, wgrad and the list
// forms on the CUTLASS sm90 ptr-array grouped GEMMs with device-side argument setup, and fall
// back to the SIMT kernel where those do not apply (TMA alignment, fp32 output of the forward,
// built without CUTLASS); simt forces the SIMT kernel. Measured on the H200 (2026-11-30,
// bench/gemm/results_bf16_grouped.md): CUTLASS is 13-32x faster than SIMT at every shape.
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <cstdlib>
#include <cstring>

#include "gemm/bf16_grouped.h"
#include "gemm/kernels/bf16_grouped.h"

namespace mslk::gemm {
namespace {

constexpr const char* kEnv = "MSLK_BF16_GROUPED_KERNEL";

bool use_cutlass() {
  const char* v = std::getenv(kEnv);
  if (v == nullptr || *v == '\0' || std::strcmp(v, "auto") == 0 || std::strcmp(v, "cutlass") == 0) return true;
  TORCH_CHECK_VALUE(std::strcmp(v, "simt") == 0, kEnv, " must be auto, cutlass or simt, got '", v, "'");
  return false;
}

void cuda_run(const Bf16GroupedParams& p) {
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  if (use_cutlass()) {
    const cudaError_t e = p.mode == Bf16GroupedMode::kWgrad ? bf16_wgrad_cutlass_run(p, stream)
                                                            : bf16_grouped_cutlass_run(p, stream);
    if (e != cudaErrorNotSupported) {  // NotSupported: nothing was launched, take the SIMT path
      C10_CUDA_CHECK(e);
      return;
    }
  }
  C10_CUDA_CHECK(bf16_grouped_run(p, stream));
}

// The list forms on the CUTLASS grouped kernel (descriptor mode) unless SIMT is forced.
bool cuda_list(const Bf16GroupedParams& p) {
  if (!use_cutlass()) return false;
  const cudaError_t e = bf16_grouped_cutlass_run(p, c10::cuda::getCurrentCUDAStream().stream());
  if (e == cudaErrorNotSupported) return false;
  C10_CUDA_CHECK(e);
  return true;
}

constexpr Bf16GroupedBackend kCudaBackend{cuda_run, false, cuda_list};
using CudaOps = Bf16GroupedOps<&kCudaBackend>;

}  // namespace
}  // namespace mslk::gemm

TORCH_LIBRARY_IMPL(mslk, CUDA, m) { mslk::gemm::CudaOps::register_mslk(m); }
