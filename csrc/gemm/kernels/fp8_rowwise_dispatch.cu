// Picks the kernel of one rowwise FP8 GEMM: the decode-shape kernel for M <= the table's
// threshold, else the CUTLASS row of fp8_rowwise_configs.h that the shape-bucket table names
// (when the operands meet TMA's rules), else the SIMT kernel; or the kernel a caller forces.
#include <climits>
#include <cstdint>

#include "common/device_attrs.h"
#include "gemm/kernels/fp8_rowwise.h"
#include "gemm/kernels/fp8_rowwise_buckets.h"
#include "gemm/kernels/fp8_rowwise_configs.h"
#include "gemm/kernels/config_dispatch.h"

namespace mslk::gemm {

#if MSLK_HAS_CUTLASS
#define MSLK_ROW_FN fp8_rowwise_cutlass
#define MSLK_ROW_PARAMS RowwiseGemmParams
MSLK_FP8_ROWWISE_CONFIGS(MSLK_DECLARE_ROW)

namespace {

constexpr RowRunFn<RowwiseGemmParams> kRun[] = {MSLK_FP8_ROWWISE_CONFIGS(MSLK_RUN_ENTRY)};
constexpr int kIds[] = {MSLK_FP8_ROWWISE_CONFIGS(MSLK_ROW_ID)};

// The non-swap row of bucket b's tile in accumulation mode `fast` (-1: none).
constexpr int find_config(const Fp8RowwiseBucket& b, bool fast) {
  return find_row(kFp8RowwiseConfigs,
                  TileConfig{b.tile_m, b.tile_n, b.tile_k, b.cluster_m, b.cluster_n, b.cooperative, fast, false}, fast);
}

// The swap-AB row of the given accumulation mode (-1: none).
constexpr int find_swap_config(bool fast) {
  for (int i = 0; i < kNumFp8RowwiseConfigs; ++i)
    if (kFp8RowwiseConfigs[i].swap && kFp8RowwiseConfigs[i].fast_accum == fast) return i;
  return -1;
}

constexpr bool table_is_consistent() {
  if (!ids_in_order(kIds)) return false;
  for (int i = 0; i < kNumFp8RowwiseConfigs; ++i)
    for (int j = i + 1; j < kNumFp8RowwiseConfigs; ++j)  // buckets name a row by tile, cluster, schedule
      if (same_tile(kFp8RowwiseConfigs[i], kFp8RowwiseConfigs[j]) &&
          kFp8RowwiseConfigs[i].fast_accum == kFp8RowwiseConfigs[j].fast_accum)
        return false;
  for (int j = 0; j < kNumFp8RowwiseBuckets; ++j)
    if (find_config(kFp8RowwiseBuckets[j], true) < 0 || find_config(kFp8RowwiseBuckets[j], false) < 0 ||
        !(kFp8RowwiseBuckets[j].swizzle == 1 || kFp8RowwiseBuckets[j].swizzle == 2 ||
          kFp8RowwiseBuckets[j].swizzle == 4 || kFp8RowwiseBuckets[j].swizzle == 8))
      return false;
  if (MSLK_FP8_SWAP_AB_MAX_M > 0 && (find_swap_config(true) < 0 || find_swap_config(false) < 0)) return false;
  const Fp8RowwiseBucket& last = kFp8RowwiseBuckets[kNumFp8RowwiseBuckets - 1];
  return kNumFp8RowwiseBuckets > 0 && last.max_m < 0 && last.min_k == 0 && last.min_waves == 0;
}
static_assert(table_is_consistent(),
              "fp8_rowwise_configs.h / _buckets.h: ids must be 0..n-1 in order, no two rows may share tile, cluster, schedule "
              "and fast_accum, MSLK_FP8_SWAP_AB_MAX_M > 0 needs a swap row in both modes, every bucket must name a row present with fast_accum 0 and 1 and a swizzle of "
              "1, 2, 4 or 8, and the last bucket "
              "must take every shape (max_m < 0, min_k = min_waves = 0)");

int device_sms() {
  int dev = 0, sms = 0;
  if (mslk::cuda::current_device_sms(&dev, &sms) != cudaSuccess) return 132;
  return sms;
}

// The row for p (-1: none) and, through *swizzle, its bucket's swizzle (0: a forced row's default).
int pick_config(const RowwiseGemmParams& p, int* swizzle = nullptr) {
  if (swizzle) *swizzle = 0;
  // MSLK_FP8_ROWWISE_TILE (validated by the glue): that row's tile in the call's accumulation mode.
  if (p.tuning.forced_row >= 0) return forced_row_in_mode(kFp8RowwiseConfigs, p.tuning.forced_row, p.fast_accum);
  if (p.M <= MSLK_FP8_SWAP_AB_MAX_M) return find_swap_config(p.fast_accum);
  const int64_t sms = device_sms();
  for (int j = 0; j < kNumFp8RowwiseBuckets; ++j) {
    const Fp8RowwiseBucket& b = kFp8RowwiseBuckets[j];
    if ((b.max_m >= 0 && p.M > b.max_m) || p.K < b.min_k) continue;
    const int64_t tiles = ((p.M + b.tile_m - 1) / b.tile_m) * ((p.N + b.tile_n - 1) / b.tile_n) * p.L;
    if (tiles < b.min_waves * sms) continue;
    if (swizzle) *swizzle = b.swizzle;
    return find_config(b, p.fast_accum);
  }
  return -1;
}

// TMA: 16-byte aligned base addresses and row strides; int32 problem sizes.
bool cutlass_applies(const RowwiseGemmParams& p) {
  return p.out_dtype == OutDtype::kBFloat16 && p.K % 16 == 0 && p.lda % 16 == 0 && p.ldb % 16 == 0 &&
         p.N % 8 == 0 && p.ldd % 8 == 0 && aligned(p.a, 16) && aligned(p.b, 16) && aligned(p.out, 16) &&
         aligned(p.w_scale, 16) && p.batch_ws % 4 == 0 && (!p.bias || (aligned(p.bias, 16) && p.batch_bias % 4 == 0)) &&
         p.M <= INT_MAX && p.N <= INT_MAX && p.K <= INT_MAX && p.L <= INT_MAX && p.batch_a % 16 == 0 &&
         p.batch_b % 16 == 0 && p.batch_d % 8 == 0;
}

}  // namespace
#endif  // MSLK_HAS_CUTLASS

namespace {

bool cutlass_takes(const RowwiseGemmParams& p) {
#if MSLK_HAS_CUTLASS
  return pick_config(p) >= 0 && cutlass_applies(p);
#else
  (void)p;
  return false;
#endif
}

cudaError_t run_cutlass(const RowwiseGemmParams& p, cudaStream_t s) {
#if MSLK_HAS_CUTLASS
  int swizzle = 0;
  const int cfg = pick_config(p, &swizzle);
  RowwiseGemmParams ps = p;
  ps.swizzle = swizzle;
  // A broadcast operand (batch stride 0) cannot be a TMA batch mode: launch per batch.
  const bool broadcast = p.L > 1 && (p.batch_a == 0 || p.batch_b == 0 || p.batch_d == 0);
  if (!broadcast) return kRun[cfg](ps, s);
  cudaError_t e = cudaSuccess;
  for (int64_t l = 0; l < p.L && e == cudaSuccess; ++l) {
    RowwiseGemmParams q = ps;
    q.L = 1;
    q.a += l * p.batch_a;
    q.b += l * p.batch_b;
    q.out = static_cast<char*>(p.out) + l * p.batch_d * 2;
    q.x_scale += l * p.batch_xs;
    q.w_scale += l * p.batch_ws;
    if (q.bias) q.bias += l * p.batch_bias;
    e = kRun[cfg](q, s);
  }
  return e;
#else
  (void)p, (void)s;
  return cudaErrorNotSupported;
#endif
}

}  // namespace

namespace {

// Whether the swap-AB row would take p (M <= MSLK_FP8_SWAP_AB_MAX_M) with its weight-row tiles
// filling at least MSLK_FP8_SWAP_MIN_SM_PCT percent of the SMs; else small M prefers the decode
// kernel, which splits K.
bool swap_fills_sms(const RowwiseGemmParams& p, int sms) {
#if MSLK_HAS_CUTLASS
  if (p.M > MSLK_FP8_SWAP_AB_MAX_M || !cutlass_takes(p)) return false;
  const int cfg = pick_config(p);
  if (cfg < 0 || !kFp8RowwiseConfigs[cfg].swap) return false;  // a forced non-swap row
  const int64_t tiles = (p.N + kFp8RowwiseConfigs[cfg].tile_m - 1) / kFp8RowwiseConfigs[cfg].tile_m * p.L;
  return tiles * 100 >= int64_t(MSLK_FP8_SWAP_MIN_SM_PCT) * sms;
#else
  (void)p, (void)sms;
  return false;
#endif
}

}  // namespace

Fp8RowwisePlan fp8_rowwise_plan(const RowwiseGemmParams& p, Fp8GemmKernel want) {
  Fp8RowwisePlan plan;
  plan.want = want;
  // The current device's SM count (K splits) and compute capability (e4m3 mma.sync: sm_89+),
  // read once per device; on an error the launch reports it.
  int dev = 0;
  mslk::cuda::DeviceAttrs attrs;
  mslk::cuda::current_device_attrs(&dev, &attrs);
  const int sms = attrs.sms, major = attrs.cc_major, minor = attrs.cc_minor;
  const bool skinny = major * 10 + minor >= 89 && fp8_rowwise_skinny_applies(p);
  switch (want) {
    case Fp8GemmKernel::kAuto:
      plan.kernel = p.M <= MSLK_FP8_SKINNY_AUTO_MAX_M && skinny && !swap_fills_sms(p, sms) ? Fp8GemmKernel::kSkinny
                    : cutlass_takes(p)                                                 ? Fp8GemmKernel::kCutlass
                                                                                       : Fp8GemmKernel::kSimt;
      break;
    case Fp8GemmKernel::kSkinny:
      plan.kernel = want, plan.ok = skinny;
      break;
    case Fp8GemmKernel::kCutlass:
      plan.kernel = want, plan.ok = cutlass_takes(p);
      break;
    case Fp8GemmKernel::kSimt:
      plan.kernel = want;
      break;
  }
  if (plan.ok && plan.kernel == Fp8GemmKernel::kSkinny) plan.splits = fp8_rowwise_skinny_splits(p, sms);
  return plan;
}

size_t fp8_rowwise_workspace_bytes(const RowwiseGemmParams& p, const Fp8RowwisePlan& plan) {
  if (!plan.ok || plan.kernel != Fp8GemmKernel::kSkinny || plan.splits <= 1) return 0;
  return static_cast<size_t>(plan.splits) * static_cast<size_t>(p.L * p.M * p.N) * sizeof(float);
}

cudaError_t fp8_rowwise_run(const RowwiseGemmParams& p, const Fp8RowwisePlan& plan, cudaStream_t s) {
  if (p.M <= 0 || p.N <= 0 || p.L <= 0) return cudaSuccess;
  if (!plan.ok) return cudaErrorNotSupported;
  switch (plan.kernel) {
    case Fp8GemmKernel::kSkinny:
      return fp8_rowwise_skinny(p, plan.splits, s);
    case Fp8GemmKernel::kCutlass: {
      const cudaError_t e = run_cutlass(p, s);
      // A forced row (tuning.forced_row) never falls back: the glue reports its refusal.
      if (e == cudaErrorNotSupported && plan.want == Fp8GemmKernel::kAuto && p.tuning.forced_row < 0)
        return fp8_rowwise_simt(p, s);
      return e;
    }
    default:
      return fp8_rowwise_simt(p, s);
  }
}

}  // namespace mslk::gemm
