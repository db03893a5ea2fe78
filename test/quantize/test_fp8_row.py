"""quantize_fp8_row: float64-bounded error, exact bits against the float32 formula, CPU == CUDA."""

import pytest
import torch

from mslk.quantize.triton.fp8_quantize import quantize_fp8_row, triton_quantize_fp8_row
from test.conftest import requires_cuda
from test.quantize.fp8_reference import FP8_MAX, check_dequant_error, quantize_tiles, rand

DTYPES = [torch.bfloat16, torch.float16, torch.float32]
SHAPES = [(1, 1), (1, 8192), (7, 1000), (3, 5, 127), (2, 3, 4, 64), (5, 16), (33, 4104), (4, 70000), (300,)]


def expected_row(a, eps=1 / 512, ub=None):
    x2 = a.reshape(-1, a.shape[-1])
    xq, scale = quantize_tiles(x2, 1, max(a.shape[-1], 1), eps, ub)
    return xq.reshape(a.shape), scale.reshape(a.shape[:-1])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_row_matches_reference(device, dtype, shape):
    a = rand(shape, dtype, device)
    xq, scale = quantize_fp8_row(a)
    assert xq.dtype == torch.float8_e4m3fn and scale.dtype == torch.float32
    assert xq.shape == a.shape and scale.shape == a.shape[:-1]
    assert xq.device.type == device
    exq, escale = expected_row(a)
    torch.testing.assert_close(scale.cpu(), escale, rtol=0, atol=0)
    assert torch.equal(xq.cpu().view(torch.uint8), exq.view(torch.uint8))
    check_dequant_error(xq, scale[..., None], a)


@pytest.mark.parametrize("dtype", DTYPES)
def test_row_noncontiguous(device, dtype):
    base = rand((6, 1030), dtype, device)
    a = base[:, 3:1027]  # row stride 1030, misaligned start
    xq, scale = quantize_fp8_row(a)
    exq, escale = expected_row(a)
    assert torch.equal(xq.cpu().view(torch.uint8), exq.view(torch.uint8))
    torch.testing.assert_close(scale.cpu(), escale, rtol=0, atol=0)
    b = rand((4, 8, 256), dtype, device).permute(1, 0, 2)  # leading dims permuted, last dim stride 1
    xq, scale = quantize_fp8_row(b)
    exq, escale = expected_row(b)
    assert torch.equal(xq.cpu().view(torch.uint8), exq.view(torch.uint8))
    assert scale.shape == (8, 4)


def test_row_scale_ub_eps(device):
    a = rand((8, 512), torch.bfloat16, device, scale=50.0)
    ub = torch.tensor([3.0], device=device)
    xq, scale = quantize_fp8_row(a, scale_ub=ub)
    exq, escale = expected_row(a, ub=3.0)
    assert torch.all(scale <= 3.0 / FP8_MAX + 1e-9)
    assert torch.equal(xq.cpu().view(torch.uint8), exq.view(torch.uint8))
    check_dequant_error(xq, scale[..., None], a)
    tiny = rand((4, 64), torch.float32, device, scale=1e-6)
    _, s_default = quantize_fp8_row(tiny)
    torch.testing.assert_close(s_default.cpu(), torch.full((4,), 1 / 512 / FP8_MAX))
    _, s_eps = quantize_fp8_row(tiny, eps_opt=1e-12)
    torch.testing.assert_close(s_eps.cpu(), tiny.abs().amax(-1).cpu() / FP8_MAX)


@pytest.mark.parametrize("zs_dtype", [torch.int32, torch.int64])
def test_row_zero_start_index_m(device, zs_dtype):
    a = rand((3, 9, 136), torch.bfloat16, device)
    zs = torch.tensor([0, 4, 9], dtype=zs_dtype, device=device)
    xq, scale = quantize_fp8_row(a, zero_start_index_M=zs)
    exq, escale = expected_row(a)
    for b, n in enumerate([0, 4, 9]):
        assert torch.equal(xq[b, :n].cpu().view(torch.uint8), exq[b, :n].view(torch.uint8))
        assert torch.all(xq[b, n:].cpu().float() == 0)
        torch.testing.assert_close(scale[b, :n].cpu(), escale[b, :n], rtol=0, atol=0)
        torch.testing.assert_close(scale[b, n:].cpu(), torch.full((9 - n,), 1 / 512 / FP8_MAX))


@pytest.mark.parametrize("K,align", [(100, 16), (128, 64), (5, 8), (4096, 4096), (1000, 3)])
def test_row_align_rows_to(device, K, align):
    a = rand((5, K), torch.bfloat16, device)
    xq, scale = quantize_fp8_row(a, align_rows_to=align)
    k_out = -(-K // align) * align
    assert xq.shape == (5, k_out) and scale.shape == (5,)
    exq, _ = expected_row(a)
    assert torch.equal(xq[:, :K].cpu().view(torch.uint8), exq.view(torch.uint8))
    assert torch.all(xq[:, K:].cpu().view(torch.uint8) == 0)


def test_row_empty(device):
    xq, scale = quantize_fp8_row(torch.empty(0, 64, device=device, dtype=torch.bfloat16))
    assert xq.shape == (0, 64) and scale.shape == (0,)
    xq, scale = quantize_fp8_row(torch.empty(3, 0, device=device, dtype=torch.bfloat16))
    assert xq.shape == (3, 0)
    torch.testing.assert_close(scale.cpu(), torch.full((3,), 1 / 512 / FP8_MAX))


def test_row_inf_nan(device):
    a = rand((4, 256), torch.bfloat16, device)
    a[0, 5] = float("nan")
    a[1, 7] = float("inf")
    a[2, 9] = -float("inf")
    xq, scale = quantize_fp8_row(a)
    f = xq.float().cpu()
    assert torch.isnan(f[0, 5]) and not torch.isnan(f[0, :5]).any()  # NaN stays local to its element
    assert torch.isfinite(scale[0]).item() and torch.equal(xq[3].cpu().view(torch.uint8),
                                                           expected_row(a[3:4])[0][0].view(torch.uint8))
    assert torch.isinf(scale[1]).item()  # amax = inf gives an inf scale
    ub = torch.tensor([2.0], device=device)
    xq, scale = quantize_fp8_row(a, scale_ub=ub)
    assert xq.float()[1, 7].item() == FP8_MAX and xq.float()[2, 9].item() == -FP8_MAX  # saturated


# (shape, layout) of test_row_cuda_equals_cpu: every schedule's kernels, and the edges of the
# warp-team kernel (16 KB a warp at most, 4 warps a CTA; 1, 2 or 4 warps a row by row size).
ROW_CASES = [
    ((8192, 8192), "dense"),  # bf16 rows of exactly 16 KB: 4 warps a row; fp32 32 KB rows: 2 warps a row
    ((3, 131072), "dense"),
    ((1, 7), "dense"),  # not 16-byte vectorizable: the two-pass kernel
    ((257, 4100), "dense"),
    ((4096, 7168), "dense"),
    ((1, 4104), "dense"),  # one row; K % 256 != 0: masked tail vectors
    ((257, 2056), "strided"),  # row stride > K; the last CTA holds one row
    ((1, 4096), "strided"),  # fp32 row of exactly 16 KB
    ((3, 50, 1000), "zero_start"),  # matrices with none, half and all rows valid
    ((33, 1000), "align3"),  # out_stride 1002: padding and byte stores
    ((33, 4104), "align128"),  # out_stride 4224: padding, vector stores
    ((3, 37, 2048), "zero_start"),  # whole-vector rows with zeroed rows; 37 rows: a part-filled CTA
    ((13, 4096), "strided"),  # row stride > K; fp32 rows of exactly 16 KB
    ((37, 16384), "dense"),  # 32 KB bf16 rows, few of them: 4 warps a row (doubled); fp32 64 KB rows: 4
    ((5, 12000), "strided"),  # 24 KB bf16 rows on 4 warps of 8 KB: the third partly, the fourth wholly masked; fp32 48 KB
    ((3, 6, 16392), "zero_start"),  # bf16 rows just past 32 KB: teams of four; fp32 past 64 KB: fallback
    ((17, 8200), "align128"),  # bf16 rows just past 16 KB, with padding (written by the team's first warp)
]


def row_case(shape, layout, dtype):
    """CUDA input and quantize_fp8_row kwargs of one ROW_CASES entry."""
    K = shape[-1]
    if layout == "strided":  # rows K + 24 apart, starting 8 elements in (16-byte aligned)
        a = rand((*shape[:-1], K + 24), dtype, "cuda")[..., 8:8 + K]
    else:
        a = rand(shape, dtype, "cuda")
    kw = {}
    if layout == "zero_start":
        kw["zero_start_index_M"] = torch.tensor([0, shape[1] // 2, shape[1]], device="cuda")
    elif layout.startswith("align"):
        kw["align_rows_to"] = int(layout[len("align"):])
    return a, kw


@requires_cuda
@pytest.mark.parametrize("schedule", ["auto", "oneshot", "staged", "bulk", "warp"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,layout", ROW_CASES)
def test_row_cuda_equals_cpu(dtype, shape, layout, schedule, monkeypatch):
    monkeypatch.setenv("MSLK_FP8_SCHEDULE", schedule)
    a, kw = row_case(shape, layout, dtype)
    a[(0,) * a.dim()] = float("nan")
    xq, scale = quantize_fp8_row(a, **kw)
    xq_c, scale_c = quantize_fp8_row(a.cpu(), **{k: v.cpu() if torch.is_tensor(v) else v for k, v in kw.items()})
    assert xq.shape == xq_c.shape
    assert torch.equal(torch.isnan(xq.float().cpu()), torch.isnan(xq_c.float()))
    fin = ~torch.isnan(xq_c.float())
    assert torch.equal(xq.cpu().view(torch.uint8)[fin], xq_c.view(torch.uint8)[fin])
    assert torch.equal(scale.cpu(), scale_c)


@requires_cuda
@pytest.mark.parametrize("team", ["1", "2", "4"])
@pytest.mark.parametrize("shape,layout", [((37, 4104), "dense"), ((9, 8200), "align128"), ((3, 37, 2048), "zero_start")])
def test_row_forced_team_equals_cpu(shape, layout, team, monkeypatch):
    """MSLK_FP8_ROW_TEAM forces the warps a row (where they hold it): every team size gives the CPU's bits."""
    monkeypatch.setenv("MSLK_FP8_ROW_TEAM", team)
    a, kw = row_case(shape, layout, torch.bfloat16)
    xq, scale = quantize_fp8_row(a, **kw)
    xq_c, scale_c = quantize_fp8_row(a.cpu(), **{k: v.cpu() if torch.is_tensor(v) else v for k, v in kw.items()})
    assert torch.equal(xq.cpu().view(torch.uint8), xq_c.view(torch.uint8))
    assert torch.equal(scale.cpu(), scale_c)


@requires_cuda
def test_row_output_device_and_poison():
    a = rand((64, 1024), torch.bfloat16, "cuda")
    xq, scale = quantize_fp8_row(a, output_device=torch.device("cpu"))
    assert xq.device.type == "cpu" and scale.device.type == "cpu"
    # every output element is written: fill the caching allocator's blocks with poison first
    torch.full((64 * 1024,), 0x7F, dtype=torch.uint8, device="cuda")
    xq2, scale2 = triton_quantize_fp8_row(a)
    assert torch.equal(xq2.cpu().view(torch.uint8), xq.view(torch.uint8))
    assert torch.equal(scale2.cpu(), scale)


def test_row_use_triton_false_same_result(device):
    a = rand((9, 300), torch.bfloat16, device)
    x1, s1 = quantize_fp8_row(a, use_triton=True)
    x2, s2 = quantize_fp8_row(a, use_triton=False)
    assert torch.equal(x1.view(torch.uint8), x2.view(torch.uint8)) and torch.equal(s1, s2)
