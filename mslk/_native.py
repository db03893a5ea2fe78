"""Loading of the native library (libmslk.so) and the identity of the build."""

from __future__ import annotations

import ctypes
import functools
import json
import os
from pathlib import Path

import torch

LIB_DIR = Path(__file__).resolve().parent / "lib"
LIB_PATH = LIB_DIR / "libmslk.so"


def python_only() -> bool:
    """MSLK_PYTHON_ONLY=1 skips the native library (no torch.ops.mslk kernels at all)."""
    return os.environ.get("MSLK_PYTHON_ONLY", "0").strip().lower() not in ("", "0", "false", "no")


@functools.lru_cache(maxsize=None)
def build_info() -> dict:
    """What CMake recorded about the build: variant (cuda/cpu), CUDA archs, versions."""
    path = LIB_DIR / "build_info.json"
    if python_only() or not path.exists():
        return {"variant": "python-only", "target": "default", "cuda_archs": "", "cuda_version": ""}
    return json.loads(path.read_text())


_loaded = False


def load() -> bool:
    """Load libmslk.so once (registers every native op). Returns False in Python-only mode."""
    global _loaded
    if _loaded:
        return True
    if python_only():
        return False
    if not LIB_PATH.exists():
        raise ImportError(
            f"mslk: native library not found at {LIB_PATH}. Build it with `bash tools/build.sh` "
            "(or `pip install .`), or set MSLK_PYTHON_ONLY=1 to import the Python layer only."
        )
    _promote_libstdcxx()
    # torch.ops.load_library dlopens the file: the binary links libtorch, not libpython,
    # so one build serves every Python version.
    torch.ops.load_library(str(LIB_PATH))
    _loaded = True
    return True


def _promote_libstdcxx() -> None:
    """Put libstdc++ in the global symbol scope before dlopen-ing libmslk.so.

    Some toolchains (seen: Ubuntu 24.04's g++ 13) give the library private weak copies of
    libstdc++ template code and statics (locale facets). In an RTLD_LOCAL library they shadow
    libstdc++'s own, and the first number formatted into an error message crashed. With
    libstdc++ in the global scope its definitions win.
    """
    try:
        ctypes.CDLL("libstdc++.so.6", mode=ctypes.RTLD_GLOBAL)
    except OSError:
        pass


def has_cuda_kernels() -> bool:
    return build_info().get("variant") == "cuda"
