// CUDA backend of the INT8 GEMM ops: the CUTLASS sm90 kernel of kernels/int8_gemm.h (at M <=
// kInt8SwapMaxM its swap-AB row, which writes out^T as a column-major D: out itself). Operands
// whose rows or bases break TMA's 16-byte rule are copied contiguous first (zero-padded along K to
// a multiple of 16 when K is not one: exact, the padding adds nothing); an output row stride
// that breaks it (N % 8, M > 1) gets a padded temporary, copied back. The dynamic scale stays on
// the device (the epilogue reads it): no host sync.
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "common/require_sm90.h"
#include "gemm/int8_gemm.h"
#include "gemm/kernels/config_table.h"
#include "gemm/kernels/int8_gemm.h"

namespace mslk::gemm {
namespace {

int64_t row_stride(const Tensor& t) { return t.size(0) > 1 ? t.stride(0) : t.size(1); }

// The operand itself when TMA can read it, else a fresh contiguous copy, zero-padded along K to a
// multiple of 16 when K is not one (then a contiguous operand only fails on its base address).
Tensor tma_ready(const Tensor& t) {
  const int64_t pad = (16 - t.size(1) % 16) % 16;
  if (pad) return at::constant_pad_nd(t, {0, pad});
  if (row_stride(t) % 16 == 0 && aligned(t.const_data_ptr(), 16)) return t;
  return t.is_contiguous() ? t.clone() : t.contiguous();
}

void cuda_run(const Int8Call& c) {
  mslk::cuda::require_sm90(c.op);
  const Tensor x = tma_ready(c.XQ), w = tma_ready(c.WQ);
  const int64_t M = x.size(0), N = w.size(0), K = x.size(1), n8 = (N + 7) / 8 * 8;
  // One output row: its stride is never stepped, so any multiple of 8 serves.
  const int64_t ldd = M > 1 ? c.out.stride(0) : n8;
  const bool direct = ldd % 8 == 0 && aligned(c.out.data_ptr(), 16);
  const Tensor d = direct ? c.out : at::empty({M, n8}, c.out.options());
  Int8GemmParams p{x.const_data_ptr<int8_t>(), w.const_data_ptr<int8_t>(), d.data_ptr(), M, N, K,
                   row_stride(x), row_stride(w), direct ? ldd : d.stride(0), c.scale,
                   c.scale_t.defined() ? c.scale_t.const_data_ptr<float>() : nullptr};
  const cudaError_t e = int8_gemm_run(p, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(e != cudaErrorNotSupported, c.op, ": the CUDA kernel cannot take this problem (M=", M, ", N=", N,
              ", K=", K, "); this build may lack CUTLASS");
  C10_CUDA_CHECK(e);
  if (!direct) c.out.copy_(d.narrow(1, 0, N));
}

constexpr Int8Backend kCudaBackend{cuda_run};

}  // namespace
}  // namespace mslk::gemm

TORCH_LIBRARY_IMPL(mslk, CUDA, m) { mslk::gemm::Int8Ops<&mslk::gemm::kCudaBackend>::register_mslk(m); }
