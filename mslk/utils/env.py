"""The runtime environment variables MSLK's Python layer reads, in one place.

Every function reads os.environ when called (not at import), so tests and long-lived processes
see changes. MSLK_PYTHON_ONLY is read by mslk._native (before the library loads); the C++
library's variables are the rows of MSLK_ENV_VARS in include/mslk/utils/env.h.
"""

from __future__ import annotations

import os
from typing import NamedTuple


class Var(NamedTuple):
    name: str
    values: str  # what it accepts
    default: str  # what unset means
    meaning: str


# Every variable this module and mslk._native read. README's table of variables is generated from
# this list and env.h (tools/env_table.py); test/runtime/test_env_vars.py checks both against the
# source. A variable the C++ library also reads takes its env.h row in the README.
PYTHON_VARS: tuple[Var, ...] = (
    Var("MSLK_PYTHON_ONLY", "1 (any value but 0 / false / no)", "0",
        "import the Python layer without loading libmslk.so (no native ops at all)"),
    Var("MSLK_CACHE_DIR", "a folder", "$HOME/.mslk", "cache folder (autotune results)"),
    Var("MSLK_AUTOTUNE_USE_CUDA_GRAPH", "presence", "off", "benchmark autotune candidates in CUDA graphs"),
    Var("MSLK_AUTOTUNE_COLLECT_STATS", "presence", "off", "collect timing statistics while autotuning"),
    Var("MSLK_ROCM_FORCE_FP8FNUZ_TYPE", "presence", "off", "FNUZ FP8 on gfx950 (ROCm), which defaults to OCP"),
    Var("MSLK_FLYDSL_DISABLE_JIT", "1, true, yes, on", "off", "FlyDSL may only run kernels found in its cache"),
    Var("MSLK_FLYDSL_AOT_WORKERS", "a whole number > 0", "FlyDSL's own", "worker processes for FlyDSL AOT compiles"),
)

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
