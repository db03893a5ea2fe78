// CUDA backend of mslk::fmha_fused_bwd: the fused backward kernel (kernels/fmha_bwd.h) for
// fp16/bf16 where fmha_bwd_supports the problem; everything else (float32/float64, dbias, head
// dims the kernel does not take) runs the reference backward (fmha_reference_bwd.h) on the GPU,
// a chunk of heads / query rows at a time. Operands go through fmha_operands.h as in the forward.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <optional>

#include "attention/fmha_bwd.h"
#include "attention/fmha_dropout.h"
#include "attention/fmha_mask.h"
#include "attention/fmha_operands.h"
#include "attention/fmha_reference_bwd.h"
#include "attention/kernels/fmha_bwd.h"
#include "common/checks.h"
#include "mslk/utils/env.h"

namespace mslk::attention {
namespace {
constexpr const char* kOp = "mslk::fmha_fused_bwd";

using Grads = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

struct BwdCall {
  const FmhaBwdArgs& a;
  const FmhaDropout& drop;
  bool deterministic;
};

// The fused kernel, or nullopt when it does not take the problem.
std::optional<Grads> run_fused(const BwdCall& c) {
  const FmhaBwdArgs& a = c.a;
  const int64_t B = a.q.size(0), Mq = a.q.size(1), H = a.q.size(2), Mkv = a.k.size(1);
  const int64_t K = a.q.size(3), Kv = a.v.size(3);
  const bool varlen = given(a.seqstart_q);
  const int64_t num_seqs = varlen ? a.seqstart_q->numel() - 1 : B;
  const bool half = a.q.scalar_type() == at::kHalf || a.q.scalar_type() == at::kBFloat16;
  if (!half || a.bias_requires_grad || K < 1 || K > 256 || Kv < 1 || Kv > 256 || H > 65535 || num_seqs > 65535 ||
      Mq >= (int64_t(1) << 31) || Mkv >= (int64_t(1) << 31))
    return std::nullopt;
  const at::Tensor q = fmha_prepare_operand(a.q), k = fmha_prepare_operand(a.k), v = fmha_prepare_operand(a.v);
  const at::Tensor out = fmha_prepare_operand(a.out), dout = fmha_prepare_operand(a.grad_out);
  const at::Tensor lse = a.lse.contiguous();
  const int64_t Kp = q.size(3), Kvp = v.size(3);

  FmhaBwdParams p{};
  const FmhaParamTensors held = fmha_fill_common(p, q, k, v, {a.bias, a.seqstart_q, a.seqstart_k, a.seqlen_k,
                                                              a.mask_kind, a.window_left, a.window_right, a.scale,
                                                              c.drop});
  p.out = out.data_ptr(), p.dout = dout.data_ptr();
  p.lse = lse.data_ptr<float>();
  p.o_sb = fmha_stride(out, 0), p.o_sm = fmha_stride(out, 1), p.o_sh = fmha_stride(out, 2);
  p.do_sb = fmha_stride(dout, 0), p.do_sm = fmha_stride(dout, 1), p.do_sh = fmha_stride(dout, 2);
  // As in the forward: the bounds only size varlen grids; dense batches always cover Mq x Mkv.
  p.max_seqlen_q = int(!varlen || a.max_seqlen_q < 0 || a.max_seqlen_q > Mq ? Mq : a.max_seqlen_q);
  p.max_seqlen_k = int(!varlen || a.max_seqlen_k < 0 || a.max_seqlen_k > Mkv ? Mkv : a.max_seqlen_k);
  p.deterministic = c.deterministic;
  p.sm90_dq_tiles = read_env([] { return env::choice(env::Var::kFmhaBwdSm90Dq, {"atomic", "tiles"}, 1); });
  p.sm90_d256 = read_env([] { return env::flag(env::Var::kFmhaBwdSm90D256, true); });

  // Rows outside every query block / key lane are never visited by the kernel: start from 0.
  const bool partial = varlen || given(a.seqlen_k);
  auto alloc = [&](at::IntArrayRef shape) {
    return partial ? at::zeros(shape, q.options()) : at::empty(shape, q.options());
  };
  at::Tensor dq = alloc({B, Mq, H, Kp}), dk = alloc({B, Mkv, H, Kp}), dv = alloc({B, Mkv, H, Kvp});
  p.dq = dq.data_ptr(), p.dk = dk.data_ptr(), p.dv = dv.data_ptr();
  p.dq_sb = dq.stride(0), p.dq_sm = dq.stride(1), p.dq_sh = dq.stride(2);
  p.dk_sb = dk.stride(0), p.dk_sm = dk.stride(1), p.dk_sh = dk.stride(2);
  p.dv_sb = dv.stride(0), p.dv_sm = dv.stride(1), p.dv_sh = dv.stride(2);
  if (!fmha_bwd_supports(p)) return std::nullopt;  // it checks the output pointers too
  at::Tensor workspace;
  if (const int64_t bytes = fmha_bwd_workspace_bytes(p); bytes > 0) {
    workspace = at::empty({bytes}, q.options().dtype(at::kByte));
    p.workspace = workspace.data_ptr();
    p.workspace_bytes = bytes;
  }
  const cudaError_t err = fmha_bwd(p, c10::cuda::getCurrentCUDAStream().stream());
  if (err == cudaErrorNotSupported) return std::nullopt;
  C10_CUDA_CHECK(err);
  if (Kp != K) dq = dq.narrow(3, 0, K).contiguous(), dk = dk.narrow(3, 0, K).contiguous();
  if (Kvp != Kv) dv = dv.narrow(3, 0, Kv).contiguous();
  return Grads{dq, dk, dv, at::empty({0}, a.q.options())};
}

// The reference backward on the GPU (the general path).
Grads run_reference(const BwdCall& c) {
  const FmhaBwdArgs& a = c.a;
  const int64_t B = a.q.size(0), Mq = a.q.size(1), H = a.q.size(2), Mkv = a.k.size(1);
  const FmhaMask mask = fmha_mask_make(B, Mq, Mkv, a.seqstart_q, a.seqstart_k, a.seqlen_k, a.mask_kind,
                                       a.window_left, a.window_right, kOp);
  const FmhaKeepFn keep = [&](int64_t h0, int64_t nh, int64_t r0, int64_t nr) {
    return fmha_dropout_keep_cuda(c.drop, B, H, h0, nh, r0, nr, Mkv, a.q.device());
  };
  return fmha_reference_bwd({a.q, a.k, a.v, a.bias, mask, a.scale, c.drop.p > 0.f ? a.dropout_p : 0.0, &keep},
                            a.grad_out, a.lse, a.bias_requires_grad);
}

Grads fmha_bwd_cuda(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                    const at::Tensor& out, const at::Tensor& lse, const std::optional<at::Tensor>& bias,
                    const std::optional<at::Tensor>& seqstart_q, const std::optional<at::Tensor>& seqstart_k,
                    const std::optional<at::Tensor>& seqlen_k, int64_t max_seqlen_q, int64_t max_seqlen_k,
                    int64_t mask_kind, int64_t window_left, int64_t window_right, double scale, double dropout_p,
                    const std::optional<at::Tensor>& rng_state, bool bias_requires_grad, bool deterministic) {
  const FmhaBwdArgs a{grad_out,    q,           k,        v,          out,          lse,          bias,
                      seqstart_q,  seqstart_k,  seqlen_k, max_seqlen_q, max_seqlen_k, mask_kind,   window_left,
                      window_right, scale,      dropout_p, rng_state, bias_requires_grad};
  const FmhaDropout drop = fmha_bwd_check(a);
  const c10::cuda::CUDAGuard guard(q.device());
  const BwdCall c{a, drop, deterministic};
  if (q.size(0) * q.size(1) * q.size(2) > 0 && k.size(1) > 0)
    if (auto g = run_fused(c)) return *g;
  return run_reference(c);
}

}  // namespace
}  // namespace mslk::attention

TORCH_LIBRARY_IMPL(mslk, CUDA, m) { m.impl("fmha_fused_bwd", &mslk::attention::fmha_bwd_cuda); }
