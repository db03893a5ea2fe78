// CUDA backend of mslk::fmha_fused_fwd: the fused kernels of kernels/fmha_fwd_kernel.cuh (FA2,
// mma.sync) and kernels/fmha_fwd_sm90_kernel.cuh (Hopper, TMA + wgmma), fp16/bf16, head dims
// <= 256, chosen by kernels/fmha_fwd.cu (MSLK_FMHA_KERNEL, read here with the other switches);
// everything else (float32 / float64, head dims up to 65536) on the exact path (fmha_fwd.h).
// Operands go through fmha_operands.h (head dims padded to a multiple of 8, 16-byte loadable);
// dropout travels as FmhaDropout (only FA2 applies it).
#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <limits>

#include "attention/fmha_fwd.h"
#include "attention/fmha_operands.h"
#include "attention/kernels/fmha_fwd.h"
#include "attention/kernels/fmha_fwd_sm90.h"
#include "common/checks.h"
#include "mslk/utils/env.h"

namespace mslk::attention {
namespace {
constexpr const char* kOp = "mslk::fmha_fused_fwd";

// The kernels' switches from the environment, read on every call (tests and benchmarks flip them);
// a malformed value is a ValueError naming the variable.
FmhaFwdTuning read_tuning() {
  return read_env([] {
    using env::Var;
    FmhaFwdTuning t;
    t.kernel = FmhaKernelChoice(env::choice(Var::kFmhaKernel, {"auto", "sm80", "sm90"}, 0));
    t.sm90_cfg = int(env::integer(Var::kFmhaSm90Cfg, -1, 0, fmha_fwd_sm90_num_cfgs() - 1));
    t.sm90_l2_mib = int(env::integer(Var::kFmhaSm90L2Mib, -1, 0, 4096));
    t.sm90_stream_k = env::choice(Var::kFmhaSm90StreamK, {"0", "1"}, -1);
    t.sm90_o_tma = env::flag(Var::kFmhaSm90Otma, true);
    t.sm90_o_vec = env::flag(Var::kFmhaSm90Ovec, true);
    t.sm90_bias_tma = env::flag(Var::kFmhaSm90BiasTma, true);
    return t;
  });
}

std::tuple<at::Tensor, at::Tensor> fmha_fwd_cuda(
    const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& seqstart_q, const std::optional<at::Tensor>& seqstart_k,
    const std::optional<at::Tensor>& seqlen_k, int64_t max_seqlen_q, int64_t mask_kind, int64_t window_left,
    int64_t window_right, double scale, const std::optional<at::Tensor>& block_tables, int64_t page_size,
    double dropout_p, const std::optional<at::Tensor>& rng_state) {
  const FmhaFwdArgs args{q_in,      k_in,        v_in,         bias,  seqstart_q,   seqstart_k, seqlen_k,  max_seqlen_q,
                         mask_kind, window_left, window_right, scale, block_tables, page_size,  dropout_p, rng_state};
  const FmhaDropout drop = fmha_fwd_check(args);
  const int64_t B = q_in.size(0), Mq = q_in.size(1), H = q_in.size(2), Mkv = k_in.size(1);
  const int64_t K = q_in.size(3), Kv = v_in.size(3);
  const c10::cuda::CUDAGuard guard(q_in.device());
  const bool varlen = given(seqstart_q);
  const int64_t num_seqs = varlen ? seqstart_q->numel() - 1 : B;
  const bool half = q_in.scalar_type() == at::kHalf || q_in.scalar_type() == at::kBFloat16;
  const FmhaFwdTuning tuning = read_tuning();
  if (!half || K < 1 || K > 256 || Kv < 1 || Kv > 256 || H > 65535 || num_seqs > 65535 ||
      Mq >= (int64_t(1) << 31) || Mkv >= (int64_t(1) << 31)) {
    // What the fused kernels do not take (float32 / float64, head dims over 256, grids past their
    // limits) runs the exact path on the GPU, a chunk of heads / query rows at a time, as the
    // backward does: same results as the CPU backend, dropout masks included.
    TORCH_CHECK_VALUE(tuning.kernel == FmhaKernelChoice::kAuto, kOp, ": MSLK_FMHA_KERNEL forces a fused kernel, "
                      "which takes fp16/bf16 with head dims 1..256, at most 65535 heads and sequences; got ",
                      q_in.scalar_type(), ", K=", K, ", Kv=", Kv, ", H=", H, ", ", num_seqs,
                      " sequences; unset MSLK_FMHA_KERNEL");
    return fmha_fwd_exact(args, drop, true);
  }
  const at::Tensor q = fmha_prepare_operand(q_in), k = fmha_prepare_operand(k_in), v = fmha_prepare_operand(v_in);
  const int64_t Kvp = v.size(3);

  // Varlen: rows outside every query block are never written by the kernel, so start from 0 / -inf.
  auto out = varlen ? at::zeros({B, Mq, H, Kvp}, q.options()) : at::empty({B, Mq, H, Kvp}, q.options());
  auto lse = varlen ? at::full({B, H, Mq}, -std::numeric_limits<float>::infinity(), q.options().dtype(at::kFloat))
                    : at::empty({B, H, Mq}, q.options().dtype(at::kFloat));
  if (B == 0 || Mq == 0 || H == 0) return {Kvp == Kv ? out : out.narrow(3, 0, Kv).contiguous(), lse};

  FmhaFwdParams p{};
  const FmhaParamTensors held = fmha_fill_common(
      p, q, k, v, {bias, seqstart_q, seqstart_k, seqlen_k, mask_kind, window_left, window_right, scale, drop});
  p.out = out.data_ptr();
  p.lse = lse.data_ptr<float>();
  p.o_sb = out.stride(0), p.o_sm = out.stride(1), p.o_sh = out.stride(2);
  at::Tensor bt;
  if (given(block_tables)) {  // page values are checked by the kernel (rows outside k/v read as zeros)
    bt = block_tables->contiguous();
    p.block_table = bt.data_ptr<int>();
    p.bt_stride = bt.size(1);
    p.bt_cols = int(bt.size(1));
    p.page_size = int(page_size);
    p.kv_rows = k.size(1);
  }
  // Only varlen blocks use the bound. Without seqstart_q every batch has Mq query rows and `out`
  // / `lse` come from at::empty: a smaller grid would leave rows >= max_seqlen_q uninitialized
  // (the CPU path ignores max_seqlen_q), so the dense case always launches for Mq rows.
  p.max_seqlen_q = int(!varlen || max_seqlen_q < 0 || max_seqlen_q > Mq ? Mq : max_seqlen_q);
  at::Tensor workspace;  // the sm90 kernel's stream-K partials (stream-ordered, freed after the launch)
  if (const int64_t bytes = fmha_fwd_workspace_bytes(p, tuning); bytes > 0) {
    workspace = at::empty({bytes}, q.options().dtype(at::kByte));
    p.workspace = workspace.data_ptr();
    p.workspace_bytes = bytes;
  }
  const cudaError_t err = fmha_fwd(p, tuning, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(!(err == cudaErrorNotSupported && tuning.kernel == FmhaKernelChoice::kSm90), kOp,
              ": MSLK_FMHA_KERNEL=sm90 forces the Hopper kernel, which does not take this problem (it needs an sm_90 "
              "GPU, no dropout, paged K/V only in varlen mode, head dims <= 256 and TMA-compatible strides); unset "
              "MSLK_FMHA_KERNEL or set it to 'auto' or 'sm80'");
  C10_CUDA_CHECK(err);
  if (Kvp != Kv) out = out.narrow(3, 0, Kv).contiguous();
  return {out, lse};
}

}  // namespace
}  // namespace mslk::attention

TORCH_LIBRARY_IMPL(mslk, CUDA, m) { m.impl("fmha_fused_fwd", &mslk::attention::fmha_fwd_cuda); }
