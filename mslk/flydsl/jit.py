"""FlyDSL JIT entry points: runtime-cache setup and compile-once launching."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

from mslk.flydsl.common import require_flydsl
from mslk.utils import env

# Where a ROCm wheel bundles precompiled (AOT) FlyDSL kernels. Absent in this build.
AOT_ARTIFACTS_DIR = Path(__file__).resolve().parent / "aot_artifacts"


def configure_runtime_cache() -> None:
    """Point FlyDSL at bundled AOT artifacts and apply MSLK_FLYDSL_DISABLE_JIT.

    Only FlyDSL's own variables are touched, and a user's FLYDSL_RUNTIME_CACHE_DIR wins.
    """
    if AOT_ARTIFACTS_DIR.is_dir() and not os.environ.get("FLYDSL_RUNTIME_CACHE_DIR"):
        os.environ["FLYDSL_RUNTIME_CACHE_DIR"] = str(AOT_ARTIFACTS_DIR)
    if env.flydsl_disable_jit():
        os.environ["FLYDSL_RUNTIME_RUN_ONLY"] = "1"


def run_compiled(launcher: Callable[..., Any], *args: Any) -> None:
    """Compile `launcher` once and launch it; raises here, where FlyDSL cannot exist."""
    require_flydsl("mslk.flydsl.jit.run_compiled")
    raise RuntimeError("mslk.flydsl.jit.run_compiled: FlyDSL kernels are not part of this build")


# The spec has importing this module configure the cache (FlyDSL reads it when it loads).
configure_runtime_cache()
