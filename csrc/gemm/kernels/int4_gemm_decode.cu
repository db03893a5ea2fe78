// The INT4-weight decode path (int4_gemm.h): its plan (which kernel, the K split), the in-order
// sum of the splits, and the FP32 decode kernel (M <= 16) for the groups the tensor-core one
// (int4_gemm_mma.cu) does not take. FP32 kernel: each warp streams `R` weight rows with 16-byte
// loads (32 weights of one group a lane, two loads a row in flight), turns nibbles into floats
// with a magic-number trick, reads the activations from a shared-memory stage and keeps the few
// activation rows' sums in registers, so the weight is read once for all M rows. Why these
// choices: docs/design/int4_gemm.md.
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <iterator>

#include "gemm/kernels/int4_gemm.h"
#include "gemm/kernels/int4_nibble.cuh"

namespace mslk::gemm {
namespace {

using int4::epilogue;
using int4::load_s;
using int4::nib;

// A CTA: 4 warps, each on its own rows, the same K range (4 rather than 8: at 160-240 registers a
// thread, CTAs of 128 threads pack 2-3 to a SM where 256-thread ones fit only once).
constexpr int kWarps = 4;

// The 8 nibbles of a word as q * 2^(p - 8) (int4_nibble.cuh), p the bit each is read at: x_factor
// gives the 2^(8 - p) the activation carries.
__device__ __forceinline__ void dequant8(uint32_t w, const int4::NibMagic& mg, float (&q)[8]) {
  const uint32_t h = w >> 12;
  q[0] = nib<0>(w, mg);
  q[1] = nib<4>(w, mg);
  q[2] = nib<8>(w, mg);
  q[3] = nib<12>(w, mg);
  q[4] = nib<16>(w, mg);
  q[5] = nib<8>(h, mg);
  q[6] = nib<12>(h, mg);
  q[7] = nib<16>(h, mg);
}

// 2^(8 - p) for the nibble positions dequant8 reads.
__device__ __forceinline__ float x_factor(int j) {
  constexpr float f[8] = {256.f, 16.f, 1.f, 0.0625f, 0.00390625f, 1.f, 0.0625f, 0.00390625f};
  return f[j];
}

// 8 activations of row m at k .. k + 7 as float (bf16: one 16-byte load; fp8: 8 bytes).
template <bool kFp8>
__device__ __forceinline__ void load_x8(const void* x, int64_t off, float (&v)[8]) {
  if constexpr (kFp8) {
    const uint2 u = __ldg(reinterpret_cast<const uint2*>(static_cast<const uint8_t*>(x) + off));
    const __nv_fp8_e4m3* e = reinterpret_cast<const __nv_fp8_e4m3*>(&u);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = float(e[i]);
  } else {
    const uint4 u = __ldg(reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(x) + off));
    const uint32_t* e = reinterpret_cast<const uint32_t*>(&u);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      v[2 * i] = __uint_as_float(e[i] << 16);
      v[2 * i + 1] = __uint_as_float(e[i] & 0xFFFF0000u);
    }
  }
}

// Activations staged in shared memory once a CTA for 32 chunks (1024 k) at a time, already float,
// scaled by x_factor, and with each chunk's sum: [MT][8 float4][32 chunks] (a lane reads its chunk's
// float4 f at f * 32 + lane: conflict-free) and [MT][32] sums; two buffers.
template <int MT>
struct XStage {
  float4 v[2][MT][8][32];
  float sum[2][MT][32];
};

// Thread t stages (m, chunk l, word j) = (i, t / 4, t % 4) for i < MT: 8 activations of chunk cb + l.
template <int MT, bool kFp8>
__device__ __forceinline__ void stage_x(const Int4GemmParams& p, XStage<MT>& st, int buf, int64_t cb, int64_t c_end,
                                        int m0, int mrows) {
  const int t = threadIdx.x, l = t / 4, j = t % 4;
#pragma unroll
  for (int m = 0; m < MT; ++m) {
    float v[8];
    if (m < mrows && cb + l < c_end) {
      load_x8<kFp8>(p.x, (m0 + m) * p.ldx + (cb + l) * 32 + j * 8, v);
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = 0.f;
    }
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      sum += v[i];
      v[i] *= x_factor(i);
    }
    st.v[buf][m][2 * j][l] = make_float4(v[0], v[1], v[2], v[3]);
    st.v[buf][m][2 * j + 1][l] = make_float4(v[4], v[5], v[6], v[7]);
    // the chunk's sum over its 4 words, in a fixed order
    sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 1);
    sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 2);
    if (j == 0) st.sum[buf][m][l] = sum;
  }
}

// blockIdx.x: a block of kWarps * R weight rows; blockIdx.y: a K split of `cps` 32-weight chunks.
// Activation rows m0 .. m0 + mrows - 1 (mrows <= MT).
template <int MT, int R, bool kFp8, class S>
__global__ void __launch_bounds__(kWarps * 32) int4_decode_kernel(Int4GemmParams p, int m0, int mrows, int cps,
                                                                   float* ws) {
  static_assert(kWarps * 32 == 128, "stage_x maps 128 threads onto 32 chunks x 4 words");
  extern __shared__ float4 smem[];
  XStage<MT>& st = *reinterpret_cast<XStage<MT>*>(smem);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t n0 = (int64_t(blockIdx.x) * kWarps + warp) * R;
  const int64_t nchunks = p.K / 32;
  const int64_t c_begin = int64_t(blockIdx.y) * cps, c_end = std::min<int64_t>(c_begin + cps, nchunks);
  float acc[R][MT] = {};
  const int4::NibMagic mg;
  const uint32_t group_chunks = static_cast<uint32_t>(p.group / 32);

  // Unconditional loads (rows past N and chunks past the range clamped to valid ones, their
  // sums never written): a predicated load is sunk to its first use, which serialized the
  // prefetch below behind the compute.
  auto load_w = [&](int64_t c, uint4 (&v)[R]) {
    c = std::min(c, c_end - 1);
#pragma unroll
    for (int r = 0; r < R; ++r)
      v[r] = __ldg(reinterpret_cast<const uint4*>(p.w + std::min<int64_t>(n0 + r, p.N - 1) * p.ldw + c * 16));
  };

  uint4 cur[R];
  load_w(c_begin + lane, cur);
  // Every thread runs every iteration (the staging and its barrier are the CTA's); lanes past the
  // range skip the compute.
  const int iters = (cps + 31) / 32;
  for (int it = 0; it < iters; ++it) {
    const int64_t cb = c_begin + int64_t(it) * 32, c = cb + lane;
    const int buf = it & 1;
    uint4 nxt[R];
    load_w(c + 32, nxt);  // the next chunk's loads in flight while this one is computed
    // Two buffers: the one written here was last read before the previous iteration's barrier.
    stage_x<MT, kFp8>(p, st, buf, cb, c_end, m0, mrows);
    __syncthreads();
    if (c < c_end) {
      const int64_t g = static_cast<uint32_t>(c) / group_chunks;
      float sr[R], zr[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int64_t n = std::min<int64_t>(n0 + r, p.N - 1);
        sr[r] = load_s<S>(p.scale, g * p.lds + n);
        zr[r] = p.zero != nullptr ? load_s<S>(p.zero, g * p.lds + n) : 0.f;
      }
      float part[R][MT] = {};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float xs[MT][8];
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          const float4 a = st.v[buf][m][2 * j][lane], b = st.v[buf][m][2 * j + 1][lane];
          xs[m][0] = a.x, xs[m][1] = a.y, xs[m][2] = a.z, xs[m][3] = a.w;
          xs[m][4] = b.x, xs[m][5] = b.y, xs[m][6] = b.z, xs[m][7] = b.w;
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const uint32_t word = reinterpret_cast<const uint32_t*>(&cur[r])[j];
          float q[8];
          dequant8(word, mg, q);
#pragma unroll
          for (int m = 0; m < MT; ++m)
#pragma unroll
            for (int i = 0; i < 8; ++i) part[r][m] = fmaf(xs[m][i], q[i], part[r][m]);
        }
      }
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int m = 0; m < MT; ++m) acc[r][m] += fmaf(sr[r], part[r][m], zr[r] * st.sum[buf][m][lane]);
    }
#pragma unroll
    for (int r = 0; r < R; ++r) cur[r] = nxt[r];
  }

  // Butterfly over the warp (a fixed order: deterministic); lane r * MT + m writes (r, m).
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int o = 16; o > 0; o /= 2) acc[r][m] += __shfl_xor_sync(0xFFFFFFFFu, acc[r][m], o);
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      const int64_t n = n0 + r;
      if (lane != (r * MT + m) % 32 || m >= mrows || n >= p.N) continue;
      const int64_t row = m0 + m;
      if (ws != nullptr) {
        ws[(int64_t(blockIdx.y) * p.M + row) * p.N + n] = acc[r][m];
      } else {
        static_cast<__nv_bfloat16*>(p.out)[row * p.ldd + n] = __float2bfloat16(epilogue(p, acc[r][m], row, n));
      }
    }
}

// out[m, n] = bf16(epilogue(sum over splits in order of ws[s, m, n])).
__global__ void int4_split_reduce_kernel(Int4GemmParams p, const float* ws, int splits) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.M * p.N) return;
  float v = 0.f;
  for (int s = 0; s < splits; ++s) v += ws[s * p.M * p.N + i];
  const int64_t m = i / p.N, n = i % p.N;
  static_cast<__nv_bfloat16*>(p.out)[m * p.ldd + n] = __float2bfloat16(epilogue(p, v, m, n));
}

template <int MT, int R, bool kFp8, class S>
cudaError_t launch(const Int4GemmParams& p, const Int4DecodePlan& plan, float* ws, cudaStream_t stream) {
  const int64_t nchunks = p.K / 32;
  const int cps = static_cast<int>((nchunks + plan.splits - 1) / plan.splits);
  const dim3 grid(static_cast<unsigned>((p.N + kWarps * R - 1) / (kWarps * R)), static_cast<unsigned>(plan.splits));
  constexpr int kSmem = sizeof(XStage<MT>);
  if constexpr (kSmem > 48 * 1024) {
    // per call: the attribute is per device
    const cudaError_t attr = cudaFuncSetAttribute(int4_decode_kernel<MT, R, kFp8, S>,
                                                  cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
    if (attr != cudaSuccess) return attr;
  }
  for (int64_t m0 = 0; m0 < p.M; m0 += MT) {
    const int mrows = static_cast<int>(std::min<int64_t>(MT, p.M - m0));
    int4_decode_kernel<MT, R, kFp8, S><<<grid, kWarps * 32, kSmem, stream>>>(p, static_cast<int>(m0), mrows, cps,
                                                                             plan.splits > 1 ? ws : nullptr);
  }
  if (plan.splits > 1) return int4_split_reduce(p, ws, plan.splits, stream);
  return cudaGetLastError();
}

template <int MT, int R, bool kFp8>
cudaError_t launch_scales(const Int4GemmParams& p, const Int4DecodePlan& plan, float* ws, cudaStream_t stream) {
  return int4::with_scale_type(p.scale_type,
                               [&](auto s) { return launch<MT, R, kFp8, decltype(s)>(p, plan, ws, stream); });
}

template <int MT, int R>
cudaError_t launch_types(const Int4GemmParams& p, const Int4DecodePlan& plan, float* ws, cudaStream_t stream) {
  return p.x_fp8 ? launch_scales<MT, R, true>(p, plan, ws, stream) : launch_scales<MT, R, false>(p, plan, ws, stream);
}

// The plan table: activation rows a pass and weight rows a warp by M (more rows a warp amortize
// the activation loads; fewer keep the registers of larger M tiles in bounds), and the CTAs a
// SM the K split aims at.
struct DecodeRow {
  int max_m, m_tile, rows_per_warp, ctas_per_sm;
};
constexpr DecodeRow kDecodeTable[] = {
    {1, 1, 8, 6},
    {2, 2, 8, 6},
    {4, 4, 4, 6},
    {16, 8, 2, 6},
};

// Splits so that the grid reaches `ctas_per_sm` CTAs a SM, each split at least `min_units` K units
// (32-weight chunks or 128-weight tiles) and a multiple of `multiple` of them.
int64_t pick_splits(int64_t row_ctas, int64_t units, int ctas_per_sm, int num_sms, int64_t min_units,
                    int64_t multiple) {
  const int64_t want = (int64_t(ctas_per_sm) * num_sms + row_ctas - 1) / row_ctas;
  const int64_t splits = std::clamp<int64_t>(want, 1, std::max<int64_t>(1, units / min_units));
  const int64_t per = ((units + splits - 1) / splits + multiple - 1) / multiple * multiple;
  return (units + per - 1) / per;
}

// The least tiles a warp of the tensor-core kernel gets from a split.
constexpr int64_t kMmaMinTilesPerWarp = 2;

}  // namespace

Int4DecodePlan int4_decode_plan(int64_t M, int64_t N, int64_t K, int64_t group, int num_sms,
                                const Int4DecodeTuning& tuning) {
  const bool mma = tuning.kernel == Int4DecodeKernel::kFp32 ? false : int4_mma_applies(M, K, group);
  if (mma) {
    const int64_t row_ctas = (N + kInt4MmaRowsPerCta - 1) / kInt4MmaRowsPerCta;
    const int64_t tiles = K / 128;
    // CTAs up to about ctas_per_sm a SM, rounding down (a partial second wave costs more than the
    // idle slots of the first); every warp of a split keeps kMmaMinTilesPerWarp tiles.
    const Int4MmaShape shape = int4_mma_shape(M);
    int64_t splits = tuning.splits > 0 ? tuning.splits : std::max<int64_t>(1, int64_t(shape.ctas_per_sm) * num_sms / row_ctas);
    if (tuning.splits <= 0)
      splits = std::min<int64_t>(splits, std::max<int64_t>(1, tiles / (shape.warps * kMmaMinTilesPerWarp)));
    splits = std::clamp<int64_t>(splits, 1, tiles);
    // no empty split: as many splits as ceil(tiles / splits)-tile pieces
    const int64_t per = (tiles + splits - 1) / splits;
    return {true, 0, 0, static_cast<int>((tiles + per - 1) / per)};
  }
  const DecodeRow* row = &kDecodeTable[std::size(kDecodeTable) - 1];
  for (const DecodeRow& r : kDecodeTable)
    if (M <= r.max_m) {
      row = &r;
      break;
    }
  const int64_t row_ctas = (N + kWarps * row->rows_per_warp - 1) / (kWarps * row->rows_per_warp);
  // each split at least two chunks a lane, and a whole number of lanes' worth of chunks
  int64_t splits = pick_splits(row_ctas, K / 32, row->ctas_per_sm, num_sms, 64, 32);
  if (tuning.splits > 0) {
    const int64_t chunks = K / 32, per = ((chunks + tuning.splits - 1) / tuning.splits + 31) / 32 * 32;
    splits = (chunks + per - 1) / per;
  }
  return {false, row->m_tile, row->rows_per_warp, static_cast<int>(splits)};
}

cudaError_t int4_split_reduce(const Int4GemmParams& p, const float* ws, int splits, cudaStream_t stream) {
  const int64_t total = p.M * p.N;
  int4_split_reduce_kernel<<<static_cast<unsigned>((total + 255) / 256), 256, 0, stream>>>(p, ws, splits);
  return cudaGetLastError();
}

cudaError_t int4_decode_run(const Int4GemmParams& p, const Int4DecodePlan& plan, float* ws, cudaStream_t stream) {
  if (p.K % 32 != 0 || p.group % 32 != 0 || (plan.splits > 1 && ws == nullptr)) return cudaErrorNotSupported;
  if (plan.mma) return int4_decode_mma(p, plan.splits, ws, stream);
  if (p.M > kInt4DecodeMaxM) return cudaErrorNotSupported;
  switch (plan.m_tile * 100 + plan.rows_per_warp) {
    case 108: return launch_types<1, 8>(p, plan, ws, stream);
    case 208: return launch_types<2, 8>(p, plan, ws, stream);
    case 404: return launch_types<4, 4>(p, plan, ws, stream);
    case 802: return launch_types<8, 2>(p, plan, ws, stream);
    default: return cudaErrorNotSupported;
  }
}

}  // namespace mslk::gemm
