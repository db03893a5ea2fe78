// index_shuffling: one cooperative kernel, a deterministic stable counting sort of the (token, k)
// picks by expert. Output identical to the CPU reference: inside each expert segment, slots in
// ascending (token, k) order; slots past the selected total are 0.
//  1. CTA g (at most one per SM) owns a contiguous token chunk, warp w a contiguous sub-chunk.
//     LPT lanes (8/16/32) route one token: each holds EPL <= 16 of its scores (vector loads when
//     the rows allow), top_k rounds of a group arg-max (xor shuffles) pick the experts in
//     torch.topk order (topk_rank); sub-lane k holds pick k, counted in a per-warp histogram
//     (shared memory) and kept as an int16 slot (shared memory, or the workspace past 48 KB).
//  2. exclusive prefix of the per-warp counts over the warps; the CTA counts go to row g of a
//     [G][E] workspace; grid barrier (cg grid sync: no counter to zero, no memset).
//  3. per expert: the total and this CTA's prefix over the CTAs before it. Small G * E: every CTA
//     sums the columns itself; large: one warp per expert scans its column in place, a second
//     barrier (one barrier + redundant sums is the faster up to G * E ~ 32K: kColumnSumMax).
//  4. block scan of the totals -> segment starts; cursor of warp w for expert e = start + CTA
//     prefix + warp prefix. Each warp walks its slots in order, 32 at a time, ranking equal
//     experts with __match_any_sync, and places them.
// No host sync, nothing to zero between calls: CUDA-graph safe; counts[] written whole by CTA 0.
// Timings: docs/design/quantize.md (MoE routing) and bench/moe/results_moe_routing.md.
#include <cooperative_groups.h>

#include <type_traits>

#include "common/device_attrs.h"
#include "moe/kernels/moe_device.cuh"

namespace mslk::moe {
namespace {

namespace cg = cooperative_groups;

constexpr int kSmemBudget = 48 * 1024;  // no opt-in needed; slots go to global memory beyond it
constexpr int kColumnSumMax = 32768;    // G * E up to which every CTA sums the [G][E] columns itself

// LPT lanes route one token (32 / LPT tokens per warp at a time); lane r of the group holds the
// EPL experts r * EPL + j (contiguous: one or a few vector loads when the rows allow them).
template <typename S, int LPT, int EPL>
struct Router {
  static constexpr int kWords = EPL * static_cast<int>(sizeof(S)) / 4;  // 32-bit words of raw scores
  static_assert(kWords == 2 || kWords % 4 == 0, "vector loads of 8 or 16 bytes");

  // Raw scores of expert e0 + j (0 past E or when !live).
  __device__ __forceinline__ static void load(uint32_t (&w)[kWords], const S* row, int64_t stride_e, int e0, int E,
                                              bool live, bool vec) {
    if (vec) {  // rows 16-byte aligned (8 for kWords == 2), E % EPL == 0
      if (live && e0 < E) {
        if constexpr (kWords == 2) {
          const uint2 u = __ldg(reinterpret_cast<const uint2*>(row + e0));
          w[0] = u.x;
          w[1] = u.y;
        } else {
#pragma unroll
          for (int i = 0; i < kWords / 4; ++i) {
            const uint4 u = __ldg(reinterpret_cast<const uint4*>(row + e0) + i);
            w[4 * i] = u.x;
            w[4 * i + 1] = u.y;
            w[4 * i + 2] = u.z;
            w[4 * i + 3] = u.w;
          }
        }
      } else {
#pragma unroll
        for (int i = 0; i < kWords; ++i) w[i] = 0;
      }
      return;
    }
    if constexpr (sizeof(S) == 4) {
#pragma unroll
      for (int j = 0; j < EPL; ++j)
        w[j] = live && e0 + j < E ? __float_as_uint(row[(e0 + j) * stride_e]) : 0u;
    } else {
#pragma unroll
      for (int i = 0; i < kWords; ++i) {
        const int e = e0 + 2 * i;
        const uint32_t lo = live && e < E ? __bfloat16_as_ushort(row[e * stride_e]) : 0u;
        const uint32_t hi = live && e + 1 < E ? __bfloat16_as_ushort(row[(e + 1) * stride_e]) : 0u;
        w[i] = lo | (hi << 16);
      }
    }
  }

  // The group's top_k experts in torch.topk order; sub-lane k < K gets pick k.
  __device__ __forceinline__ static int route(const uint32_t (&w)[kWords], int e0, int E, int K, int r) {
    int mine = -1;
    uint32_t v[EPL];
    if constexpr (sizeof(S) == 2) {
      // bf16: the key's low 16 bits follow from its high 16 (bf16 -> f32 pads zeros), so
      // (key >> 16, ~expert) packs into 32 bits with the order of topk_rank.
#pragma unroll
      for (int j = 0; j < EPL; ++j) {
        const uint32_t bits = (w[j / 2] >> (16 * (j & 1))) & 0xffffu;
        const int e = e0 + j;
        v[j] = e < E ? (topk_key(__uint_as_float(bits << 16)) & 0xffff0000u) | (0xffffu - static_cast<uint32_t>(e))
                     : 0u;
      }
      for (int k = 0; k < K; ++k) {
        uint32_t m = v[0];
#pragma unroll
        for (int j = 1; j < EPL; ++j) m = v[j] > m ? v[j] : m;
#pragma unroll
        for (int o = LPT / 2; o > 0; o >>= 1) {
          const uint32_t x = __shfl_xor_sync(kFullMask, m, o);
          m = x > m ? x : m;
        }
#pragma unroll
        for (int j = 0; j < EPL; ++j) v[j] = v[j] == m ? 0u : v[j];  // values are unique (expert bits)
        if (r == k) mine = static_cast<int>(0xffffu - (m & 0xffffu));
      }
    } else {
      // fp32: the largest key, then the lowest expert among equal keys (keys of experts are > 0)
#pragma unroll
      for (int j = 0; j < EPL; ++j) v[j] = e0 + j < E ? topk_key(__uint_as_float(w[j])) : 0u;
      for (int k = 0; k < K; ++k) {
        uint32_t bk = 0, be = 0xffffffffu;
#pragma unroll
        for (int j = 0; j < EPL; ++j)
          if (v[j] > bk) {  // strict: the lower expert of equal keys stays
            bk = v[j];
            be = e0 + j;
          }
#pragma unroll
        for (int o = LPT / 2; o > 0; o >>= 1) {
          const uint32_t ok = __shfl_xor_sync(kFullMask, bk, o), oe = __shfl_xor_sync(kFullMask, be, o);
          if (ok > bk || (ok == bk && oe < be)) {
            bk = ok;
            be = oe;
          }
        }
#pragma unroll
        for (int j = 0; j < EPL; ++j)
          if (e0 + j == static_cast<int>(be)) v[j] = 0u;
        if (r == k) mine = static_cast<int>(be);
      }
    }
    return mine;
  }
};

template <int kThreads>
struct Smem {
  static constexpr int W = kThreads / 32;
  // hist [W][E] | base [max(E, 2 * kThreads)] (column partial sums first) | warp_tot [W] (block scan)
  // | slots int16 [tokens_per_cta * K] (when they fit)
  __host__ __device__ static int base_ints(int E) { return E > 2 * kThreads ? E : 2 * kThreads; }
  static size_t fixed_bytes(int E) { return (static_cast<size_t>(W) * E + base_ints(E) + W) * sizeof(int); }
};

template <typename S, int LPT, int EPL, int kThreads>
__global__ void __launch_bounds__(kThreads) index_shuffling_kernel(IndexShufflingParams p, int tokens_per_cta,
                                                                    bool slots_in_smem, bool vec) {
  using Rt = Router<S, LPT, EPL>;
  constexpr int W = kThreads / 32, TPI = 32 / LPT;  // tokens per warp step
  extern __shared__ int smem[];
  const int E = static_cast<int>(p.E), K = p.top_k;
  int* hist = smem;
  int* base = hist + W * E;
  int* warp_tot = base + Smem<kThreads>::base_ints(E);
  int16_t* sslot = reinterpret_cast<int16_t*>(warp_tot + W);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = blockIdx.x, G = gridDim.x;
  const int T = static_cast<int>(p.T);  // T * K < 2^31 (checked by the glue)
  const int valid = static_cast<int>(read_count(p.valid, p.T));
  const int t0 = min(g * tokens_per_cta, T), t1 = min(t0 + tokens_per_cta, T);
  const int per_warp = (t1 - t0 + W - 1) / W;
  const int a = min(t0 + warp * per_warp, t1), b = min(a + per_warp, t1);
  int32_t* ws_cnt = p.workspace;  // [G][E]: CTA counts, then exclusive prefix over CTAs
  int32_t* ws_tot = ws_cnt + index_shuffling_max_ctas(p.T) * E;  // [E]
  // slot (t, k) -> its expert (-1: not routed / outside the range), at t * K + k
  int16_t* slot = slots_in_smem ? sslot - t0 * K : reinterpret_cast<int16_t*>(ws_tot + E);
  const S* sc = static_cast<const S*>(p.scores);

  for (int i = tid; i < W * E; i += kThreads) hist[i] = 0;
  __syncthreads();

  // 1. route: group q of the warp takes token tb + q
  int* my_hist = hist + warp * E;
  const int q = lane / LPT, r = lane % LPT, e0 = r * EPL;
  for (int tb = a; tb < b; tb += 2 * TPI) {
    uint32_t w0[Rt::kWords], w1[Rt::kWords];
    const int ta = tb + q, tc = tb + TPI + q;
    Rt::load(w0, sc + static_cast<int64_t>(ta) * p.stride_t, p.stride_e, e0, E, ta < b && ta < valid, vec);
    Rt::load(w1, sc + static_cast<int64_t>(tc) * p.stride_t, p.stride_e, e0, E, tc < b && tc < valid, vec);
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int t = u == 0 ? ta : tc;
      if (tb + u * TPI >= b) break;  // warp-uniform
      int e = Rt::route(u == 0 ? w0 : w1, e0, E, K, r);
      if (t < b && r < K) {
        if (t >= valid || e < p.expert_start || e >= p.expert_end) e = -1;
        if (e >= 0) atomicAdd(my_hist + e, 1);
        slot[t * K + r] = static_cast<int16_t>(e);
      }
    }
  }
  __syncthreads();

  // 2. per expert: exclusive prefix over the warps, CTA count to the workspace
  for (int e = tid; e < E; e += kThreads) ws_cnt[g * E + e] = hist_excl_over_warps<W>(hist, E, e);
  cg::grid_group grid = cg::this_grid();
  grid.sync();

  // 3. per expert: the total over all CTAs and the prefix over the CTAs before this one
  int my_tot = 0, my_pre = 0;
  if (G * E <= kColumnSumMax) {
    // small [G][E]: every CTA sums the columns itself (all loads in flight), one barrier
    const int R = kThreads / E;  // E <= kThreads
    int* part = base;            // [2][R][E], base is written after the reads below
    if (tid < R * E) {
      const int e = tid % E, r = tid / E;
      int s_all = 0, s_pre = 0;
      for (int h0 = r; h0 < G; h0 += 8 * R) {
        int c[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) {
          const int h = h0 + u * R;
          c[u] = h < G ? __ldcg(ws_cnt + h * E + e) : 0;
        }
#pragma unroll
        for (int u = 0; u < 8; ++u) {
          s_all += c[u];
          s_pre += h0 + u * R < g ? c[u] : 0;
        }
      }
      part[r * E + e] = s_all;
      part[(R + r) * E + e] = s_pre;
    }
    __syncthreads();
    if (tid < E) {
      for (int r = 0; r < R; ++r) {
        my_tot += part[r * E + tid];
        my_pre += part[(R + r) * E + tid];
      }
    }
    __syncthreads();
  } else {
    // large [G][E]: one warp per expert scans its column in place (exclusive prefix over the
    // CTAs) and writes the total; a second barrier, then each CTA reads its row
    for (int e = g * W + warp; e < E; e += G * W) {
      int carry = 0;
      for (int h0 = 0; h0 < G; h0 += 128) {
        int c[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const int h = h0 + 32 * u + lane;
          c[u] = h < G ? __ldcg(ws_cnt + h * E + e) : 0;
        }
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const int inc = warp_incl_scan(c[u]);
          const int h = h0 + 32 * u + lane;
          if (h < G) ws_cnt[h * E + e] = carry + inc - c[u];
          carry += __shfl_sync(kFullMask, inc, 31);
        }
      }
      if (lane == 0) ws_tot[e] = carry;
    }
    grid.sync();
    if (tid < E) {
      my_tot = __ldcg(ws_tot + tid);
      my_pre = __ldcg(ws_cnt + g * E + tid);
    }
  }

  // 4. segment starts (experts outside [start, end) count 0), warp cursors
  const BlockScan seg = block_excl_scan<kThreads>(my_tot, warp_tot);
  if (tid < E) base[tid] = seg.excl + my_pre;
  if (g == 0) {
    if (tid < E) p.counts[tid] = my_tot;
    if (tid == 0) {
      p.counts[E] = T;
      p.counts[E + 1] = seg.total;
    }
  }
  __syncthreads();
  for (int e = tid; e < E; e += kThreads) {
    const int add = base[e];
#pragma unroll
    for (int w = 0; w < W; ++w) hist[w * E + e] += add;
  }
  __syncthreads();

  // 5. place the warp's slots in order: rank among equal experts of one step by match_any
  for (int s0 = a * K; s0 < b * K; s0 += 32) {
    const int s = s0 + lane;
    const int e = s < b * K ? slot[s] : -1;
    const int pos = warp_place(e, my_hist);
    if (e >= 0) {
      p.expert_indices[pos] = e - p.expert_start;
      p.token_indices[pos] = s / K;
    }
  }
  for (int i = seg.total + g * kThreads + tid; i < T * K; i += G * kThreads) {
    p.expert_indices[i] = 0;
    p.token_indices[i] = 0;
  }
}

template <typename S, int LPT, int EPL, int kThreads>
cudaError_t launch(const IndexShufflingParams& p, cudaStream_t stream) {
  int dev = 0, sms = 0;
  const cudaError_t err = current_device_sms(&dev, &sms);
  if (err != cudaSuccess) return err;
  // about kThreads / 8 tokens a CTA (4 a warp at 1024 threads), at most one CTA per SM (more CTAs
  // cost more in the column pass than they gain in routing; one CTA an SM is always co-resident,
  // as the cooperative launch needs: it fails, rather than hangs, where one does not fit)
  const int64_t max_ctas = std::min<int64_t>(sms, index_shuffling_max_ctas(p.T));
  const int64_t want = (p.T + kThreads / 8 - 1) / (kThreads / 8);
  const int64_t ctas = std::max<int64_t>(1, std::min(want, max_ctas));
  const int64_t tokens_per_cta = std::max<int64_t>(1, (p.T + ctas - 1) / ctas);
  const int64_t grid = std::max<int64_t>(1, (p.T + tokens_per_cta - 1) / tokens_per_cta);

  const size_t fixed = Smem<kThreads>::fixed_bytes(static_cast<int>(p.E));
  if (fixed > kSmemBudget) return cudaErrorInvalidConfiguration;  // every config of dispatch() fits
  const size_t slot_bytes = static_cast<size_t>(tokens_per_cta) * p.top_k * sizeof(int16_t);
  const bool slots_in_smem = fixed + slot_bytes <= kSmemBudget;
  constexpr int kVecBytes = Router<S, LPT, EPL>::kWords == 2 ? 8 : 16;
  const bool vec = p.stride_e == 1 && p.E % EPL == 0 &&
                   reinterpret_cast<uintptr_t>(p.scores) % kVecBytes == 0 &&
                   (p.stride_t * static_cast<int64_t>(sizeof(S))) % kVecBytes == 0;

  return launch_cooperative(index_shuffling_kernel<S, LPT, EPL, kThreads>, dim3(static_cast<unsigned>(grid)),
                            dim3(kThreads), fixed + (slots_in_smem ? slot_bytes : 0), stream, p,
                            static_cast<int>(tokens_per_cta), slots_in_smem, vec);
}

// lanes per token x experts per lane >= E; top_k <= 8 <= lanes per token
template <typename S>
cudaError_t dispatch(const IndexShufflingParams& p, cudaStream_t s) {
  constexpr int kWide = sizeof(S) == 2 ? 1024 : 512;  // fp32 x 16 experts a lane: 512 threads (registers)
  if (p.E <= 32) return launch<S, 8, 4, 1024>(p, s);
  if (p.E <= 64) return launch<S, 8, 8, 1024>(p, s);
  if (p.E <= 128) return launch<S, 8, 16, kWide>(p, s);
  if (p.E <= 256) return launch<S, 16, 16, kWide>(p, s);
  return launch<S, 32, 16, 512>(p, s);
}

}  // namespace

cudaError_t index_shuffling_cuda(const IndexShufflingParams& p, cudaStream_t s) {
  if (p.E < 1 || p.E > kMaxExperts || p.top_k < 1 || p.top_k > kMaxTopK || p.T * p.top_k >= (int64_t(1) << 31))
    return cudaErrorInvalidValue;
  return p.dtype == Dtype::kFloat32 ? dispatch<float>(p, s) : dispatch<__nv_bfloat16>(p, s);
}

}  // namespace mslk::moe
