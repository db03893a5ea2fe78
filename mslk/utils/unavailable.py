"""The one way mslk says that something cannot run in this build.

Symbols of the spec whose kernels need hardware this build does not target (AMD ROCm, MTIA,
NVIDIA Blackwell) or a number format it does not make yet (FP4 / MX) still exist at their spec
paths with the spec's signatures; calling one raises

    RuntimeError("<qualified name>: not available on this platform: <reason>")

Torch ops among them are registered from Python (there is no kernel to register in C++) with a
fake implementation, so torch.compile can trace code that calls them. A C++ definition of the
same op, once it lands, wins: registration here skips ops that already exist.
"""

from __future__ import annotations

import functools
from typing import Callable, Union

from mslk.utils.torch import library

# Reasons, one per kind of absent target, so that the wording stays the same everywhere.
ROCM = "needs AMD ROCm (gfx942 / gfx950); this is an NVIDIA/CPU build"
ROCM_GFX950 = "needs AMD ROCm gfx950; this is an NVIDIA/CPU build"
MTIA = "needs an MTIA device; this is an NVIDIA/CPU build"
SM100 = "needs SM100 (NVIDIA Blackwell); this build has no Blackwell kernels"
FP4 = "this build has no FP4 / MX (microscaling) kernels yet"
CUTEDSL_SM100 = "needs SM100 (NVIDIA Blackwell) and the CuTeDSL runtime; this build has no Blackwell kernels"

Reason = Union[str, Callable[[], str]]


def message(qualname: str, reason: str) -> str:
    return f"{qualname}: not available on this platform: {reason}"


def error(qualname: str, reason: Reason) -> RuntimeError:
    """The RuntimeError to raise; `reason` may be a callable, evaluated now (never fails)."""
    if callable(reason):
        try:
            reason = reason()
        except Exception as e:  # noqa: BLE001 -- the diagnosis must not hide the message
            reason = repr(e)
    return RuntimeError(message(qualname, reason))


def unavailable(reason: Reason, qualname: str | None = None):
    """Decorator: the function keeps its signature (inspect follows __wrapped__) and raises."""

    def wrap(fn):
        name = qualname or f"{fn.__module__}.{fn.__qualname__}"

        @functools.wraps(fn)
        def stub(*args, **kwargs):
            raise error(name, reason)

        stub.__mslk_unavailable__ = name
        return stub

    return wrap


def define_op(ns: str, schema: str, reason: Reason, fake: Callable) -> None:
    """Register `ns::schema` whose every call raises, with `fake` for torch.compile / meta."""
    qualname = f"{ns}::{schema.split('(', 1)[0]}"

    def impl(*a, **k):
        raise error(qualname, reason)

    library.define(ns, schema, impl, fake)
