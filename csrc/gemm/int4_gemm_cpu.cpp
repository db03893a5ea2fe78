// CPU reference of the INT4-weight GEMM contract (int4_gemm.h): each weight dequantized once in
// float32 (fmaf(q, scale, zero); the FP8-shuffled scale is float(group scale) * row scale), the products summed in float64, the sum rounded to float32, the
// FP8 row scale applied in float32, one rounding to bf16.
#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Float8_e4m3fn.h>
#include <torch/library.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "gemm/int4_gemm.h"

namespace mslk::gemm {
namespace {

// Scale and zero of (g, n) in float32: the FP8-shuffled form's scale is float(copy 0) * row scale.
template <class S>
std::vector<float> dequantize(const Int4Call& c, int64_t b) {
  const int64_t N = c.W.size(1), K = c.X.size(2), G = c.scale.size(1), gs = K / G, ldw = c.W.stride(1);
  const bool f8 = c.row_scale.defined();
  const int64_t lds = f8 ? 8 * N : N;
  const auto* w = c.W.const_data_ptr<int8_t>() + b * c.W.stride(0);
  const S* s = c.scale.const_data_ptr<S>() + b * G * lds;
  const S* z = c.zero.defined() ? c.zero.const_data_ptr<S>() + b * G * N : nullptr;
  const float* rs = f8 ? c.row_scale.const_data_ptr<float>() + b * N : nullptr;
  std::vector<float> out(static_cast<size_t>(N * K));
  at::parallel_for(0, N, 16, [&](int64_t lo, int64_t hi) {
    for (int64_t n = lo; n < hi; ++n)
      for (int64_t k = 0; k < K; ++k) {
        const int byte = static_cast<uint8_t>(w[n * ldw + k / 2]);
        const int nib = (k % 2 ? byte >> 4 : byte) & 0xF;
        const float q = static_cast<float>(nib >= 8 ? nib - 16 : nib);
        const int64_t g = k / gs;
        float sc = static_cast<float>(s[g * lds + n]);
        if (rs) sc *= rs[n];
        out[n * K + k] = std::fma(q, sc, z ? static_cast<float>(z[g * N + n]) : 0.f);
      }
  });
  return out;
}

template <class X>
void gemm(const Int4Call& c, int64_t b, const std::vector<float>& w) {
  const int64_t M = c.X.size(1), K = c.X.size(2), N = c.W.size(1), ldx = c.X.stride(1);
  const X* x = c.X.const_data_ptr<X>() + b * c.X.stride(0);
  const float* xs = c.x_scale.defined() ? c.x_scale.const_data_ptr<float>() + b * M : nullptr;
  auto* out = c.out.data_ptr<c10::BFloat16>() + b * M * N;
  at::parallel_for(0, M * N, 64, [&](int64_t lo, int64_t hi) {
    std::vector<double> xr(static_cast<size_t>(K));
    int64_t cached = -1;
    for (int64_t i = lo; i < hi; ++i) {
      const int64_t m = i / N, n = i % N;
      if (m != cached) {
        for (int64_t k = 0; k < K; ++k) xr[k] = static_cast<double>(static_cast<float>(x[m * ldx + k]));
        cached = m;
      }
      const float* wr = w.data() + n * K;
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += xr[k] * static_cast<double>(wr[k]);
      float v = static_cast<float>(acc);
      if (xs) v *= xs[m];
      out[i] = c10::BFloat16(v);
    }
  });
}

void cpu_run(const Int4Call& c) {
  for (int64_t b = 0; b < c.X.size(0); ++b) {
    const auto st = c.scale.scalar_type();
    const std::vector<float> w = st == at::kFloat      ? dequantize<float>(c, b)
                                 : st == at::kBFloat16 ? dequantize<c10::BFloat16>(c, b)
                                                       : dequantize<c10::Float8_e4m3fn>(c, b);
    if (c.X.scalar_type() == at::kBFloat16)
      gemm<c10::BFloat16>(c, b, w);
    else
      gemm<c10::Float8_e4m3fn>(c, b, w);
  }
}

constexpr Int4Backend kCpuBackend{cpu_run};

}  // namespace
}  // namespace mslk::gemm

TORCH_LIBRARY_IMPL(mslk, CPU, m) { mslk::gemm::Int4Ops<&mslk::gemm::kCpuBackend>::register_mslk(m); }
