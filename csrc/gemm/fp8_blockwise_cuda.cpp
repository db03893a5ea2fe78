// CUDA backend of the block/group-scaled FP8 GEMM ops. M <= 16 (MSLK_FP8_BLOCKWISE_DECODE=auto)
// takes the TMA-streaming decode kernel (fp8_blockwise_decode.h), which reads scale views of any
// strides in place. Otherwise the call's scale grids are brought into the CUTLASS sm90 kernel's
// layouts (fp8_blockwise.h: one scale per row and 128-K block for X, one per 128 x 128 block for
// W, both MN-major): the groupwise scales as the spec lays them out ([K/128, M] with M % 4 == 0,
// [K/128, N/128]) go in as they are. Any other block size (block_n and block_k multiples of 128)
// is expanded to those grids first, on either path.
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "common/checks.h"
#include "common/require_sm90.h"
#include "gemm/dot_out_dtype.h"
#include "gemm/fp8_blockwise.h"
#include "gemm/fp8_grouped_cuda.h"
#include "gemm/gemm_env.h"
#include "gemm/kernels/config_table.h"
#include "gemm/kernels/fp8_blockwise.h"
#include "gemm/kernels/fp8_blockwise_configs.h"
#include "gemm/kernels/fp8_blockwise_grouped_configs.h"
#include "gemm/kernels/fp8_blockwise_decode.h"
#include "gemm/kernels/fp8_blockwise_simt.h"
#include "mslk/utils/env.h"

namespace mslk::gemm {
namespace {

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Scale grid g [rows_in, cols_in] sampled at (idx_r, idx_c) -> [len(idx_r), len(idx_c)].
Tensor sample(const Tensor& g, int64_t n, int64_t block, int64_t cols, int64_t block_k) {
  const auto li = g.options().dtype(at::kLong);
  const Tensor r = at::arange(n, li).div_(block, "floor");
  const Tensor c = at::arange(cols, li).mul_(128).div_(block_k, "floor");
  return g.index_select(0, r).index_select(1, c);
}

// The operands and their row strides (a single row's stride is its length) in either kernel's params.
template <class P>
void set_operands(P& p, const BlockwiseCall& c) {
  p.a = static_cast<const uint8_t*>(c.A.const_data_ptr());
  p.b = static_cast<const uint8_t*>(c.B.const_data_ptr());
  p.out = c.out.data_ptr();
  p.M = c.A.size(0), p.N = c.B.size(0), p.K = c.A.size(1);
  p.lda = p.M > 1 ? c.A.stride(0) : p.K;
  p.ldb = p.N > 1 ? c.B.stride(0) : p.K;
  p.ldd = p.M > 1 ? c.out.stride(0) : p.N;
}

enum class DecodeMode : int { kAuto, kOn, kOff };

// The decode kernel for M <= 16; false (nothing run) where the CUTLASS kernel is to take the call.
bool run_decode(const BlockwiseCall& c, const mslk::cuda::DeviceAttrs& attrs) {
  const int64_t M = c.A.size(0), K = c.A.size(1), N = c.B.size(0), kb = cdiv(K, 128), nb = cdiv(N, 128);
  const auto mode = static_cast<DecodeMode>(
      read_env([] { return env::choice(env::Var::kFp8BlockwiseDecode, {"auto", "on", "off"}, 0); }));
  if (mode == DecodeMode::kOff || (mode == DecodeMode::kAuto && M > kBlockwiseDecodeMaxM)) return false;
  BlockwiseDecodeParams p{};
  set_operands(p, c);
  if (!fp8_blockwise_decode_applies(p)) {
    TORCH_CHECK_VALUE(mode != DecodeMode::kOn, c.op, ": MSLK_FP8_BLOCKWISE_DECODE=on needs M <= ",
                      kBlockwiseDecodeMaxM, ", K % 16 == 0 and 16-byte aligned operands and rows (M=", M, ", N=", N,
                      ", K=", K, ", row strides ", p.lda, "/", p.ldb, ")");
    return false;
  }
  Tensor sfa, sfb;  // expanded grids, when the blocks are not the kernel's
  if (c.block_m == 1 && c.block_k == 128) {
    p.sfa = c.xs.const_data_ptr<float>(), p.sfa_sm = c.xs.stride(0), p.sfa_sk = c.xs.stride(1);
  } else {
    sfa = sample(c.xs, M, c.block_m, kb, c.block_k);  // [M, kb]
    p.sfa = sfa.const_data_ptr<float>(), p.sfa_sm = kb, p.sfa_sk = 1;
  }
  if (c.block_n == 128 && c.block_k == 128) {
    p.sfb = c.ws.const_data_ptr<float>(), p.sfb_sn = c.ws.stride(0), p.sfb_sk = c.ws.stride(1);
  } else {
    sfb = sample(c.ws, nb, c.block_n / 128, kb, c.block_k);  // [nb, kb]
    p.sfb = sfb.const_data_ptr<float>(), p.sfb_sn = kb, p.sfb_sk = 1;
  }
  const int forced =
      static_cast<int>(read_env([] { return env::integer(env::Var::kFp8BlockwiseDecodeSplits, 0, 0, 65535); }));
  const int splits = fp8_blockwise_decode_splits(M, N, K, attrs.sms, forced);
  Tensor ws;
  if (splits > 1) {
    ws = at::empty({splits, M, N}, c.xs.options().dtype(at::kFloat));
    p.workspace = ws.data_ptr<float>();
  }
  const cudaError_t e = fp8_blockwise_decode(p, splits, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK_VALUE(e != cudaErrorNotSupported, c.op, ": the CUDA decode kernel cannot take this problem (M=", M,
                    ", N=", N, ", K=", K, ")");
  C10_CUDA_CHECK(e);
  return true;
}

// The portable kernel, for the results the CUTLASS and decode kernels do not write.
void run_simt(const BlockwiseCall& c) {
  const int64_t M = c.A.size(0), K = c.A.size(1), N = c.B.size(0), kb = cdiv(K, 128), nb = cdiv(N, 128);
  BlockwiseDecodeParams p{};
  set_operands(p, c);
  const Tensor sfa = sample(c.xs, M, c.block_m, kb, c.block_k);  // [M, kb]
  const Tensor sfb = sample(c.ws, nb, c.block_n / 128, kb, c.block_k);  // [nb, kb]
  p.sfa = sfa.const_data_ptr<float>(), p.sfa_sm = sfa.stride(0), p.sfa_sk = sfa.stride(1);
  p.sfb = sfb.const_data_ptr<float>(), p.sfb_sn = sfb.stride(0), p.sfb_sk = sfb.stride(1);
  const cudaError_t e = fp8_blockwise_simt(p, out_dtype_of(c.out.scalar_type()), c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK_VALUE(e != cudaErrorNotSupported, c.op, ": the portable CUDA kernel cannot take this problem (M=", M,
                    ", N=", N, ")");
  C10_CUDA_CHECK(e);
}

void cuda_run(const BlockwiseCall& c) {
  const int64_t M = c.A.size(0), K = c.A.size(1), N = c.B.size(0), kb = cdiv(K, 128), nb = cdiv(N, 128);
  const mslk::cuda::DeviceAttrs attrs = mslk::cuda::require_sm90(c.op);
  TORCH_CHECK_VALUE(c.block_n % 128 == 0 && c.block_k % 128 == 0, c.op,
                    ": on CUDA the weight scale blocks must be multiples of 128 along N and K (the kernel applies "
                    "scales per 128 x 128 block), got block_n=",
                    c.block_n, ", block_k=", c.block_k);
  if (c.out.scalar_type() != at::kBFloat16) {  // matmul_fp8_block's fp16 / fp32 results
    run_simt(c);
    return;
  }
  if (run_decode(c, attrs)) return;
  BlockwiseKernelParams p;
  set_operands(p, c);
  // X scales: [kb, ld] with ld = M rounded up to 4 (TMA reads 16-byte rows).
  const int64_t m_pad = (M + 3) / 4 * 4;
  Tensor sfa;
  if (c.block_m == 1 && c.block_k == 128 && c.xs.stride(0) == 1 && c.xs.stride(1) == m_pad &&
      aligned(c.xs.const_data_ptr(), 16)) {
    p.sfa = c.xs.const_data_ptr<float>();
    p.sfa_ld = m_pad;
  } else if (c.block_m == 1 && c.block_k == 128) {
    // The quantizers' row-major [M, K/128] grid: one transposing copy. The pad columns (rows past
    // M) scale only accumulator rows the epilogue does not store, so they stay uninitialised.
    sfa = at::empty({kb, m_pad}, c.xs.options());
    sfa.narrow(1, 0, M).copy_(c.xs.t());
    p.sfa = sfa.const_data_ptr<float>();
    p.sfa_ld = m_pad;
  } else {
    sfa = at::zeros({kb, m_pad}, c.xs.options());
    sfa.narrow(1, 0, M).copy_(sample(c.xs, M, c.block_m, kb, c.block_k).t());
    p.sfa = sfa.const_data_ptr<float>();
    p.sfa_ld = m_pad;
  }
  Tensor sfb;
  if (c.block_n == 128 && c.block_k == 128 && (nb == 1 || c.ws.stride(0) == 1) && c.ws.stride(1) >= nb) {
    p.sfb = c.ws.const_data_ptr<float>();
    p.sfb_ld = c.ws.stride(1);
  } else if (c.block_n == 128 && c.block_k == 128) {
    sfb = c.ws.t().contiguous();  // the quantizers' row-major [N/128, K/128] grid
    p.sfb = sfb.const_data_ptr<float>();
    p.sfb_ld = nb;
  } else {
    sfb = sample(c.ws, nb, c.block_n / 128, kb, c.block_k).t().contiguous();
    p.sfb = sfb.const_data_ptr<float>();
    p.sfb_ld = nb;
  }
  p.tuning = env_tuning(env::Var::kFp8BlockwiseConfig, kNumFp8BlockwiseConfigs);
  const cudaError_t e = fp8_blockwise_run(p, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK_VALUE(e != cudaErrorNotSupported, c.op, ": the CUDA kernel cannot take this problem (M=", M, ", N=", N,
                    ", K=", K, ", row strides ", p.lda, "/", p.ldb, "/", p.ldd,
                    "): TMA needs K % 16 == 0, N % 8 == 0 and 16-byte aligned operands and rows");
  C10_CUDA_CHECK(e);
}

// The device-side grouped kernel (fp8_grouped_cuda.h); MSLK_FP8_BLOCKWISE_GROUPED_CONFIG forces its row
// (the CUTLASS rows, then mslk's wgmma kernel).
bool cuda_grouped(const Fp8GroupedParams& p) {
  mslk::cuda::require_sm90("f8f8bf16_groupwise_grouped");
  return run_fp8_grouped(p, env::Var::kFp8BlockwiseGroupedConfig, "MSLK_FP8_BLOCKWISE_GROUPED_CONFIG",
                         kFp8BlockwiseGroupedWgmmaRow + 1, fp8_blockwise_grouped_run);
}

constexpr BlockwiseBackend kCudaBackend{cuda_run, cuda_grouped};
using CudaOps = BlockwiseOps<&kCudaBackend>;

}  // namespace
}  // namespace mslk::gemm

TORCH_LIBRARY_IMPL(mslk, CUDA, m) { mslk::gemm::CudaOps::register_mslk(m); }
TORCH_LIBRARY_IMPL(triton, CUDA, m) { mslk::gemm::CudaOps::register_triton(m); }
