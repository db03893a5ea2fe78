// Fused attention backward, deterministic dQ kernel (SM80+ mma.sync m16n8k16).
//
// One CTA per (query tile of BM rows, head, sequence), BM / 16 warps of 16 query rows, as the
// forward. It walks the key tiles of the mask band in ascending order and recomputes, in
// registers, S = Q K^T, P (from the forward's LSE), dP = dO V^T and dS, then dQ += dS K with dS
// repacked from the accumulator layout to the A-operand layout. No atomics: every dQ element is
// summed by one thread in a fixed order, so two runs give identical bits.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "attention/kernels/fmha_bwd_device.cuh"
#include "attention/kernels/fmha_bwd_impl.h"

namespace mslk::attention::bwd_detail {

template <int D, int BM, int BN>
struct DqTile {
  static constexpr int kThreads = BM / 16 * 32;
  // sQ, sdO [BM][D]; sK, sV [2][BN][D] (double-buffered)
  template <typename T>
  static constexpr size_t smem_bytes() {
    return size_t(2 * BM * D + 4 * BN * D) * sizeof(T);
  }
};

template <typename T, int D, int BM, int BN>
__global__ void __launch_bounds__(DqTile<D, BM, BN>::kThreads)
    fmha_bwd_dq_kernel(const FmhaBwdParams p, const FmhaBwdScratch w) {
  constexpr int THREADS = DqTile<D, BM, BN>::kThreads;
  constexpr int NB = BN / 8;  // score n-blocks per warp
  constexpr int OB = D / 8;   // dQ n-blocks per warp
  static_assert(D % 64 == 0 && BN % 16 == 0 && BM % 16 == 0, "tile shape");

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sdO = sQ + BM * D;
  T* sK = sdO + BM * D;     // [2][BN][D]
  T* sV = sK + 2 * BN * D;  // [2][BN][D]

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  const int h = blockIdx.y, s = blockIdx.z;
  const int r0 = blockIdx.x * BM;

  SeqBlock sb;
  if (!seq_block(p, s, p.Mkv, sb) || r0 >= sb.lq) return;
  const MaskBand band = MaskBand::make(p.mask_kind, p.window_left, p.window_right, sb.lq, sb.lk);
  const int rlast = min(r0 + BM, sb.lq) - 1;
  int64_t jb, je;
  band.keys_of(r0, rlast, sb.lk, &jb, &je);
  const int n_begin = int(jb) / BN * BN;
  const int n_tiles = je > jb ? int((je - n_begin + BN - 1) / BN) : 0;

  const T* q = static_cast<const T*>(p.q);
  const T* k = static_cast<const T*>(p.k);
  const T* v = static_cast<const T*>(p.v);
  const T* dout = static_cast<const T*>(p.dout);
  const int64_t q_off = int64_t(sb.bq) * p.q_sb + int64_t(sb.q0 + r0) * p.q_sm + int64_t(h) * p.q_sh;
  const int64_t do_off = int64_t(sb.bq) * p.do_sb + int64_t(sb.q0 + r0) * p.do_sm + int64_t(h) * p.do_sh;
  const int64_t k_off = int64_t(sb.bq) * p.k_sb + int64_t(sb.k0) * p.k_sm + int64_t(h) * p.k_sh;
  const int64_t v_off = int64_t(sb.bq) * p.v_sb + int64_t(sb.k0) * p.v_sm + int64_t(h) * p.v_sh;
  // Key tile it goes to buffer it & 1; tile it + 1 is fetched while tile it is computed.
  auto load_kv = [&](int it) {
    const int n0 = n_begin + it * BN;
    T* dst_k = sK + (it & 1) * BN * D;
    T* dst_v = sV + (it & 1) * BN * D;
    load_tile<T, D, BN, THREADS>(dst_k, k, k_off + int64_t(n0) * p.k_sm, p.k_sm, sb.lk - n0, p.K, tid);
    load_tile<T, D, BN, THREADS>(dst_v, v, v_off + int64_t(n0) * p.v_sm, p.v_sm, sb.lk - n0, p.Kv, tid);
  };
  load_tile<T, D, BM, THREADS>(sQ, q, q_off, p.q_sm, sb.lq - r0, p.K, tid);
  load_tile<T, D, BM, THREADS>(sdO, dout, do_off, p.do_sm, sb.lq - r0, p.Kv, tid);
  if (n_tiles > 0) load_kv(0);
  cp_async_commit();

  const int wrow = warp * 16;  // first tile row of this warp
  float lse2[2], dsum[2];
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    lse2[rr] = row_lse2(p, sb, h, r0 + wrow + g + rr * 8);
    dsum[rr] = row_dsum(p, w.dsum, sb, h, r0 + wrow + g + rr * 8);
  }
  float dq[OB][4];
#pragma unroll
  for (int i = 0; i < OB; ++i) dq[i][0] = dq[i][1] = dq[i][2] = dq[i][3] = 0.f;
  const int k_steps = (p.K + 15) / 16;
  const int v_steps = (p.Kv + 15) / 16;

  for (int it = 0; it < n_tiles; ++it) {
    const int n0 = n_begin + it * BN;
    const T* sKc = sK + (it & 1) * BN * D;
    const T* sVc = sV + (it & 1) * BN * D;
    __syncthreads();  // every warp is done with tile it - 1 (the buffer tile it + 1 goes to)
    if (it + 1 < n_tiles) load_kv(it + 1);
    cp_async_commit();   // possibly empty: keeps the group count uniform
    cp_async_wait<1>();  // tile it (and Q, dO) landed; tile it + 1 may be in flight
    __syncthreads();

    // ---- S = Q K^T and dP = dO V^T for this warp's 16 rows x BN keys
    float sc[NB][4], dp[NB][4];
    scores_and_dp<T, D, NB>(sc, dp, sQ, sKc, sdO, sVc, wrow, k_steps, v_steps, lane);

    // ---- dS (into dp); element e of n-block nb: row wrow + g + (e >> 1) * 8, key nb * 8 + 2 * t4 + (e & 1)
    const bool need_mask =
        n0 + BN > sb.lk || r0 + BM > sb.lq || !band.inside(r0, r0 + BM - 1, n0, n0 + BN - 1);
#pragma unroll
    for (int nb = 0; nb < NB; ++nb) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        bwd_element<T>(p, sb, h, band, need_mask, r0 + wrow + g + (e >> 1) * 8, n0 + nb * 8 + 2 * t4 + (e & 1),
                       lse2[e >> 1], dsum[e >> 1], sc[nb][e], dp[nb][e]);
      }
    }

    // ---- dQ += dS K (K through ldmatrix.trans: keys are the reduction dim)
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      uint32_t a[4];
      acc_to_a<T>(dp, kk, a);
      const int key = trans_row(kk, lane);
#pragma unroll
      for (int ob2 = 0; ob2 < OB / 2; ++ob2) {
        if (ob2 < k_steps) mma_a_trans<T, D>(dq[2 * ob2], dq[2 * ob2 + 1], a, sKc, key, ob2 * 16, lane);
      }
    }
  }
  cp_async_wait<0>();  // no key tile: the Q / dO loads still land before the CTA exits

  // ---- epilogue: dQ * scale (rows with no key tile get zeros)
  T* dqp = static_cast<T*>(p.dq);
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int i = r0 + wrow + g + rr * 8;
    if (i < sb.lq) {
      T* row = dqp + int64_t(sb.bq) * p.dq_sb + int64_t(sb.q0 + i) * p.dq_sm + int64_t(h) * p.dq_sh;
#pragma unroll
      for (int ob = 0; ob < OB; ++ob) {
        const int c = ob * 8 + 2 * t4;
        if (c < p.K)
          *reinterpret_cast<uint32_t*>(row + c) = Traits<T>::pack(dq[ob][2 * rr] * p.scale, dq[ob][2 * rr + 1] * p.scale);
      }
    }
  }
}

}  // namespace mslk::attention::bwd_detail
