"""f8f8bf16_rowwise and its single-GEMM variants against float64 math; the CPU reference's
exact rounding rule; CPU == CUDA within tolerance."""

import pytest
import torch

from mslk.gemm.triton.fp8_gemm import matmul_fp8_row
from test.conftest import requires_cuda
from test.gemm.fp8_gemm_reference import FP8, accum_bound, check, exact_cpu, rand_fp8, rand_scale

ops = torch.ops.mslk
SHAPES = [(1, 8, 16), (1, 24, 40), (7, 40, 100), (33, 72, 264), (130, 136, 512), (257, 256, 128), (5, 3, 1)]


def bias_of(kind, n, device):
    if kind is None:
        return None
    return (torch.randn(n, dtype=torch.float64) * 4).to(kind).to(device)


@pytest.mark.parametrize("M,N,K", SHAPES)
@pytest.mark.parametrize("bias_dtype", [None, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("fast", [True, False])
def test_rowwise(device, M, N, K, bias_dtype, fast):
    xq, wq = rand_fp8((M, K), device), rand_fp8((N, K), device)
    xs, ws = rand_scale(M, device), rand_scale(N, device)
    bias = bias_of(bias_dtype, N, device)
    out = ops.f8f8bf16_rowwise(xq, wq, xs, ws, bias, fast)
    assert out.dtype == torch.bfloat16 and out.shape == (M, N) and out.device.type == device
    check(out, xq, wq, xs, ws, bias, fast)


def test_cpu_exact_rule():
    # CPU: exact sum in double -> float32; fp32 epilogue fma(xs, ws * acc, bias); RNE to bf16.
    xq, wq = rand_fp8((37, 300), "cpu"), rand_fp8((29, 300), "cpu")
    xs, ws = rand_scale(37, "cpu"), rand_scale(29, "cpu")
    for op, dt in [(ops.f8f8bf16_rowwise, torch.bfloat16), (ops.f8f8f16_rowwise, torch.float16)]:
        out = op(xq, wq, xs, ws)
        assert torch.equal(out, exact_cpu(xq, wq, xs, ws, dt))


@requires_cuda
@pytest.mark.parametrize("M,N,K", [(1, 8192, 1024), (64, 1024, 2048), (300, 512, 4096), (2048, 1280, 512)])
@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("kernel", ["auto", "cutlass"])
def test_cuda_large_matches_cpu(monkeypatch, M, N, K, fast, kernel):
    # Aligned shapes. auto: the skinny kernel for M <= 64, CUTLASS above; forced cutlass
    # (MSLK_FP8_GEMM_KERNEL): both tile configs of the bucket table (needs a CUTLASS build).
    monkeypatch.setenv("MSLK_FP8_GEMM_KERNEL", kernel)
    xq, wq = rand_fp8((M, K), "cuda"), rand_fp8((N, K), "cuda")
    xs, ws = rand_scale(M, "cuda"), rand_scale(N, "cuda")
    bias = torch.randn(N, device="cuda").to(torch.bfloat16)
    out = ops.f8f8bf16_rowwise(xq, wq, xs, ws, bias, fast)
    check(out, xq, wq, xs, ws, bias, fast)
    torch.testing.assert_close(out.float().cpu(), ops.f8f8bf16_rowwise(xq.cpu(), wq.cpu(), xs.cpu(), ws.cpu(),
                                                                        bias.cpu(), fast).float(),
                               rtol=2**-6, atol=1e-2 * out.float().abs().max().item())


def test_leading_dims_and_noncontiguous(device):
    xq = rand_fp8((2, 3, 5, 48), device)
    wq_base = rand_fp8((24, 64), device)
    wq = wq_base[:, 8:56]  # row stride 64, offset start
    xs = rand_scale(30, device).reshape(2, 3, 5, 1)  # [..., M, 1] layout
    ws = rand_scale(48, device)[::2]  # stride 2
    out = ops.f8f8bf16_rowwise(xq, wq, xs, ws)
    assert out.shape == (2, 3, 5, 24)
    check(out.reshape(30, 24), xq.reshape(30, 48), wq, xs.reshape(30), ws)
    xt = rand_fp8((8, 4, 32), device).transpose(0, 1)  # leading dims permuted
    out = ops.f8f8bf16_rowwise(xt, wq[:, :32].contiguous(), rand_scale(32, device).reshape(4, 8), ws)
    assert out.shape == (4, 8, 24)


def test_k_zero(device):
    xq, wq = rand_fp8((3, 0), device), rand_fp8((5, 0), device)
    xs, ws = rand_scale(3, device), rand_scale(5, device)
    assert torch.equal(ops.f8f8bf16_rowwise(xq, wq, xs, ws).cpu(), torch.zeros(3, 5, dtype=torch.bfloat16))
    bias = torch.arange(5.0, device=device)
    out = ops.f8f8bf16_rowwise(xq, wq, xs, ws, bias)
    assert torch.equal(out.cpu(), torch.arange(5.0).to(torch.bfloat16).expand(3, 5))
    assert ops.f8f8bf16_rowwise(rand_fp8((0, 16), device), rand_fp8((5, 16), device), xs[:0], ws).shape == (0, 5)


def test_rowwise_out(device):
    xq, wq = rand_fp8((2, 9, 64), device), rand_fp8((40, 64), device)
    xs, ws = rand_scale(18, device), rand_scale(40, device)
    bias = bias_of(torch.float32, 40, device)
    out = torch.full((2, 9, 40), 7.0, dtype=torch.bfloat16, device=device)
    assert ops.f8f8bf16_rowwise_out(xq, wq, xs, ws, out, bias) is None
    check(out.reshape(18, 40), xq.reshape(18, 64), wq, xs, ws, bias)
    # a row-strided 2-D output (a slice of a wider buffer)
    buf = torch.zeros(18, 56, dtype=torch.bfloat16, device=device)
    ops.f8f8bf16_rowwise_out(xq.reshape(18, 64), wq, xs, ws, buf[:, 8:48], None, False)
    check(buf[:, 8:48], xq.reshape(18, 64), wq, xs, ws, fast=False)
    assert torch.all(buf[:, :8] == 0) and torch.all(buf[:, 48:] == 0)


def test_f8f8f16(device):
    xq, wq = rand_fp8((17, 96), device), rand_fp8((24, 96), device)
    xs, ws = rand_scale(17, device), rand_scale(24, device)
    bias = bias_of(torch.bfloat16, 24, device)
    out = ops.f8f8f16_rowwise(xq, wq, xs, ws, bias, False)
    assert out.dtype == torch.float16
    check(out, xq, wq, xs, ws, bias, False)


@pytest.mark.parametrize("wq_3d", [True, False])
def test_batched(device, wq_3d):
    B, M, N, K = 3, 17, 40, 80
    xq = rand_fp8((B, M, K), device)
    wq = rand_fp8((B, N, K) if wq_3d else (N, K), device)
    xs = rand_scale(M, device, (B,))
    ws = rand_scale(N, device, (B,) if wq_3d else ())
    out = ops.f8f8bf16_rowwise_batched(xq, wq, xs, ws)
    assert out.shape == (B, M, N)
    w_full = wq if wq_3d else wq.expand(B, N, K)
    ws_full = ws if wq_3d else ws.expand(B, N)
    for b in range(B):
        check(out[b], xq[b], w_full[b], xs[b], ws_full[b])
    bias = bias_of(torch.float32, B * N, device).reshape(B, N)
    buf = torch.empty(B, M, N, dtype=torch.bfloat16, device=device)
    res = ops.f8f8bf16_rowwise_batched(xq, wq, xs, ws, bias, False, buf)
    assert res.data_ptr() == buf.data_ptr()
    for b in range(B):
        check(buf[b], xq[b], w_full[b], xs[b], ws_full[b], bias[b], False)


@pytest.mark.parametrize("shape", [(1, 5, 32), (2, 7, 16)])
def test_matmul_fp8_row(device, shape):
    a = rand_fp8(shape, device)
    b = rand_fp8((24, shape[-1]), device)
    a_s = rand_scale(a.numel() // shape[-1], device).reshape(shape[:-1])
    b_s = rand_scale(24, device)
    bias = bias_of(torch.float32, 24, device)
    out = matmul_fp8_row(a, b, a_s, b_s, bias=bias, fp8_fast_accum=False)
    assert out.dtype == torch.bfloat16 and out.shape == (*shape[:-1], 24)
    check(out.reshape(-1, 24), a.reshape(-1, shape[-1]), b, a_s.reshape(-1), b_s, bias, False)
    # dot_out_dtype is the result's dtype (the accumulator stays float32)
    for dt in (torch.float32, torch.float16, torch.bfloat16):
        out2 = torch.ops.triton.matmul_fp8_row(a, b, a_s, b_s, bias, dt)
        assert out2.dtype == dt and out2.shape == out.shape
        check(out2.reshape(-1, 24), a.reshape(-1, shape[-1]), b, a_s.reshape(-1), b_s, bias, False)
    with pytest.raises(ValueError, match="argument 'dot_out_dtype'.*got Int"):
        matmul_fp8_row(a, b, a_s, b_s, dot_out_dtype=torch.int32)


def test_dtype_passthrough_not_fp8(device):
    with pytest.raises(TypeError, match="argument 'XQ' must have dtype Float8_e4m3fn"):
        ops.f8f8bf16_rowwise(torch.zeros(4, 16, device=device), rand_fp8((4, 16), device),
                             rand_scale(4, device), rand_scale(4, device))
    assert FP8 == torch.float8_e4m3fn


def _rows():
    from bench.gemm.tune_fp8_rowwise import fast_rows

    return [r for r, _ in fast_rows()]


@requires_cuda
@pytest.mark.parametrize("row", _rows())
@pytest.mark.parametrize("fast", [True, False])
def test_every_cutlass_row(monkeypatch, row, fast):
    """Each row of fp8_rowwise_configs.h, forced (MSLK_FP8_ROWWISE_TILE), on shapes with tile tails:
    candidate rows must be right before a bucket may name them."""
    monkeypatch.setenv("MSLK_FP8_GEMM_KERNEL", "cutlass")
    monkeypatch.setenv("MSLK_FP8_ROWWISE_TILE", str(row))
    for M, N, K in [(300, 520, 1024), (1, 264, 4096)]:
        xq, wq = rand_fp8((M, K), "cuda"), rand_fp8((N, K), "cuda")
        xs, ws = rand_scale(M, "cuda"), rand_scale(N, "cuda")
        bias = torch.randn(N, device="cuda").to(torch.bfloat16)
        check(ops.f8f8bf16_rowwise(xq, wq, xs, ws, bias, fast), xq, wq, xs, ws, bias, fast)


@requires_cuda
def test_large_bucket_swizzle_is_bitwise_neutral(monkeypatch):
    """The large-M bucket runs its tile scheduler with swizzle 4: only the order of the output tiles
    changes, so every swizzle gives the same bits; and the result is right (float64 on the GPU)."""
    M, N, K = 4224, 4104, 4096  # 34 x 17 tiles of 128x256: past the bucket's 4 waves, tile tails
    xq, wq = rand_fp8((M, K), "cuda"), rand_fp8((N, K), "cuda")
    xs, ws = rand_scale(M, "cuda"), rand_scale(N, "cuda")
    auto = ops.f8f8bf16_rowwise(xq, wq, xs, ws)
    for sw in ("1", "8"):
        monkeypatch.setenv("MSLK_GEMM_SWIZZLE", sw)
        assert torch.equal(auto, ops.f8f8bf16_rowwise(xq, wq, xs, ws)), sw
    s = xs.double()[:, None] * ws.double()[None, :]
    ref = (xq.double() @ wq.double().T) * s
    bound = ref.abs() * 2**-8 + accum_bound(xq.double(), wq.double(), True) * s + 1e-30  # bf16 rounding + fast accum
    err = ((auto.double() - ref).abs() / bound).max().item()
    assert err <= 1, err


@requires_cuda
@pytest.mark.parametrize("M", [2, 9, 16, 40])
@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("bias_dtype", [None, torch.bfloat16, torch.float32])
def test_swap_ab_row(monkeypatch, M, fast, bias_dtype):
    """The swap-AB rows (out^T = W X^T, 64 weight rows x 16 tokens a tile): M <= 16 takes them under
    auto; forced (MSLK_FP8_ROWWISE_TILE) they must also be right past one 16-token tile (M = 40).
    N and K leave tails in the 64-row and 128-deep tiles; the output is poisoned first."""
    from bench.gemm.tune_fp8_rowwise import fast_rows

    swap_row = next(r for r, name in fast_rows() if name.endswith("_swap"))
    monkeypatch.setenv("MSLK_FP8_GEMM_KERNEL", "cutlass")
    if M > 16:
        monkeypatch.setenv("MSLK_FP8_ROWWISE_TILE", str(swap_row))
    B, N, K = 2, 1032, 1040
    xq, wq = rand_fp8((B, M, K), "cuda"), rand_fp8((B, N, K), "cuda")
    xs, ws = rand_scale(M, "cuda", (B,)), rand_scale(N, "cuda", (B,))
    bias = None if bias_dtype is None else bias_of(bias_dtype, B * N, "cuda").reshape(B, N)
    buf = torch.full((B, M, N), float("nan"), dtype=torch.bfloat16, device="cuda")
    ops.f8f8bf16_rowwise_batched(xq, wq, xs, ws, bias, fast, buf)
    for b in range(B):
        check(buf[b], xq[b], wq[b], xs[b], ws[b], None if bias is None else bias[b], fast)
    # one weight for every batch (stride 0: one launch a batch) and a 2-D call
    out2 = ops.f8f8bf16_rowwise_batched(xq, wq[0], xs, ws[0], None, fast)
    for b in range(B):
        check(out2[b], xq[b], wq[0], xs[b], ws[0], None, fast)
    out = ops.f8f8bf16_rowwise(xq[1], wq[1], xs[1], ws[1], None if bias is None else bias[1], fast)
    check(out, xq[1], wq[1], xs[1], ws[1], None if bias is None else bias[1], fast)
