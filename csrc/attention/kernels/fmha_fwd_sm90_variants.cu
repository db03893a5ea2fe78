// The rows of kTileCfgs after each head dim's default (fmha_fwd_sm90_configs.h): the causal rows
// (banded_cfg) and the dense alternatives (kDenseAlts).
#include <utility>

#include "attention/kernels/fmha_fwd_sm90_launch.cuh"

namespace mslk::attention {
#if MSLK_HAS_CUTLASS
namespace {
template <int C>
cudaError_t run_row(const FmhaFwdParams& p, const FmhaFwdTuning& t, cudaStream_t stream) {
  if constexpr (C == sm90::default_cfg(sm90::kTileCfgs[C].d)) {
    (void)p, (void)t, (void)stream;
    return cudaErrorNotSupported;  // defaults have their own translation units
  } else {
    return sm90::launch_dtype<sm90::kTileCfgs[C].d, C>(p, t, stream);
  }
}

template <int... Cs>
cudaError_t run_any(int cfg, const FmhaFwdParams& p, const FmhaFwdTuning& t, cudaStream_t stream,
                    std::integer_sequence<int, Cs...>) {
  cudaError_t e = cudaErrorNotSupported;
  ((cfg == Cs ? (e = run_row<Cs>(p, t, stream), 0) : 0), ...);
  return e;
}
}  // namespace

cudaError_t fmha_fwd_sm90_variant(int cfg, const FmhaFwdParams& p, const FmhaFwdTuning& t, cudaStream_t stream) {
  if (cfg < 0 || cfg >= sm90::kNumTileCfgs || fmha_fwd_sm90_head_dim(p) != sm90::kTileCfgs[cfg].d)
    return cudaErrorNotSupported;
  return run_any(cfg, p, t, stream, std::make_integer_sequence<int, sm90::kNumTileCfgs>{});
}
#else
cudaError_t fmha_fwd_sm90_variant(int, const FmhaFwdParams&, const FmhaFwdTuning&, cudaStream_t) {
  return cudaErrorNotSupported;
}
#endif
}  // namespace mslk::attention
