// CUDA backend of the BF16 grouped GEMM ops: runs the contract on the current stream, with the
// group sizes read on the device (no host sync).
//
// Kernel choice: the SIMT kernel is the default. MSLK_EXPERIMENTAL_GROUPED_CUTLASS=1 (read on
// every call, so one process can time both) routes the stacked forward, dgrad and wgrad through the
// CUTLASS sm90 ptr-array grouped GEMM with device-side argument setup, falling back to SIMT
// where that path does not apply (alignment, mode, built without CUTLASS). It has not run on a
// GPU yet: the next GPU session measures it (test/gemm, bench/gemm/bench_bf16_grouped.py) and,
// if it is correct and faster, makes it the default.
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <cstdlib>
#include <cstring>

#include "gemm/bf16_grouped.h"
#include "gemm/kernels/bf16_grouped.h"

namespace mslk::gemm {
namespace {

bool experimental_cutlass() {
  const char* v = std::getenv("MSLK_EXPERIMENTAL_GROUPED_CUTLASS");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

void cuda_run(const Bf16GroupedParams& p) {
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  if (experimental_cutlass()) {
    const cudaError_t e = p.mode == Bf16GroupedMode::kWgrad ? bf16_wgrad_cutlass_run(p, stream)
                                                            : bf16_grouped_cutlass_run(p, stream);
    if (e != cudaErrorNotSupported) {  // NotSupported: nothing was launched, take the SIMT path
      C10_CUDA_CHECK(e);
      return;
    }
  }
  C10_CUDA_CHECK(bf16_grouped_run(p, stream));
}

// The list forms on the CUTLASS grouped kernel (descriptor mode), when it is switched on.
bool cuda_list(const Bf16GroupedParams& p) {
  if (!experimental_cutlass()) return false;
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
