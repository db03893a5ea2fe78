"""Python side of the attention-merge ops (csrc/attention/merge_attentions.cpp): autograd for
torch.ops.mslk.fmha_merge_attentions_varargs, and the layout plumbing shared by
fmha.merge_attentions and triton_splitk.merge_attentions. The kernels take attn [B, M, G, H, K]
and LSE [B, G, H, M] float32; BMHK inputs are viewed with G = 1."""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import torch

_ops = torch.ops.mslk


def _setup_context(ctx, inputs, output):
    attn_split, lse_split, write_lse = inputs[0], inputs[1], inputs[2]
    if not write_lse:
        ctx.n = -1  # no LSE output: the Python entry points refuse gradients then
        return
    ctx.n = len(attn_split)
    ctx.save_for_backward(*attn_split, *lse_split, output[0], output[1])


def _backward(ctx, grads):
    if ctx.n < 0:
        raise RuntimeError("fmha_merge_attentions_varargs: gradients need write_lse=True")
    saved = ctx.saved_tensors
    n = ctx.n
    attn, lse, out, lse_out = list(saved[:n]), list(saved[n:2 * n]), saved[2 * n], saved[2 * n + 1]
    d_out = grads[0] if grads[0] is not None else torch.zeros_like(out)
    d_lse = grads[1] if len(grads) > 1 else None
    d_attn, d_lses = _ops.merge_attentions_varargs_backward(attn, lse, out, lse_out, d_out.contiguous(), d_lse)
    return list(d_attn), list(d_lses), None, None, None, None, None, None, None


if hasattr(_ops, "fmha_merge_attentions_varargs"):  # absent under MSLK_PYTHON_ONLY=1
    torch.library.register_autograd("mslk::fmha_merge_attentions_varargs", _backward, setup_context=_setup_context)


def to_kernel_layout(attn: torch.Tensor, lse: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """[B, M, H, K] / [B, H, M] -> [B, M, 1, H, K] / [B, 1, H, M] (views); 5-D / 4-D pass through."""
    if attn.ndim == 4:
        return attn.unsqueeze(2), lse.unsqueeze(1)
    return attn, lse


def merge_varargs(attn: Sequence[torch.Tensor], lse: Sequence[torch.Tensor], write_lse: bool,
                  output_dtype: Optional[torch.dtype]) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """Merge shards given as lists of [B, M, (G,) H, K] / [B, (G,) H, M]; differentiable."""
    bmhk = attn[0].ndim == 4
    pairs = [to_kernel_layout(a, x) for a, x in zip(attn, lse)]
    a5: List[torch.Tensor] = [p[0] for p in pairs]
    l4: List[torch.Tensor] = [p[1] for p in pairs]
    B, M, G, H, K = a5[0].shape
    res = _ops.fmha_merge_attentions_varargs(a5, l4, write_lse, output_dtype, B, M, G, H, K)
    out = res[0].squeeze(2) if bmhk else res[0]
    lse_out = (res[1].squeeze(1) if bmhk else res[1]) if write_lse else None
    return out, lse_out


def merge_into(attn_out: torch.Tensor, lse_out: Optional[torch.Tensor], attn_split: torch.Tensor,
               lse_split: torch.Tensor) -> None:
    """In place: attn_split [S, B, M, (G,) H, K], lse_split [S, B, (G,) H, M] -> attn_out / lse_out."""
    if attn_split.ndim == 5:
        attn_split, lse_split = attn_split.unsqueeze(3), lse_split.unsqueeze(2)
        attn_out = attn_out.unsqueeze(2)
        lse_out = lse_out.unsqueeze(1) if lse_out is not None else None
    _ops._fmha_merge_attentions_into(attn_out, lse_out, attn_split, lse_split)
