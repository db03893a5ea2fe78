// The split-K decode's merge inside the split kernel: the last CTA of a (sequence, K/V head, row
// chunk) to finish its split merges every split's partial into the output, so no merge kernel runs.
// The arithmetic is merge_attentions.cu's forward (weights exp(lse_s - max) / sum, in split order).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "attention/kernels/fmha_decode.h"

namespace mslk::attention::decode_detail {

// Counts this CTA's split in the chunk's word (token << 16 | count; a word with another launch's
// token counts from 0) and tells whether it was the last. The CTA's partial stores precede it.
__device__ __forceinline__ bool last_split(const FmhaDecodeParams& p, int64_t word, int* s_flag) {
  __threadfence();  // every thread's partial stores are visible device-wide before the count
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned long long* c = p.merge_ctr + word;
    const unsigned long long tok = p.merge_token << 16;
    unsigned long long old = *reinterpret_cast<volatile unsigned long long*>(c), nw;
    for (;;) {
      nw = (old & ~0xffffull) == tok ? old + 1 : tok | 1ull;
      const unsigned long long prev = atomicCAS(c, old, nw);
      if (prev == old) break;
      old = prev;
    }
    const bool last = int(nw & 0xffffull) == p.num_splits;
    if (last) *c = 0;  // cleared for the next launch (a graph replay reuses the token)
    *s_flag = last;
  }
  __syncthreads();
  const bool last = *s_flag != 0;
  if (last) __threadfence();
  return last;
}

// The last CTA: rows [r0, r0 + rows_used) of the chunk, every split. scratch holds 1 + num_splits
// floats a row (kRows rows); partials are read from L2 (__ldcg), where the other CTAs' stores are.
// The LSEs come in one round of independent loads, then each row's weights from shared memory.
template <int kRows, int THREADS>
__device__ __forceinline__ void merge_chunk(const FmhaDecodeParams& p, float* scratch, int bq, int q0, int kvh,
                                            int r0, int rows_used) {
  const float kNegInf = -__int_as_float(0x7f800000);
  const int S = p.num_splits;
  const int64_t rows_total = int64_t(p.B) * p.Mq * p.Hkv * p.R;
  float* s_lse = scratch;         // [kRows]: the merged LSE, -inf for a row no split saw
  float* s_w = scratch + kRows;   // [S][kRows]: each split's weight
  auto rows_of = [&](int row, int64_t& head_row, int64_t& l_row) {
    const int x = r0 + row, i = x / p.R, h = x % p.R;
    head_row = ((int64_t(bq) * p.Mq + q0 + i) * p.Hkv + kvh) * p.R + h;  // of [B, Mq, Hkv, R]
    l_row = ((int64_t(bq) * p.Hkv + kvh) * p.R + h) * p.Mq + q0 + i;     // of [B, Hkv, R, Mq]
  };
  for (int idx = threadIdx.x; idx < S * rows_used; idx += THREADS) {  // every split's LSE, loads in parallel
    const int s = idx / rows_used, row = idx % rows_used;
    int64_t head_row, l_row;
    rows_of(row, head_row, l_row);
    s_w[s * kRows + row] = __ldcg(p.lse_part + s * rows_total + l_row);
  }
  __syncthreads();
  for (int row = threadIdx.x; row < rows_used; row += THREADS) {
    float mx = kNegInf;
    for (int s = 0; s < S; ++s) mx = fmaxf(mx, s_w[s * kRows + row]);
    const bool empty = mx == kNegInf;
    float den = 0.f;
    if (!empty)
      for (int s = 0; s < S; ++s) den += __expf(s_w[s * kRows + row] - mx);
    const float inv = empty ? 0.f : 1.f / den;
    for (int s = 0; s < S; ++s) s_w[s * kRows + row] = empty ? 0.f : __expf(s_w[s * kRows + row] - mx) * inv;
    s_lse[row] = empty ? kNegInf : mx + logf(den);
    int64_t head_row, l_row;
    rows_of(row, head_row, l_row);
    p.merged_lse[l_row] = s_lse[row];
  }
  __syncthreads();
  // O: four columns a thread (Kv is a multiple of 8, rows 16-byte aligned), four of them in flight.
  const int cv = p.Kv / 4, nv = rows_used * cv;
  for (int i0 = threadIdx.x; i0 < nv; i0 += 4 * THREADS) {
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int idx = i0 + u * THREADS;
      if (idx >= nv) break;
      const int row = idx / cv, col = idx % cv * 4;
      int64_t head_row, l_row;
      rows_of(row, head_row, l_row);
      float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
      if (s_lse[row] != kNegInf) {
#pragma unroll 4
        for (int s = 0; s < S; ++s) {
          const float w = s_w[s * kRows + row];
          const float4 a = __ldcg(reinterpret_cast<const float4*>(p.o_part + (s * rows_total + head_row) * p.Kv + col));
          acc.x += w * a.x, acc.y += w * a.y, acc.z += w * a.z, acc.w += w * a.w;
        }
      }
      const int64_t oi = head_row * p.Kv + col;
      if (p.merged_kind == 0) {
        *reinterpret_cast<float4*>(static_cast<float*>(p.merged_out) + oi) = acc;
      } else if (p.merged_kind == 2) {
        const __nv_bfloat162 lo = __floats2bfloat162_rn(acc.x, acc.y), hi = __floats2bfloat162_rn(acc.z, acc.w);
        *reinterpret_cast<uint2*>(static_cast<__nv_bfloat16*>(p.merged_out) + oi) =
            make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
      } else {
        const __half2 lo = __floats2half2_rn(acc.x, acc.y), hi = __floats2half2_rn(acc.z, acc.w);
        *reinterpret_cast<uint2*>(static_cast<__half*>(p.merged_out) + oi) =
            make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
      }
    }
  }
}

// Varlen: the query rows outside every sequence's block (before seqstart_q[0], from
// seqstart_q[num_seqs] on) get O = 0 and LSE -inf, as the merge pass writes them. Called by split 0
// of the first and the last sequence's first row chunk, for its K/V head (B == 1).
template <int THREADS>
__device__ __forceinline__ void write_rows_outside(const FmhaDecodeParams& p, int s, int kvh) {
  const int first = min(max(p.seqstart_q[0], 0), p.Mq), last = min(max(p.seqstart_q[p.num_seqs], first), p.Mq);
  const int n_lo = s == 0 ? first : 0, n_hi = s == p.num_seqs - 1 ? p.Mq - last : 0;
  const int64_t per_q = int64_t(p.R) * p.Kv;
  for (int64_t idx = threadIdx.x; idx < (n_lo + n_hi) * per_q; idx += THREADS) {
    const int qi = int(idx / per_q), i = qi < n_lo ? qi : last + qi - n_lo;
    const int h = int(idx % per_q / p.Kv), col = int(idx % p.Kv);
    const int64_t oi = ((int64_t(i) * p.Hkv + kvh) * p.R + h) * p.Kv + col;
    if (p.merged_kind == 2)
      static_cast<__nv_bfloat16*>(p.merged_out)[oi] = __float2bfloat16_rn(0.f);
    else if (p.merged_kind == 1)
      static_cast<__half*>(p.merged_out)[oi] = __float2half_rn(0.f);
    else
      static_cast<float*>(p.merged_out)[oi] = 0.f;
    if (col == 0) p.merged_lse[(int64_t(kvh) * p.R + h) * p.Mq + i] = -__int_as_float(0x7f800000);
  }
}

}  // namespace mslk::attention::decode_detail
