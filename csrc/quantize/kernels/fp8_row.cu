// Rowwise FP8 quantizer: one CTA per row holds the whole row in registers (16-byte vectors),
// so each input byte is read once. Rows too long or not vector-aligned go to the tile kernel.
#include "quantize/kernels/fp8_device.cuh"

namespace mslk::quantize {
namespace {

template <typename T, int NV>
__global__ void __launch_bounds__(1024) fp8_row_kernel(Fp8TileParams p, bool vec_store) {
  constexpr int W = kVec16<T>;
  const int64_t row = blockIdx.x;
  const int nvec = static_cast<int>(p.in.K / W);
  const T* in = static_cast<const T*>(p.in.ptr) + row * p.in.stride;
  const bool valid = row_is_valid(p, row);

  uint4 v[NV];
  float amax = 0.f;
#pragma unroll
  for (int i = 0; i < NV; ++i) {
    const int idx = threadIdx.x + i * blockDim.x;
    v[i] = valid && idx < nvec ? *reinterpret_cast<const uint4*>(in + idx * W) : make_uint4(0, 0, 0, 0);
  }
#pragma unroll
  for (int i = 0; i < NV; ++i) amax = fmaxf(amax, absmax16<T>(v[i]));
  amax = block_max(amax);
  const TileScale s = tile_scale(p, amax);
  if (threadIdx.x == 0) p.scale[row] = s.scale;

  uint8_t* out = p.out + row * p.out_stride;
#pragma unroll
  for (int i = 0; i < NV; ++i) {
    const int idx = threadIdx.x + i * blockDim.x;
    if (idx < nvec) quant_store16<T>(v[i], s.inv, out + idx * W, vec_store);
  }
  zero_padding(p, row, row + 1);
}

// Vectors per thread: the fewest that keep the CTA at <= 256 threads, up to 8 (1024 threads).
template <typename T, int NV>
bool try_launch(const Fp8TileParams& p, int64_t nvec, bool vec_store, cudaStream_t stream) {
  const int64_t limit = NV == 8 ? 1024 : 256;
  if (nvec > limit * NV) return false;
  const int threads = static_cast<int>(((nvec + NV - 1) / NV + 31) / 32 * 32);
  fp8_row_kernel<T, NV><<<unsigned(p.in.M), threads > 0 ? threads : 32, 0, stream>>>(p, vec_store);
  return true;
}

}  // namespace

cudaError_t fp8_quantize_rows(const Fp8TileParams& p, cudaStream_t stream) {
  if (p.in.M == 0) return cudaSuccess;
  bool launched = false;
  cudaError_t err = dispatch_dtype(p.in.dtype, [&](auto t) {
    using T = decltype(t);
    constexpr int W = kVec16<T>;
    if (!rows_vectorizable<T>(p.in, W) || p.in.M > 0x7fffffff) return;
    const int64_t nvec = p.in.K / W;
    const bool vec_store = p.out_stride % W == 0;
    launched = try_launch<T, 1>(p, nvec, vec_store, stream) || try_launch<T, 2>(p, nvec, vec_store, stream) ||
               try_launch<T, 4>(p, nvec, vec_store, stream) || try_launch<T, 8>(p, nvec, vec_store, stream);
  });
  if (err != cudaSuccess || launched) return err;
  return fp8_quantize_tiles(p, stream);
}

}  // namespace mslk::quantize
