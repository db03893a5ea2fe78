// Tensorwise FP8 quantizer: pass 1 reduces |x| to one amax (atomicMax on the float's bits,
// valid because every candidate is >= 0), pass 2 quantizes with the single scale.
#include "quantize/kernels/fp8_device.cuh"

namespace mslk::quantize {
namespace {

constexpr int kThreads = 512;
constexpr int kUnroll = 4;

template <typename T, int W>
__device__ __forceinline__ const T* elem(const Rows& r, int64_t i) {
  const int64_t per_row = r.K / W;
  return static_cast<const T*>(r.ptr) + (i / per_row) * r.stride + (i % per_row) * W;
}

template <typename T, int W>
__global__ void __launch_bounds__(kThreads) amax_kernel(Rows in, float* amax_out) {
  const int64_t total = in.M * (in.K / W), step = int64_t(gridDim.x) * kThreads * kUnroll;
  float amax = 0.f;
  for (int64_t base = int64_t(blockIdx.x) * kThreads * kUnroll + threadIdx.x; base < total; base += step) {
    if constexpr (W > 1) {
      uint4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t i = base + u * kThreads;
        v[u] = i < total ? *reinterpret_cast<const uint4*>(elem<T, W>(in, i)) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) amax = fmaxf(amax, absmax16<T>(v[u]));
    } else {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t i = base + u * kThreads;
        if (i < total) amax = fmaxf(amax, fabsf(to_f32(*elem<T, 1>(in, i))));
      }
    }
  }
  amax = block_max(amax);
  if (threadIdx.x == 0) atomicMax(reinterpret_cast<unsigned*>(amax_out), __float_as_uint(amax));
}

template <typename T, int W>
__global__ void __launch_bounds__(kThreads) quant_kernel(Rows in, uint8_t* out, float* scale, const float* amax) {
  const float c = fmaxf(*amax, kFp8Eps);
  const float inv = kFp8E4M3Max / c;
  if (blockIdx.x == 0 && threadIdx.x == 0) *scale = c / kFp8E4M3Max;
  const int64_t total = in.M * (in.K / W), step = int64_t(gridDim.x) * kThreads;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < total; i += step) {
    if constexpr (W > 1) {
      quant_store16<T>(*reinterpret_cast<const uint4*>(elem<T, W>(in, i)), inv, out + i * W, true);
    } else {
      out[i] = f32_to_e4m3(to_f32(*elem<T, 1>(in, i)) * inv);
    }
  }
}

}  // namespace

cudaError_t fp8_quantize_tensor(const Rows& in, uint8_t* out, float* scale, float* amax_scratch,
                                cudaStream_t stream) {
  cudaError_t err = cudaMemsetAsync(amax_scratch, 0, sizeof(float), stream);
  if (err != cudaSuccess) return err;
  int dev = 0, sms = 132;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  return dispatch_dtype(in.dtype, [&](auto t) {
    using T = decltype(t);
    constexpr int W = kVec16<T>;
    const bool vec = rows_vectorizable<T>(in, W);
    const int64_t n = in.M * in.K / (vec ? W : 1);
    const unsigned grid_a = std::max(1u, std::min<unsigned>(ceil_div(n, kThreads * kUnroll), sms * 4));
    const unsigned grid_q = std::max(1u, std::min<unsigned>(ceil_div(n, kThreads), sms * 16));
    if (vec) {
      amax_kernel<T, W><<<grid_a, kThreads, 0, stream>>>(in, amax_scratch);
      quant_kernel<T, W><<<grid_q, kThreads, 0, stream>>>(in, out, scale, amax_scratch);
    } else {
      amax_kernel<T, 1><<<grid_a, kThreads, 0, stream>>>(in, amax_scratch);
      quant_kernel<T, 1><<<grid_q, kThreads, 0, stream>>>(in, out, scale, amax_scratch);
    }
  });
}

}  // namespace mslk::quantize
