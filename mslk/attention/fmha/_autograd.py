"""Autograd of the attention frontends: one torch.autograd.Function around a forward operator
class and a backward operator class (pinned, or chosen at backward time by dispatch._dispatch_bw).

The Function receives q, k, v and the tensor bias (a tensor attn_bias, or the tensor of a
LowerTriangularMaskWithTensorBias) as they came from the caller, and returns gradients in those
shapes: K/V expanded for GQA/MQA get per-head gradients, which autograd's expand() sums.
Dropout: the forward operator draws rng_state from torch's CPU generator and the backward reuses
it. Partial attention (`partial=True`) also returns a differentiable LSE; its gradient is added
by `_lse_term` (the backward op takes no LSE gradient).

Everything is torch ops and Python at trace time, so torch.compile(fullgraph=True) of a training
step traces it.
"""

from __future__ import annotations

import math
from typing import Any, Optional, Tuple, Type

import torch

from mslk.attention.fmha import attn_bias as _ab
from mslk.attention.fmha._backward import packed_lse, shaped
from mslk.attention.fmha.common import AttentionBwOpBase, AttentionFwOpBase, Context, Inputs
from mslk.attention.fmha.dispatch import _dispatch_bw, _dispatch_fw, bw_not_supported_reasons, fw_not_supported_reasons


def bias_tensor(attn_bias: Any) -> Optional[torch.Tensor]:
    """The differentiable tensor of `attn_bias`, if any."""
    if isinstance(attn_bias, torch.Tensor):
        return attn_bias
    if isinstance(attn_bias, _ab.LowerTriangularMaskWithTensorBias):
        return attn_bias._bias
    return None


def _rebind(attn_bias: Any, t: Optional[torch.Tensor]) -> Any:
    """attn_bias with its tensor replaced by `t` (the Function's own input)."""
    if isinstance(attn_bias, torch.Tensor):
        return t
    if isinstance(attn_bias, _ab.LowerTriangularMaskWithTensorBias):
        return _ab.LowerTriangularMaskWithTensorBias(t)
    return attn_bias


def _unsupported(op, reasons, what: str) -> ValueError:
    return ValueError(f"Operator `{op.NAME}` ({op.__module__}.{op.__qualname__}) does not support these inputs"
                      f"{what}:\n" + "\n".join(f"    {r}" for r in reasons))


def check_bw(op: Type[AttentionBwOpBase], inp: Inputs, bias_requires_grad: bool) -> None:
    reasons = bw_not_supported_reasons(op, inp, bias_requires_grad)
    if reasons:
        raise _unsupported(op, reasons, " (backward)")


def _lse_term(inp: Inputs, d_lse: torch.Tensor):
    """The LSE's share of (dq, dk, dbias) of a partial shard: lse = logsumexp(S), so dS = P dLSE
    (row-scaled), dq = scale dS K, dk = scale dS^T Q. Exact math in torch (float32, float64 for
    float64), materializing S as the partial forward (the reference operator) does."""
    from mslk.attention.fmha.reference import dense_bias

    q, k = inp.query, inp.key
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    q4, k4 = (x.reshape(*x.shape[:2], -1, x.shape[-1]).to(acc) for x in (q, k))  # BMGHK -> BMHK
    B, Mq, H, _ = q4.shape
    Mkv = k4.shape[1]
    bias = inp.attn_bias
    nb = bias_tensor(bias)
    if q.ndim == 5 and nb is not None and nb.ndim >= 3:  # [.., G, H, Mq, Mkv] -> [B, G * H, Mq, Mkv]
        expanded = nb.expand(B, *q.shape[2:4], Mq, Mkv).reshape(B, H, Mq, Mkv)
        bias = expanded if isinstance(bias, torch.Tensor) else _ab.LowerTriangularMaskWithTensorBias(expanded)
    s = torch.einsum("bmhk,bnhk->bhmn", q4, k4) * inp.scale_float
    b = dense_bias(bias, q4, k4)
    if b is not None:
        s = s + b.to(acc)
    lse = torch.logsumexp(s, dim=-1, keepdim=True) if Mkv else s.new_full((B, H, Mq, 1), -math.inf)
    live = torch.isfinite(lse)
    p = torch.where(live, torch.exp(s - torch.where(live, lse, 0.0)), 0.0)
    dl = packed_lse(d_lse, inp.attn_bias).reshape(B, H, Mq, 1).to(acc)
    ds = p * torch.where(live, dl, 0.0)
    dq = (torch.einsum("bhmn,bnhk->bmhk", ds, k4) * inp.scale_float).reshape(q.shape)
    dk = (torch.einsum("bhmn,bmhk->bnhk", ds, q4) * inp.scale_float).reshape(k.shape)
    db = None
    if nb is not None:
        db = (ds.view(B, *q.shape[2:4], Mq, Mkv) if q.ndim == 5 and nb.ndim >= 3 else ds).sum_to_size(nb.shape)
    return dq, dk, db


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, meta, q, k, v, bias_t):
        fw, bw, attn_bias, p, scale, output_dtype, partial = meta
        inp = Inputs(q, k, v, _rebind(attn_bias, bias_t), p, scale, output_dtype, is_partial=partial)
        out_shape = inp.normalize_bmhk()
        out, fctx = fw.apply(inp, needs_gradient=True)
        if fctx is None:
            raise RuntimeError(f"{fw.NAME} returned no LSE context")
        ctx.meta = meta
        ctx.save_for_backward(q, k, v, out, fctx.lse, bias_t, fctx.rng_state)
        # Undefined output gradients stay None (no zero-filled LSE gradient a step).
        ctx.set_materialize_grads(False)
        lse = fctx.lse
        if not partial:
            ctx.mark_non_differentiable(lse)
        return shaped(out, out_shape), lse

    @staticmethod
    def backward(ctx, d_out, d_lse):
        q, k, v, out, lse, bias_t, rng = ctx.saved_tensors
        _, bw, attn_bias, p, scale, _, partial = ctx.meta
        if d_out is None:  # the output is unused: only a partial shard's LSE can carry a gradient
            if not (partial and d_lse is not None):
                return None, None, None, None, None
            d_out = torch.zeros_like(out)
        bias_rg = bias_t is not None and ctx.needs_input_grad[4]
        inp = Inputs(q, k, v, _rebind(attn_bias, bias_t), p, scale)
        inp.normalize_bmhk()
        grad = shaped(d_out, out.shape)
        if bw is None:
            bw = _dispatch_bw(inp, bias_rg)
        else:
            check_bw(bw, inp, bias_rg)
        g = bw.apply(Context(lse=lse, out=out, rng_state=rng), inp, grad, bias_requires_grad=bias_rg)
        dq, dk, db = g.dq, g.dk, g.db if bias_rg else None
        if partial and d_lse is not None:
            lq, lk, lb = _lse_term(inp, d_lse)
            dq, dk = dq + lq.to(dq.dtype), dk + lk.to(dk.dtype)
            if bias_rg:
                db = db + lb.to(db.dtype)
        db = shaped(db, bias_t.shape) if db is not None else None
        return None, shaped(dq, q.shape), shaped(dk, k.shape), shaped(g.dv, v.shape), db


def attention(query, key, value, attn_bias, p: float, scale: Optional[float], fw: Optional[Type[AttentionFwOpBase]],
              bw: Optional[Type[AttentionBwOpBase]], output_dtype: Optional[torch.dtype], partial: bool = False
              ) -> Tuple[torch.Tensor, torch.Tensor]:
    """(out, lse) of attention with autograd; only `out` is differentiable unless `partial`."""
    inp = Inputs(query, key, value, attn_bias, p, scale, output_dtype, is_partial=partial)
    inp.validate_inputs()
    inp.normalize_bmhk()
    if fw is None:
        fw = _dispatch_fw(inp, True)
    else:
        reasons = fw_not_supported_reasons(fw, inp)
        if reasons:
            raise _unsupported(fw, reasons, "")
    t = bias_tensor(attn_bias)
    if bw is not None and not partial:  # a pinned backward is checked now (partial: at backward time)
        check_bw(bw, Inputs(inp.query, inp.key, inp.value, inp.attn_bias, p, scale),
                 t is not None and t.requires_grad)
    return _Attention.apply((fw, bw, attn_bias, float(p), scale, output_dtype, partial), query, key, value, t)


__all__ = ["attention", "bias_tensor", "check_bw"]
