// Parameters of the MoE routing / token-movement ops: raw pointers and sizes, shared by the
// torch glue (moe.cpp), the CPU reference (moe_cpu.cpp) and the CUDA kernels (kernels/*.cu).
#pragma once
#include <cstdint>

#include "common/dtype.h"
#include <cstring>

#ifdef __CUDACC__
#define MSLK_HD __host__ __device__ __forceinline__
#else
#define MSLK_HD inline
#endif

namespace mslk::moe {

// Routing order of index_shuffling (that of torch.topk): larger score first; NaN above +inf;
// -0.0 equals +0.0; equal scores: the lower expert index first. topk_key orders scores as
// unsigned integers; topk_rank packs (key, expert) so that a larger value ranks first.
MSLK_HD uint32_t topk_key(float f) {
  if (f != f) return 0xFFFFFFFFu;
  if (f == 0.f) f = 0.f;
  uint32_t u;
  memcpy(&u, &f, 4);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
MSLK_HD uint64_t topk_rank(float f, uint32_t expert) {
  return (static_cast<uint64_t>(topk_key(f)) << 32) | static_cast<uint32_t>(~expert);
}

using mslk::Dtype;
inline int dtype_size(Dtype d) { return d == Dtype::kFloat32 ? 4 : 2; }

// A device (or host) scalar count that may be absent: ptr == nullptr means "no limit".
struct Count {
  const void* ptr = nullptr;
  bool int64 = false;
};

constexpr int kMaxExperts = 512;  // index_shuffling: E <= 512 (experts held in one warp's registers)
constexpr int kMaxTopK = 8;       // index_shuffling: top_k <= 8

struct IndexShufflingParams {
  const void* scores;  // [T, E], strided
  Dtype dtype;
  int64_t T, E, stride_t, stride_e;
  int expert_start, expert_end, top_k;
  Count valid;               // tokens >= valid are not routed
  int32_t* counts;           // [E + 2]
  int32_t* expert_indices;   // [T * top_k]
  int32_t* token_indices;    // [T * top_k]
  int32_t* workspace;        // CUDA only: index_shuffling_workspace_ints(T, E, top_k) ints
};
// CUDA: at most index_shuffling_max_ctas(T) CTAs (>= 64 tokens each); the workspace holds their
// per-expert counts [max_ctas][E], the expert totals [E], then one int16 expert per (token, k)
// slot (used when the slots of a CTA do not fit its shared memory). No zeroing needed.
constexpr int64_t kShuffleMaxCtas = 1024;
MSLK_HD int64_t index_shuffling_max_ctas(int64_t T) {
  const int64_t c = (T + 63) / 64;
  return c < 1 ? 1 : (c > kShuffleMaxCtas ? kShuffleMaxCtas : c);
}
inline int64_t index_shuffling_workspace_ints(int64_t T, int64_t E, int64_t top_k) {
  return (index_shuffling_max_ctas(T) + 1) * E + (T * top_k + 1) / 2;
}

// out[i] = x[tok[i]] * scores[tok[i], exp[i]] for i < min(valid, A); quantized variant also.
struct GatherParams {
  const void* x;  // [T, D] contiguous
  Dtype dtype;
  int64_t T, D, A;
  const void* tok;  // [A]
  const void* exp;  // [A]
  bool idx64;
  const void* scores;  // [T, E] strided
  Dtype score_dtype;
  int64_t E, stride_t, stride_e;
  Count valid;
  void* out;             // [A, D] (x dtype, or fp8 bytes)
  float* out_scale;      // [A] (quantized variant)
  const float* scale_ub; // nullable, one float
};

// out[tok[i]] += in[i] for i < min(valid, A), in ascending i, rounded to the dtype after every
// row (as the CPU reference). CUDA: a stable sort of the rows by token (radix, 8-bit digits),
// then one pass per output row; deterministic and bit-identical to the CPU reference.
struct ScatterAddParams {
  void* out;  // [N, D]
  const void* in;  // [A, D]
  Dtype dtype;
  int64_t N, D, A;
  const void* tok;  // [A]
  bool idx64;
  Count valid;
  int32_t* workspace;  // CUDA only: scatter_add_dense_workspace_ints(A, N) ints, no zeroing needed
};
// CUDA: at most scatter_add_max_ctas(A) CTAs (>= 256 rows each) sort the rows; the workspace holds
// two (key, row) buffers [4][A], the per-CTA digit counts [max_ctas][256] and the row range of
// every output token [N][2].
constexpr int64_t kScatterMaxCtas = 1024;
MSLK_HD int64_t scatter_add_max_ctas(int64_t A) {
  const int64_t c = (A + 255) / 256;
  return c < 1 ? 1 : (c > kScatterMaxCtas ? kScatterMaxCtas : c);
}
inline int64_t scatter_add_dense_workspace_ints(int64_t A, int64_t N) {
  return 4 * A + scatter_add_max_ctas(A) * 256 + 2 * N;
}

// in [EP, T, D]; counts [E]; tok [T]; out [N, D]. Slot s (< sum counts) belongs to the expert e
// with prefix[e] <= s < prefix[e+1]; out[tok[s]] += in[e / (E/EP), s].
struct ScatterPaddedParams {
  const void* in;
  Dtype dtype;
  int64_t EP, T, D, E, N;
  const void* counts;
  bool counts64;
  const void* tok;
  bool idx64;
  void* out;
  int64_t* workspace;  // CUDA only: E + 1 int64
};

// tokens [T, D] (elem_size bytes each); counts [EP, E]; experts [start, start + EG).
struct ShufflingParams {
  const void* in;
  void* out;
  int64_t T, row_bytes;
  const void* counts;
  bool counts64;
  int64_t EP, E, expert_start, EG;
  bool padded, combine;
  void* out_counts;     // combine only: [EG + 1], counts dtype
  int64_t* workspace;   // CUDA only: 3 * EP * EG int64 (input offset, output offset, rows)
};
constexpr int64_t kMaxShufflingCounts = 8192;  // CUDA: EP * E <= 8192 (counts staged in shared memory)

// y = silu(x0) * x1 (row-wise); quantized variant: rowwise FP8 + reciprocal scale.
struct SiluMulParams {
  const void* x0;
  const void* x1;
  Dtype dtype;
  int64_t T, D, stride0, stride1;
  Count valid;
  void* out;  // [T, D] contiguous
  float* out_scale;
  const float* scale_ub;
};

struct ScatterFirstDimParams {
  void* dst;  // [N, K] contiguous
  const void* src;  // [M, K] contiguous
  Dtype dtype;
  int64_t N, M, K;
  const void* index;
  bool idx64;
};

}  // namespace mslk::moe
