"""Native-library loading for domain modules.

Upstream splits native code into one Buck target per domain and each domain module loads its own.
This build links everything into one libmslk.so, so every target name means that library.
"""

from __future__ import annotations

import contextlib

import torch

from mslk import _native


def load_library_buck(buck_target: str) -> None:
    """Make sure the native library holding `buck_target` is loaded (idempotent).

    A no-op in Python-only mode (MSLK_PYTHON_ONLY=1); a failing dlopen (OSError) is ignored, as
    upstream does in OSS, so the ops of that target are simply absent.
    """
    del buck_target  # one library serves every target
    if _native.python_only():
        return
    with contextlib.suppress(OSError):
        _native.load()


def define(ns: str, schema: str, impl, fake) -> None:
    """Register the Python op `ns::schema` (one implementation for every backend) and its fake.

    Skips an op that exists already: a native definition, or this call made twice.
    """
    name, args = schema.split("(", 1)
    qualname = f"{ns}::{name}"
    if hasattr(getattr(torch.ops, ns), name):
        return
    torch.library.define(qualname, "(" + args)
    torch.library.impl(qualname, "CompositeExplicitAutograd")(impl)
    torch.library.register_fake(qualname)(fake)
