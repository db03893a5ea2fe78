// The tensor-core INT4 decode kernel (int4_gemm.h: M <= 16, K and the group multiples of 128).
// Memory-bound on the packed weight, so the design is about bytes in flight and few instructions
// a weight:
// - A CTA owns 32 weight rows (two blocks of 16, the MMA's M side) and a K range of 128-weight
//   tiles (one group each, or part of one); its 8 (M <= 8) or 4 warps take the range's tiles
//   round-robin, each CTA starting at its own tile, and add their sums in shared memory at the
//   end (in warp order: deterministic), so one CTA covers the whole K of its rows and no second
//   pass is needed unless the plan splits K over CTAs as well (then float32 partials and
//   int4_split_reduce).
// - Lane (r, c) = (lane / 4, lane % 4) owns 16 bytes (weights 32c .. 32c+31) of rows r and r + 8
//   of each block in every tile. Weights and the tile's activations (rows < M) reach shared
//   memory by cp.async, kStages tiles deep a warp, bypassing L1 and registers.
// - Nibbles become exact q values as bf16 (f16 for FP8 activations) pairs with one LOP3 and one
//   packed subtract a pair and feed mma.sync m16n8k16 directly: the MMA's k order inside a tile
//   is free as long as both operands follow it, so lane c's A registers take its own pairs
//   {i, i + 4} of each 8-weight word (the order the LOP3 extracts them) and its B registers the
//   activations of the same weights (a PRMT a pair; FP8: PRMT, then E4M3x2 -> f16x2). The
//   activations sit in shared memory in fragment order ([word][c][row] of 16 or 8 bytes), so
//   those reads are conflict-free.
// - B's 8 columns are activation rows: M <= 8 costs one MMA a k16 step, M <= 16 two; the weight
//   is read once for all of them.
// - Group scale and zero once a tile in float32: sum += s * (x . q) + z * sum(x), sum(x) from a
//   second MMA against ones (skipped without zeros).
// Design notes and measurements: docs/design/int4_gemm.md.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>

#include "common/sm90_ptx.cuh"
#include "gemm/kernels/int4_gemm.h"
#include "gemm/kernels/int4_mma.cuh"
#include "gemm/kernels/int4_nibble.cuh"

namespace mslk::gemm {
namespace {

using int4::epilogue;
using int4::kFold;
using int4::load_s;
using int4::MmaType;
using int4::x_pairs;

constexpr int kRp = 2;  // blocks of 16 weight rows a CTA
static_assert(16 * kRp == kInt4MmaRowsPerCta, "the plan's rows a CTA");

// Shared memory of one warp's stage: the lanes' weight pieces [rp * 2 + h][lane], then the
// activations [word j][c][row] (row < 8 MG; 16 bytes bf16, 8 bytes E4M3).
template <int MG, bool kFp8>
struct StageLayout {
  using XPiece = std::conditional_t<kFp8, uint2, uint4>;
  static constexpr int kWBytes = 2 * kRp * 32 * 16;
  static constexpr int kXPieces = 16 * 8 * MG;  // 16 pieces (8 weights each) a row and tile
  static constexpr int kBytes = kWBytes + kXPieces * int(sizeof(XPiece));
};

template <int MG>
constexpr int warps() {
  return int4_mma_shape(8 * MG).warps;
}
constexpr int kStages = 3;  // tiles in flight a warp: 2 ahead of the one computed
template <int MG, bool kFp8>
constexpr int smem_bytes() {
  return warps<MG>() * kStages * StageLayout<MG, kFp8>::kBytes;
}

// blockIdx.x: 32 weight rows; blockIdx.y: a K split of `tps` tiles. MG groups of 8 activation rows
// (M <= 8 MG). ws: float32 partials [split, M, N] (splits > 1); else the output.
template <int MG, bool kFp8, class S>
__global__ void __launch_bounds__(32 * warps<MG>(), int4_mma_shape(8 * MG).ctas_per_sm)
    int4_mma_kernel(Int4GemmParams p, int tps, float* ws) {
  constexpr bool kF16 = kFp8;
  using L = StageLayout<MG, kFp8>;
  using XPiece = typename L::XPiece;
  constexpr int kWarps = warps<MG>(), kThreads = 32 * kWarps;
  constexpr int kXBytes = kFp8 ? 1 : 2;
  extern __shared__ __align__(16) unsigned char smem[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, r = lane / 4, c = lane % 4;
  unsigned char* my = smem + warp * kStages * L::kBytes;
  const int64_t n0 = int64_t(blockIdx.x) * kInt4MmaRowsPerCta;
  const int64_t tiles = p.K / 128;
  const int64_t t_begin = int64_t(blockIdx.y) * tps, t_end = std::min<int64_t>(t_begin + tps, tiles);
  // this warp's tiles: t_begin + warp + kWarps i, i < nt
  const int nt = t_end - t_begin > warp ? int((t_end - t_begin - warp + kWarps - 1) / kWarps) : 0;
  // Each CTA starts its walk at its own tile (a rotation, deterministic per shape): in lockstep,
  // every CTA would read the same few-hundred-byte window of its rows, all rows one power-of-two
  // stride apart.
  const int rot = nt > 0 ? int((blockIdx.x * 5u + blockIdx.y * 3u) % unsigned(nt)) : 0;
  auto tile = [&](int i) {
    int k = i + rot;
    if (k >= nt) k -= nt;
    return t_begin + warp + int64_t(kWarps) * k;
  };

  // rows n0 + 16 rp + 8 h + r, clamped for the loads
  int64_t nc[kRp][2];
  const int8_t* wrow[kRp][2];
#pragma unroll
  for (int rp = 0; rp < kRp; ++rp)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      nc[rp][h] = std::min<int64_t>(n0 + 16 * rp + 8 * h + r, p.N - 1);
      wrow[rp][h] = p.w + nc[rp][h] * p.ldw + c * 16;
    }

  // Issues tile i of this warp into its stage and commits (an empty group past the last tile).
  auto issue = [&](int i) {
    if (i < nt) {
      const int64_t t = tile(i);
      unsigned char* st = my + (i % kStages) * L::kBytes;
      uint4* wdst = reinterpret_cast<uint4*>(st);
#pragma unroll
      for (int rp = 0; rp < kRp; ++rp)
#pragma unroll
        for (int h = 0; h < 2; ++h) ptx::cp_async<16>(wdst + (rp * 2 + h) * 32 + lane, wrow[rp][h] + t * 64, 16);
      XPiece* xdst = reinterpret_cast<XPiece*>(st + L::kWBytes);
      // Rows past M are not copied: their columns of the MMA are never written out.
#pragma unroll
      for (int k = 0; k < L::kXPieces / 32; ++k) {
        const int piece = k * 32 + lane;
        const int row = piece / 16, q = piece % 16;  // q = 4 c' + j
        if (row < p.M)
          ptx::cp_async<int(sizeof(XPiece))>(
              xdst + ((q % 4) * 4 + q / 4) * (8 * MG) + row,
              static_cast<const char*>(p.x) + (int64_t(row) * p.ldx + t * 128 + 8 * q) * kXBytes, int(sizeof(XPiece)));
      }
    }
    ptx::cp_async_commit();
  };

  float acc[kRp][MG][4] = {};
  uint32_t magic;
  asm volatile("mov.b32 %0, %1;" : "=r"(magic) : "n"(MmaType<kF16>::kMagic));
  const bool has_zero = p.zero != nullptr;
  const uint32_t group_tiles = static_cast<uint32_t>(p.group / 128);

  // Scales ride kStages - 1 tiles ahead like the weights (a load consumed one tile later stalled
  // every tile on the scale's DRAM latency): lane (r, c) loads row 16 (c / 2) + 8 (c % 2) + r's
  // scale and zero into a register ring indexed by the unrolled stage, and the tile's users fetch
  // their four rows' by shuffles.
  const int64_t n_own = std::min<int64_t>(n0 + 16 * (c / 2) + 8 * (c % 2) + r, p.N - 1);
  float rs[kStages], rz[kStages];
  auto load_scale = [&](int i, float& s, float& z) {
    if (i < nt) {
      const int64_t t = tile(i);
      const int64_t g = static_cast<uint32_t>(t) / group_tiles;
      s = load_s<S>(p.scale, g * p.lds + n_own);
      z = has_zero ? load_s<S>(p.zero, g * p.lds + n_own) : 0.f;
    }
  };

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    issue(s);
    load_scale(s, rs[s], rz[s]);
  }
  for (int i0 = 0; i0 < nt; i0 += kStages) {
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      const int i = i0 + s;  // i % kStages == s: the stage and ring slot are compile-time
      if (i >= nt) break;
      __syncwarp();  // every lane is done reading the stage the next issue overwrites
      issue(i + kStages - 1);
      load_scale(i + kStages - 1, rs[(s + kStages - 1) % kStages], rz[(s + kStages - 1) % kStages]);
      ptx::cp_async_wait<kStages - 1>();
      __syncwarp();  // the other lanes' activation pieces are visible
      const unsigned char* st = my + s * L::kBytes;
      const uint4* wsrc = reinterpret_cast<const uint4*>(st);
      const XPiece* xsrc = reinterpret_cast<const XPiece*>(st + L::kWBytes);
      uint4 wv[kRp][2];
#pragma unroll
      for (int rp = 0; rp < kRp; ++rp)
#pragma unroll
        for (int h = 0; h < 2; ++h) wv[rp][h] = wsrc[(rp * 2 + h) * 32 + lane];
      float dq[kRp][MG][4] = {}, dx[MG][4] = {};
      auto xfrag = [&](int j, int mg, uint32_t(&xb)[4]) { x_pairs(xsrc[(j * 4 + c) * (8 * MG) + mg * 8 + r], xb); };
      int4::tile_products<kF16>(wv, xfrag, magic, kFold<kF16> || has_zero, dq, dx);
      // this tile's scales of rows (rp, h) from lane (r, 2 rp + h); kFold: the zero term less 136 s
      float sc[kRp][2], zc[kRp][2];
#pragma unroll
      for (int rp = 0; rp < kRp; ++rp)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          sc[rp][h] = __shfl_sync(0xFFFFFFFFu, rs[s], r * 4 + rp * 2 + h);
          zc[rp][h] = __shfl_sync(0xFFFFFFFFu, rz[s], r * 4 + rp * 2 + h);
          if constexpr (kFold<kF16>) zc[rp][h] = fmaf(-136.f, sc[rp][h], zc[rp][h]);
        }
      // D: [0], [1] row r, columns 2c, 2c + 1; [2], [3] row r + 8, the same columns
#pragma unroll
      for (int rp = 0; rp < kRp; ++rp)
#pragma unroll
        for (int mg = 0; mg < MG; ++mg)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            acc[rp][mg][e] += fmaf(sc[rp][e / 2], dq[rp][mg][e], zc[rp][e / 2] * dx[mg][e]);
    }
  }
  ptx::cp_async_wait<0>();

  // The warps' sums through shared memory ([warp][value][lane], the stages no longer needed), then
  // each thread adds values v = threadIdx.x + kThreads k over the warps in order.
  constexpr int kVals = kRp * MG * 4;
  __syncthreads();
  float* red = reinterpret_cast<float*>(smem);
  {
    const float* flat = &acc[0][0][0];
#pragma unroll
    for (int v = 0; v < kVals; ++v) red[(warp * kVals + v) * 32 + lane] = flat[v];
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < kVals * 32 / kThreads; ++k) {
    const int idx = k * kThreads + threadIdx.x;  // v * 32 + lane'
    float sum = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) sum += red[w * kVals * 32 + idx];
    const int v = idx / 32, ln = idx % 32, rr = ln / 4, cc = ln % 4;
    const int rp = v / (MG * 4), mg = (v / 4) % MG, e = v % 4;
    const int64_t n = n0 + 16 * rp + 8 * (e / 2) + rr, m = mg * 8 + 2 * cc + (e & 1);
    if (n >= p.N || m >= p.M) continue;
    if (ws != nullptr)
      ws[(int64_t(blockIdx.y) * p.M + m) * p.N + n] = sum;
    else
      static_cast<__nv_bfloat16*>(p.out)[m * p.ldd + n] = __float2bfloat16(epilogue(p, sum, m, n));
  }
}

template <int MG, bool kFp8, class S>
cudaError_t launch(const Int4GemmParams& p, int splits, float* ws, cudaStream_t stream) {
  const int64_t tiles = p.K / 128;
  const int tps = static_cast<int>((tiles + splits - 1) / splits);
  const dim3 grid(static_cast<unsigned>((p.N + kInt4MmaRowsPerCta - 1) / kInt4MmaRowsPerCta),
                  static_cast<unsigned>(splits));
  constexpr int kSmem = smem_bytes<MG, kFp8>();
  auto kernel = int4_mma_kernel<MG, kFp8, S>;
  if constexpr (kSmem > 48 * 1024) {
    // per call: the attribute is per device
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
    if (e != cudaSuccess) return e;
  }
  kernel<<<grid, 32 * warps<MG>(), kSmem, stream>>>(p, tps, splits > 1 ? ws : nullptr);
  if (splits > 1) return int4_split_reduce(p, ws, splits, stream);
  return cudaGetLastError();
}

template <int MG, bool kFp8>
cudaError_t launch_scales(const Int4GemmParams& p, int splits, float* ws, cudaStream_t stream) {
  return int4::with_scale_type(p.scale_type,
                               [&](auto s) { return launch<MG, kFp8, decltype(s)>(p, splits, ws, stream); });
}

template <bool kFp8>
cudaError_t launch_m(const Int4GemmParams& p, int splits, float* ws, cudaStream_t stream) {
  return p.M <= 8 ? launch_scales<1, kFp8>(p, splits, ws, stream) : launch_scales<2, kFp8>(p, splits, ws, stream);
}

}  // namespace

cudaError_t int4_decode_mma(const Int4GemmParams& p, int splits, float* ws, cudaStream_t stream) {
  if (!int4_mma_applies(p.M, p.K, p.group) || splits < 1 || (splits > 1 && ws == nullptr))
    return cudaErrorNotSupported;
  return p.x_fp8 ? launch_m<true>(p, splits, ws, stream) : launch_m<false>(p, splits, ws, stream);
}

}  // namespace mslk::gemm
