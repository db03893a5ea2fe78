// Host-side predicate and head-dim dispatch of the Hopper fused attention forward.
#include <cstdint>

#include "attention/kernels/fmha_fwd_sm90.h"
#include "attention/kernels/fmha_fwd_sm90_configs.h"
#include "attention/kernels/fmha_fwd_sm90_work.h"
#include "common/device_attrs.h"

namespace mslk::attention {
namespace {
// Tripwire: a new FmhaFwdParams field (e.g. a paged-KV block table) must be added to the checks
// below as "not supported" before the sm90 kernel may see such problems.
static_assert(sizeof(FmhaFwdParams) == 352, "FmhaFwdParams changed: update fmha_fwd_sm90_head_dim()");

#if MSLK_HAS_CUTLASS
// TMA needs 16-byte aligned bases and byte strides that are multiples of 16 and < 2^40.
bool tma_stride_ok(int64_t s) { return s >= 0 && s % 8 == 0 && s < (int64_t(1) << 38); }
bool tma_base_ok(const void* ptr) { return ptr != nullptr && reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }
// A row dim read through TMA: broadcast (stride 0) only when it holds a single row.
bool rows_ok(int64_t s, int rows) { return tma_stride_ok(s) && (s != 0 || rows <= 1); }
#endif

bool device_is_sm90() {
  int dev = 0;
  mslk::cuda::DeviceAttrs a;
  if (mslk::cuda::current_device_attrs(&dev, &a) != cudaSuccess) return (void)cudaGetLastError(), false;
  return a.cc_major == 9 && a.cc_minor == 0;
}
}  // namespace

int fmha_fwd_sm90_head_dim(const FmhaFwdParams& p) {
#if MSLK_HAS_CUTLASS
  if (p.bias != nullptr && p.bias_is_fp32 != 0 && p.bias_is_fp32 != 1) return 0;
  if (p.block_table != nullptr && (p.seqstart_q == nullptr || p.page_size <= 0 || p.B != 1)) return 0;
  if (p.dropout.p > 0.f) return 0;         // dropout: only the FA2 kernel applies it
  if (p.K <= 0 || p.Kv <= 0 || p.K % 8 != 0 || p.Kv % 8 != 0 || p.K > 256 || p.Kv > 256) return 0;
  if (p.Mq <= 0 || p.Mkv <= 0 || p.B <= 0 || p.H <= 0) return 0;
  if (p.mask_kind < kMaskNone || p.mask_kind > kMaskLocalBottomRight) return 0;
  if (!tma_base_ok(p.q) || !tma_base_ok(p.k) || !tma_base_ok(p.v)) return 0;
  if (!rows_ok(p.q_sm, p.Mq) || !rows_ok(p.k_sm, p.Mkv) || !rows_ok(p.v_sm, p.Mkv)) return 0;
  if (!tma_stride_ok(p.q_sh) || !tma_stride_ok(p.q_sb) || !tma_stride_ok(p.k_sh) || !tma_stride_ok(p.k_sb) ||
      !tma_stride_ok(p.v_sh) || !tma_stride_ok(p.v_sb))
    return 0;
  // The epilogue stores column pairs as 32-bit words.
  if (p.out == nullptr || reinterpret_cast<uintptr_t>(p.out) % 4 != 0 || p.o_sm % 2 || p.o_sh % 2 || p.o_sb % 2)
    return 0;
  const int d = p.K > p.Kv ? p.K : p.Kv;
  return d <= 64 ? 64 : d <= 128 ? 128 : 256;
#else
  (void)p;
  return 0;
#endif
}

int fmha_fwd_sm90_num_cfgs() { return sm90::kNumTileCfgs; }

namespace {
int device_sms() {
  int dev = 0, sms = 0;
  return mslk::cuda::current_device_sms(&dev, &sms) == cudaSuccess ? sms : ((void)cudaGetLastError(), 0);
}

// Persistent walk of row cfg over the SMs: work tiles, grid and stream-K plan, for the workspace
// size and dense_cfg. launch() (fmha_fwd_sm90_launch.cuh) computes the same from its traits; if
// the two ever differ, its guard (workspace_bytes >= need) runs whole tiles instead.
struct Walk {
  int64_t num_work;
  int grid;
  sm90::StreamK sk;
};
Walk walk_of(const FmhaFwdParams& p, const FmhaFwdTuning& t, const sm90::TileCfg& cfg, int sms) {
  Walk w{0, 0, sm90::StreamK{0, 0, 0, 0}};
  const int bm = 64 * cfg.wgs;
  w.num_work = int64_t((p.max_seqlen_q + bm - 1) / bm) * p.H * p.num_seqs;
  if (w.num_work >= (int64_t(1) << 30) || sms <= 0) return w;
  const sm90::StreamKPolicy pol = sm90::stream_k_policy(cfg.d, t.sm90_stream_k);
  w.sk = sm90::stream_k_plan(p, int(w.num_work), sms, cfg.bn, pol.min_gain, pol.min_key_tiles, pol.cap_parts);
  w.grid = w.sk.grid;
  return w;
}

// kDenseAlts: the head dim's dense row of least modelled time; c when d has no alternatives.
int dense_cfg(const FmhaFwdParams& p, const FmhaFwdTuning& t, int d, int c) {
  const int sms = device_sms();
  double best = 0;
  for (const sm90::DenseAlt& a : sm90::kDenseAlts) {
    const sm90::TileCfg& cfg = sm90::kTileCfgs[a.cfg];
    if (a.d != d || !cfg.persistent || sms <= 0) continue;
    const Walk w = walk_of(p, t, cfg, sms);
    if (w.grid <= 0) continue;
    const double rounds = w.sk.n_sk > 0 ? double(w.num_work) / w.grid + sm90::kDenseSplitKeyTiles / w.sk.n_kt
                                        : double((w.num_work + w.grid - 1) / w.grid);
    const double t = rounds * 64 * cfg.wgs * a.cost;
    if (best == 0 || t < best) best = t, c = a.cfg;
  }
  return c;
}

// The kTileCfgs row for p (head dim d). Work tiles of unequal cost (causal masks; varlen blocks of
// unequal lengths) balance better under the hardware's block scheduler than under the static
// persistent walk.
int row_for(const FmhaFwdParams& p, const FmhaFwdTuning& t, int d) {
  const bool causal = p.mask_kind == kMaskCausalTopLeft || p.mask_kind == kMaskCausalBottomRight;
  const bool dense = p.mask_kind == kMaskNone && p.seqstart_q == nullptr && p.seqlen_k == nullptr &&
                     p.window_left < 0 && p.window_right < 0;
  const bool bias = p.bias != nullptr;
  if (bias) return sm90::bias_cfg(d);  // the head dim's bias row (a row without the bias path would drop it)
  int c = causal || p.seqstart_q != nullptr ? sm90::banded_cfg(d) : sm90::default_cfg(d);
  if (dense) c = dense_cfg(p, t, d, c);
  if (const int f = t.sm90_cfg; f >= 0 && f < sm90::kNumTileCfgs && sm90::kTileCfgs[f].d == d &&
                                sm90::kTileCfgs[f].bias == 0)
    c = f;
  return c;
}
}  // namespace

cudaError_t fmha_fwd_sm90(const FmhaFwdParams& p, const FmhaFwdTuning& t, cudaStream_t stream) {
  const int d = fmha_fwd_sm90_head_dim(p);
  if (d == 0 || !device_is_sm90()) return cudaErrorNotSupported;
  const int c = row_for(p, t, d);
  if (c < 0) return cudaErrorNotSupported;
  if (c != sm90::default_cfg(d)) return fmha_fwd_sm90_variant(c, p, t, stream);
  if (d == 64) return fmha_fwd_sm90_d64(p, t, stream);
  if (d == 128) return fmha_fwd_sm90_d128(p, t, stream);
  return fmha_fwd_sm90_d256(p, t, stream);
}

int64_t fmha_fwd_sm90_workspace_bytes(const FmhaFwdParams& p, const FmhaFwdTuning& t) {
  const int d = fmha_fwd_sm90_head_dim(p);
  if (d == 0 || !device_is_sm90()) return 0;
  const int c = row_for(p, t, d);
  if (c < 0 || !sm90::kTileCfgs[c].persistent) return 0;
  const sm90::TileCfg& cfg = sm90::kTileCfgs[c];
  const Walk w = walk_of(p, t, cfg, device_sms());
  return w.sk.n_sk > 0 ? sm90::stream_k_workspace_bytes(d, cfg.wgs, w.grid) : 0;
}
}  // namespace mslk::attention
