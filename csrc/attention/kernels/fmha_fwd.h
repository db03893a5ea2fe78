// Fused attention forward (FlashAttention-2 style, SM80+ mma.sync). Torch-free interface: raw
// pointers, sizes and element strides. See fmha_fwd_kernel.cuh for the algorithm.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "attention/kernels/fmha_dropout.h"

namespace mslk::attention {

enum FmhaMaskKind : int {
  kMaskNone = 0,             // every key (windows, if set, are relative to shift 0)
  kMaskCausalTopLeft = 1,    // key j allowed iff j - i <= 0
  kMaskCausalBottomRight = 2,// key j allowed iff j - i <= lk - lq
  kMaskLocalBottomRight = 3, // no causal cut; windows relative to shift = lk - lq
};

// Within one (query sequence, key lane) block of lq queries and lk keys, with d = j - i and
// shift = (kind is bottom-right ? lk - lq : 0), key j is allowed for query i iff
//   (causal kinds: d - shift <= 0) and (window_left  < 0 or d - shift >= -window_left)
//                                  and (window_right < 0 or d - shift <=  window_right).
// A causal local window of w keys (diagonal included) is window_left = w - 1.
struct FmhaFwdParams {
  const void* q;  // [B, Mq, H, K], element strides below, last stride 1
  const void* k;  // [B, Mkv, H, K]
  const void* v;  // [B, Mkv, H, Kv]
  void* out;      // [B, Mq, H, Kv], element strides below, last stride 1
  float* lse;     // [B, H, Mq] contiguous, natural log
  int64_t q_sb, q_sm, q_sh;
  int64_t k_sb, k_sm, k_sh;
  int64_t v_sb, v_sm, v_sh;
  int64_t o_sb, o_sm, o_sh;
  // Additive bias broadcastable to [B, H, Mq, Mkv] (element strides, 0 where broadcast), or null.
  const void* bias;
  int bias_is_fp32;  // 1: float32, 0: same dtype as q
  int64_t bias_sb, bias_sh, bias_sm, bias_sn;
  int B, H, Mq, Mkv;
  int K, Kv;  // multiples of 8, <= 256
  // Sequences. seqstart_q != null: varlen (B == 1), num_seqs blocks; query block s is rows
  // [seqstart_q[s], seqstart_q[s+1]); its key lane starts at seqstart_k[s] and holds
  // seqlen_k ? seqlen_k[s] : seqstart_k[s+1] - seqstart_k[s] keys. seqstart_q == null: sequence
  // s is batch s (num_seqs == B) with Mq queries and seqlen_k ? seqlen_k[s] : Mkv keys.
  const int* seqstart_q;
  const int* seqstart_k;
  const int* seqlen_k;
  int num_seqs;
  // Paged K/V (block_table != null; varlen only): logical key x of lane s is row
  // block_table[s * bt_stride + x / page_size] * page_size + x % page_size of k / v (batch 0);
  // rows outside [0, kv_rows) read as zeros. Lane s's keys are x in [seqstart_k[s], + seqlen_k[s]),
  // within the lane's bt_cols * page_size logical keys.
  const int* block_table;
  int64_t bt_stride;
  int page_size;
  int bt_cols;
  int64_t kv_rows;
  int max_seqlen_q;  // upper bound of the query block lengths (grid size)
  int mask_kind;
  int64_t window_left, window_right;  // < 0: unbounded
  float scale;
  int is_bf16;  // 1: bfloat16, 0: float16
  // Scratch from the caller (fmha_fwd_workspace_bytes), or null: the sm90 kernel's stream-K tail
  // keeps its float32 partials there; without it the tail runs whole tiles.
  void* workspace;
  int64_t workspace_bytes;
  // Dropout of P (p == 0: none); only the FA2 kernel applies it (the sm90 kernel declines p > 0).
  FmhaDropout dropout;
};

// Which kernel runs (MSLK_FMHA_KERNEL): the Hopper kernel where it takes the problem on an sm_90
// device, else FA2 (kAuto); always FA2 (kSm80); the Hopper kernel or cudaErrorNotSupported (kSm90).
enum class FmhaKernelChoice { kAuto, kSm80, kSm90 };

// Switches of the fused forward, filled by the torch glue from the environment (env.h) and passed
// beside the params: the kernel layer reads no environment. The defaults are "variable unset".
struct FmhaFwdTuning {
  FmhaKernelChoice kernel = FmhaKernelChoice::kAuto;
  int sm90_cfg = -1;       // MSLK_FMHA_SM90_CFG: this kTileCfgs row for problems of its head dim; -1: by problem
  int sm90_l2_mib = -1;    // MSLK_FMHA_SM90_L2_MIB: K/V MiB per L2 section; -1: kL2SectionMiB, 0: one section
  int sm90_stream_k = -1;  // MSLK_FMHA_SM90_STREAMK: -1 by the waste threshold, 0 never, 1 wherever SMs idle
  bool sm90_o_tma = true;  // MSLK_FMHA_SM90_OTMA: O through shared memory and TMA stores where the row allows
  bool sm90_o_vec = true;  // MSLK_FMHA_SM90_OVEC: 16-byte O stores where aligned (else 4-byte pairs)
  bool sm90_bias_tma = true;  // MSLK_FMHA_SM90_BIAS_TMA: tensor-bias tiles by TMA where the bias allows
};

// Launches on `stream`; returns the launch error (cudaSuccess when nothing to do).
cudaError_t fmha_fwd(const FmhaFwdParams& p, const FmhaFwdTuning& t, cudaStream_t stream);
// Bytes of p.workspace the kernel fmha_fwd picks would use (0: none). Host-only; call it with
// every other field set and the device current.
int64_t fmha_fwd_workspace_bytes(const FmhaFwdParams& p, const FmhaFwdTuning& t);

// One instantiation per padded head dim (64, 128, 256), each in its own TU.
cudaError_t fmha_fwd_d64(const FmhaFwdParams& p, cudaStream_t stream);
cudaError_t fmha_fwd_d128(const FmhaFwdParams& p, cudaStream_t stream);
cudaError_t fmha_fwd_d256(const FmhaFwdParams& p, cudaStream_t stream);

}  // namespace mslk::attention
