"""The backward of every operator class this build serves: `torch.ops.mslk.fmha_fused_bwd` on the
mask descriptor of the forward (cutlass.mask_descriptor), plus the layout plumbing around it.

- Layouts: BMK / BMHK / BMGHK inputs are viewed as BMHK (BMGHK: G * H heads). K/V expanded along
  heads (GQA/MQA) are handed over as they are; the op returns per-head dK/dV, which come back in
  the shape of the K/V the caller passed (autograd's expand() sums them).
- LSE: what the forward returned, packed [1, H, total_Mq] or padded [num_seqs, H, max_Mq]
  (+inf past each sequence) for variable-length biases; the padded one is packed back first.
- Dropout: the forward's rng_state (int64 CPU [seed, offset]) and p regenerate the same keep mask.
- Tensor bias gradient: the op's dbias, reduced to the bias's own (broadcast) shape.
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from mslk.attention.fmha import attn_bias as _ab
from mslk.attention.fmha.common import Context, Gradients, Inputs, _kernel_registered

_BWD_OP = "mslk::fmha_fused_bwd"
NO_BWD_KERNEL = "needs a CUDA build of mslk (torch.ops.mslk.fmha_fused_bwd has no CUDA kernel here)"


def bwd_registered(key: str = "CUDA") -> bool:
    """Whether mslk::fmha_fused_bwd has a kernel for dispatch key `key` in this build."""
    return hasattr(torch.ops.mslk, "fmha_fused_bwd") and _kernel_registered(_BWD_OP, key)


def draw_rng_state() -> torch.Tensor:
    """[seed, offset] (int64, CPU) from torch's default CPU generator, so torch.manual_seed makes
    a dropout forward reproducible; the backward reuses the same pair."""
    return torch.randint(0, 2 ** 62, (2,), dtype=torch.int64)


def packed_lse(lse: torch.Tensor, bias: Any) -> torch.Tensor:
    """A variable-length LSE in either layout -> packed [1, H, total_Mq]. Anything else is
    returned as is."""
    if not isinstance(bias, _ab.VARLEN_BIASES):
        return lse
    starts = bias.q_seqinfo.seqstart_py
    total = starts[-1]
    if lse.shape[0] == 1 and lse.shape[-1] == total:
        return lse  # packed (or a single sequence, where both layouts coincide)
    n = len(starts) - 1
    if lse.shape[0] != n:
        raise ValueError(f"lse of shape {tuple(lse.shape)} is neither packed [1, H, {total}] nor padded "
                         f"[{n}, H, max_Mq] for {type(bias).__name__}")
    lens = [b - a for a, b in zip(starts, starts[1:])]
    if max(lens, default=0) > lse.shape[-1]:
        raise ValueError(f"padded lse of shape {tuple(lse.shape)} is shorter than the longest query block "
                         f"({max(lens)})")
    dev = lse.device
    seq = torch.repeat_interleave(torch.arange(n, device=dev), torch.tensor(lens, device=dev), output_size=total)
    pos = torch.arange(total, device=dev) - torch.tensor(starts[:-1], device=dev)[seq]
    return lse[seq, ..., pos].movedim(0, -1).unsqueeze(0)  # [1, (G,) H, total]


def _to_bmhk(x: torch.Tensor, ndim: int) -> torch.Tensor:
    if ndim == 3:
        return x.unsqueeze(2)
    if ndim == 5:
        return x.reshape(*x.shape[:2], x.shape[2] * x.shape[3], x.shape[4])
    return x


# The no-op forms of .to() and .reshape() still cost microseconds of host time each; a training
# step makes about fifteen of them.
def _as(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return x if x.dtype == dtype else x.to(dtype)


def shaped(x: torch.Tensor, shape) -> torch.Tensor:
    """x.reshape(shape), without the call where x already has that shape."""
    return x if x.shape == shape else x.reshape(shape)


def _stride1(x: torch.Tensor) -> torch.Tensor:
    if x.numel() == 0:  # contiguous() keeps an empty tensor's strides (all 0 after .sum().backward())
        return x.new_empty(x.shape)
    return x if x.shape[-1] <= 1 or x.stride(-1) == 1 else x.contiguous()


def backward_descriptor(bias: Any, device: torch.device) -> dict:
    """The descriptor arguments of torch.ops.mslk.fmha_fused_bwd for `bias` (forward's descriptor
    without paged K/V, plus max_seqlen_k)."""
    from mslk.attention.fmha.cutlass import mask_descriptor

    desc = mask_descriptor(bias, device)
    if desc.pop("block_tables") is not None:
        raise NotImplementedError(f"attention backward: paged K/V ({type(bias).__name__}) is forward-only")
    desc.pop("page_size")
    desc["max_seqlen_k"] = -1
    if isinstance(bias, _ab.VARLEN_BIASES):
        desc["max_seqlen_k"] = int(getattr(bias.k_seqinfo, "max_seqlen", -1))
    return desc


def _bias_tensor(inp: Inputs, q4: torch.Tensor, k4: torch.Tensor, t: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """The descriptor's tensor bias in the op's [B, H, Mq, Mkv]-broadcastable form."""
    if t is None:
        return None
    nd = inp.query.ndim
    if nd == 3 and t.ndim == 3:
        t = t.unsqueeze(1)
    if nd == 5 and t.ndim >= 3:
        B, _, G, H, _ = inp.query.shape
        t = t.expand(B, G, H, q4.shape[1], k4.shape[1]).reshape(B, G * H, q4.shape[1], k4.shape[1])
    return t


def fused_backward(inp: Inputs, ctx: Context, grad: torch.Tensor, *, bias_requires_grad: bool = False) -> Gradients:
    """Gradients of attention for `inp` (its original layout), the forward's `ctx` (out, lse,
    rng_state) and the output gradient `grad`. dq / dk / dv come back in the shapes of
    inp.query / key / value (dtype of the inputs); db in the tensor bias's shape when
    bias_requires_grad."""
    q, k, v = inp.query, inp.key, inp.value
    nd = q.ndim
    q4, k4, v4 = (_stride1(_to_bmhk(x, nd)) for x in (q, k, v))
    dt = q.dtype
    out4 = _stride1(_as(_to_bmhk(ctx.out, nd), dt))
    go4 = _stride1(_as(_to_bmhk(grad, nd), dt))
    bias = inp.attn_bias
    lse = packed_lse(ctx.lse, bias)
    if lse.ndim != 3:
        lse = lse.flatten(1, -2)  # [B, G, H, M] -> [B, G * H, M] (reshape(-1) fails at M = 0)
    lse = _as(lse, torch.float64 if dt == torch.float64 else torch.float32)
    desc = backward_descriptor(bias, q.device)
    user_bias = desc.pop("bias")
    tb = _bias_tensor(inp, q4, k4, user_bias)
    rng = ctx.rng_state if inp.p > 0.0 else None
    if inp.p > 0.0 and rng is None:
        raise ValueError("attention backward: dropout p > 0 needs the forward's rng_state (Context.rng_state)")
    want_db = bias_requires_grad and tb is not None
    dq, dk, dv, db = torch.ops.mslk.fmha_fused_bwd(
        go4, q4, k4, v4, out4, lse, tb.to(dt) if tb is not None and tb.dtype not in (torch.float32, dt) else tb,
        scale=inp.scale_float, dropout_p=float(inp.p), rng_state=rng, bias_requires_grad=want_db,
        deterministic=torch.are_deterministic_algorithms_enabled(), **desc)
    grads = Gradients(dq=shaped(dq, q.shape), dk=shaped(dk, k.shape), dv=shaped(dv, v.shape))
    if want_db:
        if nd == 5 and user_bias.ndim >= 3:
            db = db.view(q.shape[0], q.shape[2], q.shape[3], *db.shape[-2:])
        if nd == 3 and user_bias.ndim == 3:
            db = db.squeeze(1)
        grads.db = db.sum_to_size(user_bias.shape).to(user_bias.dtype)
    return grads


class FusedBw:
    """Mixin of the backward operator classes served by torch.ops.mslk.fmha_fused_bwd (listed
    before AttentionBwOpBase). `apply` computes the tensor-bias gradient when the class supports
    it and bias_requires_grad (default: the bias tensor's requires_grad)."""

    UNAVAILABLE_REASON = NO_BWD_KERNEL

    @classmethod
    def is_available(cls) -> bool:
        return bwd_registered("CUDA")

    @classmethod
    def apply(cls, ctx: Context, inp: Inputs, grad: torch.Tensor, *,
              bias_requires_grad: Optional[bool] = None) -> Gradients:
        b = inp.attn_bias
        t = b if isinstance(b, torch.Tensor) else getattr(b, "_bias", None) if isinstance(
            b, _ab.LowerTriangularMaskWithTensorBias) else None
        if bias_requires_grad is None:
            bias_requires_grad = t is not None and t.requires_grad
        if bias_requires_grad and not cls.SUPPORTS_ATTN_BIAS_GRAD:
            raise ValueError(f"{cls.NAME}: no attention-bias gradient in this operator (SUPPORTS_ATTN_BIAS_GRAD)")
        return fused_backward(inp, ctx, grad, bias_requires_grad=bool(bias_requires_grad))


__all__ = ["FusedBw", "bwd_registered", "draw_rng_state", "packed_lse", "backward_descriptor", "fused_backward",
           "shaped"]
