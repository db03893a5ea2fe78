"""Attention (spec groups "Attention - ..."): mslk.attention.fmha."""

from mslk.attention import fmha  # noqa: F401
from mslk.attention import cutlass_blackwell_fmha  # noqa: F401  (registers the raw Blackwell ops)
