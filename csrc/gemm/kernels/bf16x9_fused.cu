// The fused bf16x9 GEMM (bf16x9.h: Bf16x9FusedParams) for sm90: the float32 operands are split into
// their BF16 parts inside the kernel, so no parts buffer is written or read. The parts path
// (bf16x9_split.cu + one BF16 GEMM over K' = 9 kp) moves 9 BF16 copies of each operand through
// global memory: at M = 128, N = K = 8192 that is 1.2 GB for B alone, and the call ran at a third
// of FP32 torch.mm's speed. Here B is read once as float32 (4 bytes an element, the least any path
// can read) and A, shared by every CTA, comes from L2.
//
// Per CTA, one 128 x 128 output tile over a K range (the K split, when 2, adds into a zeroed out):
//   producer warpgroup: per 64-K stage, cp.async copies of the tile's 128 B rows (float32) into a
//       4-slot staging ring (3 stages ahead), then each thread splits its own copies into hi / mid /
//       lo BF16 tiles (K-major, 128-byte swizzled rows: wgmma's B operand) in a 2-stage ring;
//   2 consumer warpgroups of 64 rows: per 16-K step each thread loads its A pairs (float32, from
//       L2, two steps ahead), splits them into hi / mid / lo register fragments (wgmma's A operand
//       from registers), and issues the nine m64n128k16 products, smallest first: (hi, hi) into
//       one float32 accumulator, the other eight into a second, added at the end.
// Narrow tiles (M <= kBf16x9FusedNarrowMaxM): 64 x 128, both consumer warpgroups on the same 64 rows,
// 64 columns each (m64n64k16 products), so that a few rows of A keep two warpgroups issuing
// products; otherwise the second warpgroup of a 128-row tile has no rows and idles.
// The split is the parts path's (bf16x9_split.cu): hi = bf16(x), mid = bf16(x - hi), lo =
// bf16(x - hi - mid), residuals exact in float32.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <climits>

#include "common/device_attrs.h"
#include "common/sm90_ptx.cuh"
#include "gemm/kernels/bf16x9.h"
#include "gemm/kernels/bf16x9_configs.h"
#include "gemm/kernels/wgmma_m64n128.cuh"

namespace mslk::gemm {
namespace {

using namespace mslk::ptx;

constexpr int kBM = 128, kBN = 128, kBK = 64;  // tile rows, columns, K of a stage
// Shared memory goes to B's float32 copies in flight rather than to split stages: splitting a stage
// takes a fraction of the stage's products, so two split stages keep the consumers fed, and three
// stages of copies ahead (96 KB a SM) cover the DRAM latency. Against one copy stage ahead and three
// split stages the H100 measured 4% faster at M = 128 and the same at M = 1.
constexpr int kStages = 2;                     // BF16 parts ring: 2 x 48 KB
constexpr int kStaging = 4;                    // float32 B staging ring: 4 x 32 KB, kStaging - 1 ahead
// Consumer warpgroups first, then the producer warpgroup; registers moved to the consumers (their
// two 64-float accumulators) by setmaxnreg.
constexpr int kConsumers = 2, kProducerThreads = 128, kThreads = 128 * kConsumers + kProducerThreads;
// setmaxnreg moves registers within what the launch gave the CTA (ptxas's cap at one CTA a SM: the
// register file over the threads, in steps of 8); an increase past it waits forever.
constexpr int kLaunchRegs = 65536 / kThreads / 8 * 8, kProducerRegs = 96, kConsumerRegs = 200;
static_assert(kProducerThreads * kProducerRegs + 128 * kConsumers * kConsumerRegs <= kThreads * kLaunchRegs);
constexpr int kSteps = kBK / 16;  // 16-K steps (wgmma's K) a stage
// Steps of A pairs in registers ahead of the one split: a wide tile's 64 accumulators a thread
// leave room for 2 (a stage's 4 spill); a narrow tile, with half of them and half as long a step,
// takes a whole stage so that the L2 latency of A fits under the products.
template <bool kNarrow>
constexpr int ahead() {
  return kNarrow ? kSteps : 2;
}
static_assert(kSteps % ahead<false>() == 0 && kSteps % ahead<true>() == 0,
              "the look-ahead ring must tile a stage's steps");
constexpr int kHiHi = 8;  // the (hi, hi) product: the last segment
static_assert(bf16x9_segment_part(kHiHi, false) == 0 && bf16x9_segment_part(kHiHi, true) == 0);
constexpr int kChunks = kBN * kBK / 8 / kProducerThreads;  // 8-float chunks of B a producer thread splits a stage
constexpr int kRowStep = kProducerThreads / 8;              // rows between a producer thread's chunks

struct Smem {
  alignas(1024) __nv_bfloat16 parts[kStages][3][kBN * kBK];  // [stage][hi, mid, lo][128 rows x 128 bytes]
  // A B row of a stage as 2 x 128 bytes: the first 4 floats of the 8 chunks, then their last 4, so
  // that 8 lanes reading one half of their chunks touch 8 distinct 16-byte bank groups.
  alignas(16) float staging[kStaging][kBN * kBK];
  uint64_t full[kStages], empty[kStages];
};
constexpr size_t kSmemBytes = sizeof(Smem) + 1024;  // + slack to align the dynamic window
static_assert(kSmemBytes <= 227 * 1024, "over sm90's 227 KB of shared memory a CTA");

// A position in the parts ring: the slot and the parity of its current round.
struct Ring {
  int s = 0;
  uint32_t phase = 0;
  __device__ __forceinline__ void next() {
    if (++s == kStages) s = 0, phase ^= 1;
  }
};

__device__ __forceinline__ uint32_t bits(__nv_bfloat162 v) { return *reinterpret_cast<uint32_t*>(&v); }

// hi / mid / lo of the pair (x, y), x in the low half (the lower K index, as wgmma packs its pairs).
__device__ __forceinline__ void split_pair(float x, float y, uint32_t& hi, uint32_t& mid, uint32_t& lo) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
  const float2 hf = __bfloat1622float2(h);
  const float rx = x - hf.x, ry = y - hf.y;
  const __nv_bfloat162 m = __floats2bfloat162_rn(rx, ry);
  const float2 mf = __bfloat1622float2(m);
  hi = bits(h), mid = bits(m), lo = bits(__floats2bfloat162_rn(rx - mf.x, ry - mf.y));
}

__device__ __forceinline__ void fence_reg(uint32_t& r) { asm volatile("" : "+r"(r)::"memory"); }

// Rows of a tile: kBM, or 64 in a narrow tile.
template <bool kNarrow>
constexpr int tile_rows() {
  return kNarrow ? 64 : kBM;
}

// The CTA's tile and K range: M tiles fastest, so the CTAs that split the same B rows run together.
struct TileCoords {
  int mt, nt, kb0, kb1;
};
template <bool kNarrow>
__device__ __forceinline__ TileCoords tile_coords(const Bf16x9FusedParams& p) {
  const int tiles_m = static_cast<int>((p.M + tile_rows<kNarrow>() - 1) / tile_rows<kNarrow>());
  const int kblocks = static_cast<int>((p.K + kBK - 1) / kBK), z = static_cast<int>(blockIdx.y);
  return {static_cast<int>(blockIdx.x) % tiles_m, static_cast<int>(blockIdx.x) / tiles_m, z * kblocks / p.splits,
          (z + 1) * kblocks / p.splits};
}

// Producer warpgroup: thread t copies and splits chunks (row t / 8 + kRowStep i, floats 8 (t % 8) ..
// + 7) of each stage; rows past N and K past the end land as zeros (cp.async's zero fill).
__device__ __forceinline__ void producer(const Bf16x9FusedParams& p, Smem& sm, const TileCoords& tc) {
  const int t = static_cast<int>(threadIdx.x) - 128 * kConsumers, c = t % 8;
  const int64_t n0 = static_cast<int64_t>(tc.nt) * kBN;
  auto issue = [&](int kb, int slot) {
    const int64_t k = static_cast<int64_t>(kb) * kBK + 8 * c;
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      const int row = t / 8 + kRowStep * i;
      const bool in = n0 + row < p.N;
      const float* src = p.b + (in ? (n0 + row) * p.ldb + k : 0);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t left = in ? p.K - (k + 4 * h) : 0;
        const int bytes = left >= 4 ? 16 : left > 0 ? static_cast<int>(left) * 4 : 0;
        cp_async<16>(&sm.staging[slot][row * kBK + 32 * h + 4 * c], bytes > 0 ? src + 4 * h : p.b, bytes);
      }
    }
    cp_async_commit();
  };
  // One commit group a stage, empty past the range, so that the count stays kStaging - 1 ahead.
  // A slot is refilled by the thread that split it (each thread reads only its own copies).
#pragma unroll
  for (int i = 0; i < kStaging - 1; ++i) {
    if (tc.kb0 + i < tc.kb1) issue(tc.kb0 + i, i);
    else cp_async_commit();
  }
  Ring ring;
  for (int kb = tc.kb0, j = 0; kb < tc.kb1; ++kb, ++j, ring.next()) {
    if (kb + kStaging - 1 < tc.kb1) issue(kb + kStaging - 1, (j + kStaging - 1) % kStaging);
    else cp_async_commit();
    cp_async_wait<kStaging - 1>();  // this thread's copies of stage kb landed
    mbar_wait(&sm.empty[ring.s], ring.phase ^ 1);  // a fresh barrier passes parity 1
    const float* stg = sm.staging[j % kStaging];
    const uint32_t dst = smem_u32(sm.parts[ring.s][0]);
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      const int row = t / 8 + kRowStep * i;
      const float4 u = *reinterpret_cast<const float4*>(stg + row * kBK + 4 * c);
      const float4 v = *reinterpret_cast<const float4*>(stg + row * kBK + 32 + 4 * c);
      uint32_t q[3][4];
      split_pair(u.x, u.y, q[0][0], q[1][0], q[2][0]);
      split_pair(u.z, u.w, q[0][1], q[1][1], q[2][1]);
      split_pair(v.x, v.y, q[0][2], q[1][2], q[2][2]);
      split_pair(v.z, v.w, q[0][3], q[1][3], q[2][3]);
      const uint32_t off = static_cast<uint32_t>(swizzle128(row, c));
#pragma unroll
      for (int part = 0; part < 3; ++part)
        asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst + part * kBN * kBK * 2 + off),
                     "r"(q[part][0]), "r"(q[part][1]), "r"(q[part][2]), "r"(q[part][3])
                     : "memory");
    }
    fence_proxy_async_smem();  // generic stores before wgmma's async-proxy reads
    mbar_arrive(&sm.full[ring.s]);
  }
}

// Consumer warpgroup cw: rows 64 cw .. + 63 of the tile; in a narrow tile its 64 rows, columns
// 64 cw .. + 63.
template <bool kNarrow>
__device__ __forceinline__ void consumer(const Bf16x9FusedParams& p, Smem& sm, const TileCoords& tc, int cw) {
  constexpr int kCols = kNarrow ? 64 : kBN, kAcc = kCols / 2;  // columns and accumulator floats a thread
  const int tid = static_cast<int>(threadIdx.x) % 128, lane = tid % 32, t4 = lane % 4;
  const int64_t tile_row = static_cast<int64_t>(tc.mt) * tile_rows<kNarrow>() + (kNarrow ? 0 : 64 * cw);
  const int col_off = kNarrow ? 64 * cw : 0;  // the warpgroup's first column of the tile
  const int64_t r0 = tile_row + 16 * (tid / 32) + lane / 4;  // the thread's rows r0 and r0 + 8
  Ring ring;
  if (tile_row >= p.M) {  // no rows here: release the stages as they come
    for (int kb = tc.kb0; kb < tc.kb1; ++kb, ring.next()) {
      mbar_wait(&sm.full[ring.s], ring.phase);
      if (lane == 0) mbar_arrive(&sm.empty[ring.s]);
    }
    return;
  }
  const bool v0 = r0 < p.M, v1 = r0 + 8 < p.M;
  const float* a0 = p.a + (v0 ? r0 : 0) * p.lda + 2 * t4;
  const float* a1 = p.a + (v1 ? r0 + 8 : 0) * p.lda + 2 * t4;
  // A pairs of kAhead 16-K steps in fragment order: [step][(r0, k), (r0 + 8, k), (r0, k + 8), (r0 + 8, k + 8)];
  // a step's four are reloaded with the pairs kAhead steps on as soon as they are split (the loads
  // then have kAhead steps of products to land in).
  constexpr int kAhead = ahead<kNarrow>();
  float2 x[kAhead][4];
  auto load_step = [&](int kb, int s) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t k = static_cast<int64_t>(kb) * kBK + 16 * s + 8 * h;
      const bool kin = k + 2 * t4 < p.K;
      float2(&xs)[4] = x[s % kAhead];
      xs[2 * h] = v0 && kin ? __ldg(reinterpret_cast<const float2*>(a0 + k)) : make_float2(0.f, 0.f);
      xs[2 * h + 1] = v1 && kin ? __ldg(reinterpret_cast<const float2*>(a1 + k)) : make_float2(0.f, 0.f);
    }
  };
  // Two accumulators: (hi, hi) alone in `acc`, the eight smaller products in `low`. wgmma truncates
  // its addends to the accumulator's exponent, so in one accumulator each 16-K step's eight small
  // products would each lose up to an ulp of the full sum: 2-4x the parts path's error, measured.
  // Apart, they lose ulps of their own (2^-8 smaller) sum, and (hi, hi) sees one wgmma a 16-K step,
  // as in the parts path.
  float acc[kAcc], low[kAcc];
#pragma unroll
  for (int i = 0; i < kAcc; ++i) acc[i] = 0.f, low[i] = 0.f;
#pragma unroll
  for (int s = 0; s < kAhead; ++s) load_step(tc.kb0, s);
  uint32_t frag[2][3][4];  // [16-K step parity][hi, mid, lo][A pairs]: the step in flight and the next
  const uint32_t parts0 = smem_u32(sm.parts[0][0]);
  for (int kb = tc.kb0; kb < tc.kb1; ++kb, ring.next()) {
    mbar_wait(&sm.full[ring.s], ring.phase);
    // a B row is 128 bytes of the stage: the warpgroup's columns start col_off rows in
    const uint32_t stage = parts0 + ring.s * (3 * kBN * kBK * 2) + col_off * (kBK * 2);
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      uint32_t(&f)[3][4] = frag[s % 2];
#pragma unroll
      for (int i = 0; i < 4; ++i) split_pair(x[s % kAhead][i].x, x[s % kAhead][i].y, f[0][i], f[1][i], f[2][i]);
      const int nkb = kb + (s + kAhead) / kSteps;
      if (nkb < tc.kb1) load_step(nkb, (s + kAhead) % kSteps);
      wgmma_fence();
#pragma unroll
      for (int seg = 0; seg < 9; ++seg) {
        const int i = bf16x9_segment_part(seg, false), j = bf16x9_segment_part(seg, true);
        // a 16-K step is 32 bytes along the swizzled row: + 2 in the descriptor's 16-byte units
        const uint64_t desc = gmma_desc_sw128(stage + j * (kBN * kBK * 2)) + 2 * s;
        if constexpr (kNarrow) {
          if (seg == kHiHi) detail::wgmma_m64n64k16_bf16_rs(acc, f[i], desc);
          else detail::wgmma_m64n64k16_bf16_rs(low, f[i], desc);
        } else {
          if (seg == kHiHi) detail::wgmma_m64n128k16_bf16_rs(acc, f[i], desc);
          else detail::wgmma_m64n128k16_bf16_rs(low, f[i], desc);
        }
      }
      wgmma_commit();
      wgmma_wait<1>();  // the previous step's products are done: its fragments may be rewritten
#pragma unroll
      for (int q = 0; q < 3; ++q)
#pragma unroll
        for (int i = 0; i < 4; ++i) fence_reg(frag[(s + 1) % 2][q][i]);  // live until that wait
      // the previous stage's last products are done: its parts slot may be refilled
      if (s == 0 && kb > tc.kb0 && lane == 0) mbar_arrive(&sm.empty[(ring.s + kStages - 1) % kStages]);
    }
  }
  wgmma_wait<0>();
#pragma unroll
  for (int i = 0; i < kAcc; ++i) fence_operand(acc[i]), fence_operand(low[i]);

  // Epilogue: the accumulator pairs (rows r0 + 8 h, columns 8 j + 2 (lane % 4) + {0, 1}); summed
  // into out when K is split.
  const int64_t col0 = static_cast<int64_t>(tc.nt) * kBN + col_off + 2 * t4;
  const bool vec = p.ldd % 2 == 0 && reinterpret_cast<uintptr_t>(p.out) % 8 == 0;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (h == 0 ? !v0 : !v1) continue;
    float* orow = p.out + (r0 + 8 * h) * p.ldd;
#pragma unroll
    for (int j = 0; j < kCols / 8; ++j) {
      const int64_t col = col0 + 8 * j;
      const int e = 4 * j + 2 * h;
      const float x = low[e] + acc[e], y = low[e + 1] + acc[e + 1];
      if (p.splits == 1) {
        if (vec && col + 1 < p.N) {
          *reinterpret_cast<float2*>(orow + col) = make_float2(x, y);
        } else {
          if (col < p.N) orow[col] = x;
          if (col + 1 < p.N) orow[col + 1] = y;
        }
      } else {
        if (vec && col + 1 < p.N) {
          red_add_f32x2<0>(orow + col, x, y, true);
        } else {
          if (col < p.N) atomicAdd(orow + col, x);
          if (col + 1 < p.N) atomicAdd(orow + col + 1, y);
        }
      }
    }
  }
}

template <bool kNarrow>
__global__ void __launch_bounds__(kThreads, 1) fused_kernel(const Bf16x9FusedParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ uint8_t smem_raw[];
  auto& sm = *reinterpret_cast<Smem*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  // warpgroup index through a shuffle: provably warp-uniform
  const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0);
  if (threadIdx.x == 0) {
    // full: every producer thread; empty: one arrival a consumer warp
    for (int s = 0; s < kStages; ++s)
      mbar_init(&sm.full[s], kProducerThreads), mbar_init(&sm.empty[s], 4 * kConsumers);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const TileCoords tc = tile_coords<kNarrow>(p);
  if (wg < kConsumers) {
    setmaxnreg_inc<kConsumerRegs>();
    consumer<kNarrow>(p, sm, tc, wg);
  } else {
    setmaxnreg_dec<kProducerRegs>();
    producer(p, sm, tc);
  }
#else
  (void)p;
#endif
}

// Narrow tiles (64 rows) up to kBf16x9FusedNarrowMaxM rows.
bool narrow_tiles(int64_t M) { return M <= kBf16x9FusedNarrowMaxM; }

// Tiles of the launch.
int64_t fused_tiles(int64_t M, int64_t N) {
  const int64_t rows = narrow_tiles(M) ? 64 : kBM;
  return (M + rows - 1) / rows * ((N + kBN - 1) / kBN);
}

}  // namespace

bool bf16x9_fused_applies(const Bf16x9FusedParams& p) {
  auto aligned16 = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  const int64_t tiles = fused_tiles(p.M, p.N);
  return p.M > 0 && p.N > 0 && p.K > 0 && p.K % 4 == 0 && p.lda % 4 == 0 && p.ldb % 4 == 0 && aligned16(p.a) &&
         aligned16(p.b) && tiles <= INT_MAX && p.K <= INT_MAX - kBK && (p.splits == 1 || p.splits == 2) &&
         (p.M == 1 || p.ldd >= p.N);
}

int bf16x9_fused_splits(int64_t M, int64_t N, int64_t K, int sms) {
  const int64_t tiles = fused_tiles(M, N);
  return 2 * tiles <= sms && K >= 2 * kBK ? 2 : 1;
}

cudaError_t bf16x9_fused_run(const Bf16x9FusedParams& p, cudaStream_t stream) {
  if (!bf16x9_fused_applies(p)) return cudaErrorNotSupported;
  int dev = 0;
  if (const cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  const bool narrow = narrow_tiles(p.M);
  static cuda::SmemLimitOnce smem_limit, smem_limit_narrow;  // one per kernel
  if (const cudaError_t e = narrow ? smem_limit_narrow.ensure(fused_kernel<true>, dev, kSmemBytes)
                                   : smem_limit.ensure(fused_kernel<false>, dev, kSmemBytes);
      e != cudaSuccess)
    return e;
  if (p.splits > 1) {  // the K ranges' sums are added into out
    const cudaError_t e = cudaMemset2DAsync(p.out, static_cast<size_t>(p.M > 1 ? p.ldd : p.N) * sizeof(float), 0,
                                            static_cast<size_t>(p.N) * sizeof(float), static_cast<size_t>(p.M), stream);
    if (e != cudaSuccess) return e;
  }
  const dim3 grid(static_cast<unsigned>(fused_tiles(p.M, p.N)), static_cast<unsigned>(p.splits));
  if (narrow) fused_kernel<true><<<grid, kThreads, kSmemBytes, stream>>>(p);
  else fused_kernel<false><<<grid, kThreads, kSmemBytes, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace mslk::gemm
