// CPU reference of the FP8 quantizers: the contracts of fp8_params.h in plain loops, with the
// same float32 arithmetic as the CUDA kernels (so the two agree bit for bit on finite inputs).
#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <torch/library.h>

#include <cmath>

#include "common/fp8_cpu.h"
#include "common/dtype_cpu.h"
#include "quantize/fp8_quantize.h"

namespace mslk::quantize {
namespace {

struct Scale {
  float scale, inv;
};
Scale tile_scale(float amax, float eps, const float* ub) {
  const float c = clamp_amax(amax, eps, ub);
  return {c / kFp8E4M3Max, kFp8E4M3Max / c};
}

uint8_t fp8_bits(float v) { return to_fp8_e4m3_sat(v).x; }

void cpu_tiles(const Fp8TileParams& p) {
  with_dtype(p.in.dtype, [&](auto t) {
    using T = decltype(t);
    const T* in = static_cast<const T*>(p.in.ptr);
    const int64_t n_bi = (p.in.M + p.tile_m - 1) / p.tile_m, n_bj = (p.in.K + p.tile_k - 1) / p.tile_k;
    at::parallel_for(0, n_bi * n_bj, 1, [&](int64_t begin, int64_t end) {
      for (int64_t tile = begin; tile < end; ++tile) {
        const int64_t bi = tile / n_bj, bj = tile % n_bj;
        const int64_t r0 = bi * p.tile_m, r1 = std::min(r0 + p.tile_m, p.in.M);
        const int64_t c0 = bj * p.tile_k, c1 = std::min(c0 + p.tile_k, p.in.K);
        const bool valid = p.tile_m != 1 || row_is_valid(p, r0);
        float amax = 0.f;
        for (int64_t r = r0; valid && r < r1; ++r)
          for (int64_t c = c0; c < c1; ++c) amax = std::fmax(amax, std::fabs(static_cast<float>(in[r * p.in.stride + c])));
        const Scale s = tile_scale(amax, p.eps, p.scale_ub);
        p.scale[scale_index(p, bi, bj)] = s.scale;
        for (int64_t r = r0; r < r1; ++r) {
          uint8_t* out = p.out + r * p.out_stride;
          for (int64_t c = c0; c < c1; ++c)
            out[c] = valid ? fp8_bits(static_cast<float>(in[r * p.in.stride + c]) * s.inv) : 0;
          if (c1 == p.in.K)
            for (int64_t c = p.in.K; c < p.out_stride; ++c) out[c] = 0;
        }
      }
    });
  });
}

void cpu_tensor(const Rows& in, uint8_t* out, float* scale, float* /*amax_scratch*/) {
  with_dtype(in.dtype, [&](auto t) {
    using T = decltype(t);
    const T* x = static_cast<const T*>(in.ptr);
    const float amax = at::parallel_reduce(
        0, in.M, 1, 0.f,
        [&](int64_t b, int64_t e, float acc) {
          for (int64_t r = b; r < e; ++r)
            for (int64_t c = 0; c < in.K; ++c) acc = std::fmax(acc, std::fabs(static_cast<float>(x[r * in.stride + c])));
          return acc;
        },
        [](float a, float b) { return std::fmax(a, b); });
    const Scale s = tile_scale(amax, kFp8Eps, nullptr);
    *scale = s.scale;
    at::parallel_for(0, in.M, 1, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r)
        for (int64_t c = 0; c < in.K; ++c) out[r * in.K + c] = fp8_bits(static_cast<float>(x[r * in.stride + c]) * s.inv);
    });
  });
}

void cpu_dequant(const Fp8DequantParams& p) {
  auto* out = static_cast<c10::BFloat16*>(p.out);
  at::parallel_for(0, p.M, 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r)
      for (int64_t c = 0; c < p.K; ++c) {
        c10::Float8_e4m3fn q;
        q.x = p.xq[r * p.stride + c];
        const float s = p.scale[(r / p.tile_m) * p.scale_stride_m + (c / p.tile_k) * p.scale_stride_k];
        out[r * p.K + c] = c10::BFloat16(static_cast<float>(q) * s);
      }
  });
}

constexpr Fp8Backend kCpuBackend{cpu_tiles, cpu_tiles, cpu_tiles, cpu_tensor, cpu_dequant};
using CpuOps = Fp8Ops<&kCpuBackend>;

}  // namespace
}  // namespace mslk::quantize

TORCH_LIBRARY_IMPL(triton, CPU, m) { mslk::quantize::CpuOps::register_triton(m); }
TORCH_LIBRARY_IMPL(mslk, CPU, m) { mslk::quantize::CpuOps::register_mslk(m); }
