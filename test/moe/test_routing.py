"""index_shuffling against per-token torch.topk: ties, expert ranges, valid counts, limits."""

import pytest
import torch

import mslk.moe as moe
from test.conftest import requires_cuda
from test.moe.moe_reference import routing_reference, segments


def check(scores, top_k=1, start=None, end=None, valid=None):
    T, E = scores.shape
    s, e = (0 if start is None else start), (E if end is None else end)
    vt = None if valid is None else torch.tensor([valid], dtype=torch.int32, device=scores.device)
    counts, ei, ti = moe.index_shuffling(scores, start, end, vt, top_k)
    assert counts.dtype == ei.dtype == ti.dtype == torch.int32
    assert counts.shape == (E + 2,) and ei.shape == ti.shape == (T * top_k,)
    ref = routing_reference(scores, top_k, s, e, valid)
    got = segments(counts, ei, ti, E, s)
    assert got == ref
    c = counts.cpu()
    assert c[E] == T
    assert c[E + 1] == sum(len(v) for v in ref.values())
    for x in list(range(0, s)) + list(range(e, E)):
        assert c[x] == 0
    return counts, ei, ti


@pytest.mark.parametrize("E,top_k", [(16, 1), (32, 2), (128, 4), (320, 4), (512, 8), (5, 3), (1, 1)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_random(device, E, top_k, dtype):
    scores = torch.randn(67, E, device=device).to(dtype)
    if dtype == torch.bfloat16:  # keep topk unambiguous: distinct values per row
        scores = (torch.stack([torch.randperm(E, device=device) for _ in range(67)]) - E // 2).to(dtype)
    check(scores, top_k)


def test_ties_lower_index_first(device):
    scores = torch.zeros(4, 8, device=device)
    scores[1, 3] = scores[1, 6] = 1.0
    scores[2, 7] = 2.0
    counts, ei, ti = moe.index_shuffling(scores, top_k=2)
    seg = segments(counts, ei, ti, 8, 0)
    # row 0: all equal -> experts 0, 1; row 1: 3, 6; row 2: 7 then 0; row 3: 0, 1
    assert seg == {0: [0, 2, 3], 1: [0, 3], 3: [1], 6: [1], 7: [2]}
    # torch.topk leaves the order of ties unspecified (torch 2.x on the CPU returned experts 6, 5
    # for the all-zero rows): we pin lower-index-first, as the reference kernel does.


def test_nan_and_signed_zero(device):
    scores = torch.tensor([[0.0, -0.0, float("nan"), 1.0], [-0.0, 0.0, -1.0, -2.0]], device=device)
    counts, ei, ti = moe.index_shuffling(scores, top_k=2)
    seg = segments(counts, ei, ti, 4, 0)
    assert seg == {2: [0], 3: [0], 0: [1], 1: [1]}


def test_all_tokens_one_expert_and_empty_experts(device):
    scores = torch.randn(300, 16, device=device)
    scores[:, 5] = 100.0
    counts, _, _ = check(scores, 1)
    assert counts[5] == 300 and counts[:16].sum() == 300


@pytest.mark.parametrize("start,end", [(0, 4), (4, 12), (12, 16), (7, 7)])
def test_expert_range(device, start, end):
    check(torch.randn(129, 16, device=device), 2, start, end)


@pytest.mark.parametrize("valid", [0, 1, 50, 129, 1000])
def test_valid_token_count(device, valid):
    check(torch.randn(129, 32, device=device), 4, valid=valid)


def test_t1_and_t0(device):
    check(torch.randn(1, 128, device=device), 4)
    counts, ei, ti = moe.index_shuffling(torch.randn(0, 16, device=device), top_k=2)
    assert counts.tolist() == [0] * 18 and ei.numel() == ti.numel() == 0


def test_strided_scores(device):
    base = torch.randn(40, 64, device=device)
    check(base.t().contiguous().t(), 2)
    check(base[:, ::2], 2)


def test_tail_is_zero(device):
    counts, ei, ti = moe.index_shuffling(torch.randn(20, 16, device=device), 0, 4, None, 2)
    n = int(counts[-1])
    assert (ei[n:] == 0).all() and (ti[n:] == 0).all()


def test_errors():
    s = torch.randn(4, 16)
    with pytest.raises(ValueError, match="top_k"):
        moe.index_shuffling(s, top_k=9)
    with pytest.raises(ValueError, match="top_k"):
        moe.index_shuffling(torch.randn(4, 2), top_k=3)
    with pytest.raises(ValueError, match=r"\[1, 512\]"):
        moe.index_shuffling(torch.randn(4, 513))
    with pytest.raises(ValueError, match="expert_index_start"):
        moe.index_shuffling(s, 5, 3)
    with pytest.raises(ValueError, match="expert_index_end"):
        moe.index_shuffling(s, 0, 17)
    with pytest.raises(TypeError, match="routing_scores"):
        moe.index_shuffling(s.half())
    with pytest.raises(ValueError, match="routing_scores"):
        moe.index_shuffling(torch.randn(4, 4, 4))
    with pytest.raises(TypeError, match="valid_token_count"):
        moe.index_shuffling(s, valid_token_count=torch.tensor([1.0]))


@requires_cuda
@pytest.mark.parametrize("T,E,top_k", [(16384, 128, 4), (5000, 320, 2), (777, 512, 8), (3, 16, 1)])
def test_cuda_large(T, E, top_k):
    scores = torch.randn(T, E, device="cuda")
    check(scores, top_k)
    check(scores, top_k, E // 4, E // 2, valid=T - 1)


def _tricky_scores(T, E, dtype, seed):
    """randn, with ties (quantized rows, all-equal rows), NaN and signed zeros sprinkled in."""
    g = torch.Generator().manual_seed(seed)
    s = torch.randn(T, E, generator=g)
    q = torch.rand(T, generator=g)
    s[q < 0.3] = s[q < 0.3].mul(2).round()  # few distinct values: many ties
    s[(q >= 0.3) & (q < 0.35)] = 0.5  # all equal: experts 0..k-1
    z = torch.rand(T, E, generator=g)
    s[z < 0.02] = 0.0
    s[(z >= 0.02) & (z < 0.04)] = -0.0
    s[z > 0.999] = float("nan")
    return s.to(dtype)


@requires_cuda
@pytest.mark.parametrize("T", [1, 7, 1000, 16384])
@pytest.mark.parametrize("E,top_k", [(8, 1), (8, 4), (8, 8), (128, 1), (128, 4), (128, 8), (320, 4), (320, 8),
                                     (512, 1), (512, 8)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cuda_equals_cpu(T, E, top_k, dtype):
    """The CUDA kernel is deterministic and bit-identical to the CPU reference: segments in
    ascending (token, k) order, zero tail, counts[E] = T, counts[E + 1] = total."""
    scores = _tricky_scores(T, E, dtype, seed=T * 7919 + E * 31 + top_k)
    variants = [
        (scores, None, None, None),
        (scores, E // 4, E // 2 + 1, T - 1 - T // 3),  # expert range subset, valid < T
        (scores, 0, E, 0),
        (scores.t().contiguous().t(), 1, E, T // 2),  # strided: stride_t = 1
        (torch.cat([scores, scores], 1)[:, ::2], None, None, None),  # stride_e = 2
    ]
    for s, start, end, valid in variants:
        vc = None if valid is None else torch.tensor([valid], dtype=torch.int32)
        ref = moe.index_shuffling(s, start, end, vc, top_k)
        vg = None if vc is None else vc.cuda()
        for _ in range(2):  # repeated calls: same result (no state carried between calls)
            got = moe.index_shuffling(s.cuda(), start, end, vg, top_k)
            for r, o in zip(ref, got):
                assert torch.equal(o.cpu(), r), (T, E, top_k, dtype, start, end, valid)


@requires_cuda
def test_cuda_graph_replay_equals_cpu():
    scores = _tricky_scores(5000, 128, torch.bfloat16, seed=5)
    ref = moe.index_shuffling(scores, 3, 100, None, 4)
    s = scores.cuda()
    moe.index_shuffling(s, 3, 100, None, 4)  # warm-up outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = moe.index_shuffling(s, 3, 100, None, 4)
    for _ in range(3):
        graph.replay()
        torch.cuda.synchronize()
        for r, o in zip(ref, out):
            assert torch.equal(o.cpu(), r)


@requires_cuda
def test_opcheck_cuda_multi_cta():
    scores = torch.randn(3000, 128, device="cuda", dtype=torch.bfloat16)
    torch.library.opcheck(torch.ops.mslk.index_shuffling, (scores,), {"top_k": 4})
