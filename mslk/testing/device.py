"""Skip decorators keyed on the device, for unittest and pytest alike.

Each factory checks the device when it is called (at decoration, like unittest.skipUnless) and
returns a decorator. A skipped item gets unittest's skip (TestCase classes and methods, and plain
functions under any runner) and, when pytest is running, a pytest skip mark too: that one also
covers plain pytest classes and skips before fixtures are set up (a fixture that allocates on
"cuda" must not run on a CPU-only machine).
"""

from __future__ import annotations

import sys
import unittest
from typing import Callable

from mslk.utils import device


def _skip_unless(condition: bool, reason: str) -> Callable:
    def decorate(item):
        if condition:
            return item
        item = unittest.skip(reason)(item)
        pytest = sys.modules.get("pytest")  # only when pytest is the runner; never import it
        if pytest is not None:
            item = pytest.mark.skip(reason=reason)(item)
        return item

    return decorate


def skipUnlessCuda() -> Callable:
    """Run only on an NVIDIA CUDA device (not ROCm, not CPU)."""
    return _skip_unless(device.is_cuda(), "requires an NVIDIA CUDA device")


def skipUnlessRocm() -> Callable:
    """Run only on an AMD ROCm device."""
    return _skip_unless(device.is_rocm(), "requires an AMD ROCm device")


def skipUnlessCudaCapability(major_min, major_max=None, *, minor_min=0) -> Callable:
    """On CUDA, run only when major_min[.minor_min] <= capability and major <= major_max.

    Transparent on ROCm; without any GPU the capability cannot be met, so it skips.
    """
    if major_max is None:
        ok = device.compute_capability_at_least(major_min, minor_min)
        want = f"sm_{major_min}{minor_min}+"
    else:
        ok = device.compute_capability_in(major_min, major_max) and (
            device.compute_capability_at_least(major_min, minor_min)
        )
        want = f"sm_{major_min}{minor_min}..sm_{major_max}x"
    return _skip_unless(device.is_rocm() or ok, f"requires CUDA compute capability {want}")


def skipUnlessCudaVersion(major_min: int) -> Callable:
    """Run only when torch was built with CUDA toolkit >= major_min. Transparent on ROCm."""
    return _skip_unless(
        device.is_rocm() or device.cuda_version_at_least(major_min),
        f"requires torch built with CUDA >= {major_min}",
    )


def skipUnlessGfxArch(arch: str, *more_archs: str) -> Callable:
    """On ROCm, run only on the named gfx targets. Transparent on CUDA."""
    archs = (arch, *more_archs)
    return _skip_unless(
        device.is_cuda() or device.gfx_arch_in(archs),
        f"requires ROCm arch in {', '.join(archs)}",
    )
