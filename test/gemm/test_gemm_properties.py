"""Property tests (hypothesis, CPU) of the GEMMs: f8f8bf16_rowwise of quantize_fp8_row outputs
against the float64 matmul of the dequantized operands (plus bias), and the BF16 grouped GEMM
with random M_sizes (empty groups, rows past the groups) against a loop of float64 matmuls."""

import pytest
import torch

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402

from mslk.quantize.triton.fp8_quantize import quantize_fp8_row  # noqa: E402
from test.gemm import fp8_gemm_reference as fp8_ref  # noqa: E402
from test.gemm.bf16_grouped_reference import BF16, assert_close, ref_stacked  # noqa: E402

PROPERTY = settings(max_examples=25, deadline=None, derandomize=True, database=None)
ops = torch.ops.mslk
seeds = st.integers(0, 2**31 - 1)


@PROPERTY
@given(m=st.integers(1, 40), n=st.integers(1, 40), k=st.integers(1, 300), seed=seeds,
       in_dtype=st.sampled_from([torch.bfloat16, torch.float32]), bias=st.sampled_from([None, torch.bfloat16, torch.float32]),
       fast=st.booleans(), mag=st.integers(-6, 6))
def test_f8f8bf16_rowwise_vs_dequantized_matmul(m, n, k, seed, in_dtype, bias, fast, mag):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(m, k, generator=g, dtype=torch.float64) * 2.0**mag).to(in_dtype)
    w = torch.randn(n, k, generator=g, dtype=torch.float64).to(in_dtype)
    xq, xs = quantize_fp8_row(x)
    wq, ws = quantize_fp8_row(w)
    b = None if bias is None else (torch.randn(n, generator=g, dtype=torch.float64) * 4).to(bias)
    out = ops.f8f8bf16_rowwise(xq, wq, xs, ws, b, fast)
    assert out.dtype == torch.bfloat16 and out.shape == (m, n)
    fp8_ref.check(out, xq, wq, xs, ws, b, fast)


@st.composite
def group_sizes(draw):
    sizes = draw(st.lists(st.integers(0, 12), min_size=1, max_size=6))
    if draw(st.booleans()):  # some empty groups for sure
        sizes[draw(st.integers(0, len(sizes) - 1))] = 0
    return sizes


@PROPERTY
@given(sizes=group_sizes(), extra=st.integers(0, 3), n=st.integers(1, 33), k=st.integers(1, 40), seed=seeds,
       ms_dtype=st.sampled_from([torch.int32, torch.int64]))
def test_bf16_grouped_stacked_vs_loop(sizes, extra, n, k, seed, ms_dtype):
    g = torch.Generator().manual_seed(seed)
    T, G = sum(sizes) + extra, len(sizes)
    x = torch.randn(T, k, generator=g, dtype=torch.float64).to(BF16)
    w = torch.randn(G, n, k, generator=g, dtype=torch.float64).to(BF16)
    y = ops.bf16bf16bf16_grouped_stacked(x, w, torch.tensor(sizes, dtype=ms_dtype))
    assert y.shape == (T, n) and y.dtype == BF16
    assert_close(y, ref_stacked(x, w, sizes), k)
    assert torch.count_nonzero(y[sum(sizes):]) == 0  # rows past the groups: zeros
