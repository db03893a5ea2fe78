"""Compatibility checks for PyTorch's bundled attention kernels."""

import torch


def is_pt_cutlass_compatible(force: bool = False) -> bool:
    """Whether PyTorch's bundled CUTLASS memory-efficient attention is usable here. With force,
    raise instead of returning False."""
    ok = torch.cuda.is_available() and hasattr(torch.ops.aten, "_efficient_attention_forward")
    if force and not ok:
        raise ImportError("PyTorch's CUTLASS attention (aten::_efficient_attention_forward) is not usable: "
                          + ("no CUDA device" if not torch.cuda.is_available() else "op missing"))
    return ok


def ensure_pt_flash_ok() -> None:
    """Raises when PyTorch's FlashAttention integration is unusable."""
    if not torch.cuda.is_available():
        raise ImportError("PyTorch FlashAttention needs a CUDA device")
    if not hasattr(torch.ops.aten, "_flash_attention_forward"):
        raise ImportError("this PyTorch build has no aten::_flash_attention_forward")


# --- Compile-friendly wrappers (spec "Attention - Compile-friendly wrappers") ---------------------
# torch.ops.mslk.memory_efficient_attention_forward{,_with_bias}: opaque custom ops, so backend
# dispatch (Python control flow over mask types and hardware) stays outside a torch.compile trace.
# Reduced forward-only contract: no `op` / `output_dtype`; the bias is absent or a dense additive
# tensor broadcastable to [B, H, Mq, Mkv] (the trace-safe form). Output: q's layout and dtype, last
# dim from V. No autograd formula is registered (forward only).

from typing import Optional  # noqa: E402


def _mea_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, b: Optional[torch.Tensor], p: float,
                 scale: Optional[float], api: str) -> torch.Tensor:
    from mslk.attention.fmha import memory_efficient_attention_forward

    if k.shape[-1] != v.shape[-1]:
        raise ValueError(f"{api}: K and V head dimensions must match (key {tuple(k.shape)}, value {tuple(v.shape)})")
    return memory_efficient_attention_forward(q, k, v, attn_bias=b, p=p, scale=scale)


def _mea_fake(q, k, v, b, p, scale, api):
    if k.shape[-1] != v.shape[-1]:
        raise ValueError(f"{api}: K and V head dimensions must match (key {tuple(k.shape)}, value {tuple(v.shape)})")
    return q.new_empty((*q.shape[:-1], v.shape[-1]))


@torch.library.custom_op("mslk::memory_efficient_attention_forward", mutates_args=())
def memory_efficient_attention_forward_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                          b: Optional[torch.Tensor] = None, p: float = 0.0,
                                          scale: Optional[float] = None) -> torch.Tensor:
    return _mea_forward(q, k, v, b, p, scale, "mslk::memory_efficient_attention_forward")


@memory_efficient_attention_forward_op.register_fake
def _(q, k, v, b=None, p=0.0, scale=None):
    return _mea_fake(q, k, v, b, p, scale, "mslk::memory_efficient_attention_forward")


@torch.library.custom_op("mslk::memory_efficient_attention_forward_with_bias", mutates_args=())
def memory_efficient_attention_forward_with_bias_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                                    b: torch.Tensor, p: float = 0.0,
                                                    scale: Optional[float] = None) -> torch.Tensor:
    _require_bias(b)
    return _mea_forward(q, k, v, b, p, scale, "mslk::memory_efficient_attention_forward_with_bias")


def _require_bias(b) -> None:
    if not isinstance(b, torch.Tensor):
        raise TypeError("mslk::memory_efficient_attention_forward_with_bias: argument 'b' must be a Tensor "
                        f"(the attention bias), got {type(b).__name__}")


@memory_efficient_attention_forward_with_bias_op.register_fake
def _(q, k, v, b, p=0.0, scale=None):
    _require_bias(b)
    return _mea_fake(q, k, v, b, p, scale, "mslk::memory_efficient_attention_forward_with_bias")
