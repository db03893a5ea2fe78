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
