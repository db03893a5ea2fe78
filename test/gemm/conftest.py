"""Fixtures shared by the GEMM tests."""

import pytest


@pytest.fixture(params=["device", "host"])
def grouped_kernel(request, monkeypatch):
    """The path of the FP8 grouped GEMMs along M (rowwise and groupwise): "device", the CUTLASS
    grouped kernel with the sizes on the GPU (the default on CUDA); "host", the sizes read to the
    host and one GEMM a group (MSLK_FP8_GROUPED_KERNEL=host). On CPU both run the reference."""
    if request.param == "host":
        monkeypatch.setenv("MSLK_FP8_GROUPED_KERNEL", "host")
    else:
        monkeypatch.delenv("MSLK_FP8_GROUPED_KERNEL", raising=False)
    return request.param
