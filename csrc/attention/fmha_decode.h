// Torch glue shared by the CPU and CUDA implementations of mslk::fmha_decode_splitk (schema in
// attention_ops.cpp): the argument bundle and its checks.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include <tuple>

namespace mslk::attention {

struct FmhaDecodeArgs {
  const at::Tensor& q;  // [B, Mq, Hkv, R, K]
  const at::Tensor& k;  // [B, Mkv, Hkv, K]
  const at::Tensor& v;  // [B, Mkv, Hkv, Kv]
  const std::optional<at::Tensor>& seqstart_q;
  const std::optional<at::Tensor>& seqstart_k;
  const std::optional<at::Tensor>& seqlen_k;
  int64_t max_seqlen_q;
  int64_t mask_kind;
  int64_t window_left;
  int64_t window_right;
  double scale;
  const std::optional<at::Tensor>& block_tables;
  int64_t page_size;
  int64_t num_splits;
  std::optional<at::ScalarType> output_dtype;
};

constexpr const char* kDecodeOp = "mslk::fmha_decode_splitk";
constexpr int64_t kDecodeMaxSplits = 1024;

// Shapes, dtypes, devices and the descriptor (through fmha_fwd_check, on q's first head of each
// group); no device sync. Returns the output dtype.
at::ScalarType fmha_decode_check(const FmhaDecodeArgs& a);

// The exact decode (after fmha_decode_check; unquantized K/V): each K/V head expanded to its query
// heads in float32 (float64 for float64), then the exact fused-forward reference (fmha_fwd_exact),
// out cast to out_dtype. The CPU backend's implementation; on the GPU the path for head dims the
// kernel does not take. max_copy_bytes > 0: K/V heads a few at a time, so that one group's
// expanded K/V copy stays near that size, and the scores in chunks (bounded memory).
std::tuple<at::Tensor, at::Tensor> fmha_decode_exact(const FmhaDecodeArgs& a, at::ScalarType out_dtype,
                                                     int64_t max_copy_bytes);

}  // namespace mslk::attention
