// Warp-team FP8 quantizer for rows and K-groups: the default for rows of <= 64 KB, and for K-groups
// (rows of <= 16 KB) only with schedule warp (fp8_dispatch.cu).
// Why: the register kernel (fp8_reg.cu: one CTA a row, __syncthreads block reduction) stays well
// short of a no-math warp copy of the same rows. Here a team of 1, 2 or 4 warps owns one row
// (team_size): each warp issues all of its piece's loads (lane l holds 16-byte vectors l, l + 32,
// ...: every load instruction covers 512 contiguous bytes), reduces with shuffles, and the team
// meets once at a named barrier; teams never wait for each other. K-groups lose to fp8_reg.cu's
// group kernel here (a scale store and a shuffle tree per vector). Figures: docs/design/quantize.md.
// Same arithmetic as the other kernels (absmax16, tile_scale, quant_store16): bit-identical output.
#include "common/sm90_ptx.cuh"
#include "quantize/kernels/fp8_device.cuh"

namespace mslk::quantize {
namespace {

constexpr int kWarps = 4;                        // warps per CTA: whole teams
constexpr int64_t kMaxWarpBytes = 16 * 1024;     // NV = 32 vectors a lane: 128 data registers
constexpr int kMaxTeam = 4;                      // warps a row: rows of <= 64 KB

// A team of G warps owns one row (G = 1, 2 or 4, from team_size; at most 16 KB a warp): warp
// `part` of the team holds vectors [part * 32 * NV, (part + 1) * 32 * NV). The team meets once, at a named
// barrier, to combine its warps' amaxes; warps of other teams never wait for it.
// L == 0: one scale per row (butterfly over the warp); L > 0 (G == 1 only): one scale per K-group
// of L vectors, reduced over the L consecutive lanes that hold it (L divides 32, so vectors
// l .. l + L - 1 of one i, with l % L == 0, are one group).
// At least 3 CTAs (12 warps) an SM: caps registers at 168, enough for NV = 32 (128 data registers);
// without the bound, ptxas 13.0 spilled 4 bytes in some fp16/fp32 L > 0 instantiations.
template <typename T, int NV, int L, int G>
__global__ void __launch_bounds__(kWarps * 32, 3) fp8_warp_rows_kernel(Fp8TileParams p, bool vec_store) {
  static_assert(G == 1 || L == 0, "K-groups never span warps");
  constexpr int W = kVec16<T>;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, part = warp % G;
  const int64_t row = (int64_t(blockIdx.x) * kWarps + warp) / G;
  if (row >= p.in.M) return;  // a whole team: the shuffles and the team barrier see all their threads
  const int nv = static_cast<int>(p.in.K / W);
  const int c0 = part * 32 * NV + lane;  // this lane's first vector
  const bool valid = row_is_valid(p, row);  // rows past zero_start_index_M quantize zeros
  const T* in = static_cast<const T*>(p.in.ptr) + row * p.in.stride;
  uint4 v[NV];
#pragma unroll
  for (int i = 0; i < NV; ++i) {  // every load of the row before any math
    const int c = c0 + 32 * i;
    v[i] = ld_stream(in + c * W, valid && c < nv);
  }
  uint8_t* out = p.out + row * p.out_stride;
  if constexpr (L == 0) {
    float m = 0.f;
#pragma unroll
    for (int i = 0; i < NV; ++i) m = fmaxf(m, absmax16<T>(v[i]));
    m = warp_max(m);
    if constexpr (G > 1) {
      __shared__ float team_max[kWarps];
      if (lane == 0) team_max[warp] = m;
      ptx::named_barrier_sync(1 + warp / G, 32 * G);
#pragma unroll
      for (int j = 0; j < G; ++j) m = fmaxf(m, team_max[warp - part + j]);
    }
    const TileScale s = tile_scale(p, m);
    // Opaque to the optimizer: else it keeps the floats unpacked for the amax alive until the
    // stores instead of unpacking again (bf16 NV = 32: 242 registers, or spills under the bound).
#pragma unroll
    for (int i = 0; i < NV; ++i) asm("" : "+r"(v[i].x), "+r"(v[i].y), "+r"(v[i].z), "+r"(v[i].w));
    if (lane == 0 && part == 0) p.scale[scale_index(p, row, 0)] = s.scale;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
      const int c = c0 + 32 * i;
      if (c < nv) quant_store16<T>(v[i], s.inv, out + c * W, vec_store);
    }
  } else {
#pragma unroll
    for (int i = 0; i < NV; ++i) {
      float a = absmax16<T>(v[i]);
#pragma unroll
      for (int o = L / 2; o > 0; o >>= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, o));
      const int c = c0 + 32 * i;  // group c / L: p.tile_k == L * W
      if (c >= nv) continue;      // after the shuffles: every lane took part (nv is a multiple of L)
      const TileScale s = tile_scale(p, a);
      if (lane % L == 0) p.scale[scale_index(p, row, c / L)] = s.scale;
      quant_store16<T>(v[i], s.inv, out + c * W, vec_store);
    }
  }
  if (part == 0)
    for (int64_t k = p.in.K + lane; k < p.out_stride; k += 32) out[k] = 0;  // align_rows_to padding
}

template <typename T, int L, int G>
bool launch_nv(const Fp8TileParams& p, cudaStream_t st) {
  const int64_t nv = (p.in.K / kVec16<T> + G - 1) / G;  // vectors a warp
  const unsigned grid = ceil_div(p.in.M * G, kWarps);
  const bool vec_store = p.out_stride % kVec16<T> == 0;
  auto go = [&](auto kernel) {
    kernel<<<grid, kWarps * 32, 0, st>>>(p, vec_store);
    return true;
  };
  if (nv <= 32) return go(fp8_warp_rows_kernel<T, 1, L, G>);
  if (nv <= 64) return go(fp8_warp_rows_kernel<T, 2, L, G>);
  if (nv <= 128) return go(fp8_warp_rows_kernel<T, 4, L, G>);
  if (nv <= 256) return go(fp8_warp_rows_kernel<T, 8, L, G>);
  if (nv <= 512) return go(fp8_warp_rows_kernel<T, 16, L, G>);
  return go(fp8_warp_rows_kernel<T, 32, L, G>);  // nv <= 1024: 16 KB a warp
}

// Warps a row, by row size: short pieces a warp (~4 KB) for rows of <= 16 KB, the fewest warps
// that hold longer rows, doubled when that leaves fewer than kMinWarps warps in the grid (the
// timings of each team size: docs/design/quantize.md).
struct TeamRule {
  int64_t max_row_bytes;
  int team;
};
constexpr TeamRule kTeamRules[] = {{4 << 10, 1}, {8 << 10, 2}, {16 << 10, 4}, {32 << 10, 2}, {64 << 10, 4}};
constexpr int64_t kMinWarps = 16384;

// 0: rows too long for a team. forced (MSLK_FP8_ROW_TEAM, read by the glue) = 1, 2 or 4 forces
// that many warps where they hold the row; 0 forces nothing.
int team_size(int64_t row_bytes, int64_t rows, int forced) {
  int g = 0;
  for (const TeamRule& r : kTeamRules)
    if (row_bytes <= r.max_row_bytes) {
      g = r.team;
      break;
    }
  if (g == 0) return 0;
  if (row_bytes > kMaxWarpBytes && g < kMaxTeam && rows * g < kMinWarps) g *= 2;
  if (forced > 0 && row_bytes <= forced * kMaxWarpBytes) g = forced;
  return g;
}

}  // namespace

bool fp8_quantize_rows_warp(const Fp8TileParams& p, cudaStream_t st, bool groups, int row_team) {
  if (p.in.M <= 0 || p.in.K <= 0 || p.in.M > 0x7fffffffLL /* blocks <= M */) return false;
  bool ok = false;
  dispatch_dtype(p.in.dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int W = kVec16<T>;
    const int64_t row_bytes = p.in.K * int64_t(sizeof(T));
    if (!rows_vectorizable<T>(p.in, p.tile_k) || row_bytes > kMaxTeam * kMaxWarpBytes) return;
    if (!groups) {
      switch (team_size(row_bytes, p.in.M, row_team)) {
        case 1: ok = launch_nv<T, 0, 1>(p, st); break;
        case 2: ok = launch_nv<T, 0, 2>(p, st); break;
        case 4: ok = launch_nv<T, 0, 4>(p, st); break;
        default: break;
      }
      return;
    }
    // the preconditions of fp8_reg.cu's group path; one warp a row
    if (p.out_stride != p.in.K || p.tile_k <= 0 || p.in.K % p.tile_k != 0 || row_bytes > kMaxWarpBytes) return;
    switch (p.tile_k / W) {
      case 1: ok = launch_nv<T, 1, 1>(p, st); break;
      case 2: ok = launch_nv<T, 2, 1>(p, st); break;
      case 4: ok = launch_nv<T, 4, 1>(p, st); break;
      case 8: ok = launch_nv<T, 8, 1>(p, st); break;
      case 16: ok = launch_nv<T, 16, 1>(p, st); break;
      case 32: ok = launch_nv<T, 32, 1>(p, st); break;
      default: break;
    }
  });
  return ok;
}

}  // namespace mslk::quantize
