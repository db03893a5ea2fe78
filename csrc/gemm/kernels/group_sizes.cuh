// Group sizes held on the device (the grouped GEMMs' M sizes): one read, and a grouped FP8 GEMM's
// rows of group g under its params' contract (gemm/fp8_grouped_params.h). No CUTLASS here: the
// CUTLASS setup (grouped_setup.cuh) and mslk's own grouped kernels share it.
#pragma once
#include <cstdint>

#include "gemm/fp8_grouped_params.h"

namespace mslk::gemm::detail {

// Size i of a device size vector (int32 or int64), as stored.
__device__ __forceinline__ long long size_at(const void* sizes, bool int64, int64_t i) {
  return int64 ? static_cast<long long>(static_cast<const int64_t*>(sizes)[i])
               : static_cast<long long>(static_cast<const int32_t*>(sizes)[i]);
}

// m_g of the contract: a count, or the difference of cumulative ends; negatives count as 0.
__device__ __forceinline__ long long fp8_group_rows(const Fp8GroupedParams& p, int64_t g) {
  const long long at = size_at(p.sizes, p.sizes_int64, g);
  const long long m = p.sizes_are_ends ? at - (g > 0 ? size_at(p.sizes, p.sizes_int64, g - 1) : 0) : at;
  return m < 0 ? 0 : m;
}

}  // namespace mslk::gemm::detail
