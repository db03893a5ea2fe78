// Picks the CUTLASS row of bf16_grouped_configs.h for one stacked grouped BF16 GEMM (kForward or kDgrad),
// when the operands meet TMA's rules (the default path; MSLK_BF16_GROUPED_KERNEL=simt bypasses it).
#include <climits>
#include <cstdint>

#include "gemm/kernels/bf16_grouped.h"
#include "gemm/kernels/bf16_grouped_configs.h"
#include "gemm/kernels/config_dispatch.h"

namespace mslk::gemm {

#if MSLK_HAS_CUTLASS
#define MSLK_ROW_FN bf16_grouped_cutlass
#define MSLK_ROW_PARAMS Bf16GroupedParams
MSLK_BF16_GROUPED_CONFIGS(MSLK_DECLARE_ROW)

namespace {

constexpr RowRunFn<Bf16GroupedParams> kRun[] = {MSLK_BF16_GROUPED_CONFIGS(MSLK_RUN_ENTRY)};
constexpr int kIds[] = {MSLK_BF16_GROUPED_CONFIGS(MSLK_ROW_ID)};

static_assert(ids_in_order(kIds) && buckets_consistent(kBf16GroupedConfigs, kBf16GroupedBuckets, false),
              "bf16_grouped_configs.h: ids must be 0..n-1 in order, every bucket must name an existing row, and "
              "the last bucket must have no limit (max_avg_m < 0)");

// TMA: 16-byte aligned base addresses, row strides and group strides (8 bf16); int32 sizes.
bool cutlass_applies(const Bf16GroupedParams& p) {
  if (p.descs != nullptr)  // the list forms: the glue checked every group
    return p.mode == Bf16GroupedMode::kForward && p.G > 0 && p.G <= INT_MAX && p.total_M > 0;
  const bool mode_ok = p.mode == Bf16GroupedMode::kForward || p.mode == Bf16GroupedMode::kDgrad;
  const bool out_ok = !p.out_fp32 || p.mode == Bf16GroupedMode::kForward;  // float32: unrounded forward sums
  return mode_ok && out_ok && p.fixed_rows == 0 && p.m_sizes != nullptr && !p.accumulate && p.G > 0 &&
         p.G <= INT_MAX && p.total_M > 0 && p.total_M <= INT_MAX && p.N > 0 && p.N <= INT_MAX && p.K > 0 &&
         p.K <= INT_MAX && p.N % 8 == 0 && p.K % 8 == 0 && p.ldx % 8 == 0 && p.ldw % 8 == 0 && p.w_gs % 8 == 0 &&
         aligned(p.x, 16) && aligned(p.w, 16) && aligned(p.out, 16);
}

}  // namespace
#endif  // MSLK_HAS_CUTLASS

cudaError_t bf16_grouped_cutlass_run(const Bf16GroupedParams& p, cudaStream_t stream) {
#if MSLK_HAS_CUTLASS
  if (!cutlass_applies(p)) return cudaErrorNotSupported;
  return run_row(kRun, pick_row(kBf16GroupedConfigs, p.tuning.forced_row, false,
                                bucket_row(kBf16GroupedConfigs, kBf16GroupedBuckets, p.total_M, p.G, false)),
                 p, stream);
#else
  (void)p;
  (void)stream;
  return cudaErrorNotSupported;
#endif
}

}  // namespace mslk::gemm
