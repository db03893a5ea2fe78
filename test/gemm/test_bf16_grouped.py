"""BF16 grouped GEMMs (torch.ops.mslk.bf16bf16bf16_grouped*) vs float64 math: stacked, grad,
wgrad (incl. output_accum), dynamic, list forms; empty, one-row and very unequal groups, rows
past sum(M_sizes) (zeros), gradients against torch.autograd of the reference."""

import pytest
import torch

from test.gemm.bf16_grouped_reference import BF16, assert_close, rand_bf16, ref_grad, ref_stacked, ref_wgrad

ops = torch.ops.mslk

SIZES = [
    [3, 0, 1, 7],          # empty and one-row groups
    [1, 1, 1],             # one row each
    [0, 0, 70, 0],         # a single non-empty group (crosses a 64-row tile)
    [130, 2, 0, 1, 65],    # very unequal
    [0],                   # one empty group
]


@pytest.mark.parametrize("sizes", SIZES)
@pytest.mark.parametrize("extra", [0, 5])
@pytest.mark.parametrize("ms_dtype", [torch.int32, torch.int64])
def test_stacked_grad_wgrad(device, sizes, extra, ms_dtype):
    G, N, K = len(sizes), 72, 40
    T = sum(sizes) + extra  # `extra` rows past every group
    x, w, dy = rand_bf16((T, K), device), rand_bf16((G, N, K), device), rand_bf16((T, N), device)
    ms = torch.tensor(sizes, dtype=ms_dtype, device=device)

    y = ops.bf16bf16bf16_grouped_stacked(x, w, ms)
    assert y.shape == (T, N) and y.dtype == BF16 and y.device == x.device
    assert_close(y, ref_stacked(x, w, sizes), K)
    assert torch.count_nonzero(y[sum(sizes):]) == 0

    dx = ops.bf16bf16bf16_grouped_grad(dy, w, ms)
    assert dx.shape == (T, K) and dx.dtype == BF16
    assert_close(dx, ref_grad(dy, w, sizes), N)
    assert torch.count_nonzero(dx[sum(sizes):]) == 0

    dw = ops.bf16bf16bf16_grouped_wgrad(dy, x, ms)
    assert dw.shape == (G, N, K) and dw.dtype == BF16
    assert_close(dw, ref_wgrad(dy, x, sizes), max(sizes))


def test_out_and_num_sms(device):
    sizes, N, K = [5, 9], 16, 24
    x, w = rand_bf16((14, K), device), rand_bf16((2, N, K), device)
    ms = torch.tensor(sizes, device=device)
    out = torch.full((14, N), 7.0, dtype=BF16, device=device)
    r = ops.bf16bf16bf16_grouped_stacked(x, w, ms, out, num_sms=4)
    assert r.data_ptr() == out.data_ptr()
    assert_close(out, ref_stacked(x, w, sizes), K)
    dy = rand_bf16((14, N), device)
    dxo = torch.empty(14, K, dtype=BF16, device=device)
    assert ops.bf16bf16bf16_grouped_grad(dy, w, ms, out=dxo).data_ptr() == dxo.data_ptr()
    assert_close(dxo, ref_grad(dy, w, sizes), N)


def test_strided_inputs(device):
    sizes, N, K = [4, 6], 24, 32
    xb = rand_bf16((10, 2 * K), device)
    x = xb[:, :K]  # row stride 2K
    wb = rand_bf16((2, N, 2 * K), device)
    w = wb[..., K:]
    ms = torch.tensor(sizes, device=device)
    assert_close(ops.bf16bf16bf16_grouped_stacked(x, w, ms), ref_stacked(x, w, sizes), K)
    dy = rand_bf16((10, 2 * N), device)[:, ::1][:, :N]
    assert_close(ops.bf16bf16bf16_grouped_grad(dy, w, ms), ref_grad(dy, w, sizes), N)
    assert_close(ops.bf16bf16bf16_grouped_wgrad(dy, x, ms), ref_wgrad(dy, x, sizes), max(sizes))


def test_wgrad_output_accum(device):
    sizes, N, K = [3, 0, 8], 20, 12
    dy, x = rand_bf16((11, N), device), rand_bf16((11, K), device)
    ms = torch.tensor(sizes, dtype=torch.int32, device=device)
    base = torch.randn(3, N, K, device=device)
    acc = base.clone()
    r = ops.bf16bf16bf16_grouped_wgrad(dy, x, ms, acc, True)
    assert r.data_ptr() == acc.data_ptr() and acc.dtype == torch.float32
    want = base.cpu().double() + ref_wgrad(dy, x, sizes)
    assert torch.allclose(acc.cpu().double(), want, rtol=1e-5, atol=1e-4)
    # not accumulating into a float32 output: overwritten with the float32 sum
    o32 = torch.full((3, N, K), 5.0, device=device)
    ops.bf16bf16bf16_grouped_wgrad(dy, x, ms, o32)
    assert torch.allclose(o32.cpu().double(), ref_wgrad(dy, x, sizes), rtol=1e-5, atol=1e-4)


def test_gradients_match_autograd(device):
    sizes, N, K = [6, 0, 1, 9], 24, 16
    T = sum(sizes) + 2
    x, w, dy = rand_bf16((T, K), device), rand_bf16((len(sizes), N, K), device), rand_bf16((T, N), device)
    ms = torch.tensor(sizes, device=device)
    xr = x.cpu().double().requires_grad_()
    wr = w.cpu().double().requires_grad_()
    # the reference forward, differentiable: per-group products, rows past the groups zero
    outs, r = [], 0
    for g, m in enumerate(sizes):
        outs.append(xr[r:r + m] @ wr[g].T)
        r += m
    outs.append(xr[r:] @ torch.zeros(K, N, dtype=torch.float64))
    torch.cat(outs).backward(dy.cpu().double())
    assert_close(ops.bf16bf16bf16_grouped_grad(dy, w, ms), xr.grad, N)
    assert_close(ops.bf16bf16bf16_grouped_wgrad(dy, x, ms), wr.grad, max(sizes))


def test_dynamic(device):
    G, M, N, K = 3, 10, 16, 24
    x, w = rand_bf16((G, M, K), device), rand_bf16((G, N, K), device)
    zs = torch.tensor([4, 0, 10], dtype=torch.int64, device=device)
    y = ops.bf16bf16bf16_grouped_dynamic(x, w, zs)
    assert y.shape == (G, M, N)
    for g, z in enumerate(zs.tolist()):
        assert_close(y[g, :z], x[g, :z].cpu().double() @ w[g].cpu().double().T, K)
        assert torch.count_nonzero(y[g, z:]) == 0


def test_list_forms(device):
    Ms, Ns, Ks = [5, 0, 1, 33], [16, 16, 8, 24], [32, 16, 40, 8]
    X = [rand_bf16((m, k), device) for m, k in zip(Ms, Ks)]
    W = [rand_bf16((n, k), device) for n, k in zip(Ns, Ks)]
    outs = ops.bf16bf16bf16_grouped(X, W)
    assert len(outs) == 4
    for o, x, w in zip(outs, X, W):
        assert o.shape == (x.shape[0], w.shape[0])
        assert_close(o, x.cpu().double() @ w.cpu().double().T, x.shape[1])
    W2 = [rand_bf16((16, k), device) for k in Ks]
    cat = ops.bf16bf16bf16_grouped_cat(X, W2)
    assert cat.shape == (sum(Ms), 16)
    assert torch.equal(cat, torch.cat(ops.bf16bf16bf16_grouped(X, W2)))


def test_zero_k_and_empty(device):
    ms = torch.tensor([2, 1], device=device)
    y = ops.bf16bf16bf16_grouped_stacked(rand_bf16((3, 0), device), rand_bf16((2, 8, 0), device), ms)
    assert y.shape == (3, 8) and torch.count_nonzero(y) == 0
    y = ops.bf16bf16bf16_grouped_stacked(rand_bf16((0, 8), device), rand_bf16((2, 8, 8), device),
                                         torch.zeros(2, dtype=torch.int64, device=device))
    assert y.shape == (0, 8)
    dw = ops.bf16bf16bf16_grouped_wgrad(rand_bf16((0, 8), device), rand_bf16((0, 4), device),
                                        torch.zeros(2, dtype=torch.int64, device=device))
    assert dw.shape == (2, 8, 4) and torch.count_nonzero(dw) == 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_graph_capture():
    sizes, N, K = [40, 0, 90], 64, 64
    x, w = rand_bf16((140, K), "cuda"), rand_bf16((3, N, K), "cuda")
    ms = torch.tensor(sizes, dtype=torch.int32, device="cuda")
    ops.bf16bf16bf16_grouped_stacked(x, w, ms)  # warm-up
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = ops.bf16bf16bf16_grouped_stacked(x, w, ms)
    ms.copy_(torch.tensor([100, 30, 0], dtype=torch.int32))
    g.replay()
    torch.cuda.synchronize()
    assert_close(y, ref_stacked(x, w, [100, 30, 0]), K)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("E,m,N,K", [(8, 256, 512, 256), (16, 33, 384, 160)])
def test_cuda_matches_cpu_reference(E, m, N, K):
    sizes = [m * (i % 3) for i in range(E)]
    T = sum(sizes) + 3
    x, w, dy = rand_bf16((T, K), "cuda"), rand_bf16((E, N, K), "cuda"), rand_bf16((T, N), "cuda")
    ms = torch.tensor(sizes, device="cuda")
    assert_close(ops.bf16bf16bf16_grouped_stacked(x, w, ms), ref_stacked(x, w, sizes), K)
    assert_close(ops.bf16bf16bf16_grouped_grad(dy, w, ms), ref_grad(dy, w, sizes), N)
    assert_close(ops.bf16bf16bf16_grouped_wgrad(dy, x, ms), ref_wgrad(dy, x, sizes), max(sizes))
