// Operand preparation shared by the CUDA glues of the fused attention ops: the kernels load
// 16-byte chunks of head dims padded to a multiple of 8, and take every other layout as strides
// (so expand()ed K/V are read in place). Also fills the descriptor fields that FmhaFwdParams and
// FmhaBwdParams share.
#pragma once
#include <ATen/ATen.h>
#include <c10/util/Optional.h>

#include <cstdint>

#include "attention/kernels/fmha_dropout.h"

namespace mslk::attention {

// Zero-pads the last dim of [B, M, H, D] to a multiple of 8 and makes the tensor 16-byte loadable.
inline at::Tensor fmha_prepare_operand(const at::Tensor& x) {
  at::Tensor y = x;
  const int64_t d = x.size(3);
  if (d % 8 != 0) y = at::constant_pad_nd(y, {0, 8 - d % 8}, 0);
  bool ok = reinterpret_cast<uintptr_t>(y.data_ptr()) % 16 == 0 && y.stride(3) == 1;
  for (int i = 0; i < 3; ++i) ok = ok && (y.size(i) == 1 || y.stride(i) % 8 == 0);
  return ok ? y : y.contiguous();
}

// Element stride of dim i, 0 when the dim has size 1 (its index is always 0).
inline int64_t fmha_stride(const at::Tensor& x, int i) { return x.size(i) == 1 ? 0 : x.stride(i); }

// Tensors the params point into; keep them alive until the launch is queued.
struct FmhaParamTensors {
  at::Tensor bias, seqstart_q, seqstart_k, seqlen_k;
};

// The descriptor of fmha_fused_fwd / fmha_fused_bwd as it travels to the kernels.
struct FmhaDesc {
  const std::optional<at::Tensor>& bias;
  const std::optional<at::Tensor>& seqstart_q;
  const std::optional<at::Tensor>& seqstart_k;
  const std::optional<at::Tensor>& seqlen_k;
  int64_t mask_kind, window_left, window_right;
  double scale;
  FmhaDropout dropout;
};

// Fills the fields FmhaFwdParams and FmhaBwdParams share from prepared (fmha_prepare_operand)
// q [B, Mq, H, Kp], k [B, Mkv, H, Kp], v [B, Mkv, H, Kvp] and the descriptor.
template <class Params>
FmhaParamTensors fmha_fill_common(Params& p, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  const FmhaDesc& d) {
  auto given = [](const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); };
  const int64_t B = q.size(0), Mq = q.size(1), H = q.size(2), Mkv = k.size(1);
  FmhaParamTensors keep;
  p.q = q.data_ptr(), p.k = k.data_ptr(), p.v = v.data_ptr();
  p.q_sb = fmha_stride(q, 0), p.q_sm = fmha_stride(q, 1), p.q_sh = fmha_stride(q, 2);
  p.k_sb = fmha_stride(k, 0), p.k_sm = fmha_stride(k, 1), p.k_sh = fmha_stride(k, 2);
  p.v_sb = fmha_stride(v, 0), p.v_sm = fmha_stride(v, 1), p.v_sh = fmha_stride(v, 2);
  if (given(d.bias)) {
    at::Tensor b = *d.bias;
    if (b.scalar_type() != at::kFloat && b.scalar_type() != q.scalar_type()) b = b.to(at::kFloat);
    b = b.expand({B, H, Mq, Mkv});  // a view: broadcast dims get stride 0
    p.bias = b.data_ptr();
    p.bias_is_fp32 = b.scalar_type() == at::kFloat;
    p.bias_sb = fmha_stride(b, 0), p.bias_sh = fmha_stride(b, 1);
    p.bias_sm = fmha_stride(b, 2), p.bias_sn = fmha_stride(b, 3);
    keep.bias = b;
  }
  p.B = int(B), p.H = int(H), p.Mq = int(Mq), p.Mkv = int(Mkv);
  p.K = int(q.size(3)), p.Kv = int(v.size(3));
  if (given(d.seqstart_q)) {
    keep.seqstart_q = d.seqstart_q->contiguous();
    keep.seqstart_k = d.seqstart_k->contiguous();
    p.seqstart_q = keep.seqstart_q.data_ptr<int>();
    p.seqstart_k = keep.seqstart_k.data_ptr<int>();
  }
  if (given(d.seqlen_k)) {
    keep.seqlen_k = d.seqlen_k->contiguous();
    p.seqlen_k = keep.seqlen_k.data_ptr<int>();
  }
  p.num_seqs = int(given(d.seqstart_q) ? d.seqstart_q->numel() - 1 : B);
  p.mask_kind = int(d.mask_kind);
  p.window_left = d.window_left;
  p.window_right = d.window_right;
  p.scale = float(d.scale);
  p.is_bf16 = q.scalar_type() == at::kBFloat16;
  p.dropout = d.dropout;
  return keep;
}

}  // namespace mslk::attention
