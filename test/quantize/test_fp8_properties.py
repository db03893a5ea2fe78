"""Property tests (hypothesis, CPU) of the FP8 row / block / group quantizers: for any shape,
dtype, magnitude and scale_ub, dequantizing gives back x within E4M3's rounding bound
(CONTRACTS.md: scale = clamp(amax)/448, xq = sat(x / scale)), and the dequantize ops compute
float(xq) * scale rounded once to BF16."""

import pytest
import torch

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402

from mslk.quantize.triton.fp8_quantize import (  # noqa: E402
    dequantize_fp8_block,
    dequantize_fp8_row,
    quantize_fp8_block,
    quantize_fp8_group,
    quantize_fp8_row,
)
from test.quantize.fp8_reference import check_dequant_error, rand  # noqa: E402

PROPERTY = settings(max_examples=25, deadline=None, derandomize=True, database=None)
E4M3 = torch.float8_e4m3fn
dtypes = st.sampled_from([torch.bfloat16, torch.float16, torch.float32])
seeds = st.integers(0, 2**31 - 1)
# Scales of the data: 2^-8 .. 2^6 times N(0, 3) with a per-element exponent spread of 2^-6 .. 2^3.
magnitudes = st.integers(-8, 6)
scale_ubs = st.one_of(st.none(), st.floats(0.05, 50.0))


def _data(shape, dtype, seed, mag, zero_row):
    torch.manual_seed(seed)
    x = rand(shape, torch.float64, "cpu") * 2.0**mag
    if zero_row and x.numel():
        x.view(-1, shape[-1])[0] = 0  # an all-zero row: the eps floor of the scale
    return x.to(dtype)


def _ub(v):
    return None if v is None else torch.tensor([v], dtype=torch.float32)


def _check_bf16_product(deq, xq, scale_full):
    """dequantize_*: float(xq) * scale (float32), one RNE rounding to BF16 (unit roundoff 2^-8)."""
    assert deq.dtype == torch.bfloat16 and deq.shape == xq.shape
    want = xq.double() * scale_full.double()
    assert ((deq.double() - want).abs() <= want.abs() * 2.0**-8 + 1e-38).all()


@PROPERTY
@given(lead=st.lists(st.integers(1, 3), max_size=2), m=st.integers(1, 9), k=st.integers(1, 70), dtype=dtypes,
       seed=seeds, mag=magnitudes, zero_row=st.booleans(), ub=scale_ubs)
def test_row_round_trip(lead, m, k, dtype, seed, mag, zero_row, ub):
    shape = (*lead, m, k)
    x = _data(shape, dtype, seed, mag, zero_row)
    xq, scale = quantize_fp8_row(x, scale_ub=_ub(ub))
    assert xq.dtype == E4M3 and xq.shape == shape
    assert scale.dtype == torch.float32 and scale.shape == shape[:-1]
    assert (scale > 0).all() and torch.isfinite(scale).all()
    if ub is not None:
        assert (scale <= torch.tensor(ub, dtype=torch.float32) / 448 * (1 + 2**-23)).all()
    full = scale[..., None].expand(shape)
    check_dequant_error(xq.reshape(-1, k), full.reshape(-1, k), x.reshape(-1, k))
    _check_bf16_product(dequantize_fp8_row(xq, scale), xq, full)


@PROPERTY
@given(m=st.integers(1, 40), k=st.integers(1, 40), bm=st.integers(1, 16), bk=st.integers(1, 16), dtype=dtypes,
       seed=seeds, mag=magnitudes, zero_row=st.booleans(), ub=scale_ubs)
def test_block_round_trip(m, k, bm, bk, dtype, seed, mag, zero_row, ub):
    x = _data((m, k), dtype, seed, mag, zero_row)
    xq, scale = quantize_fp8_block(x, bm, bk, scale_ub=_ub(ub))
    assert xq.dtype == E4M3 and xq.shape == (m, k)
    assert scale.dtype == torch.float32 and scale.shape == (-(-m // bm), -(-k // bk))
    full = scale.repeat_interleave(bm, 0)[:m].repeat_interleave(bk, 1)[:, :k]
    check_dequant_error(xq, full, x)
    _check_bf16_product(dequantize_fp8_block(xq, scale, bm, bk), xq, full)


@PROPERTY
@given(lead=st.lists(st.integers(1, 3), max_size=2), m=st.integers(1, 9), groups=st.integers(1, 6),
       g=st.sampled_from([1, 2, 8, 16, 32, 128]), dtype=dtypes, seed=seeds, mag=magnitudes, zero_row=st.booleans(),
       ub=scale_ubs)
def test_group_round_trip(lead, m, groups, g, dtype, seed, mag, zero_row, ub):
    shape = (*lead, m, groups * g)
    x = _data(shape, dtype, seed, mag, zero_row)
    xq, scale = quantize_fp8_group(x, g, scale_ub=_ub(ub))
    assert xq.dtype == E4M3 and xq.shape == shape
    assert scale.dtype == torch.float32 and scale.shape == (*shape[:-1], groups)
    full = scale.repeat_interleave(g, -1)
    check_dequant_error(xq.reshape(-1, shape[-1]), full.reshape(-1, shape[-1]), x.reshape(-1, shape[-1]))
