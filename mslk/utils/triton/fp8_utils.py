"""The FP8 flavour of the platform, for Triton kernels and their torch callers.

Triton is optional: without it the Triton dtype slot is None and reinterpret_fp8_type raises.
"""

from __future__ import annotations

import torch

from mslk.utils.device import supports_float8_fnuz

# Below any meaningful amax: keeps scale = max / amax finite on all-zero inputs.
FP8_EPS = 1e-12


def _triton_dtype(name: str):
    try:
        import triton.language as tl
    except ImportError:
        return None
    return getattr(tl, name, None)


def get_fp8_constants() -> tuple[torch.dtype, object, float, float]:
    """(torch dtype, Triton dtype or None, max finite value, eps) for the current device.

    OCP e4m3 (max 448) on CUDA and CPU; FNUZ e4m3 (max 240) on ROCm FNUZ targets (gfx942).
    """
    if supports_float8_fnuz():
        torch_dtype, tl_name = torch.float8_e4m3fnuz, "float8e4b8"
    else:
        torch_dtype, tl_name = torch.float8_e4m3fn, "float8e4nv"
    return torch_dtype, _triton_dtype(tl_name), float(torch.finfo(torch_dtype).max), FP8_EPS


def reinterpret_fp8_type(tensor: torch.Tensor, dtype):
    """View `tensor`'s storage as Triton `dtype` (no conversion) for passing to a Triton kernel."""
    try:
        import triton
    except ImportError as e:
        raise RuntimeError(
            "reinterpret_fp8_type needs Triton, which is not installed in this environment"
        ) from e
    return triton.reinterpret(tensor, dtype)
