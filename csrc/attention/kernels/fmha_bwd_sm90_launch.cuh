// Host side of the Hopper attention backward (fmha_bwd_sm90_kernel.cuh): tensor maps and the launch
// of one head dim. Included by the instantiation TUs fmha_bwd_sm90_d*.cu.
#pragma once
#include "attention/kernels/fmha_bwd_sm90_d256_kernel.cuh"
#include "attention/kernels/fmha_bwd_sm90_kernel.cuh"
#include "attention/kernels/fmha_bwd_impl.h"

#if MSLK_HAS_CUTLASS
#include "attention/kernels/fmha_fwd_sm90_launch.cuh"  // encode_map: the forward's tensor maps
#include "common/device_attrs.h"

namespace mslk::attention::sm90_bwd {

// One kernel: Tr its traits (kD, kBM, kBN, kThreads), smem_storage its shared storage's bytes (a
// template argument, so that each kernel has its own shared-memory cap record).
template <class Tr, auto kern>
cudaError_t launch_kernel(size_t smem_storage, const FmhaBwdParams& p, const FmhaBwdScratch& w, cudaStream_t stream) {
  constexpr int D = Tr::kD;
  if (p.K != D || p.Kv != D || w.dq_accum == nullptr) return cudaErrorNotSupported;
  const int max_k = p.seqstart_q != nullptr ? p.max_seqlen_k : p.Mkv;
  if (p.num_seqs <= 0 || p.H <= 0 || max_k <= 0) return cudaSuccess;
  Args a{};
  a.p = p;
  a.dsum = w.dsum;
  a.dq_accum = w.dq_accum;
  a.scale_log2 = p.scale * 1.4426950408889634f;
  const bool bf16 = p.is_bf16 != 0;
  if (!sm90::encode_map(&a.tq, p.q, bf16, p.K, p.Mq, p.H, p.B, p.q_sm, p.q_sh, p.q_sb, Tr::kBM, &a.q_hm, &a.q_bm) ||
      !sm90::encode_map(&a.tdo, p.dout, bf16, p.Kv, p.Mq, p.H, p.B, p.do_sm, p.do_sh, p.do_sb, Tr::kBM, &a.do_hm,
                        &a.do_bm) ||
      !sm90::encode_map(&a.tk, p.k, bf16, p.K, p.Mkv, p.H, p.B, p.k_sm, p.k_sh, p.k_sb, Tr::kBN, &a.k_hm, &a.k_bm) ||
      !sm90::encode_map(&a.tv, p.v, bf16, p.Kv, p.Mkv, p.H, p.B, p.v_sm, p.v_sh, p.v_sb, Tr::kBN, &a.v_hm, &a.v_bm))
    return cudaErrorNotSupported;
  const size_t smem = smem_storage + 1024;  // + the 1024-byte alignment pad
  static mslk::cuda::SmemLimitOnce smem_limit;
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err == cudaSuccess) err = smem_limit.ensure(kern, dev, smem);
  if (err != cudaSuccess) return err;
  const dim3 grid((max_k + Tr::kBN - 1) / Tr::kBN, p.H, p.num_seqs);
  kern<<<grid, Tr::kThreads, smem, stream>>>(a);
  return cudaGetLastError();
}

template <typename Element, int D, int V = kVariant>
cudaError_t launch(const FmhaBwdParams& p, const FmhaBwdScratch& w, cudaStream_t stream) {
  constexpr int BM = bm_of<V>();
  return launch_kernel<Traits<Element, D, BM>, fmha_bwd_sm90_kernel<Element, D, V>>(
      sizeof(SharedStorage<Element, D, BM>), p, w, stream);
}

template <typename Element>
cudaError_t launch_d256(const FmhaBwdParams& p, const FmhaBwdScratch& w, cudaStream_t stream) {
  return launch_kernel<TraitsD256<Element>, fmha_bwd_sm90_d256_kernel<Element>>(sizeof(SharedStorageD256<Element>),
                                                                               p, w, stream);
}

template <int D, int V>
cudaError_t launch_dtype(const FmhaBwdParams& p, const FmhaBwdScratch& w, cudaStream_t stream) {
  return p.is_bf16 ? launch<cutlass::bfloat16_t, D, V>(p, w, stream) : launch<cutlass::half_t, D, V>(p, w, stream);
}

// The library's kernels: kLibraryVariant, with the tile-contiguous dQ sums where dq_tiles_used.
template <int D>
cudaError_t launch_library(const FmhaBwdParams& p, const FmhaBwdScratch& w, cudaStream_t stream) {
  return dq_tiles_used(p) ? launch_dtype<D, kLibraryVariant<D, true>>(p, w, stream)
                          : launch_dtype<D, kLibraryVariant<D, false>>(p, w, stream);
}

}  // namespace mslk::attention::sm90_bwd
#endif  // MSLK_HAS_CUTLASS
