"""Registers the fake (Meta) implementation of every native op, domain by domain.

The pattern for every op: schema in C++ (`csrc/<domain>/<domain>_ops.cpp`), CPU reference and
CUDA kernel registered in C++, fake implementation in `mslk/<domain>/_fake.py`.
"""

from mslk import _native

if _native.load():
    from mslk.quantize import _fake as _quantize_fake  # noqa: F401
    from mslk.attention import _fake as _attention_fake  # noqa: F401
    from mslk.moe import _fake as _moe_fake  # noqa: F401
    from mslk.gemm import _fake as _gemm_fake  # noqa: F401
