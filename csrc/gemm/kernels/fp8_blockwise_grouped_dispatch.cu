// Picks the row of fp8_blockwise_grouped_configs.h for one device-side grouped block/group-scaled
// FP8 GEMM, when the operands meet TMA's rules: a CUTLASS row, or mslk's wgmma kernel.
#include <climits>
#include <cstdint>

#include "gemm/kernels/config_dispatch.h"
#include "gemm/kernels/fp8_blockwise.h"
#include "gemm/kernels/fp8_blockwise_grouped_configs.h"

namespace mslk::gemm {

#if MSLK_HAS_CUTLASS
#define MSLK_ROW_FN fp8_blockwise_grouped_cutlass
#define MSLK_ROW_PARAMS Fp8GroupedParams
MSLK_FP8_BLOCKWISE_GROUPED_CONFIGS(MSLK_DECLARE_ROW)

namespace {

constexpr RowRunFn<Fp8GroupedParams> kRun[] = {MSLK_FP8_BLOCKWISE_GROUPED_CONFIGS(MSLK_RUN_ENTRY)};
constexpr int kIds[] = {MSLK_FP8_BLOCKWISE_GROUPED_CONFIGS(MSLK_ROW_ID)};

static_assert(ids_in_order(kIds) &&
                  buckets_consistent(kFp8BlockwiseGroupedConfigs, kFp8BlockwiseGroupedBuckets, false),
              "fp8_blockwise_grouped_configs.h: ids must be 0..n-1 in order, every bucket must name a row, and "
              "the last bucket must have no limit (max_avg_m < 0)");

// TMA: 16-byte aligned bases and strides (16 FP8 / 8 bf16 elements); int32 problem sizes. The
// scales go through 4-byte cp.async (any float alignment).
bool cutlass_applies(const Fp8GroupedParams& p) {
  return p.descs == nullptr && p.fixed_rows == 0 && p.sizes != nullptr && p.G > 0 && p.G <= INT_MAX &&
         p.total_M > 0 && p.total_M <= INT_MAX && p.N > 0 && p.N <= INT_MAX && p.K > 0 && p.K <= INT_MAX &&
         p.K % 16 == 0 && p.N % 8 == 0 && p.ldx % 16 == 0 && p.ldw % 16 == 0 && p.w_gs % 16 == 0 &&
         p.xs_rs == (p.K + 127) / 128 && p.ws_gs == p.xs_rs * ((p.N + 127) / 128) && aligned(p.x, 16) &&
         aligned(p.w, 16) && aligned(p.out, 16) && aligned(p.x_scale, 4) && aligned(p.w_scale, 4);
}

}  // namespace
#endif  // MSLK_HAS_CUTLASS

cudaError_t fp8_blockwise_grouped_run(const Fp8GroupedParams& p, cudaStream_t stream) {
  if (p.tuning.forced_row == kFp8BlockwiseGroupedWgmmaRow) return fp8_blockwise_grouped_wgmma_run(p, stream);
  if (p.tuning.forced_row < 0 && p.G > 0 && (p.total_M + p.G - 1) / p.G <= kFp8BlockwiseGroupedWgmmaMaxAvgM)
    if (const cudaError_t e = fp8_blockwise_grouped_wgmma_run(p, stream); e != cudaErrorNotSupported) return e;
#if MSLK_HAS_CUTLASS
  if (!cutlass_applies(p)) return cudaErrorNotSupported;
  return run_row(kRun,
                 pick_row(kFp8BlockwiseGroupedConfigs, p.tuning.forced_row, false,
                          bucket_row(kFp8BlockwiseGroupedConfigs, kFp8BlockwiseGroupedBuckets, p.total_M, p.G, false)),
                 p, stream);
#else
  (void)p;
  (void)stream;
  return cudaErrorNotSupported;
#endif
}

}  // namespace mslk::gemm
