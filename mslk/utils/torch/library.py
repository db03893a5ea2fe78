"""Native-library loading for domain modules.

Upstream splits native code into one Buck target per domain and each domain module loads its own.
This build links everything into one libmslk.so, so every target name means that library.
"""

from __future__ import annotations

import contextlib

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
