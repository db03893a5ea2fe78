// CUDA backend of the INT4-weight GEMM ops (kernels/int4_gemm.h): at decode-sized M (int4_use_decode) a
// decode kernel (one pass over the packed weight, split along K, a float32 workspace for the
// splits); above, the weight dequantized to a BF16 temporary (and FP8 activations to BF16 with
// their row scale), then cuBLAS's BF16 GEMM: at M = 4096 the dequantization costs about 5% of the
// product, and cuBLAS's GEMM measured faster than our one-tile CUTLASS GEMM on these shapes
// (docs/design/int4_gemm.md). Operands whose rows or bases are not 16-byte aligned are copied
// contiguous first. Batches run one after another.
#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <algorithm>

#include "common/checks.h"
#include "common/require_sm90.h"
#include "gemm/int4_gemm.h"
#include "gemm/kernels/config_table.h"
#include "gemm/kernels/int4_gemm.h"
#include "mslk/utils/env.h"

namespace mslk::gemm {
namespace {

int64_t row_stride(const Tensor& t) { return t.size(0) > 1 ? t.stride(0) : t.size(1); }

Tensor aligned_rows(const Tensor& t) {
  if ((row_stride(t) * t.element_size()) % 16 == 0 && aligned(t.const_data_ptr(), 16)) return t;
  return t.is_contiguous() ? t.clone() : t.contiguous();
}

void check(cudaError_t e, const Int4Call& c, const char* what) {
  TORCH_CHECK(e != cudaErrorNotSupported, c.op, ": the CUDA ", what, " cannot take this problem (M=", c.X.size(1),
              ", N=", c.W.size(1), ", K=", c.X.size(2), ")");
  C10_CUDA_CHECK(e);
}

Int4DecodeTuning env_tuning() {
  Int4DecodeTuning t;
  t.kernel = static_cast<Int4DecodeKernel>(
      read_env([] { return env::choice(env::Var::kInt4Decode, {"auto", "mma", "fp32", "tma"}, 0); }));
  t.splits = static_cast<int>(read_env([] { return env::integer(env::Var::kInt4DecodeSplits, 0, 0, 4096); }));
  return t;
}

void cuda_run(const Int4Call& c) {
  const mslk::cuda::DeviceAttrs attrs = mslk::cuda::require_sm90(c.op);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  const int64_t B = c.X.size(0), M = c.X.size(1), K = c.X.size(2), N = c.W.size(1), G = c.scale.size(1);
  const bool fp8 = c.X.scalar_type() == at::kFloat8_e4m3fn;
  const bool decode = int4_use_decode(M);
  const Int4DecodeTuning tuning = env_tuning();
  const bool forced_mma = tuning.kernel == Int4DecodeKernel::kMma || tuning.kernel == Int4DecodeKernel::kTma;
  TORCH_CHECK(!decode || !forced_mma || int4_mma_applies(M, K, K / G), c.op,
              ": MSLK_INT4_DECODE=mma / tma needs K and the group size multiples of 128 (K=", K, ", group=", K / G, ")");
  const bool f8_scale = c.row_scale.defined();
  const Int4Scale scale_type = f8_scale                                 ? Int4Scale::kF8
                               : c.scale.scalar_type() == at::kFloat ? Int4Scale::kF32
                                                                     : Int4Scale::kBF16;
  const Int4DecodePlan plan = int4_decode_plan(M, N, K, K / G, attrs.sms, tuning);
  Tensor ws, wb, xb;
  // The TMA kernel where its alignment rules hold (asked per batch below), else the plan's kernel.
  const bool want_tma = decode && (tuning.kernel == Int4DecodeKernel::kAuto || tuning.kernel == Int4DecodeKernel::kTma) &&
                        int4_mma_applies(M, K, K / G);
  const int tma_splits = want_tma ? int4_tma_splits(M, N, K, attrs.sms, tuning.splits) : 1;
  const int ws_splits = decode ? std::max(plan.splits, tma_splits) : 1;
  if (ws_splits > 1) ws = at::empty({ws_splits, M, N}, c.X.options().dtype(at::kFloat));
  if (!decode) wb = at::empty({N, K}, c.X.options().dtype(at::kBFloat16));
  if (!decode && fp8) xb = at::empty({M, K}, c.X.options().dtype(at::kBFloat16));
  for (int64_t b = 0; b < B; ++b) {
    const Tensor x = aligned_rows(c.X[b]), w = aligned_rows(c.W[b]), out = c.out[b];
    Int4GemmParams p{x.const_data_ptr(),
                     row_stride(x),
                     w.const_data_ptr<int8_t>(),
                     row_stride(w),
                     c.scale[b].const_data_ptr(),
                     c.zero.defined() ? c.zero[b].const_data_ptr() : nullptr,
                     f8_scale ? c.row_scale[b].const_data_ptr<float>() : nullptr,
                     f8_scale ? 8 * N : N,
                     fp8 ? c.x_scale[b].const_data_ptr<float>() : nullptr,
                     out.data_ptr(),
                     N,
                     M,
                     N,
                     K,
                     K / G,
                     fp8,
                     scale_type};
    if (decode) {
      float* wsp = ws.defined() ? ws.data_ptr<float>() : nullptr;
      if (want_tma && int4_tma_applies(p)) {
        check(int4_decode_tma(p, tma_splits, wsp, stream), c, "decode kernel");
        continue;
      }
      TORCH_CHECK(tuning.kernel != Int4DecodeKernel::kTma, c.op,
                  ": MSLK_INT4_DECODE=tma needs a group of 128 or a multiple of 256 and 16-byte aligned rows of the "
                  "weight, the activations and the scales");
      check(int4_decode_run(p, plan, wsp, stream), c, "decode kernel");
      continue;
    }
    check(int4_dequant_w(p, wb.data_ptr(), stream), c, "dequantization");
    Tensor a = x;
    if (fp8) {
      check(int4_dequant_x(p, xb.data_ptr(), stream), c, "dequantization");
      a = xb;
    }
    Tensor o = out;
    at::mm_out(o, a, wb.t());
  }
}

constexpr Int4Backend kCudaBackend{cuda_run};

}  // namespace
}  // namespace mslk::gemm

TORCH_LIBRARY_IMPL(mslk, CUDA, m) { mslk::gemm::Int4Ops<&mslk::gemm::kCudaBackend>::register_mslk(m); }
