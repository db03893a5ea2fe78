"""Grouped rowwise FP8 GEMMs: lists, concatenated, stacked (M_sizes), dynamic
(zero_start_index_M) and the offset-grouped grouped_mm layouts; empty and one-row groups."""

import pytest
import torch

from test.gemm.fp8_gemm_reference import check, rand_fp8, rand_scale

ops = torch.ops.mslk


def test_grouped_list_and_cat(device):
    Ms, N, Ks = [5, 0, 1, 33], 40, [64, 64, 32, 128]
    XQ = [rand_fp8((m, k), device) for m, k in zip(Ms, Ks)]
    WQ = [rand_fp8((N, k), device) for k in Ks]
    XS = [rand_scale(m, device) for m in Ms]
    WS = [rand_scale(N, device) for _ in Ms]
    outs = ops.f8f8bf16_rowwise_grouped(XQ, WQ, XS, WS)
    assert len(outs) == 4
    for o, x, w, xs, ws in zip(outs, XQ, WQ, XS, WS):
        check(o, x, w, xs, ws)
    cat = ops.f8f8bf16_rowwise_grouped_cat(XQ, WQ, XS, WS)
    assert cat.shape == (sum(Ms), N)
    assert torch.equal(cat, torch.cat(outs))
    # per-group N may differ for the list form
    outs = ops.f8f8bf16_rowwise_grouped(XQ[:2], [WQ[0], rand_fp8((8, 64), device)], XS[:2],
                                        [WS[0], rand_scale(8, device)])
    assert outs[1].shape == (0, 8)


@pytest.mark.parametrize("ms_dtype", [torch.int32, torch.int64])
def test_grouped_stacked(device, ms_dtype):
    G, N, K = 4, 48, 96
    sizes = [3, 0, 1, 7]
    total = sum(sizes) + 2  # two rows past every group: zero
    xq, wq = rand_fp8((total, K), device), rand_fp8((G, N, K), device)
    xs, ws = rand_scale(total, device), rand_scale(N, device, (G,))
    out = ops.f8f8bf16_rowwise_grouped_stacked(xq, wq, xs, ws, torch.tensor(sizes, dtype=ms_dtype, device=device))
    assert out.shape == (total, N)
    r = 0
    for g, m in enumerate(sizes):
        check(out[r:r + m], xq[r:r + m], wq[g], xs[r:r + m], ws[g])
        r += m
    assert torch.all(out[r:] == 0)


@pytest.mark.parametrize("zeroing", [True, False])
def test_grouped_dynamic(device, zeroing):
    G, M, N, K = 3, 9, 32, 64
    xq, wq = rand_fp8((G, M, K), device), rand_fp8((G, N, K), device)
    xs, ws = rand_scale(M, device, (G,)), rand_scale(N, device, (G,))
    zs = torch.tensor([0, 1, 9], dtype=torch.int64, device=device)
    out = ops.f8f8bf16_rowwise_grouped_dynamic(xq, wq, xs, ws, zs, zeroing)
    assert out.shape == (G, M, N)
    for g, n in enumerate([0, 1, 9]):
        check(out[g, :n], xq[g, :n], wq[g], xs[g, :n], ws[g])
        assert torch.all(out[g, n:] == 0)


def test_grouped_mm_2d_3d(device):
    G, N, K = 3, 40, 64
    ends = [4, 4, 13]  # group 1 empty
    xq, wq = rand_fp8((15, K), device), rand_fp8((G, N, K), device)
    xs, ws = rand_scale(15, device), rand_scale(N, device, (G,))
    out = ops.f8f8bf16_rowwise_grouped_mm(xq, wq, xs, ws, torch.tensor(ends, dtype=torch.int32, device=device))
    assert out.shape == (15, N)
    r = 0
    for g, e in enumerate(ends):
        check(out[r:e], xq[r:e], wq[g], xs[r:e], ws[g])
        r = e
    assert torch.all(out[13:] == 0)
    buf = torch.empty(15, N, dtype=torch.bfloat16, device=device)
    res = ops.f8f8bf16_rowwise_grouped_mm(xq, wq, xs, ws, torch.tensor(ends, dtype=torch.int32, device=device), buf)
    assert res.data_ptr() == buf.data_ptr() and torch.equal(buf, out)


def test_grouped_mm_3d_2d(device):
    G, M, K = 2, 6, 32
    ends = [16, 40]
    xq, wq = rand_fp8((G, M, K), device), rand_fp8((40, K), device)
    xs, ws = rand_scale(M, device, (G,)), rand_scale(40, device)
    out = ops.f8f8bf16_rowwise_grouped_mm(xq, wq, xs, ws, torch.tensor(ends, dtype=torch.int32, device=device))
    assert out.shape == (M, 40)
    check(out[:, :16], xq[0], wq[:16], xs[0], ws[:16])
    check(out[:, 16:], xq[1], wq[16:], xs[1], ws[16:])


def test_grouped_mm_3d_3d(device):
    G, M, N, K = 2, 5, 24, 48
    xq, wq = rand_fp8((G, M, K), device), rand_fp8((G, N, K), device)
    xs, ws = rand_scale(M, device, (G,)), rand_scale(N, device, (G,))
    out = ops.f8f8bf16_rowwise_grouped_mm(xq, wq, xs, ws)
    for g in range(G):
        check(out[g], xq[g], wq[g], xs[g], ws[g])


def test_grouped_mm_2d_2d_k_groups(device):
    M, N = 7, 16
    ends = [32, 32, 80]  # group 1 has K = 0: zeros
    xq, wq = rand_fp8((M, 80), device), rand_fp8((N, 80), device)
    xs, ws = rand_scale(M, device, (3,)), rand_scale(N, device, (3,))
    out = ops.f8f8bf16_rowwise_grouped_mm(xq, wq, xs, ws, torch.tensor(ends, dtype=torch.int32, device=device))
    assert out.shape == (3, M, N)
    check(out[0], xq[:, :32], wq[:, :32], xs[0], ws[0])
    assert torch.all(out[1] == 0)
    check(out[2], xq[:, 32:], wq[:, 32:], xs[2], ws[2])


# ---- the device-side grouped kernel (CUDA) against the per-group host path and float64 --------

@pytest.mark.parametrize("sizes", [[0, 300, 1, 0, 77, 128, 2, 0], [1] * 300, [0, 0, 0], [513]])
def test_grouped_stacked_many_shapes(device, grouped_kernel, sizes):
    G, N, K = len(sizes), 136, 144  # N, K not multiples of the 128 tile
    total = sum(sizes) + 5
    xq, wq = rand_fp8((total, K), device), rand_fp8((G, N, K), device)
    xs, ws = rand_scale(total, device), rand_scale(N, device, (G,))
    ms = torch.tensor(sizes, dtype=torch.int64, device=device)
    out = ops.f8f8bf16_rowwise_grouped_stacked(xq, wq, xs, ws, ms)
    r = 0
    for g, m in enumerate(sizes):
        if m:
            check(out[r:r + m], xq[r:r + m], wq[g], xs[r:r + m], ws[g])
        r += m
    assert torch.all(out[r:] == 0)


def test_grouped_mm_2d_3d_strided(device, grouped_kernel):
    G, N, K = 5, 64, 128
    ends = [0, 40, 41, 41, 200]
    big = rand_fp8((200, 2 * K), device)
    xq = big[:, K:]  # row stride 2K, last stride 1
    wq = rand_fp8((G, N, K), device)
    xs, ws = rand_scale(200, device), rand_scale(N, device, (G,))
    out = torch.full((200, N), float("nan"), dtype=torch.bfloat16, device=device)  # poisoned output buffer
    ops.f8f8bf16_rowwise_grouped_mm(xq, wq, xs, ws, torch.tensor(ends, dtype=torch.int32, device=device), out)
    r = 0
    for g, e in enumerate(ends):
        if e > r:
            check(out[r:e], xq[r:e], wq[g], xs[r:e], ws[g])
        r = e


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_grouped_stacked_is_graph_capturable():
    # The device path reads M_sizes on the GPU only: capturing it in a CUDA graph works (a host
    # sync would raise during capture), and replays follow new sizes written into the same tensor.
    G, N, K, total = 4, 128, 256, 96
    xq, wq = rand_fp8((total, K), "cuda"), rand_fp8((G, N, K), "cuda")
    xs, ws = rand_scale(total, "cuda"), rand_scale(N, "cuda", (G,))
    ms = torch.tensor([10, 0, 50, 20], dtype=torch.int64, device="cuda")
    ops.f8f8bf16_rowwise_grouped_stacked(xq, wq, xs, ws, ms)  # warm-up outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = ops.f8f8bf16_rowwise_grouped_stacked(xq, wq, xs, ws, ms)
    for sizes in ([10, 0, 50, 20], [0, 96, 0, 0], [1, 2, 3, 4]):
        ms.copy_(torch.tensor(sizes))
        graph.replay()
        torch.cuda.synchronize()
        r = 0
        for g, m in enumerate(sizes):
            if m:
                check(out[r:r + m], xq[r:r + m], wq[g], xs[r:r + m], ws[g])
            r += m
        assert torch.all(out[r:] == 0)


@pytest.mark.parametrize("ks", [[64, 128, 32, 256], [64, 72, 32, 256]])  # K=72: the whole list loops
def test_grouped_list_and_cat_paths(device, grouped_kernel, ks):
    Ms, Ns = [17, 0, 1, 130], [40, 136, 8, 264]
    XQ = [rand_fp8((m, k), device) for m, k in zip(Ms, ks)]
    WQ = [rand_fp8((n, k), device) for n, k in zip(Ns, ks)]
    XS = [rand_scale(m, device) for m in Ms]
    WS = [rand_scale(n, device) for n in Ns]
    outs = ops.f8f8bf16_rowwise_grouped(XQ, WQ, XS, WS)
    for o, x, w, xs, ws, m, n in zip(outs, XQ, WQ, XS, WS, Ms, Ns):
        assert o.shape == (m, n)
        if m:
            check(o, x, w, xs, ws)
    same_n = [rand_fp8((48, k), device) for k in ks]
    ws48 = [rand_scale(48, device) for _ in Ms]
    cat = ops.f8f8bf16_rowwise_grouped_cat(XQ, same_n, XS, ws48)
    assert cat.shape == (sum(Ms), 48)
    r = 0
    for x, w, xs, ws, m in zip(XQ, same_n, XS, ws48, Ms):
        if m:
            check(cat[r:r + m], x, w, xs, ws)
        r += m


@pytest.mark.parametrize("zs", [[0, 1, 130, 77], [130, 130, 130, 130], [0, 0, 0, 0], [200, -3, 64, 5]])
def test_grouped_dynamic_paths(device, grouped_kernel, zs):
    # device path: only the first zero_start_index_M[g] rows of each group are computed (values
    # clamped to [0, M]); the rest come back zero on both paths
    G, M, N, K = 4, 130, 136, 144
    xq, wq = rand_fp8((G, M, K), device), rand_fp8((G, N, K), device)
    xs, ws = rand_scale(M, device, (G,)), rand_scale(N, device, (G,))
    out = ops.f8f8bf16_rowwise_grouped_dynamic(xq, wq, xs, ws, torch.tensor(zs, device=device))
    for g, n in enumerate(zs):
        n = min(max(n, 0), M)
        if n:
            check(out[g, :n], xq[g, :n], wq[g], xs[g, :n], ws[g])
        assert torch.all(out[g, n:] == 0)
