// CUDA entry points of the FP32 GEMM computed from BF16 parts (bf16x9_gemm). No torch headers:
// the glue (bf16x9_cuda.cpp) allocates the parts buffers and fills these params.
//
// Each FP32 value x is split into three BF16 parts, each the rounding of the previous residual:
// hi = bf16(x), mid = bf16(x - hi), lo = bf16(x - hi - mid), so that x = hi + mid + lo exactly for
// x in BF16's normal range. The nine products A_i B_j^T become ONE BF16 GEMM over K' = 9 * kp:
// segment s of A' holds A_{i(s)}, segment s of B' holds B_{j(s)}, kp = K rounded up to 8 (zero
// padded, so any K meets TMA's 16-byte rule). Segments go smallest product first,
// so the small terms are summed among themselves before the large ones are added.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace mslk::gemm {

// Segment s holds the product A_i B_j^T, parts 0 = hi, 1 = mid, 2 = lo: (2,2), (1,2), (2,1),
// (0,2), (1,1), (2,0), (0,1), (1,0), (0,0). Returns i (A side) or j (B side).
__host__ __device__ constexpr int bf16x9_segment_part(int s, bool b_side) {
  constexpr int i[9] = {2, 1, 2, 0, 1, 2, 0, 1, 0};
  constexpr int j[9] = {2, 2, 1, 2, 1, 0, 1, 0, 0};
  return b_side ? j[s] : i[s];
}

// src [rows, K] float32 (row stride ld) -> dst [rows, 9 * kp] bf16 (contiguous), dst[r, s * kp + k]
// = part sel[s] of src[r, k], zero for K <= k < kp. `b_side`: the B operand's
// parts (bf16x9_segment_part).
struct Bf16x9SplitParams {
  const float* src;
  void* dst;
  int64_t rows, K, ld, kp;
  bool b_side;
};
cudaError_t bf16x9_split(const Bf16x9SplitParams& p, cudaStream_t stream);

// out [M, N] float32 (row stride ldd) = a [M, kk] bf16 @ b [N, kk]^T, both contiguous, kk = 9 * kp.
struct Bf16x9GemmParams {
  const void* a;
  const void* b;
  float* out;
  int64_t M, N, kk, ldd;
};
// cudaErrorNotSupported, having launched nothing, when the kernel cannot take the problem (built
// without CUTLASS, TMA's alignment rules: kk % 8, ldd % 4, 16-byte aligned pointers).
cudaError_t bf16x9_gemm_run(const Bf16x9GemmParams& p, cudaStream_t stream);

// The fused kernel (bf16x9_fused.cu): out [M, N] float32 (row stride ldd) = A [M, K] @ B [N, K]^T
// straight from the float32 operands (row strides lda, ldb), split into their BF16 parts inside the
// kernel, so the parts never reach global memory. `splits` > 1 divides K between CTAs whose sums are
// added into out, which the launch zeroes first (2 at most: a + b is b + a, so the sums stay
// deterministic).
struct Bf16x9FusedParams {
  const float* a;
  const float* b;
  float* out;
  int64_t M, N, K, lda, ldb, ldd;
  int splits;
};
// Whether the fused kernel takes the problem: K, lda and ldb multiples of 4, A and B 16-byte aligned
// (16-byte copies of B rows, 8-byte loads of A pairs), sizes within int32 tile coordinates.
bool bf16x9_fused_applies(const Bf16x9FusedParams& p);
// The K split that fills the SMs: 2 where one K range per tile leaves more than half of `sms` idle.
int bf16x9_fused_splits(int64_t M, int64_t N, int64_t K, int sms);
// cudaErrorNotSupported, having launched nothing, where bf16x9_fused_applies is false.
cudaError_t bf16x9_fused_run(const Bf16x9FusedParams& p, cudaStream_t stream);

// The FMA kernel (bf16x9_fma.cu) for few rows of A: out = A @ B^T by float32 FMAs on the CUDA
// cores, B streamed once a pass of a row's `mt` A rows (`splits` unused). Applies under the fused
// kernel's operand rules (K, lda, ldb multiples of 4; A and B 16-byte aligned). `row`: a row id of
// MSLK_BF16X9_FMA_CONFIGS (bf16x9_configs.h) to force, or -1 (by M).
bool bf16x9_fma_applies(const Bf16x9FusedParams& p, int row);
// cudaErrorNotSupported, having launched nothing, where bf16x9_fma_applies is false.
cudaError_t bf16x9_fma_run(const Bf16x9FusedParams& p, int row, cudaStream_t stream);

// Row ID of bf16x9_configs.h (defined in its TU by MSLK_BF16X9_INSTANTIATE).
template <int ID>
cudaError_t bf16x9_gemm_row(const Bf16x9GemmParams& p, cudaStream_t stream);

}  // namespace mslk::gemm
