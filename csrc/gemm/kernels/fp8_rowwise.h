// Launchers of the rowwise FP8 GEMM (no torch headers). The dispatcher picks, per call, the
// decode-shape tensor-core kernel (small M), a CUTLASS sm90 instantiation (when built with
// CUTLASS and the operands meet TMA's alignment rules) or the portable SIMT kernel that takes
// any shape, stride and output type. MSLK_FP8_GEMM_KERNEL (read by the glue on every call) can
// force one of them.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "gemm/fp8_rowwise_params.h"

namespace mslk::gemm {

// In the order of MSLK_FP8_GEMM_KERNEL's values (auto, skinny, cutlass, simt): the glue reads it as an index.
enum class Fp8GemmKernel : int { kAuto = 0, kSkinny, kCutlass, kSimt };

// What one call runs: `kernel` (never kAuto), its K splits (skinny), and `ok` = false when a
// forced kernel (want != kAuto) cannot take the problem.
struct Fp8RowwisePlan {
  Fp8GemmKernel want = Fp8GemmKernel::kAuto;
  Fp8GemmKernel kernel = Fp8GemmKernel::kSimt;
  int splits = 1;
  bool ok = true;
};
// Host only; the current device's SM count and compute capability (read once per device id).
Fp8RowwisePlan fp8_rowwise_plan(const RowwiseGemmParams& p, Fp8GemmKernel want);
// Bytes p.workspace must point to for `plan` (0: none; the pointer may then be null).
size_t fp8_rowwise_workspace_bytes(const RowwiseGemmParams& p, const Fp8RowwisePlan& plan);
// Runs p on stream s as planned. Under auto, a CUTLASS refusal falls back to SIMT; a forced
// kernel's or forced row's (tuning.forced_row) refusal returns cudaErrorNotSupported.
cudaError_t fp8_rowwise_run(const RowwiseGemmParams& p, const Fp8RowwisePlan& plan, cudaStream_t s);

// The portable kernel alone (any shape / stride / bf16 or fp16 output).
cudaError_t fp8_rowwise_simt(const RowwiseGemmParams& p, cudaStream_t s);

// The decode-shape kernel (fp8_rowwise_skinny.cu): M <= 64, K % 16 == 0, 16-byte aligned a / b
// with row and batch strides that are multiples of 16 bytes; bf16 or fp16 output, any L.
bool fp8_rowwise_skinny_applies(const RowwiseGemmParams& p);
// K splits the table MSLK_FP8_SKINNY_SPLITS picks for p on a device of `sms` SMs; every split
// holds at least one k chunk (1: a single pass, no workspace).
int fp8_rowwise_skinny_splits(const RowwiseGemmParams& p, int sms);
// Runs p with `splits` K splits; splits > 1 needs p.workspace of splits * L * M * N floats.
cudaError_t fp8_rowwise_skinny(const RowwiseGemmParams& p, int splits, cudaStream_t s);

// The CUTLASS instantiation of row `ID` of fp8_rowwise_configs.h (one generated TU per row).
// Requires L == 1 or non-zero batch strides and the alignment checked by the dispatcher;
// returns cudaErrorNotSupported when CUTLASS's can_implement refuses the problem.
template <int ID>
cudaError_t fp8_rowwise_cutlass(const RowwiseGemmParams& p, cudaStream_t s);

}  // namespace mslk::gemm
