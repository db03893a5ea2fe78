// K-group FP8 quantizer. A team of L = group/W lanes (W elements per 16-byte vector) owns a
// group; each thread keeps kGroups vectors in flight. Other shapes use the tile kernel.
#include "quantize/kernels/fp8_device.cuh"

namespace mslk::quantize {
namespace {

constexpr int kThreads = 256;
constexpr int kGroups = 4;  // groups per team: 4 independent 16-byte loads per thread

template <typename T, int L>
__global__ void __launch_bounds__(kThreads) fp8_group_kernel(Fp8TileParams p, bool vec_store) {
  constexpr int W = kVec16<T>;
  const int64_t ng = p.in.K / p.tile_k, total = p.in.M * ng;
  const int lane = threadIdx.x % L;
  const int64_t team = (int64_t(blockIdx.x) * kThreads + threadIdx.x) / L;
  const T* in = static_cast<const T*>(p.in.ptr);

  uint4 v[kGroups];
#pragma unroll
  for (int g = 0; g < kGroups; ++g) {
    const int64_t gid = team * kGroups + g;
    const int64_t r = gid / ng, j = gid % ng;
    v[g] = gid < total ? *reinterpret_cast<const uint4*>(in + r * p.in.stride + j * p.tile_k + lane * W)
                       : make_uint4(0, 0, 0, 0);
  }
#pragma unroll
  for (int g = 0; g < kGroups; ++g) {
    const int64_t gid = team * kGroups + g;
    float amax = absmax16<T>(v[g]);
#pragma unroll
    for (int o = L / 2; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    if (gid >= total) continue;  // whole team agrees; shuffles above ran on every lane
    const int64_t r = gid / ng, j = gid % ng;
    const TileScale s = tile_scale(p, amax);
    if (lane == 0) p.scale[scale_index(p, r, j)] = s.scale;
    quant_store16<T>(v[g], s.inv, p.out + r * p.out_stride + j * p.tile_k + lane * W, vec_store);
  }
}

template <typename T, int L>
bool try_launch(const Fp8TileParams& p, cudaStream_t stream) {
  if (p.tile_k != int64_t(L) * kVec16<T>) return false;
  const int64_t teams = (p.in.M * (p.in.K / p.tile_k) + kGroups - 1) / kGroups;
  const int64_t blocks = (teams * L + kThreads - 1) / kThreads;
  if (blocks > 0x7fffffff) return false;
  fp8_group_kernel<T, L><<<unsigned(blocks), kThreads, 0, stream>>>(p, p.out_stride % kVec16<T> == 0);
  return true;
}

}  // namespace

cudaError_t fp8_quantize_groups(const Fp8TileParams& p, cudaStream_t stream) {
  if (p.in.M == 0 || p.in.K == 0) return cudaSuccess;
  bool launched = false;
  cudaError_t err = dispatch_dtype(p.in.dtype, [&](auto t) {
    using T = decltype(t);
    if (!rows_vectorizable<T>(p.in, p.tile_k) || p.out_stride != p.in.K) return;
    launched = try_launch<T, 1>(p, stream) || try_launch<T, 2>(p, stream) || try_launch<T, 4>(p, stream) ||
               try_launch<T, 8>(p, stream) || try_launch<T, 16>(p, stream) || try_launch<T, 32>(p, stream);
  });
  if (err != cudaSuccess || launched) return err;
  return fp8_quantize_tiles(p, stream);
}

}  // namespace mslk::quantize
