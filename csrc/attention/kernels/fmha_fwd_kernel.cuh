// Fused attention forward, FlashAttention-2 style, for fp16/bf16 on SM80+ (mma.sync m16n8k16).
//
// One CTA per (query tile of BM rows, head, sequence); BM/16 warps, each owning 16 query rows.
// The Q tile stays in shared memory; K and V tiles of BN keys are double-buffered through
// cp.async (K[t+1] is fetched while S = Q K[t]^T and the softmax run, V[t+1] while O += P V[t]).
// Scores live in registers as mma accumulators; the online softmax (running max m, running sum
// l, in the log2 domain) rescales the O accumulators; P is repacked from the accumulator layout
// to the A-operand layout without touching shared memory.
//
// Shared-memory tiles are [rows][D] with the 16-byte chunks of each row XOR-swizzled by
// (row & 7), so ldmatrix over 8 consecutive rows is bank-conflict free (D/8 >= 8 chunks).
// Masks are evaluated from the POD descriptor (no materialized mask); tiles that lie wholly
// outside the allowed band are skipped, tiles wholly inside it skip the per-element test.
// Dropout (kDropout, chosen per launch so that the plain kernel carries none of it) zeroes the
// dropped probabilities after they are summed into l (the LSE stays the undropped one); the kept
// ones are scaled by 1 / (1 - p) once, in the epilogue, rather than per element.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "attention/kernels/fmha_fwd.h"
#include "attention/kernels/fmha_sm80_device.cuh"
#include "common/device_attrs.h"

namespace mslk::attention::fwd_detail {

using namespace sm80;  // NOLINT: the shared device helpers


template <typename T, int D, int BM, int BN, bool kDropout>
__global__ void __launch_bounds__(BM / 16 * 32) fmha_fwd_kernel(const FmhaFwdParams p) {
  constexpr int NWARPS = BM / 16;
  constexpr int THREADS = NWARPS * 32;
  constexpr int NB = BN / 8;  // score n-blocks per warp
  constexpr int OB = D / 8;   // output n-blocks per warp
  constexpr float kLog2e = 1.4426950408889634f;
  constexpr float kLn2 = 0.6931471805599453f;
  static_assert(D % 64 == 0 && BN % 16 == 0 && BM % 16 == 0, "tile shape");

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = sQ + BM * D;      // [2][BN][D]
  T* sV = sK + 2 * BN * D;  // [2][BN][D]

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  const int h = blockIdx.y, s = blockIdx.z;
  const int tile = gridDim.x - 1 - blockIdx.x;  // longest (causal) tiles first

  // ---- the (query block, key lane) of this CTA
  int bq, q0, lq, k0, lk;
  if (p.seqstart_q != nullptr) {
    bq = 0;
    q0 = p.seqstart_q[s];
    lq = p.seqstart_q[s + 1] - q0;
    k0 = p.seqstart_k[s];
    lk = p.seqlen_k != nullptr ? p.seqlen_k[s] : p.seqstart_k[s + 1] - k0;
  } else {
    bq = s;
    q0 = 0;
    lq = p.Mq;
    k0 = 0;
    lk = p.seqlen_k != nullptr ? p.seqlen_k[s] : p.Mkv;
  }
  // Memory safety against inconsistent descriptors (the glue cannot check device-side values).
  lq = max(0, min(lq, p.Mq - max(q0, 0)));
  const bool paged = p.block_table != nullptr;
  lk = max(0, min(lk, (paged ? p.bt_cols * p.page_size : p.Mkv) - max(k0, 0)));
  if (q0 < 0 || k0 < 0) return;
  const int r0 = tile * BM;
  if (r0 >= lq) return;

  // ---- mask band: key j allowed for query i iff lo <= j - i - shift <= hi (and j < lk)
  const bool causal = p.mask_kind == kMaskCausalTopLeft || p.mask_kind == kMaskCausalBottomRight;
  const bool bottom_right = p.mask_kind == kMaskCausalBottomRight || p.mask_kind == kMaskLocalBottomRight;
  const int64_t shift = bottom_right ? int64_t(lk) - lq : 0;
  int64_t hi = causal ? 0 : kUnbounded;
  if (p.window_right >= 0 && p.window_right < hi) hi = p.window_right;
  const int64_t lo = p.window_left >= 0 ? -p.window_left : -kUnbounded;
  const int64_t rlast = min(r0 + BM, lq) - 1;
  int64_t jb = int64_t(r0) + shift + lo, je = rlast + shift + hi + 1;
  jb = jb < 0 ? 0 : (jb > lk ? lk : jb);
  je = je < 0 ? 0 : (je > lk ? lk : je);
  const int n_begin = int(jb) / BN * BN;
  const int n_tiles = je > jb ? int((je - n_begin + BN - 1) / BN) : 0;

  const T* q = static_cast<const T*>(p.q);
  const T* k = static_cast<const T*>(p.k);
  const T* v = static_cast<const T*>(p.v);
  const int64_t q_off = int64_t(bq) * p.q_sb + int64_t(q0 + r0) * p.q_sm + int64_t(h) * p.q_sh;
  const int64_t k_off = int64_t(bq) * p.k_sb + int64_t(k0) * p.k_sm + int64_t(h) * p.k_sh;
  const int64_t v_off = int64_t(bq) * p.v_sb + int64_t(k0) * p.v_sm + int64_t(h) * p.v_sh;
  // K / V tile of keys [n, n + BN) of this lane into smem tile dst (dense or through the page table)
  const int* bt_row = paged ? p.block_table + int64_t(s) * p.bt_stride : nullptr;
  auto load_k = [&](T* dst, int n) {
    if (paged) {
      const PagedRows rows{bt_row, int64_t(k0) + n, int64_t(h) * p.k_sh, p.k_sm, p.kv_rows, p.page_size};
      load_rows<T, D, BN, THREADS>(dst, k, rows, lk - n, p.K, tid);
    } else {
      load_rows<T, D, BN, THREADS>(dst, k, DenseRows{k_off + int64_t(n) * p.k_sm, p.k_sm}, lk - n, p.K, tid);
    }
  };
  auto load_v = [&](T* dst, int n) {
    if (paged) {
      const PagedRows rows{bt_row, int64_t(k0) + n, int64_t(h) * p.v_sh, p.v_sm, p.kv_rows, p.page_size};
      load_rows<T, D, BN, THREADS>(dst, v, rows, lk - n, p.Kv, tid);
    } else {
      load_rows<T, D, BN, THREADS>(dst, v, DenseRows{v_off + int64_t(n) * p.v_sm, p.v_sm}, lk - n, p.Kv, tid);
    }
  };

  float o[OB][4];
#pragma unroll
  for (int i = 0; i < OB; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float m_i[2] = {-INFINITY, -INFINITY};
  float l_i[2] = {0.f, 0.f};

  const int k_steps = (p.K + 15) / 16;  // 16-wide steps of the QK^T reduction that hold data
  const int v_steps = (p.Kv + 15) / 16; // 16-wide column pairs of O that hold data
  const int wrow = warp * 16;           // first tile row of this warp
  const float scale = p.scale;

  if (n_tiles > 0) {
    load_tile<T, D, BM, THREADS>(sQ, q, q_off, p.q_sm, lq - r0, p.K, tid);
    load_k(sK, n_begin);
    cp_async_commit();
    load_v(sV, n_begin);
    cp_async_commit();
  }

  for (int it = 0; it < n_tiles; ++it) {
    const int n0 = n_begin + it * BN;
    const int cur = it & 1, nxt = cur ^ 1;
    const T* sKc = sK + cur * BN * D;
    const T* sVc = sV + cur * BN * D;

    cp_async_wait<1>();  // Q and K[it] landed (V[it] may be in flight)
    __syncthreads();     // ... for every thread; and every warp is done with tile it-1

    if (it + 1 < n_tiles) {
      const int n1 = n0 + BN;
      load_k(sK + nxt * BN * D, n1);
    }
    cp_async_commit();  // possibly empty: keeps the group count uniform

    // ---- S = Q K^T for this warp's 16 rows x BN keys
    float sc[NB][4];
#pragma unroll
    for (int i = 0; i < NB; ++i) sc[i][0] = sc[i][1] = sc[i][2] = sc[i][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      if (kk < k_steps) mma_rows_rows<T, D, NB>(sc, sQ, wrow, sKc, kk, lane);
    }

    // ---- scale, bias, mask (log2 domain)
    const int64_t dmin = int64_t(n0) - (r0 + BM - 1) - shift, dmax = int64_t(n0) + BN - 1 - r0 - shift;
    const bool need_mask = n0 + BN > lk || dmin < lo || dmax > hi;
#pragma unroll
    for (int nb = 0; nb < NB; ++nb) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = r0 + wrow + g + (e >> 1) * 8;  // query index in the block
        const int j = n0 + nb * 8 + 2 * t4 + (e & 1);  // key index in the lane
        float x = sc[nb][e] * scale;
        if (p.bias != nullptr && i < lq && j < lk) {
          const int64_t bo = int64_t(bq) * p.bias_sb + int64_t(h) * p.bias_sh + int64_t(q0 + i) * p.bias_sm +
                             int64_t(k0 + j) * p.bias_sn;
          x += p.bias_is_fp32 ? __ldg(static_cast<const float*>(p.bias) + bo)
                              : Traits<T>::to_float(static_cast<const T*>(p.bias)[bo]);
        }
        x *= kLog2e;
        if (need_mask) {
          const int64_t d = int64_t(j) - i - shift;
          if (j >= lk || d < lo || d > hi) x = -INFINITY;
        }
        sc[nb][e] = x;
      }
    }

    // ---- online softmax; rows g (rr = 0) and g + 8 (rr = 1) of the warp's 16
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      float mx = -INFINITY;
#pragma unroll
      for (int nb = 0; nb < NB; ++nb) mx = fmaxf(mx, fmaxf(sc[nb][2 * rr], sc[nb][2 * rr + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m_i[rr], mx);
      const float m_use = m_new == -INFINITY ? 0.f : m_new;  // all masked so far: keep exp2 finite
      const float alpha = exp2f(m_i[rr] - m_use);
      m_i[rr] = m_new;
      float sum = 0.f;
#pragma unroll
      for (int nb = 0; nb < NB; ++nb) {
        sc[nb][2 * rr] = exp2f(sc[nb][2 * rr] - m_use);
        sc[nb][2 * rr + 1] = exp2f(sc[nb][2 * rr + 1] - m_use);
        sum += sc[nb][2 * rr] + sc[nb][2 * rr + 1];
      }
      l_i[rr] = l_i[rr] * alpha + sum;
#pragma unroll
      for (int ob = 0; ob < OB; ++ob) {
        o[ob][2 * rr] *= alpha;
        o[ob][2 * rr + 1] *= alpha;
      }
    }

    if constexpr (kDropout) {
      // element (row i, key j) of the block: fmha_dropout_keep(bh, q0 + i, k0 + j)
      // The keep bits first, in a rolled loop (bit 2 * (rr * NB + nb) + (e & 1)), so that the Philox
      // rounds do not compete with the score registers.
      static_assert(NB <= 8, "one 32-bit word of keep bits");
      const int64_t bh = int64_t(bq) * p.H + h;
      uint32_t keep = 0;
#pragma unroll 1
      for (int x = 0; x < 2 * NB; ++x) {
        const int rr = x / NB, nb = x % NB;
        const int64_t qi = int64_t(q0) + r0 + wrow + g + rr * 8;
        keep |= dropout_keep2(p.dropout, bh, qi, int64_t(k0) + n0 + nb * 8 + 2 * t4) << (2 * x);
      }
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
#pragma unroll
        for (int nb = 0; nb < NB; ++nb) {
          if (!((keep >> (2 * (rr * NB + nb))) & 1u)) sc[nb][2 * rr] = 0.f;
          if (!((keep >> (2 * (rr * NB + nb) + 1)) & 1u)) sc[nb][2 * rr + 1] = 0.f;
        }
      }
    }

    cp_async_wait<1>();  // V[it] landed (K[it+1] may be in flight)
    __syncthreads();

    // ---- O += P V
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      uint32_t a[4];
      acc_to_a<T>(sc, kk, a);
      const int key = trans_row(kk, lane);
#pragma unroll
      for (int ob2 = 0; ob2 < OB / 2; ++ob2) {
        if (ob2 < v_steps) mma_a_trans<T, D>(o[2 * ob2], o[2 * ob2 + 1], a, sVc, key, ob2 * 16, lane);
      }
    }

    if (it + 1 < n_tiles) {
      const int n1 = n0 + BN;
      load_v(sV + nxt * BN * D, n1);
    }
    cp_async_commit();
  }
  cp_async_wait<0>();

  // ---- epilogue: O / l, LSE = ln(sum exp) ; fully masked rows: O = 0, LSE = -inf
  T* out = static_cast<T*>(p.out);
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    float l = l_i[rr];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    float inv = l > 0.f ? 1.f / l : 0.f;
    if constexpr (kDropout) inv *= p.dropout.rescale;
    const int i = r0 + wrow + g + rr * 8;
    if (i < lq) {
      T* orow = out + int64_t(bq) * p.o_sb + int64_t(q0 + i) * p.o_sm + int64_t(h) * p.o_sh;
#pragma unroll
      for (int ob = 0; ob < OB; ++ob) {
        const int col = ob * 8 + 2 * t4;
        if (col < p.Kv) {
          const uint32_t packed = Traits<T>::pack(o[ob][2 * rr] * inv, o[ob][2 * rr + 1] * inv);
          *reinterpret_cast<uint32_t*>(orow + col) = packed;
        }
      }
      if (t4 == 0) {
        p.lse[(int64_t(bq) * p.H + h) * p.Mq + q0 + i] = l > 0.f ? (m_i[rr] + log2f(l)) * kLn2 : -INFINITY;
      }
    }
  }
}

template <typename T, int D, bool kDropout>
cudaError_t launch(const FmhaFwdParams& p, cudaStream_t stream) {
  constexpr int BM = D >= 256 ? 64 : 128;
  constexpr int BN = D >= 256 ? 32 : 64;
  if (p.num_seqs <= 0 || p.H <= 0 || p.max_seqlen_q <= 0) return cudaSuccess;
  const size_t smem = size_t(BM + 4 * BN) * D * sizeof(T);
  auto kern = fmha_fwd_kernel<T, D, BM, BN, kDropout>;
  static mslk::cuda::SmemLimitOnce smem_limit;  // the cap raised once per device
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err == cudaSuccess) err = smem_limit.ensure(kern, dev, smem);
  if (err != cudaSuccess) return err;
  const dim3 grid((p.max_seqlen_q + BM - 1) / BM, p.H, p.num_seqs);
  kern<<<grid, BM / 16 * 32, smem, stream>>>(p);
  return cudaGetLastError();
}

template <typename T, int D>
cudaError_t launch_dropout(const FmhaFwdParams& p, cudaStream_t stream) {
  return p.dropout.p > 0.f ? launch<T, D, true>(p, stream) : launch<T, D, false>(p, stream);
}

template <int D>
cudaError_t launch_dtype(const FmhaFwdParams& p, cudaStream_t stream) {
  return p.is_bf16 ? launch_dropout<__nv_bfloat16, D>(p, stream) : launch_dropout<__half, D>(p, stream);
}

}  // namespace mslk::attention::fwd_detail
