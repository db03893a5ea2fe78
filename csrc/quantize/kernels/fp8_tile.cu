// Generic FP8 tile quantizer: one CTA per tile, two passes over it (amax, then quantize).
// The second pass re-reads the tile, which the first pass has just brought into L1/L2.
// Serves blockwise quantization and every shape the specialised kernels do not take.
#include "quantize/kernels/fp8_device.cuh"

namespace mslk::quantize {
namespace {

constexpr int kThreads = 512;
constexpr int kUnroll = 4;

// W = elements per access: kVec16<T> for 16-byte vectors, 1 for the scalar path.
template <typename T, int W>
__global__ void __launch_bounds__(kThreads) fp8_tile_kernel(Fp8TileParams p, bool vec_store) {
  const int64_t n_bj = (p.in.K + p.tile_k - 1) / p.tile_k;
  const int64_t bi = blockIdx.x / n_bj, bj = blockIdx.x % n_bj;
  const int64_t r0 = bi * p.tile_m, r1 = min(r0 + p.tile_m, p.in.M);
  const int64_t c0 = bj * p.tile_k, c1 = min(c0 + p.tile_k, p.in.K);
  const int64_t per_row = (c1 - c0) / W, total = (r1 - r0) * per_row;
  const T* in = static_cast<const T*>(p.in.ptr);
  const bool valid = p.tile_m != 1 || row_is_valid(p, r0);
  auto in_at = [&](int64_t i) { return in + (r0 + i / per_row) * p.in.stride + c0 + (i % per_row) * W; };
  auto out_at = [&](int64_t i) { return p.out + (r0 + i / per_row) * p.out_stride + c0 + (i % per_row) * W; };

  float amax = 0.f;
  if (valid) {
    for (int64_t base = threadIdx.x; base < total; base += kUnroll * kThreads) {
      if constexpr (W > 1) {
        uint4 v[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int64_t i = base + u * kThreads;
          v[u] = i < total ? *reinterpret_cast<const uint4*>(in_at(i)) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) amax = fmaxf(amax, absmax16<T>(v[u]));
      } else {
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int64_t i = base + u * kThreads;
          if (i < total) amax = fmaxf(amax, fabsf(to_f32(*in_at(i))));
        }
      }
    }
  }
  amax = block_max(amax);
  const TileScale s = tile_scale(p, amax);
  if (threadIdx.x == 0) p.scale[scale_index(p, bi, bj)] = s.scale;

  for (int64_t base = threadIdx.x; base < total; base += kUnroll * kThreads) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * kThreads;
      if (i >= total) continue;
      if constexpr (W > 1) {
        const uint4 v = valid ? *reinterpret_cast<const uint4*>(in_at(i)) : make_uint4(0, 0, 0, 0);
        quant_store16<T>(v, s.inv, out_at(i), vec_store);
      } else {
        *out_at(i) = valid ? f32_to_e4m3(to_f32(*in_at(i)) * s.inv) : 0;
      }
    }
  }
  if (c1 == p.in.K) zero_padding(p, r0, r1);
}

}  // namespace

cudaError_t fp8_quantize_tiles(const Fp8TileParams& p, cudaStream_t stream) {
  const int64_t tiles = int64_t(ceil_div(p.in.M, p.tile_m)) * ceil_div(p.in.K, p.tile_k);
  if (tiles == 0) return cudaSuccess;
  if (tiles > 0x7fffffff) return cudaErrorInvalidConfiguration;
  return dispatch_dtype(p.in.dtype, [&](auto t) {
    using T = decltype(t);
    constexpr int W = kVec16<T>;
    if (rows_vectorizable<T>(p.in, p.tile_k)) {
      const bool vec_store = p.out_stride % W == 0;
      fp8_tile_kernel<T, W><<<unsigned(tiles), kThreads, 0, stream>>>(p, vec_store);
    } else {
      fp8_tile_kernel<T, 1><<<unsigned(tiles), kThreads, 0, stream>>>(p, false);
    }
  });
}

}  // namespace mslk::quantize
