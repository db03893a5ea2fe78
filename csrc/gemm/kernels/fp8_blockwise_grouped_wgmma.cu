// mslk's own device-side grouped block/group-scaled FP8 GEMM (f8f8bf16_groupwise_grouped) for sm90,
// beside the CUTLASS ptr-array rows of fp8_blockwise_grouped_configs.h (the row after them selects
// it). Same contract (fp8_blockwise.h, gemm/fp8_grouped_params.h); the groups stay on the device.
//
// Why a kernel of our own: CUTLASS's ptr-array blockwise mainloop ran 10-17% behind its dense
// blockwise kernel at the same tile (docs/design/gemm_tables.md), and that gap is the grouped
// form's whole margin over a loop of cuBLAS calls. Here the groups need no per-group descriptors:
// A is one 2-D TMA map over x [total_M, K] (a tile starts at any row: its group's first row plus
// 128 per M tile; rows past the group are read but never stored), B one 3-D map over w [G, N, K].
//
// Per CTA (persistent, one per SM): a producer warpgroup (one thread issues the TMA loads of a
// kStages ring) and two consumer warpgroups of 64 rows each of a 128 x 128 tile. Per 128-K block a
// consumer runs four m64n128k32 E4M3 wgmmas into a scratch accumulator, then adds it times
// x_scale[row, kb] * w_scale[kb, n / 128] into the float32 accumulator, in the order CUTLASS's
// blockwise mainloop uses (scales multiplied first, then one fma), so both give the same bits.
// The scales come straight from global memory (two x scales a thread, one w scale a tile) one K
// block ahead. Epilogue: bf16 pairs to a row-swizzled staging tile, then 16-byte stores of the
// group's rows only. Rows past the last group are zeroed by the consumers at the end.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstring>

#include "common/device_attrs.h"
#include "common/sm90_ptx.cuh"
#include "common/tensor_map.h"
#include "gemm/kernels/fp8_blockwise.h"
#include "gemm/kernels/group_sizes.cuh"
#include "gemm/kernels/wgmma_e4m3.cuh"
#include "mslk/utils/env.h"

namespace mslk::gemm {
namespace {

using namespace mslk::ptx;
using detail::fp8_group_rows;

constexpr int kTile = 128;     // rows, columns and K of a tile: one scale block along K and N
constexpr int kStages = 6;     // 32 KB each
constexpr int kBand = 16;      // M tiles of a group walked together, N column by N column
constexpr int kConsumers = 2;  // warpgroups of 64 rows
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr uint32_t kBoxBytes = kTile * kTile;  // one E4M3 box of A or B
constexpr int kOutRowBytes = kTile * 2;        // a bf16 staging row: 16 chunks of 16 bytes

// kSmemScales: a scale warp of the producer warpgroup copies each stage's 128 x scales and its w
// scale into the stage (cp.async, arriving on the stage's full barrier) and the epilogue stores
// from registers; else the consumers load their scales from global memory one K block ahead and
// the epilogue goes through a staging tile.
template <bool kSmemScales>
struct Smem {
  alignas(1024) uint8_t a[kStages][kBoxBytes];  // SWIZZLE_128B boxes: 1024-byte aligned
  alignas(1024) uint8_t b[kStages][kBoxBytes];
  alignas(16) uint8_t out[kSmemScales ? 16 : kTile * kOutRowBytes];
  float sa[kSmemScales ? kStages : 1][kTile], sb[kStages];
  uint64_t full[kStages], empty[kStages];
};
template <bool kSmemScales>
constexpr size_t kSmemBytes = sizeof(Smem<kSmemScales>) + 1024;  // + slack to align the dynamic window

// The tiles of all groups in one order: group by group; inside a group, bands of kBand M tiles,
// each band walked N column by N column (M fastest), so the tiles in flight share A rows and B
// columns in L2 (a hot expert's rows are not all in flight at once). Every thread walks it itself,
// tile index ascending, reading the sizes as it goes: no setup pass, no per-group arrays.
struct Walk {
  long long tile0 = 0, tiles = 0;            // group g's first tile, its tile count
  long long row0 = 0, next_row0 = 0, m = 0;  // group g's first row, the next group's, its rows
  int g = -1, tiles_m = 0;

  // Moves to the group holding tile t (t never decreases); false past the last group, which
  // leaves next_row0 = the sum of every group's rows.
  __device__ bool seek(const Fp8GroupedParams& p, int tiles_n, long long t) {
    while (t >= tile0 + tiles) {
      if (g + 1 >= p.G) return false;
      tile0 += tiles;
      row0 = next_row0;
      ++g;
      const long long mg = fp8_group_rows(p, g);
      next_row0 = row0 + mg;
      m = max(0LL, min(mg, p.total_M - row0));  // clipped to [0, total_M)
      tiles_m = static_cast<int>((m + kTile - 1) / kTile);
      tiles = static_cast<long long>(tiles_m) * tiles_n;
    }
    return true;
  }

  // M and N tile of tile t inside the current group.
  __device__ void coords(int tiles_n, long long t, int& mt, int& nt) const {
    const long long local = t - tile0, band_tiles = static_cast<long long>(kBand) * tiles_n;
    const int band = static_cast<int>(local / band_tiles);
    const int in_band = static_cast<int>(local - band * band_tiles);
    const int rows = min(kBand, tiles_m - band * kBand);
    nt = in_band / rows;
    mt = band * kBand + in_band % rows;
  }
};

// f(walk, m tile, n tile) for each of this CTA's tiles in order (every gridDim.x-th); returns the
// walk past the last group (next_row0: the sum of every group's rows). kPair (2-CTA clusters): the
// walk is over pairs of N tiles (one N tile past the last where tiles_n is odd: a ghost tile that
// loads zeros and stores nothing), every cluster takes every (gridDim.x / 2)-th pair and CTA rank r
// its N tile 2 * pair column + r.
template <bool kPair, class F>
__device__ __forceinline__ Walk for_each_tile(const Fp8GroupedParams& p, int tiles_n, F&& f) {
  const int cols = kPair ? (tiles_n + 1) / 2 : tiles_n;
  const long long first = kPair ? blockIdx.x / 2 : blockIdx.x, step = kPair ? gridDim.x / 2 : gridDim.x;
  Walk walk;
  for (long long t = first; walk.seek(p, cols, t); t += step) {
    int mt, nt;
    walk.coords(cols, t, mt, nt);
    f(static_cast<const Walk&>(walk), mt, kPair ? 2 * nt + static_cast<int>(blockIdx.x % 2) : nt);
  }
  return walk;
}

// Variants (MSLK_FP8_GROUPED_WGMMA_VARIANT): 0 scales from global memory; 1 scales copied into
// the stages by the scale warp; 2 as 1 with the promotion overlapped (two scratch accumulators);
// 3 as 1 on 2-CTA clusters sharing A (multicast); 4 as 3 with the promotion overlapped.
constexpr bool pair_of(int v) { return v == 3 || v == 4; }
constexpr bool overlap_of(int v) { return v == 2 || v == 4; }

// ---- 2-CTA cluster pieces (pair_of(kV))
__device__ __forceinline__ void tma_load_2d_multicast(const CUtensorMap* map, uint64_t* bar, void* dst, int c, int r,
                                                      uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c), "r"(r), "r"(smem_u32(bar)), "h"(mask)
      : "memory");
}
// One arrival on the barrier at the same shared-memory offset in cluster CTA `rank`.
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t* bar, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(smem_u32(bar)), "r"(rank));
  // default semantics (release at CTA scope), as CUTLASS's cluster barrier: the stage was read by
  // wgmmas already waited for, and .release.cluster would fence the whole GPU on every arrival
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
}
__device__ __forceinline__ void cluster_sync_aligned() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_sync() {  // threads of a warp may arrive apart
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}

// A position in the stage ring: the slot and the parity of its current round.
struct Ring {
  int s = 0;
  uint32_t phase = 0;
  __device__ __forceinline__ void next() {
    if (++s == kStages) s = 0, phase ^= 1;
  }
};

// pair_of(kV): the two CTAs of a cluster share the tile's A rows; each loads 64 of them into both
// CTAs' stage (multicast), so its empty barrier counts both CTAs' consumer warps.
template <int kV>
__device__ __forceinline__ void producer(const CUtensorMap* map_x, const CUtensorMap* map_w,
                                         const Fp8GroupedParams& p, Smem<(kV >= 1)>& sm, int tiles_n, int kblocks) {
  Ring ring;
  const int rank = static_cast<int>(blockIdx.x % 2);
  for_each_tile<pair_of(kV)>(p, tiles_n, [&](const Walk& walk, int mt, int nt) {
    // a ghost tile (pair_of(kV)) reads N tile 0 again: computed, never stored
    const int row = static_cast<int>(walk.row0) + mt * kTile, col = nt < tiles_n ? nt * kTile : 0;
    for (int kb = 0; kb < kblocks; ++kb, ring.next()) {
      const int s = ring.s;
      mbar_wait(&sm.empty[s], ring.phase ^ 1);
      mbar_arrive_expect_tx(&sm.full[s], 2 * kBoxBytes);  // out-of-bounds bytes land as zeros and count
      if constexpr (pair_of(kV))
        tma_load_2d_multicast(map_x, &sm.full[s], sm.a[s] + rank * (kBoxBytes / 2), kb * kTile, row + 64 * rank, 3);
      else
        tma_load_2d(map_x, &sm.full[s], sm.a[s], kb * kTile, row);
      tma_load_3d(map_w, &sm.full[s], sm.b[s], kb * kTile, col, walk.g);
    }
  });
}

__device__ __forceinline__ float ld_shared_f32(uint32_t addr) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(addr) : "memory");
  return v;
}
__device__ __forceinline__ void cp_async_mbar_arrive(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(smem_u32(bar)) : "memory");
}

// The scale warp (kSmemScales): per stage, lane l copies the x scales of tile rows 4l .. 4l + 3
// (zeros past the group) and lane 0 the w scale; each lane's copies arrive on the full barrier.
template <int kV>
__device__ __forceinline__ void scale_producer(const Fp8GroupedParams& p, Smem<true>& sm, int tiles_n, int kblocks) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  Ring ring;
  for_each_tile<pair_of(kV)>(p, tiles_n, [&](const Walk& walk, int mt, int nt) {
    const bool ghost = nt >= tiles_n;  // a pair's padding tile: no w scale to read
    const long long r = static_cast<long long>(mt) * kTile + 4 * lane;
    const int valid = static_cast<int>(max(0LL, min(4LL, walk.m - r)));
    const float* xk = p.x_scale + walk.row0 * p.xs_rs + r;
    const float* wk = p.w_scale + walk.g * p.ws_gs + nt;
    for (int kb = 0; kb < kblocks; ++kb, ring.next(), xk += walk.m, wk += tiles_n) {
      const int s = ring.s;
      mbar_wait(&sm.empty[s], ring.phase ^ 1);
#pragma unroll
      for (int j = 0; j < 4; ++j) cp_async<4>(&sm.sa[s][4 * lane + j], j < valid ? xk + j : p.x_scale, j < valid ? 4 : 0);
      if (lane == 0) cp_async<4>(&sm.sb[s], ghost ? p.w_scale : wk, ghost ? 0 : 4);
      cp_async_mbar_arrive(&sm.full[s]);
    }
  });
}

// The K loop with two scratch accumulators: block kb's wgmmas are issued before block kb - 1's
// are waited for and promoted, so the promotion overlaps the tensor cores.
template <bool kPair>
__device__ __forceinline__ void mainloop_overlapped(Smem<true>& sm, Ring& ring, int kblocks, int c, int row_wg,
                                                    uint32_t a_smem, uint32_t b_smem, float (&acc)[64]) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  float part0[64], part1[64];
  float ps0 = 0.f, ps1 = 0.f;  // the pending block's combined scales (x scale * w scale)
  int pstage = 0;
  auto issue = [&](float (&part)[64], float& s0, float& s1) {
    const int s = ring.s;
    mbar_wait(&sm.full[s], ring.phase);
    const float sb = ld_shared_f32(smem_u32(&sm.sb[s]));
    const uint32_t sa = smem_u32(&sm.sa[s][c * 64 + row_wg]);
    s0 = ld_shared_f32(sa) * sb, s1 = ld_shared_f32(sa + 32) * sb;
    wgmma_fence();
    const uint64_t da = gmma_desc_sw128(a_smem + s * kBoxBytes), db = gmma_desc_sw128(b_smem + s * kBoxBytes);
#pragma unroll
    for (int k = 0; k < kTile / 32; ++k) detail::wgmma_m64n128k32_e4m3(part, da + 2 * k, db + 2 * k, k > 0);
    wgmma_commit();
  };
  auto retire = [&](float (&part)[64], float s0, float s1, int stage, bool last) {
    if (last) wgmma_wait<0>(); else wgmma_wait<1>();
#pragma unroll
    for (int i = 0; i < 64; ++i) fence_operand(part[i]);
    if (lane == 0) {
      mbar_arrive(&sm.empty[stage]);
      if constexpr (kPair) mbar_arrive_cluster(&sm.empty[stage], (blockIdx.x % 2) ^ 1);
    }
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      acc[4 * j] = fmaf(part[4 * j], s0, acc[4 * j]);
      acc[4 * j + 1] = fmaf(part[4 * j + 1], s0, acc[4 * j + 1]);
      acc[4 * j + 2] = fmaf(part[4 * j + 2], s1, acc[4 * j + 2]);
      acc[4 * j + 3] = fmaf(part[4 * j + 3], s1, acc[4 * j + 3]);
    }
  };
  for (int kb = 0; kb < kblocks; kb += 2) {
    float c0, c1;
    issue(part0, c0, c1);
    if (kb > 0) retire(part1, ps0, ps1, pstage, false);
    ps0 = c0, ps1 = c1, pstage = ring.s;
    ring.next();
    if (kb + 1 < kblocks) {
      issue(part1, c0, c1);
      retire(part0, ps0, ps1, pstage, false);
      ps0 = c0, ps1 = c1, pstage = ring.s;
      ring.next();
    }
  }
  if (kblocks & 1) retire(part0, ps0, ps1, pstage, true);
  else retire(part1, ps0, ps1, pstage, true);
}

// Consumer warpgroup c (rows 64c .. 64c + 63 of each tile).
template <int kV>
__device__ __forceinline__ void consumer(const Fp8GroupedParams& p, Smem<(kV >= 1)>& sm, int tiles_n, int kblocks,
                                         int c) {
  constexpr bool kSmemScales = kV >= 1;
  const int tid = static_cast<int>(threadIdx.x) % 128, warp = tid / 32, lane = tid % 32;
  const int row_wg = warp * 16 + lane / 4;  // the thread's first accumulator row in its 64 (then + 8)
  const uint32_t a_smem = smem_u32(sm.a[0]) + c * 64 * kTile, b_smem = smem_u32(sm.b[0]);
  const uint32_t stage_smem = smem_u32(sm.out) + c * 64 * kOutRowBytes;
  auto* out = static_cast<__nv_bfloat16*>(p.out);
  Ring ring;
  const Walk end = for_each_tile<pair_of(kV)>(p, tiles_n, [&](const Walk& walk, int mt, int nt) {
    const long long m = walk.m;
    const int r0 = mt * kTile + c * 64 + row_wg;  // group-local rows r0 and r0 + 8
    const bool v0 = r0 < m, v1 = r0 + 8 < m;
    // The thread's x scales (row r0 of [kblocks][m], MN-major) and the tile's w scale (column nt of
    // [kblocks][tiles_n]), stepped one K block at a time.
    const float* xk = p.x_scale + walk.row0 * p.xs_rs + r0;
    const float* wk = p.w_scale + walk.g * p.ws_gs + nt;
    float sa0 = 0.f, sa1 = 0.f, sb = 0.f;
    if constexpr (!kSmemScales) sa0 = v0 ? xk[0] : 0.f, sa1 = v1 ? xk[8] : 0.f, sb = wk[0];
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.f;
    if constexpr (overlap_of(kV)) mainloop_overlapped<pair_of(kV)>(sm, ring, kblocks, c, row_wg, a_smem, b_smem, acc);
    else for (int kb = 0; kb < kblocks; ++kb, ring.next()) {
      const int s = ring.s;
      float na0 = 0.f, na1 = 0.f, nb = 0.f;  // the next block's scales, in flight during the MMAs
      if (!kSmemScales && kb + 1 < kblocks) {
        xk += m, wk += tiles_n;
        na0 = v0 ? xk[0] : 0.f;
        na1 = v1 ? xk[8] : 0.f;
        nb = wk[0];
      }
      mbar_wait(&sm.full[s], ring.phase);
      if constexpr (kSmemScales) {  // read before the stage is released
        sb = ld_shared_f32(smem_u32(&sm.sb[s]));
        const uint32_t sa = smem_u32(&sm.sa[s][c * 64 + row_wg]);
        sa0 = ld_shared_f32(sa), sa1 = ld_shared_f32(sa + 32);
      }
      float part[64];
      wgmma_fence();
      const uint64_t da = gmma_desc_sw128(a_smem + s * kBoxBytes), db = gmma_desc_sw128(b_smem + s * kBoxBytes);
#pragma unroll
      for (int k = 0; k < kTile / 32; ++k) detail::wgmma_m64n128k32_e4m3(part, da + 2 * k, db + 2 * k, k > 0);
      wgmma_commit();
      wgmma_wait<0>();
#pragma unroll
      for (int i = 0; i < 64; ++i) fence_operand(part[i]);
      if (lane == 0) {  // the stage is read: one arrival a warp (on both CTAs' barriers in a pair)
        if constexpr (pair_of(kV)) mbar_arrive(&sm.empty[s]), mbar_arrive_cluster(&sm.empty[s], (blockIdx.x % 2) ^ 1);
        else mbar_arrive(&sm.empty[s]);
      }
      const float s0 = sa0 * sb, s1 = sa1 * sb;
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        acc[4 * j] = fmaf(part[4 * j], s0, acc[4 * j]);
        acc[4 * j + 1] = fmaf(part[4 * j + 1], s0, acc[4 * j + 1]);
        acc[4 * j + 2] = fmaf(part[4 * j + 2], s1, acc[4 * j + 2]);
        acc[4 * j + 3] = fmaf(part[4 * j + 3], s1, acc[4 * j + 3]);
      }
      if constexpr (!kSmemScales) sa0 = na0, sa1 = na1, sb = nb;
    }

    if constexpr (kSmemScales) {  // bf16 pairs straight from the accumulator rows
      const long long col0 = static_cast<long long>(nt) * kTile + 2 * (lane % 4);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if (h == 0 ? !v0 : !v1) continue;
        __nv_bfloat16* orow = out + (walk.row0 + r0 + 8 * h) * p.N;
#pragma unroll
        for (int j = 0; j < 16; ++j) {
          const long long col = col0 + 8 * j;
          if (col < p.N)
            *reinterpret_cast<__nv_bfloat162*>(orow + col) =
                __floats2bfloat162_rn(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
        }
      }
      return;
    }

    // Epilogue: staging row r holds 16-byte chunk j at chunk j ^ (r % 8), so the eight rows of one
    // store instruction hit 32 distinct banks and a quarter-warp's 16-byte reads one 128-byte line.
    named_barrier_sync(1 + c, 128);  // this warpgroup's reads of the previous tile are done
#pragma unroll
    for (int j = 0; j < 16; ++j) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = row_wg + 8 * h;
        const __nv_bfloat162 v = __floats2bfloat162_rn(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
        uint32_t bits;
        memcpy(&bits, &v, 4);
        st_shared_b32(stage_smem + r * kOutRowBytes + ((j ^ (r & 7)) << 4) + (lane % 4) * 4, bits);
      }
    }
    named_barrier_sync(1 + c, 128);
    const long long row_base = walk.row0 + mt * kTile + c * 64;  // out row of staging row 0
#pragma unroll
    for (int it = 0; it < 64 * 16 / 128; ++it) {
      const int q = it * 128 + tid, r = q / 16, ch = q % 16;
      const long long col = static_cast<long long>(nt) * kTile + ch * 8;
      if (mt * kTile + c * 64 + r < m && col < p.N) {
        uint4 v;
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "r"(stage_smem + r * kOutRowBytes + ((ch ^ (r & 7)) << 4)));
        *reinterpret_cast<uint4*>(out + (row_base + r) * p.N + col) = v;
      }
    }
  });

  // Rows past the last group are zeros (the consumers of every CTA share them).
  const long long valid = min(end.next_row0, static_cast<long long>(p.total_M));
  const long long n16 = (p.total_M - valid) * p.N / 8;
  uint4* tail = reinterpret_cast<uint4*>(out + valid * p.N);
  const int ct = static_cast<int>(threadIdx.x) - 128;
  for (long long i = static_cast<long long>(blockIdx.x) * (128 * kConsumers) + ct; i < n16;
       i += static_cast<long long>(gridDim.x) * (128 * kConsumers))
    tail[i] = make_uint4(0u, 0u, 0u, 0u);
}

template <int kV>
__global__ void __launch_bounds__(kThreads, 1)
    grouped_kernel(const __grid_constant__ CUtensorMap map_x, const __grid_constant__ CUtensorMap map_w,
                   const Fp8GroupedParams p) {
  extern __shared__ uint8_t smem_raw[];
  constexpr bool kSmemScales = kV >= 1;
  auto& sm = *reinterpret_cast<Smem<kSmemScales>*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  // N tiles and K blocks, computed by each role after its register change (computed before it,
  // ptxas kept one of them in local memory across the change)
  auto tiles_n = [&p] { return static_cast<int>((p.N + kTile - 1) / kTile); };
  auto kblocks = [&p] { return static_cast<int>((p.K + kTile - 1) / kTile); };
  // warpgroup index through a shuffle: provably warp-uniform, so the compiler keeps the shared-memory
  // addresses and wgmma descriptors derived from it in uniform registers
  const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0);
  if (threadIdx.x == 0) {
    // full: the TMA thread's arrival (and the scale warp's 32); empty: one arrival a consumer warp
    // (both CTAs' consumer warps in a pair)
    for (int s = 0; s < kStages; ++s)
      mbar_init(&sm.full[s], kSmemScales ? 33 : 1), mbar_init(&sm.empty[s], 4 * kConsumers * (pair_of(kV) ? 2 : 1));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    prefetch_tensormap(&map_x);
    prefetch_tensormap(&map_w);
  }
  if constexpr (pair_of(kV)) cluster_sync_aligned();  // the partner's barriers exist before any multicast
  else __syncthreads();
  if (wg == 0) {  // producer warpgroup: one thread issues the loads, all give registers away
    setmaxnreg_dec<40>();
    if (threadIdx.x == 0) producer<kV>(&map_x, &map_w, p, sm, tiles_n(), kblocks());
    if constexpr (kSmemScales)
      if (threadIdx.x / 32 == 1) scale_producer<kV>(p, sm, tiles_n(), kblocks());
  } else {
    setmaxnreg_inc<232>();  // the consumers' two 64-float accumulators without spills
    consumer<kV>(p, sm, tiles_n(), kblocks(), wg - 1);
  }
  // a pair's CTAs stay until both are done: the partner multicasts into this CTA's stages and
  // arrives on its barriers
  if constexpr (pair_of(kV)) cluster_sync();
}

bool applies(const Fp8GroupedParams& p) {
  auto aligned = [](const void* ptr, uintptr_t a) { return reinterpret_cast<uintptr_t>(ptr) % a == 0; };
  // TMA: 16-byte aligned bases and strides; int32 coordinates (rows up to total_M + one tile).
  return p.descs == nullptr && p.fixed_rows == 0 && p.sizes != nullptr && p.G > 0 && p.G <= INT_MAX &&
         p.total_M > 0 && p.total_M <= INT_MAX - 2 * kTile && p.N > 0 && p.N <= INT_MAX && p.K > 0 &&
         p.K <= INT_MAX && p.K % 16 == 0 && p.N % 8 == 0 && p.ldx % 16 == 0 && p.ldw % 16 == 0 &&
         p.w_gs % 16 == 0 && p.xs_rs == (p.K + kTile - 1) / kTile &&
         p.ws_gs == p.xs_rs * ((p.N + kTile - 1) / kTile) && aligned(p.x, 16) && aligned(p.w, 16) &&
         aligned(p.out, 16) && aligned(p.x_scale, 4) && aligned(p.w_scale, 4);
}

// pair_of(kV): clusters of two CTAs, as many as fit at once (cudaOccupancyMaxActiveClusters), at most
// one a pair of tiles.
template <int kV>
cudaError_t launch_pairs(const CUtensorMap& map_x, const CUtensorMap& map_w, const Fp8GroupedParams& p,
                         long long pairs, cudaStream_t stream) {
  constexpr size_t smem = kSmemBytes<true>;
  static const cudaError_t attr =
      cudaFuncSetAttribute(grouped_kernel<kV>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (attr != cudaSuccess) return attr;
  cudaLaunchConfig_t cfg{};
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeClusterDimension;
  at[0].val.clusterDim.x = 2, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
  cfg.blockDim = dim3(kThreads), cfg.dynamicSmemBytes = smem, cfg.stream = stream, cfg.attrs = at, cfg.numAttrs = 1;
  cfg.gridDim = dim3(2);
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, grouped_kernel<kV>, &cfg) != cudaSuccess || clusters < 1) {
    (void)cudaGetLastError();
    return cudaErrorNotSupported;
  }
  cfg.gridDim = dim3(static_cast<unsigned>(2 * (pairs < clusters ? pairs : clusters)));
  return cudaLaunchKernelEx(&cfg, grouped_kernel<kV>, map_x, map_w, p);
}

template <int kV>
cudaError_t launch(const CUtensorMap& map_x, const CUtensorMap& map_w, const Fp8GroupedParams& p, long long tiles,
                   cudaStream_t stream) {
  constexpr size_t smem = kSmemBytes<(kV >= 1)>;
  const int grid = cuda::persistent_grid<grouped_kernel<kV>>(tiles, kThreads, smem);
  if (grid == 0) return cudaErrorNotSupported;
  grouped_kernel<kV><<<grid, kThreads, smem, stream>>>(map_x, map_w, p);
  return cudaGetLastError();
}

}  // namespace

cudaError_t fp8_blockwise_grouped_wgmma_run(const Fp8GroupedParams& p, cudaStream_t stream) {
  if (!applies(p)) return cudaErrorNotSupported;
  CUtensorMap map_x, map_w;
  const cuuint64_t dx[2] = {cuuint64_t(p.K), cuuint64_t(p.total_M)}, sx[1] = {cuuint64_t(p.ldx)};
  const cuuint64_t dw[3] = {cuuint64_t(p.K), cuuint64_t(p.N), cuuint64_t(p.G)};
  const cuuint64_t sw[2] = {cuuint64_t(p.ldw), cuuint64_t(p.w_gs)};
  const int variant = int(env::integer(env::Var::kFp8GroupedWgmmaVariant, 0, 0, 4));
  // variant 3 loads half the A rows a CTA (multicast to the pair)
  const cuuint32_t box2[2] = {cuuint32_t(kTile), cuuint32_t(pair_of(variant) ? kTile / 2 : kTile)}, box3[3] = {kTile, kTile, 1};
  if (!cuda::encode(&map_x, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, p.x, dx, sx, box2, CU_TENSOR_MAP_SWIZZLE_128B) ||
      !cuda::encode(&map_w, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, p.w, dw, sw, box3, CU_TENSOR_MAP_SWIZZLE_128B))
    return cudaErrorNotSupported;
  // At most as many CTAs as tiles can exist: ceil(total_M / 128) + G M tiles over the N tiles.
  const long long tiles = ((p.total_M + kTile - 1) / kTile + p.G) * ((p.N + kTile - 1) / kTile);
  if (pair_of(variant)) {
    const long long tiles_m = (p.total_M + kTile - 1) / kTile + p.G, tiles_n = (p.N + kTile - 1) / kTile;
    const long long pairs = tiles_m * ((tiles_n + 1) / 2);
    return variant == 4 ? launch_pairs<4>(map_x, map_w, p, pairs, stream) : launch_pairs<3>(map_x, map_w, p, pairs, stream);
  }
  if (variant == 2) return launch<2>(map_x, map_w, p, tiles, stream);
  if (variant == 1) return launch<1>(map_x, map_w, p, tiles, stream);
  return launch<0>(map_x, map_w, p, tiles, stream);
}

}  // namespace mslk::gemm
