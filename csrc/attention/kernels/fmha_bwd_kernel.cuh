// Fused attention backward, main kernel (FlashAttention-2 style, SM80+ mma.sync m16n8k16): dK, dV
// and, in atomic mode, the dQ sums.
//
// One CTA per (key tile of BN keys, head, sequence) keeps its K and V tiles in shared memory and
// walks the query tiles of BM rows that the mask lets see them. Warp w works on keys
// [16 * (w / WN), + 16); the WN warps of one key block split the rest two ways:
//   S^T = K Q^T, dP^T = V dO^T  for query columns [(w % WN) * BM / WN, + BM / WN) (transposed, so
//                               that Z^T and dS^T come out with keys as rows), then Z^T and dS^T from
//                               the LSE and D rows (fmha_bwd_device.cuh), stored to shared memory
//                               in the input dtype;
//   dV += Z^T dO, dK += dS^T Q  for dK / dV columns [(w % WN) * D / WN, + D / WN), the A operands
//                               read back over all BM queries.
// The column split keeps the dK / dV accumulators of large head dims within the register file
// without recomputing the scores. dQ = dS K needs dS with queries as rows: dS^T is read back with
// ldmatrix.trans; the tile's contribution is added to the float32 sums with atomics. Deterministic
// mode skips that phase (fmha_bwd_dq_kernel.cuh computes dQ).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "attention/kernels/fmha_bwd_device.cuh"
#include "attention/kernels/fmha_bwd_impl.h"

namespace mslk::attention::bwd_detail {

template <int D, int BN, int BM, int WN>
struct MainTile {
  static constexpr int kWarps = BN / 16 * WN;
  static constexpr int kThreads = kWarps * 32;
  // sK, sV [BN][D]; sQ, sdO [2][BM][D] (double-buffered); sZ, sdS [BN][BM] (elements); sL, sDs [BM]
  // (floats)
  template <typename T>
  static constexpr size_t smem_bytes() {
    return size_t(2 * BN * D + 4 * BM * D + 2 * BN * BM) * sizeof(T) + 2 * BM * sizeof(float);
  }
};

template <typename T, int D, int BN, int BM, int WN>
__global__ void __launch_bounds__(MainTile<D, BN, BM, WN>::kThreads)
    fmha_bwd_kernel(const FmhaBwdParams p, const FmhaBwdScratch w) {
  constexpr int THREADS = MainTile<D, BN, BM, WN>::kThreads;
  constexpr int NWARPS = THREADS / 32;
  constexpr int QB = BM / 8 / WN;  // query n-blocks of the transposed scores per warp
  constexpr int OBW = D / 8 / WN;  // dK / dV n-blocks per warp
  constexpr int RB = BM / 16;      // dQ phase: 16-row blocks of the query tile ...
  constexpr int CG = NWARPS / RB;  // ... times column groups of D / CG
  constexpr int DQB = D / 8 / CG;  // dQ n-blocks per warp
  static_assert(D % 64 == 0 && BN % 16 == 0 && BM % 64 == 0 && OBW % 2 == 0 && QB % 2 == 0, "tile shape");
  static_assert(NWARPS % RB == 0 && DQB % 2 == 0, "dQ warp layout");

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sK = reinterpret_cast<T*>(smem_raw);
  T* sV = sK + BN * D;
  T* sQ = sV + BN * D;      // [2][BM][D]
  T* sdO = sQ + 2 * BM * D;  // [2][BM][D]
  T* sZ = sdO + 2 * BM * D;  // Z^T [BN][BM], swizzled with row width BM
  T* sdS = sZ + BN * BM;     // dS^T [BN][BM], likewise
  float* sL = reinterpret_cast<float*>(sdS + BN * BM);
  float* sDs = sL + BM;

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  const int kb = warp / WN, cpart = warp % WN;
  const int h = blockIdx.y, s = blockIdx.z;
  const int n0 = blockIdx.x * BN;  // first key of the tile, lane-relative

  SeqBlock sb;
  if (!seq_block(p, s, p.Mkv, sb) || n0 >= sb.lk) return;
  const MaskBand band = MaskBand::make(p.mask_kind, p.window_left, p.window_right, sb.lq, sb.lk);
  const int nlast = min(n0 + BN, sb.lk) - 1;
  int64_t ib, ie;
  band.queries_of(n0, nlast, sb.lq, &ib, &ie);
  const int m_begin = int(ib) / BM * BM;
  const int m_tiles = ie > ib ? int((ie - m_begin + BM - 1) / BM) : 0;

  const T* q = static_cast<const T*>(p.q);
  const T* k = static_cast<const T*>(p.k);
  const T* v = static_cast<const T*>(p.v);
  const T* dout = static_cast<const T*>(p.dout);
  const int64_t q_off = int64_t(sb.bq) * p.q_sb + int64_t(sb.q0) * p.q_sm + int64_t(h) * p.q_sh;
  const int64_t do_off = int64_t(sb.bq) * p.do_sb + int64_t(sb.q0) * p.do_sm + int64_t(h) * p.do_sh;
  const int64_t k_off = int64_t(sb.bq) * p.k_sb + int64_t(sb.k0 + n0) * p.k_sm + int64_t(h) * p.k_sh;
  const int64_t v_off = int64_t(sb.bq) * p.v_sb + int64_t(sb.k0 + n0) * p.v_sm + int64_t(h) * p.v_sh;
  // Query tile it goes to buffer it & 1; tile it + 1 is fetched while tile it is computed.
  auto load_q_do = [&](int it) {
    const int m0 = m_begin + it * BM;
    T* dst_q = sQ + (it & 1) * BM * D;
    T* dst_do = sdO + (it & 1) * BM * D;
    load_tile<T, D, BM, THREADS>(dst_q, q, q_off + int64_t(m0) * p.q_sm, p.q_sm, sb.lq - m0, p.K, tid);
    load_tile<T, D, BM, THREADS>(dst_do, dout, do_off + int64_t(m0) * p.do_sm, p.do_sm, sb.lq - m0, p.Kv, tid);
  };
  load_tile<T, D, BN, THREADS>(sK, k, k_off, p.k_sm, sb.lk - n0, p.K, tid);
  load_tile<T, D, BN, THREADS>(sV, v, v_off, p.v_sm, sb.lk - n0, p.Kv, tid);
  if (m_tiles > 0) load_q_do(0);
  cp_async_commit();

  float dk[OBW][4], dv[OBW][4];
#pragma unroll
  for (int i = 0; i < OBW; ++i) {
    dk[i][0] = dk[i][1] = dk[i][2] = dk[i][3] = 0.f;
    dv[i][0] = dv[i][1] = dv[i][2] = dv[i][3] = 0.f;
  }
  const int k_steps = (p.K + 15) / 16;   // 16-wide steps of the D reduction that hold Q/K data
  const int v_steps = (p.Kv + 15) / 16;  // ... that hold V/dO data
  const int krow = kb * 16;              // first key row of this warp in the tile
  const int col0 = cpart * (D / WN);     // first dK / dV column of this warp
  const int cq0 = cpart * (BM / WN);     // first score column (query) of this warp
  const bool atomic_dq = w.dq_accum != nullptr;

  for (int it = 0; it < m_tiles; ++it) {
    const int m0 = m_begin + it * BM;
    const T* sQc = sQ + (it & 1) * BM * D;
    const T* sdOc = sdO + (it & 1) * BM * D;
    __syncthreads();  // every warp is done with tile it - 1 (its buffer, sZ, sdS, sL, sDs)
    if (it + 1 < m_tiles) load_q_do(it + 1);
    cp_async_commit();  // possibly empty: keeps the group count uniform
    for (int r = tid; r < BM; r += THREADS) {
      sL[r] = row_lse2(p, sb, h, m0 + r);
      sDs[r] = row_dsum(p, w.dsum, sb, h, m0 + r);
    }
    cp_async_wait<1>();  // tile it (and K, V) landed; tile it + 1 may be in flight
    __syncthreads();

    {
      // ---- S^T = K Q^T and dP^T = V dO^T for this warp's 16 keys x BM / WN queries (the query
      // rows start at cq0, a multiple of 8, so the swizzle of the offset tile is unchanged)
      float st[QB][4], dpt[QB][4];
      scores_and_dp<T, D, QB>(st, dpt, sK, sQc + cq0 * D, sV, sdOc + cq0 * D, krow, k_steps, v_steps, lane);

      // ---- Z^T and dS^T to shared memory; element e of n-block nb: key row krow + g + (e >> 1) * 8,
      // query column cq0 + nb * 8 + 2 * t4 + (e & 1)
      const bool need_mask =
          n0 + BN > sb.lk || m0 + BM > sb.lq || !band.inside(m0, m0 + BM - 1, n0, n0 + BN - 1);
#pragma unroll
      for (int nb = 0; nb < QB; ++nb) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = cq0 + nb * 8 + 2 * t4 + (e & 1);
          bwd_element<T>(p, sb, h, band, need_mask, m0 + r, n0 + krow + g + (e >> 1) * 8, sL[r], sDs[r],
                         st[nb][e], dpt[nb][e]);
        }
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) {
          const int o = swz<BM>(krow + g + rr * 8, cq0 + nb * 8 + 2 * t4);
          *reinterpret_cast<uint32_t*>(sZ + o) = Traits<T>::pack(st[nb][2 * rr], st[nb][2 * rr + 1]);
          *reinterpret_cast<uint32_t*>(sdS + o) = Traits<T>::pack(dpt[nb][2 * rr], dpt[nb][2 * rr + 1]);
        }
      }
    }
    __syncthreads();  // Z^T and dS^T of the whole tile are in

    // ---- dV += Z^T dO and dK += dS^T Q over all BM queries (A operands: 16 key rows of sZ / sdS)
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk) {
      uint32_t az[4], ad[4];
      const int ao = swz<BM>(krow + (lane & 15), kk * 16 + (lane >> 4) * 8);
      ldsm_x4(az[0], az[1], az[2], az[3], smem_u32(sZ + ao));
      ldsm_x4(ad[0], ad[1], ad[2], ad[3], smem_u32(sdS + ao));
      const int qr = trans_row(kk, lane);
#pragma unroll
      for (int ob2 = 0; ob2 < OBW / 2; ++ob2) {
        const int c = col0 + ob2 * 16;
        if (c < p.Kv) mma_a_trans<T, D>(dv[2 * ob2], dv[2 * ob2 + 1], az, sdOc, qr, c, lane);
        if (c < p.K) mma_a_trans<T, D>(dk[2 * ob2], dk[2 * ob2 + 1], ad, sQc, qr, c, lane);
      }
    }

    if (atomic_dq) {
      // ---- dQ tile (BM x D, unscaled) = dS K: warp owns rows [16 * rb, + 16) and columns [qc0, + D / CG)
      const int rb = warp % RB, qc0 = (warp / RB) * (D / CG);
      float dq[DQB][4];
#pragma unroll
      for (int i = 0; i < DQB; ++i) dq[i][0] = dq[i][1] = dq[i][2] = dq[i][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        uint32_t a[4];
        ldsm_x4_t(a[0], a[1], a[2], a[3],
                  smem_u32(sdS + swz<BM>(kk * 16 + (lane & 7) + (lane >> 4) * 8, rb * 16 + ((lane >> 3) & 1) * 8)));
        const int key = trans_row(kk, lane);
#pragma unroll
        for (int ob2 = 0; ob2 < DQB / 2; ++ob2) {
          const int c = qc0 + ob2 * 16;
          if (c < p.K) mma_a_trans<T, D>(dq[2 * ob2], dq[2 * ob2 + 1], a, sK, key, c, lane);
        }
      }
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        const int i = m0 + rb * 16 + g + rr * 8;
        if (i < sb.lq) {
          float* acc = w.dq_accum + ((int64_t(sb.bq) * p.Mq + sb.q0 + i) * p.H + h) * p.K;
#pragma unroll
          for (int ob = 0; ob < DQB; ++ob) {
            const int c = qc0 + ob * 8 + 2 * t4;
            if (c < p.K) {
#if __CUDA_ARCH__ >= 900
              // one 8-byte reduction per pair (c even, K a multiple of 8: aligned)
              atomicAdd(reinterpret_cast<float2*>(acc + c), make_float2(dq[ob][2 * rr], dq[ob][2 * rr + 1]));
#else
              atomicAdd(acc + c, dq[ob][2 * rr]);
              atomicAdd(acc + c + 1, dq[ob][2 * rr + 1]);
#endif
            }
          }
        }
      }
    }
  }
  cp_async_wait<0>();  // no query tile: the K / V loads still land before the CTA exits

  // ---- epilogue: dK * scale and dV for the keys of the lane
  T* dkp = static_cast<T*>(p.dk);
  T* dvp = static_cast<T*>(p.dv);
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int j = n0 + krow + g + rr * 8;
    if (j < sb.lk) {
      T* dkr = dkp + int64_t(sb.bq) * p.dk_sb + int64_t(sb.k0 + j) * p.dk_sm + int64_t(h) * p.dk_sh;
      T* dvr = dvp + int64_t(sb.bq) * p.dv_sb + int64_t(sb.k0 + j) * p.dv_sm + int64_t(h) * p.dv_sh;
#pragma unroll
      for (int ob = 0; ob < OBW; ++ob) {
        const int c = col0 + ob * 8 + 2 * t4;
        if (c < p.K)
          *reinterpret_cast<uint32_t*>(dkr + c) =
              Traits<T>::pack(dk[ob][2 * rr] * p.scale, dk[ob][2 * rr + 1] * p.scale);
        if (c < p.Kv) *reinterpret_cast<uint32_t*>(dvr + c) = Traits<T>::pack(dv[ob][2 * rr], dv[ob][2 * rr + 1]);
      }
    }
  }
}

}  // namespace mslk::attention::bwd_detail
