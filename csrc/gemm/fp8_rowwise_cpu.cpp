// CPU reference of the rowwise FP8 GEMM contract (fp8_rowwise_params.h): the sum over k in
// double (exact for E4M3 products at any practical K), one rounding to float32, the float32
// epilogue fma(x_scale, w_scale * acc, bias), then round-to-nearest-even to bf16 / fp16.
#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Float8_e4m3fn.h>
#include <c10/util/Half.h>
#include <torch/library.h>

#include <array>
#include <cmath>

#include "gemm/fp8_rowwise.h"

namespace mslk::gemm {
namespace {

const std::array<float, 256>& fp8_table() {
  static const std::array<float, 256> t = [] {
    std::array<float, 256> v{};
    for (int i = 0; i < 256; ++i) v[i] = static_cast<float>(c10::Float8_e4m3fn(static_cast<uint8_t>(i), c10::Float8_e4m3fn::from_bits()));
    return v;
  }();
  return t;
}

void cpu_run(const RowwiseGemmParams& p) {
  const auto& lut = fp8_table();
  at::parallel_for(0, p.L * p.M, 1, [&](int64_t begin, int64_t end) {
    for (int64_t lm = begin; lm < end; ++lm) {
      const int64_t l = lm / p.M, m = lm % p.M;
      const uint8_t* a = p.a + l * p.batch_a + m * p.lda;
      const float xs = p.x_scale[l * p.batch_xs + m];
      for (int64_t n = 0; n < p.N; ++n) {
        const uint8_t* b = p.b + l * p.batch_b + n * p.ldb;
        double acc = 0;
        for (int64_t k = 0; k < p.K; ++k) acc += static_cast<double>(lut[a[k]]) * static_cast<double>(lut[b[k]]);
        const float ws = p.w_scale[l * p.batch_ws + n];
        const float bias = p.bias ? p.bias[l * p.batch_bias + n] : 0.f;
        const float v = std::fma(xs, ws * static_cast<float>(acc), bias);
        const int64_t o = l * p.batch_d + m * p.ldd + n;
        if (p.out_dtype == OutDtype::kFloat16)
          static_cast<c10::Half*>(p.out)[o] = c10::Half(v);
        else if (p.out_dtype == OutDtype::kFloat32)
          static_cast<float*>(p.out)[o] = v;
        else
          static_cast<c10::BFloat16*>(p.out)[o] = c10::BFloat16(v);
      }
    }
  });
}

constexpr RowwiseBackend kCpuBackend{cpu_run, nullptr};  // group sizes are host-visible: per-group calls
using CpuOps = RowwiseOps<&kCpuBackend>;

}  // namespace
}  // namespace mslk::gemm

TORCH_LIBRARY_IMPL(mslk, CPU, m) { mslk::gemm::CpuOps::register_mslk(m); }
TORCH_LIBRARY_IMPL(triton, CPU, m) { mslk::gemm::CpuOps::register_triton(m); }
