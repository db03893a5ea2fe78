// mslk's own device-side grouped block/group-scaled FP8 GEMM (f8f8bf16_groupwise_grouped) for sm90,
// beside the CUTLASS ptr-array rows of fp8_blockwise_grouped_configs.h (the row after them selects
// it; the dispatcher's default at small average group sizes). Same contract (fp8_blockwise.h,
// gemm/fp8_grouped_params.h); the groups stay on the device.
//
// Why a kernel of our own: CUTLASS's ptr-array blockwise mainloop ran 10-17% behind its dense
// blockwise kernel at the same tile (docs/design/gemm_tables.md), and that gap is the grouped
// form's whole margin over a loop of cuBLAS calls. Here the groups need no per-group descriptors:
// A is one 2-D TMA map over x [total_M, K] (a tile starts at any row: its group's first row plus
// 128 per M tile; rows past the group are read but never stored), B one 3-D map over w [G, N, K].
//
// Per CTA (persistent, one per SM): a producer warpgroup and two consumer warpgroups of 64 rows
// each of a 128 x 128 tile. In the producer warpgroup one thread issues the TMA loads of a kStages
// ring and a scale warp copies each stage's 128 x scales and its w scale into the stage (cp.async,
// arriving on the stage's full barrier), so the consumers read their scales from shared memory
// with the operands instead of waiting on global loads. Per 128-K block a consumer runs four
// m64n128k32 E4M3 wgmmas into a scratch accumulator, then adds it times
// x_scale[row, kb] * w_scale[kb, n / 128] into the float32 accumulator, in the order CUTLASS's
// blockwise mainloop uses (scales multiplied first, then one fma), so both give the same bits.
// Epilogue: bf16 pairs straight from the accumulator registers, the group's rows only. Rows past
// the last group are zeroed by the consumers at the end.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <climits>

#include "common/device_attrs.h"
#include "common/sm90_ptx.cuh"
#include "common/tensor_map.h"
#include "gemm/kernels/fp8_blockwise.h"
#include "gemm/kernels/group_sizes.cuh"
#include "gemm/kernels/wgmma_m64n128.cuh"

namespace mslk::gemm {
namespace {

using namespace mslk::ptx;
using detail::fp8_group_rows;

constexpr int kTile = 128;     // rows, columns and K of a tile: one scale block along K and N
constexpr int kStages = 6;     // 32 KB of operands each
constexpr int kBand = 16;      // M tiles of a group walked together, N column by N column
constexpr int kConsumers = 2;  // warpgroups of 64 rows
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr uint32_t kBoxBytes = kTile * kTile;  // one E4M3 box of A or B

// A stage: the A and B boxes of one 128-K block, the tile's 128 x scales and its w scale.
struct Smem {
  alignas(1024) uint8_t a[kStages][kBoxBytes];  // SWIZZLE_128B boxes: 1024-byte aligned
  alignas(1024) uint8_t b[kStages][kBoxBytes];
  float sa[kStages][kTile], sb[kStages];
  uint64_t full[kStages], empty[kStages];
};
constexpr size_t kSmemBytes = sizeof(Smem) + 1024;  // + slack to align the dynamic window

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
// walk past the last group (next_row0: the sum of every group's rows).
template <class F>
__device__ __forceinline__ Walk for_each_tile(const Fp8GroupedParams& p, int tiles_n, F&& f) {
  Walk walk;
  for (long long t = blockIdx.x; walk.seek(p, tiles_n, t); t += gridDim.x) {
    int mt, nt;
    walk.coords(tiles_n, t, mt, nt);
    f(static_cast<const Walk&>(walk), mt, nt);
  }
  return walk;
}

// A position in the stage ring: the slot and the parity of its current round.
struct Ring {
  int s = 0;
  uint32_t phase = 0;
  __device__ __forceinline__ void next() {
    if (++s == kStages) s = 0, phase ^= 1;
  }
};

// The TMA thread: per stage, the tile's A box (128 rows from the group's tile row) and B box.
__device__ __forceinline__ void producer(const CUtensorMap* map_x, const CUtensorMap* map_w,
                                         const Fp8GroupedParams& p, Smem& sm, int tiles_n, int kblocks) {
  Ring ring;
  for_each_tile(p, tiles_n, [&](const Walk& walk, int mt, int nt) {
    const int row = static_cast<int>(walk.row0) + mt * kTile, col = nt * kTile;
    for (int kb = 0; kb < kblocks; ++kb, ring.next()) {
      const int s = ring.s;
      mbar_wait(&sm.empty[s], ring.phase ^ 1);
      mbar_arrive_expect_tx(&sm.full[s], 2 * kBoxBytes);  // out-of-bounds bytes land as zeros and count
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

// The scale warp: per stage, lane l copies the x scales of tile rows 4l .. 4l + 3 (zeros past the
// group) and lane 0 the w scale; each lane's copies arrive on the full barrier.
__device__ __forceinline__ void scale_producer(const Fp8GroupedParams& p, Smem& sm, int tiles_n, int kblocks) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  Ring ring;
  for_each_tile(p, tiles_n, [&](const Walk& walk, int mt, int nt) {
    const long long r = static_cast<long long>(mt) * kTile + 4 * lane;
    const int valid = static_cast<int>(max(0LL, min(4LL, walk.m - r)));
    // x scales [kblocks][m] (MN-major) from row r, w scales [kblocks][tiles_n] from column nt
    const float* xk = p.x_scale + walk.row0 * p.xs_rs + r;
    const float* wk = p.w_scale + walk.g * p.ws_gs + nt;
    for (int kb = 0; kb < kblocks; ++kb, ring.next(), xk += walk.m, wk += tiles_n) {
      const int s = ring.s;
      mbar_wait(&sm.empty[s], ring.phase ^ 1);
#pragma unroll
      for (int j = 0; j < 4; ++j)
        cp_async<4>(&sm.sa[s][4 * lane + j], j < valid ? xk + j : p.x_scale, j < valid ? 4 : 0);
      if (lane == 0) cp_async<4>(&sm.sb[s], wk, 4);
      cp_async_mbar_arrive(&sm.full[s]);
    }
  });
}

// Consumer warpgroup c (rows 64c .. 64c + 63 of each tile).
__device__ __forceinline__ void consumer(const Fp8GroupedParams& p, Smem& sm, int tiles_n, int kblocks, int c) {
  const int tid = static_cast<int>(threadIdx.x) % 128, warp = tid / 32, lane = tid % 32;
  const int row_wg = warp * 16 + lane / 4;  // the thread's first accumulator row in its 64 (then + 8)
  const uint32_t a_smem = smem_u32(sm.a[0]) + c * 64 * kTile, b_smem = smem_u32(sm.b[0]);
  auto* out = static_cast<__nv_bfloat16*>(p.out);
  Ring ring;
  const Walk end = for_each_tile(p, tiles_n, [&](const Walk& walk, int mt, int nt) {
    const long long m = walk.m;
    const int r0 = mt * kTile + c * 64 + row_wg;  // group-local rows r0 and r0 + 8
    const bool v0 = r0 < m, v1 = r0 + 8 < m;
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.f;
    for (int kb = 0; kb < kblocks; ++kb, ring.next()) {
      const int s = ring.s;
      mbar_wait(&sm.full[s], ring.phase);
      // the scales, read before the stage is released
      const float sb = ld_shared_f32(smem_u32(&sm.sb[s]));
      const uint32_t sa = smem_u32(&sm.sa[s][c * 64 + row_wg]);
      const float sa0 = ld_shared_f32(sa), sa1 = ld_shared_f32(sa + 32);
      float part[64];
      wgmma_fence();
      const uint64_t da = gmma_desc_sw128(a_smem + s * kBoxBytes), db = gmma_desc_sw128(b_smem + s * kBoxBytes);
#pragma unroll
      for (int k = 0; k < kTile / 32; ++k) detail::wgmma_m64n128k32_e4m3(part, da + 2 * k, db + 2 * k, k > 0);
      wgmma_commit();
      wgmma_wait<0>();
#pragma unroll
      for (int i = 0; i < 64; ++i) fence_operand(part[i]);
      if (lane == 0) mbar_arrive(&sm.empty[s]);  // the stage is read: one arrival a warp
      const float s0 = sa0 * sb, s1 = sa1 * sb;
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        acc[4 * j] = fmaf(part[4 * j], s0, acc[4 * j]);
        acc[4 * j + 1] = fmaf(part[4 * j + 1], s0, acc[4 * j + 1]);
        acc[4 * j + 2] = fmaf(part[4 * j + 2], s1, acc[4 * j + 2]);
        acc[4 * j + 3] = fmaf(part[4 * j + 3], s1, acc[4 * j + 3]);
      }
    }

    // Epilogue: bf16 pairs straight from the accumulator rows (columns 8j + 2 (lane % 4), + 1).
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

__global__ void __launch_bounds__(kThreads, 1)
    grouped_kernel(const __grid_constant__ CUtensorMap map_x, const __grid_constant__ CUtensorMap map_w,
                   const Fp8GroupedParams p) {
  extern __shared__ uint8_t smem_raw[];
  auto& sm = *reinterpret_cast<Smem*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  // N tiles and K blocks, computed by each role after its register change (computed before it,
  // ptxas kept one of them in local memory across the change)
  auto tiles_n = [&p] { return static_cast<int>((p.N + kTile - 1) / kTile); };
  auto kblocks = [&p] { return static_cast<int>((p.K + kTile - 1) / kTile); };
  // warpgroup index through a shuffle: provably warp-uniform, so the compiler keeps the shared-memory
  // addresses and wgmma descriptors derived from it in uniform registers
  const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0);
  if (threadIdx.x == 0) {
    // full: the TMA thread's arrival and the scale warp's 32; empty: one arrival a consumer warp
    for (int s = 0; s < kStages; ++s) mbar_init(&sm.full[s], 33), mbar_init(&sm.empty[s], 4 * kConsumers);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    prefetch_tensormap(&map_x);
    prefetch_tensormap(&map_w);
  }
  __syncthreads();
  if (wg == 0) {  // producer warpgroup: thread 0 loads the operands, warp 1 the scales; all give registers away
    setmaxnreg_dec<40>();
    if (threadIdx.x == 0) producer(&map_x, &map_w, p, sm, tiles_n(), kblocks());
    if (threadIdx.x / 32 == 1) scale_producer(p, sm, tiles_n(), kblocks());
  } else {
    setmaxnreg_inc<232>();  // the consumers' two 64-float accumulators without spills
    consumer(p, sm, tiles_n(), kblocks(), wg - 1);
  }
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

}  // namespace

cudaError_t fp8_blockwise_grouped_wgmma_run(const Fp8GroupedParams& p, cudaStream_t stream) {
  if (!applies(p)) return cudaErrorNotSupported;
  CUtensorMap map_x, map_w;
  const cuuint64_t dx[2] = {cuuint64_t(p.K), cuuint64_t(p.total_M)}, sx[1] = {cuuint64_t(p.ldx)};
  const cuuint64_t dw[3] = {cuuint64_t(p.K), cuuint64_t(p.N), cuuint64_t(p.G)};
  const cuuint64_t sw[2] = {cuuint64_t(p.ldw), cuuint64_t(p.w_gs)};
  const cuuint32_t box2[2] = {kTile, kTile}, box3[3] = {kTile, kTile, 1};
  if (!cuda::encode(&map_x, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, p.x, dx, sx, box2, CU_TENSOR_MAP_SWIZZLE_128B) ||
      !cuda::encode(&map_w, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, p.w, dw, sw, box3, CU_TENSOR_MAP_SWIZZLE_128B))
    return cudaErrorNotSupported;
  // At most as many CTAs as tiles can exist: ceil(total_M / 128) + G M tiles over the N tiles.
  const long long tiles = ((p.total_M + kTile - 1) / kTile + p.G) * ((p.N + kTile - 1) / kTile);
  const int grid = cuda::persistent_grid<grouped_kernel>(tiles, kThreads, kSmemBytes);
  if (grid == 0) return cudaErrorNotSupported;
  grouped_kernel<<<grid, kThreads, kSmemBytes, stream>>>(map_x, map_w, p);
  return cudaGetLastError();
}

}  // namespace mslk::gemm
