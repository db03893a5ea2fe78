// Attention merge (forward and backward of merge_params.h): one warp per (b, m, g, h) row. Lanes
// own interleaved columns (k = lane + 32 i), so every load of a shard row is one coalesced sweep;
// the LSE reductions over shards are warp shuffles. Memory-bound: the shards are read once.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cfloat>
#include <cmath>

#include "attention/kernels/merge_attentions.h"
#include "common/cuda_utils.cuh"

namespace mslk::attention {
namespace {

constexpr int kWarps = 8;  // rows per 256-thread block

template <typename T> __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ int64_t aoff(const MergeAttnLayout& l, int64_t b, int64_t m, int64_t g, int64_t h) {
  return b * l.sb + m * l.sm + g * l.sg + h * l.sh;
}
__device__ __forceinline__ int64_t loff(const MergeLseLayout& l, int64_t b, int64_t g, int64_t h, int64_t m) {
  return b * l.sb + g * l.sg + h * l.sh + m * l.sm;
}
template <typename T>
__device__ __forceinline__ const T* shard_attn(const MergeShards& s, int i) {
  return s.stacked ? static_cast<const T*>(s.attn[0]) + i * s.attn_split_stride : static_cast<const T*>(s.attn[i]);
}
__device__ __forceinline__ float shard_lse(const MergeShards& s, int i, int64_t off) {
  return s.stacked ? s.lse[0][i * s.lse_split_stride + off] : s.lse[i][off];
}

// Row index r -> (b, m, g, h) with h fastest (neighbouring warps read neighbouring heads).
struct Row {
  int64_t b, m, g, h;
};
__device__ __forceinline__ Row row_of(int64_t r, int64_t M, int64_t G, int64_t H) {
  Row x;
  x.h = r % H, r /= H;
  x.g = r % G, r /= G;
  x.m = r % M, x.b = r / M;
  return x;
}

template <typename Ti, typename To>
__global__ void __launch_bounds__(kWarps * 32) merge_fwd_kernel(const MergeFwdParams p) {
  const int lane = threadIdx.x & 31;
  const int64_t r = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (r >= p.B * p.M * p.G * p.H) return;
  const Row x = row_of(r, p.M, p.G, p.H);
  const int64_t lo_in = loff(p.in.l, x.b, x.g, x.h, x.m);

  float mx = -INFINITY;
  for (int s = lane; s < p.S; s += 32) mx = fmaxf(mx, shard_lse(p.in, s, lo_in));
  mx = warp_max(mx);
  const bool empty = mx == -INFINITY;  // every shard -inf (or all NaN): out 0, lse -inf
  float den = 0.f;
  if (!empty)
    for (int s = lane; s < p.S; s += 32) den += __expf(shard_lse(p.in, s, lo_in) - mx);
  den = warp_sum(den);
  const float inv = empty ? 0.f : 1.f / den;

  const int64_t ia = aoff(p.in.a, x.b, x.m, x.g, x.h);
  To* out = static_cast<To*>(p.out) + aoff(p.o, x.b, x.m, x.g, x.h);
  constexpr int V = 4;  // columns per lane per sweep
  for (int64_t k0 = 0; k0 < p.K; k0 += 32 * V) {
    float acc[V] = {};
    if (!empty)
      for (int s = 0; s < p.S; ++s) {
        const float w = __expf(shard_lse(p.in, s, lo_in) - mx) * inv;
        const Ti* a = shard_attn<Ti>(p.in, s) + ia;
#pragma unroll
        for (int i = 0; i < V; ++i) {
          const int64_t k = k0 + lane + 32 * i;
          if (k < p.K) acc[i] += w * cuda::to_f32(a[k]);
        }
      }
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const int64_t k = k0 + lane + 32 * i;
      if (k < p.K) out[k] = from_f32<To>(acc[i]);
    }
  }
  if (p.lse_out != nullptr && lane == 0)
    p.lse_out[loff(p.lo, x.b, x.g, x.h, x.m)] = empty ? -INFINITY : mx + logf(den);
}

template <typename Ti, typename To>
__global__ void __launch_bounds__(kWarps * 32) merge_bwd_kernel(const MergeBwdParams p) {
  const int lane = threadIdx.x & 31;
  const int64_t r = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (r >= p.B * p.M * p.G * p.H) return;
  const Row x = row_of(r, p.M, p.G, p.H);
  const float L = p.lse_out[loff(p.lo, x.b, x.g, x.h, x.m)];
  const float dL = p.d_lse != nullptr ? p.d_lse[loff(p.dl, x.b, x.g, x.h, x.m)] : 0.f;
  const int64_t lo_in = loff(p.in.l, x.b, x.g, x.h, x.m);
  const To* o = static_cast<const To*>(p.out) + aoff(p.o, x.b, x.m, x.g, x.h);
  const To* d = static_cast<const To*>(p.d_out) + aoff(p.d, x.b, x.m, x.g, x.h);
  // gradients are contiguous [B, M, G, H, K] / [B, G, H, M]
  const int64_t ga = r * p.K, gl = ((x.b * p.G + x.g) * p.H + x.h) * p.M + x.m;
  for (int s = 0; s < p.S; ++s) {
    const float w = L == -INFINITY ? 0.f : __expf(shard_lse(p.in, s, lo_in) - L);
    const Ti* a = shard_attn<Ti>(p.in, s) + aoff(p.in.a, x.b, x.m, x.g, x.h);
    Ti* da = static_cast<Ti*>(p.d_attn[s]) + ga;
    float dot = 0.f;
    for (int64_t k = lane; k < p.K; k += 32) {
      const float dk = cuda::to_f32(d[k]);
      dot += dk * (cuda::to_f32(a[k]) - cuda::to_f32(o[k]));
      da[k] = from_f32<Ti>(w * dk);
    }
    dot = warp_sum(dot);
    if (lane == 0) p.d_lse_s[s][gl] = w == 0.f ? 0.f : w * (dot + dL);
  }
}

// Calls f(Ti{}, To{}) with the C++ types of the shard and output dtypes.
template <typename F>
cudaError_t with_types(Dtype in, Dtype out, F&& f) {
  auto with_out = [&](auto ti) {
    switch (out) {
      case Dtype::kFloat16: return f(ti, __half{});
      case Dtype::kBFloat16: return f(ti, __nv_bfloat16{});
      default: return f(ti, float{});
    }
  };
  switch (in) {
    case Dtype::kFloat16: return with_out(__half{});
    case Dtype::kBFloat16: return with_out(__nv_bfloat16{});
    default: return with_out(float{});
  }
}

int64_t num_blocks(int64_t B, int64_t M, int64_t G, int64_t H) { return (B * M * G * H + kWarps - 1) / kWarps; }

}  // namespace

cudaError_t merge_attentions_fwd(const MergeFwdParams& p, cudaStream_t stream) {
  const int64_t blocks = num_blocks(p.B, p.M, p.G, p.H);
  if (blocks == 0) return cudaSuccess;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  return with_types(p.in_dtype, p.out_dtype, [&](auto ti, auto to) {
    merge_fwd_kernel<decltype(ti), decltype(to)><<<unsigned(blocks), kWarps * 32, 0, stream>>>(p);
    return cudaGetLastError();
  });
}

cudaError_t merge_attentions_bwd(const MergeBwdParams& p, cudaStream_t stream) {
  const int64_t blocks = num_blocks(p.B, p.M, p.G, p.H);
  if (blocks == 0) return cudaSuccess;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  return with_types(p.in_dtype, p.out_dtype, [&](auto ti, auto to) {
    merge_bwd_kernel<decltype(ti), decltype(to)><<<unsigned(blocks), kWarps * 32, 0, stream>>>(p);
    return cudaGetLastError();
  });
}

}  // namespace mslk::attention
