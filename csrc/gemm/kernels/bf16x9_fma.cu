// The few-row bf16x9 GEMM (bf16x9.h: Bf16x9FusedParams; `splits` unused): out = A @ B^T by float32
// FMAs on the CUDA cores. With a few rows of A the call is a read of B, 4 bytes an element on every
// path (torch.mm's included), and the fused kernel's nine 64-row wgmma products a 16-K step were the
// bound instead (M = 1 at 0.6x FP32 torch.mm on the H100). Here each element of B costs M FMAs,
// rounded once each, which is nearer the exact sum than the nine BF16 products.
//
// Layout (one row of MSLK_BF16X9_FMA_CONFIGS a launch; kernels/bf16x9_configs.h):
//   - a warp streams R x (32 / LK) rows of B: LK lanes read a row's consecutive 16-byte chunks, so
//     one load instruction covers 32 / LK rows x 16 LK bytes; each lane keeps P steps of its loads
//     in flight in registers;
//   - the CTA's 4 warps share A's rows [m0, m0 + MT) through shared memory, chunk_k<MT>() K a chunk
//     in two buffers (cp.async), so every lane reads its A floats there (LK distinct addresses a load);
//   - sums (DOT): per lane a float32 partial per chunk added into its total at the chunk's end, or
//     each step's four products as one fma chain added into the total (no partials' registers);
//     either way short sums reach the total, so positive data keeps its error near the random-walk
//     size; then the LK lanes of a row add their totals by shuffles in a fixed order: deterministic;
//   - rows of B past N read row N - 1 and rows of A past M read zeros; neither is stored.
// More rows than MT run as passes, the CTAs of one B block's passes next to each other in launch
// order: they run together and the later ones find B in L2 (H100: M = 32 on row 10 in two passes
// 185 us against 108 for M = 16; passes launched a wave apart read B twice, 186 against 98 for row 5).
#include <cuda_runtime.h>

#include <climits>

#include "common/sm90_ptx.cuh"
#include "gemm/kernels/bf16x9.h"
#include "gemm/kernels/bf16x9_configs.h"

namespace mslk::gemm {
namespace {

using namespace mslk::ptx;

constexpr int kWarps = 4, kThreads = 32 * kWarps;
// K floats of A a shared-memory buffer holds per row: 256, or 16 KB a buffer from 32 rows up.
template <int MT>
constexpr int chunk_k() {
  return MT <= 16 ? 256 : 4096 / MT;
}

template <int MT>
constexpr int smem_bytes() {
  return 2 * MT * chunk_k<MT>() * static_cast<int>(sizeof(float));
}

__device__ __forceinline__ float4 ld_stream(const float* p) { return __ldcs(reinterpret_cast<const float4*>(p)); }

// DOT: 0 sums a chunk's products per lane into a partial added to the total at the chunk's end; 4
// adds each step's four products (one fma chain) to the total, without the partials' registers.
template <int MT, int R, int LK, int P, int DOT>
__global__ void __launch_bounds__(kThreads) fma_kernel(const Bf16x9FusedParams p) {
  constexpr int kChunk = chunk_k<MT>();
  constexpr int kRowsLoad = 32 / LK;          // rows one load instruction covers
  constexpr int kRowsWarp = R * kRowsLoad;    // rows a warp streams
  constexpr int kStep = 4 * LK;               // K floats a step (one float4 a lane)
  constexpr int kStepsChunk = kChunk / kStep;
  static_assert(32 % LK == 0 && kChunk % kStep == 0 && kStepsChunk % P == 0,
                "a chunk must hold whole steps and whole rings of the P steps in flight");
  static_assert(DOT == 0 || DOT == 4, "DOT: 0 (chunk partials) or 4 (one step's products)");
  extern __shared__ __align__(16) float a_smem[];  // [2][MT][kChunk]

  // CTA b: B rows block b / passes, A rows pass b % passes (see the file comment).
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, kl = lane % LK;
  const int64_t passes = (p.M + MT - 1) / MT, block = blockIdx.x / passes;
  const int64_t n_first = (block * kWarps + warp) * kRowsWarp + lane / LK;
  const int64_t m0 = static_cast<int64_t>(blockIdx.x % passes) * MT;
  const int64_t K = p.K, steps = (K + kStep - 1) / kStep, chunks = (K + kChunk - 1) / kChunk;

  const float* brow[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t n = n_first + r * kRowsLoad;
    brow[r] = p.b + (n < p.N ? n : p.N - 1) * p.ldb + 4 * kl;
  }

  // A chunk c into buffer c & 1: MT x kChunk floats as 16-byte copies, zeros past K and past M.
  auto stage_a = [&](int64_t c) {
    float* dst = a_smem + (c & 1) * MT * kChunk;
    for (int i = threadIdx.x; i < MT * kChunk / 4; i += kThreads) {
      const int m = i / (kChunk / 4), j = 4 * (i % (kChunk / 4));
      const int64_t row = m0 + m, k = c * kChunk + j;
      const bool ok = row < p.M && k < K;
      cp_async<16>(dst + m * kChunk + j, ok ? p.a + row * p.lda + k : p.a, ok ? 16 : 0);
    }
    cp_async_commit();
  };

  // B's step t of slot r, zeros past K (K is a multiple of 4: a chunk is in or out whole).
  auto load_b = [&](int64_t t, float4 (&dst)[R]) {
    const bool ok = t * kStep + 4 * kl < K;
#pragma unroll
    for (int r = 0; r < R; ++r) dst[r] = ok ? ld_stream(brow[r] + t * kStep) : make_float4(0.f, 0.f, 0.f, 0.f);
  };

  float4 ring[P][R];
#pragma unroll
  for (int s = 0; s < P; ++s) load_b(s, ring[s]);
  stage_a(0);

  float total[R][MT], part[R][DOT == 0 ? MT : 1];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < MT; ++m) total[r][m] = 0.f;

  for (int64_t c = 0; c < chunks; ++c) {
    if (c + 1 < chunks) {
      stage_a(c + 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const float* as = a_smem + (c & 1) * MT * kChunk + 4 * kl;
    if constexpr (DOT == 0) {
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int m = 0; m < MT; ++m) part[r][m] = 0.f;
    }
#pragma unroll
    for (int s = 0; s < kStepsChunk; ++s) {
      float4 b[R];
#pragma unroll
      for (int r = 0; r < R; ++r) b[r] = ring[s % P][r];
      const int64_t next = c * kStepsChunk + s + P;
      if (next < steps) load_b(next, ring[s % P]);
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        const float4 a = *reinterpret_cast<const float4*>(as + m * kChunk + s * kStep);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          if constexpr (DOT == 0) {
            float acc = part[r][m];
            acc = fmaf(b[r].x, a.x, acc);
            acc = fmaf(b[r].y, a.y, acc);
            acc = fmaf(b[r].z, a.z, acc);
            part[r][m] = fmaf(b[r].w, a.w, acc);
          } else {
            float acc = b[r].x * a.x;
            acc = fmaf(b[r].y, a.y, acc);
            acc = fmaf(b[r].z, a.z, acc);
            total[r][m] += fmaf(b[r].w, a.w, acc);
          }
        }
      }
    }
    if constexpr (DOT == 0) {
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int m = 0; m < MT; ++m) total[r][m] += part[r][m];
    }
    __syncthreads();  // buffer c & 1 is refilled with chunk c + 2 next iteration
  }

  // The LK lanes of a row add their totals (every lane ends with the row's sums), then lane kl
  // stores the values whose index is kl modulo LK.
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int o = LK / 2; o > 0; o /= 2) total[r][m] += __shfl_xor_sync(0xffffffffu, total[r][m], o);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t n = n_first + r * kRowsLoad;
#pragma unroll
    for (int m = 0; m < MT; ++m)
      if ((r * MT + m) % LK == kl && n < p.N && m0 + m < p.M) p.out[(m0 + m) * p.ldd + n] = total[r][m];
  }
}

struct FmaConfig {
  int max_m, mt, rows_cta;
  const void* kernel;
  int smem;
};

#define MSLK_BF16X9_FMA_ENTRY(id, max_m, mt, r, lk, pf, dot)                                                     \
  FmaConfig{max_m, mt, kWarps * (r) * (32 / (lk)), reinterpret_cast<const void*>(&fma_kernel<mt, r, lk, pf, dot>), \
            smem_bytes<mt>()},
const FmaConfig kFmaConfigs[] = {MSLK_BF16X9_FMA_CONFIGS(MSLK_BF16X9_FMA_ENTRY)};
#undef MSLK_BF16X9_FMA_ENTRY
#define MSLK_BF16X9_FMA_SMEM(id, max_m, mt, ...) static_assert(smem_bytes<mt>() <= 48 * 1024, "over the default smem");
MSLK_BF16X9_FMA_CONFIGS(MSLK_BF16X9_FMA_SMEM)
#undef MSLK_BF16X9_FMA_SMEM

// The forced row, else the first whose max_m takes M, else the one with the largest max_m (passes).
const FmaConfig& pick(int64_t M, int forced) {
  if (forced >= 0 && forced < kNumBf16x9FmaConfigs) return kFmaConfigs[forced];
  const FmaConfig* widest = &kFmaConfigs[0];
  for (const FmaConfig& c : kFmaConfigs) {
    if (M <= c.max_m) return c;
    if (c.max_m > widest->max_m) widest = &c;
  }
  return *widest;
}

// CTAs of the launch: B row blocks x passes.
int64_t fma_ctas(const Bf16x9FusedParams& p, const FmaConfig& c) {
  return (p.N + c.rows_cta - 1) / c.rows_cta * ((p.M + c.mt - 1) / c.mt);
}

}  // namespace

bool bf16x9_fma_applies(const Bf16x9FusedParams& p, int row) {
  auto aligned16 = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  const FmaConfig& c = pick(p.M, row);
  return p.M > 0 && p.N > 0 && p.K > 0 && p.K % 4 == 0 && p.lda % 4 == 0 && p.ldb % 4 == 0 && aligned16(p.a) &&
         aligned16(p.b) && fma_ctas(p, c) <= INT_MAX &&
         (p.M == 1 || p.ldd >= p.N);
}

cudaError_t bf16x9_fma_run(const Bf16x9FusedParams& p, int row, cudaStream_t stream) {
  if (!bf16x9_fma_applies(p, row)) return cudaErrorNotSupported;
  const FmaConfig& c = pick(p.M, row);
  const dim3 grid(static_cast<unsigned>(fma_ctas(p, c)));
  void* args[] = {const_cast<Bf16x9FusedParams*>(&p)};
  if (const cudaError_t e = cudaLaunchKernel(c.kernel, grid, dim3(kThreads), args, c.smem, stream); e != cudaSuccess)
    return e;
  return cudaGetLastError();
}

}  // namespace mslk::gemm
