// Split-K decode attention (few queries per sequence against a long K/V cache). Torch-free
// interface: raw pointers, sizes and element strides. Algorithm: fmha_decode_kernel.cuh.
//
// Query heads are grouped by the K/V head they read: q is [B, Mq, Hkv, R, K] (R query heads per
// K/V head: GQA / MQA), k [B, Mkv, Hkv, K], v [B, Mkv, Hkv, Kv]. One CTA reads the keys of one
// (sequence, K/V head, split) once for all R x (query block) rows of the group. Sequences, paged
// K/V and masks follow FmhaFwdParams (kernels/fmha_fwd.h) field for field.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace mslk::attention {

struct FmhaDecodeParams {
  const void* q;  // [B, Mq, Hkv, R, K], element strides below, last stride 1
  const void* k;  // [B, Mkv, Hkv, K]
  const void* v;  // [B, Mkv, Hkv, Kv]
  int64_t q_sb, q_sm, q_sg, q_sh;
  int64_t k_sb, k_sm, k_sg;
  int64_t v_sb, v_sm, v_sg;
  // Per split s: attention over the split's keys, float32, contiguous
  //   o_part [S, B, Mq, Hkv, R, Kv] and lse_part [S, B, Hkv, R, Mq] (natural log; -inf and O = 0
  //   where the split holds no allowed key). Rows outside every query block are not written.
  float* o_part;
  float* lse_part;
  // One split (num_splits == 1) without varlen: the kernel writes the final output itself, O in
  // o_kind (0 float32 into o_part, 1 float16 / 2 bfloat16 into o_out) and the LSE into lse_part,
  // and no merge pass runs. o_kind is 0 whenever o_out is null.
  void* o_out;
  int o_kind;
  // Splits merged in the split kernel (merge_ctr != null; fmha_decode_merge.cuh): the last CTA of a
  // (sequence x row chunk, K/V head) pair to finish merges the splits' partials into merged_out
  // ([B, Mq, Hkv, R, Kv] in merged_kind, as o_kind) and merged_lse ([B, Hkv, R, Mq]); under varlen the
  // kernel also writes the rows outside every query block there (O = 0, LSE -inf). merge_ctr holds a
  // word a pair (grid z x Hkv + y), token << 16 | count; merge_token is this launch's (48 bits, not 0).
  void* merged_out;
  float* merged_lse;
  int merged_kind;
  unsigned long long* merge_ctr;
  unsigned long long merge_token;
  int B, Mq, Mkv, Hkv, R;
  int K, Kv;  // multiples of 8, <= 256
  // Sequences, as FmhaFwdParams: seqstart_q != null is varlen (B == 1).
  const int* seqstart_q;
  const int* seqstart_k;
  const int* seqlen_k;
  int num_seqs;
  // Paged K/V, as FmhaFwdParams.
  const int* block_table;
  int64_t bt_stride;
  int page_size;
  int bt_cols;
  int64_t kv_rows;
  int max_seqlen_q;  // upper bound of the query block lengths (grid size)
  int mask_kind;     // FmhaMaskKind
  int64_t window_left, window_right;
  float scale;
  int is_bf16;
  int num_splits;  // S >= 1 (fmha_decode_plan.h's heuristic when the caller asks for it)
  int tile_cfg;    // row of the kernel's DecodeCfg table (fmha_decode_plan.h unless forced)
  // Quantized K/V caches, dequantized in the kernel (kv_quant != kKvPlain): k and v are int32 rows of
  // kv_row_words words (the layouts of kv_dequant.h; k_s* / v_s* then count words), and K == Kv is the
  // logical head dim. FP8: the row's scale/shift word sits in k_ss / v_ss ([B, Mkv, Hkv] at the ks_* /
  // vs_* element strides; float32 scales when ss_fp32, else fp16 scale/shift pairs). INT4: kv_groups
  // scale/shift words lead each row. kv_vec16: rows, strides and base pointers allow 16-byte copies.
  int kv_quant;
  int kv_groups;
  int kv_row_words;
  int kv_vec16;
  const void* k_ss;
  const void* v_ss;
  int64_t ks_sb, ks_sm, ks_sg;
  int64_t vs_sb, vs_sm, vs_sg;
  int ss_fp32;
  // Fold the rows' scale/shift outside the MMAs (FP8, INT4 with kv_groups == 1; fmha_decode_kernel.cuh).
  int kv_fold;
  // Folded FP8 through register fragments where they apply (head dim 64 or 128 == K == Kv,
  // kv_vec16, tile row 2; fmha_decode_kernel.cuh), else the folded kernel.
  int kv_regs;
};

// The most splits the split kernel merges itself (FmhaDecodeParams::merge_ctr).
inline constexpr int kMaxMergedSplits = 128;

// FmhaDecodeParams::kv_quant.
enum FmhaDecodeKv : int { kKvPlain = 0, kKvFp8 = 1, kKvInt4 = 2 };

// Launches the split kernel on `stream` (the caller merges the splits); cudaErrorInvalidValue for
// a shape it does not take (K or Kv > 256 or not a multiple of 8; a quantized cache with K != Kv or
// a tile row other than fmha_decode_tile_cfg's).
cudaError_t fmha_decode_splits(const FmhaDecodeParams& p, cudaStream_t stream);

// One instantiation per padded head dim, each in its own TU.
cudaError_t fmha_decode_d64(const FmhaDecodeParams& p, cudaStream_t stream);
cudaError_t fmha_decode_d128(const FmhaDecodeParams& p, cudaStream_t stream);
cudaError_t fmha_decode_d256(const FmhaDecodeParams& p, cudaStream_t stream);
// The quantized-cache kernels (FP8 and INT4), one TU per padded head dim.
cudaError_t fmha_decode_quant_d64(const FmhaDecodeParams& p, cudaStream_t stream);
cudaError_t fmha_decode_quant_d128(const FmhaDecodeParams& p, cudaStream_t stream);
cudaError_t fmha_decode_quant_d256(const FmhaDecodeParams& p, cudaStream_t stream);
// Folded quantized caches (kv_fold: FP8, INT4 with one group), one TU per padded head dim.
cudaError_t fmha_decode_fold_d64(const FmhaDecodeParams& p, cudaStream_t stream);
cudaError_t fmha_decode_fold_d128(const FmhaDecodeParams& p, cudaStream_t stream);
cudaError_t fmha_decode_fold_d256(const FmhaDecodeParams& p, cudaStream_t stream);
// Folded FP8 through register fragments (kv_regs), head dims 64 and 128 (one TU).
cudaError_t fmha_decode_regs_d64(const FmhaDecodeParams& p, cudaStream_t stream);
cudaError_t fmha_decode_regs_d128(const FmhaDecodeParams& p, cudaStream_t stream);

}  // namespace mslk::attention
