// CPU reference of the attention-merge contract (merge_params.h), every sum in double, one
// rounding to the output type at the end.
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <vector>

#include "attention/merge_attentions.h"
#include "common/dtype_cpu.h"

namespace mslk::attention {
namespace {

template <typename T>
double load(const void* base, int64_t i) {
  return static_cast<double>(static_cast<const T*>(base)[i]);
}
double load_as(Dtype d, const void* base, int64_t i) {
  double v = 0;
  with_dtype(d, [&](auto t) { v = load<decltype(t)>(base, i); });
  return v;
}
void store_as(Dtype d, void* base, int64_t i, double v) {
  with_dtype(d, [&](auto t) { static_cast<decltype(t)*>(base)[i] = static_cast<decltype(t)>(static_cast<float>(v)); });
}

int64_t aoff(const MergeAttnLayout& l, int64_t b, int64_t m, int64_t g, int64_t h) {
  return b * l.sb + m * l.sm + g * l.sg + h * l.sh;
}
int64_t loff(const MergeLseLayout& l, int64_t b, int64_t g, int64_t h, int64_t m) {
  return b * l.sb + g * l.sg + h * l.sh + m * l.sm;
}
const void* shard_attn(const MergeShards& s, Dtype d, int i) {
  if (!s.stacked) return s.attn[i];
  const int64_t bytes = d == Dtype::kFloat32 ? 4 : 2;
  return static_cast<const char*>(s.attn[0]) + i * s.attn_split_stride * bytes;
}
const float* shard_lse(const MergeShards& s, int i) { return s.stacked ? s.lse[0] + i * s.lse_split_stride : s.lse[i]; }

template <typename F>
void for_rows(const MergeFwdParams& p, F&& f) {
  at::parallel_for(0, p.B * p.M * p.G * p.H, 64, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t h = r % p.H, g = r / p.H % p.G, m = r / (p.H * p.G) % p.M, b = r / (p.H * p.G * p.M);
      f(b, m, g, h);
    }
  });
}

void cpu_fwd(const MergeFwdParams& p) {
  for_rows(p, [&](int64_t b, int64_t m, int64_t g, int64_t h) {
    const double ninf = -std::numeric_limits<double>::infinity();
    std::vector<double> lse(p.S);
    double mx = ninf;
    for (int s = 0; s < p.S; ++s) {
      lse[s] = shard_lse(p.in, s)[loff(p.in.l, b, g, h, m)];
      mx = std::max(mx, lse[s]);
    }
    double den = 0;
    if (mx != ninf)
      for (int s = 0; s < p.S; ++s) den += std::exp(lse[s] - mx);
    const int64_t ia = aoff(p.in.a, b, m, g, h), io = aoff(p.o, b, m, g, h);
    for (int64_t k = 0; k < p.K; ++k) {
      double acc = 0;
      if (mx != ninf)
        for (int s = 0; s < p.S; ++s) acc += std::exp(lse[s] - mx) * load_as(p.in_dtype, shard_attn(p.in, p.in_dtype, s), ia + k);
      store_as(p.out_dtype, p.out, io + k, mx == ninf ? 0.0 : acc / den);
    }
    if (p.lse_out) p.lse_out[loff(p.lo, b, g, h, m)] = static_cast<float>(mx == ninf ? ninf : mx + std::log(den));
  });
}

void cpu_bwd(const MergeBwdParams& p) {
  at::parallel_for(0, p.B * p.M * p.G * p.H, 64, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t h = r % p.H, g = r / p.H % p.G, m = r / (p.H * p.G) % p.M, b = r / (p.H * p.G * p.M);
      const double L = p.lse_out[loff(p.lo, b, g, h, m)];
      const double dL = p.d_lse ? p.d_lse[loff(p.dl, b, g, h, m)] : 0.0;
      const int64_t ia = aoff(p.in.a, b, m, g, h), io = aoff(p.o, b, m, g, h), id = aoff(p.d, b, m, g, h);
      // gradients are contiguous [B, M, G, H, K] / [B, G, H, M]
      const int64_t ga = (((b * p.M + m) * p.G + g) * p.H + h) * p.K, gl = ((b * p.G + g) * p.H + h) * p.M + m;
      for (int s = 0; s < p.S; ++s) {
        const double w = std::isinf(L) && L < 0 ? 0.0 : std::exp(double(p.in.lse[s][loff(p.in.l, b, g, h, m)]) - L);
        double dot = 0;
        for (int64_t k = 0; k < p.K; ++k) {
          const double d = load_as(p.out_dtype, p.d_out, id + k);
          dot += d * (load_as(p.in_dtype, p.in.attn[s], ia + k) - load_as(p.out_dtype, p.out, io + k));
          store_as(p.in_dtype, p.d_attn[s], ga + k, w * d);
        }
        p.d_lse_s[s][gl] = static_cast<float>(w == 0.0 ? 0.0 : w * (dot + dL));
      }
    }
  });
}

constexpr MergeBackend kCpuBackend{cpu_fwd, cpu_bwd};
using CpuOps = MergeOps<&kCpuBackend>;

}  // namespace
}  // namespace mslk::attention

TORCH_LIBRARY_IMPL(mslk, CPU, m) { mslk::attention::CpuOps::register_mslk(m); }
