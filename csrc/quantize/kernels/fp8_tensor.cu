// Tensorwise FP8 quantizer: pass 1 reduces |x| to one amax (atomicMax on the float's bits,
// valid because every candidate is >= 0), pass 2 quantizes with the single scale. The input is
// read twice by necessity (no element can be written before the global amax is known).
#include "quantize/kernels/fp8_device.cuh"

namespace mslk::quantize {
namespace {

constexpr int kThreads = 512;
constexpr int kUnroll = 4;

// Element i (in units of W) of the [M, K] view; contiguous views skip the row arithmetic.
template <typename T, int W, bool CONTIG>
__device__ __forceinline__ const T* elem(const Rows& r, int64_t i) {
  if constexpr (CONTIG) return static_cast<const T*>(r.ptr) + i * W;
  const int64_t per_row = r.K / W;
  return static_cast<const T*>(r.ptr) + (i / per_row) * r.stride + (i % per_row) * W;
}

template <typename T, int W>
__device__ __forceinline__ uint4 load_vec(const T* p) {
  if constexpr (W > 1) return *reinterpret_cast<const uint4*>(p);
  uint4 u = make_uint4(0, 0, 0, 0);
  *reinterpret_cast<T*>(&u) = *p;
  return u;
}

template <typename T, int W>
__device__ __forceinline__ float absmax_vec(const uint4& u) {
  if constexpr (W > 1) return absmax16<T>(u);
  return fabsf(to_f32(*reinterpret_cast<const T*>(&u)));
}

template <typename T, int W, bool CONTIG>
__global__ void __launch_bounds__(kThreads) amax_kernel(Rows in, float* amax_out) {
  const int64_t total = in.M * (in.K / W), step = int64_t(gridDim.x) * kThreads * kUnroll;
  float amax = 0.f;
  for (int64_t base = int64_t(blockIdx.x) * kThreads * kUnroll + threadIdx.x; base < total; base += step) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * kThreads;
      v[u] = i < total ? load_vec<T, W>(elem<T, W, CONTIG>(in, i)) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) amax = fmaxf(amax, absmax_vec<T, W>(v[u]));
  }
  amax = block_max(amax);
  if (threadIdx.x == 0) atomicMax(reinterpret_cast<unsigned*>(amax_out), __float_as_uint(amax));
}

template <typename T, int W, bool CONTIG>
__global__ void __launch_bounds__(kThreads) quant_kernel(Rows in, uint8_t* out, float* scale, const float* amax) {
  const float c = fmaxf(*amax, kFp8Eps);
  const float inv = kFp8E4M3Max / c;
  if (blockIdx.x == 0 && threadIdx.x == 0) *scale = c / kFp8E4M3Max;
  const int64_t total = in.M * (in.K / W), step = int64_t(gridDim.x) * kThreads * kUnroll;
  for (int64_t base = int64_t(blockIdx.x) * kThreads * kUnroll + threadIdx.x; base < total; base += step) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * kThreads;
      v[u] = i < total ? load_vec<T, W>(elem<T, W, CONTIG>(in, i)) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * kThreads;
      if (i >= total) break;
      if constexpr (W > 1) quant_store16<T>(v[u], inv, out + i * W, true);
      else out[i] = f32_to_e4m3(to_f32(*reinterpret_cast<const T*>(&v[u])) * inv);
    }
  }
}

template <typename T, int W, bool CONTIG>
void launch(const Rows& in, uint8_t* out, float* scale, float* amax, int sms, cudaStream_t s) {
  const int64_t n = in.M * in.K / W;
  const unsigned grid = std::max(1u, std::min<unsigned>(ceil_div(n, kThreads * kUnroll), sms * 4));
  amax_kernel<T, W, CONTIG><<<grid, kThreads, 0, s>>>(in, amax);
  quant_kernel<T, W, CONTIG><<<grid, kThreads, 0, s>>>(in, out, scale, amax);
}

}  // namespace

cudaError_t fp8_quantize_tensor(const Rows& in, uint8_t* out, float* scale, float* amax_scratch,
                                cudaStream_t stream) {
  cudaError_t err = cudaMemsetAsync(amax_scratch, 0, sizeof(float), stream);
  if (err != cudaSuccess) return err;
  int dev = 0, sms = 132;
  current_device_sms(&dev, &sms);  // read once per device (common/device_attrs.h)
  return dispatch_dtype(in.dtype, [&](auto t) {
    using T = decltype(t);
    constexpr int W = kVec16<T>;
    const bool contig = in.M <= 1 || in.stride == in.K;
    if (rows_vectorizable<T>(in, W)) {
      if (contig) launch<T, W, true>(in, out, scale, amax_scratch, sms, stream);
      else launch<T, W, false>(in, out, scale, amax_scratch, sms, stream);
    } else {
      if (contig) launch<T, 1, true>(in, out, scale, amax_scratch, sms, stream);
      else launch<T, 1, false>(in, out, scale, amax_scratch, sms, stream);
    }
  });
}

}  // namespace mslk::quantize
