// The tensor-core INT4 decode kernel (int4_gemm.h, M <= 16, K and the group multiples of 128).
// A warp owns 16 weight rows and walks 128-weight tiles (one group each); lane (r, c) = (lane / 4,
// lane % 4) loads 16 bytes of rows r and r + 8 at weights 32 c .. 32 c + 31 of the tile, so a row's
// tile is one 64-byte run. Nibbles become exact q values as bf16 (f16 for FP8 activations) pairs
// with one LOP3 and one HSUB2 a pair, and feed mma.sync m16n8k16 directly: the MMA's k order
// within a tile is free as long as both operands follow it, so lane c's fragments take its own
// 32 weights (pairs {i, i + 4} of each 8-weight word, as the LOP3 extracts them) and its
// activations are permuted to match. Weights are read once for all M rows (n = activation rows,
// 8 a MMA). The group scale and zero apply once a tile in float32: sum += s * (x . q) + z * sum(x),
// sum(x) from a second MMA against ones. Design: docs/design/int4_gemm.md.
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>

#include "gemm/kernels/int4_gemm.h"
#include "gemm/kernels/int4_nibble.cuh"

namespace mslk::gemm {
namespace {

using int4::epilogue;
using int4::load_s;

constexpr int kMmaWarps = 4;
constexpr int kRp = 2;  // blocks of 16 weight rows a warp
static_assert(kMmaWarps * 16 * kRp == kInt4MmaRowsPerCta, "the plan's CTA size");
// Activation rows a pass (4 groups of 8; 8 groups spilled 52-84 bytes even at 16 weight rows a warp).
constexpr int64_t kMmaPassM = 32;

// Element type of the MMA: bf16 for bf16 activations, f16 for FP8 ones (E4M3 converts to f16
// exactly; q in -8..7 is exact in both).
template <bool kF16>
struct MmaType {
  // (nibble pair) ^ kMagic = the 16-bit float 2^E + (q + 8), 2^E with a unit ulp: bf16 128, f16 1024
  static constexpr uint32_t kMagic = kF16 ? 0x64086408u : 0x43084308u;
  static constexpr uint32_t kOnes = kF16 ? 0x3C003C00u : 0x3F803F80u;  // (1, 1)
};

// (w >> 4i) nibble pair {i, i + 4} -> q pair, exact: one LOP3 ((a & b) ^ c, c in a register) and
// one packed subtract of 2^E + 8.
template <bool kF16>
__device__ __forceinline__ uint32_t q_pair(uint32_t w, uint32_t magic) {
  uint32_t t;
  asm("lop3.b32 %0, %1, %2, %3, 0x6A;" : "=r"(t) : "r"(w), "n"(0x000F000Fu), "r"(magic));
  if constexpr (kF16) {
    const __half2 v = __hsub2(*reinterpret_cast<const __half2*>(&t), __half2half2(__ushort_as_half(0x6408)));
    return *reinterpret_cast<const uint32_t*>(&v);
  } else {
    const __nv_bfloat162 v =
        __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&t), __bfloat162bfloat162(__ushort_as_bfloat16(0x4308)));
    return *reinterpret_cast<const uint32_t*>(&v);
  }
}

template <bool kF16>
__device__ __forceinline__ void mma(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                    uint32_t b1) {
  if constexpr (kF16)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// The 8 activations at xk .. xk + 7 (one row) as the B pairs {x_i, x_(i+4)}, i = 0..3 (the order
// q_pair gives the weights): bf16 via two PRMT a pair of pairs; FP8 via PRMT then E4M3x2 -> f16x2.
template <bool kFp8>
__device__ __forceinline__ void x_pairs(const void* xk, bool valid, uint32_t (&b)[4]) {
  if (!valid) {
    b[0] = b[1] = b[2] = b[3] = 0;
    return;
  }
  if constexpr (kFp8) {
    const uint2 u = __ldg(static_cast<const uint2*>(xk));
    const uint32_t p01 = __byte_perm(u.x, u.y, 0x5140), p23 = __byte_perm(u.x, u.y, 0x7362);  // x0 x4 x1 x5, ...
    const uint32_t h[4] = {p01 & 0xFFFFu, p01 >> 16, p23 & 0xFFFFu, p23 >> 16};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const __half2_raw r = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(h[i]), __NV_E4M3);
      b[i] = uint32_t(r.x) | (uint32_t(r.y) << 16);
    }
  } else {
    const uint4 u = __ldg(static_cast<const uint4*>(xk));
    b[0] = __byte_perm(u.x, u.z, 0x5410);  // {x0, x4}
    b[1] = __byte_perm(u.x, u.z, 0x7632);  // {x1, x5}
    b[2] = __byte_perm(u.y, u.w, 0x5410);  // {x2, x6}
    b[3] = __byte_perm(u.y, u.w, 0x7632);  // {x3, x7}
  }
}

// blockIdx.x: kMmaWarps * 16 * kRp weight rows (a warp: kRp blocks of 16, which share the
// activation loads and the ones-MMA); blockIdx.y: a K split of `tps` tiles. MG groups of 8
// activation rows (M <= 8 MG). The splits' sums: cluster > 1, the grid's y is one cluster and
// rank 0 adds the others' sums from their shared memory in rank order; else ws (a second pass)
// when set; else the one split writes the output.
template <int MG, bool kFp8, class S>
__global__ void __launch_bounds__(kMmaWarps * 32) int4_mma_kernel(Int4GemmParams p, int tps, float* ws, int cluster) {
  constexpr bool kF16 = kFp8;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, r = lane / 4, c = lane % 4;
  const int64_t n0 = (int64_t(blockIdx.x) * kMmaWarps + warp) * 16 * kRp;
  const int64_t tiles = p.K / 128;
  const int64_t t_begin = int64_t(blockIdx.y) * tps, t_end = std::min<int64_t>(t_begin + tps, tiles);
  uint32_t magic;
  asm volatile("mov.b32 %0, %1;" : "=r"(magic) : "n"(MmaType<kF16>::kMagic));
  const uint32_t ones = MmaType<kF16>::kOnes;
  // rows n0 + 16 rp + r (h = 0) and + 8 (h = 1), clamped for the loads
  int64_t nc[kRp][2];
  const int8_t* wrow[kRp][2];
#pragma unroll
  for (int rp = 0; rp < kRp; ++rp)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      nc[rp][h] = std::min<int64_t>(n0 + 16 * rp + 8 * h + r, p.N - 1);
      wrow[rp][h] = p.w + nc[rp][h] * p.ldw + c * 16;
    }
  float acc[kRp][MG][4] = {};
  // activation rows of the B fragments (column r of each group of 8), at this lane's 32 weights
  constexpr int kXBytes = kFp8 ? 1 : 2;
  const char* xrow[MG];
  bool xvalid[MG];
#pragma unroll
  for (int mg = 0; mg < MG; ++mg) {
    const int64_t m = mg * 8 + r;
    xvalid[mg] = m < p.M;
    xrow[mg] = static_cast<const char*>(p.x) + (std::min<int64_t>(m, p.M - 1) * p.ldx + c * 32) * kXBytes;
  }
  const uint32_t group_tiles = static_cast<uint32_t>(p.group / 128);

  // unconditional (clamped) loads, so the prefetch is not sunk behind the compute
  auto load = [&](int64_t t, uint4 (&v)[kRp][2]) {
    t = std::max<int64_t>(std::min(t, t_end - 1), 0);
#pragma unroll
    for (int rp = 0; rp < kRp; ++rp)
#pragma unroll
      for (int h = 0; h < 2; ++h) v[rp][h] = __ldg(reinterpret_cast<const uint4*>(wrow[rp][h] + t * 64));
  };
  uint4 cur[kRp][2];
  load(t_begin, cur);
  // two tiles a trip where registers allow: the cur = nxt copies become register renames
#pragma unroll(MG <= 2 ? 2 : 1)
  for (int64_t t = t_begin; t < t_end; ++t) {
    uint4 nxt[kRp][2];
    load(t + 1, nxt);
    const int64_t g = static_cast<uint32_t>(t) / group_tiles;
    float sc[kRp][2], zc[kRp][2];
#pragma unroll
    for (int rp = 0; rp < kRp; ++rp)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        sc[rp][h] = load_s<S>(p.scale, g * p.lds + nc[rp][h]);
        zc[rp][h] = p.zero != nullptr ? load_s<S>(p.zero, g * p.lds + nc[rp][h]) : 0.f;
      }
    float dq[kRp][MG][4] = {}, dx[MG][4] = {};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      // q pairs {i, i + 4} of word j: [rp][h][i]
      uint32_t qv[kRp][2][4];
#pragma unroll
      for (int rp = 0; rp < kRp; ++rp)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint32_t w = reinterpret_cast<const uint32_t*>(&cur[rp][h])[j];
#pragma unroll
          for (int i = 0; i < 4; ++i) qv[rp][h][i] = q_pair<kF16>(w >> (4 * i), magic);
        }
#pragma unroll
      for (int mg = 0; mg < MG; ++mg) {
        uint32_t xb[4];
        x_pairs<kFp8>(xrow[mg] + (t * 128 + j * 8) * kXBytes, xvalid[mg], xb);
        // two k16 steps a word: pairs {0, 1} then {2, 3}; A = {row r, row r + 8} x {k, k + 8}
#pragma unroll
        for (int rp = 0; rp < kRp; ++rp) {
          mma<kF16>(dq[rp][mg], qv[rp][0][0], qv[rp][1][0], qv[rp][0][1], qv[rp][1][1], xb[0], xb[1]);
          mma<kF16>(dq[rp][mg], qv[rp][0][2], qv[rp][1][2], qv[rp][0][3], qv[rp][1][3], xb[2], xb[3]);
        }
        mma<kF16>(dx[mg], ones, ones, ones, ones, xb[0], xb[1]);
        mma<kF16>(dx[mg], ones, ones, ones, ones, xb[2], xb[3]);
      }
    }
    // D: [0], [1] row r, columns 2c, 2c + 1; [2], [3] row r + 8, the same columns
#pragma unroll
    for (int rp = 0; rp < kRp; ++rp)
#pragma unroll
      for (int mg = 0; mg < MG; ++mg)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[rp][mg][i] += fmaf(sc[rp][i / 2], dq[rp][mg][i], zc[rp][i / 2] * dx[mg][i]);
#pragma unroll
    for (int rp = 0; rp < kRp; ++rp) cur[rp][0] = nxt[rp][0], cur[rp][1] = nxt[rp][1];
  }

  if (cluster > 1) {
    // every CTA of the cluster: its sums to shared memory; rank 0 adds ranks 1.. in order
    __shared__ float part[kMmaWarps * 32][kRp * MG * 4];
    float* mine = part[threadIdx.x];
    float* flat = &acc[0][0][0];
#pragma unroll
    for (int i = 0; i < kRp * MG * 4; ++i) mine[i] = flat[i];
    namespace cg = cooperative_groups;
    cg::cluster_group cl = cg::this_cluster();
    cl.sync();
    const unsigned rank = cl.block_rank();
    if (rank == 0)
      for (int s = 1; s < cluster; ++s) {
        const float* other = cl.map_shared_rank(mine, s);
#pragma unroll
        for (int i = 0; i < kRp * MG * 4; ++i) flat[i] += other[i];
      }
    cl.sync();  // the other ranks' shared memory lives until rank 0 has read it
    if (rank != 0) return;
    ws = nullptr;
  }
#pragma unroll
  for (int rp = 0; rp < kRp; ++rp)
#pragma unroll
    for (int mg = 0; mg < MG; ++mg)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t n = n0 + 16 * rp + 8 * (i / 2) + r, m = mg * 8 + 2 * c + (i & 1);
        if (n >= p.N || m >= p.M) continue;
        if (ws != nullptr)
          ws[(int64_t(blockIdx.y) * p.M + m) * p.N + n] = acc[rp][mg][i];
        else
          static_cast<__nv_bfloat16*>(p.out)[m * p.ldd + n] = __float2bfloat16(epilogue(p, acc[rp][mg][i], m, n));
      }
}

template <class Kernel>
cudaError_t launch_one(Kernel kernel, const Int4GemmParams& p, dim3 grid, int tps, float* ws, int cluster,
                       cudaStream_t stream) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(kMmaWarps * 32);
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  if (cluster > 1) {
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = 1;
    attr[0].val.clusterDim.y = static_cast<unsigned>(cluster);
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
  }
  return cudaLaunchKernelEx(&cfg, kernel, p, tps, ws, cluster);
}

template <int MG, bool kFp8>
cudaError_t launch_scales(const Int4GemmParams& p, dim3 grid, int tps, float* ws, int cluster, cudaStream_t stream) {
  switch (p.scale_type) {
    case Int4Scale::kF32: return launch_one(int4_mma_kernel<MG, kFp8, float>, p, grid, tps, ws, cluster, stream);
    case Int4Scale::kBF16:
      return launch_one(int4_mma_kernel<MG, kFp8, __nv_bfloat16>, p, grid, tps, ws, cluster, stream);
    default: return launch_one(int4_mma_kernel<MG, kFp8, __nv_fp8_e4m3>, p, grid, tps, ws, cluster, stream);
  }
}

template <bool kFp8>
cudaError_t launch_m(const Int4GemmParams& p, dim3 grid, int tps, float* ws, int cluster, cudaStream_t stream) {
  if (p.M <= 8) return launch_scales<1, kFp8>(p, grid, tps, ws, cluster, stream);
  if (p.M <= 16) return launch_scales<2, kFp8>(p, grid, tps, ws, cluster, stream);
  return launch_scales<4, kFp8>(p, grid, tps, ws, cluster, stream);
}

// One pass: activation rows M <= kMmaPassM.
cudaError_t mma_pass(const Int4GemmParams& p, int splits, float* ws, cudaStream_t stream) {
  const int64_t tiles = p.K / 128;
  const int tps = static_cast<int>((tiles + splits - 1) / splits);
  constexpr int64_t kRows = kMmaWarps * 16 * kRp;
  const dim3 grid(static_cast<unsigned>((p.N + kRows - 1) / kRows), static_cast<unsigned>(splits));
  auto run = [&](float* w, int cluster) {
    return p.x_fp8 ? launch_m<true>(p, grid, tps, w, cluster, stream) : launch_m<false>(p, grid, tps, w, cluster, stream);
  };
  if (splits == 1) return run(nullptr, 0);
  // Up to kInt4MaxCluster splits: one cluster adds them (no workspace pass). Where the cluster
  // launch is refused, the workspace and the second pass.
  if (splits <= kInt4MaxCluster) {
    const cudaError_t e = run(nullptr, splits);
    if (e == cudaSuccess) return e;
    (void)cudaGetLastError();
  }
  const cudaError_t e = run(ws, 0);
  if (e != cudaSuccess) return e;
  return int4_split_reduce(p, ws, splits, stream);
}

}  // namespace

cudaError_t int4_decode_mma(const Int4GemmParams& p, int splits, float* ws, cudaStream_t stream) {
  if (p.K % 128 != 0 || p.group % 128 != 0 || p.M > kInt4MmaMaxM || splits < 1 || (splits > 1 && ws == nullptr))
    return cudaErrorNotSupported;
  // M > kMmaPassM: passes over row ranges of the activations (each reads the weight again)
  const int64_t x_bytes = p.x_fp8 ? 1 : 2;
  for (int64_t m0 = 0; m0 < p.M; m0 += kMmaPassM) {
    Int4GemmParams q = p;
    q.x = static_cast<const char*>(p.x) + m0 * p.ldx * x_bytes;
    q.out = static_cast<__nv_bfloat16*>(p.out) + m0 * p.ldd;
    if (p.x_scale != nullptr) q.x_scale = p.x_scale + m0;
    q.M = std::min(kMmaPassM, p.M - m0);
    const cudaError_t e = mma_pass(q, splits, ws, stream);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace mslk::gemm
