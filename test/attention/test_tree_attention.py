"""Tree (speculative) attention: the tree builders and their two depth conventions, TreeAttnMetadata's
tables against trees built by hand, and tree_attention against plain float64 attention of each
sequence's tree tokens over [its cache keys, the tree tokens] under the expanded dense mask (padded and
paged caches, BMHK and BMGHK / GQA, several trees and batch sizes). CUDA cases (needs_cuda) run the
split-K prefix kernel."""

import math

import pytest
import torch

from mslk.attention.fmha import attn_bias as ab
from mslk.attention.fmha import quantized_kv, triton_splitk
from mslk.attention.fmha.common import _kernel_registered
from test.attention.oracle import paginate
from mslk.attention.fmha.tree_attention import (
    SplitKAutotune, TreeAttnMetadata, construct_full_tree_choices, construct_tree_choices, get_full_tree_size,
    select_prefix_op, tree_attention, use_triton_splitk_for_prefix,
)
from test.attention.tolerance import assert_attention_close

HAS_REF = hasattr(torch.ops.mslk, "fmha_reference_fwd")
HAS_CUDA_KERNEL = (hasattr(torch.ops.mslk, "fmha_decode_splitk") and torch.cuda.is_available()
                   and _kernel_registered("mslk::fmha_decode_splitk", "CUDA"))
needs_cuda = pytest.mark.skipif(not HAS_CUDA_KERNEL, reason="needs a GPU and a CUDA build of mslk")
needs_ref = pytest.mark.skipif(not HAS_REF, reason="native library not loaded")

# A Medusa-like irregular tree (listed out of order on purpose).
IRREGULAR = [(0, 0), (0,), (1,), (2,), (0, 1), (1, 0), (0, 0, 0), (0, 1, 0), (0, 0, 1)]
TREES = [[], [(0,)], construct_full_tree_choices(2, 2), construct_tree_choices([3, 2]), IRREGULAR]


# ---- builders ---------------------------------------------------------------------------------------

def test_full_tree_choices_and_size_conventions():
    assert construct_full_tree_choices(2, 2) == [(0,), (1,), (0, 0), (0, 1), (1, 0), (1, 1)]
    assert construct_full_tree_choices(0, 3) == []
    assert [get_full_tree_size(d, 2) for d in range(5)] == [0, 1, 3, 7, 15]
    for depth in range(4):
        for b in (1, 2, 3):
            # construct_full_tree_choices counts levels below the root; get_full_tree_size counts the root too.
            assert len(construct_full_tree_choices(depth, b)) + 1 == get_full_tree_size(depth + 1, b)


def test_construct_tree_choices():
    got = construct_tree_choices([3, 2])
    assert got[:3] == [(0,), (1,), (2,)]
    assert got[3:] == [(i, j) for i in range(3) for j in range(2)]
    assert construct_tree_choices([]) == []
    assert construct_tree_choices([2, 2]) == construct_full_tree_choices(2, 2)
    with pytest.raises(ValueError):
        construct_tree_choices([2, 0])
    with pytest.raises(TypeError):
        construct_full_tree_choices(2.0, 2)


# ---- metadata ---------------------------------------------------------------------------------------

def _paths(choices):
    return [()] + sorted((tuple(c) for c in choices), key=lambda p: (len(p), p))


@pytest.mark.parametrize("choices", TREES, ids=lambda c: f"T{len(c) + 1}")
def test_metadata_tables(choices):
    meta = TreeAttnMetadata.from_tree_choices(choices)
    paths = _paths(choices)
    T = len(paths)
    assert meta.tree_size == T and meta.attention_bias.shape == (T, T)
    for i, pi in enumerate(paths):
        for j, pj in enumerate(paths):
            ancestor = pi[:len(pj)] == pj
            assert (meta.attention_bias[i, j].item() == 0.0) == ancestor
            assert ancestor or meta.attention_bias[i, j].item() == -math.inf
        assert meta.position_ids[i].item() == len(pi)
        parent = meta.parent_node_indices[i].item()
        assert parent == (-1 if i == 0 else paths.index(pi[:-1]))
        kids = [j for j, pj in enumerate(paths) if len(pj) == len(pi) + 1 and pj[:-1] == pi]
        assert [c for c in meta.child_node_indices[i].tolist() if c >= 0] == kids
        assert meta.num_children_per_node[i] == len(kids)
        assert meta.subtree_sizes[i] == sum(1 for pj in paths if pj[:len(pi)] == pi)
        assert meta.candidate_idx[i].item() == (pi[-1] if pi else 0)
    depth = max(len(p) for p in paths)
    assert meta.num_nodes_per_level == [sum(1 for p in paths if len(p) == d) for d in range(depth + 1)]
    leaves = [i for i in range(T) if meta.num_children_per_node[i] == 0]
    assert meta.retrieval_indices.shape == (len(leaves), depth + 1)
    for row, leaf, n in zip(meta.retrieval_indices.tolist(), leaves, meta.path_lengths):
        want = [paths.index(paths[leaf][:d]) for d in range(len(paths[leaf]) + 1)]
        assert row[:n] == want and all(x == -1 for x in row[n:])


def test_metadata_tree_indices():
    meta = TreeAttnMetadata.from_tree_choices(IRREGULAR)
    # level 1 has ranks 0..2 (3 candidates, flattened 1..3), level 2 ranks 0..1 (4..5), level 3 rank 0..1 (6..7)
    want = {(): 0, (0,): 1, (1,): 2, (2,): 3, (0, 0): 4, (0, 1): 5, (1, 0): 4, (0, 0, 0): 6, (0, 0, 1): 7,
            (0, 1, 0): 6}
    assert meta.tree_indices.tolist() == [want[p] for p in _paths(IRREGULAR)]


def test_metadata_dtype_device_cache_and_errors():
    meta = TreeAttnMetadata.from_tree_choices([(0,), (1,)], dtype=torch.float16, device="cpu")
    assert meta.attention_bias.dtype == torch.float16
    a = TreeAttnMetadata.from_tree_choices_cached(((0,), (1,)), dtype=torch.float32)
    assert TreeAttnMetadata.from_tree_choices_cached(((0,), (1,)), dtype=torch.float32) is a
    for bad in ([(0, 0)], [(0,), (0,)], [()], [(-1,)]):
        with pytest.raises(ValueError):
            TreeAttnMetadata.from_tree_choices(bad)


# ---- operator choice --------------------------------------------------------------------------------

def test_prefix_op_selection():
    assert issubclass(SplitKAutotune, triton_splitk.FwOp)
    assert use_triton_splitk_for_prefix(64, 8, 8)
    assert not use_triton_splitk_for_prefix(64, 8, 64)
    bias = ab.BlockDiagonalPaddedKeysMask.from_seqlens([4, 4], 16, [5, 7])
    assert select_prefix_op(2, 1, 4, False, bias, torch.bfloat16) is triton_splitk.FwOp
    assert select_prefix_op(2, 1, 4, True, bias, torch.bfloat16) is SplitKAutotune
    assert select_prefix_op(64, 8, 64, False, bias, torch.bfloat16) is None
    assert select_prefix_op(2, 1, 4, False, torch.zeros(8, 32), torch.bfloat16) is None
    assert select_prefix_op(64, 8, 64, False, bias, torch.int32) is triton_splitk.FwOp


# ---- tree_attention ---------------------------------------------------------------------------------

def _inputs(B, T, G, H, D, lens, P, dtype, device, gen, grouped):
    """q / spec K,V [B, T, G, H, D] (K/V expanded over H when grouped), cache [1, B * P, G, H, D]."""
    def r(*shape):
        return torch.randn(shape, generator=gen, dtype=torch.float32).to(device=device, dtype=dtype)

    q = r(B, T, G, H, D)
    hk = 1 if grouped else H
    sk, sv = r(B, T, G, hk, D).expand(B, T, G, H, D), r(B, T, G, hk, D).expand(B, T, G, H, D)
    ck, cv = r(1, B * P, G, hk, D).expand(1, B * P, G, H, D), r(1, B * P, G, hk, D).expand(1, B * P, G, H, D)
    return q, sk, sv, ck, cv


def _expected(q, sk, sv, ck, cv, lens, P, tree_bias):
    """float64 attention per sequence b over [cache lane b, tree tokens] under [0 | tree mask]."""
    B, T = q.shape[:2]
    outs = []
    for b in range(B):
        keys = torch.cat([ck[0, b * P:b * P + lens[b]], sk[b]]).double()
        vals = torch.cat([cv[0, b * P:b * P + lens[b]], sv[b]]).double()
        mask = torch.cat([torch.zeros(T, lens[b], dtype=torch.float64), tree_bias.double().cpu()], dim=1)
        s = torch.einsum("mghd,nghd->ghmn", q[b].double(), keys) * q.shape[-1] ** -0.5 + mask
        outs.append(torch.einsum("ghmn,nghd->mghd", torch.softmax(s, dim=-1), vals))
    return torch.stack(outs)


TOL = {torch.float64: 1e-10, torch.float32: 2e-5}  # fp16 / bf16: tolerance.py


def close(got, want, dtype):
    if dtype in TOL:
        torch.testing.assert_close(got.double(), want, atol=TOL[dtype], rtol=TOL[dtype])
    else:
        assert_attention_close(got, want, dtype)


@needs_ref
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("choices", TREES, ids=lambda c: f"T{len(c) + 1}")
@pytest.mark.parametrize("B,G,H,grouped", [(1, 1, 1, False), (3, 2, 4, True), (2, 1, 3, False)])
def test_tree_attention_matches_dense(dtype, choices, B, G, H, grouped):
    gen = torch.Generator().manual_seed(len(choices) * 7 + B)
    meta = TreeAttnMetadata.from_tree_choices(choices)
    T, P, D = meta.tree_size, 24, 16
    lens = [(5 + 7 * b) % (P + 1) for b in range(B)]
    q, sk, sv, ck, cv = _inputs(B, T, G, H, D, lens, P, dtype, "cpu", gen, grouped)
    bias = ab.BlockDiagonalPaddedKeysMask.from_seqlens([T] * B, P, lens)
    want = _expected(q, sk, sv, ck, cv, lens, P, meta.attention_bias)
    got = tree_attention(q, sk, sv, ck, cv, meta.attention_bias, bias)
    assert got.dtype == dtype and got.shape == q.shape
    close(got, want, dtype)
    # BMHK: the same problem with one head group, and the metadata object as spec_attn_bias.
    if G == 1:
        got4 = tree_attention(q[:, :, 0], sk[:, :, 0], sv[:, :, 0], ck[:, :, 0], cv[:, :, 0], meta, bias)
        close(got4, want[:, :, 0], dtype)


@needs_ref
def test_tree_attention_paged_prefix_equals_padded():
    gen = torch.Generator().manual_seed(3)
    meta = TreeAttnMetadata.from_tree_choices(IRREGULAR)
    B, T, P, page = 3, meta.tree_size, 32, 8
    lens = [32, 9, 17]
    q, sk, sv, ck, cv = _inputs(B, T, 2, 2, 16, lens, P, torch.float32, "cpu", gen, True)
    padded = ab.BlockDiagonalPaddedKeysMask.from_seqlens([T] * B, P, lens)
    want = tree_attention(q, sk, sv, ck, cv, meta.attention_bias, padded)
    # Physical pages in a shuffled order: page j of sequence b lives at physical page perm[b * 4 + j].
    tables = torch.randperm(B * P // page, generator=gen).reshape(B, P // page).to(torch.int32)
    pk, pv = paginate(ck, tables, page), paginate(cv, tables, page)
    paged = ab.PagedBlockDiagonalPaddedKeysMask.from_seqlens([T] * B, lens, tables, page)
    got = tree_attention(q, sk, sv, pk, pv, meta.attention_bias, paged)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@needs_ref
def test_tree_attention_batched_cache_without_prefix_bias():
    gen = torch.Generator().manual_seed(5)
    meta = TreeAttnMetadata.from_tree_choices(construct_full_tree_choices(2, 2))
    B, T, L = 2, meta.tree_size, 11
    q, sk, sv, ck, cv = _inputs(B, T, 1, 2, 8, [L] * B, L, torch.float64, "cpu", gen, False)
    bk, bv = ck.reshape(B, L, 1, 2, 8), cv.reshape(B, L, 1, 2, 8)
    got = tree_attention(q, sk, sv, bk, bv, meta.attention_bias, None)
    torch.testing.assert_close(got, _expected(q, sk, sv, ck, cv, [L] * B, L, meta.attention_bias))


def test_tree_attention_argument_errors():
    meta = TreeAttnMetadata.from_tree_choices([(0,)])
    q = torch.zeros(1, 2, 1, 8)
    ck = torch.zeros(1, 4, 1, 8)
    bias = ab.BlockDiagonalPaddedKeysMask.from_seqlens([2], 4, [3])
    with pytest.raises(ValueError, match="quantized_kv_scales.*not an int32"):
        tree_attention(q, q, q, ck, ck, meta, bias, quantized_kv_scales=(torch.ones(1), torch.ones(1)))
    with pytest.raises(TypeError, match="q_fp8 must be a tensor"):
        tree_attention(q, q, q, ck, ck, meta, bias, q_fp8=[1.0])
    with pytest.raises(ValueError, match="q_fp8 must hold q's tokens"):
        tree_attention(q, q, q, ck, ck, meta, bias, q_fp8=q[:, :1].to(torch.float8_e4m3fn))
    with pytest.raises(TypeError, match="cache_k and cache_v both int32"):
        tree_attention(q, q, q, ck.to(torch.int32), ck, meta, bias)
    with pytest.raises(TypeError, match="spec_k must be a floating-point"):
        tree_attention(q, q.to(torch.int32), q, ck, ck, meta, bias)
    kq = torch.zeros(1, 4, 1, 2, dtype=torch.int32)
    with pytest.raises(TypeError, match="pair of tensors"):
        tree_attention(q, q, q, kq, kq, meta, bias, quantized_kv_scales=torch.ones(1, 4, 1))
    with pytest.raises(ValueError, match=r"quantized_kv_scales\[1\] must hold one entry per cache row"):
        tree_attention(q, q, q, kq, kq, meta, bias, quantized_kv_scales=(torch.ones(1, 4, 1), torch.ones(1, 3, 1)))
    with pytest.raises(TypeError, match=r"quantized_kv_scales\[0\] must be int32"):
        tree_attention(q, q, q, kq, kq, meta, bias, quantized_kv_scales=(torch.ones(1, 4, 1).half(), torch.ones(1, 4, 1)))
    with pytest.raises(ValueError, match="query blocks"):
        tree_attention(q, q, q, ck, ck, meta, ab.BlockDiagonalPaddedKeysMask.from_seqlens([1, 1], 2, [1, 1]))
    with pytest.raises(ValueError, match="spec_attn_bias"):
        tree_attention(q, q, q, ck, ck, torch.zeros(3, 3), bias)


def _quantize_cache(ck, cv, kind):
    """(cache_k, cache_v, quantized_kv_scales, dequantized K, V) of an [1, N, G, H(expanded), D] cache:
    the unexpanded heads are quantized and the int32 result expanded again, as a GQA cache would be."""
    hk, H = ck.stride(-2) == 0, ck.shape[-2]
    base = [c[..., :1, :] if hk else c for c in (ck, cv)]
    if kind == "int4":
        q = [quantized_kv.quantize_kv_int4(c, num_groups=2) for c in base]
        deq = [quantized_kv.dequantize_kv_int4(x, 2) for x in q]
        scales = None
    else:
        pairs = [quantized_kv.quantize_kv_fp8(c, use_fp32_scales=kind == "fp8_fp32") for c in base]
        q, ss = [p[0] for p in pairs], [p[1] for p in pairs]
        deq = [quantized_kv.dequantize_kv_fp8(x, s) for x, s in zip(q, ss)]
        scales = tuple(s.expand(*ck.shape[:-1]) if hk else s for s in ss)
    grow = (lambda x: x.expand(*x.shape[:-2], H, x.shape[-1])) if hk else (lambda x: x)
    return grow(q[0]), grow(q[1]), scales, grow(deq[0]), grow(deq[1])


@needs_ref
@pytest.mark.parametrize("kind", ["int4", "fp8", "fp8_fp32"])
def test_tree_attention_quantized_cache_cpu(kind):
    """An int32 cache (INT4, or FP8 with quantized_kv_scales) gives the attention of its dequantized
    values: float64 reference over the dequantized cache."""
    gen = torch.Generator().manual_seed(21)
    meta = TreeAttnMetadata.from_tree_choices(IRREGULAR)
    B, T, P, D = 2, meta.tree_size, 24, 32
    lens = [24, 13]
    q, sk, sv, ck, cv = _inputs(B, T, 2, 3, D, lens, P, torch.float32, "cpu", gen, True)
    kq, vq, scales, dk, dv = _quantize_cache(ck, cv, kind)
    bias = ab.BlockDiagonalPaddedKeysMask.from_seqlens([T] * B, P, lens)
    got = tree_attention(q, sk, sv, kq, vq, meta, bias, quantized_kv_scales=scales)
    close(got, _expected(q, sk, sv, dk, dv, lens, P, meta.attention_bias), torch.float32)
    # an FP8 copy of the queries is accepted and not read: the result is q's
    q8 = q.to(torch.float8_e4m3fn)
    torch.testing.assert_close(tree_attention(q, sk, sv, kq, vq, meta, bias, quantized_kv_scales=scales, q_fp8=q8), got,
                               rtol=0, atol=0)


# ---- CUDA -------------------------------------------------------------------------------------------

@needs_cuda
@pytest.mark.parametrize("kind", ["int4", "fp8", "fp8_fp32"])
@pytest.mark.parametrize("paged", [False, True])
def test_tree_attention_quantized_cache_cuda(kind, paged):
    """The split-K prefix reads the int32 cache itself (no dequantized copy)."""
    gen = torch.Generator().manual_seed(22)
    meta = TreeAttnMetadata.from_tree_choices(construct_full_tree_choices(2, 2), device="cuda")
    B, T, G, H, D, P, page = 3, meta.tree_size, 2, 4, 128, 1024, 256
    lens = [1024, 300, 777]
    q, sk, sv, ck, cv = _inputs(B, T, G, H, D, lens, P, torch.bfloat16, "cuda", gen, True)
    kq, vq, scales, dk, dv = _quantize_cache(ck, cv, kind)
    want = _expected(q.cpu(), sk.cpu(), sv.cpu(), dk.cpu(), dv.cpu(), lens, P, meta.attention_bias.cpu())
    if paged:
        tables = torch.arange(B * P // page, dtype=torch.int32, device="cuda").flip(0).reshape(B, P // page)
        kq, vq = paginate(kq, tables, page), paginate(vq, tables, page)
        if scales is not None:
            scales = tuple(paginate(s.unsqueeze(-1), tables, page)[..., 0] for s in scales)
        bias = ab.PagedBlockDiagonalPaddedKeysMask.from_seqlens([T] * B, lens, tables, page, device="cuda")
    else:
        bias = ab.BlockDiagonalPaddedKeysMask.from_seqlens([T] * B, P, lens, device="cuda")
    assert select_prefix_op(B, G, T, False, bias, kq.dtype) is triton_splitk.FwOp
    got = tree_attention(q, sk, sv, kq, vq, meta, bias, quantized_kv_scales=scales)
    assert_attention_close(got, want, torch.bfloat16)


@needs_cuda
@pytest.mark.parametrize("autotune", [False, True])
@pytest.mark.parametrize("paged", [False, True])
@pytest.mark.parametrize("choices", [construct_full_tree_choices(2, 2), IRREGULAR, construct_tree_choices([4, 3])],
                         ids=lambda c: f"T{len(c) + 1}")
def test_tree_attention_cuda(choices, paged, autotune):
    gen = torch.Generator().manual_seed(11)
    meta = TreeAttnMetadata.from_tree_choices(choices, device="cuda")
    B, T, G, H, D, P, page = 4, meta.tree_size, 2, 4, 128, 4096, 256
    lens = [4096, 1500, 3000, 2049]
    q, sk, sv, ck, cv = _inputs(B, T, G, H, D, lens, P, torch.bfloat16, "cuda", gen, True)
    want = _expected(q.cpu(), sk.cpu(), sv.cpu(), ck.cpu(), cv.cpu(), lens, P, meta.attention_bias.cpu())
    if paged:
        tables = torch.arange(B * P // page, dtype=torch.int32, device="cuda").flip(0).reshape(B, P // page)
        pk, pv = paginate(ck, tables, page), paginate(cv, tables, page)
        bias = ab.PagedBlockDiagonalPaddedKeysMask.from_seqlens([T] * B, lens, tables, page, device="cuda")
        got = tree_attention(q, sk, sv, pk, pv, meta, bias, autotune=autotune)
    else:
        bias = ab.BlockDiagonalPaddedKeysMask.from_seqlens([T] * B, P, lens, device="cuda")
        got = tree_attention(q, sk, sv, ck, cv, meta, bias, autotune=autotune)
    assert_attention_close(got, want, torch.bfloat16)


@needs_cuda
def test_tree_attention_cuda_prefix_op_pinned():
    gen = torch.Generator().manual_seed(12)
    meta = TreeAttnMetadata.from_tree_choices(construct_full_tree_choices(3, 2), device="cuda")
    B, T, P = 2, meta.tree_size, 2048
    lens = [2048, 777]
    q, sk, sv, ck, cv = _inputs(B, T, 1, 8, 128, lens, P, torch.float16, "cuda", gen, True)
    bias = ab.BlockDiagonalPaddedKeysMask.from_seqlens([T] * B, P, lens, device="cuda")
    want = _expected(q.cpu(), sk.cpu(), sv.cpu(), ck.cpu(), cv.cpu(), lens, P, meta.attention_bias.cpu())
    for op in (triton_splitk.FwOp, triton_splitk.FwOp_S4, SplitKAutotune):
        got = tree_attention(q, sk, sv, ck, cv, meta, bias, prefix_op=op)
        assert_attention_close(got, want, torch.float16)
