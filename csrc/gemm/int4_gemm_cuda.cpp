// CUDA backend of the INT4-weight GEMM ops (kernels/int4_gemm.h): at decode-sized M (int4_use_decode) a
// decode kernel (one pass over the packed weight, split along K, a float32 workspace for the
// splits); above, the weight dequantized to a BF16 temporary (and FP8 activations to BF16 with
// their row scale), then one BF16 CUTLASS GEMM. Operands whose rows or bases are not 16-byte
// aligned are copied contiguous first; an output the GEMM cannot store into (N % 8) gets a padded
// temporary. Batches run one after another.
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "common/require_sm90.h"
#include "gemm/int4_gemm.h"
#include "gemm/kernels/config_table.h"
#include "gemm/kernels/int4_gemm.h"

namespace mslk::gemm {
namespace {

int64_t row_stride(const Tensor& t) { return t.size(0) > 1 ? t.stride(0) : t.size(1); }

Tensor aligned_rows(const Tensor& t) {
  if ((row_stride(t) * t.element_size()) % 16 == 0 && aligned(t.const_data_ptr(), 16)) return t;
  return t.is_contiguous() ? t.clone() : t.contiguous();
}

void check(cudaError_t e, const Int4Call& c, const char* what) {
  TORCH_CHECK(e != cudaErrorNotSupported, c.op, ": the CUDA ", what, " cannot take this problem (M=", c.X.size(1),
              ", N=", c.W.size(1), ", K=", c.X.size(2), "); this build may lack CUTLASS");
  C10_CUDA_CHECK(e);
}

void cuda_run(const Int4Call& c) {
  const mslk::cuda::DeviceAttrs attrs = mslk::cuda::require_sm90(c.op);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  const int64_t B = c.X.size(0), M = c.X.size(1), K = c.X.size(2), N = c.W.size(1), G = c.scale.size(1);
  const bool fp8 = c.X.scalar_type() == at::kFloat8_e4m3fn;
  const bool decode = int4_use_decode(M, K, K / G);
  const bool f8_scale = c.row_scale.defined();
  const Int4Scale scale_type = f8_scale                                 ? Int4Scale::kF8
                               : c.scale.scalar_type() == at::kFloat ? Int4Scale::kF32
                                                                     : Int4Scale::kBF16;
  const Int4DecodePlan plan = int4_decode_plan(M, N, K, K / G, attrs.sms);
  Tensor ws, wb, xb, pad;
  if (decode && plan.splits > 1) ws = at::empty({plan.splits, M, N}, c.X.options().dtype(at::kFloat));
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
      check(int4_decode_run(p, plan, ws.defined() ? ws.data_ptr<float>() : nullptr, stream), c, "decode kernel");
      continue;
    }
    check(int4_dequant_w(p, wb.data_ptr(), stream), c, "dequantization");
    const void* a = x.const_data_ptr();
    int64_t lda = row_stride(x);
    if (fp8) {
      check(int4_dequant_x(p, xb.data_ptr(), stream), c, "dequantization");
      a = xb.const_data_ptr(), lda = K;
    }
    const bool direct = N % 8 == 0 && aligned(out.data_ptr(), 16);
    if (!direct && !pad.defined()) pad = at::empty({M, (N + 7) / 8 * 8}, c.out.options());
    const Tensor d = direct ? out : pad;
    check(int4_bf16_gemm(a, lda, wb.const_data_ptr(), K, d.data_ptr(), d.stride(0), M, N, K, stream), c, "GEMM");
    if (!direct) out.copy_(pad.narrow(1, 0, N));
  }
}

constexpr Int4Backend kCudaBackend{cuda_run};

}  // namespace
}  // namespace mslk::gemm

TORCH_LIBRARY_IMPL(mslk, CUDA, m) { mslk::gemm::Int4Ops<&mslk::gemm::kCudaBackend>::register_mslk(m); }
