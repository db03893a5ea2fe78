"""mslk.utils.triton.fp8_utils: platform FP8 constants and Triton reinterpretation."""

import sys

import pytest
import torch

from mslk.utils.device import is_cuda, compute_capability_at_least
from mslk.utils.triton import fp8_utils

try:
    import triton
    import triton.language as tl
except ImportError:
    triton = tl = None


def test_constants_on_cuda_or_cpu():
    if torch.version.hip is not None:
        pytest.skip("OCP constants are for CUDA and CPU")
    dtype, tl_dtype, fmax, eps = fp8_utils.get_fp8_constants()
    assert dtype == torch.float8_e4m3fn and fmax == 448.0 and eps == 1e-12
    assert tl_dtype == (tl.float8e4nv if tl is not None else None)
    assert fmax == torch.finfo(dtype).max


def test_constants_on_fake_gfx942(fake_devices):
    fake_devices.set("rocm", caps=[(9, 4)], archs=["gfx942:sramecc+:xnack-"])
    dtype, tl_dtype, fmax, eps = fp8_utils.get_fp8_constants()
    assert dtype == torch.float8_e4m3fnuz and fmax == 240.0 and eps == 1e-12
    assert tl_dtype == (tl.float8e4b8 if tl is not None else None)


def test_constants_on_fake_gfx950_are_ocp(fake_devices):
    fake_devices.set("rocm", caps=[(9, 5)], archs=["gfx950"])
    assert fp8_utils.get_fp8_constants()[0] == torch.float8_e4m3fn


def test_without_triton(monkeypatch):
    # A None entry in sys.modules makes `import triton` raise ImportError.
    monkeypatch.setitem(sys.modules, "triton", None)
    monkeypatch.setitem(sys.modules, "triton.language", None)
    dtype, tl_dtype, fmax, _ = fp8_utils.get_fp8_constants()
    assert tl_dtype is None and isinstance(fmax, float)
    with pytest.raises(RuntimeError, match="needs Triton"):
        fp8_utils.reinterpret_fp8_type(torch.zeros(4, dtype=torch.uint8), None)


@pytest.mark.skipif(triton is None, reason="needs Triton")
def test_reinterpret_wraps_without_copy():
    t = torch.arange(8, dtype=torch.uint8)
    w = fp8_utils.reinterpret_fp8_type(t, tl.float8e4nv)
    assert w.dtype == tl.float8e4nv and w.base is t and w.data_ptr() == t.data_ptr()


if triton is not None:

    @triton.jit
    def _fp8_to_f32(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask).to(tl.float32), mask=mask)


@pytest.mark.skipif(triton is None or not is_cuda() or not compute_capability_at_least(8, 9),
                    reason="needs Triton on an FP8-capable CUDA GPU")
def test_reinterpreted_bytes_decode_as_e4m3_in_a_kernel():
    # Every byte pattern: the kernel must see exactly what torch's e4m3fn view decodes.
    raw = torch.arange(256, dtype=torch.int32).to(torch.uint8).cuda()
    out = torch.empty(256, dtype=torch.float32, device="cuda")
    _fp8_to_f32[(1,)](fp8_utils.reinterpret_fp8_type(raw, tl.float8e4nv), out, 256, BLOCK=256)
    want = raw.view(torch.float8_e4m3fn).float()
    torch.testing.assert_close(out, want, rtol=0, atol=0, equal_nan=True)
