// cuTensorMapEncodeTiled through the runtime's driver entry point (no -lcuda): the host half of
// the TMA tensor loads; and the 2-D map of a row-major matrix. Plain CUDA runtime; include before any CUTLASS header (cutlass's
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

// A map of `rank` dimensions (dims innermost first, strides in bytes of dims 1.., multiples of 16),
// boxes of `box` elements; out-of-bounds elements read as zeros. False when the driver lacks the
// entry point or refuses the map.
inline bool encode(CUtensorMap* map, CUtensorMapDataType dt, int rank, const void* base, const cuuint64_t* dims,
                   const cuuint64_t* strides, const cuuint32_t* box, CUtensorMapSwizzle swizzle) {
  const EncodeTiledFn fn = encode_tiled_fn();
  if (fn == nullptr) return false;
  const cuuint32_t elem_stride[5] = {1, 1, 1, 1, 1};
  return fn(map, dt, rank, const_cast<void*>(base), dims, strides, box, elem_stride, CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// A 2-D map over a row-major matrix of `rows` rows of `inner` elements (row stride ld_bytes),
// boxes of box_inner x box_rows.
inline bool encode_2d(CUtensorMap* map, CUtensorMapDataType dt, const void* base, long long inner, long long rows,
                      long long ld_bytes, int box_inner, int box_rows, CUtensorMapSwizzle swizzle) {
  const cuuint64_t dim[2] = {cuuint64_t(inner), cuuint64_t(rows)};
  const cuuint64_t stride[1] = {cuuint64_t(ld_bytes)};
  const cuuint32_t box[2] = {cuuint32_t(box_inner), cuuint32_t(box_rows)};
  return encode(map, dt, 2, base, dim, stride, box, swizzle);
}

}  // namespace mslk::cuda
