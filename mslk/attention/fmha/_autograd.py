"""Autograd of the attention frontends: one torch.autograd.Function around a forward operator
class and a backward operator class (pinned, or chosen at backward time by dispatch._dispatch_bw).

The Function receives q, k, v and the tensor bias (a tensor attn_bias, or the tensor of a
LowerTriangularMaskWithTensorBias) as they came from the caller, and returns gradients in those
shapes: K/V expanded for GQA/MQA get per-head gradients, which autograd's expand() sums.
Dropout: the forward operator draws rng_state from torch's CPU generator and the backward reuses
it. Partial attention (`partial=True`) also returns a differentiable LSE; its gradient enters the
backward op through one extra value column (see `_with_lse_grad`).

Everything is torch ops and Python at trace time, so torch.compile(fullgraph=True) of a training
step traces it.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple, Type

import torch

from mslk.attention.fmha import attn_bias as _ab
from mslk.attention.fmha._backward import packed_lse
from mslk.attention.fmha.common import AttentionBwOpBase, AttentionFwOpBase, Context, Inputs
from mslk.attention.fmha.dispatch import _dispatch_bw, _dispatch_fw, bw_not_supported_reasons


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
    return ValueError(f"Operator `{op.NAME}` ({op.__module__}.{op.__qualname__}) does not support these inputs "
                      f"{what}:\n" + "\n".join(f"    {r}" for r in reasons))


def check_bw(op: Type[AttentionBwOpBase], inp: Inputs, bias_requires_grad: bool) -> None:
    reasons = bw_not_supported_reasons(op, inp, bias_requires_grad)
    if reasons:
        raise _unsupported(op, reasons, "(backward)")


def _with_lse_grad(v, out, grad, d_lse, bias):
    """Folds the LSE gradient into the value / output / output-gradient tensors: with V' = [V, 1],
    O' = [O, 0] and dO' = [dO, dLSE], the backward's dP' = dP + dLSE and D' = rowsum(dO' O') = D,
    so dS = P (dP - D + dLSE), which is the gradient of (O, LSE); dV is dV'[..., :-1]."""
    ones = v.new_ones((*v.shape[:-1], 1))
    dl = packed_lse(d_lse, bias).reshape(*out.shape[:1], *out.shape[2:-1], out.shape[1])
    dl = dl.movedim(-1, 1).unsqueeze(-1).to(grad.dtype)  # the output layout [B, M, (G,) H, 1]
    return (torch.cat([v, ones], -1), torch.cat([out, torch.zeros_like(out[..., :1])], -1),
            torch.cat([grad, dl], -1))


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
        lse = fctx.lse
        if not partial:
            ctx.mark_non_differentiable(lse)
        return out.reshape(out_shape), lse

    @staticmethod
    def backward(ctx, d_out, d_lse):
        q, k, v, out, lse, bias_t, rng = ctx.saved_tensors
        _, bw, attn_bias, p, scale, _, partial = ctx.meta
        bias_rg = bias_t is not None and ctx.needs_input_grad[4]
        inp = Inputs(q, k, v, _rebind(attn_bias, bias_t), p, scale)
        inp.normalize_bmhk()
        grad = d_out.reshape(out.shape)
        lse_grad = partial and d_lse is not None
        if lse_grad:
            inp.value, out, grad = _with_lse_grad(inp.value, out, grad.to(out.dtype), d_lse, inp.attn_bias)
        if bw is None:
            bw = _dispatch_bw(inp, bias_rg)
        else:
            check_bw(bw, inp, bias_rg)
        g = bw.apply(Context(lse=lse, out=out, rng_state=rng), inp, grad, bias_requires_grad=bias_rg)
        dv = g.dv[..., :-1] if lse_grad else g.dv
        db = g.db.reshape(bias_t.shape) if bias_rg and g.db is not None else None
        return None, g.dq.reshape(q.shape), g.dk.reshape(k.shape), dv.reshape(v.shape), db


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
        reasons = fw.not_supported_reasons(inp)
        if reasons:
            raise _unsupported(fw, reasons, "")
    t = bias_tensor(attn_bias)
    if bw is not None and not partial:  # a pinned backward is checked now (partial: at backward time)
        check_bw(bw, Inputs(inp.query, inp.key, inp.value, inp.attn_bias, p, scale),
                 t is not None and t.requires_grad)
    return _Attention.apply((fw, bw, attn_bias, float(p), scale, output_dtype, partial), query, key, value, t)


__all__ = ["attention", "bias_tensor", "check_bw"]
