"""Inputs the reference accepts (mixed index dtypes, integer token rows, row-strided shuffling
inputs) and bad inputs that must fail clearly (aliasing outputs, out-of-range ids, scale_ub <= 0)."""

import pytest
import torch

import mslk.moe as moe
from test.conftest import requires_cuda
from test.moe.moe_reference import fp8_row_reference, gather_reference
from test.moe.test_tokens import fp8_close

MIXED = [(torch.int32, torch.int64), (torch.int64, torch.int32)]


@pytest.mark.parametrize("tok_dtype,exp_dtype", MIXED)
def test_gather_mixed_index_dtypes(device, tok_dtype, exp_dtype):
    T, E, D, A = 9, 4, 64, 20
    x = torch.randn(T, D, device=device, dtype=torch.bfloat16)
    scores = torch.rand(T, E, device=device)
    tok = torch.randint(0, T, (A,), device=device, dtype=tok_dtype)
    exp = torch.randint(0, E, (A,), device=device, dtype=exp_dtype)
    same = moe.gather_scale_dense_tokens(x, tok.int(), exp.int(), scores)
    assert torch.equal(moe.gather_scale_dense_tokens(x, tok, exp, scores), same)
    q, s = moe.gather_scale_quant_dense_tokens(x, tok, exp, scores)
    q2, s2 = moe.gather_scale_quant_dense_tokens(x, tok.long(), exp.long(), scores)
    assert torch.equal(q.view(torch.uint8), q2.view(torch.uint8)) and torch.equal(s, s2)
    torch.testing.assert_close(same.cpu().double(), gather_reference(x, tok, exp, scores, A), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_scatter_add_dense_integer_tokens(device, dtype):
    T, A, D = 7, 12, 5
    out = torch.randint(-50, 50, (T, D), device=device, dtype=dtype)
    inp = torch.randint(-50, 50, (A, D), device=device, dtype=dtype)
    tok = torch.randint(0, T, (A,), device=device, dtype=torch.int32)
    ref = out.cpu().index_add(0, tok[:9].long().cpu(), inp[:9].cpu())
    moe.scatter_add_dense_tokens(out, inp, tok, torch.tensor([9], device=device))
    assert torch.equal(out.cpu(), ref)
    ref = out.cpu().index_add(0, tok.long().cpu(), inp.cpu())
    moe.scatter_add_dense_tokens(out, inp, tok)
    assert torch.equal(out.cpu(), ref)


@pytest.mark.parametrize("idx_dtype", [torch.int32, torch.int64])
def test_scatter_add_padded_integer_tokens(device, idx_dtype):
    EP, E, T, D, N = 2, 4, 12, 6, 6
    inp = torch.randint(-9, 9, (EP, T, D), device=device, dtype=torch.int32)
    counts = torch.tensor([3, 0, 5, 2], device=device, dtype=idx_dtype)
    tok = torch.randint(0, N, (T,), device=device, dtype=torch.int32)
    out = torch.randint(-9, 9, (N, D), device=device, dtype=torch.int32)
    ref = out.cpu().clone()
    pre = [0, 3, 3, 8, 10]
    for e in range(E):
        for s in range(pre[e], pre[e + 1]):
            ref[tok[s]] += inp[e // (E // EP), s].cpu()
    moe.scatter_add_padded_tokens(inp, counts, tok, out)
    assert torch.equal(out.cpu(), ref)
    # the float path gives the same sums
    outf = out.float()
    before = outf.clone()
    moe.scatter_add_padded_tokens(inp.float(), counts, tok, outf)
    moe.scatter_add_padded_tokens(inp, counts, tok, out)
    assert torch.equal(outf - before, (out.float() - before))


def test_scatter_add_aliasing_rejected():
    x = torch.randn(8, 4)
    tok = torch.tensor([0, 1, 2], dtype=torch.int32)
    with pytest.raises(ValueError, match="'out_tokens' must not share memory with 'in_tokens'"):
        moe.scatter_add_dense_tokens(x, x[2:5], tok)
    with pytest.raises(ValueError, match="'out_tokens' must not share memory with 'in_tokens'"):
        moe.scatter_add_dense_tokens(x[:3], x[:3], tok)
    buf = torch.zeros(6, dtype=torch.int32)
    with pytest.raises(ValueError, match="'out_tokens' must not share memory with 'token_indices'"):
        moe.scatter_add_dense_tokens(buf.view(3, 2), torch.zeros(3, 2, dtype=torch.int32), buf[:3])
    inp = torch.randn(1, 4, 4)
    with pytest.raises(ValueError, match="'out_tokens' must not share memory with 'in_tokens'"):
        moe.scatter_add_padded_tokens(inp, torch.ones(2, dtype=torch.int32), torch.zeros(4, dtype=torch.int32), inp[0])
    with pytest.raises(ValueError, match="'Dst' must not share memory with 'Src'"):
        moe.scatter_add_along_first_dim(x[:4], x[:4], tok[:1].repeat(4))


def test_scatter_add_along_first_dim_out_of_range_names_args():
    dst, src = torch.zeros(5, 8), torch.randn(3, 8)
    for bad in ([0, 5, 1], [0, -1, 1]):
        for dt in (torch.int32, torch.int64):
            with pytest.raises(ValueError, match=r"Index\[1\] = -?\d+ is out of range for 'Dst' with 5 rows"):
                moe.scatter_add_along_first_dim(dst, src, torch.tensor(bad, dtype=dt))
    # the ATen path (non-contiguous Dst) gives the same message
    with pytest.raises(ValueError, match=r"Index\[1\] = 5 is out of range for 'Dst'"):
        moe.scatter_add_along_first_dim(torch.zeros(8, 5).t(), src, torch.tensor([0, 5, 1]))
    assert torch.equal(dst, torch.zeros(5, 8))
    # row-sliced (strided, not dense) Dst and Src that do not share memory are accepted
    big = torch.zeros(10, 8)
    moe.scatter_add_along_first_dim(big[::2], torch.ones(12, 8)[::4], torch.tensor([0, 4, 4]))
    assert big[0].eq(1).all() and big[8].eq(2).all() and big.sum() == 24


@pytest.mark.parametrize("padded", [False, True])
def test_shuffling_row_strided_inputs(device, padded):
    EP, E, T, D = 3, 4, 36, 16
    counts = torch.randint(0, 4, (EP, E), device=device, dtype=torch.int32)
    wide = torch.randn(T, 2 * D, device=device, dtype=torch.bfloat16)
    tokens = wide[:, :D]  # last dim stride 1, row stride 2 * D
    assert not tokens.is_contiguous()
    counts_strided = torch.zeros(EP, 2 * E, device=device, dtype=torch.int32)[:, ::2]
    counts_strided.copy_(counts)
    out, oc = moe.combine_shuffling(tokens, counts_strided, None, None, padded)
    ref, roc = moe.combine_shuffling(tokens.contiguous(), counts, None, None, padded)
    assert torch.equal(oc, roc)
    n = int(roc[-1])
    assert torch.equal(out[:n], ref[:n])
    back = moe.split_shuffling(out, counts_strided, None, None, padded, True)
    assert torch.equal(back, moe.split_shuffling(out.contiguous(), counts, None, None, padded, True))
    back2 = moe.split_shuffling(torch.cat([out, out], 1)[:, D:], counts, None, None, padded, True)
    assert torch.equal(back2, back)


def test_shuffling_rejects_strided_last_dim():
    with pytest.raises(ValueError, match="stride 1 in its last dimension"):
        moe.combine_shuffling(torch.randn(8, 4).t(), torch.zeros(1, 2, dtype=torch.int32))


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan")])
def test_scale_ub_non_positive_rejected(bad):
    x = torch.randn(4, 8)
    i = torch.tensor([0, 1], dtype=torch.int32)
    ub = torch.tensor([bad])
    with pytest.raises(ValueError, match="argument 'scale_ub' must be positive"):
        moe.gather_scale_quant_dense_tokens(x, i, i, torch.rand(4, 2), ub)
    with pytest.raises(ValueError, match="argument 'scale_ub' must be positive"):
        moe.silu_mul_quant(x, x, ub)


@requires_cuda
def test_scale_ub_cpu_value_checked_for_cuda_input():
    # A CPU scale_ub costs no sync to read; one on the device is not checked (documented in moe.cpp).
    x = torch.randn(4, 8, device="cuda")
    with pytest.raises(ValueError, match="argument 'scale_ub' must be positive"):
        moe.silu_mul_quant(x, x, torch.tensor([0.0]))
    moe.silu_mul_quant(x, x, torch.tensor([0.5], device="cuda"))


@requires_cuda
def test_scatter_add_along_first_dim_cuda_out_of_range_dropped():
    # On CUDA ids are not read on the host: the kernel skips out-of-range rows (no OOB write).
    dst, src = torch.zeros(5, 8, device="cuda"), torch.ones(3, 8, device="cuda")
    moe.scatter_add_along_first_dim(dst, src, torch.tensor([0, 5, -1], device="cuda"))
    ref = torch.zeros(5, 8)
    ref[0] = 1
    assert torch.equal(dst.cpu(), ref)


def test_fp8_close_rejects_codes_one_step_off():
    T, D = 17, 256
    x0, x1 = torch.randn(T, D), torch.randn(T, D)
    q, s = moe.silu_mul_quant(x0, x1)
    a, b = x0.double(), x1.double()
    rq, rs = fp8_row_reference(a * torch.sigmoid(a) * b)
    fp8_close(q, s, rq, rs)
    mutated = (q.view(torch.uint8) + 1).view(torch.float8_e4m3fn)
    with pytest.raises(AssertionError, match="one step off"):
        fp8_close(mutated, s, rq, rs)
