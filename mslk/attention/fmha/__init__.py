"""Fused multi-head attention frontends (spec group "Attention - Core fMHA").

q/k/v: BMK [B, M, K], BMHK [B, M, H, K] or BMGHK [B, M, G, H, K]; the output is in the query layout
with the last dim replaced by V's head dim; LSE is the natural log, [B, H, M] or [B, G, H, M]
(packed [1, H, total_Mq] for variable-length biases). Default scale: q.shape[-1] ** -0.5.

Forward operators: on CUDA, mslk's fused kernel (torch.ops.mslk.fmha_fused_fwd: a
FlashAttention-3-style Hopper kernel on sm_90, a FlashAttention-2-style one elsewhere and for
tensor biases and paged K/V) behind flash3.FwOp (sm_90), flash.FwOp and cutlass.FwOp, each with the
limits of its class; `reference.FwOp` (exact, unfused) takes everything else, on CPU too.

Backward (autograd through memory_efficient_attention, the manual forward_requires_grad /
backward pair, and memory_efficient_attention_partial(_allow_backward=True)): mslk's fused
backward, torch.ops.mslk.fmha_fused_bwd, behind flash3.BwOp (sm_90), flash.BwOp, cutlass.BwOp
(tensor-bias gradient, fp32) and cute_hopper.BwOp; `reference.BwOp` (exact) takes everything
else, on CPU too. Dropout (p > 0) works on the autograd path (cutlass, flash and reference
operators); the manual and partial APIs reject it, as the spec says.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple, Type, Union

import torch

from mslk.attention.fmha import (  # noqa: F401
    attn_bias, ck, ck_decoder, ck_splitk, common, cute_blackwell, cute_hopper, cutlass, cutlass_blackwell, flash,
    flash3, flash_mtia, reference, triton_splitk,
)
from mslk.attention.fmha.attn_bias import (  # noqa: F401
    VARLEN_BIASES, AttentionBias, BlockDiagonalCausalFromBottomRightMask,
    BlockDiagonalCausalLocalAttentionFromBottomRightMask, BlockDiagonalCausalLocalAttentionMask,
    BlockDiagonalCausalLocalAttentionPaddedKeysMask, BlockDiagonalCausalMask,
    BlockDiagonalCausalWithOffsetGappyKeysMask, BlockDiagonalCausalWithOffsetPaddedKeysMask,
    BlockDiagonalGappyKeysMask, BlockDiagonalLocalAttentionFromBottomRightGappyKeysMask,
    BlockDiagonalLocalAttentionPaddedKeysMask, BlockDiagonalMask, BlockDiagonalPaddedKeysMask,
    LocalAttentionFromBottomRightMask, LowerTriangularFromBottomRightLocalAttentionMask,
    LowerTriangularFromBottomRightMask, LowerTriangularMask, LowerTriangularMaskWithTensorBias,
    PagedBlockDiagonalCausalLocalPaddedKeysMask, PagedBlockDiagonalCausalWithOffsetGappyKeysMask,
    PagedBlockDiagonalCausalWithOffsetPaddedKeysMask, PagedBlockDiagonalGappyKeysMask,
    PagedBlockDiagonalPaddedKeysMask,
)
from mslk.attention.fmha.common import (  # noqa: F401
    AttentionBwOpBase, AttentionFwOpBase, AttentionOp, AttentionOpBase, Context, Gradients, Inputs,
)
from mslk.attention.fmha.dispatch import _dispatch_bw, _dispatch_fw, _get_use_fa3, _set_use_fa3, fa3_available  # noqa: F401
from mslk.attention.fmha.dispatch import fw_not_supported_reasons as _fw_reasons
from mslk.attention.fmha import _autograd, _merge_ops
from mslk.attention.fmha._backward import shaped as _shaped
from mslk.attention.fmha.torch_attention_compat import ensure_pt_flash_ok, is_pt_cutlass_compatible  # noqa: F401

MemoryEfficientAttentionCutlassOp = (cutlass.FwOp, cutlass.BwOp)
MemoryEfficientAttentionCutlassBlackwellOp = (cutlass_blackwell.FwOp, cutlass_blackwell.BwOp)
MemoryEfficientAttentionCutlassFwdFlashBwOp = (cutlass.FwOp, flash.BwOp)
MemoryEfficientAttentionFlashAttentionOp = (flash.FwOp, flash.BwOp)
MemoryEfficientAttentionFlashMtiaAttentionOp = (flash_mtia.FwOp, flash_mtia.BwOp)
MemoryEfficientAttentionCkOp = (ck.FwOp, ck.BwOp)
MemoryEfficientAttentionCkDecoderOp = (ck_decoder.FwOp, ck.BwOp)
MemoryEfficientAttentionSplitKCkOp = (ck_splitk.FwOp, ck.BwOp)
MemoryEfficientAttentionCuteFlashAttentionOp = (cute_blackwell.FwOp, cute_blackwell.BwOp)

# Explicit enumerations (not the dispatch priority). reference.FwOp / BwOp are this build's addition.
ALL_FW_OPS: List[Type[AttentionFwOpBase]] = [
    cutlass.FwOp, flash.FwOp, flash3.FwOp, ck.FwOp, ck_decoder.FwOp, ck_splitk.FwOp, triton_splitk.FwOp,
    cutlass_blackwell.FwOp, cute_hopper.FwOp, cute_blackwell.FwOp, flash_mtia.FwOp, reference.FwOp,
]
ALL_BW_OPS: List[Type[AttentionBwOpBase]] = [
    cutlass.BwOp, flash.BwOp, flash3.BwOp, ck.BwOp, cutlass_blackwell.BwOp, cute_hopper.BwOp, cute_blackwell.BwOp,
    flash_mtia.BwOp, reference.BwOp,
]

def _fw_op_of(op, api: str) -> Optional[Type[AttentionFwOpBase]]:
    return _op_pair(op, api)[0]


def _op_pair(op, api: str) -> Tuple[Optional[Type[AttentionFwOpBase]], Optional[Type[AttentionBwOpBase]]]:
    if op is None:
        return None, None
    if isinstance(op, tuple):
        if len(op) != 2:
            raise ValueError(f"{api}: op must be a forward operator class or an (FwOp, BwOp) pair; got {op!r}")
        fw, bw = op
        if fw is not None and not (isinstance(fw, type) and issubclass(fw, AttentionFwOpBase)):
            raise ValueError(f"{api}: op[0] must be a forward operator class or None; got {fw!r}")
        if bw is not None and not (isinstance(bw, type) and issubclass(bw, AttentionBwOpBase)):
            raise ValueError(f"{api}: op[1] must be a backward operator class or None; got {bw!r}")
        return fw, bw
    if isinstance(op, type) and issubclass(op, AttentionFwOpBase):
        return op, None
    raise ValueError(f"{api}: op must be a forward operator class; got {op!r}")


def _run_forward(inp: Inputs, op: Optional[Type[AttentionFwOpBase]], needs_gradient: bool
                 ) -> Tuple[torch.Tensor, Context]:
    inp.validate_inputs()
    output_shape = inp.normalize_bmhk()
    if op is None:
        op = _dispatch_fw(inp, needs_gradient)
    else:
        reasons = _fw_reasons(op, inp)
        if reasons:
            raise ValueError(f"Operator `{op.NAME}` ({op.__module__}.{op.__qualname__}) does not support these "
                             "inputs:\n" + "\n".join(f"    {r}" for r in reasons))
    out, ctx = op.apply(inp, needs_gradient=needs_gradient)
    if ctx is None:
        raise RuntimeError(f"{op.NAME} returned no LSE context")
    return _shaped(out, output_shape), ctx


def _requires_grad(*xs) -> bool:
    return torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad for x in xs)


_OUTPUT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _check_output_dtype(output_dtype, api: str) -> None:
    if output_dtype is not None and output_dtype not in _OUTPUT_DTYPES:
        raise TypeError(f"{api}: output_dtype must be None or one of {', '.join(map(str, _OUTPUT_DTYPES))}; "
                        f"got {output_dtype!r}")


def memory_efficient_attention(query, key, value, attn_bias=None, p: float = 0.0, scale: Optional[float] = None,
                               *, op: Optional[AttentionOp] = None, output_dtype: Optional[torch.dtype] = None
                               ) -> torch.Tensor:
    """softmax(scale * q k^T + bias) v (dropout p), dispatched to a backend (or the pinned
    `op=(FwOp, BwOp)`); differentiable w.r.t. query, key, value and a tensor bias."""
    _check_output_dtype(output_dtype, "memory_efficient_attention")
    fw, bw = _op_pair(op, "memory_efficient_attention")
    if _requires_grad(query, key, value, _autograd.bias_tensor(attn_bias)):
        return _autograd.attention(query, key, value, attn_bias, p, scale, fw, bw, output_dtype)[0]
    inp = Inputs(query=query, key=key, value=value, attn_bias=attn_bias, p=p, scale=scale, output_dtype=output_dtype)
    return _run_forward(inp, fw, needs_gradient=False)[0]


def memory_efficient_attention_forward(query, key, value, attn_bias=None, p: float = 0.0,
                                       scale: Optional[float] = None, *, op=None,
                                       output_dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """Forward only (no backward context). `op` is a forward operator class, not a pair."""
    if isinstance(op, tuple):
        raise ValueError("memory_efficient_attention_forward: pass a forward operator class, not an (FwOp, BwOp) pair")
    _check_output_dtype(output_dtype, "memory_efficient_attention_forward")
    fw = _fw_op_of(op, "memory_efficient_attention_forward")
    inp = Inputs(query=query, key=key, value=value, attn_bias=attn_bias, p=p, scale=scale, output_dtype=output_dtype)
    return _run_forward(inp, fw, needs_gradient=False)[0]


def memory_efficient_attention_forward_requires_grad(query, key, value, attn_bias=None, p: float = 0.0,
                                                     scale: Optional[float] = None, *, op=None,
                                                     output_dtype: Optional[torch.dtype] = None
                                                     ) -> Tuple[torch.Tensor, torch.Tensor]:
    """Manual-backward forward: returns (out, lse), the LSE in the layout of the forward operator
    (variable-length biases: padded [num_seqs, H, max_Mq] for cutlass.FwOp, packed [1, H, total]
    otherwise); memory_efficient_attention_backward takes either. Dropout is rejected."""
    if p != 0.0:
        raise NotImplementedError("memory_efficient_attention_forward_requires_grad: dropout (p != 0) is not "
                                  "supported by the manual forward/backward API")
    _check_output_dtype(output_dtype, "memory_efficient_attention_forward_requires_grad")
    fw = _fw_op_of(op, "memory_efficient_attention_forward_requires_grad")
    inp = Inputs(query=query, key=key, value=value, attn_bias=attn_bias, p=p, scale=scale, output_dtype=output_dtype)
    out, ctx = _run_forward(inp, fw, needs_gradient=True)
    return out, ctx.lse


def memory_efficient_attention_backward(grad, output, lse, query, key, value, attn_bias=None, p: float = 0.0,
                                        scale: Optional[float] = None, *, op=None
                                        ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Explicit backward of (output, lse) from memory_efficient_attention_forward_requires_grad:
    returns (dq, dk, dv) in the shapes of query, key, value. `op`: a backward operator class or an
    (FwOp, BwOp) pair (None: dispatch). Dropout is rejected; no tensor-bias gradient."""
    api = "memory_efficient_attention_backward"
    if p != 0.0:
        raise NotImplementedError(f"{api}: dropout (p != 0) is not supported by the manual forward/backward API")
    if isinstance(op, tuple):
        bw = _op_pair(op, api)[1]
    elif op is None or (isinstance(op, type) and issubclass(op, AttentionBwOpBase)):
        bw = op
    else:
        raise ValueError(f"{api}: op must be a backward operator class or an (FwOp, BwOp) pair; got {op!r}")
    inp = Inputs(query=query, key=key, value=value, attn_bias=attn_bias, p=p, scale=scale)
    inp.validate_inputs()
    out_shape = (*query.shape[:-1], value.shape[-1])
    for name, x in (("grad", grad), ("output", output)):
        if not isinstance(x, torch.Tensor) or tuple(x.shape) != out_shape:
            got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"{api}: {name} must have the output shape {out_shape}; got {got}")
    if not isinstance(lse, torch.Tensor):
        raise ValueError(f"{api}: lse must be a tensor; got {type(lse).__name__}")
    inp.normalize_bmhk()
    n_shape = (*inp.query.shape[:-1], inp.value.shape[-1])
    if bw is None:
        bw = _dispatch_bw(inp)
    else:
        _autograd.check_bw(bw, inp, False)
    g = bw.apply(Context(lse=lse, out=output.reshape(n_shape)), inp, grad.reshape(n_shape))
    return g.dq.reshape(query.shape), g.dk.reshape(key.shape), g.dv.reshape(value.shape)


def memory_efficient_attention_partial(query, key, value, attn_bias=None, p: float = 0.0,
                                       scale: Optional[float] = None, *, op=None,
                                       output_dtype: Optional[torch.dtype] = None, _allow_backward: bool = False
                                       ) -> Tuple[torch.Tensor, torch.Tensor]:
    """(out, lse) over one K/V shard; combine shards with merge_attentions. Output dtype defaults
    to float32 (float64 for float64 inputs). Forward-only unless _allow_backward (then both out
    and lse are differentiable; merge_training wraps this for training)."""
    if p != 0.0:
        raise NotImplementedError("memory_efficient_attention_partial: dropout is not supported")
    _check_output_dtype(output_dtype, "memory_efficient_attention_partial")
    fw, bw = _op_pair(op, "memory_efficient_attention_partial")
    if _requires_grad(query, key, value, _autograd.bias_tensor(attn_bias)):
        if not _allow_backward:
            raise ValueError("memory_efficient_attention_partial is forward-only; use "
                             "merge_training.memory_efficient_attention_partial_autograd for training")
        return _autograd.attention(query, key, value, attn_bias, p, scale, fw, bw, output_dtype, partial=True)
    inp = Inputs(query=query, key=key, value=value, attn_bias=attn_bias, p=p, scale=scale, output_dtype=output_dtype,
                 is_partial=True)
    out, ctx = _run_forward(inp, fw, needs_gradient=True)
    return out, ctx.lse


def _stack(x: Union[torch.Tensor, Sequence[torch.Tensor]], name: str, dtypes) -> torch.Tensor:
    shards = [x] if isinstance(x, torch.Tensor) else list(x)
    if len(shards) == 0:
        raise ValueError(f"merge_attentions: {name} is empty")
    for i, t in enumerate(shards):
        at = name if isinstance(x, torch.Tensor) else f"{name}[{i}]"
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"merge_attentions: {at} must be a tensor; got {type(t).__name__}")
        if t.dtype not in dtypes:
            raise TypeError(f"merge_attentions: {at} must be {' / '.join(map(str, dtypes))}; got {t.dtype}")
        if t.shape != shards[0].shape:
            raise ValueError(f"merge_attentions: the tensors of {name} must have one shape; {name}[0] is "
                             f"{tuple(shards[0].shape)}, {at} is {tuple(t.shape)}")
    return x if isinstance(x, torch.Tensor) else torch.stack(shards, dim=0)


def merge_attentions(attn_split, lse_split, write_lse: bool = True, output_dtype: Optional[torch.dtype] = None
                     ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """Exact merge of attention over disjoint K/V chunks:
    out = sum_i O_i e^{LSE_i} / sum_i e^{LSE_i}, lse = log sum_i e^{LSE_i}.
    attn_split [S, B, M, (G,) H, K] and lse_split [S, B, (G,) H, M], as tensors or lists. Where every
    chunk has LSE = -inf the output is 0 and the LSE is -inf."""
    lists = not isinstance(attn_split, torch.Tensor)
    if not lists and any(isinstance(x, torch.Tensor) and x.requires_grad for x in (attn_split, lse_split)) \
            and not write_lse:
        raise ValueError("merge_attentions: inputs requiring gradients require write_lse=True")
    _check_output_dtype(output_dtype, "merge_attentions")
    attn = _stack(attn_split, "attn_split", _OUTPUT_DTYPES)
    lse = _stack(lse_split, "lse_split", (torch.float32, torch.float64))
    if lists and (attn.requires_grad or lse.requires_grad) and not write_lse:
        raise ValueError("merge_attentions: inputs requiring gradients require write_lse=True")
    if attn.ndim not in (5, 6):
        raise ValueError(f"merge_attentions: attn_split (stacked) must be [S, B, M, H, K] or [S, B, M, G, H, K]; "
                         f"got {tuple(attn.shape)}")
    S, B, M = attn.shape[:3]
    heads = attn.shape[3:-1]
    if tuple(lse.shape) != (S, B, *heads, M):
        raise ValueError(f"merge_attentions: lse_split (stacked) must be [S, B, (G,) H, M] = {(S, B, *heads, M)} for "
                         f"attn_split {tuple(attn.shape)}; got {tuple(lse.shape)}")
    if attn.dtype in _MERGE_KERNEL_DTYPES and lse.dtype == torch.float32 and (
            output_dtype is None or output_dtype in _MERGE_KERNEL_DTYPES):
        if lists or attn.requires_grad or lse.requires_grad:  # differentiable path
            shards_a = list(attn_split) if lists else list(attn.unbind(0))
            shards_l = list(lse_split) if lists else list(lse.unbind(0))
            return _merge_ops.merge_varargs(shards_a, shards_l, write_lse, output_dtype)
        out = attn.new_empty(attn.shape[1:], dtype=output_dtype or attn.dtype)
        lse_out = lse.new_empty(lse.shape[1:]) if write_lse else None
        _merge_ops.merge_into(out, lse_out, attn, lse)
        return out, lse_out
    return _merge_math(attn, lse, write_lse, output_dtype)


# dtypes the merge kernels take (csrc/attention/merge_attentions.cpp); float64 merges take the
# plain-torch math below (the CPU reference precision for tests).
_MERGE_KERNEL_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _merge_math(attn, lse, write_lse, output_dtype):
    out_dtype = output_dtype if output_dtype is not None else attn.dtype
    acc = torch.float64 if torch.float64 in (attn.dtype, lse.dtype) else torch.float32
    lse_f = lse.to(acc).movedim(-1, 2)  # [S, B, M, (G,) H]
    lse_max = lse_f.amax(dim=0)
    lse_max = torch.where(torch.isneginf(lse_max), torch.zeros_like(lse_max), lse_max)
    w = torch.exp(lse_f - lse_max)  # 0 for -inf chunks
    denom = w.sum(dim=0)
    safe = torch.where(denom == 0, torch.ones_like(denom), denom)
    out = (w.unsqueeze(-1) * attn.to(acc)).sum(dim=0) / safe.unsqueeze(-1)
    out = torch.where((denom == 0).unsqueeze(-1), torch.zeros_like(out), out).to(out_dtype)
    if not write_lse:
        return out, None
    lse_out = (torch.log(denom) + lse_max).movedim(1, -1).to(lse.dtype)  # log 0 = -inf
    return out, lse_out




__all__ = [
    "memory_efficient_attention", "memory_efficient_attention_forward",
    "memory_efficient_attention_forward_requires_grad", "memory_efficient_attention_backward",
    "memory_efficient_attention_partial", "merge_attentions", "AttentionBias", "AttentionOp", "AttentionOpBase",
    "AttentionFwOpBase", "AttentionBwOpBase", "Inputs", "Context", "Gradients", "ALL_FW_OPS", "ALL_BW_OPS",
    "MemoryEfficientAttentionCutlassOp", "MemoryEfficientAttentionCutlassBlackwellOp",
    "MemoryEfficientAttentionCutlassFwdFlashBwOp", "MemoryEfficientAttentionFlashAttentionOp",
    "MemoryEfficientAttentionFlashMtiaAttentionOp", "MemoryEfficientAttentionCkOp",
    "MemoryEfficientAttentionCkDecoderOp", "MemoryEfficientAttentionSplitKCkOp",
    "MemoryEfficientAttentionCuteFlashAttentionOp", "_get_use_fa3", "_set_use_fa3", "fa3_available",
    "is_pt_cutlass_compatible", "ensure_pt_flash_ok", "VARLEN_BIASES",
]
