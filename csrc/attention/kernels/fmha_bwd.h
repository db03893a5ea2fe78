// Fused attention backward: the gradients of fmha_fwd (fmha_fwd.h) for the same descriptor.
// Torch-free interface: raw pointers, sizes and element strides.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "attention/kernels/fmha_dropout.h"
#include "attention/kernels/fmha_fwd.h"

namespace mslk::attention {

// Mask, sequence and bias fields mean what they mean in FmhaFwdParams (no paged K/V here).
struct FmhaBwdParams {
  const void* q;     // [B, Mq, H, K]
  const void* k;     // [B, Mkv, H, K]
  const void* v;     // [B, Mkv, H, Kv]
  const void* out;   // [B, Mq, H, Kv], the forward's output
  const void* dout;  // [B, Mq, H, Kv]
  const float* lse;  // [B, H, Mq] contiguous, natural log (-inf: row with no allowed key)
  void* dq;          // [B, Mq, H, K] outputs, element strides below, last stride 1
  void* dk;          // [B, Mkv, H, K]
  void* dv;          // [B, Mkv, H, Kv]
  int64_t q_sb, q_sm, q_sh;
  int64_t k_sb, k_sm, k_sh;
  int64_t v_sb, v_sm, v_sh;
  int64_t o_sb, o_sm, o_sh;
  int64_t do_sb, do_sm, do_sh;
  int64_t dq_sb, dq_sm, dq_sh;
  int64_t dk_sb, dk_sm, dk_sh;
  int64_t dv_sb, dv_sm, dv_sh;
  // Additive bias (read only: its gradient is not computed by the fused kernels), or null.
  const void* bias;
  int bias_is_fp32;
  int64_t bias_sb, bias_sh, bias_sm, bias_sn;
  int B, H, Mq, Mkv;
  int K, Kv;  // multiples of 8, <= 256
  const int* seqstart_q;
  const int* seqstart_k;
  const int* seqlen_k;
  int num_seqs;
  int max_seqlen_q;  // upper bounds of the query block / key lane lengths (grid sizes)
  int max_seqlen_k;
  int mask_kind;
  int64_t window_left, window_right;  // < 0: unbounded
  float scale;
  int is_bf16;  // 1: bfloat16, 0: float16
  FmhaDropout dropout;
  int deterministic;  // 1: dq in a fixed order (no atomics), bit-identical across runs
  // Scratch from the caller, fmha_bwd_workspace_bytes(p) bytes, uninitialized (fmha_bwd clears
  // what it needs on the stream).
  void* workspace;
  int64_t workspace_bytes;
  int no_sm90;  // 1: fmha_bwd skips the Hopper kernel (fmha_bwd_sm90.h) and runs the FA2 one
  // 1: the Hopper kernel adds its dQ parts to tile-contiguous sums by one bulk reduction a tile
  // and warpgroup (fmha_bwd_dq_tiles.h, where dq_tiles_used), instead of 8-byte atomics into
  // [B, Mq, H, K] sums. Their conversion writes only the rows of the query blocks: rows outside
  // every varlen block keep what dq held (the torch glue passes zeros).
  int sm90_dq_tiles;
  // 1: head dim 256 (K == Kv) runs the Hopper kernel too (fmha_bwd_sm90_d256_kernel.cuh), else FA2.
  int sm90_d256;
};

// Launches on `stream`; returns the launch error (cudaSuccess when nothing to do).
// cudaErrorNotSupported: a problem the fused backward does not take (the glue falls back).
cudaError_t fmha_bwd(const FmhaBwdParams& p, cudaStream_t stream);  // Hopper kernel where it takes p
// Bytes of p.workspace fmha_bwd needs. Host-only; call it with every other field set.
int64_t fmha_bwd_workspace_bytes(const FmhaBwdParams& p);
// Whether fmha_bwd takes the problem (dtype, head dims, device) without launching.
bool fmha_bwd_supports(const FmhaBwdParams& p);

}  // namespace mslk::attention
