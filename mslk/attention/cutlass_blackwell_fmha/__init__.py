"""Standalone Blackwell FMHA facade (spec group "Attention - Standalone Blackwell FMHA").

The Blackwell (SM100) CUTLASS kernels are not part of this build: the functions and the raw
torch ops (torch.ops.mslk.fmha_fwd & co, see _ops.py) exist with the spec's signatures and raise.
"""

from mslk.attention.cutlass_blackwell_fmha import _ops  # noqa: F401
from mslk.attention.cutlass_blackwell_fmha.cutlass_blackwell_fmha_interface import (  # noqa: F401
    _cutlass_blackwell_fmha_forward,
    cutlass_blackwell_fmha_decode_forward,
    cutlass_blackwell_fmha_func,
)

__all__ = ["cutlass_blackwell_fmha_func", "cutlass_blackwell_fmha_decode_forward"]
