// Picks the CUTLASS row of fp8_blockwise_configs.h for one block/group-scaled FP8 GEMM, when the
// operands meet TMA's rules.
#include <climits>
#include <cstdint>

#include "gemm/kernels/config_dispatch.h"
#include "gemm/kernels/fp8_blockwise.h"
#include "gemm/kernels/fp8_blockwise_configs.h"

namespace mslk::gemm {

#if MSLK_HAS_CUTLASS
#define MSLK_ROW_FN fp8_blockwise_cutlass
#define MSLK_ROW_PARAMS BlockwiseKernelParams
MSLK_FP8_BLOCKWISE_CONFIGS(MSLK_DECLARE_ROW)

namespace {

constexpr RowRunFn<BlockwiseKernelParams> kRun[] = {MSLK_FP8_BLOCKWISE_CONFIGS(MSLK_RUN_ENTRY)};
constexpr int kIds[] = {MSLK_FP8_BLOCKWISE_CONFIGS(MSLK_ROW_ID)};
static_assert(ids_in_order(kIds), "fp8_blockwise_configs.h: ids must be 0..n-1 in order");

// TMA: 16-byte aligned bases and row strides (16 FP8 / 8 bf16 elements, 4 float scales); int32
// problem sizes.
bool cutlass_applies(const BlockwiseKernelParams& p) {
  return p.M > 0 && p.M <= INT_MAX && p.N > 0 && p.N <= INT_MAX && p.K > 0 && p.K <= INT_MAX && p.K % 16 == 0 &&
         p.lda % 16 == 0 && p.ldb % 16 == 0 && p.ldd % 8 == 0 && p.sfa_ld % 4 == 0 && p.sfa_ld >= p.M &&
         p.sfb_ld >= (p.N + 127) / 128 && aligned(p.a, 16) && aligned(p.b, 16) && aligned(p.out, 16) &&
         aligned(p.sfa, 16) && aligned(p.sfb, 4);
}

// Decode-sized M fills half the rows of a 128-row tile: the 64-row ping-pong row takes it.
int heuristic_row(const BlockwiseKernelParams& p) { return p.M <= 64 ? 1 : 0; }

}  // namespace
#endif  // MSLK_HAS_CUTLASS

cudaError_t fp8_blockwise_run(const BlockwiseKernelParams& p, cudaStream_t stream) {
#if MSLK_HAS_CUTLASS
  if (!cutlass_applies(p)) return cudaErrorNotSupported;
  BlockwiseKernelParams q = p;
  q.swizzle = fp8_blockwise_swizzle(p.M, p.N, p.K);
  return run_row(kRun, p.tuning.forced_row >= 0 ? p.tuning.forced_row : heuristic_row(p), q, stream);
#else
  (void)p;
  (void)stream;
  return cudaErrorNotSupported;
#endif
}

}  // namespace mslk::gemm
