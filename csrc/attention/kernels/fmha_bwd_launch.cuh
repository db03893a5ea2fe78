// Launch of the fused attention backward's per-head-dim kernels (fmha_bwd_kernel.cuh and, in
// deterministic mode, fmha_bwd_dq_kernel.cuh); included by the instantiation TUs fmha_bwd_d*.cu.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "attention/kernels/fmha_bwd_dq_kernel.cuh"
#include "attention/kernels/fmha_bwd_kernel.cuh"
#include "common/device_attrs.h"

namespace mslk::attention::bwd_detail {

// Tiles per padded head dim: main kernel BN keys x BM queries with WN warps per 16-key block
// (the dK / dV columns split WN ways), dQ kernel BM_DQ queries x BN_DQ keys.
template <int D> struct Cfg;
template <> struct Cfg<64> { static constexpr int BN = 128, BM = 64, WN = 1, BM_DQ = 64, BN_DQ = 64; };
template <> struct Cfg<128> { static constexpr int BN = 64, BM = 64, WN = 2, BM_DQ = 64, BN_DQ = 64; };
template <> struct Cfg<256> { static constexpr int BN = 64, BM = 64, WN = 2, BM_DQ = 64, BN_DQ = 32; };

template <typename Kernel>
cudaError_t raise_smem(Kernel kern, mslk::cuda::SmemLimitOnce& limit, size_t smem) {
  int dev = 0;
  const cudaError_t err = cudaGetDevice(&dev);
  return err == cudaSuccess ? limit.ensure(kern, dev, smem) : err;
}

template <typename T, int D>
cudaError_t launch(const FmhaBwdParams& p, const FmhaBwdScratch& w, cudaStream_t stream) {
  using C = Cfg<D>;
  // Dense problems: every lane holds at most Mkv keys and every block Mq queries.
  const int max_k = p.seqstart_q != nullptr ? p.max_seqlen_k : p.Mkv;
  const int max_q = p.seqstart_q != nullptr ? p.max_seqlen_q : p.Mq;
  if (p.num_seqs <= 0 || p.H <= 0) return cudaSuccess;
  if (max_k > 0) {
    using M = MainTile<D, C::BN, C::BM, C::WN>;
    const size_t smem = M::template smem_bytes<T>();
    auto kern = fmha_bwd_kernel<T, D, C::BN, C::BM, C::WN>;
    static mslk::cuda::SmemLimitOnce limit;
    if (const cudaError_t err = raise_smem(kern, limit, smem); err != cudaSuccess) return err;
    const dim3 grid((max_k + C::BN - 1) / C::BN, p.H, p.num_seqs);
    kern<<<grid, M::kThreads, smem, stream>>>(p, w);
    if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;
  }
  if (w.dq_accum == nullptr && max_q > 0) {
    using Q = DqTile<D, C::BM_DQ, C::BN_DQ>;
    const size_t smem = Q::template smem_bytes<T>();
    auto kern = fmha_bwd_dq_kernel<T, D, C::BM_DQ, C::BN_DQ>;
    static mslk::cuda::SmemLimitOnce limit;
    if (const cudaError_t err = raise_smem(kern, limit, smem); err != cudaSuccess) return err;
    const dim3 grid((max_q + C::BM_DQ - 1) / C::BM_DQ, p.H, p.num_seqs);
    kern<<<grid, Q::kThreads, smem, stream>>>(p, w);
    return cudaGetLastError();
  }
  return cudaSuccess;
}

template <int D>
cudaError_t launch_dtype(const FmhaBwdParams& p, const FmhaBwdScratch& w, cudaStream_t stream) {
  return p.is_bf16 ? launch<__nv_bfloat16, D>(p, w, stream) : launch<__half, D>(p, w, stream);
}

}  // namespace mslk::attention::bwd_detail
