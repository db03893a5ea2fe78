"""FlyDSL flash attention (AMD ROCm only; raises in this build, see flash_attn_interface.py)."""

from mslk.attention.flydsl.flash_attn_interface import flydsl_flash_attn_func  # noqa: F401

__all__ = ["flydsl_flash_attn_func"]
