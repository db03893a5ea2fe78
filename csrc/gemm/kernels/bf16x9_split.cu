// The split of FP32 operands into the segmented BF16 parts buffer of bf16x9_gemm (bf16x9.h).
// One thread per 8 consecutive k of one row: it reads them once and writes its 8 values of each
// of the nine segments as one 16-byte store each (kp % 8 == 0 keeps every store aligned).
#include <cuda_bf16.h>

#include "gemm/kernels/bf16x9.h"

namespace mslk::gemm {
namespace {

constexpr int kThreads = 256;

template <bool kB>
__global__ void __launch_bounds__(kThreads) split_kernel(Bf16x9SplitParams p, bool vec) {
  const int64_t groups = p.kp / 8;
  const int64_t t = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (t >= p.rows * groups) return;
  const int64_t r = t / groups, k0 = (t - r * groups) * 8;
  const float* row = p.src + r * p.ld;
  float x[8];
  if (vec && k0 + 8 <= p.K) {
    const float4 u = *reinterpret_cast<const float4*>(row + k0);
    const float4 v = *reinterpret_cast<const float4*>(row + k0 + 4);
    x[0] = u.x, x[1] = u.y, x[2] = u.z, x[3] = u.w, x[4] = v.x, x[5] = v.y, x[6] = v.z, x[7] = v.w;
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) x[i] = k0 + i < p.K ? row[k0 + i] : 0.f;
  }
  // parts[q] packs the 8 values of part q; residuals are exact in FP32 (Sterbenz).
  uint4 parts[3];
  auto* h = reinterpret_cast<__nv_bfloat16*>(parts);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const __nv_bfloat16 hi = __float2bfloat16_rn(x[i]);
    const float r1 = x[i] - __bfloat162float(hi);
    const __nv_bfloat16 mid = __float2bfloat16_rn(r1);
    const __nv_bfloat16 lo = __float2bfloat16_rn(r1 - __bfloat162float(mid));
    h[i] = hi, h[8 + i] = mid, h[16 + i] = lo;
  }
  auto* out = reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(p.dst) + r * 9 * p.kp + k0);
  const int64_t seg = p.kp / 8;  // segment stride in uint4
#pragma unroll
  for (int s = 0; s < 9; ++s) out[s * seg] = parts[bf16x9_segment_part(s, kB)];
}

}  // namespace

cudaError_t bf16x9_split(const Bf16x9SplitParams& p, cudaStream_t stream) {
  const int64_t n = p.rows * (p.kp / 8);
  if (n == 0) return cudaSuccess;
  const bool vec = p.ld % 4 == 0 && reinterpret_cast<uintptr_t>(p.src) % 16 == 0;
  const unsigned blocks = static_cast<unsigned>((n + kThreads - 1) / kThreads);
  if (p.b_side)
    split_kernel<true><<<blocks, kThreads, 0, stream>>>(p, vec);
  else
    split_kernel<false><<<blocks, kThreads, 0, stream>>>(p, vec);
  return cudaGetLastError();
}

}  // namespace mslk::gemm
