"""Trainable partial attention (spec group "Attention - Trainable partial attention").

    p0 = memory_efficient_attention_partial_autograd(q, k0, v0)
    p1 = memory_efficient_attention_partial_autograd(q, k1, v1)
    out = merge_attentions_autograd(p0, p1)   # == attention over cat(k0, k1), with gradients

A shard is `memory_efficient_attention_partial(..., _allow_backward=True)`: the forward operator's
(out, lse), both differentiable; its backward is the attention backward operator
(torch.ops.mslk.fmha_fused_bwd through the BwOp classes) with the LSE gradient folded in, so
gradients reach query, key, value and a tensor bias. The merge, by the chain rule:

  w_i = exp(lse_i - L), L = log sum_i exp(lse_i), out = sum_i w_i O_i
  dO_i = w_i dout, dlse_i = w_i (<dout, O_i - out> + dL)

(the mslk merge kernels, torch.ops.mslk.fmha_merge_attentions_varargs and its backward op, for
float32/float16/bfloat16 shards; the same math in torch for float64). Shards whose rows are fully
masked (lse = -inf) get weight 0 and zero gradients. Dropout is unsupported.
"""

from __future__ import annotations

from typing import Callable, Optional

import torch

from mslk.attention.fmha import _merge_ops

def _acc(*ts: torch.Tensor) -> torch.dtype:
    return torch.float64 if any(t.dtype == torch.float64 for t in ts) else torch.float32


class Partial:
    """Autograd carrier of one shard: `attn` [B, M, (G,) H, Kv] and `lse` kept in the same layout as
    [B, M, (G,) H, 1] (so `apply` can transform both), plus `placeholder`, a zero-element tensor kept
    for signature compatibility (this implementation routes gradients by the chain rule instead)."""

    def __init__(self, attn: torch.Tensor, lse: torch.Tensor, placeholder: Optional[torch.Tensor] = None):
        if lse.ndim != attn.ndim or lse.shape[-1] != 1:
            raise ValueError(f"Partial: lse must be in the attn layout [B, M, (G,) H, 1]; got attn "
                             f"{tuple(attn.shape)}, lse {tuple(lse.shape)}")
        self.attn = attn
        self.lse = lse
        self.placeholder = placeholder if placeholder is not None else attn.new_empty((0,))

    def is_bmghk(self) -> bool:
        return self.attn.ndim == 5

    def apply(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> "Partial":
        """A layout-preserving transform (slicing, indexing, ... of the leading dims) applied to both
        the output and the LSE. It must not touch the embedding (last) dimension."""
        attn, lse = fn(self.attn), fn(self.lse)
        if attn.shape[-1] != self.attn.shape[-1] or lse.shape[-1] != 1 or attn.shape[:-1] != lse.shape[:-1]:
            raise ValueError("Partial.apply: fn must not manipulate the embedding dimension")
        return Partial(attn, lse, self.placeholder)


def memory_efficient_attention_partial_autograd(query, key, value, attn_bias=None, p: float = 0.0,
                                                scale: Optional[float] = None, *, op=None,
                                                output_dtype: Optional[torch.dtype] = None) -> Partial:
    """Partial attention over one K/V shard, differentiable w.r.t. query, key and value. Combine the
    shards with merge_attentions_autograd. Arguments mirror memory_efficient_attention_partial."""
    if p != 0.0:
        raise NotImplementedError("memory_efficient_attention_partial_autograd: dropout (p != 0) is not "
                                  "supported by the partial attention path")
    from mslk.attention.fmha import memory_efficient_attention_partial

    out, lse = memory_efficient_attention_partial(query, key, value, attn_bias, 0.0, scale, op=op,
                                                  output_dtype=output_dtype, _allow_backward=True)
    # lse [B, (G,) H, M] (or packed [1, H, M]) -> the attn layout [B, M, (G,) H, 1]
    lse_l = lse.movedim(-1, 1).unsqueeze(-1)
    if out.ndim == 3:  # BMK
        lse_l = lse_l.reshape(out.shape[0], out.shape[1], 1)
    return Partial(out, lse_l)


class _MergeAttentions(torch.autograd.Function):
    @staticmethod
    def forward(ctx, n: int, *tensors):
        attn = torch.stack(tensors[:n])  # [S, B, M, ..., Kv]
        lse = torch.stack(tensors[n:])  # [S, B, M, ..., 1]
        acc = _acc(attn, lse)
        a, l_ = attn.to(acc), lse.to(acc)
        mx = l_.amax(0)
        mx = torch.where(torch.isneginf(mx), 0.0, mx)
        e = torch.exp(l_ - mx)
        denom = e.sum(0)
        w = e / torch.where(denom == 0, 1.0, denom)  # 0 for -inf shards and fully masked rows
        out = (w * a).sum(0)
        ctx.n = n
        ctx.dtypes = [t.dtype for t in tensors]
        ctx.save_for_backward(a, w, out)
        return out.to(attn.dtype), (torch.log(denom) + mx).to(lse.dtype)

    @staticmethod
    def backward(ctx, d_out, d_lse):
        a, w, out = ctx.saved_tensors
        d_out = torch.zeros_like(out) if d_out is None else d_out.to(out.dtype)
        d_l = torch.zeros_like(out[..., :1]) if d_lse is None else d_lse.to(out.dtype)
        d_attn = w * d_out
        d_lse_i = w * (((a - out) * d_out).sum(-1, keepdim=True) + d_l)
        grads = [d_attn[i] for i in range(ctx.n)] + [d_lse_i[i] for i in range(ctx.n)]
        return (None, *[g.to(dt) for g, dt in zip(grads, ctx.dtypes)])


def merge_attentions_autograd(*partials: Partial) -> torch.Tensor:
    """Exact LSE merge of Partial shards, differentiable through every shard. A single Partial
    returns its output (still connected to its shard's backward)."""
    if not partials:
        raise ValueError("merge_attentions_autograd: needs at least one Partial")
    for x in partials:
        if not isinstance(x, Partial):
            raise TypeError(f"merge_attentions_autograd: expected Partial objects; got {type(x).__name__}")
    if len(partials) == 1:
        return partials[0].attn
    shapes = {tuple(x.attn.shape) for x in partials}
    if len(shapes) != 1:
        raise ValueError(f"merge_attentions_autograd: partial outputs must have one shape; got {sorted(shapes)}")
    if all(x.attn.dtype in _KERNEL_DTYPES and x.lse.dtype == torch.float32 for x in partials):
        # the merge kernel (torch.ops.mslk.fmha_merge_attentions_varargs, with its backward op)
        attn = [x.attn.unsqueeze(2) if x.attn.ndim == 3 else x.attn for x in partials]  # BMK -> BM1K
        lse = [_lse_to_kernel(x.lse) for x in partials]
        out, _ = _merge_ops.merge_varargs(attn, lse, True, None)
        return out.squeeze(2) if partials[0].attn.ndim == 3 else out
    n = len(partials)  # float64: the float64 chain rule below
    out, _ = _MergeAttentions.apply(n, *[x.attn for x in partials], *[x.lse for x in partials])
    return out


_KERNEL_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _lse_to_kernel(lse: torch.Tensor) -> torch.Tensor:
    """Partial's LSE [B, M, (G,) H, 1] (BMK: [B, M, 1]) -> the kernel's [B, (G,) H, M] (a view)."""
    x = lse[..., 0]  # [B, M, (G,) H] or [B, M]
    if x.ndim == 2:
        x = x.unsqueeze(-1)
    return x.movedim(1, -1)


__all__ = ["Partial", "memory_efficient_attention_partial_autograd", "merge_attentions_autograd"]
