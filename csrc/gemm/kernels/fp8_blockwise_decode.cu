// Decode-shape block/group-scaled FP8 GEMM (M <= 16 tokens): the cost is reading the weight once,
// so the kernel is a TMA stream of weight tiles into shared memory, deep enough to keep the H200's
// memory busy, multiplied on the tensor cores (mma.sync m16n8k32 E4M3, mma_e4m3.cuh) by warps that
// only compute. Swap-AB: the MMA's A is 16 weight rows n, its B 8 tokens m.
//
// CTA: 128 weight rows (one scale block of W, so one w scale a K block) by a range of 128-K blocks
// (its K split). Warp 4 is the producer: one lane issues, per K block, a TMA box of 128 rows x
// 128 bytes of W and one of 8 * MT tokens x 128 bytes of X (rows past N, tokens past M and k past
// K land as zeros) into a ring of kStages stages, 128-byte swizzled so that the fragment loads
// below hit every bank once. Warps 0-3 take 32 rows each (two m16 blocks): per K block 2 x 2 x MT
// MMA pairs into float32 partials, which are then scaled by sfa[m] * sfb (one product a token and
// K block, computed once a CTA into a shared table) and added to the accumulators. Every consumer
// lane arrives on the stage's `empty` barrier (racecheck follows each thread's own arrive), after a
// proxy fence: its reads are generic-proxy, the TMA write that reuses the stage async-proxy.
//
// K splits (grid.y): with one split the kernel rounds to bf16; otherwise each split writes float32
// partials [split][M][N] and a second kernel sums them in split order (deterministic) and rounds.
#include <cuda.h>
#include <cuda_bf16.h>

#include <climits>
#include <cstdint>

#include "common/cuda_utils.cuh"
#include "common/device_attrs.h"
#include "common/sm90_ptx.cuh"
#include "common/tensor_map.h"
#include "gemm/kernels/fp8_blockwise_decode.h"
#include "gemm/kernels/mma_e4m3.cuh"

namespace mslk::gemm {
namespace {

constexpr int kConsumerWarps = 4;
constexpr int kThreads = 32 * (kConsumerWarps + 1);
constexpr int kRows = 128;                     // weight rows a CTA: one W scale block
constexpr int kTileK = 128;                    // k a stage: one scale block, one 128-byte swizzle row
constexpr int kWBytes = kRows * kTileK;        // 16 KB of W a stage
constexpr int kStages = 5;                     // 2 CTAs a SM: ~180 KB of loads in flight a SM
constexpr int kMaxKbPerSplit = 64;             // the scale table: 64 K blocks x 16 tokens x 4 bytes
constexpr int kCtasPerSm = 2;                  // what the shared memory below allows
constexpr int kReduceThreads = 256;

template <int MT>  // n8 tiles of tokens: 1 (M <= 8) or 2
struct Layout {
  static constexpr int kXBytes = 8 * MT * kTileK;
  static constexpr int kStageBytes = kWBytes + kXBytes;  // a multiple of 1024 (the swizzle atom)
  static constexpr int kBarOffset = kStages * kStageBytes;
  static constexpr int kTableOffset = kBarOffset + 2 * kStages * 8;
  static constexpr size_t kBytes = 1024 + kTableOffset + kMaxKbPerSplit * 16 * 4;  // + alignment slack
};
static_assert(Layout<2>::kBytes * kCtasPerSm + 2048 <= 228 * 1024, "kCtasPerSm CTAs must fit a SM");

__host__ __device__ __forceinline__ int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

__device__ __forceinline__ uint4 lds128(const uint8_t* p) { return *reinterpret_cast<const uint4*>(p); }

// grid (ceil(N / 128), splits); split y covers K blocks [y * kbps, min(+kbps, ceil(K / 128))).
template <int MT>
__global__ void __launch_bounds__(kThreads, kCtasPerSm)
    decode_kernel(const __grid_constant__ CUtensorMap wmap, const __grid_constant__ CUtensorMap xmap,
                  const BlockwiseDecodeParams p, const int kbps) {
  using L = Layout<MT>;
  extern __shared__ uint8_t smem_raw[];
  // 1024-byte aligned (the swizzle atom) by an offset on the shared array itself: a pointer made
  // through an integer loses the shared state space, and the reads below become generic loads.
  uint8_t* smem = smem_raw + ((1024u - ptx::smem_u32(smem_raw) % 1024u) % 1024u);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + L::kBarOffset);
  uint64_t* empty = full + kStages;
  float* table = reinterpret_cast<float*>(smem + L::kTableOffset);  // [kb][16 tokens]

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t kb_total = cdiv(p.K, kTileK), kb0 = static_cast<int64_t>(blockIdx.y) * kbps;
  const int nkb = static_cast<int>(kb0 + kbps < kb_total ? kbps : kb_total - kb0);  // >= 1 by the plan
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kRows;

  if (threadIdx.x == 0) ptx::ring_init(full, empty, kStages, 32 * kConsumerWarps);
  __syncthreads();

  if (warp == kConsumerWarps) {  // producer
    if (lane == 0) {
      ptx::prefetch_tensormap(&wmap);
      ptx::prefetch_tensormap(&xmap);
      const uint64_t w_policy = ptx::createpolicy_evict_first();  // the weight is read once
      for (int s = 0; s < nkb; ++s) {
        const int slot = s % kStages;
        if (s >= kStages) ptx::mbar_wait(&empty[slot], ((s / kStages) - 1) & 1);
        ptx::mbar_arrive_expect_tx(&full[slot], L::kStageBytes);
        const int k = static_cast<int>((kb0 + s) * kTileK);
        uint8_t* st = smem + slot * L::kStageBytes;
        ptx::tma_load_2d_hint(&wmap, &full[slot], st, k, static_cast<int>(n0), w_policy);
        ptx::tma_load_2d(&xmap, &full[slot], st + kWBytes, k, 0);
      }
    }
    return;
  }

  // The scale table: sfa[m, kb] * sfb[n0 / 128, kb] for this split's K blocks (0 past M).
  const int64_t nb = n0 / kRows;
  for (int i = threadIdx.x; i < nkb * 16; i += 32 * kConsumerWarps) {
    const int s = i >> 4, m = i & 15;
    const int64_t kb = kb0 + s;
    table[i] = m < p.M ? p.sfa[m * p.sfa_sm + kb * p.sfa_sk] * p.sfb[nb * p.sfb_sn + kb * p.sfb_sk] : 0.f;
  }
  ptx::named_barrier_sync(1, 32 * kConsumerWarps);

  const int g = lane >> 2, t = lane & 3;
  float acc[2][MT][4] = {};
  for (int s = 0; s < nkb; ++s) {
    const int slot = s % kStages;
    ptx::mbar_wait(&full[slot], (s / kStages) & 1);
    const uint8_t* W = smem + slot * L::kStageBytes;
    const uint8_t* X = W + kWBytes;
    float d[2][MT][4] = {};
#pragma unroll
    for (int j = 0; j < 2; ++j) {  // two 64-k steps; the lane's 16 bytes are chunk 4j + t of a row
      const int c = 4 * j + t;
      uint4 b[MT];
#pragma unroll
      for (int nt = 0; nt < MT; ++nt) b[nt] = lds128(X + ptx::swizzle128(8 * nt + g, c));
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        const int r = warp * 32 + mt * 16 + g;
        const uint4 lo = lds128(W + ptx::swizzle128(r, c)), hi = lds128(W + ptx::swizzle128(r + 8, c));
#pragma unroll
        for (int nt = 0; nt < MT; ++nt) mma_e4m3_x2(d[mt][nt], lo, hi, b[nt]);
      }
    }
    // Release the stage. TMA (the async proxy) overwrites it next, and the arrive alone orders
    // only the issue of the reads above: the proxy fence waits for them (without it, results
    // changed from run to run once the ring wrapped).
    ptx::fence_proxy_async_smem();
    ptx::mbar_arrive(&empty[slot]);
#pragma unroll
    for (int nt = 0; nt < MT; ++nt) {
      const float2 sc = *reinterpret_cast<const float2*>(table + s * 16 + 8 * nt + 2 * t);
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        acc[mt][nt][0] = fmaf(d[mt][nt][0], sc.x, acc[mt][nt][0]);
        acc[mt][nt][1] = fmaf(d[mt][nt][1], sc.y, acc[mt][nt][1]);
        acc[mt][nt][2] = fmaf(d[mt][nt][2], sc.x, acc[mt][nt][2]);
        acc[mt][nt][3] = fmaf(d[mt][nt][3], sc.y, acc[mt][nt][3]);
      }
    }
  }

  // C fragment: acc[mt][nt][i] is (n = row + 8 (i / 2), m = 8 nt + 2t + i % 2).
  float* part = gridDim.y > 1 ? p.workspace + static_cast<int64_t>(blockIdx.y) * p.M * p.N : nullptr;
  __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.out);
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
    for (int nt = 0; nt < MT; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t m = 8 * nt + 2 * t + (i & 1), n = n0 + warp * 32 + mt * 16 + g + 8 * (i >> 1);
        if (m >= p.M || n >= p.N) continue;
        if (part)
          part[m * p.N + n] = acc[mt][nt][i];
        else
          out[m * p.ldd + n] = __float2bfloat16_rn(acc[mt][nt][i]);
      }
    }
  }
}

// out = bf16(sum over s in order of workspace[s][m][n]); a programmatic dependent of the main
// kernel (its launch overlaps that kernel's tail; griddepcontrol.wait returns once it completed).
__global__ void __launch_bounds__(kReduceThreads) decode_reduce(const BlockwiseDecodeParams p, const int splits) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  const int64_t total = p.M * p.N;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * kReduceThreads + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * kReduceThreads) {
    float v = 0.f;
    for (int s = 0; s < splits; ++s) v += p.workspace[s * total + e];
    const int64_t m = e / p.N, n = e - m * p.N;
    static_cast<__nv_bfloat16*>(p.out)[m * p.ldd + n] = __float2bfloat16_rn(v);
  }
}

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

// A uint8 map over rows x K (row stride ld bytes; K for one row), boxes of 128 bytes x box_rows.
bool encode(CUtensorMap* map, const uint8_t* base, int64_t K, int64_t rows, int64_t ld, int box_rows) {
  return mslk::cuda::encode_2d(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, base, K, rows, rows > 1 ? ld : K, kTileK, box_rows,
                               CU_TENSOR_MAP_SWIZZLE_128B);
}

template <int MT>
cudaError_t launch(const BlockwiseDecodeParams& p, int splits, int kbps, cudaStream_t s) {
  CUtensorMap wmap, xmap;
  if (!encode(&wmap, p.b, p.K, p.N, p.ldb, kRows) || !encode(&xmap, p.a, p.K, p.M, p.lda, 8 * MT))
    return cudaErrorNotSupported;
  int dev = 0;
  mslk::cuda::DeviceAttrs attrs;  // read once per device
  cudaError_t e = mslk::cuda::current_device_attrs(&dev, &attrs);
  if (e != cudaSuccess) return e;
  static mslk::cuda::SmemLimit limit;  // one per instantiation
  if ((e = limit.ensure(decode_kernel<MT>, dev, Layout<MT>::kBytes)) != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>(cdiv(p.N, kRows)), static_cast<unsigned>(splits));
  decode_kernel<MT><<<grid, kThreads, Layout<MT>::kBytes, s>>>(wmap, xmap, p, kbps);
  if ((e = cudaGetLastError()) != cudaSuccess || splits == 1) return e;
  const int64_t blocks = cdiv(p.M * p.N, kReduceThreads);
  const dim3 grid_r(static_cast<unsigned>(blocks < 8 * attrs.sms ? blocks : 8 * attrs.sms));
  return mslk::cuda::launch_dependent(decode_reduce, grid_r, dim3(kReduceThreads), s, true, p, splits);
}

}  // namespace

bool fp8_blockwise_decode_applies(const BlockwiseDecodeParams& p) {
  return p.M >= 1 && p.M <= kBlockwiseDecodeMaxM && p.N >= 1 && p.N <= INT_MAX && p.K >= 16 && p.K <= INT_MAX &&
         p.K % 16 == 0 && (p.M == 1 || p.lda % 16 == 0) && (p.N == 1 || p.ldb % 16 == 0) && aligned16(p.a) &&
         aligned16(p.b) && cdiv(p.N, kRows) <= INT_MAX;
}

int fp8_blockwise_decode_splits(int64_t M, int64_t N, int64_t K, int sms, int forced) {
  (void)M;
  const int64_t kb = cdiv(K, kTileK), blocks = cdiv(N, kRows);
  int64_t s = forced > 0 ? forced : static_cast<int64_t>(kCtasPerSm) * (sms > 0 ? sms : 1) / blocks;
  s = s < kb ? s : kb;
  s = s > 1 ? s : 1;
  const int64_t least = cdiv(kb, kMaxKbPerSplit);  // the scale table holds kMaxKbPerSplit K blocks
  s = s > least ? s : least;
  s = s < 65535 ? s : 65535;
  return static_cast<int>(cdiv(kb, cdiv(kb, s)));  // no empty split
}

cudaError_t fp8_blockwise_decode(const BlockwiseDecodeParams& p, int splits, cudaStream_t stream) {
  if (!fp8_blockwise_decode_applies(p) || splits < 1 || splits > 65535) return cudaErrorNotSupported;
  const int64_t kb = cdiv(p.K, kTileK), kbps = cdiv(kb, splits);
  if (kbps > kMaxKbPerSplit) return cudaErrorNotSupported;
  splits = static_cast<int>(cdiv(kb, kbps));  // <= the request: the workspace suffices
  if (splits > 1 && p.workspace == nullptr) return cudaErrorInvalidValue;
  return p.M <= 8 ? launch<1>(p, splits, static_cast<int>(kbps), stream)
                  : launch<2>(p, splits, static_cast<int>(kbps), stream);
}

}  // namespace mslk::gemm
