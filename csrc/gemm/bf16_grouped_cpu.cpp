// CPU reference of the BF16 grouped GEMM contract (bf16_grouped_params.h): every sum in
// float32 (products of bf16 values are exact in float32), in order of increasing k, then one
// round-to-nearest-even to bf16 (or the float32 store / accumulate of wgrad).
#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "gemm/bf16_grouped.h"

namespace mslk::gemm {
namespace {

using bf16 = c10::BFloat16;

std::vector<int64_t> sizes(const Bf16GroupedParams& p) {
  std::vector<int64_t> m(p.G);
  for (int64_t g = 0; g < p.G; ++g) {
    const int64_t v = p.m_sizes == nullptr ? p.total_M
                      : p.m_sizes_int64   ? static_cast<const int64_t*>(p.m_sizes)[g]
                                          : static_cast<const int32_t*>(p.m_sizes)[g];
    m[g] = std::max<int64_t>(v, 0);
  }
  return m;
}

void store(const Bf16GroupedParams& p, int64_t o, float v) {
  if (p.out_fp32) {
    float* out = static_cast<float*>(p.out);
    out[o] = p.accumulate ? out[o] + v : v;
  } else {
    static_cast<bf16*>(p.out)[o] = bf16(v);
  }
}

void cpu_run(const Bf16GroupedParams& p) {
  const bf16* X = static_cast<const bf16*>(p.x);
  const bf16* W = static_cast<const bf16*>(p.w);
  const auto m = sizes(p);
  if (p.mode == Bf16GroupedMode::kWgrad) {
    std::vector<int64_t> start(p.G);
    int64_t s = 0;
    for (int64_t g = 0; g < p.G; ++g) {
      start[g] = s;
      s += std::min(m[g], p.total_M - s);
    }
    at::parallel_for(0, p.G * p.N, 1, [&](int64_t b, int64_t e) {
      for (int64_t gn = b; gn < e; ++gn) {
        const int64_t g = gn / p.N, n = gn % p.N, r0 = start[g];
        const int64_t rows = std::min(m[g], p.total_M - r0);
        for (int64_t k = 0; k < p.K; ++k) {
          float acc = 0.f;
          for (int64_t r = 0; r < rows; ++r)
            acc += static_cast<float>(X[(r0 + r) * p.ldx + n]) * static_cast<float>(W[(r0 + r) * p.ldw + k]);
          store(p, (g * p.N + n) * p.K + k, acc);
        }
      }
    });
    return;
  }
  // kForward / kDgrad: the group of every row (-1: zero row).
  std::vector<int64_t> group(p.total_M, -1);
  if (p.fixed_rows > 0) {
    for (int64_t g = 0; g < p.G; ++g)
      for (int64_t r = 0; r < std::min(m[g], p.fixed_rows); ++r) group[g * p.fixed_rows + r] = g;
  } else {
    int64_t s = 0;
    for (int64_t g = 0; g < p.G; ++g) {
      const int64_t rows = std::min(m[g], p.total_M - s);
      std::fill(group.begin() + s, group.begin() + s + rows, g);
      s += rows;
    }
  }
  const bool fwd = p.mode == Bf16GroupedMode::kForward;
  const int64_t cols = fwd ? p.N : p.K, red = fwd ? p.K : p.N;
  at::parallel_for(0, p.total_M, 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t g = group[r];
      for (int64_t j = 0; j < cols; ++j) {
        float acc = 0.f;
        if (g >= 0) {
          const bf16* x = X + r * p.ldx;
          const bf16* w = W + g * p.w_gs;
          for (int64_t i = 0; i < red; ++i)
            acc += static_cast<float>(x[i]) * static_cast<float>(fwd ? w[j * p.ldw + i] : w[i * p.ldw + j]);
        }
        store(p, r * cols + j, acc);
      }
    }
  });
}

constexpr Bf16GroupedBackend kCpuBackend{cpu_run, true, nullptr};
using CpuOps = Bf16GroupedOps<&kCpuBackend>;

}  // namespace
}  // namespace mslk::gemm

TORCH_LIBRARY_IMPL(mslk, CPU, m) { mslk::gemm::CpuOps::register_mslk(m); }
