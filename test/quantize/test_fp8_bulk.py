"""The bulk-copy ring and warp-per-row schedules of the row and K-group quantizers
(MSLK_FP8_SCHEDULE=bulk / warp, csrc/quantize/kernels/fp8_bulk.cu / fp8_warp_rows.cu) through the
argument paths of the device tests: zero_start_index_M rows, row padding (align_rows_to), the
m_sizes scale layout, strided input with scale_ub; and rows too long for them (48 KB / 16 KB),
which must fall back to the register kernel."""

import pytest
import torch

from mslk.quantize.triton.fp8_quantize import quantize_fp8_group, quantize_fp8_row
from test.conftest import requires_cuda
from test.quantize import test_fp8_block_group as bg
from test.quantize import test_fp8_row as row

pytestmark = requires_cuda


@pytest.fixture(autouse=True, params=["bulk", "warp"])
def _schedule(request, monkeypatch):
    monkeypatch.setenv("MSLK_FP8_SCHEDULE", request.param)


@pytest.mark.parametrize("zs_dtype", [torch.int32, torch.int64])
def test_zero_start_index_m(zs_dtype):
    row.test_row_zero_start_index_m("cuda", zs_dtype)


@pytest.mark.parametrize("K,align", [(128, 64), (4096, 4096), (1000, 3)])
def test_align_rows_to(K, align):
    row.test_row_align_rows_to("cuda", K, align)


@pytest.mark.parametrize("m_sizes", [[3, 0, 5, 1], [0, 0, 9]])
@pytest.mark.parametrize("k_major", [False, True])
def test_group_m_sizes_layout(m_sizes, k_major):
    bg.test_group_m_sizes_layout("cuda", m_sizes, k_major)


def test_group_strided_and_ub():
    bg.test_group_strided_and_ub("cuda")


@pytest.mark.parametrize("K", [24576, 24584, 40000])  # 48 KB rows (the ring's limit) and past it
def test_long_rows_match_cpu(K):
    a = torch.randn(37, K, device="cuda", dtype=torch.bfloat16)
    for fn in (quantize_fp8_row, lambda t: quantize_fp8_group(t, 8 if K % 128 else 128)):
        g, c = fn(a), fn(a.cpu())
        assert torch.equal(g[0].cpu().view(torch.uint8), c[0].view(torch.uint8))
        assert torch.equal(g[1].cpu(), c[1])
