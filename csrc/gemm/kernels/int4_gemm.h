// CUDA entry points of the INT4-weight GEMMs (bf16i4bf16_rowwise and _batched, f8i4bf16_rowwise).
// No torch headers: the glue (int4_gemm_cuda.cpp) fills these params, allocates the buffers and
// picks the path. Design and measurements: docs/design/int4_gemm.md.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace mslk::gemm {

// How the group scales are stored: [G, N] float32 or bf16 with zeros of the same type and shape,
// or the preshuffled FP8 form, float8_e4m3fn [G, 8, N] (copy 0 read), no zeros, with float32 row
// scales w_row_scale [N]: the weight is then q * (float(scale[g, 0, n]) * w_row_scale[n]).
enum class Int4Scale : int { kF32, kBF16, kF8 };

// One problem: out [M, N] bf16 (row stride ldd) = x [M, K] (bf16, or float8_e4m3fn with the float32
// row scale x_scale[m] applied to each float32 sum) @ w^T, w[n, k] = fmaf(q, scale[g, n], zero[g, n]),
// q the signed nibble k of the byte row w + n * ldw (even k low), g = k / group; scale[g, n] at
// scale + g * lds + n. Rows of x and w 16-byte aligned; group % 32 == 0.
struct Int4GemmParams {
  const void* x;
  int64_t ldx;  // elements
  const int8_t* w;
  int64_t ldw;  // bytes
  const void* scale;
  const void* zero;         // null: no zero point (kF8)
  const float* w_row_scale; // kF8 only
  int64_t lds;              // elements: N, or 8 N for kF8
  const float* x_scale;     // float8 x only
  void* out;
  int64_t ldd;  // elements
  int64_t M, N, K, group;
  bool x_fp8;
  Int4Scale scale_type;
};

// Decode path (M <= kInt4DecodeMaxM): one pass over the packed weight for all M rows, split along
// K over `splits` CTAs a row block; with splits > 1 every split writes its float32 sums to `ws`
// [splits, M, N] and a second pass adds them in split order (deterministic) and rounds. Two
// kernels: the tensor-core one (int4_gemm_mma.cu: K and the group multiples of 128) and the FP32
// one (int4_gemm_decode.cu: any group).
inline constexpr int64_t kInt4DecodeMaxM = 16;
inline constexpr int64_t kInt4MmaRowsPerCta = 32;  // the tensor-core kernel's weight rows a CTA
// Its shape by M: warps a CTA (each takes a share of the CTA's K tiles) and the CTAs a SM that its
// shared-memory stages and launch bounds allow; the plan's K split follows from them.
struct Int4MmaShape {
  int warps, ctas_per_sm;
};
constexpr Int4MmaShape int4_mma_shape(int64_t M) { return M <= 8 ? Int4MmaShape{8, 2} : Int4MmaShape{4, 3}; }
inline bool int4_use_decode(int64_t M) { return M <= kInt4DecodeMaxM; }
inline bool int4_mma_applies(int64_t M, int64_t K, int64_t group) {
  return M <= kInt4DecodeMaxM && K % 128 == 0 && group % 128 == 0;
}
// Which decode kernel (the glue's MSLK_INT4_DECODE, in its order) and a forced K split
// (MSLK_INT4_DECODE_SPLITS, 0: the plan's).
enum class Int4DecodeKernel : int { kAuto, kMma, kFp32, kTma };
struct Int4DecodeTuning {
  Int4DecodeKernel kernel = Int4DecodeKernel::kAuto;
  int splits = 0;
};
struct Int4DecodePlan {
  bool mma;           // the tensor-core kernel (m_tile, rows_per_warp unused)
  int m_tile;         // FP32 kernel: activation rows a pass (1, 2, 4 or 8); M > m_tile runs passes
  int rows_per_warp;  // FP32 kernel: weight rows a warp streams at once
  int splits;         // K splits
};
// The plan; kMma where int4_mma_applies is false gives mma = false (the glue refuses it first).
Int4DecodePlan int4_decode_plan(int64_t M, int64_t N, int64_t K, int64_t group, int num_sms,
                                const Int4DecodeTuning& tuning);
cudaError_t int4_decode_run(const Int4GemmParams& p, const Int4DecodePlan& plan, float* ws, cudaStream_t stream);
// The TMA-streaming tensor-core kernel (int4_gemm_tma.cu), the default where it applies: what
// int4_mma_applies asks, a group of 128 or a multiple of 256, and 16-byte aligned rows of the
// weight, the activations and the scales (N % 16 == 0 for the E4M3 group scales). Its K split for
// `num_sms` SMs (forced > 0: that many, capped by the 256-k stages), and the run (splits > 1:
// float32 partials in ws, then int4_split_reduce).
inline constexpr int64_t kInt4TmaRowsPerCta = 128;
bool int4_tma_applies(const Int4GemmParams& p);
int int4_tma_splits(int64_t M, int64_t N, int64_t K, int num_sms, int forced);
cudaError_t int4_decode_tma(const Int4GemmParams& p, int splits, float* ws, cudaStream_t stream);
// The two halves of int4_decode_run: the tensor-core kernel, and the in-order sum of the splits.
cudaError_t int4_decode_mma(const Int4GemmParams& p, int splits, float* ws, cudaStream_t stream);
cudaError_t int4_split_reduce(const Int4GemmParams& p, const float* ws, int splits, cudaStream_t stream);

// GEMM path (M > kInt4DecodeMaxM): w dequantized once into wb [N, K] bf16 (fmaf in float32, one
// rounding to bf16), float8 x into xb [M, K] bf16 with x_scale folded in (bf16(float(xq) * x_scale));
// the glue then multiplies them with cuBLAS's BF16 GEMM.
cudaError_t int4_dequant_w(const Int4GemmParams& p, void* wb, cudaStream_t stream);
cudaError_t int4_dequant_x(const Int4GemmParams& p, void* xb, cudaStream_t stream);

}  // namespace mslk::gemm
