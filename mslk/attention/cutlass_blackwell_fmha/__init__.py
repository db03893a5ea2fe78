"""Standalone Blackwell FMHA facade (spec group "Attention - Standalone Blackwell FMHA").

The Blackwell (SM100) CUTLASS kernels are not part of this build: cutlass_blackwell_fmha_func and
the raw torch ops torch.ops.mslk.fmha_fwd / fmha_bwd / cutlass_blackwell_fmha_fwd / _bwd run mslk's
fused attention ops instead, and the decode path (cutlass_blackwell_fmha_decode_forward,
torch.ops.mslk.fmha_gen_fwd) mslk's split-K decode op (see cutlass_blackwell_fmha_interface.py).
"""

from mslk.attention.cutlass_blackwell_fmha import _ops  # noqa: F401
from mslk.attention.cutlass_blackwell_fmha.cutlass_blackwell_fmha_interface import (  # noqa: F401
    _cutlass_blackwell_fmha_forward,
    cutlass_blackwell_fmha_decode_forward,
    cutlass_blackwell_fmha_func,
)

__all__ = ["cutlass_blackwell_fmha_func", "cutlass_blackwell_fmha_decode_forward"]
