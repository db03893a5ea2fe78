// cuTensorMapEncodeTiled through the runtime's driver entry point (no -lcuda): the host half of
// the TMA tensor loads. Plain CUDA runtime; include before any CUTLASS header (cutlass's
// cuda_host_adapter.hpp includes cudaTypedefs.h inside its namespace).
#pragma once
#include <cuda.h>  // CUtensorMap and the driver enums (types only)
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

namespace mslk::cuda {

using EncodeTiledFn = PFN_cuTensorMapEncodeTiled_v12000;

// Process-wide and device-independent; nullptr when the driver lacks it.
inline EncodeTiledFn encode_tiled_fn() {
  static const EncodeTiledFn fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return EncodeTiledFn(nullptr);
    }
    return reinterpret_cast<EncodeTiledFn>(f);
  }();
  return fn;
}

}  // namespace mslk::cuda
