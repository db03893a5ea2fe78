// The INT8 GEMM (int8_gemm.h): row 0 of int8_gemm_configs.h (the 128 x 128 x 128 cooperative
// tile for M > kInt8SwapMaxM) and the entry point that picks a row. Tile choices:
// docs/design/int_gemm.md.
#include "gemm/kernels/int8_gemm.h"

#if MSLK_HAS_CUTLASS
#include "gemm/kernels/config_dispatch.h"
#include "gemm/kernels/int8_gemm_cutlass.cuh"

MSLK_INT8_GEMM_INSTANTIATE(0)
#endif

namespace mslk::gemm {

#if MSLK_HAS_CUTLASS
#define MSLK_ROW_FN int8_gemm_row
#define MSLK_ROW_PARAMS Int8GemmParams
MSLK_INT8_GEMM_CONFIGS(MSLK_DECLARE_ROW)

namespace {

constexpr RowRunFn<Int8GemmParams> kRun[] = {MSLK_INT8_GEMM_CONFIGS(MSLK_RUN_ENTRY)};
constexpr int kIds[] = {MSLK_INT8_GEMM_CONFIGS(MSLK_ROW_ID)};
constexpr int kSwapRow = int8_gemm_pick_row(true), kWideRow = int8_gemm_pick_row(false);
static_assert(ids_in_order(kIds) && kSwapRow >= 0 && kWideRow >= 0 &&
                  kInt8GemmConfigs[kSwapRow].tile_n >= kInt8SwapMaxM,
              "int8_gemm_configs.h: ids 0..n-1 in order, a swap row whose tile_n covers kInt8SwapMaxM tokens, "
              "and a non-swap row");

}  // namespace
#endif

cudaError_t int8_gemm_run(const Int8GemmParams& p, cudaStream_t stream) {
#if MSLK_HAS_CUTLASS
  return run_row(kRun, p.M <= kInt8SwapMaxM ? kSwapRow : kWideRow, p, stream);
#else
  return (void)p, (void)stream, cudaErrorNotSupported;
#endif
}

}  // namespace mslk::gemm
