"""FlyDSL availability.

FlyDSL is AMD's Python kernel DSL; MSLK's FlyDSL kernels exist only in ROCm wheels. This build
carries none, so FlyDSL is never usable here and every entry point says so plainly instead of
failing somewhere deep inside a launch.
"""

from __future__ import annotations

import functools
import importlib.util

from mslk.utils import device, unavailable


def _diagnosis() -> str:
    if not device.is_rocm():
        return "no AMD ROCm device in this process"
    if importlib.util.find_spec("flydsl") is None:
        return "the flydsl package is not installed"
    return "this mslk build ships no FlyDSL kernels"


def unavailable_reason() -> str:
    """Why FlyDSL cannot run here: the reason part of mslk.utils.unavailable's message."""
    return (f"FlyDSL is AMD ROCm only ({_diagnosis()}); FlyDSL kernels need a ROCm build of mslk (which pins "
            "the flydsl package) on a supported AMD GPU; use the CUDA/Triton paths of the same op elsewhere")


@functools.lru_cache(maxsize=None)
def is_flydsl_available() -> bool:
    """False in this build (see module doc). Cached; call .cache_clear() after env changes."""
    # A ROCm build would also check that flydsl imports and knows the current gfx arch.
    return False


def require_flydsl(qualname: str = "mslk.flydsl") -> None:
    """Raise mslk's RuntimeError ("<qualname>: not available on this platform: ...") unless usable."""
    if is_flydsl_available():
        return
    raise unavailable.error(qualname, unavailable_reason)
