// Host-side predicate and head-dim dispatch of the Hopper attention backward.
#include <cstdint>

#include "attention/kernels/fmha_bwd_dq_tiles.h"
#include "attention/kernels/fmha_bwd_impl.h"
#include "attention/kernels/fmha_bwd_sm90.h"
#include "common/device_attrs.h"

namespace mslk::attention {
namespace {
// Tripwire: a new FmhaBwdParams field must be checked below before the sm90 kernel sees it.
static_assert(sizeof(FmhaBwdParams) == 472, "FmhaBwdParams changed: update fmha_bwd_sm90_supports()");

// TMA: 16-byte aligned bases, byte strides multiples of 16 and < 2^40; a broadcast row dim
// (stride 0) only with a single row.
bool tma_stride_ok(int64_t s) { return s >= 0 && s % 8 == 0 && s < (int64_t(1) << 38); }
bool tma_ok(const void* ptr, int64_t sb, int64_t sm, int64_t sh, int rows) {
  return ptr != nullptr && reinterpret_cast<uintptr_t>(ptr) % 16 == 0 && tma_stride_ok(sb) && tma_stride_ok(sm) &&
         tma_stride_ok(sh) && (sm != 0 || rows <= 1);
}

bool device_is_sm90() {
  int dev = 0;
  mslk::cuda::DeviceAttrs a;
  if (mslk::cuda::current_device_attrs(&dev, &a) != cudaSuccess) return (void)cudaGetLastError(), false;
  return a.cc_major == 9 && a.cc_minor == 0;
}

cudaError_t main_sm90(const FmhaBwdParams& p, const FmhaBwdScratch& w, cudaStream_t stream) {
  return p.K == 64 ? fmha_bwd_sm90_d64(p, w, stream)
                   : p.K == 128 ? fmha_bwd_sm90_d128(p, w, stream) : fmha_bwd_sm90_d256(p, w, stream);
}

}  // namespace

bool fmha_bwd_sm90_supports(const FmhaBwdParams& p) {
#if MSLK_HAS_CUTLASS
  if (p.deterministic || p.dropout.p != 0.f || p.bias != nullptr) return false;
  if (p.K != p.Kv || (p.K != 64 && p.K != 128 && !(p.K == 256 && p.sm90_d256))) return false;
  if (!tma_ok(p.q, p.q_sb, p.q_sm, p.q_sh, p.Mq) || !tma_ok(p.dout, p.do_sb, p.do_sm, p.do_sh, p.Mq) ||
      !tma_ok(p.k, p.k_sb, p.k_sm, p.k_sh, p.Mkv) || !tma_ok(p.v, p.v_sb, p.v_sm, p.v_sh, p.Mkv))
    return false;
  return fmha_bwd_supports(p) && device_is_sm90();
#else
  (void)p;
  return false;
#endif
}

cudaError_t fmha_bwd_sm90(const FmhaBwdParams& p, cudaStream_t stream) {
  if (!fmha_bwd_sm90_supports(p)) return cudaErrorNotSupported;
  return fmha_bwd_with(p, main_sm90, dq_tiles_used(p), stream);
}

}  // namespace mslk::attention
