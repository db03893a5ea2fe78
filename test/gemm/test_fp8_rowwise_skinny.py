"""The decode-shape tensor-core kernel (fp8_rowwise_skinny.cu), forced with
MSLK_FP8_GEMM_KERNEL=skinny, against float64 math; the variable's errors; auto == skinny for
small M; split-K determinism and CUDA-graph capture. Outputs are NaN before each run, so an
element the kernel skips fails the check. Its index math is also emulated on the CPU
(test_fp8_skinny_emulator.py)."""

import pytest
import torch

from test.conftest import requires_cuda
from test.gemm.fp8_gemm_reference import check, rand_fp8, rand_scale

ops = torch.ops.mslk
ENV = "MSLK_FP8_GEMM_KERNEL"
pytestmark = requires_cuda


@pytest.fixture
def skinny(monkeypatch):
    monkeypatch.setenv(ENV, "skinny")


def bias_of(kind, n):
    return None if kind is None else (torch.randn(n, dtype=torch.float64) * 4).to(kind).cuda()


def nan_out(*shape, dtype=torch.bfloat16):
    return torch.full(shape, float("nan"), dtype=dtype, device="cuda")


def poison_pool(numel, dtype):
    """Best effort for ops that allocate their output: leave a NaN block of that size in the
    caching allocator, which the op's allocation will most likely reuse."""
    t = torch.full((numel,), float("nan"), dtype=dtype, device="cuda")
    del t


# The skinny kernel accumulates in float32 with either flag (its header says why), so the
# tight use_fast_accum=False tolerance applies to both.
@pytest.mark.parametrize("M", [1, 2, 7, 8, 9, 16, 33, 64])
@pytest.mark.parametrize("N,K", [(72, 48), (1000, 96), (264, 8192)])
@pytest.mark.parametrize("bias_dtype", [None, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("fast", [True, False])
def test_skinny_rowwise(skinny, M, N, K, bias_dtype, fast):
    xq, wq = rand_fp8((M, K), "cuda"), rand_fp8((N, K), "cuda")
    xs, ws = rand_scale(M, "cuda"), rand_scale(N, "cuda")
    bias = bias_of(bias_dtype, N)
    out = nan_out(M, N)
    ops.f8f8bf16_rowwise_out(xq, wq, xs, ws, out, bias, fast)
    check(out, xq, wq, xs, ws, bias, fast=False)


@pytest.mark.parametrize("M,N,K", [(1, 1280, 8192), (16, 8192, 1024), (64, 1280, 8192), (3, 7168, 2048)])
def test_skinny_split_k_shapes(skinny, M, N, K):
    # LLM-like shapes: the table splits K here (small N or short K), so the workspace + reduce runs.
    xq, wq = rand_fp8((M, K), "cuda"), rand_fp8((N, K), "cuda")
    xs, ws = rand_scale(M, "cuda"), rand_scale(N, "cuda")
    bias = bias_of(torch.float32, N)
    out = nan_out(M, N)
    ops.f8f8bf16_rowwise_out(xq, wq, xs, ws, out, bias, True)
    check(out, xq, wq, xs, ws, bias, fast=False)
    again = nan_out(M, N)
    ops.f8f8bf16_rowwise_out(xq, wq, xs, ws, again, bias, True)
    assert torch.equal(out, again), "split-K reduction must be deterministic"


@pytest.mark.parametrize("M", [1, 16, 64])
@pytest.mark.parametrize("bias_dtype", [None, torch.bfloat16])
def test_skinny_f16_output(skinny, M, bias_dtype):
    N, K = 200, 352
    xq, wq = rand_fp8((M, K), "cuda"), rand_fp8((N, K), "cuda")
    xs, ws = rand_scale(M, "cuda"), rand_scale(N, "cuda")
    bias = bias_of(bias_dtype, N)
    poison_pool(M * N, torch.float16)
    out = ops.f8f8f16_rowwise(xq, wq, xs, ws, bias, False)
    assert out.dtype == torch.float16
    check(out, xq, wq, xs, ws, bias, fast=False)


@pytest.mark.parametrize("wq_3d", [True, False])
@pytest.mark.parametrize("M", [1, 9, 64])
def test_skinny_batched(skinny, wq_3d, M):
    B, N, K = 3, 136, 320
    xq = rand_fp8((B, M, K), "cuda")
    wq = rand_fp8((B, N, K) if wq_3d else (N, K), "cuda")  # 2-D: one weight for every batch (stride 0)
    xs = rand_scale(M, "cuda", (B,))
    ws = rand_scale(N, "cuda", (B,) if wq_3d else ())
    bias = bias_of(torch.float32, B * N).reshape(B, N)
    w_full = wq if wq_3d else wq.expand(B, N, K)
    ws_full = ws if wq_3d else ws.expand(B, N)
    buf = nan_out(B, M, N)
    ops.f8f8bf16_rowwise_batched(xq, wq, xs, ws, bias, True, buf)
    for b in range(B):
        check(buf[b], xq[b], w_full[b], xs[b], ws_full[b], bias[b], fast=False)


def test_skinny_noncontiguous(skinny):
    M, N, K = 9, 72, 96
    xbase = rand_fp8((M, K + 48), "cuda")
    xq = xbase[:, 16:16 + K]  # row stride K + 48, start 16 bytes in: both multiples of 16
    wbase = rand_fp8((N, K + 32), "cuda")
    wq = wbase[:, 32:]
    xs = rand_scale(2 * M, "cuda")[::2]  # the glue makes scales contiguous
    ws = rand_scale(N, "cuda")
    buf = nan_out(M, N + 24)
    ops.f8f8bf16_rowwise_out(xq, wq, xs, ws, buf[:, 8:8 + N], None, False)  # output row stride N + 24
    check(buf[:, 8:8 + N], xq, wq, xs, ws, fast=False)
    assert torch.isnan(buf[:, :8].float()).all() and torch.isnan(buf[:, 8 + N:].float()).all(), "wrote outside"
    # leading batch dims of XQ with a 16-byte-multiple batch stride
    x3 = rand_fp8((2, 5, K + 16), "cuda")[:, :, :K]
    xs3 = rand_scale(10, "cuda")
    out = ops.f8f8bf16_rowwise(x3, wq, xs3.reshape(2, 5), ws)
    check(out.reshape(10, N), x3.reshape(10, K), wq, xs3, ws, fast=False)


def test_forced_kernel_errors(monkeypatch):
    xq, wq = rand_fp8((4, 40), "cuda"), rand_fp8((8, 40), "cuda")  # K = 40: not a multiple of 16
    xs, ws = rand_scale(4, "cuda"), rand_scale(8, "cuda")
    monkeypatch.setenv(ENV, "skinny")
    with pytest.raises(RuntimeError, match="MSLK_FP8_GEMM_KERNEL=skinny forces a kernel that cannot take"):
        ops.f8f8bf16_rowwise(xq, wq, xs, ws)
    x65, w = rand_fp8((65, 32), "cuda"), rand_fp8((8, 32), "cuda")
    with pytest.raises(RuntimeError, match="M=65"):
        ops.f8f8bf16_rowwise(x65, w, rand_scale(65, "cuda"), ws)
    monkeypatch.setenv(ENV, "cutlass")  # CUTLASS writes bf16 only
    with pytest.raises(RuntimeError, match="MSLK_FP8_GEMM_KERNEL=cutlass"):
        ops.f8f8f16_rowwise(rand_fp8((4, 32), "cuda"), w, xs, ws)
    monkeypatch.setenv(ENV, "fastest")
    with pytest.raises(ValueError, match=r"MSLK_FP8_GEMM_KERNEL must be auto, skinny, cutlass or simt \(or unset\), got 'fastest'"):
        ops.f8f8bf16_rowwise(xq, wq, xs, ws)
    monkeypatch.setenv(ENV, "simt")  # SIMT takes anything
    check(ops.f8f8bf16_rowwise(xq, wq, xs, ws), xq, wq, xs, ws)


@pytest.mark.parametrize("M,N,kernel", [(1, 1280, "skinny"), (1, 8192, "cutlass"), (2, 1280, "cutlass"),
                                         (16, 1280, "cutlass"), (64, 1280, "cutlass")])
def test_auto_takes_skinny_only_at_m1(monkeypatch, M, N, kernel):
    # MSLK_FP8_SKINNY_AUTO_MAX_M is 1: CUTLASS beats the decode kernel from M = 2, and at M = 1 too
    # once the swap-AB row's N / 64 tiles fill half the SMs (N = 8192: 128 tiles; N = 1280: 20), see
    # fp8_rowwise_buckets.h. The kernels sum in different orders: bitwise equality with the forced
    # kernel (over thousands of bf16 outputs) is strong evidence that auto ran it.
    K = 4096
    xq, wq = rand_fp8((M, K), "cuda"), rand_fp8((N, K), "cuda")
    xs, ws = rand_scale(M, "cuda"), rand_scale(N, "cuda")
    monkeypatch.setenv(ENV, "auto")
    auto = ops.f8f8bf16_rowwise(xq, wq, xs, ws)
    monkeypatch.setenv(ENV, kernel)
    assert torch.equal(auto, ops.f8f8bf16_rowwise(xq, wq, xs, ws))
    monkeypatch.delenv(ENV)
    assert torch.equal(auto, ops.f8f8bf16_rowwise(xq, wq, xs, ws))


def test_skinny_cuda_graph(skinny):
    # Split K (workspace from the caching allocator) inside a captured graph, replayed on new inputs.
    M, N, K = 2, 1280, 8192
    xq, wq = rand_fp8((M, K), "cuda"), rand_fp8((N, K), "cuda")
    xs, ws = rand_scale(M, "cuda"), rand_scale(N, "cuda")
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        ops.f8f8bf16_rowwise(xq, wq, xs, ws)  # warm-up outside capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = ops.f8f8bf16_rowwise(xq, wq, xs, ws)
    xq.copy_(rand_fp8((M, K), "cuda"))
    graph.replay()
    torch.cuda.synchronize()
    check(out, xq, wq, xs, ws, fast=False)
