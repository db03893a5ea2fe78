"""Automatic backend selection.

Priority lists are data: the first available operator whose `not_supported_reasons` is empty
wins. The reference operators are last (the CPU/general fallback). Backends without a kernel in
this build report unavailable and are never picked. Backward: FlashAttention 3 (when allowed),
FlashAttention 2, cutlass, then the reference; a tensor-bias gradient needs an operator with
SUPPORTS_ATTN_BIAS_GRAD.

Eager calls memoize the choice per problem signature (_signature): the support checks of the
fused classes read only what the signature holds, and a training step would otherwise walk them
twice, a decode loop once a token.
"""

from __future__ import annotations

import textwrap
from typing import Dict, List, Optional, Sequence, Tuple, Type

import torch

from mslk.attention.fmha import attn_bias as _ab
from mslk.attention.fmha import cutlass, cute_hopper, flash, flash3, reference, triton_splitk
from mslk.attention.fmha.common import AttentionBwOpBase, AttentionFwOpBase, Inputs

_USE_FLASH_ATTENTION_3 = True


def _set_use_fa3(use_flash_attention3: bool) -> None:
    """Allow (True) or forbid automatic CUDA dispatch from selecting FlashAttention 3 (process-global)."""
    global _USE_FLASH_ATTENTION_3
    _USE_FLASH_ATTENTION_3 = bool(use_flash_attention3)
    _CHOICES.clear()


def _get_use_fa3() -> bool:
    return _USE_FLASH_ATTENTION_3


def fa3_available() -> bool:
    return flash3.FwOp.is_available()


# Decode shapes (at most this many queries per sequence against at least this many keys) go to
# the split-K decode kernel first (triton_splitk), which reads each K/V head once per group.
_DECODE_MAX_Q, _DECODE_MIN_KEYS = 16, 1024


def _is_decode(inp: Inputs) -> bool:
    qi = getattr(inp.attn_bias, "q_seqinfo", None)
    seqs = len(qi.seqstart_py) - 1 if qi is not None else 1
    mq = qi.max_seqlen if qi is not None else inp.query.shape[1]
    return mq <= _DECODE_MAX_Q and inp.key.shape[1] // max(seqs, 1) >= _DECODE_MIN_KEYS


def _fw_priority(inp: Inputs) -> List[Type[AttentionFwOpBase]]:
    ops: List[Type[AttentionFwOpBase]] = [triton_splitk.FwOp] if _is_decode(inp) else []
    if _get_use_fa3():
        ops.append(flash3.FwOp)
    ops += [flash.FwOp, cutlass.FwOp, cute_hopper.FwOp, triton_splitk.FwOp, reference.FwOp]
    return ops


def _bw_priority(inp: Inputs) -> List[Type[AttentionBwOpBase]]:
    ops: List[Type[AttentionBwOpBase]] = []
    if _get_use_fa3():
        ops.append(flash3.BwOp)
    ops += [flash.BwOp, cutlass.BwOp, cute_hopper.BwOp, reference.BwOp]
    return ops


def _format_not_supported(op_name: str, tried: Sequence[type], inp: Inputs) -> str:
    lines = [f"No operator found for `{op_name}` with inputs:",
             f"     query       : shape={tuple(inp.query.shape)} ({inp.query.dtype})",
             f"     key         : shape={tuple(inp.key.shape)} ({inp.key.dtype})",
             f"     value       : shape={tuple(inp.value.shape)} ({inp.value.dtype})",
             f"     attn_bias   : {type(inp.attn_bias)}",
             f"     p           : {inp.p}"]
    for op in tried:
        reasons = op.not_supported_reasons(inp)
        lines.append(f"`{op.NAME}` is not supported because:")
        lines += [textwrap.indent(r, "    ") for r in reasons]
    return "\n".join(lines)


# Memoized choices: _signature(inp) + (direction, ...) -> operator class. The fused classes'
# not_supported_reasons (common.AttentionOpBase's, HeadDims', flash3's capability and FP8 checks,
# flash's page size, cutlass's bias dtype) read nothing outside the signature; the split-K decode
# class also reads whether the query rows overflow its grid (_splitk_extra), which joins the key
# where that class can be chosen. Inputs subclasses (InputsFp8, ...) and tensor subclasses
# (ScaledTensor) always take the full walk.
_CHOICES: Dict[tuple, type] = {}
_MEMOIZED = (flash3.FwOp, flash.FwOp, cutlass.FwOp, flash3.BwOp, flash.BwOp, cutlass.BwOp)


def _signature(inp: Inputs) -> Optional[Tuple]:
    q, k, v, b = inp.query, inp.key, inp.value, inp.attn_bias
    if type(inp) is not Inputs or type(q) is not torch.Tensor or type(k) is not torch.Tensor \
            or type(v) is not torch.Tensor or torch.compiler.is_compiling():
        return None
    if isinstance(b, torch.Tensor):
        bias_key: tuple = (torch.Tensor, b.dtype)
    elif isinstance(b, _ab.LowerTriangularMaskWithTensorBias):
        bias_key = (type(b), b._bias.dtype)
    else:
        bias_key = (type(b), b.page_size if isinstance(b, _ab._PagedBase) else 0)
    return (q.device, q.dtype, k.dtype, v.dtype, q.ndim, q.shape[-1], k.shape[-1], v.shape[-1],
            q.shape[-1] <= 1 or q.stride(-1) == 1, k.shape[-1] <= 1 or k.stride(-1) == 1,
            v.shape[-1] <= 1 or v.stride(-1) == 1, bias_key, inp.p != 0.0, inp.scale is None, inp.output_dtype,
            inp.is_partial, _USE_FLASH_ATTENTION_3)


def _splitk_extra(inp: Inputs) -> bool:
    """What triton_splitk.FwOp's check reads beyond the signature: whether its grid overflows."""
    return bool(triton_splitk.grid_overflow(inp))


def _is_splitk(op) -> bool:
    return isinstance(op, type) and issubclass(op, triton_splitk.FwOp)


def _memoized(key: Optional[tuple], walk, splitk_ok: bool = False):
    op = _CHOICES.get(key) if key is not None else None
    if op is None:
        op = walk()
        if key is not None and (op in _MEMOIZED or (splitk_ok and _is_splitk(op))):
            _CHOICES[key] = op
    return op


def _dispatch_fw(inp: Inputs, needs_gradient: bool) -> Type[AttentionFwOpBase]:
    def walk():
        ops = _fw_priority(inp)
        for op in ops:
            if op.is_available() and not op.not_supported_reasons(inp):
                return op
        raise NotImplementedError(_format_not_supported("memory_efficient_attention_forward", ops, inp))
    sig = _signature(inp)
    if sig is None:
        return walk()
    # Decode shapes try the split-K class first: its extra input joins the key, and it may be memoized.
    decode = _is_decode(inp)
    return _memoized(sig + ("fw", decode, _splitk_extra(inp) if decode else None), walk, splitk_ok=decode)


def _checked(op: type, key_tail: tuple, inp: Inputs, reasons_of) -> List[str]:
    """reasons_of() for a pinned operator, remembering (as _CHOICES does) where a fused or the
    split-K class takes the problem: a pinned (FwOp, BwOp) pair is checked three times a training
    step, a pinned decode class once a generated token."""
    splitk = _is_splitk(op)
    sig = _signature(inp) if op in _MEMOIZED or splitk else None
    key = None
    if sig is not None:
        key = sig + ("ok", op) + key_tail + ((_splitk_extra(inp),) if splitk else ())
    if key is not None and key in _CHOICES:
        return []
    reasons = reasons_of()
    if key is not None and not reasons:
        _CHOICES[key] = op
    return reasons


def fw_not_supported_reasons(op: Type[AttentionFwOpBase], inp: Inputs) -> List[str]:
    return _checked(op, (), inp, lambda: list(op.not_supported_reasons(inp)))


def bw_not_supported_reasons(op: Type[AttentionBwOpBase], inp: Inputs, bias_requires_grad: bool) -> List[str]:
    def reasons_of():
        reasons = list(op.not_supported_reasons(inp))
        if bias_requires_grad and not op.SUPPORTS_ATTN_BIAS_GRAD:
            reasons.append("no attention-bias gradient (the bias tensor requires grad)")
        return reasons
    return _checked(op, (bool(bias_requires_grad),), inp, reasons_of)


def _dispatch_bw(inp: Inputs, bias_requires_grad: bool = False) -> Type[AttentionBwOpBase]:
    def walk():
        ops = _bw_priority(inp)
        for op in ops:
            if op.is_available() and not bw_not_supported_reasons(op, inp, bias_requires_grad):
                return op
        msg = _format_not_supported("memory_efficient_attention_backward", ops, inp)
        if bias_requires_grad:
            msg += "\n(the attention bias requires grad: only operators with SUPPORTS_ATTN_BIAS_GRAD qualify)"
        raise NotImplementedError(msg)
    sig = _signature(inp)
    return _memoized(sig + ("bw", bool(bias_requires_grad)) if sig is not None else None, walk)
