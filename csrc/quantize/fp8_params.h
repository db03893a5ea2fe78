// Parameters of the FP8 quantizers, shared by the CPU reference, the torch glue and the CUDA
// kernels (plain C++: no torch, no CUDA headers). One contract, two implementations.
#pragma once
#include <cstdint>

#include "common/dtype.h"

#if defined(__CUDACC__)
#define MSLK_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define MSLK_HOST_DEVICE inline
#endif

namespace mslk::quantize {

using mslk::Dtype;

// A 2-D view [M, K] of the input; rows are `stride` elements apart, columns contiguous.
struct Rows {
  const void* ptr;
  Dtype dtype;
  int64_t M, K, stride;
};

// One FP8 quantization: the input is cut into tiles of tile_m x tile_k elements, each tile gets
// one scale = clamp(amax, eps, *scale_ub) / 448 and its elements become sat_e4m3(x * 448 / amax').
struct Fp8TileParams {
  Rows in;
  uint8_t* out;        // [M, out_stride] E4M3FN bytes; columns [K, out_stride) are zero-filled
  int64_t out_stride;  // >= K
  float* scale;        // scale of tile (bi, bj) at scale[bi * scale_stride_m + bj * scale_stride_k]
  int64_t tile_m, tile_k;
  int64_t scale_stride_m, scale_stride_k;
  // Grouped layout (quantize_fp8_group with m_sizes): seg_starts[0..num_segments] is the
  // exclusive prefix sum of m_sizes; each segment's scales are stored M-major inside it.
  const int64_t* seg_starts;
  int num_segments;
  const float* scale_ub;  // optional upper bound of amax (device pointer, 1 element)
  float eps;              // lower bound of amax
  // Rows m >= zero_start[m / rows_per_matrix] of each matrix become zeros (row mode only).
  const void* zero_start;
  bool zero_start_int64;
  int64_t rows_per_matrix;
};

// out[m, k] (bf16, contiguous [M, K]) = float(xq[m, k]) * scale[(m / tile_m) * ssm + (k / tile_k) * ssk]
struct Fp8DequantParams {
  const uint8_t* xq;
  int64_t M, K, stride;
  const float* scale;
  int64_t tile_m, tile_k, scale_stride_m, scale_stride_k;
  void* out;
};
// Row mode: rows past their matrix's zero_start count are emitted as zeros.
MSLK_HOST_DEVICE bool row_is_valid(const Fp8TileParams& p, int64_t row) {
  if (!p.zero_start) return true;
  const int64_t mat = row / p.rows_per_matrix;
  const int64_t n = p.zero_start_int64 ? static_cast<const int64_t*>(p.zero_start)[mat]
                                       : static_cast<const int32_t*>(p.zero_start)[mat];
  return row - mat * p.rows_per_matrix < n;
}

// Where the scale of tile (bi, bj) lives. In the grouped layout (tile_m == 1) row r of the
// segment [s, s + m) stores group j at s * ng + j * m + (r - s); rows past the last segment
// form one implicit trailing segment.
MSLK_HOST_DEVICE int64_t scale_index(const Fp8TileParams& p, int64_t bi, int64_t bj) {
  if (!p.seg_starts) return bi * p.scale_stride_m + bj * p.scale_stride_k;
  const int64_t r = bi, M = p.in.M, ng = p.in.K / p.tile_k;
  int lo = 0, hi = p.num_segments;  // largest g in [0, G] with seg_starts[g] <= r
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (p.seg_starts[mid] <= r) lo = mid; else hi = mid - 1;
  }
  const int64_t s = p.seg_starts[lo];
  int64_t m = lo == p.num_segments ? M - s : p.seg_starts[lo + 1] - s;
  m = m < M - s ? m : M - s;  // m_sizes summing past M must not write out of bounds
  return s * ng + bj * m + (r - s);
}

}  // namespace mslk::quantize
