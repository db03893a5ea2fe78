// The TMA-streaming INT4 decode kernel (int4_gemm.h: M <= 16, K and the group multiples of 128,
// 16-byte aligned rows of the weight, the activations and the scales). The weight read is the
// cost, so the weight comes in as whole 128-byte row pieces through a TMA ring that keeps the
// H200's memory busy, while warps that only compute turn nibbles into MMA operands:
// - A CTA owns 128 weight rows and a K range of 256-k stages. The last warp is the producer: one
//   lane issues, per stage, a box of 128 rows x 128 bytes of the packed weight, the stage's
//   activations (8 * MG rows: four 64-wide boxes of bf16 or two 128-wide of E4M3; rows past M
//   read as zeros) and the two scale rows (and zero rows) of its groups, into a ring of kStages
//   stages; the weight and the activations 128-byte swizzled, so every fragment load below hits
//   distinct banks.
// - The consumer warps take 32 rows each (two MMA blocks of 16; 16 rows at M <= 8, see Shape).
//   Per 128-k tile, lane (r, c) = (lane / 4, lane % 4) reads 16 bytes (weights 32c .. 32c + 31)
//   of rows r, r + 8 of each block and the activations of the same weights, and runs the MMAs of
//   int4_mma.cuh: nibble pairs {i, i + 4} as exact bf16 (f16 for E4M3 activations) pairs,
//   m16n8k16 with float32 accumulation, then the group's scale and zero once a tile in float32.
// - Every consumer lane releases a stage (racecheck follows each thread's own arrive) after a
//   proxy fence: its reads are generic-proxy, the TMA write that reuses the stage async-proxy.
// - Each CTA starts its walk at its own stage (a rotation by block index): in lockstep every CTA
//   would read the same window of its rows, every row one power-of-two stride from the next.
// K splits (grid.y) write float32 partials that int4_split_reduce adds in split order.
// Design notes and measurements: docs/design/int4_gemm.md.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <climits>

#include "common/device_attrs.h"
#include "common/sm90_ptx.cuh"
#include "common/tensor_map.h"
#include "gemm/kernels/int4_gemm.h"
#include "gemm/kernels/int4_mma.cuh"
#include "gemm/kernels/int4_nibble.cuh"

namespace mslk::gemm {
namespace {

using int4::epilogue;

constexpr int kRows = kInt4TmaRowsPerCta;  // weight rows a CTA
constexpr int kStageK = 256;               // k a stage: 128 bytes of each packed row
constexpr int kWBytes = kRows * kStageK / 2;  // 16 KB

// By activation groups MG: MMA row blocks a consumer warp (kRp blocks of 16 rows, 128 / (16 kRp)
// consumer warps), ring stages and CTAs a SM. 32 rows a warp share the activation fragments and
// the ones-MMA: 8 warps of 16 rows measured 8-19% slower at M = 1 (H200, 8192 x 8192 and
// 28672 x 8192), the nibble work being the same and the activation work twice.
template <int MG>
struct Shape {
  static constexpr int kRp = 2;
  static constexpr int kConsumerWarps = kRows / (16 * kRp);
  static constexpr int kThreads = 32 * (kConsumerWarps + 1);
  static constexpr int kStages = 4;
  static constexpr int kCtasPerSm = 2;
};

// Scale element: float, bf16, or the E4M3 group scale (copy 0 of [G, 8, N]).
template <class S>
constexpr int scale_bytes() {
  return int(sizeof(S));
}

template <int MG, bool kFp8, class S>
struct Layout {
  static constexpr int kXRows = 8 * MG;
  static constexpr int kXBoxK = kFp8 ? 128 : 64;                  // one 128-byte swizzle row
  static constexpr int kXBoxes = kStageK / kXBoxK;                 // 2 or 4
  static constexpr int kXBox = kXRows * 128;                       // bytes of one box (1 or 2 KB)
  static constexpr int kSRow = kRows * scale_bytes<S>();           // bytes of one group's scales
  static constexpr int kX = kWBytes;                               // offsets inside a stage
  static constexpr int kS = kX + kXBoxes * kXBox;
  static constexpr int kZ = kS + 2 * kSRow;
  static constexpr int kStages = Shape<MG>::kStages;
  static constexpr int kStage = (kZ + 2 * kSRow + 1023) / 1024 * 1024;
  static constexpr int kBars = kStages * kStage;
  static constexpr size_t kBytes = 1024 + kBars + 2 * kStages * 8;  // + alignment slack
};
static_assert(Layout<2, false, float>::kBytes * Shape<2>::kCtasPerSm + 2048 <= 228 * 1024, "CTAs a SM");
static_assert(Layout<1, false, float>::kBytes * Shape<1>::kCtasPerSm + 3072 <= 228 * 1024, "CTAs a SM");

template <class S>
__device__ __forceinline__ float scale_at(const unsigned char* base, int i) {
  if constexpr (sizeof(S) == 4) {
    return reinterpret_cast<const float*>(base)[i];
  } else if constexpr (sizeof(S) == 2) {
    return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(base)[i]);
  } else {
    __nv_fp8_e4m3 v;
    v.__x = base[i];
    return float(v);
  }
}

struct Maps {
  CUtensorMap w, x, s, z;
};

// grid (ceil(N / 128), splits); split y covers stages [y * sps, min(+sps, ceil(K / 256))). The
// group is 128 k or an even number of 128-k tiles (int4_tma_applies), so a stage's second tile
// uses the first one's group row or the next: no division in the consumers.
template <int MG, bool kFp8, class S>
__global__ void __launch_bounds__(Shape<MG>::kThreads, Shape<MG>::kCtasPerSm)
    int4_tma_kernel(const __grid_constant__ Maps maps, const Int4GemmParams p, const int sps, float* ws) {
  using L = Layout<MG, kFp8, S>;
  constexpr int kStages = L::kStages, kRp = Shape<MG>::kRp, kConsumerWarps = Shape<MG>::kConsumerWarps;
  constexpr bool kF16 = kFp8;
  constexpr bool kF8Scale = sizeof(S) == 1;
  extern __shared__ uint8_t smem_raw[];
  // 1024-byte aligned (the swizzle atom) by an offset on the shared array itself: a pointer made
  // through an integer loses the shared state space, and every read below became a generic load.
  uint8_t* smem = smem_raw + ((1024u - ptx::smem_u32(smem_raw) % 1024u) % 1024u);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + L::kBars);
  uint64_t* empty = full + kStages;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int nst_total = int((p.K + kStageK - 1) / kStageK), st0 = int(blockIdx.y) * sps;
  const int nst = min(sps, nst_total - st0);  // >= 1 by the plan
  const int rot = int((blockIdx.x * 5u + blockIdx.y * 3u) % unsigned(nst));
  const int n0 = int(blockIdx.x) * kRows;
  const bool has_zero = p.zero != nullptr;
  const int gt = int(p.group / 128);  // 128-k tiles a group: 1 or even
  const int gi1 = gt == 1 ? 1 : 0;     // the second tile's row among the stage's two scale rows
  // the stage walked i-th
  auto stage_of = [&](int i) {
    const int k = i + rot;
    return st0 + (k >= nst ? k - nst : k);
  };

  if (threadIdx.x == 0) ptx::ring_init(full, empty, kStages, 32 * kConsumerWarps);
  __syncthreads();

  if (warp == kConsumerWarps) {  // producer
    if (lane == 0) {
      ptx::prefetch_tensormap(&maps.w);
      ptx::prefetch_tensormap(&maps.x);
      ptx::prefetch_tensormap(&maps.s);
      if (has_zero) ptx::prefetch_tensormap(&maps.z);
      const uint64_t w_policy = ptx::createpolicy_evict_first();  // the weight is read once
      const uint32_t bytes = L::kS + (has_zero ? 4 : 2) * L::kSRow;
      for (int i = 0; i < nst; ++i) {
        const int slot = i % kStages;
        if (i >= kStages) ptx::mbar_wait(&empty[slot], ((i / kStages) - 1) & 1);
        ptx::mbar_arrive_expect_tx(&full[slot], bytes);
        const int st = stage_of(i);
        const int g = 2 * st / gt;
        uint8_t* d = smem + slot * L::kStage;
        ptx::tma_load_2d_hint(&maps.w, &full[slot], d, st * (kStageK / 2), n0, w_policy);
#pragma unroll
        for (int b = 0; b < L::kXBoxes; ++b)
          ptx::tma_load_2d(&maps.x, &full[slot], d + L::kX + b * L::kXBox, st * kStageK + b * L::kXBoxK, 0);
        if constexpr (kF8Scale) {
          ptx::tma_load_3d(&maps.s, &full[slot], d + L::kS, n0, 0, g);
        } else {
          ptx::tma_load_2d(&maps.s, &full[slot], d + L::kS, n0, g);
          if (has_zero) ptx::tma_load_2d(&maps.z, &full[slot], d + L::kZ, n0, g);
        }
      }
    }
    return;
  }

  const int r = lane >> 2, c = lane & 3;
  float acc[kRp][MG][4] = {};
  uint32_t magic;
  asm volatile("mov.b32 %0, %1;" : "=r"(magic) : "n"(int4::MmaType<kF16>::kMagic));
  // Rows row0 + 16 rp + 8 h of the CTA. Lane row r takes weight row perm(r) = 4 (r % 2) + r / 2
  // of its 8: a quarter-warp's two rows then differ by 4 in the swizzle's row bits, so their 16-byte
  // pieces of a 64-byte tile land in disjoint bank groups (with rows r, r + 1 they met 2-way).
  const int row0 = warp * 16 * kRp + 4 * (r & 1) + (r >> 1);

  for (int i = 0; i < nst; ++i) {
    const int slot = i % kStages;
    ptx::mbar_wait(&full[slot], (i / kStages) & 1);
    const uint8_t* st = smem + slot * L::kStage;
#pragma unroll
    for (int u = 0; u < 2; ++u) {  // the stage's two 128-k tiles
      uint4 wv[kRp][2];
#pragma unroll
      for (int rp = 0; rp < kRp; ++rp)
#pragma unroll
        for (int h = 0; h < 2; ++h) wv[rp][h] = *reinterpret_cast<const uint4*>(st + ptx::swizzle128(row0 + 16 * rp + 8 * h, 4 * u + c));
      float dq[kRp][MG][4] = {}, dx[MG][4] = {};
      // activations of weights 128u + 32c + 8j .. +7 of row 8 mg + r
      auto xfrag = [&](int j, int mg, uint32_t(&xb)[4]) {
        const int xr = 8 * mg + r;
        if constexpr (kFp8) {
          const uint8_t* xs = st + L::kX + u * L::kXBox + ptx::swizzle128(xr, 2 * c + j / 2) + 8 * (j % 2);
          int4::x_pairs(*reinterpret_cast<const uint2*>(xs), xb);
        } else {
          const uint8_t* xs = st + L::kX + (2 * u + c / 2) * L::kXBox + ptx::swizzle128(xr, 4 * (c % 2) + j);
          int4::x_pairs(*reinterpret_cast<const uint4*>(xs), xb);
        }
      };
      int4::tile_products<kF16>(wv, xfrag, magic, int4::kFold<kF16> || has_zero, dq, dx);
      // the tile's group row in the stage's two scale rows
      const int gi = u * gi1;
      const uint8_t* srow = st + L::kS + gi * L::kSRow;
      const uint8_t* zrow = st + L::kZ + gi * L::kSRow;
      float sc[kRp][2], zc[kRp][2];
#pragma unroll
      for (int rp = 0; rp < kRp; ++rp)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = row0 + 16 * rp + 8 * h;
          sc[rp][h] = scale_at<S>(srow, row);
          zc[rp][h] = has_zero ? scale_at<S>(zrow, row) : 0.f;
          if constexpr (int4::kFold<kF16>) zc[rp][h] = fmaf(-136.f, sc[rp][h], zc[rp][h]);
        }
      // D: [0], [1] row r, columns 2c, 2c + 1; [2], [3] row r + 8, the same columns
#pragma unroll
      for (int rp = 0; rp < kRp; ++rp)
#pragma unroll
        for (int mg = 0; mg < MG; ++mg)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[rp][mg][e] += fmaf(sc[rp][e / 2], dq[rp][mg][e], zc[rp][e / 2] * dx[mg][e]);
    }
    ptx::fence_proxy_async_smem();  // the reads above land before the TMA write that reuses the stage
    ptx::mbar_arrive(&empty[slot]);
  }

#pragma unroll
  for (int rp = 0; rp < kRp; ++rp)
#pragma unroll
    for (int mg = 0; mg < MG; ++mg)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t n = n0 + row0 + 16 * rp + 8 * (e / 2), m = 8 * mg + 2 * c + (e & 1);
        if (n >= p.N || m >= p.M) continue;
        if (ws != nullptr)
          ws[(int64_t(blockIdx.y) * p.M + m) * p.N + n] = acc[rp][mg][e];
        else
          static_cast<__nv_bfloat16*>(p.out)[m * p.ldd + n] = __float2bfloat16(epilogue(p, acc[rp][mg][e], m, n));
      }
}

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

using mslk::cuda::encode_2d;

// The E4M3 group scales [G, 8, N]: copy 0 of each group, box 128 x 1 x 2.
bool encode_f8_scale(CUtensorMap* map, const void* base, int64_t N, int64_t G) {
  const mslk::cuda::EncodeTiledFn fn = mslk::cuda::encode_tiled_fn();
  if (fn == nullptr) return false;
  const cuuint64_t dim[3] = {cuuint64_t(N), 8, cuuint64_t(G)};
  const cuuint64_t stride[2] = {cuuint64_t(N), cuuint64_t(8 * N)};
  const cuuint32_t box[3] = {cuuint32_t(kRows), 1, 2};
  const cuuint32_t elem_stride[3] = {1, 1, 1};
  return fn(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, const_cast<void*>(base), dim, stride, box, elem_stride,
            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <int MG, bool kFp8, class S>
cudaError_t launch(const Int4GemmParams& p, int splits, float* ws, cudaStream_t stream) {
  using L = Layout<MG, kFp8, S>;
  const int64_t G = p.K / p.group, nst = (p.K + kStageK - 1) / kStageK, sps = (nst + splits - 1) / splits;
  splits = int((nst + sps - 1) / sps);
  Maps maps;
  const CUtensorMapDataType sdt = sizeof(S) == 4 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const bool ok =
      encode_2d(&maps.w, CU_TENSOR_MAP_DATA_TYPE_UINT8, p.w, p.K / 2, p.N, p.N > 1 ? p.ldw : p.K / 2, 128, kRows,
                CU_TENSOR_MAP_SWIZZLE_128B) &&
      encode_2d(&maps.x, kFp8 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, p.x, p.K, p.M,
                (p.M > 1 ? p.ldx : p.K) * (kFp8 ? 1 : 2), L::kXBoxK, L::kXRows, CU_TENSOR_MAP_SWIZZLE_128B) &&
      (sizeof(S) == 1 ? encode_f8_scale(&maps.s, p.scale, p.N, G)
                      : encode_2d(&maps.s, sdt, p.scale, p.N, G, p.lds * int64_t(sizeof(S)), kRows, 2,
                                  CU_TENSOR_MAP_SWIZZLE_NONE)) &&
      (p.zero == nullptr || sizeof(S) == 1 ||
       encode_2d(&maps.z, sdt, p.zero, p.N, G, p.lds * int64_t(sizeof(S)), kRows, 2, CU_TENSOR_MAP_SWIZZLE_NONE));
  if (!ok) return cudaErrorNotSupported;
  if (p.zero == nullptr || sizeof(S) == 1) maps.z = maps.s;  // never loaded
  int dev = 0;
  mslk::cuda::DeviceAttrs attrs;
  cudaError_t e = mslk::cuda::current_device_attrs(&dev, &attrs);
  if (e != cudaSuccess) return e;
  auto kernel = int4_tma_kernel<MG, kFp8, S>;
  static mslk::cuda::SmemLimit limit;  // one per instantiation
  if ((e = limit.ensure(kernel, dev, L::kBytes)) != cudaSuccess) return e;
  const dim3 grid(unsigned((p.N + kRows - 1) / kRows), unsigned(splits));
  kernel<<<grid, Shape<MG>::kThreads, L::kBytes, stream>>>(maps, p, int(sps), splits > 1 ? ws : nullptr);
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  return splits > 1 ? int4_split_reduce(p, ws, splits, stream) : cudaSuccess;
}

template <int MG, bool kFp8>
cudaError_t launch_scales(const Int4GemmParams& p, int splits, float* ws, cudaStream_t stream) {
  return int4::with_scale_type(p.scale_type,
                               [&](auto s) { return launch<MG, kFp8, decltype(s)>(p, splits, ws, stream); });
}

}  // namespace

bool int4_tma_applies(const Int4GemmParams& p) {
  const int64_t sb = p.scale_type == Int4Scale::kF32 ? 4 : p.scale_type == Int4Scale::kBF16 ? 2 : 1;
  const int64_t xb = p.x_fp8 ? 1 : 2;
  return int4_mma_applies(p.M, p.K, p.group) && (p.group == 128 || p.group % 256 == 0) && p.M >= 1 && p.N >= 1 && p.K <= INT_MAX && p.N <= INT_MAX &&
         aligned16(p.w) && aligned16(p.x) && aligned16(p.scale) && (p.zero == nullptr || aligned16(p.zero)) &&
         (p.N == 1 || p.ldw % 16 == 0) && (p.M == 1 || (p.ldx * xb) % 16 == 0) && (p.lds * sb) % 16 == 0 &&
         (p.scale_type != Int4Scale::kF8 || p.N % 16 == 0);
}

int int4_tma_splits(int64_t M, int64_t N, int64_t K, int num_sms, int forced) {
  const int64_t nst = (K + kStageK - 1) / kStageK, blocks = (N + kRows - 1) / kRows;
  const int per_sm = M <= 8 ? Shape<1>::kCtasPerSm : Shape<2>::kCtasPerSm;
  int64_t s = forced > 0 ? forced : std::max<int64_t>(1, per_sm * int64_t(num_sms) / blocks);
  s = std::clamp<int64_t>(s, 1, nst);
  const int64_t per = (nst + s - 1) / s;
  return int((nst + per - 1) / per);  // no empty split
}

cudaError_t int4_decode_tma(const Int4GemmParams& p, int splits, float* ws, cudaStream_t stream) {
  if (!int4_tma_applies(p) || splits < 1 || (splits > 1 && ws == nullptr)) return cudaErrorNotSupported;
  if (p.x_fp8) return p.M <= 8 ? launch_scales<1, true>(p, splits, ws, stream) : launch_scales<2, true>(p, splits, ws, stream);
  return p.M <= 8 ? launch_scales<1, false>(p, splits, ws, stream) : launch_scales<2, false>(p, splits, ws, stream);
}

}  // namespace mslk::gemm
