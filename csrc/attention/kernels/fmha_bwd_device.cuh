// Device pieces shared by the two backward kernels (fmha_bwd_kernel.cuh: dK/dV per key tile,
// fmha_bwd_dq_kernel.cuh: dQ per query tile): the per-element recomputation of P from the score
// and the forward's LSE, and of dS from dP = dO V^T.
#pragma once
#include "attention/kernels/fmha_bwd.h"
#include "attention/kernels/fmha_dropout.h"
#include "attention/kernels/fmha_sm80_device.cuh"

namespace mslk::attention::bwd_detail {

using namespace sm80;  // NOLINT: the shared device helpers

constexpr float kLog2e = 1.4426950408889634f;

// LSE of query row i (block-relative) in the log2 domain, +inf where the row contributes nothing
// (past the block, or -inf: no allowed key), so that exp2(x - it) is 0 there.
__device__ __forceinline__ float row_lse2(const FmhaBwdParams& p, const SeqBlock& sb, int h, int i) {
  if (i >= sb.lq) return INFINITY;
  const float x = p.lse[(int64_t(sb.bq) * p.H + h) * p.Mq + sb.q0 + i];
  return x == -INFINITY ? INFINITY : x * kLog2e;
}
__device__ __forceinline__ float row_dsum(const FmhaBwdParams& p, const float* dsum, const SeqBlock& sb, int h,
                                          int i) {
  return i < sb.lq ? dsum[(int64_t(sb.bq) * p.H + h) * p.Mq + sb.q0 + i] : 0.f;
}

// The two score-shaped products of a tile, 16 rows x 8 * NB columns per warp: s = A_s B_s^T over the
// first k_steps 16-wide steps of D (Q and K hold data there), dp = A_dp B_dp^T over v_steps (V, dO).
// A rows [a_row, + 16) of sAs / sAdp; B rows [0, 8 * NB) of sBs / sBdp.
template <typename T, int D, int NB>
__device__ __forceinline__ void scores_and_dp(float (&s)[NB][4], float (&dp)[NB][4], const T* sAs, const T* sBs,
                                              const T* sAdp, const T* sBdp, int a_row, int k_steps, int v_steps,
                                              int lane) {
#pragma unroll
  for (int i = 0; i < NB; ++i) {
    s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
    dp[i][0] = dp[i][1] = dp[i][2] = dp[i][3] = 0.f;
  }
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    if (kk < k_steps) mma_rows_rows<T, D, NB>(s, sAs, a_row, sBs, kk, lane);
    if (kk < v_steps) mma_rows_rows<T, D, NB>(dp, sAdp, a_row, sBdp, kk, lane);
  }
}

// Element (query i, key j) of the block (both block-relative): on entry s = (Q K^T)[i, j] and
// dp = (dO V^T)[i, j]; on exit s = Z = P * keep / (1 - p_drop) (the operand of dV = Z^T dO) and
// dp = dS = P * (dp * keep / (1 - p_drop) - D_i) (the operand of dQ and dK).
template <typename T>
__device__ __forceinline__ void bwd_element(const FmhaBwdParams& p, const SeqBlock& sb, int h, const MaskBand& band,
                                            bool need_mask, int i, int j, float lse2, float dsum, float& s,
                                            float& dp) {
  float x = s * p.scale;
  if (p.bias != nullptr && i < sb.lq && j < sb.lk) {
    const int64_t bo = int64_t(sb.bq) * p.bias_sb + int64_t(h) * p.bias_sh + int64_t(sb.q0 + i) * p.bias_sm +
                       int64_t(sb.k0 + j) * p.bias_sn;
    x += p.bias_is_fp32 ? __ldg(static_cast<const float*>(p.bias) + bo)
                        : Traits<T>::to_float(static_cast<const T*>(p.bias)[bo]);
  }
  float pr = exp2f(x * kLog2e - lse2);
  if (need_mask && (i >= sb.lq || j >= sb.lk || !band.allowed(i, j))) pr = 0.f;
  float z = pr, dz = dp;
  if (p.dropout.p > 0.f) {
    const bool keep = fmha_dropout_keep(p.dropout, int64_t(sb.bq) * p.H + h, int64_t(sb.q0) + i, int64_t(sb.k0) + j);
    z = keep ? pr * p.dropout.rescale : 0.f;
    dz = keep ? dz * p.dropout.rescale : 0.f;
  }
  s = z;
  dp = pr * (dz - dsum);
}

}  // namespace mslk::attention::bwd_detail
