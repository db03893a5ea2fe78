"""A fake accelerator for the runtime tests: lets a CPU-only machine exercise the CUDA and ROCm
branches of mslk.utils.device by patching the torch queries it makes."""

from __future__ import annotations

import types

import pytest
import torch


class FakeDevices:
    """Devices the patched torch.cuda reports. kind: "cuda", "rocm" or "none"."""

    def __init__(self, monkeypatch, kind="none", caps=((9, 0),), archs=("",), cuda="13.0"):
        self.mp = monkeypatch
        self.current = 0
        self.queried: list[int] = []  # device indices the code asked about
        self.set(kind, caps, archs, cuda)

    def set(self, kind, caps=((9, 0),), archs=("",), cuda="13.0"):
        self.caps, self.archs = list(caps), list(archs)
        mp = self.mp
        mp.setattr(torch.version, "hip", "7.1.0" if kind == "rocm" else None)
        mp.setattr(torch.version, "cuda", None if kind == "rocm" else cuda)
        mp.setattr(torch.cuda, "is_available", lambda: kind != "none")
        mp.setattr(torch.cuda, "current_device", lambda: self.current)
        mp.setattr(torch.cuda, "get_device_capability", self._capability)
        mp.setattr(torch.cuda, "get_device_properties", self._properties)
        return self

    def _index(self, dev):
        idx = self.current if dev is None else int(getattr(dev, "index", dev) or 0)
        self.queried.append(idx)
        return idx

    def _capability(self, dev=None):
        return self.caps[self._index(dev)]

    def _properties(self, dev=None):
        i = self._index(dev)
        return types.SimpleNamespace(gcnArchName=self.archs[i], major=self.caps[i][0])


@pytest.fixture
def fake_devices(monkeypatch):
    for var in ("MSLK_ROCM_FORCE_FP8FNUZ_TYPE",):
        monkeypatch.delenv(var, raising=False)
    return FakeDevices(monkeypatch)
