"""Ahead-of-time compilation of MSLK's FlyDSL kernels into a FlyDSL runtime cache.

Usage: python -m mslk.flydsl.aot CACHE_DIR
"""

from __future__ import annotations

import importlib
import itertools
import os
import sys
from typing import Any

from mslk.flydsl.common import require_flydsl
from mslk.utils import env

# Modules that expose AOT_CONFIGS (a list of (kernel_name, config) pairs). Empty, as upstream.
_AOT_KERNEL_MODULES: list[str] = []
# ROCm targets that AOT artifacts are built for.
_AOT_ARCHS: tuple[str, ...] = ("gfx942", "gfx950")


def collect_aot_jobs() -> list[tuple[str, dict[str, Any], str]]:
    """Every (kernel, config, arch) triple: registered configs x target archs."""
    configs: list[tuple[str, dict[str, Any]]] = []
    for name in _AOT_KERNEL_MODULES:
        configs.extend(getattr(importlib.import_module(name), "AOT_CONFIGS", []))
    return [(k, dict(cfg), arch) for (k, cfg), arch in itertools.product(configs, _AOT_ARCHS)]


def default_workers() -> int:
    """MSLK_FLYDSL_AOT_WORKERS, else the CPUs this process may use, capped at 32."""
    n = env.flydsl_aot_workers()
    if n is not None:
        return n
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 32))


def compile_aot(cache_dir: str) -> None:
    """Compile every collected job into cache_dir (nothing to do while the registry is empty)."""
    jobs = collect_aot_jobs()
    if not jobs:
        print("mslk.flydsl.aot: no FlyDSL kernels are registered for AOT; nothing to compile.")
        return
    require_flydsl("mslk.flydsl.aot.compile_aot")
    raise RuntimeError("mslk.flydsl.aot: FlyDSL compilation is not part of this build")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m mslk.flydsl.aot CACHE_DIR")
    compile_aot(sys.argv[1])
