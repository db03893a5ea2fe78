// Picks the CUTLASS row of fp8_grouped_configs.h for one device-side grouped FP8 GEMM, when the
// operands meet TMA's rules.
#include <climits>
#include <cstdint>

#include "gemm/kernels/fp8_grouped.h"
#include "gemm/kernels/fp8_grouped_configs.h"

namespace mslk::gemm {

#if MSLK_HAS_CUTLASS
#define MSLK_DECLARE(id, ...) \
  template <>                 \
  cudaError_t fp8_grouped_cutlass<id>(const Fp8GroupedParams&, cudaStream_t);
MSLK_FP8_GROUPED_CONFIGS(MSLK_DECLARE)
#undef MSLK_DECLARE

namespace {

using RunFn = cudaError_t (*)(const Fp8GroupedParams&, cudaStream_t);
#define MSLK_ENTRY(id, ...) &fp8_grouped_cutlass<id>,
constexpr RunFn kRun[] = {MSLK_FP8_GROUPED_CONFIGS(MSLK_ENTRY)};
#undef MSLK_ENTRY

#define MSLK_ID(id, ...) id,
constexpr int kIds[] = {MSLK_FP8_GROUPED_CONFIGS(MSLK_ID)};
#undef MSLK_ID

constexpr int find_config(const Fp8GroupedBucket& b, bool fast) {
  for (int i = 0; i < kNumFp8GroupedConfigs; ++i) {
    const auto& c = kFp8GroupedConfigs[i];
    if (c.tile_m == b.tile_m && c.tile_n == b.tile_n && c.tile_k == b.tile_k && c.cluster_m == b.cluster_m &&
        c.cluster_n == b.cluster_n && c.fast_accum == fast)
      return i;
  }
  return -1;
}

constexpr bool table_is_consistent() {
  for (int i = 0; i < kNumFp8GroupedConfigs; ++i)
    if (kIds[i] != i) return false;
  for (int j = 0; j < kNumFp8GroupedBuckets; ++j)
    if (find_config(kFp8GroupedBuckets[j], true) < 0 || find_config(kFp8GroupedBuckets[j], false) < 0) return false;
  return kNumFp8GroupedBuckets > 0 && kFp8GroupedBuckets[kNumFp8GroupedBuckets - 1].max_avg_m < 0;
}
static_assert(table_is_consistent(),
              "fp8_grouped_configs.h: ids must be 0..n-1 in order, every bucket must name a tile present with "
              "fast_accum 0 and 1, and the last bucket must have no limit (max_avg_m < 0)");

int pick_config(int64_t total_M, int64_t G, bool fast) {
  const int64_t avg_m = (total_M + G - 1) / G;
  for (int j = 0; j < kNumFp8GroupedBuckets; ++j)
    if (kFp8GroupedBuckets[j].max_avg_m < 0 || avg_m <= kFp8GroupedBuckets[j].max_avg_m)
      return find_config(kFp8GroupedBuckets[j], fast);
  return -1;
}

bool aligned(const void* ptr, int bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; }

// TMA: 16-byte aligned bases and strides (16 FP8 / 8 bf16 elements); the per-group w_scale
// vectors 16-byte aligned (w_scale base and N % 4); int32 problem sizes.
bool cutlass_applies(const Fp8GroupedParams& p) {
  if (p.descs != nullptr) return p.G > 0 && p.G <= INT_MAX && p.total_M > 0;  // the glue checked each group
  return p.sizes != nullptr && p.G > 0 && p.G <= INT_MAX && p.total_M > 0 && p.total_M <= INT_MAX && p.N > 0 &&
         p.N <= INT_MAX && p.K > 0 && p.K <= INT_MAX && p.K % 16 == 0 && p.N % 8 == 0 && p.ldx % 16 == 0 &&
         p.ldw % 16 == 0 && p.w_gs % 16 == 0 && aligned(p.x, 16) && aligned(p.w, 16) && aligned(p.out, 16) &&
         aligned(p.w_scale, 16) && aligned(p.x_scale, 4);
}

}  // namespace
#endif  // MSLK_HAS_CUTLASS

cudaError_t fp8_grouped_cutlass_run(const Fp8GroupedParams& p, cudaStream_t stream) {
#if MSLK_HAS_CUTLASS
  if (!cutlass_applies(p)) return cudaErrorNotSupported;
  const int cfg = pick_config(p.total_M, p.G, p.fast_accum);
  if (cfg < 0) return cudaErrorNotSupported;
  return kRun[cfg](p, stream);
#else
  (void)p;
  (void)stream;
  return cudaErrorNotSupported;
#endif
}

}  // namespace mslk::gemm
