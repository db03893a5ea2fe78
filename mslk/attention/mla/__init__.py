"""ROCm MLA attention (AMD only; raises in this build, see triton_mla.py)."""

from mslk.attention.mla.triton_mla import mla_decode_fwd, mla_prefill_fwd  # noqa: F401

__all__ = ["mla_decode_fwd", "mla_prefill_fwd"]
