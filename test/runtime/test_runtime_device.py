"""mslk.utils.device: on the real machine, and on faked CUDA / ROCm / no-GPU devices."""

import pytest
import torch

from mslk.utils import device as d

GFX942 = "gfx942:sramecc+:xnack-"
GFX950 = "gfx950:sramecc+:xnack-"


def test_real_machine_is_consistent_with_torch():
    available = torch.cuda.is_available()
    assert d.is_cuda() == (available and torch.version.hip is None)
    assert d.is_rocm() == (available and torch.version.hip is not None)
    if not available:
        assert not d.compute_capability_in(0)
        assert not d.compute_capability_at_least(0)
        assert d.get_gfx_arch_name() == ""
        assert not d.is_gfx942() and not d.is_gfx950()
        assert d.supports_float8_fnuz() is False


@pytest.mark.skipif(not (torch.cuda.is_available() and torch.version.hip is None), reason="CUDA")
def test_real_cuda_device():
    major, minor = torch.cuda.get_device_capability()
    assert d.is_cuda() and not d.is_rocm()
    assert d.compute_capability_at_least(major, minor)
    assert d.compute_capability_in(major, major)
    assert not d.compute_capability_at_least(major + 1)
    assert not d.compute_capability_in(major + 1)
    assert d.get_gfx_arch_name() == "" and not d.gfx_arch_in(["gfx"])
    assert d.supports_float8_fnuz() is False
    if (major, minor) == (9, 0):  # H100 / H200
        assert d.compute_capability_at_least(9) and d.compute_capability_in(9, 9)
        assert d.compute_capability_in(8) and not d.compute_capability_in(10, 12)


def test_cuda_version_of_this_torch():
    if torch.version.cuda is None:
        assert not d.cuda_version_at_least(0)
    else:
        major = int(torch.version.cuda.split(".")[0])
        assert d.cuda_version_at_least(major) and not d.cuda_version_at_least(major + 1)


def test_cuda_version_is_toolkit_not_device(fake_devices):
    fake_devices.set("none", cuda="12.8")  # no device: still answers about the toolkit
    assert d.cuda_version_at_least(12) and not d.cuda_version_at_least(13)
    fake_devices.set("rocm")
    assert not d.cuda_version_at_least(1)


def test_fake_sm90(fake_devices):
    fake_devices.set("cuda", caps=[(9, 0)])
    assert d.is_cuda() and not d.is_rocm()
    assert d.compute_capability_in(9) and d.compute_capability_in(8, 9)
    assert d.compute_capability_in(9, 9) and d.compute_capability_in(0)
    assert not d.compute_capability_in(10) and not d.compute_capability_in(7, 8)
    assert d.compute_capability_at_least(9) and d.compute_capability_at_least(8, 9)
    assert not d.compute_capability_at_least(9, 1) and not d.compute_capability_at_least(10)
    assert d.get_gfx_arch_name() == "" and not d.is_gfx942()
    assert d.supports_float8_fnuz() is False


def test_queries_follow_the_current_device(fake_devices):
    # No process-wide cache: switching devices switches the answers.
    fake_devices.set("cuda", caps=[(8, 0), (10, 0)])
    assert not d.compute_capability_at_least(9)
    fake_devices.current = 1
    assert d.compute_capability_at_least(10) and d.compute_capability_in(10, 10)
    fake_devices.current = 0
    assert d.compute_capability_in(8, 8)
    assert set(fake_devices.queried) == {0, 1}


def test_fake_gfx942(fake_devices):
    fake_devices.set("rocm", caps=[(9, 4)], archs=[GFX942])
    assert d.is_rocm() and not d.is_cuda()
    assert d.get_gfx_arch_name() == GFX942
    assert d.gfx_arch_in(["gfx942"]) and d.gfx_arch_in(("gfx90a", "gfx942"))
    assert d.gfx_arch_in("gfx942")  # a bare string is one name, not characters
    assert not d.gfx_arch_in(["gfx950", "gfx90a"]) and not d.gfx_arch_in([])
    assert d.is_gfx942() and not d.is_gfx950()
    assert d.compute_capability_in(9)  # the tuple is read on ROCm too
    assert d.supports_float8_fnuz() is True


def test_fake_gfx950_is_ocp_unless_forced(fake_devices, monkeypatch):
    fake_devices.set("rocm", caps=[(9, 5)], archs=[GFX950])
    assert d.is_gfx950() and not d.is_gfx942()
    assert d.supports_float8_fnuz() is False
    monkeypatch.setenv("MSLK_ROCM_FORCE_FP8FNUZ_TYPE", "1")
    assert d.supports_float8_fnuz() is True


def test_old_rocm_arch_has_no_fp8(fake_devices):
    fake_devices.set("rocm", caps=[(9, 0)], archs=["gfx90a:sramecc+:xnack-"])
    with pytest.raises(RuntimeError, match="gfx90a"):
        d.supports_float8_fnuz()
    assert d.supports_float8_fnuz(throw_on_hip_incompatibility=False) is False


def test_no_device_never_raises(fake_devices, monkeypatch):
    fake_devices.set("none")
    assert not d.is_cuda() and not d.is_rocm()
    assert not d.compute_capability_in(0) and not d.compute_capability_at_least(0)
    assert d.get_gfx_arch_name() == "" and not d.gfx_arch_in(["gfx942"])
    assert d.supports_float8_fnuz() is False

    def broken():
        raise RuntimeError("driver mismatch")

    monkeypatch.setattr(torch.cuda, "is_available", broken)
    assert not d.is_cuda() and not d.compute_capability_at_least(0)


def test_property_errors_give_empty_arch(fake_devices, monkeypatch):
    fake_devices.set("rocm", caps=[(9, 4)], archs=[GFX942])

    def broken(dev=None):
        raise RuntimeError("no properties")

    monkeypatch.setattr(torch.cuda, "get_device_properties", broken)
    assert d.get_gfx_arch_name() == "" and not d.is_gfx942()
