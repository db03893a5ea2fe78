"""GEMM: FP8 rowwise products (torch.ops.mslk.f8f8bf16_rowwise family) and their wrappers.

Importing it also registers the FP4 / MX GEMM ops, which raise in this build (_unavailable_ops).
"""

from mslk.gemm import _unavailable_ops  # noqa: F401
