// The contract of the attention-merge ops, shared by the CPU reference and the CUDA kernels
// (torch-free). Shards s = 0..S-1 of attention over disjoint K/V chunks, each with its LSE:
//   forward:  mx = max_s lse_s,  w_s = exp(lse_s - mx),  den = sum_s w_s
//             out = sum_s w_s attn_s / den,  lse_out = mx + log(den)
//             (every lse_s = -inf, or S = 0: out = 0, lse_out = -inf)
//   backward: w_s = exp(lse_s - lse_out) (0 when lse_out = -inf)
//             d_attn_s = w_s d_out,  d_lse_s = w_s (<d_out, attn_s - out> + d_lse_out)
// Rows are (b, m, g, h) of attn [B, M, G, H, K] (K stride 1) and lse [B, G, H, M], float32 LSE.
#pragma once
#include <cstdint>

#include "common/dtype.h"

namespace mslk::attention {

// Shards passed inline; the glue stacks longer lists (forward) or runs them in chunks (backward).
constexpr int kMergeMaxInline = 16;

struct MergeAttnLayout {  // element strides of an attn-shaped tensor [B, M, G, H, K]
  int64_t sb = 0, sm = 0, sg = 0, sh = 0;
};
struct MergeLseLayout {  // element strides of an lse-shaped tensor [B, G, H, M]
  int64_t sb = 0, sg = 0, sh = 0, sm = 0;
};

// Shard s of a list: ptr[s]; of a stacked tensor (stacked = true): ptr[0] + s * split_stride.
struct MergeShards {
  const void* attn[kMergeMaxInline] = {};
  const float* lse[kMergeMaxInline] = {};
  bool stacked = false;
  int64_t attn_split_stride = 0, lse_split_stride = 0;
  MergeAttnLayout a;  // common to every shard
  MergeLseLayout l;
};

struct MergeFwdParams {
  int S = 0;
  int64_t B = 0, M = 0, G = 0, H = 0, K = 0;
  Dtype in_dtype = Dtype::kFloat32, out_dtype = Dtype::kFloat32;
  MergeShards in;
  void* out = nullptr;  // [B, M, G, H, K]
  MergeAttnLayout o;
  float* lse_out = nullptr;  // [B, G, H, M] or null (write_lse = false)
  MergeLseLayout lo;
};

struct MergeBwdParams {
  int S = 0;  // at most kMergeMaxInline: the glue runs chunks
  int64_t B = 0, M = 0, G = 0, H = 0, K = 0;
  Dtype in_dtype = Dtype::kFloat32;  // of attn shards and their gradients
  Dtype out_dtype = Dtype::kFloat32; // of attn_out and grad_attn
  MergeShards in;
  const void* out = nullptr;  // attn_out
  MergeAttnLayout o;
  const void* d_out = nullptr;  // grad_attn
  MergeAttnLayout d;
  const float* lse_out = nullptr;
  MergeLseLayout lo;
  const float* d_lse = nullptr;  // grad_lse, or null (zero)
  MergeLseLayout dl;
  void* d_attn[kMergeMaxInline] = {};  // contiguous [B, M, G, H, K], in_dtype
  float* d_lse_s[kMergeMaxInline] = {};  // contiguous [B, G, H, M]
};

}  // namespace mslk::attention
