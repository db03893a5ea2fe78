// CPU reference of the block/group-scaled FP8 GEMM contract (fp8_blockwise.h): the products of each
// K block summed exactly in double (E4M3 products need 8 significant bits), each block sum scaled
// by x_scale * w_scale (exact in double) and added in double, then one rounding to float32 and
// round-to-nearest-even to the result's dtype (bf16; fp16 or fp32 for matmul_fp8_block's dot_out_dtype).
#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <c10/util/Float8_e4m3fn.h>
#include <torch/library.h>

#include <array>

#include "gemm/fp8_blockwise.h"

namespace mslk::gemm {
namespace {

const std::array<double, 256>& fp8_values() {
  static const std::array<double, 256> t = [] {
    std::array<double, 256> v{};
    for (int i = 0; i < 256; ++i)
      v[i] = static_cast<float>(c10::Float8_e4m3fn(static_cast<uint8_t>(i), c10::Float8_e4m3fn::from_bits()));
    return v;
  }();
  return t;
}

void cpu_run(const BlockwiseCall& c) {
  const auto& lut = fp8_values();
  const int64_t M = c.A.size(0), K = c.A.size(1), N = c.B.size(0);
  const int64_t lda = c.A.stride(0), ldb = c.B.stride(0), ldd = c.out.stride(0);
  const auto* a = static_cast<const uint8_t*>(c.A.const_data_ptr());
  const auto* b = static_cast<const uint8_t*>(c.B.const_data_ptr());
  const at::ScalarType out_type = c.out.scalar_type();
  void* out = c.out.data_ptr();
  const float* xs = c.xs.const_data_ptr<float>();
  const float* ws = c.ws.const_data_ptr<float>();
  const int64_t xsm = c.xs.stride(0), xsk = c.xs.stride(1), wsn = c.ws.stride(0), wsk = c.ws.stride(1);
  at::parallel_for(0, M, 1, [&](int64_t begin, int64_t end) {
    for (int64_t m = begin; m < end; ++m) {
      const uint8_t* ar = a + m * lda;
      const float* xr = xs + (m / c.block_m) * xsm;
      for (int64_t n = 0; n < N; ++n) {
        const uint8_t* br = b + n * ldb;
        const float* wr = ws + (n / c.block_n) * wsn;
        double acc = 0;
        for (int64_t k0 = 0, kb = 0; k0 < K; k0 += c.block_k, ++kb) {
          const int64_t k1 = k0 + c.block_k < K ? k0 + c.block_k : K;
          double blk = 0;
          for (int64_t k = k0; k < k1; ++k) blk += lut[ar[k]] * lut[br[k]];
          acc += static_cast<double>(xr[kb * xsk]) * static_cast<double>(wr[kb * wsk]) * blk;
        }
        const float v = static_cast<float>(acc);
        if (out_type == at::kFloat)
          static_cast<float*>(out)[m * ldd + n] = v;
        else if (out_type == at::kHalf)
          static_cast<c10::Half*>(out)[m * ldd + n] = c10::Half(v);
        else
          static_cast<c10::BFloat16*>(out)[m * ldd + n] = c10::BFloat16(v);
      }
    }
  });
}

constexpr BlockwiseBackend kCpuBackend{cpu_run};
using CpuOps = BlockwiseOps<&kCpuBackend>;

}  // namespace
}  // namespace mslk::gemm

TORCH_LIBRARY_IMPL(mslk, CPU, m) { mslk::gemm::CpuOps::register_mslk(m); }
TORCH_LIBRARY_IMPL(triton, CPU, m) { mslk::gemm::CpuOps::register_triton(m); }
