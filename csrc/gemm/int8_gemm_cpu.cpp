// CPU reference of the INT8 GEMM contract (int8_gemm.h): exact integer sums, wrapped to int32 as
// the tensor cores accumulate, then float(acc) * scale in float32 and one rounding to bf16, the
// epilogue's arithmetic.
#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <torch/library.h>

#include <cstdint>

#include "gemm/int8_gemm.h"

namespace mslk::gemm {
namespace {

void cpu_run(const Int8Call& c) {
  const int64_t M = c.XQ.size(0), K = c.XQ.size(1), N = c.WQ.size(0);
  const int64_t ldx = c.XQ.stride(0), ldw = c.WQ.stride(0), ldd = c.out.stride(0);
  const auto* x = c.XQ.const_data_ptr<int8_t>();
  const auto* w = c.WQ.const_data_ptr<int8_t>();
  auto* out = c.out.data_ptr<c10::BFloat16>();
  const float scale = c.scale_t.defined() ? c.scale_t.item<float>() : c.scale;
  at::parallel_for(0, M, 1, [&](int64_t begin, int64_t end) {
    for (int64_t m = begin; m < end; ++m)
      for (int64_t n = 0; n < N; ++n) {
        const int8_t* xr = x + m * ldx;
        const int8_t* wr = w + n * ldw;
        int64_t acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += int64_t(xr[k]) * int64_t(wr[k]);
        const auto acc32 = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(acc)));
        out[m * ldd + n] = c10::BFloat16(static_cast<float>(acc32) * scale);
      }
  });
}

constexpr Int8Backend kCpuBackend{cpu_run};

}  // namespace
}  // namespace mslk::gemm

TORCH_LIBRARY_IMPL(mslk, CPU, m) { mslk::gemm::Int8Ops<&mslk::gemm::kCpuBackend>::register_mslk(m); }
