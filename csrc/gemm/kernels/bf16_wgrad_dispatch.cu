// Picks the CUTLASS row of bf16_wgrad_configs.h for one grouped weight gradient (kWgrad), when
// the operands meet TMA's rules. The default, like the forward (MSLK_BF16_GROUPED_KERNEL).
#include <climits>
#include <cstdint>
#include <cstdlib>

#include "gemm/kernels/bf16_grouped.h"
#include "gemm/kernels/bf16_wgrad_configs.h"

namespace mslk::gemm {

#if MSLK_HAS_CUTLASS
#define MSLK_DECLARE(id, ...) \
  template <>                 \
  cudaError_t bf16_wgrad_cutlass<id>(const Bf16GroupedParams&, cudaStream_t);
MSLK_BF16_WGRAD_CONFIGS(MSLK_DECLARE)
#undef MSLK_DECLARE

namespace {

using RunFn = cudaError_t (*)(const Bf16GroupedParams&, cudaStream_t);
#define MSLK_ENTRY(id, ...) &bf16_wgrad_cutlass<id>,
constexpr RunFn kRun[] = {MSLK_BF16_WGRAD_CONFIGS(MSLK_ENTRY)};
#undef MSLK_ENTRY
#define MSLK_ID(id, ...) id,
constexpr int kIds[] = {MSLK_BF16_WGRAD_CONFIGS(MSLK_ID)};
#undef MSLK_ID

constexpr bool ids_in_order() {
  for (int i = 0; i < kNumBf16WgradConfigs; ++i)
    if (kIds[i] != i) return false;
  return kNumBf16WgradConfigs >= 2;
}
static_assert(ids_in_order(), "bf16_wgrad_configs.h: ids must be 0..n-1 in order, rows 0 and 1 must exist");

// MSLK_BF16_WGRAD_CONFIG=<row id> (tuning; read per call) forces a row; otherwise the large tile
// when both output dims are large.
int pick_config(const Bf16GroupedParams& p) {
  if (const char* s = std::getenv("MSLK_BF16_WGRAD_CONFIG"); s && *s) {
    char* end = nullptr;
    const long id = std::strtol(s, &end, 10);
    return *end == '\0' && id >= 0 && id < kNumBf16WgradConfigs ? static_cast<int>(id) : -1;
  }
  return p.N >= MSLK_BF16_WGRAD_LARGE_MIN && p.K >= MSLK_BF16_WGRAD_LARGE_MIN ? 0 : 1;
}

bool aligned(const void* ptr, int bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; }

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
  const int cfg = pick_config(p);
  if (cfg < 0) return cudaErrorNotSupported;
  return kRun[cfg](p, stream);
#else
  (void)p;
  (void)stream;
  return cudaErrorNotSupported;
#endif
}

}  // namespace mslk::gemm
