// The BF16 GEMM of bf16x9_gemm (bf16x9.h): out [M, N] float32 = A' [M, 9 kp] @ B' [N, 9 kp]^T,
// FP32 accumulation over the whole K' so the nine products are summed in one accumulator. Row 0
// of bf16x9_configs.h and the entry point that picks a row (bf16x9_pick_row: the large tile where
// its tiles fill half the SMs, else the small one).
#include "common/device_attrs.h"
#include "gemm/kernels/bf16x9.h"
#include "gemm/kernels/bf16x9_configs.h"

#if MSLK_HAS_CUTLASS
#include "gemm/kernels/bf16x9_cutlass.cuh"
#include "gemm/kernels/config_dispatch.h"

MSLK_BF16X9_INSTANTIATE(0)
#endif

namespace mslk::gemm {

#if MSLK_HAS_CUTLASS
#define MSLK_ROW_FN bf16x9_gemm_row
#define MSLK_ROW_PARAMS Bf16x9GemmParams
MSLK_BF16X9_CONFIGS(MSLK_DECLARE_ROW)

namespace {

constexpr RowRunFn<Bf16x9GemmParams> kRun[] = {MSLK_BF16X9_CONFIGS(MSLK_RUN_ENTRY)};
constexpr int kIds[] = {MSLK_BF16X9_CONFIGS(MSLK_ROW_ID)};
static_assert(ids_in_order(kIds), "bf16x9_configs.h: ids must be 0..n-1 in order");

}  // namespace
#endif

cudaError_t bf16x9_gemm_run(const Bf16x9GemmParams& p, cudaStream_t stream) {
#if MSLK_HAS_CUTLASS
  int device = 0, sms = 0;
  if (const cudaError_t e = mslk::cuda::current_device_sms(&device, &sms); e != cudaSuccess) return e;
  return run_row(kRun, bf16x9_pick_row(p.M, p.N, sms), p, stream);
#else
  return (void)p, (void)stream, cudaErrorNotSupported;
#endif
}

}  // namespace mslk::gemm
