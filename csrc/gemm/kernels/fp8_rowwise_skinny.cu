// Decode-shape rowwise FP8 GEMM (M <= 64 tokens): memory-bound on the weight read, so each
// weight byte is loaded once, 16 bytes at a time, straight into registers (L1 no-allocate,
// L2 evict-first), and multiplied on the tensor cores by mma.sync m16n8k32 e4m3 (sm_89+).
// Swap-AB: the MMA's A (16 x 32, "row") is 16 weight rows n by 32 k, its B (32 x 8, "col") is
// 32 k by 8 tokens m, so C[n][m] = sum_k W[n][k] * X[m][k]. M <= 8 needs one n8 tile, M <= 64
// eight. The mirror on the CPU is tools/gemm/emulate_fp8_skinny.py (run by test/gemm).
//
// Fragments, and how a lane's 16 bytes of a row feed two MMAs: mma_e4m3.cuh.
//
// Block: 4 warps, 16 weight rows each (64 rows per CTA), all warps at the same k so the
// activation chunk staged in shared memory serves all four. A chunk is 4 steps (256 k) for
// M <= 16, 2 steps for more tokens (registers): per thread 2 rows x steps 16-byte weight loads,
// issued one chunk ahead (128 / 64 B in flight per thread, 64 / 32 KB per SM at the 4 CTAs per
// SM that 128 registers allow), and the activations [8*MT tokens][chunk] by cp.async,
// double-buffered. Loads past the split's end (the K tail) and rows past N / tokens past M
// read nothing and give zeros, on both operands.
//
// Accumulation is float32: on sm_90 ptxas lowers each m16n8k32 e4m3 MMA to exact e4m3 -> f16
// conversions, two HMMA.16816.F32 and float32 adds into C (see the SASS). We keep that shape in
// the source (each 64-k step's two MMAs start from zero, then FADD into the accumulators), so
// no long run of products sits in the tensor core's accumulator on any target. Hence
// use_fast_accum (the wgmma promotion question) does not change the result: both flags run here.
//
// K splits (grid.y): splits == 1 applies the epilogue directly; otherwise each split writes
// float32 partials [split][L][M][N] to the workspace and a second kernel sums them in split
// order (deterministic) and applies the epilogue.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <cstdint>

#include "common/cuda_utils.cuh"
#include "common/device_attrs.h"
#include "gemm/kernels/fp8_rowwise.h"
#include "gemm/kernels/fp8_rowwise_buckets.h"
#include "gemm/kernels/fp8_rowwise_configs.h"
#include "gemm/kernels/mma_e4m3.cuh"

namespace mslk::gemm {
namespace {

using cuda::from_f32;

constexpr int kWarps = 4, kThreads = 32 * kWarps;
constexpr int kRowsPerCta = 16 * kWarps;  // weight rows n per CTA
constexpr int kStep = 64;                 // k per step: 4 lanes x 16 bytes
constexpr int kChunk = 256;               // k granularity of the splits: a multiple of every tile's chunk
constexpr int kMaxM = 64;                 // 8 n8 tiles of tokens
constexpr int kReduceThreads = 256;

// Per token tile: 64-k steps per chunk (a chunk is one activation stage and one weight register
// buffer: 32 * steps bytes per thread in flight). Four CTAs per SM must fit (128 registers);
// more tokens need more accumulator and fragment registers, hence fewer steps (ptxas -v, sm_90a:
// MT 1, 8 spill nothing; MT 2 reloads two 4-byte values per chunk, MT 4 spills outside the loop).
template <int MT>
struct Tile {
  static constexpr int kSteps = MT >= 4 ? 2 : 4;
  static constexpr int kMinCtas = 4;
  static_assert(kChunk % (kStep * kSteps) == 0, "splits are whole chunks");
};

static_assert(kNumFp8SkinnySplits > 0 && kFp8SkinnySplits[kNumFp8SkinnySplits - 1].max_m >= kMaxM &&
                  kFp8SkinnySplits[kNumFp8SkinnySplits - 1].max_weight_mib < 0,
              "fp8_rowwise_buckets.h: the last MSLK_FP8_SKINNY_SPLITS row must cover M <= 64 and any size");
static_assert(MSLK_FP8_SKINNY_AUTO_MAX_M <= kMaxM, "the skinny kernel takes M <= 64");
constexpr bool splits_fit_one_wave() {
  for (const auto& r : kFp8SkinnySplits)
    if (r.ctas_per_sm < 1 || r.ctas_per_sm > 4 || r.min_k_per_split < kChunk) return false;
  return true;
}
static_assert(splits_fit_one_wave(), "MSLK_FP8_SKINNY_SPLITS: ctas_per_sm in 1..4 (what fits), min_k >= 256");

__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t pol;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  return pol;
}

// 16 bytes read once: no L1 allocation, first out of L2, 256-byte L2 prefetch.
__device__ __forceinline__ uint4 ld_stream(const uint8_t* ptr, uint64_t pol) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(ptr), "l"(pol));
  return v;
}

// 16 bytes to shared memory; src_bytes == 0 writes zeros and reads nothing.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, int src_bytes) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(gmem), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// The contract's epilogue for element (l, m, n) of accumulator acc.
template <typename OutT>
__device__ __forceinline__ void store_out(const RowwiseGemmParams& p, int64_t l, int64_t m, int64_t n, float acc) {
  const float xs = p.x_scale[l * p.batch_xs + m];
  const float ws = p.w_scale[l * p.batch_ws + n];
  const float bias = p.bias ? p.bias[l * p.batch_bias + n] : 0.f;
  static_cast<OutT*>(p.out)[l * p.batch_d + m * p.ldd + n] = from_f32<OutT>(fmaf(xs, ws * acc, bias));
}

// grid (ceil(N / 64), splits, min(L, 65535)); split s covers k [s * k_per_split, +k_per_split).
template <int MT, typename OutT>
__global__ void __launch_bounds__(kThreads, Tile<MT>::kMinCtas)
    skinny_kernel(const RowwiseGemmParams p, const int64_t k_per_split) {
  constexpr int kSteps = Tile<MT>::kSteps, kChunkMT = kStep * kSteps;
  constexpr int R = 8 * MT;                  // token rows staged (M rounded up to n8 tiles)
  constexpr int kStage = kChunkMT * R;        // bytes of one activation stage
  constexpr int kPieces = kStage / 16;       // 16-byte cp.async pieces per stage
  static_assert(kPieces % kThreads == 0, "whole cp.async rounds");
  // Stage layout [step j][token r][64 k]: piece i = (j * R + r) * 4 + q lands at byte 16 * i, and
  // the B fragment load of lane (g, t), n8 tile nt, step j reads j*R*64 + nt*512 + 16*lane:
  // 32 lanes, 512 contiguous bytes, no bank conflicts.
  __shared__ __align__(16) uint8_t xs[2][kStage];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int64_t n_lo = static_cast<int64_t>(blockIdx.x) * kRowsPerCta + warp * 16 + g, n_hi = n_lo + 8;
  const bool ok_lo = n_lo < p.N, ok_hi = n_hi < p.N;
  const int64_t k_begin = static_cast<int64_t>(blockIdx.y) * k_per_split;
  const int64_t k_end = k_begin + k_per_split < p.K ? k_begin + k_per_split : p.K;  // multiple of 16
  const int nchunks = k_end > k_begin ? static_cast<int>((k_end - k_begin + kChunkMT - 1) / kChunkMT) : 0;
  const uint64_t pol = evict_first_policy();

  for (int64_t l = blockIdx.z; l < p.L; l += gridDim.z) {
    const uint8_t* A = p.a + l * p.batch_a;
    const uint8_t* B = p.b + l * p.batch_b;
    // This lane's 16 bytes of each step: row n_lo / n_hi, k + 16t (rows past N are never read).
    const uint8_t* w_lo = B + (ok_lo ? n_lo : 0) * p.ldb + 16 * t;
    const uint8_t* w_hi = B + (ok_hi ? n_hi : 0) * p.ldb + 16 * t;

    auto load_w = [&](uint4 (&w)[2 * kSteps], int64_t k0) {
#pragma unroll
      for (int j = 0; j < kSteps; ++j) {
        const int64_t k = k0 + j * kStep;
        const bool in = k + 16 * t < k_end;  // K % 16 == 0: a vector is wholly in or out
        w[j] = in && ok_lo ? ld_stream(w_lo + k, pol) : make_uint4(0, 0, 0, 0);
        w[kSteps + j] = in && ok_hi ? ld_stream(w_hi + k, pol) : make_uint4(0, 0, 0, 0);
      }
    };
    auto stage_x = [&](uint8_t* dst, int64_t k0) {
#pragma unroll
      for (int i0 = 0; i0 < kPieces; i0 += kThreads) {
        const int i = i0 + threadIdx.x;
        const int j = i / (4 * R), r = (i / 4) % R, q = i % 4;
        const int64_t k = k0 + j * kStep + 16 * q;
        const bool ok = r < p.M && k < k_end;
        cp_async16(dst + 16 * i, ok ? A + r * p.lda + k : A, ok ? 16 : 0);
      }
      cp_async_commit();
    };

    float acc[MT][4];
#pragma unroll
    for (int nt = 0; nt < MT; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
    uint4 cur[2 * kSteps], nxt[2 * kSteps];
    if (nchunks > 0) {
      stage_x(xs[0], k_begin);
      load_w(cur, k_begin);
    }
    for (int c = 0; c < nchunks; ++c) {
      const bool more = c + 1 < nchunks;
      if (more) {  // next chunk in flight while this one is multiplied
        stage_x(xs[(c + 1) & 1], k_begin + static_cast<int64_t>(c + 1) * kChunkMT);
        load_w(nxt, k_begin + static_cast<int64_t>(c + 1) * kChunkMT);
        cp_async_wait<1>();
      } else {
        cp_async_wait<0>();
      }
      __syncthreads();
      const uint8_t* x = xs[c & 1];
#pragma unroll
      for (int j = 0; j < kSteps; ++j) {
        const uint4 lo = cur[j], hi = cur[kSteps + j];
#pragma unroll
        for (int nt = 0; nt < MT; ++nt) {
          const uint4 b = *reinterpret_cast<const uint4*>(x + j * R * 64 + nt * 512 + 16 * lane);
          float d[4] = {0.f, 0.f, 0.f, 0.f};
          mma_e4m3_x2(d, lo, hi, b);
#pragma unroll
          for (int i = 0; i < 4; ++i) acc[nt][i] += d[i];
        }
      }
      __syncthreads();  // stage c & 1 is refilled by the next iteration's stage_x
      if (more) {
#pragma unroll
        for (int i = 0; i < 2 * kSteps; ++i) cur[i] = nxt[i];
      }
    }

    // C fragment: acc[nt][i] is (n = n_lo + 8 * (i / 2), m = 8 * nt + 2t + i % 2).
    float* part = gridDim.y > 1 ? p.workspace + (static_cast<int64_t>(blockIdx.y) * p.L + l) * p.M * p.N : nullptr;
#pragma unroll
    for (int nt = 0; nt < MT; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t m = 8 * nt + 2 * t + (i & 1), n = i < 2 ? n_lo : n_hi;
        if (m >= p.M || n >= p.N) continue;
        if (part)
          part[m * p.N + n] = acc[nt][i];
        else
          store_out<OutT>(p, l, m, n, acc[nt][i]);
      }
    }
  }
}

// out = epilogue(sum over s in order of workspace[s][l][m][n]), one thread per element.
// Launched as a programmatic dependent of skinny_kernel (sm_90): its launch overlaps the main
// kernel's tail, and griddepcontrol.wait returns once that grid has completed with its writes
// visible (a no-op when launched without the attribute).
template <typename OutT>
__global__ void __launch_bounds__(kReduceThreads) skinny_reduce(const RowwiseGemmParams p, const int splits) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  const int64_t mn = p.M * p.N, total = p.L * mn;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * kReduceThreads + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * kReduceThreads) {
    float v = 0.f;
    for (int s = 0; s < splits; ++s) v += p.workspace[s * total + e];
    const int64_t l = e / mn, r = e - l * mn, m = r / p.N, n = r - m * p.N;
    store_out<OutT>(p, l, m, n, v);
  }
}

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

int64_t div_up(int64_t a, int64_t b) { return (a + b - 1) / b; }

// k per split for a request of `splits`: whole chunks, so only the last split has a K tail.
int64_t k_per_split(int64_t K, int splits) { return div_up(div_up(K, splits), kChunk) * kChunk; }

template <int MT, typename OutT>
cudaError_t launch(const RowwiseGemmParams& p, int splits, int64_t kps, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(div_up(p.N, kRowsPerCta)), static_cast<unsigned>(splits),
                  static_cast<unsigned>(p.L < 65535 ? p.L : 65535));
  skinny_kernel<MT, OutT><<<grid, kThreads, 0, s>>>(p, kps);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess || splits == 1) return e;
  int dev = 0;
  mslk::cuda::DeviceAttrs attrs;  // read once per device
  if ((e = mslk::cuda::current_device_attrs(&dev, &attrs)) != cudaSuccess) return e;
  const int sms = attrs.sms, major = attrs.cc_major;
  const int64_t blocks = div_up(p.L * p.M * p.N, kReduceThreads);
  const dim3 grid_r(static_cast<unsigned>(blocks < 8 * sms ? blocks : 8 * sms));
  return mslk::cuda::launch_dependent(skinny_reduce<OutT>, grid_r, dim3(kReduceThreads), s, major >= 9, p, splits);
}

template <typename OutT>
cudaError_t launch_m(const RowwiseGemmParams& p, int splits, int64_t kps, cudaStream_t s) {
  if (p.M <= 8) return launch<1, OutT>(p, splits, kps, s);
  if (p.M <= 16) return launch<2, OutT>(p, splits, kps, s);
  if (p.M <= 32) return launch<4, OutT>(p, splits, kps, s);
  return launch<8, OutT>(p, splits, kps, s);
}

}  // namespace

bool fp8_rowwise_skinny_applies(const RowwiseGemmParams& p) {
  return p.M >= 1 && p.M <= kMaxM && p.N >= 1 && p.K >= 1 && p.L >= 1 && p.K % 16 == 0 && p.lda % 16 == 0 &&
         p.ldb % 16 == 0 && p.batch_a % 16 == 0 && p.batch_b % 16 == 0 && aligned16(p.a) && aligned16(p.b) &&
         div_up(p.N, kRowsPerCta) <= INT_MAX;
}

int fp8_rowwise_skinny_splits(const RowwiseGemmParams& p, int sms) {
  const double mib = static_cast<double>(p.N) * static_cast<double>(p.K) / (1 << 20);
  int row = kNumFp8SkinnySplits - 1;
  for (int i = 0; i < kNumFp8SkinnySplits; ++i) {
    const auto& r = kFp8SkinnySplits[i];
    if ((r.max_m < 0 || p.M <= r.max_m) && (r.max_weight_mib < 0 || mib <= r.max_weight_mib)) {
      row = i;
      break;
    }
  }
  const auto& r = kFp8SkinnySplits[row];
  const int64_t ctas = p.L * div_up(p.N, kRowsPerCta);
  int64_t want = static_cast<int64_t>(r.ctas_per_sm) * (sms > 0 ? sms : 1) / ctas;
  const int64_t most = p.K / r.min_k_per_split;
  want = want < most ? want : most;
  want = want < 64 ? want : 64;
  if (want <= 1) return 1;
  return static_cast<int>(div_up(p.K, k_per_split(p.K, static_cast<int>(want))));  // no empty split
}

cudaError_t fp8_rowwise_skinny(const RowwiseGemmParams& p, int splits, cudaStream_t s) {
  if (p.M <= 0 || p.N <= 0 || p.L <= 0) return cudaSuccess;
  if (!fp8_rowwise_skinny_applies(p) || splits < 1 || splits > 65535) return cudaErrorNotSupported;
  const int64_t kps = k_per_split(p.K, splits);
  splits = static_cast<int>(div_up(p.K, kps));  // <= the request: the workspace suffices
  if (splits > 1 && !p.workspace) return cudaErrorInvalidValue;
  switch (p.out_dtype) {
    case OutDtype::kFloat16:
      return launch_m<__half>(p, splits, kps, s);
    case OutDtype::kFloat32:
      return launch_m<float>(p, splits, kps, s);
    default:
      return launch_m<__nv_bfloat16>(p, splits, kps, s);
  }
}

}  // namespace mslk::gemm
