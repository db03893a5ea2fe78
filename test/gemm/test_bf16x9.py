"""bf16x9_gemm (FP32 GEMM from three BF16 parts per operand, nine BF16 products) against float64,
on every device the tests see (the exact CPU reference; the CUTLASS sm90 kernel on Hopper)."""

import math
import re
from pathlib import Path

import pytest
import torch

from test.conftest import requires_cuda

ops = torch.ops.mslk
MS = [1, 2, 7, 16, 64, 1000]
NK = [(136, 256), (257, 100), (8, 1000)]  # N not a multiple of the tile; K not a multiple of 8


def rand(shape, device, seed, wide=False):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    if wide:  # magnitudes over 2^-20 .. 2^20
        x *= torch.exp2(torch.randint(-20, 21, shape, generator=g).double())
    return x.float().to(device)


def ref(A, B):
    a, b = A.double().cpu(), B.double().cpu()
    return a @ b.t(), a.abs() @ b.abs().t()


def check(out, A, B, device):
    exact, mag = ref(A, B)
    err = (out.double().cpu() - exact).abs()
    if device == "cpu":  # one rounding of the exact sum
        assert torch.all(err <= exact.abs() * 2.0**-24 + 1e-300), err.max()
    else:
        # FP32 tensor-core accumulation of the nine products: rounding errors of 2^-24 of
        # sum |a||b| that add up as a random walk over K (4 sqrt(K): 5e-6 at K = 512). A lost
        # middle part (2^-9 of each product) is far above it; the lo part's share is checked
        # by test_ill_conditioned and test_cuda_matches_cpu_closely.
        tol = 4 * math.sqrt(A.shape[1]) * 2.0**-24
        assert torch.all(err <= tol * mag + 1e-30), (err / mag).max()
    return err


@pytest.mark.parametrize("M", MS)
@pytest.mark.parametrize("N,K", NK)
def test_random(device, M, N, K):
    A, B = rand((M, K), device, M + K), rand((N, K), device, N + 7)
    out = ops.bf16x9_gemm(A, B)
    assert out.shape == (M, N) and out.dtype == torch.float32 and out.device.type == device
    check(out, A, B, device)


@pytest.mark.parametrize("M,N,K", [(2048, 4352, 40), (128, 8192, 24)])
def test_both_tile_rows(device, monkeypatch, M, N, K):
    # bf16x9_configs.h, on the parts path: the first shape has 272 tiles of 128 x 256 (row 0 on any
    # Hopper part), the second 32 (row 1, the 64 x 128 tile)
    monkeypatch.setenv("MSLK_BF16X9_KERNEL", "parts")
    A, B = rand((M, K), device, M + 1), rand((N, K), device, N + 2)
    check(ops.bf16x9_gemm(A, B), A, B, device)


# The fused kernel (kernels/bf16x9_fused.cu, 128 x 128 tiles of 64-K stages) at its edges: one row,
# rows and columns past a tile, K not a multiple of the stage or the 16-K step, A rows of a larger
# stride, a K split in two (tiles <= half the SMs, K >= 128) and not.
FUSED = [(1, 130, 4), (65, 257, 68), (129, 136, 196), (128, 4096, 512), (300, 520, 1028), (7, 8, 1000), (256, 8448, 260)]


@requires_cuda
@pytest.mark.parametrize("M,N,K", FUSED)
@pytest.mark.parametrize("kernel", ["fused", "parts"])
def test_kernels(monkeypatch, kernel, M, N, K):
    monkeypatch.setenv("MSLK_BF16X9_KERNEL", kernel)
    A = rand((M, K + 12), "cuda", M + K)[:, 4 : 4 + K]  # row stride K + 12, 16-byte aligned start
    B = rand((N, K), "cuda", N + 3)
    out = ops.bf16x9_gemm(A, B)
    check(out, A, B, "cuda")
    assert torch.equal(out, ops.bf16x9_gemm(A, B))  # the same bits again (a split adds two sums)


# The FMA kernel (kernels/bf16x9_fma.cu; bf16x9_configs.h rows of 2 / 4 / 8 / 16 A rows a pass, 16 or
# 32 B rows a CTA, 256-K chunks of A) at its edges: each row's M and one past it, passes of 16 rows
# (17, 40), N off the CTA's rows, K not a multiple of the 256-K chunk or of a step, one step.
FMA = [(1, 1, 4), (2, 15, 260), (3, 33, 1028), (5, 257, 100), (8, 40, 256), (9, 100, 516), (16, 8, 2000),
       (17, 130, 68), (40, 31, 1000)]
# F(id, max_m, mt, r, lk, p, dot) rows of MSLK_BF16X9_FMA_CONFIGS: (mt, dot) in id order
CONFIGS_H = (Path(__file__).resolve().parents[2] / "csrc/gemm/kernels/bf16x9_configs.h").read_text()
FMA_CONFIGS = [(int(mt), int(dot)) for mt, dot in re.findall(
    r"^\s*F\(\d+,\s*\d+,\s*(\d+),\s*\d+,\s*\d+,\s*\d+,\s*(\d+)\)", CONFIGS_H, re.M)]
FMA_ROWS = len(FMA_CONFIGS)
FMA_MAX_M = int(re.search(r"kBf16x9FmaMaxM = (\d+);", CONFIGS_H).group(1))


@requires_cuda
@pytest.mark.parametrize("M,N,K", FMA)
def test_fma_kernel(monkeypatch, M, N, K):
    monkeypatch.setenv("MSLK_BF16X9_KERNEL", "fma")
    A = rand((M, K + 12), "cuda", M + K)[:, 4 : 4 + K]  # row stride K + 12, 16-byte aligned start
    B = rand((N, K + 4), "cuda", N + 5)[:, :K]
    out = torch.full((M, N + 3), float("nan"), device="cuda")
    ops.bf16x9_gemm(A, B, out[:, :N])  # an output row stride off 16 bytes: stored in place
    check(out[:, :N], A, B, "cuda")
    assert out[:, N:].isnan().all()
    assert torch.equal(out[:, :N], ops.bf16x9_gemm(A, B))  # the same bits again


@requires_cuda
@pytest.mark.parametrize("row", range(FMA_ROWS))  # every row of MSLK_BF16X9_FMA_CONFIGS, forced
@pytest.mark.parametrize("M,N,K", [(5, 100, 516), (19, 37, 260), (40, 70, 388)])
def test_fma_rows(monkeypatch, row, M, N, K):
    monkeypatch.setenv("MSLK_BF16X9_KERNEL", "fma")
    monkeypatch.setenv("MSLK_BF16X9_FMA_CONFIG", str(row))
    A, B = rand((M, K), "cuda", row + M), rand((N, K), "cuda", row + N)
    check(ops.bf16x9_gemm(A, B), A, B, "cuda")


@requires_cuda
@pytest.mark.parametrize("row", [None] + [i for i, (_, dot) in enumerate(FMA_CONFIGS) if dot][:1])
@pytest.mark.parametrize("M", [1, 16])
def test_fma_positive_long_k_within_contract(monkeypatch, M, row):
    # All-positive operands make the running sums grow with K, so one float32 sum over K would
    # round at the size of the whole dot product thousands of times; the kernel splits K over lanes
    # and adds short partials (a chunk's or a step's) into its sums. The op's contract: 1e-6 of
    # sum |a||b|.
    monkeypatch.setenv("MSLK_BF16X9_KERNEL", "fma")
    if row is not None:
        monkeypatch.setenv("MSLK_BF16X9_FMA_CONFIG", str(row))
    g = torch.Generator().manual_seed(23)
    A = torch.rand(M, 16384, generator=g).cuda()
    B = torch.rand(512, 16384, generator=g).cuda()
    exact, mag = ref(A, B)
    err = ((ops.bf16x9_gemm(A, B).double().cpu() - exact).abs() / mag).max().item()
    assert err <= 1e-6, err


@requires_cuda
def test_auto_picks_by_rows(monkeypatch):
    # MSLK_BF16X9_KERNEL=auto: the FMA kernel up to kBf16x9FmaMaxM rows, the fused one above
    # (their sums round differently, so the bits tell them apart).
    K, B = 512, rand((64, 512), "cuda", 24)
    for M, kernel in ((FMA_MAX_M, "fma"), (FMA_MAX_M + 1, "fused")):
        A = rand((M, K), "cuda", M)
        monkeypatch.setenv("MSLK_BF16X9_KERNEL", "auto")
        auto = ops.bf16x9_gemm(A, B)
        outs = {}
        for k in ("fma", "fused"):
            monkeypatch.setenv("MSLK_BF16X9_KERNEL", k)
            outs[k] = ops.bf16x9_gemm(A, B)
        assert not torch.equal(outs["fma"], outs["fused"])
        assert torch.equal(auto, outs[kernel]), (M, kernel)


@requires_cuda
@pytest.mark.parametrize("N", [256, 200])
def test_fused_narrow_tiles_match_wide(monkeypatch, N):
    # Up to kBf16x9FusedNarrowMaxM = 64 rows the fused kernel runs 64 x 128 tiles (two warpgroups on
    # the same rows, 64 columns each), above it 128 x 128 tiles: every output element is the same
    # nine products in the same order either way, and both shapes take the same K split here.
    monkeypatch.setenv("MSLK_BF16X9_KERNEL", "fused")
    A, B = rand((65, 1000), "cuda", 25), rand((N, 1000), "cuda", 26)
    wide = ops.bf16x9_gemm(A, B)
    narrow = ops.bf16x9_gemm(A[:64], B)
    check(narrow, A[:64], B, "cuda")
    assert torch.equal(narrow, wide[:64])


@requires_cuda
def test_kernels_agree_closely(monkeypatch):
    A, B = rand((96, 2048), "cuda", 17), rand((1000, 2048), "cuda", 18)
    outs = []
    for kernel in ("fused", "parts", "fma"):
        monkeypatch.setenv("MSLK_BF16X9_KERNEL", kernel)
        outs.append(ops.bf16x9_gemm(A, B).double().cpu())
    _, mag = ref(A, B)
    for other in outs[1:]:
        assert torch.all((outs[0] - other).abs() <= 1e-6 * mag)


@requires_cuda
def test_fused_long_k_within_contract(monkeypatch):
    # Long K is where the fused kernel's accumulation shows: with all nine products in one wgmma
    # accumulator its error was 2.4-3.7e-6 of sum |a||b| at K = 8192 (the parts path's: under
    # 1e-6), since wgmma aligns each step's small products to the whole sum. Held to the op's
    # 1e-6 contract and to the parts path's error.
    A, B = rand((128, 8192), "cuda", 21), rand((512, 8192), "cuda", 22)
    exact, mag = ref(A, B)
    errs = {}
    for kernel in ("fused", "parts"):
        monkeypatch.setenv("MSLK_BF16X9_KERNEL", kernel)
        errs[kernel] = ((ops.bf16x9_gemm(A, B).double().cpu() - exact).abs() / mag).max().item()
    assert errs["fused"] <= 1e-6 and errs["fused"] <= 2 * errs["parts"] + 1e-7, errs


@requires_cuda
def test_kernel_variable(monkeypatch):
    A, B = rand((4, 6), "cuda", 19), rand((8, 6), "cuda", 20)
    monkeypatch.setenv("MSLK_BF16X9_KERNEL", "fused")  # K = 6: not a multiple of 4
    with pytest.raises(ValueError, match=r"MSLK_BF16X9_KERNEL=fused needs K .*K=6"):
        ops.bf16x9_gemm(A, B)
    monkeypatch.setenv("MSLK_BF16X9_KERNEL", "fma")
    with pytest.raises(ValueError, match=r"MSLK_BF16X9_KERNEL=fma needs K .*K=6"):
        ops.bf16x9_gemm(A, B)
    monkeypatch.setenv("MSLK_BF16X9_KERNEL", "auto")  # falls back to the parts path
    check(ops.bf16x9_gemm(A, B), A, B, "cuda")
    monkeypatch.setenv("MSLK_BF16X9_FMA_CONFIG", str(FMA_ROWS))
    with pytest.raises(ValueError, match=f"MSLK_BF16X9_FMA_CONFIG must be a whole number from 0 to {FMA_ROWS - 1}"):
        ops.bf16x9_gemm(A, B)
    monkeypatch.delenv("MSLK_BF16X9_FMA_CONFIG")
    monkeypatch.setenv("MSLK_BF16X9_KERNEL", "fast")
    with pytest.raises(ValueError, match="MSLK_BF16X9_KERNEL must be auto, fused, parts or fma"):
        ops.bf16x9_gemm(A, B)


@pytest.mark.parametrize("M,N,K", [(64, 136, 512), (7, 40, 96)])
def test_wide_magnitudes(device, M, N, K):
    A, B = rand((M, K), device, 1, wide=True), rand((N, K), device, 2, wide=True)
    check(ops.bf16x9_gemm(A, B), A, B, device)


def test_ill_conditioned(device):
    # [A, -A + d] . [B, B] = d . B: the exact sums are ~1e-4 of the terms.
    M, N, K = 33, 72, 128
    A, B = rand((M, K), device, 3), rand((N, K), device, 4)
    d = rand((M, K), device, 5) * 1e-4
    A2, B2 = torch.cat([A, -A + d], 1), torch.cat([B, B], 1)
    out = ops.bf16x9_gemm(A2, B2)
    err = check(out, A2, B2, device)
    exact, mag = ref(A2, B2)
    assert exact.abs().max() < 1e-2 * mag.max()  # the sums do cancel
    assert err.max() <= 1e-6 * mag.max()


def test_output_argument(device):
    A, B = rand((9, 40), device, 6), rand((24, 40), device, 7)
    out = torch.full((9, 24), float("nan"), device=device)
    assert ops.bf16x9_gemm(A, B, out) is out
    assert torch.equal(out, ops.bf16x9_gemm(A, B))
    # a strided output (rows of 30 floats: not 16-byte multiples) takes the padded path on CUDA
    big = torch.zeros(9, 30, device=device)
    ops.bf16x9_gemm(A, B, output=big[:, 3:27])
    assert torch.equal(big[:, 3:27], out) and not big[:, :3].any() and not big[:, 27:].any()


def test_strided_operands(device):
    base = rand((20, 136), device, 8)
    A, B = base[:7, 8:104], rand((50, 96), device, 9)[::2]  # row strides 136 and 192
    check(ops.bf16x9_gemm(A, B), A, B, device)


def test_empty(device):
    assert ops.bf16x9_gemm(torch.empty(0, 8, device=device), torch.ones(3, 8, device=device)).shape == (0, 3)
    out = ops.bf16x9_gemm(torch.ones(2, 0, device=device), torch.ones(3, 0, device=device))
    assert out.shape == (2, 3) and not out.any()


def test_three_bf16_parts_are_exact():
    # The decomposition the CUDA kernel uses: hi = bf16(x), mid = bf16(x - hi), lo = bf16(x - hi - mid).
    x = rand((4096,), "cpu", 10, wide=True)
    hi = x.bfloat16().float()
    mid = (x - hi).bfloat16().float()
    lo = (x - hi - mid).bfloat16().float()
    assert torch.equal(hi.double() + mid.double() + lo.double(), x.double())


@pytest.mark.parametrize(
    "args,match",
    [
        (lambda d: (torch.ones(2, 8, device=d, dtype=torch.bfloat16), torch.ones(3, 8, device=d)), "'A'"),
        (lambda d: (torch.ones(2, 8, device=d), torch.ones(3, 8, device=d, dtype=torch.float64)), "'B'"),
        (lambda d: (torch.ones(2, 2, 8, device=d), torch.ones(3, 8, device=d)), "'A'"),
        (lambda d: (torch.ones(2, 8, device=d), torch.ones(3, 9, device=d)), "same K"),
        (lambda d: (torch.ones(2, 16, device=d)[:, ::2], torch.ones(3, 8, device=d)), "'A'"),
    ],
)
def test_errors(device, args, match):
    with pytest.raises((ValueError, TypeError), match=match):
        ops.bf16x9_gemm(*args(device))


def test_output_errors(device):
    A, B = torch.ones(2, 8, device=device), torch.ones(3, 8, device=device)
    with pytest.raises(ValueError, match="'output'"):
        ops.bf16x9_gemm(A, B, torch.empty(3, 2, device=device))
    with pytest.raises(TypeError, match="'output'"):
        ops.bf16x9_gemm(A, B, torch.empty(2, 3, device=device, dtype=torch.bfloat16))


def test_opcheck(device):
    A, B = rand((5, 24), device, 11), rand((12, 24), device, 12)
    torch.library.opcheck(ops._bf16x9_gemm_new.default, (A, B))
    torch.library.opcheck(ops._bf16x9_gemm_into.default, (A, B, torch.empty(5, 12, device=device)))
    torch.library.opcheck(ops.bf16x9_gemm.default, (A, B))
    # with `output` the public op returns it: the schema cannot declare that alias (as for the
    # other routers), so test_schema is left out there
    torch.library.opcheck(ops.bf16x9_gemm.default, (A, B, torch.empty(5, 12, device=device)),
                          test_utils=("test_autograd_registration", "test_faketensor"))


def test_torch_compile_fullgraph(device):
    torch._dynamo.reset()
    A, B = rand((5, 24), device, 13), rand((12, 24), device, 14)

    def f(A, B):
        out = torch.empty(A.shape[0], B.shape[0], device=A.device)
        ops.bf16x9_gemm(A, B, out)
        return ops.bf16x9_gemm(A, B) * 2, out

    e, c = f(A, B), torch.compile(f, fullgraph=True)(A, B)
    for x, y in zip(e, c):
        assert torch.equal(x, y)


@requires_cuda
def test_cuda_matches_cpu_closely():
    A, B = rand((130, 264), "cpu", 15), rand((200, 264), "cpu", 16)
    cpu = ops.bf16x9_gemm(A, B)
    gpu = ops.bf16x9_gemm(A.cuda(), B.cuda()).cpu()
    _, mag = ref(A, B)
    assert torch.all((gpu.double() - cpu.double()).abs() <= 1e-6 * mag)
