"""Attention (spec groups "Attention - ..."): mslk.attention.fmha."""

from mslk.attention import fmha  # noqa: F401
