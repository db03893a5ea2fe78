"""gather / scatter / shuffling / SwiGLU against float64 references (CPU), CUDA against the CPU
reference when a GPU is present; error messages; opcheck and torch.compile."""

import pytest
import torch

import mslk.moe as moe
from test.conftest import requires_cuda
from test.moe.moe_reference import fp8_row_reference, gather_reference, shuffle_reference

def fp8_ordinal(q):
    """E4M3 codes as signed integers in value order: adjacent representable values differ by 1."""
    bits = q.view(torch.uint8).to(torch.int32)
    mag = bits & 0x7F
    return torch.where(bits & 0x80 != 0, -mag, mag)


def fp8_close(q, s, rq, rs, max_off=0.01):
    """Codes equal to the reference's, except at most one E4M3 step on a small fraction (products
    rounded in float32 vs float64 may straddle a rounding edge); scales agree separately."""
    assert torch.allclose(s.float(), rs.float(), rtol=1e-5, atol=0)
    d = (fp8_ordinal(q) - fp8_ordinal(rq)).abs()
    assert int(d.max()) <= 1 if d.numel() else True, f"codes off by up to {int(d.max())} steps"
    off = int((d != 0).sum())
    assert off <= max(1, max_off * d.numel()), f"{off} of {d.numel()} codes one step off"


TOL = {torch.float32: 1e-5, torch.bfloat16: 1e-2, torch.float16: 2e-3}


def routed(T, E, top_k, device):
    counts, ei, ti = moe.index_shuffling(torch.randn(T, E, device=device), top_k=top_k)
    return counts, ei, ti


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("D", [1024, 5, 33, 128])
def test_gather(device, dtype, D):
    T, E, k = 37, 16, 2
    x = torch.randn(T, D, device=device, dtype=dtype)
    scores = torch.rand(T, E, device=device)
    counts, ei, ti = routed(T, E, k, device)
    out = moe.gather_scale_dense_tokens(x, ti, ei, scores)
    ref = gather_reference(x, ti, ei, scores, T * k)
    torch.testing.assert_close(out.cpu().double(), ref, rtol=TOL[dtype], atol=TOL[dtype])


def test_gather_valid_count_int64_strided_scores(device):
    T, E, D = 20, 8, 64
    x = torch.randn(T, D, device=device, dtype=torch.bfloat16)
    scores = torch.rand(E, T, device=device, dtype=torch.bfloat16).t()
    tok = torch.randint(0, T, (30,), device=device)
    exp = torch.randint(0, E, (30,), device=device)
    out = moe.gather_scale_dense_tokens(x, tok, exp, scores, torch.tensor(11, device=device))
    torch.testing.assert_close(out[:11].cpu().double(), gather_reference(x, tok, exp, scores, 11), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("D", [512, 7])
def test_gather_quant(device, D):
    T, E = 25, 4
    x = torch.randn(T, D, device=device, dtype=torch.bfloat16) * 3
    scores = torch.rand(T, E, device=device)
    tok = torch.randint(0, T, (40,), device=device, dtype=torch.int32)
    exp = torch.randint(0, E, (40,), device=device, dtype=torch.int32)
    for ub in (None, torch.tensor([0.5], device=device)):
        q, s = moe.gather_scale_quant_dense_tokens(x, tok, exp, scores, ub, torch.tensor([33], device=device))
        assert q.dtype == torch.float8_e4m3fn and s.dtype == torch.float32 and s.shape == (40,)
        rq, rs = fp8_row_reference(gather_reference(x, tok, exp, scores, 33), ub)
        torch.testing.assert_close(s[:33].cpu(), rs, rtol=1e-6, atol=0)
        fp8_close(q[:33].cpu(), s[:33].cpu(), rq, rs)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("D", [256, 3])
def test_scatter_add_dense(device, dtype, D):
    T, A = 13, 40
    out = torch.randn(T, D, device=device, dtype=dtype)
    inp = torch.randn(A, D, device=device, dtype=dtype)
    tok = torch.randint(0, T, (A,), device=device, dtype=torch.int32)
    ref = out.cpu().double().index_add(0, tok[:31].long().cpu(), inp[:31].cpu().double())
    moe.scatter_add_dense_tokens(out, inp, tok, torch.tensor([31], device=device))
    tol = 5e-2 if dtype == torch.bfloat16 else 1e-5
    torch.testing.assert_close(out.cpu().double(), ref, rtol=tol, atol=tol)


def test_scatter_add_padded(device):
    EP, E, T, D, N = 2, 4, 12, 64, 6
    inp = torch.randn(EP, T, D, device=device)
    counts = torch.tensor([3, 0, 5, 2], device=device, dtype=torch.int32)
    tok = torch.randint(0, N, (T,), device=device, dtype=torch.int32)
    out = torch.randn(N, D, device=device)
    ref = out.cpu().double().clone()
    pre = [0, 3, 3, 8, 10]
    for e in range(E):
        for s in range(pre[e], pre[e + 1]):
            ref[tok[s]] += inp[e // (E // EP), s].cpu().double()
    moe.scatter_add_padded_tokens(inp, counts, tok, out)
    torch.testing.assert_close(out.cpu().double(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("rng", [(None, None), (1, 3)])
@pytest.mark.parametrize("D", [64, 5])
def test_combine_split(device, padded, rng, D):
    EP, E, T = 3, 4, 36
    B = T // EP
    counts = torch.randint(0, 4, (EP, E), device=device, dtype=torch.int32)
    tokens = torch.randn(T, D, device=device, dtype=torch.bfloat16)
    start, end = rng
    s, e = (0 if start is None else start), (E if end is None else end)
    out, oc = moe.combine_shuffling(tokens, counts, start, end, padded)
    ref, written, rc = shuffle_reference(tokens, counts, s, e, padded, True)
    assert torch.equal(oc.cpu(), rc)
    assert torch.equal(out.cpu()[written], ref[written])
    back = moe.split_shuffling(out, counts, start, end, padded, init_with_zeros=True)
    ref2, written2, _ = shuffle_reference(out, counts, s, e, padded, False)
    assert torch.equal(back.cpu(), ref2)
    assert torch.equal(back.cpu()[written2], tokens.cpu()[written2])
    del B


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("D", [1024, 9])
def test_silu_mul(device, dtype, D):
    T = 17
    x0 = torch.randn(T, 2 * D, device=device, dtype=dtype)[:, :D]  # row-strided
    x1 = torch.randn(T, D, device=device, dtype=dtype)
    out = moe.silu_mul(x0, x1, torch.tensor([12], device=device))
    a, b = x0.cpu().double(), x1.cpu().double()
    ref = a * torch.sigmoid(a) * b
    torch.testing.assert_close(out[:12].cpu().double(), ref[:12], rtol=TOL[dtype], atol=TOL[dtype])
    q, s = moe.silu_mul_quant(x0, x1)
    rq, rs = fp8_row_reference(ref)
    torch.testing.assert_close(s.cpu(), rs, rtol=1e-5, atol=0)
    fp8_close(q.cpu(), s.cpu(), rq, rs)


@pytest.mark.parametrize("idx_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_scatter_add_along_first_dim(device, idx_dtype, dtype):
    N, M, K = 10, 50, 256
    dst = torch.randn(N, K, device=device, dtype=dtype)
    src = torch.randn(M, K, device=device, dtype=dtype)
    idx = torch.randint(0, N, (M,), device=device, dtype=idx_dtype)
    ref = dst.cpu().double().index_add(0, idx.long().cpu(), src.cpu().double())
    moe.scatter_add_along_first_dim(dst, src, idx)
    tol = 1e-1 if dtype == torch.bfloat16 else 1e-5
    torch.testing.assert_close(dst.cpu().double(), ref, rtol=tol, atol=tol)
    # non-contiguous Src falls back to ATen
    d2 = torch.zeros(N, 8, device=device, dtype=dtype)
    s2 = torch.randn(8, M, device=device, dtype=dtype).t()
    moe.scatter_add_along_first_dim(d2, s2, idx)
    torch.testing.assert_close(d2.cpu().double(), torch.zeros(N, 8, dtype=torch.float64).index_add(
        0, idx.long().cpu(), s2.cpu().double()), rtol=tol, atol=tol)


def test_errors():
    x = torch.randn(4, 8)
    s = torch.rand(4, 2)
    i = torch.tensor([0, 1], dtype=torch.int32)
    with pytest.raises(ValueError, match=r"token_indices\[1\] = 9"):
        moe.gather_scale_dense_tokens(x, torch.tensor([0, 9], dtype=torch.int32), i, s)
    with pytest.raises(ValueError, match=r"expert_indices\[0\] = 2"):
        moe.gather_scale_dense_tokens(x, i, torch.tensor([2, 0], dtype=torch.int32), s)
    with pytest.raises(ValueError, match="scores"):
        moe.gather_scale_dense_tokens(x, i, i, torch.rand(5, 2))
    with pytest.raises(ValueError, match="contiguous"):
        moe.gather_scale_dense_tokens(x.t(), i, i, torch.rand(8, 2))
    with pytest.raises(TypeError, match="token_indices"):
        moe.gather_scale_dense_tokens(x, i.float(), i, s)
    with pytest.raises(ValueError, match="out of range"):
        moe.scatter_add_dense_tokens(x, torch.randn(2, 8), torch.tensor([0, 4], dtype=torch.int32))
    with pytest.raises(TypeError, match="in_tokens"):
        moe.scatter_add_dense_tokens(x, torch.randn(2, 8).double(), i)
    with pytest.raises(ValueError, match="divisible"):
        moe.scatter_add_padded_tokens(torch.randn(3, 4, 8), torch.ones(4, dtype=torch.int32),
                                      torch.zeros(4, dtype=torch.int32), torch.zeros(4, 8))
    with pytest.raises(ValueError, match=r"T_K = 4\) must be a multiple of the number of tokens \(out_tokens.size\(0\) = 3"):
        moe.scatter_add_padded_tokens(torch.randn(2, 4, 8), torch.ones(4, dtype=torch.int32),
                                      torch.zeros(4, dtype=torch.int32), torch.zeros(3, 8))
    with pytest.raises(ValueError, match="sum to"):
        moe.scatter_add_padded_tokens(torch.randn(2, 4, 8), torch.full((4,), 2, dtype=torch.int32),
                                      torch.zeros(4, dtype=torch.int32), torch.zeros(4, 8))
    with pytest.raises(ValueError, match="padded block"):
        moe.combine_shuffling(torch.randn(4, 8), torch.tensor([[3, 0], [0, 0]], dtype=torch.int32), is_padded=True)
    with pytest.raises(ValueError, match="expert_end"):
        moe.split_shuffling(torch.randn(4, 8), torch.zeros(2, 2, dtype=torch.int32), 0, 3)
    with pytest.raises(ValueError, match="same shape"):
        moe.silu_mul(x, torch.randn(4, 7))
    with pytest.raises(ValueError, match="scale_ub"):
        moe.silu_mul_quant(x, x, torch.ones(2))
    with pytest.raises(ValueError, match="one entry per row"):
        moe.scatter_add_along_first_dim(x, torch.randn(3, 8), i)


@requires_cuda
def test_cuda_matches_cpu_large():
    T, E, k, D = 4096, 128, 4, 5120
    scores = torch.rand(T, E, device="cuda")
    x = torch.randn(T, D, device="cuda", dtype=torch.bfloat16)
    counts, ei, ti = moe.index_shuffling(scores, top_k=k)
    n = int(counts[-1])
    g = moe.gather_scale_dense_tokens(x, ti, ei, scores)
    gc = moe.gather_scale_dense_tokens(x.cpu(), ti.cpu(), ei.cpu(), scores.cpu())
    assert torch.equal(g[:n].cpu(), gc[:n])
    q, s = moe.gather_scale_quant_dense_tokens(x, ti, ei, scores)
    qc, sc = moe.gather_scale_quant_dense_tokens(x.cpu(), ti.cpu(), ei.cpu(), scores.cpu())
    assert torch.equal(s[:n].cpu(), sc[:n]) and torch.equal(q[:n].cpu().view(torch.uint8), qc[:n].view(torch.uint8))
    out = torch.zeros(T, D, device="cuda", dtype=torch.bfloat16)
    moe.scatter_add_dense_tokens(out, g, ti, counts[-1:])
    ref = torch.zeros(T, D, dtype=torch.float64).index_add(0, ti[:n].long().cpu(), g[:n].cpu().double())
    torch.testing.assert_close(out.cpu().double(), ref, rtol=2e-2, atol=2e-2)
    outc = torch.zeros(T, D, dtype=torch.bfloat16)
    moe.scatter_add_dense_tokens(outc, gc, ti.cpu(), counts[-1:].cpu())
    assert torch.equal(out.cpu(), outc)  # same order of additions, same rounding


def _scatter_cases(N, A, mode, idx_dtype, gen):
    if mode == "random":
        tok = torch.randint(0, N, (A,), generator=gen)
    elif mode == "heavy":  # a few tokens take most rows (long lists)
        tok = torch.randint(0, min(N, 3), (A,), generator=gen)
        tok[::5] = 0
    else:  # as index_shuffling emits them: by expert, ascending tokens inside each
        top = torch.rand(N, 16, generator=gen).topk(4, dim=1).indices.flatten()
        tok = (torch.argsort(top, stable=True) // 4)[:A]
    return tok.to(idx_dtype)


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("D", [5120, 256, 33, 3])
@pytest.mark.parametrize("idx_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("mode", ["random", "heavy", "routed"])
def test_scatter_add_dense_cuda_equals_cpu(dtype, D, idx_dtype, mode):
    """Deterministic gather formulation: bit-identical to the CPU reference (rows added in
    ascending order, rounded to the dtype after every row)."""
    gen = torch.Generator().manual_seed(D * 3 + len(mode))
    N = 300
    A = 4 * N if mode == "routed" else 777
    tok = _scatter_cases(N, A, mode, idx_dtype, gen)
    out = torch.randn(N, D, generator=gen).to(dtype)
    inp = (torch.randn(A, D, generator=gen) * 4).to(dtype)
    for valid in (None, A - A // 4, 0):
        vt = None if valid is None else torch.tensor([valid], dtype=idx_dtype)
        ref = out.clone()
        moe.scatter_add_dense_tokens(ref, inp, tok, vt)
        got = out.cuda()
        moe.scatter_add_dense_tokens(got, inp.cuda(), tok.cuda(), None if vt is None else vt.cuda())
        assert torch.equal(got.cpu(), ref), (valid,)


@requires_cuda
@pytest.mark.parametrize("N", [1, 200, 70000])  # 1, 1 and 3 radix passes
def test_scatter_add_dense_cuda_sizes(N):
    gen = torch.Generator().manual_seed(N)
    A, D = 5000, 8
    tok = torch.randint(0, N, (A,), generator=gen, dtype=torch.int32)
    out = torch.randn(N, D, generator=gen).bfloat16()
    inp = torch.randn(A, D, generator=gen).bfloat16()
    ref = out.clone()
    moe.scatter_add_dense_tokens(ref, inp, tok)
    got = out.cuda()
    moe.scatter_add_dense_tokens(got, inp.cuda(), tok.cuda())
    assert torch.equal(got.cpu(), ref)


def _samples(device):
    T, E, D = 8, 4, 32
    x = torch.randn(T, D, device=device, dtype=torch.bfloat16)
    scores = torch.rand(T, E, device=device)
    tok = torch.randint(0, T, (T,), device=device, dtype=torch.int32)
    exp = torch.randint(0, E, (T,), device=device, dtype=torch.int32)
    counts2 = torch.tensor([[1, 2], [2, 1]], device=device, dtype=torch.int32)
    ops = torch.ops.mslk
    return [
        (ops.index_shuffling, (scores,), {"top_k": 2}),
        (ops.gather_scale_dense_tokens, (x, tok, exp, scores), {}),
        (ops.gather_scale_quant_dense_tokens, (x, tok, exp, scores), {}),
        (ops.scatter_add_dense_tokens, (x.float().clone(), x.float(), tok), {}),
        (ops.scatter_add_padded_tokens, (torch.randn(2, T, D, device=device), torch.tensor([2, 1, 0, 3], device=device,
                                         dtype=torch.int32), tok, torch.zeros(T, D, device=device)), {}),
        (ops.combine_shuffling, (x[:6].contiguous(), counts2), {}),
        (ops.split_shuffling, (x[:6].contiguous(), counts2), {"init_with_zeros": True}),
        (ops.silu_mul, (x, x), {}),
        (ops.silu_mul_quant, (x, x), {}),
        (ops.scatter_add_along_first_dim, (x.float().clone(), x.float(), tok), {}),
    ]


def test_opcheck(device):
    for op, args, kwargs in _samples(device):
        torch.library.opcheck(op, args, kwargs)


@requires_cuda
def test_opcheck_scatter_add_dense_cuda_large():
    A, T, D = 4096, 1024, 64
    tok = torch.randint(0, T, (A,), device="cuda", dtype=torch.int32)
    out = torch.randn(T, D, device="cuda", dtype=torch.bfloat16)
    inp = torch.randn(A, D, device="cuda", dtype=torch.bfloat16)
    torch.library.opcheck(torch.ops.mslk.scatter_add_dense_tokens, (out, inp, tok), {})


def test_torch_compile_fullgraph(device):
    T, E, D, k = 16, 8, 64, 2

    def layer(x, scores, w):
        counts, ei, ti = torch.ops.mslk.index_shuffling(scores, top_k=k)
        g = torch.ops.mslk.gather_scale_dense_tokens(x, ti, ei, scores, counts[-1:])
        h = torch.ops.mslk.silu_mul(g, g * w, counts[-1:])
        out = torch.zeros_like(x)
        torch.ops.mslk.scatter_add_dense_tokens(out, h, ti, counts[-1:])
        return out

    x = torch.randn(T, D, device=device)
    scores = torch.rand(T, E, device=device)
    w = torch.randn(D, device=device)
    eager = layer(x, scores, w)
    compiled = torch.compile(layer, fullgraph=True)(x, scores, w)
    torch.testing.assert_close(compiled, eager, rtol=1e-5, atol=1e-5)
