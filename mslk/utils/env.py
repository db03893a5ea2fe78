"""The runtime environment variables MSLK reads, in one place.

Every function reads os.environ when called (not at import), so tests and long-lived processes
see changes. Build-time variables (MSLK_PYTHON_ONLY, ...) live in mslk._native and the build.
"""

from __future__ import annotations

import os

_TRUE = ("1", "true", "yes", "on")


def _present(name: str) -> bool:
    # The spec makes these switches presence-based: any value, even "0", turns them on.
    return name in os.environ


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


def cache_dir() -> str:
    """MSLK_CACHE_DIR, else $HOME/.mslk: where autotune results and similar caches live."""
    path = os.environ.get("MSLK_CACHE_DIR", "").strip()
    return path if path else os.path.join(os.path.expanduser("~"), ".mslk")


def autotune_use_cuda_graph() -> bool:
    """MSLK_AUTOTUNE_USE_CUDA_GRAPH (presence): benchmark autotune candidates in CUDA graphs."""
    return _present("MSLK_AUTOTUNE_USE_CUDA_GRAPH")


def autotune_collect_stats() -> bool:
    """MSLK_AUTOTUNE_COLLECT_STATS (presence): record timing statistics while autotuning."""
    return _present("MSLK_AUTOTUNE_COLLECT_STATS")


def rocm_force_fp8_fnuz() -> bool:
    """MSLK_ROCM_FORCE_FP8FNUZ_TYPE (presence): use FNUZ FP8 on gfx950, which defaults to OCP."""
    return _present("MSLK_ROCM_FORCE_FP8FNUZ_TYPE")


def flydsl_disable_jit() -> bool:
    """MSLK_FLYDSL_DISABLE_JIT=1: FlyDSL may only run kernels found in its cache."""
    return _truthy("MSLK_FLYDSL_DISABLE_JIT")


def flydsl_aot_workers() -> int | None:
    """MSLK_FLYDSL_AOT_WORKERS: worker processes for FlyDSL AOT compiles (None: unset/invalid)."""
    try:
        n = int(os.environ.get("MSLK_FLYDSL_AOT_WORKERS", ""))
    except ValueError:
        return None
    return n if n > 0 else None
