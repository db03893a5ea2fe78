// Picks the CUTLASS row of bf16_grouped_configs.h for one stacked grouped BF16 GEMM (kForward or kDgrad),
// when the operands meet TMA's rules (the default path; MSLK_BF16_GROUPED_KERNEL=simt bypasses it).
#include <climits>
#include <cstdlib>
#include <cstdint>

#include "gemm/kernels/bf16_grouped.h"
#include "gemm/kernels/bf16_grouped_configs.h"

namespace mslk::gemm {

#if MSLK_HAS_CUTLASS
#define MSLK_DECLARE(id, ...) \
  template <>                 \
  cudaError_t bf16_grouped_cutlass<id>(const Bf16GroupedParams&, cudaStream_t);
MSLK_BF16_GROUPED_CONFIGS(MSLK_DECLARE)
#undef MSLK_DECLARE

namespace {

using RunFn = cudaError_t (*)(const Bf16GroupedParams&, cudaStream_t);
#define MSLK_ENTRY(id, ...) &bf16_grouped_cutlass<id>,
constexpr RunFn kRun[] = {MSLK_BF16_GROUPED_CONFIGS(MSLK_ENTRY)};
#undef MSLK_ENTRY

#define MSLK_ID(id, ...) id,
constexpr int kIds[] = {MSLK_BF16_GROUPED_CONFIGS(MSLK_ID)};
#undef MSLK_ID

constexpr int find_config(const Bf16GroupedConfig& b) {
  for (int i = 0; i < kNumBf16GroupedConfigs; ++i) {
    const auto& c = kBf16GroupedConfigs[i];
    if (c.tile_m == b.tile_m && c.tile_n == b.tile_n && c.tile_k == b.tile_k && c.cluster_m == b.cluster_m &&
        c.cluster_n == b.cluster_n && c.cooperative == b.cooperative)
      return i;
  }
  return -1;
}

constexpr bool table_is_consistent() {
  for (int i = 0; i < kNumBf16GroupedConfigs; ++i)
    if (kIds[i] != i) return false;
  for (int j = 0; j < kNumBf16GroupedBuckets; ++j)
    if (find_config(kBf16GroupedBuckets[j].config) < 0) return false;
  return kNumBf16GroupedBuckets > 0 && kBf16GroupedBuckets[kNumBf16GroupedBuckets - 1].max_avg_m < 0;
}
static_assert(table_is_consistent(),
              "bf16_grouped_configs.h: ids must be 0..n-1 in order, every bucket must name an existing row, and "
              "the last bucket must have no limit (max_avg_m < 0)");

// MSLK_BF16_GROUPED_CONFIG=<row id> (tuning; read per call): that row instead of the buckets.
// -1: not set; -2: no such row (the CUTLASS path then declines).
int forced_config() {
  const char* s = std::getenv("MSLK_BF16_GROUPED_CONFIG");
  if (!s || !*s) return -1;
  char* end = nullptr;
  const long id = std::strtol(s, &end, 10);
  return *end == '\0' && id >= 0 && id < kNumBf16GroupedConfigs ? static_cast<int>(id) : -2;
}

int pick_config(int64_t total_M, int64_t G) {
  if (const int f = forced_config(); f != -1) return f;
  const int64_t avg_m = (total_M + G - 1) / G;
  for (int j = 0; j < kNumBf16GroupedBuckets; ++j)
    if (kBf16GroupedBuckets[j].max_avg_m < 0 || avg_m <= kBf16GroupedBuckets[j].max_avg_m)
      return find_config(kBf16GroupedBuckets[j].config);
  return -1;
}

bool aligned(const void* ptr, int bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; }

// TMA: 16-byte aligned base addresses, row strides and group strides (8 bf16); int32 sizes.
bool cutlass_applies(const Bf16GroupedParams& p) {
  if (p.descs != nullptr)  // the list forms: the glue checked every group
    return p.mode == Bf16GroupedMode::kForward && p.G > 0 && p.G <= INT_MAX && p.total_M > 0;
  const bool mode_ok = p.mode == Bf16GroupedMode::kForward || p.mode == Bf16GroupedMode::kDgrad;
  return mode_ok && p.fixed_rows == 0 && p.m_sizes != nullptr && !p.out_fp32 && !p.accumulate && p.G > 0 && p.G <= INT_MAX && p.total_M > 0 && p.total_M <= INT_MAX && p.N > 0 &&
         p.N <= INT_MAX && p.K > 0 && p.K <= INT_MAX && p.N % 8 == 0 && p.K % 8 == 0 && p.ldx % 8 == 0 &&
         p.ldw % 8 == 0 && p.w_gs % 8 == 0 && aligned(p.x, 16) && aligned(p.w, 16) && aligned(p.out, 16);
}

}  // namespace
#endif  // MSLK_HAS_CUTLASS

cudaError_t bf16_grouped_cutlass_run(const Bf16GroupedParams& p, cudaStream_t stream) {
#if MSLK_HAS_CUTLASS
  if (!cutlass_applies(p)) return cudaErrorNotSupported;
  const int cfg = pick_config(p.total_M, p.G);
  if (cfg < 0) return cudaErrorNotSupported;
  return kRun[cfg](p, stream);
#else
  (void)p;
  (void)stream;
  return cudaErrorNotSupported;
#endif
}

}  // namespace mslk::gemm
