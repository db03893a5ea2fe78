// Schemas of the attention domain.
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mslk, m) {
  // Reference (exact, unfused) attention forward: the CPU/general fallback behind
  // mslk.attention.fmha.reference.FwOp.
  //   q [B, Mq, H, K], k [B, Mkv, H, K], v [B, Mkv, H, Kv] (last dim stride 1, other strides
  //   arbitrary), bias: None or a float tensor broadcastable to [B, H, Mq, Mkv] (additive, -inf
  //   masks). Returns out [B, Mq, H, Kv] (dtype output_dtype, default q.dtype) and the natural-log
  //   LSE [B, H, Mq] (float32; float64 for float64 inputs). Rows with every key masked give
  //   out = 0 and lse = -inf.
  m.def(
      "fmha_reference_fwd(Tensor q, Tensor k, Tensor v, Tensor? bias=None, float scale=1.0, "
      "ScalarType? output_dtype=None) -> (Tensor, Tensor)");

  // Fused attention forward (mask from a descriptor, never materialized on CUDA).
  //   q [B, Mq, H, K], k [B, Mkv, H, K], v [B, Mkv, H, Kv]: float16 / bfloat16 on CUDA (the CPU
  //   implementation also takes float32 / float64 through the reference path); last dim stride 1,
  //   other strides arbitrary (expand()ed K/V accepted); K, Kv <= 256.
  //   bias: None or an additive tensor broadcastable to [B, H, Mq, Mkv] (float32 or q's dtype).
  //   Sequences: seqstart_q (int32, num_seqs + 1) makes it variable-length (B == 1): query block s
  //   is rows [seqstart_q[s], seqstart_q[s+1]), its key lane starts at seqstart_k[s] and holds
  //   seqlen_k[s] keys if seqlen_k is given, else seqstart_k[s+1] - seqstart_k[s]. Without
  //   seqstart_q, seqlen_k (int32, B entries) limits batch b to its first seqlen_k[b] keys.
  //   max_seqlen_q: an upper bound of the query block lengths (-1: Mq).
  //   mask_kind: 0 none, 1 causal top-left, 2 causal bottom-right, 3 local bottom-right (non-causal).
  //   With d = j - i - shift (shift = lk - lq for kinds 2 and 3, else 0), key j is allowed for
  //   query i iff (kinds 1, 2: d <= 0), (window_left >= 0: d >= -window_left) and
  //   (window_right >= 0: d <= window_right).
  //   Paged K/V (block_tables given; varlen only): k, v are [1, num_pages * page_size, H, *] and
  //   block_tables (int32 [num_seqs, max_pages]) maps lane s page by page: logical key x of lane s
  //   (x < max_pages * page_size) is physical row block_tables[s, x / page_size] * page_size +
  //   x % page_size. seqstart_k[s] is then the lane-relative start of the keys and seqlen_k[s]
  //   (required) their count.
  //   Returns out [B, Mq, H, Kv] (q's dtype) and lse [B, H, Mq] (float32, natural log; float64 for
  //   float64 on CPU). Rows with no allowed key: out 0, lse -inf.
  m.def(
      "fmha_fused_fwd(Tensor q, Tensor k, Tensor v, Tensor? bias=None, Tensor? seqstart_q=None, "
      "Tensor? seqstart_k=None, Tensor? seqlen_k=None, int max_seqlen_q=-1, int mask_kind=0, "
      "int window_left=-1, int window_right=-1, float scale=1.0, Tensor? block_tables=None, "
      "int page_size=0, float dropout_p=0.0, Tensor? rng_state=None) -> (Tensor, Tensor)");

  // Dropout of the fused ops (kernels/fmha_dropout.h): with dropout_p in (0, 1), the probability
  // P[i, j] of (batch b, head h) is kept, and scaled by 1 / (1 - dropout_p), iff
  // fmha_dropout_keep(seed, offset, b * H + h, i, j), where i, j are q / k rows in the packed
  // [B, M, H, *] tensors (varlen: rows of the packed batch) and rng_state is an int64 CPU tensor
  // [seed, offset]. The LSE is that of the undropped softmax. The same rng_state in the backward
  // gives the same mask.

  // Split-K decode attention (fmha_decode.h): few queries against a long K/V cache, one pass over
  // each K/V head for its R query heads. q [B, Mq, Hkv, R, K], k [B, Mkv, Hkv, K], v [B, Mkv, Hkv, Kv]
  // (last dim stride 1); the sequence, paged and mask arguments are those of fmha_fused_fwd.
  // num_splits: key splits per (sequence, K/V head) (0: a heuristic; the result does not depend on
  // it beyond rounding). Returns out [B, Mq, Hkv, R, Kv] (output_dtype, default q's dtype) and lse
  // [B, Hkv, R, Mq] (float32, natural log; float64 for float64 on CPU).
  // Quantized caches: int32 k, v in the layouts of kernels/kv_dequant.h, FP8 rows [.., D // 4] with
  // k_scale_shift / v_scale_shift ([B, Mkv, Hkv], int32 fp16 pairs or float32 scales) or INT4 rows
  // [.., D // 8 + G]; the result is that of the caches dequantized to q's dtype (Kv = D).
  m.def(
      "fmha_decode_splitk(Tensor q, Tensor k, Tensor v, Tensor? seqstart_q=None, Tensor? seqstart_k=None, "
      "Tensor? seqlen_k=None, int max_seqlen_q=-1, int mask_kind=0, int window_left=-1, int window_right=-1, "
      "float scale=1.0, Tensor? block_tables=None, int page_size=0, int num_splits=0, "
      "ScalarType? output_dtype=None, Tensor? k_scale_shift=None, Tensor? v_scale_shift=None) -> (Tensor, Tensor)");

  // The split count fmha_decode_splitk picks for num_splits=0 (triton_splitk.FwOp.get_split_k):
  // pairs = sequences x K/V heads x 16-row chunks of (query heads per K/V head x queries), keys per
  // sequence, head dim, the device's SM count; tile_cfg -1 is the kernel's default row.
  m.def("fmha_decode_num_splits(int pairs, int keys, int head_dim, int sms, int tile_cfg=-1) -> int");

  // Fused attention backward: gradients of fmha_fused_fwd for the same descriptor (no paged K/V).
  //   grad_out, out [B, Mq, H, Kv]; lse [B, H, Mq] float32 (float64 for float64 on CPU) as the
  //   forward returned it (varlen: packed [1, H, total_Mq]). max_seqlen_k: an upper bound of the
  //   key lane lengths (-1: Mkv). Returns dq [B, Mq, H, K], dk [B, Mkv, H, K], dv [B, Mkv, H, Kv]
  //   (contiguous, the inputs' dtype; per head, so an expand()ed K/V gets per-head gradients that
  //   the caller sums), and dbias in bias's shape and dtype when bias_requires_grad (else an empty
  //   tensor). deterministic: bit-identical results across runs (dq without atomics).
  m.def(
      "fmha_fused_bwd(Tensor grad_out, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, "
      "Tensor? bias=None, Tensor? seqstart_q=None, Tensor? seqstart_k=None, Tensor? seqlen_k=None, "
      "int max_seqlen_q=-1, int max_seqlen_k=-1, int mask_kind=0, int window_left=-1, "
      "int window_right=-1, float scale=1.0, float dropout_p=0.0, Tensor? rng_state=None, "
      "bool bias_requires_grad=False, bool deterministic=False) -> (Tensor, Tensor, Tensor, Tensor)");

  // The dropout keep-mask of the fused ops, [B, H, Mq, Mkv] bool, for tests and debugging.
  m.def("fmha_dropout_mask(Tensor rng_state, int B, int H, int Mq, int Mkv, float dropout_p, Device device) -> Tensor");

  // Attention merge (merge_params.h): shards attn [B, M, G, H, Kq] (last stride 1) with LSE
  // [B, G, H, M] float32 -> the attention over every shard's keys, and its LSE when write_lse.
  m.def(
      "fmha_merge_attentions_varargs(Tensor[] attn_split, Tensor[] lse_split, bool write_lse, "
      "ScalarType? output_dtype, int B, int M, int G, int H, int Kq) -> Tensor[]");
  m.def(
      "merge_attentions_varargs_backward(Tensor[] attn_split, Tensor[] lse_split, Tensor attn_out, "
      "Tensor lse_out, Tensor grad_attn, Tensor? grad_lse) -> (Tensor[], Tensor[])");
  // In place (triton_splitk.merge_attentions): attn_split [S, B, M, G, H, K], lse_split [S, B, G, H, M].
  m.def(
      "_fmha_merge_attentions_into(Tensor(a!) attn_out, Tensor(b!)? lse_out, Tensor attn_split, "
      "Tensor lse_split) -> ()");
}
