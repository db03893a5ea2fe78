// Dispatch of the fused attention backward: what it takes, the workspace layout, and the two
// small kernels around the per-head-dim ones (fmha_bwd_d*.cu):
//   preprocess  D_i = sum_c dO[i, c] * O[i, c] per (batch, head, query row), float32;
//   convert     dq = scale * dq_accum in the input dtype (atomic mode only).
// Workspace: [dsum: B * H * Mq floats, padded to 256 bytes][dq_accum, atomic mode only: B * Mq * H * K
// floats, or the tile-contiguous sums of fmha_bwd_dq_tiles.h where the Hopper kernel uses them]; the
// layout in use is cleared on the stream before the main kernel adds to it.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "attention/kernels/fmha_bwd.h"
#include "attention/kernels/fmha_bwd_dq_tiles.h"
#include "attention/kernels/fmha_bwd_impl.h"
#include "attention/kernels/fmha_bwd_sm90.h"
#include "attention/kernels/fmha_sm80_device.cuh"
#include "common/device_attrs.h"

namespace mslk::attention {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ __half from_f<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

// (a, b) * scale as one 32-bit word of two 16-bit values, a in the low half.
template <typename T>
__device__ __forceinline__ uint32_t pack_pair(float a, float b, float scale);
template <>
__device__ __forceinline__ uint32_t pack_pair<__half>(float a, float b, float scale) {
  return uint32_t(__half_as_ushort(__float2half_rn(a * scale))) |
         (uint32_t(__half_as_ushort(__float2half_rn(b * scale))) << 16);
}
template <>
__device__ __forceinline__ uint32_t pack_pair<__nv_bfloat16>(float a, float b, float scale) {
  return uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(a * scale))) |
         (uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(b * scale))) << 16);
}

// Eight 16-bit values from one 16-byte load.
template <typename T>
__device__ __forceinline__ void load8(const T* ptr, float (&v)[8]) {
  const uint4 u = *reinterpret_cast<const uint4*>(ptr);
  const T* e = reinterpret_cast<const T*>(&u);
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] = to_f(e[i]);
}

// One warp per (b, m, h) row of all B * Mq * H (rows outside every varlen query block are computed
// too: they are never read). vec: out and dout rows 16-byte aligned, 8 columns a lane a load (Kv is a
// multiple of 8).
template <typename T>
__global__ void __launch_bounds__(kThreads) fmha_bwd_preprocess(const FmhaBwdParams p, float* dsum, bool vec) {
  const int64_t row = (int64_t(blockIdx.x) * kThreads + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (row >= int64_t(p.B) * p.Mq * p.H) return;
  const int64_t bm = row / p.H;
  const int h = int(row - bm * p.H);
  const int64_t b = bm / p.Mq;
  const int m = int(bm - b * p.Mq);
  const T* o = static_cast<const T*>(p.out) + b * p.o_sb + int64_t(m) * p.o_sm + int64_t(h) * p.o_sh;
  const T* d = static_cast<const T*>(p.dout) + b * p.do_sb + int64_t(m) * p.do_sm + int64_t(h) * p.do_sh;
  float acc = 0.f;
  if (vec) {
    for (int c = lane * 8; c < p.Kv; c += 256) {
      float a[8], g[8];
      load8(o + c, a);
      load8(d + c, g);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc += a[i] * g[i];
    }
  } else {
    for (int c = lane; c < p.Kv; c += 32) acc += to_f(o[c]) * to_f(d[c]);
  }
#pragma unroll
  for (int x = 16; x > 0; x >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, x);
  if (lane == 0) dsum[(b * p.H + h) * p.Mq + m] = acc;
}

// dq[b, m, h, c] = scale * dq_accum[b, m, h, c] over all rows (rows no query block holds get zeros):
// a thread per 8 columns (K is a multiple of 8), two 16-byte loads, one 16-byte store where dq's rows
// are 16-byte aligned (vec) or four 4-byte ones.
template <typename T>
__global__ void __launch_bounds__(kThreads) fmha_bwd_convert_dq(const FmhaBwdParams p, const float* acc, bool vec) {
  const int k8 = p.K / 8;
  const int64_t n = int64_t(p.B) * p.Mq * p.H * k8;
  for (int64_t e = int64_t(blockIdx.x) * kThreads + threadIdx.x; e < n; e += int64_t(gridDim.x) * kThreads) {
    const int64_t r = e / k8;
    const int c = int(e - r * k8) * 8;
    const int64_t bm = r / p.H;
    const int h = int(r - bm * p.H);
    const int64_t b = bm / p.Mq;
    const int m = int(bm - b * p.Mq);
    const float4* src = reinterpret_cast<const float4*>(acc + r * p.K + c);
    const float4 lo = src[0], hi = src[1];
    const float f[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    alignas(16) T out[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) out[i] = from_f<T>(f[i] * p.scale);
    T* dst = static_cast<T*>(p.dq) + b * p.dq_sb + int64_t(m) * p.dq_sm + int64_t(h) * p.dq_sh + c;
    if (vec) {
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(out);
    } else {
#pragma unroll
      for (int i = 0; i < 4; ++i) reinterpret_cast<uint32_t*>(dst)[i] = reinterpret_cast<const uint32_t*>(out)[i];
    }
  }
}

// The tile-contiguous sums (fmha_bwd_dq_tiles.h) as dq in the input dtype: CTAs (x, head, sequence)
// take the sequence's tiles x, x + gridDim.x, ... (robust to a low max_seqlen_q); float4 reads in
// the sums' order, each giving two column pairs of two rows. Rows past the sequence are not
// written, nor rows outside every sequence (the caller's zeros stay).
template <typename T>
__global__ void __launch_bounds__(kThreads) fmha_bwd_convert_dq_tiles(const FmhaBwdParams p, const float* acc) {
  sm80::SeqBlock sb;
  if (!sm80::seq_block(p, int(blockIdx.z), p.Mkv, sb)) return;
  const int h = int(blockIdx.y), n4 = kDqTileRows * p.K / 4;
  T* const dq = static_cast<T*>(p.dq) + int64_t(sb.bq) * p.dq_sb + int64_t(h) * p.dq_sh;
  for (int m0 = int(blockIdx.x) * kDqTileRows; m0 < sb.lq; m0 += int(gridDim.x) * kDqTileRows) {
    const float4* src = reinterpret_cast<const float4*>(acc + dq_tile_offset(p, sb.bq, sb.q0, int(blockIdx.z), m0, h));
    const int rows = min(kDqTileRows, sb.lq - m0);
    for (int f = threadIdx.x; f < n4; f += kThreads) {
      const float4 v = src[f];
      const int part = f / 1024, j = (f / 128) % 8, t = f % 128;
      const int r = 16 * (t / 32) + (t % 32) / 4, c = part * kDqPartCols + 8 * j + 2 * (t % 4);
      if (r < rows)
        *reinterpret_cast<uint32_t*>(dq + int64_t(sb.q0 + m0 + r) * p.dq_sm + c) = pack_pair<T>(v.x, v.y, p.scale);
      if (r + 8 < rows)
        *reinterpret_cast<uint32_t*>(dq + int64_t(sb.q0 + m0 + r + 8) * p.dq_sm + c) = pack_pair<T>(v.z, v.w, p.scale);
    }
  }
}

int64_t dsum_bytes(const FmhaBwdParams& p) { return (int64_t(p.B) * p.H * p.Mq * 4 + 255) / 256 * 256; }
int64_t dq_rows_bytes(const FmhaBwdParams& p) { return int64_t(p.B) * p.Mq * p.H * p.K * 4; }
int64_t dq_tiles_bytes(const FmhaBwdParams& p) { return dq_tiles_floats(p) * 4; }
// Room for the layout the call may use: the tiles only where dq_tiles_used.
int64_t dq_accum_bytes(const FmhaBwdParams& p) {
  if (p.deterministic) return 0;
  const int64_t rows = dq_rows_bytes(p);
  return dq_tiles_used(p) ? std::max(rows, dq_tiles_bytes(p)) : rows;
}

bool aligned(const void* ptr, int bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; }

// cp.async reads 16-byte chunks: bases 16-byte aligned, row / head / batch strides multiples of 8.
bool loadable(const void* ptr, int64_t sb, int64_t sm, int64_t sh) {
  return ptr != nullptr && aligned(ptr, 16) && sb % 8 == 0 && sm % 8 == 0 && sh % 8 == 0;
}
// Epilogues store column pairs as 32-bit words.
bool storable(const void* ptr, int64_t sb, int64_t sm, int64_t sh) {
  return ptr != nullptr && aligned(ptr, 4) && sb % 2 == 0 && sm % 2 == 0 && sh % 2 == 0;
}

bool device_is_sm80_plus() {
  int dev = 0;
  mslk::cuda::DeviceAttrs a;
  if (mslk::cuda::current_device_attrs(&dev, &a) != cudaSuccess) return (void)cudaGetLastError(), false;
  return a.cc_major >= 8;
}

cudaError_t bwd_d(const FmhaBwdParams& p, const FmhaBwdScratch& w, cudaStream_t stream) {
  const int d = p.K > p.Kv ? p.K : p.Kv;
  return d <= 64 ? fmha_bwd_d64(p, w, stream) : d <= 128 ? fmha_bwd_d128(p, w, stream) : fmha_bwd_d256(p, w, stream);
}

template <typename T>
cudaError_t run(const FmhaBwdParams& p, const FmhaBwdScratch& w, FmhaBwdMainFn main, bool dq_tiles,
                cudaStream_t stream) {
  const int64_t rows = int64_t(p.B) * p.Mq * p.H;
  if (rows == 0) return main(p, w, stream);  // no queries: dK = dV = 0
  const bool o_vec = aligned(p.out, 16) && p.o_sb % 8 == 0 && p.o_sm % 8 == 0 && p.o_sh % 8 == 0;
  const bool do_vec = aligned(p.dout, 16) && p.do_sb % 8 == 0 && p.do_sm % 8 == 0 && p.do_sh % 8 == 0;
  fmha_bwd_preprocess<T><<<unsigned((rows * 32 + kThreads - 1) / kThreads), kThreads, 0, stream>>>(p, w.dsum,
                                                                                                    o_vec && do_vec);
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess && w.dq_accum != nullptr)
    err = cudaMemsetAsync(w.dq_accum, 0, dq_tiles ? dq_tiles_bytes(p) : dq_rows_bytes(p), stream);
  if (err != cudaSuccess) return err;
  err = main(p, w, stream);
  if (err != cudaSuccess || w.dq_accum == nullptr) return err;
  if (dq_tiles) {
    const int tiles = std::max(1, (p.max_seqlen_q + kDqTileRows - 1) / kDqTileRows);
    fmha_bwd_convert_dq_tiles<T><<<dim3(unsigned(tiles), unsigned(p.H), unsigned(p.num_seqs)), kThreads, 0, stream>>>(
        p, w.dq_accum);
    return cudaGetLastError();
  }
  const int64_t n = rows * (p.K / 8);
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  const bool dq_vec = aligned(p.dq, 16) && p.dq_sb % 8 == 0 && p.dq_sm % 8 == 0 && p.dq_sh % 8 == 0;
  fmha_bwd_convert_dq<T><<<unsigned(blocks < 65536 ? blocks : 65536), kThreads, 0, stream>>>(p, w.dq_accum, dq_vec);
  return cudaGetLastError();
}

}  // namespace

bool fmha_bwd_supports(const FmhaBwdParams& p) {
  if (p.is_bf16 != 0 && p.is_bf16 != 1) return false;
  if (p.K <= 0 || p.Kv <= 0 || p.K % 8 != 0 || p.Kv % 8 != 0 || p.K > 256 || p.Kv > 256) return false;
  if (p.B < 0 || p.H < 0 || p.Mq < 0 || p.Mkv < 0) return false;
  if (p.H > 65535 || p.num_seqs > 65535) return false;  // grid y / z
  if (p.mask_kind < kMaskNone || p.mask_kind > kMaskLocalBottomRight) return false;
  if (p.seqstart_q != nullptr && (p.B != 1 || p.seqstart_k == nullptr)) return false;
  if (p.dropout.p < 0.f || p.dropout.p >= 1.f) return false;
  if (!loadable(p.q, p.q_sb, p.q_sm, p.q_sh) || !loadable(p.k, p.k_sb, p.k_sm, p.k_sh) ||
      !loadable(p.v, p.v_sb, p.v_sm, p.v_sh) || !loadable(p.dout, p.do_sb, p.do_sm, p.do_sh))
    return false;
  if (p.out == nullptr || p.lse == nullptr) return false;
  if (!storable(p.dq, p.dq_sb, p.dq_sm, p.dq_sh) || !storable(p.dk, p.dk_sb, p.dk_sm, p.dk_sh) ||
      !storable(p.dv, p.dv_sb, p.dv_sm, p.dv_sh))
    return false;
  return device_is_sm80_plus();
}

int64_t fmha_bwd_workspace_bytes(const FmhaBwdParams& p) { return dsum_bytes(p) + dq_accum_bytes(p); }

cudaError_t fmha_bwd(const FmhaBwdParams& p, cudaStream_t stream) {
  if (!fmha_bwd_supports(p)) return cudaErrorNotSupported;
  if (!p.no_sm90 && fmha_bwd_sm90_supports(p)) return fmha_bwd_sm90(p, stream);
  return fmha_bwd_with(p, bwd_d, false, stream);
}

cudaError_t fmha_bwd_with(const FmhaBwdParams& p, FmhaBwdMainFn main, bool dq_tiles, cudaStream_t stream) {
  if (int64_t(p.B) * p.H == 0 || p.num_seqs <= 0) return cudaSuccess;
  if (dq_tiles && !dq_tiles_used(p)) return cudaErrorInvalidValue;  // the workspace is sized for the rows
  const int64_t need = fmha_bwd_workspace_bytes(p);
  if (need > 0 && (p.workspace == nullptr || p.workspace_bytes < need || !aligned(p.workspace, 16)))
    return cudaErrorInvalidValue;
  FmhaBwdScratch w;
  w.dsum = static_cast<float*>(p.workspace);
  w.dq_accum = p.deterministic ? nullptr
                               : reinterpret_cast<float*>(static_cast<unsigned char*>(p.workspace) + dsum_bytes(p));
  return p.is_bf16 ? run<__nv_bfloat16>(p, w, main, dq_tiles, stream) : run<__half>(p, w, main, dq_tiles, stream);
}

}  // namespace mslk::attention
