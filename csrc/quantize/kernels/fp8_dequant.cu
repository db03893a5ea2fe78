// FP8 -> BF16 dequantization with one scale per (tile_m x tile_k) tile (row: 1 x K).
#include "quantize/kernels/fp8_device.cuh"

namespace mslk::quantize {
namespace {

constexpr int kThreads = 256;

template <int W>
__global__ void __launch_bounds__(kThreads) dequant_kernel(Fp8DequantParams p) {
  const int64_t per_row = p.K / W, total = p.M * per_row, step = int64_t(gridDim.x) * kThreads;
  auto* out = static_cast<__nv_bfloat16*>(p.out);
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < total; i += step) {
    const int64_t r = i / per_row, c = (i % per_row) * W;
    const float s = p.scale[(r / p.tile_m) * p.scale_stride_m + (c / p.tile_k) * p.scale_stride_k];
    const uint8_t* src = p.xq + r * p.stride + c;
    if constexpr (W == 8) {
      // tile_k % 8 == 0 here, so the 8 elements share one scale
      const uint2 u = *reinterpret_cast<const uint2*>(src);
      const uint8_t* b = reinterpret_cast<const uint8_t*>(&u);
      __nv_bfloat162 o[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) o[k] = __floats2bfloat162_rn(e4m3_to_f32(b[2 * k]) * s, e4m3_to_f32(b[2 * k + 1]) * s);
      *reinterpret_cast<uint4*>(out + r * p.K + c) = *reinterpret_cast<const uint4*>(o);
    } else {
      out[r * p.K + c] = __float2bfloat16_rn(e4m3_to_f32(*src) * s);
    }
  }
}

}  // namespace

cudaError_t fp8_dequantize(const Fp8DequantParams& p, cudaStream_t stream) {
  if (p.M == 0 || p.K == 0) return cudaSuccess;
  int dev = 0, sms = 132;
  current_device_sms(&dev, &sms);  // read once per device (common/device_attrs.h)
  const bool vec = p.K % 8 == 0 && p.stride % 8 == 0 && p.tile_k % 8 == 0 &&
                   reinterpret_cast<uintptr_t>(p.xq) % 8 == 0;
  const int64_t n = p.M * p.K / (vec ? 8 : 1);
  const unsigned grid = std::max(1u, std::min<unsigned>(ceil_div(n, kThreads), sms * 16));
  if (vec) dequant_kernel<8><<<grid, kThreads, 0, stream>>>(p);
  else dequant_kernel<1><<<grid, kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace mslk::quantize
