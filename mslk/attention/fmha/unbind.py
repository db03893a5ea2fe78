"""Storage-view helpers (spec group "Attention - Merge & storage utilities")."""

from typing import Optional, Sequence, Tuple

import torch


def get_stack_strides(tensors: Sequence[torch.Tensor], dim: int) -> Optional[Tuple[int, ...]]:
    """Strides of `torch.stack(tensors, dim)` when every tensor is a view of one storage, with one
    shape, dtype and strides, at storage offsets equally spaced (so the stack is a zero-copy view);
    None otherwise."""
    if len(tensors) == 0:
        return None
    t0 = tensors[0]
    dim = dim if dim >= 0 else dim + t0.ndim + 1
    if not 0 <= dim <= t0.ndim:
        return None
    for t in tensors[1:]:
        if (t.shape != t0.shape or t.stride() != t0.stride() or t.dtype != t0.dtype or t.device != t0.device
                or t.untyped_storage().data_ptr() != t0.untyped_storage().data_ptr()):
            return None
    step = tensors[1].storage_offset() - t0.storage_offset() if len(tensors) > 1 else 0
    for i, t in enumerate(tensors):
        if t.storage_offset() != t0.storage_offset() + i * step:
            return None
    if len(tensors) > 1 and step <= 0:
        return None
    strides = list(t0.stride())
    strides.insert(dim, step)
    return tuple(strides)


class _StackView(torch.autograd.Function):
    """The zero-copy stack as an autograd node of every piece: its gradient is unbound back into
    one gradient a piece (an as_strided view of the first piece alone would send the whole
    stacked gradient to that piece's geometry and drop the others')."""

    @staticmethod
    def forward(ctx, shape, strides, dim, *tensors):
        ctx.dim = dim
        t0 = tensors[0]
        return t0.as_strided(shape, strides, t0.storage_offset())

    @staticmethod
    def backward(ctx, grad):
        return (None, None, None, *grad.unbind(ctx.dim))


def stack_or_none(tensors: Sequence[torch.Tensor], dim: int) -> Optional[torch.Tensor]:
    """A zero-copy view equal to torch.stack(tensors, dim) when the storage allows it, else None.
    Gradients flow back to every tensor, as through torch.stack."""
    strides = get_stack_strides(tensors, dim)
    if strides is None:
        return None
    t0 = tensors[0]
    d = dim if dim >= 0 else dim + t0.ndim + 1
    shape = list(t0.shape)
    shape.insert(d, len(tensors))
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        return _StackView.apply(shape, strides, d, *tensors)
    return t0.as_strided(shape, strides, t0.storage_offset())


def unbind(x: torch.Tensor, dim: int) -> Tuple[torch.Tensor, ...]:
    """torch.unbind (autograd-aware); the results are views of x's storage, so stack_or_none can
    rebuild x without a copy."""
    return tuple(x.unbind(dim))


__all__ = ["get_stack_strides", "stack_or_none", "unbind"]
