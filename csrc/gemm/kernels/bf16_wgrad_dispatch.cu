// Picks the CUTLASS row of bf16_wgrad_configs.h for one grouped weight gradient (kWgrad), when
// the operands meet TMA's rules. The default, like the forward (MSLK_BF16_GROUPED_KERNEL).
#include <climits>
#include <cstdint>

#include "gemm/kernels/bf16_grouped.h"
#include "gemm/kernels/bf16_wgrad_configs.h"
#include "gemm/kernels/config_dispatch.h"

namespace mslk::gemm {

#if MSLK_HAS_CUTLASS
#define MSLK_ROW_FN bf16_wgrad_cutlass
#define MSLK_ROW_PARAMS Bf16GroupedParams
MSLK_BF16_WGRAD_CONFIGS(MSLK_DECLARE_ROW)

namespace {

constexpr RowRunFn<Bf16GroupedParams> kRun[] = {MSLK_BF16_WGRAD_CONFIGS(MSLK_RUN_ENTRY)};
constexpr int kIds[] = {MSLK_BF16_WGRAD_CONFIGS(MSLK_ROW_ID)};
static_assert(ids_in_order(kIds) && kNumBf16WgradConfigs >= 2,
              "bf16_wgrad_configs.h: ids must be 0..n-1 in order, rows 0 and 1 must exist");

// TMA: 16-byte aligned bases and row strides (8 bf16, 4 float); int32 sizes; fp32 accumulation
// only into a float32 output.
bool cutlass_applies(const Bf16GroupedParams& p) {
  return p.mode == Bf16GroupedMode::kWgrad && p.m_sizes != nullptr && p.fixed_rows == 0 && p.G > 0 &&
         p.G <= INT_MAX && p.total_M > 0 && p.total_M <= INT_MAX && p.N > 0 && p.N <= INT_MAX && p.K > 0 &&
         p.K <= INT_MAX && p.N % 8 == 0 && p.K % 8 == 0 && p.ldx % 8 == 0 && p.ldw % 8 == 0 &&
         (!p.accumulate || p.out_fp32) && aligned(p.x, 16) && aligned(p.w, 16) && aligned(p.out, 16);
}

}  // namespace
#endif  // MSLK_HAS_CUTLASS

cudaError_t bf16_wgrad_cutlass_run(const Bf16GroupedParams& p, cudaStream_t stream) {
#if MSLK_HAS_CUTLASS
  if (!cutlass_applies(p)) return cudaErrorNotSupported;
  // The large tile when both output dims are large.
  const int heuristic = p.N >= MSLK_BF16_WGRAD_LARGE_MIN && p.K >= MSLK_BF16_WGRAD_LARGE_MIN ? 0 : 1;
  return run_row(kRun, pick_row(kBf16WgradConfigs, p.tuning.forced_row, false, heuristic), p, stream);
#else
  (void)p;
  (void)stream;
  return cudaErrorNotSupported;
#endif
}

}  // namespace mslk::gemm
