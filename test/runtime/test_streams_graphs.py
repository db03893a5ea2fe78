"""Every landed op family away from the default stream of cuda:0:
- on a side stream: the same bits as a default-stream call (a tight tolerance where the op adds
  with atomics), and its work ordered on the caller's current stream (a long sleep queued ahead
  of it on that stream, then its inputs written: an op that ran elsewhere would read stale ones);
- captured in a CUDA graph: replays follow new values copied into the captured inputs;
- on cuda:1 with every tensor there: the cuda:0 result, outputs on cuda:1, current device unchanged.
Graph captures already tested next to their op, and ops that read sizes on the host, are named in
each row's `graph` field instead of being captured here."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any, Callable, Optional, Tuple

import pytest
import torch

from mslk.attention import fmha
from mslk.attention.fmha import attn_bias as ab
from mslk.attention.fmha import triton_splitk
from mslk.attention.fmha.quantized_kv import quantize_kv_fp8, quantize_kv_int4
from mslk.quantize.shuffle import int4_row_quantize_zp, pack_int4
from mslk.quantize.triton.fp8_quantize import (quantize_fp8_block, quantize_fp8_group, quantize_fp8_row,
                                               quantize_fp8_tensor)
from test.conftest import requires_cuda, requires_gpus

ops = torch.ops.mslk
FP8 = torch.float8_e4m3fn
REPO = Path(__file__).resolve().parents[2]
SLEEP_CYCLES = 1 << 27  # about 70 ms at H200 clocks: far longer than any op's host-side launch


# --- input builders: CPU values from a seeded generator, moved to the device ---------------------

def _randn(g, shape, dtype=torch.bfloat16, scale=1.0):
    return (torch.randn(shape, generator=g) * scale).to(dtype)


def _fp8(g, shape):
    """E4M3 values with a spread of magnitudes."""
    mag = torch.exp2(torch.randint(-5, 3, shape, generator=g).float())
    return (torch.randn(shape, generator=g) * 8 * mag).clamp(-448, 448).to(FP8)


def _scale(g, shape):
    return torch.rand(shape, generator=g) * 0.02 + 1e-3


def _ids(g, high, shape, dtype=torch.int32):
    return torch.randint(0, high, shape, generator=g, dtype=dtype)


def _parts(g, total, n, dtype=torch.int32):
    """n random sizes >= 0 summing to total."""
    cuts = torch.randint(0, total + 1, (n - 1,), generator=g).sort().values
    edges = torch.cat([torch.tensor([0]), cuts, torch.tensor([total])])
    return edges.diff().to(dtype)


def _cdiv(a, b):
    return -(-a // b)


def _map(fn, tree):
    if isinstance(tree, (tuple, list)):
        return type(tree)(_map(fn, x) for x in tree)
    return fn(tree)


def _leaves(tree):
    if isinstance(tree, (tuple, list)):
        return [leaf for x in tree for leaf in _leaves(x)]
    return [tree]


def _to(dev, tree):
    return _map(lambda x: x.to(dev) if isinstance(x, torch.Tensor) else x, tree)


# --- the rows -------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    make: Callable[[torch.Generator, torch.device], Any]  # inputs (tuple tree); shapes independent of the seed
    run: Callable[[Any], Any]  # outputs (tuple tree); never modifies its inputs
    tol: Optional[Tuple[float, float]] = None  # (rtol, atol) where additions are atomic; None: bitwise
    graph: Optional[str] = None  # why test_graph_capture leaves the row out; None: captured here
    hopper: bool = False  # the CUDA kernel is built for sm_90a only
    cpu: bool = True  # the call also runs on the CPU reference (test_rows_run_on_the_cpu)


def _quant_row(g, dev):
    return _to(dev, (_randn(g, (3, 7, 264), scale=4.0),))


def _quant_2d(M, K):
    return lambda g, dev: _to(dev, (_randn(g, (M, K), scale=4.0),))


def _rowwise(M, N, K, bias=False):
    def make(g, dev):
        b = _randn(g, (N,), scale=4.0) if bias else None
        return _to(dev, (_fp8(g, (M, K)), _fp8(g, (N, K)), _scale(g, (M,)), _scale(g, (N,)), b))
    return make


def _rowwise_batched(g, dev):
    B, M, N, K = 3, 17, 40, 80
    return _to(dev, (_fp8(g, (B, M, K)), _fp8(g, (B, N, K)), _scale(g, (B, M)), _scale(g, (B, N))))


def _rowwise_lists(g, dev):
    Ms, Ns, Ks = [17, 1, 33], [40, 8, 72], [64, 128, 256]
    return _to(dev, ([_fp8(g, (m, k)) for m, k in zip(Ms, Ks)], [_fp8(g, (n, k)) for n, k in zip(Ns, Ks)],
                     [_scale(g, (m,)) for m in Ms], [_scale(g, (n,)) for n in Ns]))


def _rowwise_stacked(g, dev):
    G, total, N, K = 3, 50, 72, 256
    return _to(dev, (_fp8(g, (total, K)), _fp8(g, (G, N, K)), _scale(g, (total,)), _scale(g, (G, N)),
                     _parts(g, total - 5, G, torch.int64)))


def _blockwise(g, dev):
    M, N, K = 77, 136, 384
    return _to(dev, (_fp8(g, (M, K)), _fp8(g, (N, K)), _scale(g, (_cdiv(M, 128), K // 128)),
                     _scale(g, (_cdiv(N, 128), K // 128))))


def _groupwise(g, dev):
    M, N, K = 7, 136, 384
    return _to(dev, (_fp8(g, (M, K)), _fp8(g, (N, K)), _scale(g, (K // 128, M)), _scale(g, (K // 128, _cdiv(N, 128)))))


def _groupwise_grouped(g, dev):
    G, total, N, K = 3, 40, 136, 256
    return _to(dev, (_fp8(g, (total, K)), _fp8(g, (G, N, K)), _scale(g, (total, K // 128)),
                     _scale(g, (G, K // 128, _cdiv(N, 128))), _parts(g, total - 5, G, torch.int64)))


def _bf16_stacked(g, dev):
    G, T, N, K = 3, 57, 72, 64
    return _to(dev, (_randn(g, (T, K)), _randn(g, (G, N, K)), _parts(g, T - 7, G)))


def _bf16_lists(g, dev):
    Ms, Ns, Ks = [5, 1, 33], [16, 8, 24], [32, 40, 8]
    return _to(dev, ([_randn(g, (m, k)) for m, k in zip(Ms, Ks)], [_randn(g, (n, k)) for n, k in zip(Ns, Ks)]))


def _int8(g, dev):
    i8 = lambda shape: torch.randint(-128, 128, shape, generator=g, dtype=torch.int8)  # noqa: E731
    return _to(dev, (i8((7, 256)), i8((33, 256)), i8((72, 256)), torch.rand((1,), generator=g) * 0.02 + 1e-3))


def _bf16x9(g, dev):
    return _to(dev, (_randn(g, (33, 100), torch.float32), _randn(g, (72, 100), torch.float32)))


def _int4(g, dev):
    q, s, z = int4_row_quantize_zp(torch.randn((72, 256), generator=g), 128)
    return _to(dev, (_randn(g, (7, 256)), _randn(g, (33, 256)), pack_int4(q), s.bfloat16(), z.bfloat16()))


def _routing(g, dev):
    return _to(dev, (torch.randn((37, 16), generator=g),))


def _gather(g, dev):
    T, E, A, D = 37, 16, 50, 136
    return _to(dev, (_randn(g, (T, D)), _ids(g, T, (A,)), _ids(g, E, (A,)), torch.rand((T, E), generator=g)))


def _scatter_dense(g, dev):
    T, A, D = 19, 50, 136
    return _to(dev, (_randn(g, (T, D)), _randn(g, (A, D)), _ids(g, T, (A,)), torch.tensor([41])))


def _scatter_padded(g, dev):
    EP, E, T, D, N = 2, 4, 12, 64, 6
    return _to(dev, (_randn(g, (EP, T, D), torch.float32), _parts(g, T - 2, E), _ids(g, N, (T,)),
                     _randn(g, (N, D), torch.float32)))


def _scatter_first_dim(g, dev):
    N, M, K = 10, 50, 256
    return _to(dev, (_randn(g, (N, K), torch.float32), _randn(g, (M, K), torch.float32),
                     _ids(g, N, (M,), torch.int64)))


def _shuffling(g, dev):
    EP, E, T, D = 3, 4, 36, 72
    return _to(dev, (_randn(g, (T, D)), _parts(g, T, EP * E).view(EP, E)))


def _silu(g, dev):
    T, D = 17, 136
    wide, x1 = _to(dev, (_randn(g, (T, 2 * D)), _randn(g, (T, D))))
    return wide[:, :D], x1  # x0 row-strided


def _attention(g, dev):
    B, Mq, Mkv, H, K = 2, 67, 93, 3, 64
    q, k, v, do = (_randn(g, (B, m, H, K)) for m in (Mq, Mkv, Mkv, Mq))
    return _to(dev, (q, k, v, do))


def _decode(g, dev):
    pad, lens, H, D = 512, [300, 512, 77], 4, 128
    bias = ab.BlockDiagonalCausalWithOffsetPaddedKeysMask.from_seqlens([1] * len(lens), pad, lens, device=dev)
    q, k, v = (_randn(g, (1, m, H, D)) for m in (len(lens), pad * len(lens), pad * len(lens)))
    return _to(dev, (q, k, v)) + (bias,)


def _merge(g, dev):
    S, B, M, H, K = 3, 2, 7, 3, 40
    return _to(dev, (_randn(g, (S, B, M, H, K)), _randn(g, (S, B, H, M), torch.float32, 3.0)))


def _kv_caches(g, dev):
    k = torch.randn((2, 37, 3, 128), generator=g)
    data, ss = quantize_kv_fp8(torch.randn((2, 37, 3, 128), generator=g))
    return _to(dev, (quantize_kv_int4(k, 2), data, ss))


def _scatter_dense_run(out, inp, tok, valid):
    out = out.clone()
    ops.scatter_add_dense_tokens(out, inp, tok, valid)
    return out


def _scatter_padded_run(inp, counts, tok, out):
    out = out.clone()
    ops.scatter_add_padded_tokens(inp, counts, tok, out)
    return out


def _scatter_first_dim_run(dst, src, idx):
    dst = dst.clone()
    ops.scatter_add_along_first_dim(dst, src, idx)
    return dst


def _shuffling_run(tokens, counts):
    out, out_counts = ops.combine_shuffling(tokens, counts)
    return out, out_counts, ops.split_shuffling(out, counts, init_with_zeros=True)


def _attention_bwd_run(q, k, v, do):
    q, k, v = (x.detach().requires_grad_() for x in (q, k, v))
    out = fmha.memory_efficient_attention(q, k, v, ab.LowerTriangularFromBottomRightMask())
    return (out.detach(), *torch.autograd.grad(out, (q, k, v), do))


ATOMIC_F32 = (1e-5, 1e-5)
ATOMIC_BF16 = (2.0 ** -7, 1e-3)  # one bf16 rounding step of a float32 sum taken in another order


def _captured_in(path, test):
    return f"captured in {path}::{test}"


CASES = [
    Case("quantize_fp8_row", _quant_row, lambda a: quantize_fp8_row(a)),
    Case("quantize_fp8_block", _quant_2d(77, 520), lambda x: quantize_fp8_block(x, 128, 128)),
    Case("quantize_fp8_group", _quant_2d(7, 384), lambda x: quantize_fp8_group(x, 128)),
    Case("quantize_fp8_tensor", _quant_2d(37, 200), lambda a: quantize_fp8_tensor(a)),
    Case("f8f8bf16_rowwise_skinny", _rowwise(7, 72, 256), lambda *a: ops.f8f8bf16_rowwise(*a), hopper=True,
         graph=_captured_in("test/gemm/test_fp8_rowwise_skinny.py", "test_skinny_cuda_graph")),
    Case("f8f8bf16_rowwise", _rowwise(137, 72, 256, bias=True), lambda *a: ops.f8f8bf16_rowwise(*a), hopper=True),
    Case("f8f8bf16_rowwise_batched", _rowwise_batched, lambda *a: ops.f8f8bf16_rowwise_batched(*a), hopper=True),
    Case("f8f8bf16_rowwise_grouped", _rowwise_lists, lambda *a: ops.f8f8bf16_rowwise_grouped(*a), hopper=True),
    Case("f8f8bf16_rowwise_grouped_stacked", _rowwise_stacked,
         lambda *a: ops.f8f8bf16_rowwise_grouped_stacked(*a), hopper=True,
         graph=_captured_in("test/gemm/test_fp8_rowwise_grouped.py", "test_grouped_stacked_is_graph_capturable")),
    Case("f8f8bf16_blockwise", _blockwise, lambda *a: ops.f8f8bf16_blockwise(*a), hopper=True),
    Case("f8f8bf16_groupwise", _groupwise, lambda *a: ops.f8f8bf16_groupwise(*a), hopper=True,
         graph=_captured_in("test/gemm/test_fp8_blockwise.py", "test_cuda_graph_capture_groupwise")),
    Case("f8f8bf16_groupwise_grouped", _groupwise_grouped, lambda *a: ops.f8f8bf16_groupwise_grouped(*a),
         hopper=True, graph="host sync: M_sizes is read on the host (one GEMM per group)"),
    Case("bf16bf16bf16_grouped_stacked", _bf16_stacked, lambda *a: ops.bf16bf16bf16_grouped_stacked(*a),
         hopper=True, graph=_captured_in("test/gemm/test_bf16_grouped.py", "test_cuda_graph_capture")),
    Case("bf16bf16bf16_grouped", _bf16_lists, lambda *a: ops.bf16bf16bf16_grouped(*a), hopper=True),
    Case("i8i8bf16", _int8, lambda x7, x33, w, s: (ops.i8i8bf16(x7, w, 0.0123), ops.i8i8bf16_dynamic(x33, w, s),
                                                  ops.i8i8bf16(x33, w, 0.5, 2)), hopper=True),
    Case("bf16x9_gemm", _bf16x9, lambda a, b: ops.bf16x9_gemm(a, b), hopper=True),
    Case("bf16i4bf16_rowwise", _int4, lambda x7, x33, w, s, z: (ops.bf16i4bf16_rowwise(x7, w, s, z),
                                                               ops.bf16i4bf16_rowwise(x33, w, s, z)), hopper=True),
    Case("index_shuffling", _routing, lambda s: ops.index_shuffling(s, top_k=2),
         graph=_captured_in("test/moe/test_routing.py", "test_cuda_graph_replay_equals_cpu")),
    Case("gather_scale_dense_tokens", _gather, lambda *a: (ops.gather_scale_dense_tokens(*a),
                                                          *ops.gather_scale_quant_dense_tokens(*a))),
    Case("scatter_add_dense_tokens", _scatter_dense, _scatter_dense_run),
    Case("scatter_add_padded_tokens", _scatter_padded, _scatter_padded_run, tol=ATOMIC_F32),
    Case("scatter_add_along_first_dim", _scatter_first_dim, _scatter_first_dim_run, tol=ATOMIC_F32),
    Case("combine_split_shuffling", _shuffling, _shuffling_run),
    Case("silu_mul", _silu, lambda x0, x1: (ops.silu_mul(x0, x1), *ops.silu_mul_quant(x0, x1))),
    Case("memory_efficient_attention", _attention,
         lambda q, k, v, do: fmha.memory_efficient_attention(q, k, v, ab.LowerTriangularFromBottomRightMask())),
    Case("memory_efficient_attention_backward", _attention, _attention_bwd_run, tol=ATOMIC_BF16),
    Case("triton_splitk_decode", _decode,
         lambda q, k, v, bias: fmha.memory_efficient_attention_forward_requires_grad(q, k, v, bias,
                                                                                      op=triton_splitk.FwOp),
         graph=_captured_in("test/attention/test_splitk_decode.py", "test_cuda_graph_capture"),
         cpu=False),  # the public API serves triton_splitk.FwOp on CUDA only
    Case("merge_attentions", _merge, lambda a, lse: fmha.merge_attentions(a, lse)),
    Case("dequantize_kv", _kv_caches, lambda c4, c8, ss: (ops.dequantize_kv_int4(c4, 2, torch.bfloat16),
                                                         ops.dequantize_kv_fp8(c8, ss, torch.bfloat16))),
]
GRAPH_CASES = [c for c in CASES if c.graph is None]
IDS = {"ids": lambda c: c.name}


# --- checks -------------------------------------------------------------------------------------

def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _call(case, inputs):
    return case.run(*inputs)


def _bits(t):
    """Floating tensors as integers of their width, so that equal bits compare equal (NaN too)."""
    if t.is_floating_point():
        return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])
    return t


def _assert_same(case, got, want, what):
    g, w = _leaves(got), _leaves(want)
    assert len(g) == len(w), f"{case.name} ({what}): {len(g)} outputs, expected {len(w)}"
    for i, (a, b) in enumerate(zip(g, w)):
        if not isinstance(b, torch.Tensor):
            assert a == b, f"{case.name} ({what}): output {i} is {a!r}, expected {b!r}"
            continue
        assert (a.shape, a.dtype) == (b.shape, b.dtype), f"{case.name} ({what}): output {i} {a.shape} {a.dtype}"
        a, b = a.detach().cpu(), b.detach().cpu()
        if case.tol is None:
            diff = int((_bits(a) != _bits(b)).sum())
            assert diff == 0, f"{case.name} ({what}): output {i} differs in {diff} of {a.numel()} elements"
        else:
            torch.testing.assert_close(a.double(), b.double(), rtol=case.tol[0], atol=case.tol[1], equal_nan=True,
                                       msg=lambda m: f"{case.name} ({what}): output {i}: {m}")


def _refill(dst, src):
    """Writes the values of src's tensors into dst's (the same tree, the same shapes)."""
    d, s = _leaves(dst), _leaves(src)
    assert len(d) == len(s)
    for a, b in zip(d, s):
        if isinstance(a, torch.Tensor):
            a.copy_(b)


def _clone(tree):
    return _map(lambda x: x.clone() if isinstance(x, torch.Tensor) else x, tree)


def _needs_kernels(case, *devices):
    if case.hopper and any(torch.cuda.get_device_capability(d)[0] != 9 for d in devices):
        pytest.skip("needs an sm_90 GPU: the kernel is built for Hopper only")


@requires_cuda
@pytest.mark.parametrize("case", CASES, **IDS)
def test_side_stream(case):
    _needs_kernels(case, 0)
    dev = torch.device("cuda", torch.cuda.current_device())
    ref = _call(case, case.make(_gen(1), dev))
    inputs = case.make(_gen(1), dev)
    stale = case.make(_gen(2), dev)  # what an op running off the current stream would read
    main, side = torch.cuda.current_stream(), torch.cuda.Stream()
    side.wait_stream(main)
    with torch.cuda.stream(side):
        out = _call(case, inputs)
        torch.cuda._sleep(SLEEP_CYCLES)
        _refill(stale, inputs)
        late = _call(case, stale)
    main.wait_stream(side)
    torch.cuda.synchronize()
    _assert_same(case, out, ref, "side stream")
    _assert_same(case, late, ref, "side stream behind a sleep")


@requires_cuda
@pytest.mark.parametrize("case", GRAPH_CASES, **IDS)
def test_graph_capture(case):
    _needs_kernels(case, 0)
    dev = torch.device("cuda", torch.cuda.current_device())
    static = case.make(_gen(1), dev)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):  # warm-up outside the capture (lazy initialisation, workspaces)
            _call(case, static)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = _call(case, static)
    graph.replay()
    first = _clone(out)
    _assert_same(case, first, _call(case, case.make(_gen(1), dev)), "first replay")
    fresh = case.make(_gen(2), dev)
    _refill(static, fresh)
    graph.replay()
    want = _call(case, fresh)
    torch.cuda.synchronize()
    _assert_same(case, out, want, "replay on new inputs")
    assert any(isinstance(a, torch.Tensor) and not torch.equal(_bits(a), _bits(b))
               for a, b in zip(_leaves(out), _leaves(first))), f"{case.name}: the replay ignored the new inputs"


@requires_gpus(2)
@pytest.mark.parametrize("case", CASES, **IDS)
def test_second_device(case):
    _needs_kernels(case, 0, 1)
    before = torch.cuda.current_device()
    ref = _call(case, case.make(_gen(1), torch.device("cuda:0")))
    out = _call(case, case.make(_gen(1), torch.device("cuda:1")))
    assert torch.cuda.current_device() == before
    for i, t in enumerate(_leaves(out)):
        if isinstance(t, torch.Tensor):
            assert t.device == torch.device("cuda:1"), f"{case.name}: output {i} on {t.device}"
    _assert_same(case, out, ref, "cuda:1 against cuda:0")


def test_graph_exclusions_name_where_or_why():
    """A row left out of test_graph_capture names the test that captures its op, or a host sync."""
    assert GRAPH_CASES
    for case in CASES:
        if case.graph is None or case.graph.startswith("host sync: "):
            continue
        m = re.fullmatch(r"captured in (test/\S+\.py)::(test_\w+)", case.graph)
        assert m, f"{case.name}: graph={case.graph!r}"
        source = (REPO / m.group(1)).read_text()
        assert f"def {m.group(2)}(" in source and "torch.cuda.graph(" in source, (case.name, case.graph)


def test_builders_keep_shapes_across_seeds():
    """Replays and the stale-input check copy one seed's inputs over another's: same tree, same shapes."""
    for case in CASES:
        a, b = case.make(_gen(1), torch.device("cpu")), case.make(_gen(2), torch.device("cpu"))
        la, lb = _leaves(a), _leaves(b)
        assert len(la) == len(lb), case.name
        for x, y in zip(la, lb):
            assert type(x) is type(y), case.name
            if isinstance(x, torch.Tensor):
                assert (x.shape, x.dtype) == (y.shape, y.dtype), case.name
                assert not torch.equal(_bits(x), _bits(y)) or x.numel() <= 1, f"{case.name}: seed-independent values"


@pytest.mark.parametrize("case", [c for c in CASES if c.cpu], **IDS)
def test_rows_run_on_the_cpu(case):
    """The rows' calls on the CPU reference: repeatable, and a call on inputs refilled with another
    seed's values equals a call on that seed's own inputs (what the GPU tests rely on)."""
    cpu = torch.device("cpu")
    inputs = case.make(_gen(1), cpu)
    out = _call(case, inputs)
    _assert_same(case, _call(case, case.make(_gen(1), cpu)), out, "repeat")
    fresh = case.make(_gen(2), cpu)
    _refill(inputs, fresh)
    _assert_same(case, _call(case, inputs), _call(case, fresh), "refilled inputs")
