"""mslk: fused GPU kernels for transformer workloads (the MSLK API, CUDA C++ kernels).

`import mslk` loads the native library, which registers every torch.ops.mslk / torch.ops.triton
op with its CPU, CUDA and fake (torch.compile) implementations.
"""

from mslk._version import __version__  # noqa: F401
from mslk import _native

open_source: bool = True

_native.load()
__variant__: str = _native.build_info().get("variant", "python-only")
__target__: str = _native.build_info().get("target", "default")

# Fake (Meta) implementations and the Python wrappers of each domain.
from mslk import _ops  # noqa: E402,F401
from mslk import quantize  # noqa: E402,F401
from mslk import attention  # noqa: E402,F401
from mslk import moe  # noqa: E402,F401
from mslk import gemm  # noqa: E402,F401
from mslk import conv  # noqa: E402,F401
