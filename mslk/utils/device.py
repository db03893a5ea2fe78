"""What accelerator the process is running on.

Every function asks torch about the *current* device at call time: no caches, so a process that
switches devices (torch.cuda.set_device) or a machine without any GPU gets the right answer.
Without a usable device the predicates return False (or ""), never raise.
"""

from __future__ import annotations

from typing import Iterable

import torch

from mslk.utils import env


def _device_available() -> bool:
    try:
        return torch.cuda.is_available()
    except Exception:  # broken driver installs raise instead of answering False
        return False


def _capability() -> tuple[int, int] | None:
    """(major, minor) of the current device; ROCm reports e.g. (9, 4) for gfx942."""
    if not _device_available():
        return None
    try:
        return tuple(torch.cuda.get_device_capability(torch.cuda.current_device()))
    except Exception:
        return None


def is_cuda() -> bool:
    """An NVIDIA CUDA build of torch with a usable device."""
    return torch.version.cuda is not None and torch.version.hip is None and _device_available()


def is_rocm() -> bool:
    """A HIP build of torch with a usable AMD device."""
    return torch.version.hip is not None and _device_available()


def compute_capability_in(major_min: int, major_max: int | None = None) -> bool:
    """major_min <= major <= major_max (no upper bound when major_max is None)."""
    cap = _capability()
    if cap is None:
        return False
    major = cap[0]
    return major >= major_min and (major_max is None or major <= major_max)


def compute_capability_at_least(major_min: int, minor_min: int = 0) -> bool:
    cap = _capability()
    return cap is not None and cap >= (major_min, minor_min)


def cuda_version_at_least(major_min: int) -> bool:
    """The CUDA toolkit torch was built with (not the driver, not the device)."""
    version = torch.version.cuda
    if not version:
        return False
    try:
        return int(version.split(".")[0]) >= major_min
    except ValueError:
        return False


def get_gfx_arch_name() -> str:
    """gcnArchName of the current ROCm device (e.g. "gfx942:sramecc+:xnack-"), else ""."""
    if not is_rocm():
        return ""
    try:
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        return str(getattr(props, "gcnArchName", "") or "")
    except Exception:
        return ""


def gfx_arch_in(arch_list: Iterable[str]) -> bool:
    """True when any name in arch_list is a substring of the device's gcnArchName."""
    if isinstance(arch_list, str):  # a bare "gfx942" would otherwise match per character
        arch_list = (arch_list,)
    name = get_gfx_arch_name()
    return bool(name) and any(arch and arch in name for arch in arch_list)


def is_gfx942() -> bool:
    """AMD MI300-class (CDNA3)."""
    return gfx_arch_in(("gfx942",))


def is_gfx950() -> bool:
    """AMD MI350-class (CDNA4)."""
    return gfx_arch_in(("gfx950",))


def supports_float8_fnuz(throw_on_hip_incompatibility: bool = True) -> bool:
    """Whether the active ROCm target's FP8 is the FNUZ flavour (e4m3fnuz, max 240).

    gfx942: FNUZ. gfx950: OCP FP8 (e4m3fn) unless MSLK_ROCM_FORCE_FP8FNUZ_TYPE is set.
    CUDA and CPU: always OCP, so False. ROCm targets older than gfx942 have no FP8 at all:
    RuntimeError, or False when throw_on_hip_incompatibility is False.
    """
    if not is_rocm():
        return False
    if is_gfx942():
        return True
    if is_gfx950():
        return env.rocm_force_fp8_fnuz()
    cap = _capability()
    if cap is not None and cap < (9, 4):
        if throw_on_hip_incompatibility:
            raise RuntimeError(
                f"mslk: FP8 is not supported on ROCm arch {get_gfx_arch_name() or 'unknown'} "
                "(needs gfx942 or newer)"
            )
        return False
    return False  # newer (e.g. RDNA4) ROCm targets use OCP FP8
