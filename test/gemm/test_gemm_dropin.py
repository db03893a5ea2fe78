"""Drop-in edge cases of the GEMM entry points: grouped_gemm's bias / token_weights epilogue rounds
once, outputs overlapping inputs, empty group lists, layout errors of the grouped_mm fakes, and an
empty reduction dimension (K = 0)."""

import pytest
import torch

from mslk.gemm.triton.grouped_gemm import grouped_gemm
from test.conftest import DEVICES
from test.gemm.bf16_grouped_reference import BF16, rand_bf16

ops = torch.ops.mslk
FP8 = torch.float8_e4m3fn


# ---- grouped_gemm: ((x @ w.T in float32) + bias) * token_weights, rounded once to BF16 ----------

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("use_bias,use_tw", [(True, False), (False, True), (True, True)])
def test_grouped_gemm_epilogue_rounds_once(device, use_bias, use_tw):
    sizes, N, K, extra = [5, 0, 11, 16], 24, 64, 3
    G, T = len(sizes), sum(sizes) + extra
    x, w = rand_bf16((T, K), device), rand_bf16((G, N, K), device)
    ms = torch.tensor(sizes, device=device)
    p = torch.zeros(T, N, dtype=torch.float64)  # exact products, float64 sums
    groups = torch.full((T,), G)
    r = 0
    for g, m in enumerate(sizes):
        p[r:r + m] = x[r:r + m].cpu().double() @ w[g].cpu().double().T
        groups[r:r + m] = g
        r += m
    # The bias cancels most of each sum (results near zero, where rounding the GEMM's output to
    # BF16 before the bias costs whole units of the result), and is not a BF16 value.
    bias = torch.randn(G, N, dtype=torch.float64) * 1e-3
    for g in range(G):
        rows = (groups == g).nonzero().flatten()
        if len(rows):
            bias[g] -= p[rows[0]]  # the group's first row lands near zero
    bias = bias.float()
    tw = (torch.rand(T, dtype=torch.float64) + 0.5).float()
    want = p.clone()
    if use_bias:
        b = torch.cat([bias.double(), torch.zeros(1, N, dtype=torch.float64)])
        want = want + b[groups]
    if use_tw:
        want = want * tw.double()[:, None]
    y = grouped_gemm(x, w, ms, bias.to(device) if use_bias else None, tw.to(device) if use_tw else None)
    assert y.dtype == BF16 and y.shape == (T, N)
    # one BF16 rounding of the float32-accumulated value: half an ulp of the result, plus the
    # float32 sum's own error (far below half a BF16 ulp of the GEMM output, up to ~3e-2 here)
    err = (y.cpu().double() - want).abs()
    tol = 2.0 ** -8 * want.abs() + 5e-5
    assert (err <= tol).all(), f"max err {err.max().item():.3g} at {(err > tol).nonzero()[:4].tolist()}"
    assert torch.count_nonzero(y[sum(sizes):]) == 0  # rows past every group: no bias, zero


@pytest.mark.parametrize("device", DEVICES)
def test_grouped_gemm_epilogue_into_output_tensor(device):
    sizes, N, K = [3, 4], 16, 32
    x, w = rand_bf16((7, K), device), rand_bf16((2, N, K), device)
    ms = torch.tensor(sizes, device=device)
    bias = torch.randn(2, N, device=device)
    want = grouped_gemm(x, w, ms, bias)
    out = torch.full((7, N), 5.0, dtype=BF16, device=device)
    assert grouped_gemm(x, w, ms, bias, _output_tensor=out) is out
    assert torch.equal(out, want)
    acc = torch.ones(7, N, dtype=BF16, device=device)
    idx = torch.tensor([6, 5, 4, 3, 2, 1, 0], device=device)
    grouped_gemm(x, w, ms, bias, _output_tensor=acc, _scatter_add_indices=idx)
    torch.testing.assert_close(acc.float(), (1 + want.flip(0).float()).to(BF16).float())


# ---- f8f8bf16_rowwise_out: an output sharing memory with an input ------------------------------

def _fp8_args(M, N, K, device):
    xq = (torch.randn(M, K, device=device) * 4).to(FP8)
    wq = (torch.randn(N, K, device=device) * 4).to(FP8)
    return xq, wq, torch.rand(M, device=device) + 0.5, torch.rand(N, device=device) + 0.5


@pytest.mark.parametrize("device", DEVICES)
def test_rowwise_out_overlapping_input_is_rejected(device):
    M, N, K = 8, 16, 32
    xq, wq, xs, ws = _fp8_args(M, N, K, device)
    # output over XQ's bytes
    buf = torch.zeros(M * N, dtype=BF16, device=device)
    xq_alias = buf.view(torch.uint8)[:M * K].view(FP8).view(M, K)
    xq_alias.copy_(xq)
    with pytest.raises(ValueError, match="'output' overlaps argument 'XQ'"):
        ops.f8f8bf16_rowwise_out(xq_alias, wq, xs, ws, buf.view(M, N))
    # output over the scales, then over the bias
    fbuf = torch.zeros(M * N // 2 + M, device=device)
    out = fbuf.view(BF16)[:M * N].view(M, N)
    x_scale = fbuf[-M:]
    x_scale.copy_(xs)
    with pytest.raises(ValueError, match="'output' overlaps argument 'x_scale'"):
        ops.f8f8bf16_rowwise_out(xq, wq, fbuf[M * N // 2 - M:M * N // 2], ws, out)
    with pytest.raises(ValueError, match="'output' overlaps argument 'bias'"):
        ops.f8f8bf16_rowwise_out(xq, wq, xs, ws, out, fbuf[:N])
    # disjoint parts of one allocation are fine
    want = ops.f8f8bf16_rowwise(xq, wq, xs, ws)
    ops.f8f8bf16_rowwise_out(xq, wq, x_scale, ws, out)
    assert torch.equal(out, want)


@pytest.mark.parametrize("device", DEVICES)
def test_rowwise_batched_overlapping_output_is_rejected(device):
    B, M, N, K = 2, 4, 8, 16
    xq = (torch.randn(B, M, K, device=device) * 4).to(FP8)
    wq = (torch.randn(B, N, K, device=device) * 4).to(FP8)
    xs, ws = torch.rand(B * M, device=device) + 0.5, torch.rand(B * N, device=device) + 0.5
    buf = torch.zeros(B * M * N + B * N, device=device)
    out = buf.view(BF16)[:B * M * N].view(B, M, N)
    with pytest.raises(ValueError, match="'output' overlaps argument 'w_scale'"):
        ops.f8f8bf16_rowwise_batched(xq, wq, xs, buf[:B * N], output=out)


# ---- list forms with no group -----------------------------------------------------------------

def test_empty_group_lists():
    assert ops.bf16bf16bf16_grouped([], []) == []
    assert ops.f8f8bf16_rowwise_grouped([], [], [], []) == []
    with pytest.raises(ValueError, match="argument 'X' .*at least one group"):
        ops.bf16bf16bf16_grouped_cat([], [])
    with pytest.raises(ValueError, match="argument 'XQ' .*at least one group"):
        ops.f8f8bf16_rowwise_grouped_cat([], [], [], [])
    # the fakes (torch.compile) say the same instead of an IndexError
    from mslk.gemm import _fake, _fake_bf16_grouped

    with pytest.raises(ValueError, match="argument 'X' .*at least one group"):
        _fake_bf16_grouped._bf16_grouped_cat([], [])
    with pytest.raises(ValueError, match="argument 'XQ' .*at least one group"):
        _fake._f8f8bf16_rowwise_grouped_cat([], [], [], [])


# ---- grouped_mm layouts under the fake (meta tensors) -----------------------------------------

def test_grouped_mm_fake_layout_errors():
    m = dict(device="meta")
    xq3, wq3 = torch.empty(2, 4, 32, dtype=torch.uint8, **m), torch.empty(2, 8, 32, dtype=torch.uint8, **m)
    wq2 = torch.empty(8, 32, dtype=torch.uint8, **m)
    offs = torch.empty(2, dtype=torch.int32, **m)
    with pytest.raises(ValueError, match=r"mx8mx4bf16_grouped_mm: argument 'XQ' must be 2-D .*got 'XQ' \(2, 4, 32\)"):
        ops.mx8mx4bf16_grouped_mm(xq3, wq3, xq3, xq3, offs)
    with pytest.raises(ValueError, match=r"f4f4bf16_grouped_mm: argument 'XQ' must be 2-D .*'WQ' \(8, 32\)"):
        ops.f4f4bf16_grouped_mm(xq3, wq2, xq3, xq3, offs)
    x8 = torch.empty(2, 4, 32, dtype=FP8, **m)
    with pytest.raises(ValueError, match=r"'offsets' must be omitted .*got 'XQ' \(2, 4, 32\), 'WQ' \(2, 4, 32\)"):
        ops.f8f8bf16_rowwise_grouped_mm(x8, x8, torch.empty(8, **m), torch.empty(8, **m), offs)
    with pytest.raises(ValueError, match=r"argument 'XQ' must be \[total_M, K\] or \[G, M, K\].*\(1, 2, 4, 32\)"):
        x4 = torch.empty(1, 2, 4, 32, dtype=FP8, **m)
        ops.f8f8bf16_rowwise_grouped_mm(x4, x8, torch.empty(8, **m), torch.empty(8, **m), offs)


# ---- K = 0: an empty sum is 0, so the result is zeros (plus the bias where there is one) --------

def _k0_cases(device):
    M, N, G, K = 4, 8, 2, 0
    f8 = lambda *s: torch.zeros(*s, dtype=FP8, device=device)  # noqa: E731
    bf = lambda *s: torch.zeros(*s, dtype=BF16, device=device)  # noqa: E731
    ones = lambda *s: torch.ones(*s, device=device)  # noqa: E731
    bias = torch.arange(N, dtype=torch.float32, device=device)
    ms = torch.tensor([1, 3], device=device)
    offs = torch.tensor([1, 4], dtype=torch.int32, device=device)
    from mslk.gemm.triton.fp8_gemm import matmul_fp8_row
    from mslk.gemm.triton.grouped_gemm import grouped_gemm_dgrad, grouped_gemm_fp8_rowwise, grouped_gemm_wgrad

    bias_rows = bias.expand(M, N)
    return {
        "f8f8bf16_rowwise": (lambda: ops.f8f8bf16_rowwise(f8(M, K), f8(N, K), ones(M), ones(N)), 0),
        "f8f8bf16_rowwise+bias": (lambda: ops.f8f8bf16_rowwise(f8(M, K), f8(N, K), ones(M), ones(N), bias),
                                  bias_rows),
        "f8f8f16_rowwise": (lambda: ops.f8f8f16_rowwise(f8(M, K), f8(N, K), ones(M), ones(N)), 0),
        "f8f8bf16_rowwise_batched": (lambda: ops.f8f8bf16_rowwise_batched(f8(G, M, K), f8(G, N, K), ones(G * M),
                                                                          ones(G * N)), 0),
        "matmul_fp8_row": (lambda: matmul_fp8_row(f8(M, K), f8(N, K), ones(M), ones(N), bias), bias_rows),
        "f8f8bf16_rowwise_grouped": (lambda: torch.cat(ops.f8f8bf16_rowwise_grouped(
            [f8(M, K)], [f8(N, K)], [ones(M)], [ones(N)])), 0),
        "f8f8bf16_rowwise_grouped_stacked": (lambda: ops.f8f8bf16_rowwise_grouped_stacked(
            f8(M, K), f8(G, N, K), ones(M), ones(G * N), ms), 0),
        "f8f8bf16_rowwise_grouped_mm": (lambda: ops.f8f8bf16_rowwise_grouped_mm(
            f8(M, K), f8(G, N, K), ones(M), ones(G * N), offs), 0),
        "grouped_gemm_fp8_rowwise": (lambda: grouped_gemm_fp8_rowwise(f8(M, K), f8(G, N, K), ms, ones(M),
                                                                      ones(G, N)), 0),
        "bf16bf16bf16_grouped": (lambda: torch.cat(ops.bf16bf16bf16_grouped([bf(M, K)], [bf(N, K)])), 0),
        "bf16bf16bf16_grouped_stacked": (lambda: ops.bf16bf16bf16_grouped_stacked(bf(M, K), bf(G, N, K), ms), 0),
        "grouped_gemm+bias": (lambda: grouped_gemm(bf(M, K), bf(G, N, K), ms, bias.expand(G, N)), bias_rows),
        "grouped_gemm_dgrad": (lambda: grouped_gemm_dgrad(bf(M, N), bf(G, N, K), ms), 0),
        "grouped_gemm_wgrad": (lambda: grouped_gemm_wgrad(bf(M, N), bf(M, K), ms), 0),
    }


@pytest.mark.parametrize("device", DEVICES)
def test_empty_reduction_dim(device):
    failures = []
    for name, (fn, want) in _k0_cases(device).items():
        try:
            y = fn()
        except Exception as e:  # collect every entry point's failure, then report them together
            failures.append(f"{name}: {type(e).__name__}: {e}")
            continue
        if not torch.equal(y.float().cpu(), torch.as_tensor(want, dtype=torch.float32).cpu().expand(y.shape)):
            failures.append(f"{name}: got {y}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("kw,match", [
    (lambda: {"bias": torch.randn(16)}, "bias must be"),
    (lambda: {"token_weights": torch.randn(9)}, "token_weights must be"),
    (lambda: {"_scatter_add_indices": torch.arange(8)}, "needs _output_tensor"),
    (lambda: {"_scatter_add_indices": torch.arange(7), "_output_tensor": torch.zeros(10, 16, dtype=torch.bfloat16)},
     "_scatter_add_indices must be"),
    (lambda: {"_output_tensor": torch.zeros(8, 17, dtype=torch.bfloat16)}, "_output_tensor must be"),
])
def test_grouped_gemm_epilogue_argument_errors(kw, match):
    from mslk.gemm.triton.grouped_gemm import grouped_gemm
    x = torch.randn(8, 32, dtype=torch.bfloat16)
    w = torch.randn(3, 16, 32, dtype=torch.bfloat16)
    m = torch.tensor([3, 1, 4], dtype=torch.int32)
    with pytest.raises(ValueError, match=match):
        grouped_gemm(x, w, m, **kw())
