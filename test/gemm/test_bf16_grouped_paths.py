"""bf16bf16bf16_grouped_stacked on both CUDA kernel paths vs the float64 CPU reference: the
SIMT kernel and the default CUTLASS sm90 ptr-array grouped GEMM (chosen per call by
MSLK_BF16_GROUPED_KERNEL=simt|cutlass|auto, with device-side argument setup). Shapes meet the
CUTLASS path's TMA rules (N, K, row strides multiples of 8) so that it really runs; a profiler
check proves it does. Empty groups, rows past sum(M_sizes), G > 256 (the setup kernel's scan
runs in several steps), int32/int64 sizes, strided X / W, num_sms, CUDA-graph replay with new
sizes, a float32 forward output, and a misaligned shape that must fall back to SIMT."""

import pytest
import torch

from test.gemm.bf16_grouped_reference import BF16, assert_close, rand_bf16, ref_grad, ref_stacked, ref_wgrad

ops = torch.ops.mslk
ENV = "MSLK_BF16_GROUPED_KERNEL"

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.fixture(params=["simt", "cutlass"])
def path(request, monkeypatch):
    monkeypatch.setenv(ENV, request.param)
    return request.param


SIZES = [
    [3, 0, 1, 7],                  # empty and one-row groups
    [0, 0, 200, 0],                # one non-empty group, several 128-row tiles
    [130, 2, 0, 1, 65, 300],       # very unequal
    [0, 0],                        # every group empty: the output is all zeros
    [64] * 8,                      # uniform, tile-exact
    [5] * 40,                      # many small groups (the small-M bucket)
]


@pytest.mark.parametrize("sizes", SIZES)
@pytest.mark.parametrize("extra", [0, 9])
@pytest.mark.parametrize("ms_dtype", [torch.int32, torch.int64])
def test_stacked(path, sizes, extra, ms_dtype):
    G, N, K = len(sizes), 136, 72
    T = sum(sizes) + extra  # `extra` rows past every group must come back zero; T = 0: empty output
    x, w = rand_bf16((T, K), "cuda"), rand_bf16((G, N, K), "cuda")
    ms = torch.tensor(sizes, dtype=ms_dtype, device="cuda")
    # a dirty preallocated output: every row must be written (groups, and zeros past them)
    out = torch.full((T, N), 3.0, dtype=BF16, device="cuda")
    y = ops.bf16bf16bf16_grouped_stacked(x, w, ms, out)
    assert y.data_ptr() == out.data_ptr()
    assert_close(y, ref_stacked(x, w, sizes), K)
    assert torch.count_nonzero(y[sum(sizes):]) == 0


@pytest.mark.parametrize("sizes", SIZES)
def test_stacked_float32_out(path, sizes):
    # the forward into a float32 `out` (grouped_gemm's bias / token-weight epilogue): the float32
    # sums unrounded, zeros past the groups
    G, N, K = len(sizes), 136, 72
    T = sum(sizes) + 9
    x, w = rand_bf16((T, K), "cuda"), rand_bf16((G, N, K), "cuda")
    ms = torch.tensor(sizes, dtype=torch.int32, device="cuda")
    out = torch.full((T, N), 3.0, device="cuda")
    assert ops.bf16bf16bf16_grouped_stacked(x, w, ms, out).data_ptr() == out.data_ptr()
    torch.testing.assert_close(out.cpu().double(), ref_stacked(x, w, sizes), rtol=1e-5, atol=2e-4)
    assert torch.count_nonzero(out[sum(sizes):]) == 0


@pytest.mark.parametrize("sizes", SIZES)
@pytest.mark.parametrize("extra", [0, 9])
def test_grad(path, sizes, extra):
    # dX = dY_g @ W[g]: on the CUTLASS path W[g] is the N-major B operand
    G, N, K = len(sizes), 136, 72
    T = sum(sizes) + extra  # T = 0: an empty output, nothing launched
    dy, w = rand_bf16((T, N), "cuda"), rand_bf16((G, N, K), "cuda")
    ms = torch.tensor(sizes, dtype=torch.int64, device="cuda")
    out = torch.full((T, K), 3.0, dtype=BF16, device="cuda")  # dirty: every row must be written
    dx = ops.bf16bf16bf16_grouped_grad(dy, w, ms, out)
    assert dx.data_ptr() == out.data_ptr()
    assert_close(dx, ref_grad(dy, w, sizes), N)
    assert torch.count_nonzero(dx[sum(sizes):]) == 0


@pytest.mark.parametrize("sizes", SIZES)
@pytest.mark.parametrize("out_kind", ["bf16", "fp32", "fp32_accum"])
def test_wgrad(path, sizes, out_kind):
    # dW[g] = dY_g^T @ X_g, grouped along the reduction; empty groups give 0 (or leave the
    # accumulated output as it was); rows past sum(M_sizes) take no part
    G, N, K = len(sizes), 136, 72
    T = sum(sizes) + 3
    dy, x = rand_bf16((T, N), "cuda"), rand_bf16((T, K), "cuda")
    ms = torch.tensor(sizes, dtype=torch.int64, device="cuda")
    want = ref_wgrad(dy, x, sizes)
    if out_kind == "bf16":
        out = torch.full((G, N, K), 3.0, dtype=BF16, device="cuda")  # dirty: every group written
        dw = ops.bf16bf16bf16_grouped_wgrad(dy, x, ms, out)
        assert_close(dw, want, max(sizes + [1]))
        return
    base = torch.randn(G, N, K, device="cuda")
    out = base.clone() if out_kind == "fp32_accum" else torch.full((G, N, K), 3.0, device="cuda")
    dw = ops.bf16bf16bf16_grouped_wgrad(dy, x, ms, out, out_kind == "fp32_accum")
    if out_kind == "fp32_accum":
        want = want + base.cpu().double()
    torch.testing.assert_close(dw.cpu().double(), want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("G", [300, 600])
def test_many_groups(path, G):
    gen = torch.Generator().manual_seed(G)
    sizes = torch.randint(0, 6, (G,), generator=gen).tolist()
    N, K = 64, 64
    T = sum(sizes) + 3
    x, w = rand_bf16((T, K), "cuda"), rand_bf16((G, N, K), "cuda")
    ms = torch.tensor(sizes, dtype=torch.int64, device="cuda")
    y = ops.bf16bf16bf16_grouped_stacked(x, w, ms)
    assert_close(y, ref_stacked(x, w, sizes), K)


def test_large_groups(path):
    sizes, N, K = [1000, 0, 777, 2048], 512, 384
    T = sum(sizes) + 17
    x, w = rand_bf16((T, K), "cuda"), rand_bf16((len(sizes), N, K), "cuda")
    ms = torch.tensor(sizes, dtype=torch.int32, device="cuda")
    assert_close(ops.bf16bf16bf16_grouped_stacked(x, w, ms), ref_stacked(x, w, sizes), K)


def test_strided_and_num_sms(path):
    sizes, N, K = [40, 0, 90, 7], 64, 64
    T = sum(sizes)
    x = rand_bf16((T, 2 * K), "cuda")[:, K:]          # row stride 2K
    w = rand_bf16((len(sizes), N, 3 * K), "cuda")[..., :K]  # row stride 3K, group stride 3NK
    ms = torch.tensor(sizes, device="cuda")
    ref = ref_stacked(x, w, sizes)
    assert_close(ops.bf16bf16bf16_grouped_stacked(x, w, ms), ref, K)
    assert_close(ops.bf16bf16bf16_grouped_stacked(x, w, ms, num_sms=3), ref, K)


def test_misaligned_falls_back(path):
    sizes, N, K = [5, 9], 20, 36  # N % 8 != 0: TMA cannot store rows; the SIMT kernel runs
    x, w = rand_bf16((14, K), "cuda"), rand_bf16((2, N, K), "cuda")
    ms = torch.tensor(sizes, device="cuda")
    assert_close(ops.bf16bf16bf16_grouped_stacked(x, w, ms), ref_stacked(x, w, sizes), K)


def test_negative_and_oversized_sizes(path):
    # device-side semantics of the contract: a negative size counts as 0, groups are cut at total_M
    # (the CUDA glue never reads device sizes: that would need a host sync)
    sizes_dev, N, K = [4, -3, 50], 64, 32
    T = 20
    x, w = rand_bf16((T, K), "cuda"), rand_bf16((3, N, K), "cuda")
    ms = torch.tensor(sizes_dev, dtype=torch.int32, device="cuda")
    assert_close(ops.bf16bf16bf16_grouped_stacked(x, w, ms), ref_stacked(x, w, [4, 0, 16]), K)


def test_cuda_graph_capture(path):
    sizes, N, K = [40, 0, 90], 64, 64
    x, w = rand_bf16((140, K), "cuda"), rand_bf16((3, N, K), "cuda")
    ms = torch.tensor(sizes, dtype=torch.int32, device="cuda")
    ops.bf16bf16bf16_grouped_stacked(x, w, ms)  # warm-up
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = ops.bf16bf16bf16_grouped_stacked(x, w, ms)
    for new in ([100, 30, 0], [0, 0, 7], [140, 0, 0]):
        ms.copy_(torch.tensor(new, dtype=torch.int32))
        g.replay()
        torch.cuda.synchronize()
        assert_close(y, ref_stacked(x, w, new), K)


def _kernel_names(fn):
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


def test_env_var_selects_the_kernel(monkeypatch):
    sizes, N, K = [40, 0, 90], 64, 64
    x, w = rand_bf16((130, K), "cuda"), rand_bf16((3, N, K), "cuda")
    ms = torch.tensor(sizes, dtype=torch.int32, device="cuda")
    run = lambda: ops.bf16bf16bf16_grouped_stacked(x, w, ms)  # noqa: E731
    monkeypatch.setenv(ENV, "simt")
    names = _kernel_names(run)
    assert not any("cutlass" in n for n in names), names
    monkeypatch.delenv(ENV, raising=False)  # auto: CUTLASS
    names = _kernel_names(run)
    assert any("cutlass" in n and "GroupProblemShape" in n for n in names), names
    assert any("grouped_setup_kernel" in n and "Bf16GroupedPolicy" in n for n in names), names
    dy = rand_bf16((130, N), "cuda")
    names = _kernel_names(lambda: ops.bf16bf16bf16_grouped_grad(dy, w, ms))
    assert any("cutlass" in n and "GroupProblemShape" in n for n in names), names
    names = _kernel_names(lambda: ops.bf16bf16bf16_grouped_wgrad(dy, x, ms))
    assert any("grouped_setup_kernel" in n and "Bf16WgradPolicy" in n for n in names), names
    out32 = torch.empty(130, N, device="cuda")  # float32 forward: CUTLASS too, not SIMT
    names = _kernel_names(lambda: ops.bf16bf16bf16_grouped_stacked(x, w, ms, out32))
    assert any("cutlass" in n and "GroupProblemShape" in n for n in names), names


@pytest.mark.parametrize("ks", [[64, 128, 32, 256], [64, 72, 36, 256]])  # K=36: the whole list loops
def test_list_and_cat(path, ks):
    # the list forms: one grouped launch from host-built descriptors on the CUTLASS path
    Ms, Ns = [17, 0, 1, 130], [40, 136, 8, 264]
    X = [rand_bf16((m, k), "cuda") for m, k in zip(Ms, ks)]
    W = [rand_bf16((n, k), "cuda") for n, k in zip(Ns, ks)]
    outs = ops.bf16bf16bf16_grouped(X, W)
    for o, x, w in zip(outs, X, W):
        assert o.shape == (x.shape[0], w.shape[0])
        if x.shape[0]:
            assert_close(o, x.cpu().double() @ w.cpu().double().t(), x.shape[1])
    W48 = [rand_bf16((48, k), "cuda") for k in ks]
    cat = ops.bf16bf16bf16_grouped_cat(X, W48)
    r = 0
    for x, w in zip(X, W48):
        m = x.shape[0]
        if m:
            assert_close(cat[r:r + m], x.cpu().double() @ w.cpu().double().t(), x.shape[1])
        r += m


def test_env_var_rejects_unknown_values(monkeypatch):
    x, w = rand_bf16((8, 64), "cuda"), rand_bf16((1, 64, 64), "cuda")
    monkeypatch.setenv(ENV, "fastest")
    with pytest.raises(ValueError, match=r"MSLK_BF16_GROUPED_KERNEL must be auto, cutlass or simt \(or unset\), got 'fastest'"):
        ops.bf16bf16bf16_grouped_stacked(x, w, torch.tensor([8], dtype=torch.int32, device="cuda"))


def _rows():
    from bench.gemm.bench_bf16_grouped import config_rows

    return config_rows()


@pytest.mark.parametrize("row", [r for r, _ in _rows()])
def test_every_cutlass_row(monkeypatch, row):
    """Each row of bf16_grouped_configs.h, forced (MSLK_BF16_GROUPED_CONFIG), on unequal groups with
    tile tails, fwd and dgrad: candidate rows must be right before a bucket may name them."""
    monkeypatch.setenv(ENV, "cutlass")
    monkeypatch.setenv("MSLK_BF16_GROUPED_CONFIG", str(row))
    sizes, N, K = [130, 0, 1, 300, 64], 264, 200
    x, w = rand_bf16((sum(sizes) + 5, K), "cuda"), rand_bf16((len(sizes), N, K), "cuda")
    ms = torch.tensor(sizes, dtype=torch.int32, device="cuda")
    y = ops.bf16bf16bf16_grouped_stacked(x, w, ms)
    assert_close(y, ref_stacked(x, w, sizes), K)
    assert torch.count_nonzero(y[sum(sizes):]) == 0
    out32 = torch.full((sum(sizes) + 5, N), 3.0, device="cuda")  # the float32 forward of the row
    ops.bf16bf16bf16_grouped_stacked(x, w, ms, out32)
    torch.testing.assert_close(out32.cpu().double(), ref_stacked(x, w, sizes), rtol=1e-5, atol=1e-3)
    dy = rand_bf16((sum(sizes) + 5, N), "cuda")
    assert_close(ops.bf16bf16bf16_grouped_grad(dy, w, ms), ref_grad(dy, w, sizes), N)
