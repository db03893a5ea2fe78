"""iRoPE chunk transforms and paging (mslk.attention.fmha.split_blocks_fairinternal): each rewritten mask
against the chunked-attention mask built element by element (query at position p of sequence b sees key
j of its lane iff j // L == p // L, j < seqlen[b] and, when causal, j <= p), and attention under the
rewritten mask equal to float64 attention under that dense mask, paged K/V included. CUDA cases
(needs_cuda) run the rewritten masks through the fused and split-K kernels."""

import math

import pytest
import torch

from mslk.attention import fmha
from mslk.attention.fmha import attn_bias as ab
from mslk.attention.fmha import triton_splitk
from mslk.attention.fmha.common import _kernel_registered
from test.attention.oracle import paginate
from mslk.attention.fmha.split_blocks_fairinternal import (
    maybe_make_paged, split_blocks_for_decoding, split_blocks_for_decoding_gpu_part, split_blocks_for_prefill,
)
from test.attention.tolerance import assert_attention_close

HAS_REF = hasattr(torch.ops.mslk, "fmha_reference_fwd")
HAS_CUDA_KERNEL = (hasattr(torch.ops.mslk, "fmha_decode_splitk") and torch.cuda.is_available()
                   and _kernel_registered("mslk::fmha_decode_splitk", "CUDA"))
needs_cuda = pytest.mark.skipif(not HAS_CUDA_KERNEL, reason="needs a GPU and a CUDA build of mslk")
needs_ref = pytest.mark.skipif(not HAS_REF, reason="native library not loaded")


def chunked_mask(q_lens, kv_lens, P, L, causal):
    """Dense float64 [sum(q_lens), B * P] mask of chunked attention over padded lanes."""
    m = torch.full((sum(q_lens), len(kv_lens) * P), -math.inf, dtype=torch.float64)
    row = 0
    for b, (lq, lk) in enumerate(zip(q_lens, kv_lens)):
        for i in range(lq):
            p = lk - lq + i
            for j in range(lk):
                if j // L == p // L and (j <= p or not causal):
                    m[row, b * P + j] = 0.0
            row += 1
    return m


def attention_f64(q, k, v, mask):
    s = torch.einsum("mhd,nhd->hmn", q[0].double(), k[0].double()) * q.shape[-1] ** -0.5 + mask
    return torch.einsum("hmn,nhd->mhd", torch.softmax(s, dim=-1), v[0].double()).unsqueeze(0)


def qkv(Mq, Mkv, H=2, D=16, dtype=torch.float32, device="cpu", seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(1, m, H, D, generator=g).to(device=device, dtype=dtype) for m in (Mq, Mkv, Mkv)]


def shuffled_tables(B, pages, seed=0):
    perm = torch.randperm(B * pages, generator=torch.Generator().manual_seed(seed))
    return perm.reshape(B, pages).to(torch.int32)


# ---- prefill ----------------------------------------------------------------------------------------

PREFILL = [  # (q_lens, kv_lens, padding, L)
    ([20, 1, 8, 0], [30, 17, 8, 5], 32, 8),
    ([5, 12], [5, 12], 16, 4),
    ([3], [64], 64, 16),
]


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("q_lens,kv_lens,P,L", PREFILL)
def test_prefill_mask_is_chunked_attention(q_lens, kv_lens, P, L, causal):
    cls = ab.BlockDiagonalCausalWithOffsetPaddedKeysMask if causal else ab.BlockDiagonalPaddedKeysMask
    bias = cls.from_seqlens(q_lens, P, kv_lens)
    out = split_blocks_for_prefill(bias, L)
    assert type(out) is cls and out.k_seqinfo.padding == L
    assert len(out.k_seqinfo.seqlen_py) == len(kv_lens) * P // L
    want = chunked_mask(q_lens, kv_lens, P, L, causal)
    got = out.materialize(want.shape, torch.float64)
    assert torch.equal(got, want)


@needs_ref
@pytest.mark.parametrize("q_lens,kv_lens,P,L", PREFILL[:2])
def test_prefill_attention_equivalent(q_lens, kv_lens, P, L):
    bias = ab.BlockDiagonalCausalWithOffsetPaddedKeysMask.from_seqlens(q_lens, P, kv_lens)
    q, k, v = qkv(sum(q_lens), len(kv_lens) * P, seed=1)
    got = fmha.memory_efficient_attention(q, k, v, split_blocks_for_prefill(bias, L))
    want = attention_f64(q, k, v, chunked_mask(q_lens, kv_lens, P, L, True))
    torch.testing.assert_close(got.double(), want, atol=2e-5, rtol=2e-5)


@needs_ref
def test_prefill_paged_input_stays_paged():
    q_lens, kv_lens, P, L, page = [20, 1, 8], [30, 17, 8], 32, 8, 4
    tables = shuffled_tables(3, P // page)
    paged = ab.PagedBlockDiagonalCausalWithOffsetPaddedKeysMask.from_seqlens(q_lens, kv_lens, tables, page)
    out = split_blocks_for_prefill(paged, L)
    assert type(out) is ab.PagedBlockDiagonalCausalWithOffsetPaddedKeysMask
    assert out.block_tables.shape == (3 * P // L, L // page)
    q, k, v = qkv(sum(q_lens), 3 * P, seed=2)
    got = fmha.memory_efficient_attention(q, paginate(k, tables, page), paginate(v, tables, page), out)
    want = attention_f64(q, k, v, chunked_mask(q_lens, kv_lens, P, L, True))
    torch.testing.assert_close(got.double(), want, atol=2e-5, rtol=2e-5)


def test_prefill_none_and_errors():
    bias = ab.BlockDiagonalCausalWithOffsetPaddedKeysMask.from_seqlens([2], 16, [5])
    assert split_blocks_for_prefill(bias, None) is None
    with pytest.raises(ValueError, match="multiple"):
        split_blocks_for_prefill(bias, 5)
    with pytest.raises(ValueError, match="batchify_len"):
        split_blocks_for_prefill(bias, 0)
    with pytest.raises(TypeError, match="input_bias"):
        split_blocks_for_prefill(ab.BlockDiagonalMask.from_seqlens([2]), 4)


# ---- decoding ---------------------------------------------------------------------------------------

DECODE_KV = [1, 8, 9, 30, 16, 17]


@pytest.mark.parametrize("causal", [True, False])
def test_decoding_gappy_mask(causal):
    P, L = 32, 8
    cls = ab.BlockDiagonalCausalWithOffsetPaddedKeysMask if causal else ab.BlockDiagonalPaddedKeysMask
    q_lens = [1] * len(DECODE_KV)
    bias = cls.from_seqlens(q_lens, P, DECODE_KV)
    out = split_blocks_for_decoding(bias, L)
    assert type(out) is ab.BlockDiagonalGappyKeysMask
    want = chunked_mask(q_lens, DECODE_KV, P, L, causal)
    assert torch.equal(out.materialize(want.shape, torch.float64), want)
    starts, lens = split_blocks_for_decoding_gpu_part(bias, L)
    assert torch.equal(starts, out.k_seqinfo.seqstart) and torch.equal(lens, out.k_seqinfo.seqlen)
    again = split_blocks_for_decoding(bias, L, gpu_data=(starts, lens))
    assert again.k_seqinfo.seqstart is starts and again.k_seqinfo.seqlen is lens


@needs_ref
def test_decoding_attention_equivalent():
    P, L = 32, 8
    q_lens = [1] * len(DECODE_KV)
    bias = ab.BlockDiagonalCausalWithOffsetPaddedKeysMask.from_seqlens(q_lens, P, DECODE_KV)
    q, k, v = qkv(len(q_lens), len(q_lens) * P, seed=3)
    got = fmha.memory_efficient_attention(q, k, v, split_blocks_for_decoding(bias, L))
    torch.testing.assert_close(got.double(), attention_f64(q, k, v, chunked_mask(q_lens, DECODE_KV, P, L, True)),
                               atol=2e-5, rtol=2e-5)


@needs_ref
@pytest.mark.parametrize("input_paged", [False, True])
def test_decoding_paged(input_paged):
    P, L, page = 32, 8, 4
    B = len(DECODE_KV)
    q_lens = [1] * B
    tables = shuffled_tables(B, P // page, seed=4)
    if input_paged:
        bias = ab.PagedBlockDiagonalCausalWithOffsetPaddedKeysMask.from_seqlens(q_lens, DECODE_KV, tables, page)
        out = split_blocks_for_decoding(bias, L)
        gpu = split_blocks_for_decoding_gpu_part(bias, L)
    else:
        bias = ab.BlockDiagonalCausalWithOffsetPaddedKeysMask.from_seqlens(q_lens, P, DECODE_KV)
        out = split_blocks_for_decoding(bias, L, block_tables=tables, page_size=page)
        gpu = split_blocks_for_decoding_gpu_part(bias, L, block_tables=tables, page_size=page)
    assert type(out) is ab.PagedBlockDiagonalGappyKeysMask
    assert torch.equal(gpu[0], out.k_seqinfo.seqstart) and torch.equal(gpu[1], out.k_seqinfo.seqlen)
    q, k, v = qkv(B, B * P, seed=5)
    got = fmha.memory_efficient_attention(q, paginate(k, tables, page), paginate(v, tables, page), out)
    want = attention_f64(q, k, v, chunked_mask(q_lens, DECODE_KV, P, L, True))
    torch.testing.assert_close(got.double(), want, atol=2e-5, rtol=2e-5)


def test_decoding_several_queries():
    P, L = 32, 8
    inside = ab.BlockDiagonalCausalWithOffsetPaddedKeysMask.from_seqlens([3, 2], P, [12, 30])  # [9,12), [28,30)
    out = split_blocks_for_decoding(inside, L)
    assert type(out) is ab.BlockDiagonalCausalWithOffsetGappyKeysMask
    want = chunked_mask([3, 2], [12, 30], P, L, True)
    assert torch.equal(out.materialize(want.shape, torch.float64), want)
    straddle = ab.BlockDiagonalCausalWithOffsetPaddedKeysMask.from_seqlens([3, 2], P, [9, 30])  # [6, 9) crosses 8
    assert split_blocks_for_decoding(straddle, L) is None
    assert split_blocks_for_decoding(inside, None) is None
    assert split_blocks_for_decoding_gpu_part(inside, None) is None


# ---- paging -----------------------------------------------------------------------------------------

def test_maybe_make_paged():
    tables = shuffled_tables(2, 4, seed=6)
    padded = ab.BlockDiagonalCausalWithOffsetPaddedKeysMask.from_seqlens([1, 2], 16, [5, 16])
    assert maybe_make_paged(padded, None, 4, 16) is padded
    assert maybe_make_paged(None, tables, 4, 16) is None
    paged = maybe_make_paged(padded, tables, 4, 16)
    assert type(paged) is ab.PagedBlockDiagonalCausalWithOffsetPaddedKeysMask
    assert maybe_make_paged(paged, tables, 4, 16) is paged
    mq, mkv = 3, 32
    # Padded: each query row sees the same keys through the pages as in the padded lanes.
    dense = padded.materialize((mq, mkv), torch.float64)
    phys = paged.materialize((mq, mkv), torch.float64)
    assert torch.equal(paginate(dense.unsqueeze(0).transpose(1, 2), tables, 4).transpose(1, 2)[0], phys)
    gappy = ab.BlockDiagonalGappyKeysMask.from_seqlens([1, 2], [3, 16 + 8, 32], [5, 8])
    pg = maybe_make_paged(gappy, tables, 4, 16)
    assert type(pg) is ab.PagedBlockDiagonalGappyKeysMask and pg.k_seqinfo.seqstart_py == [3, 8, 16]
    dense = gappy.materialize((mq, mkv), torch.float64)
    assert torch.equal(paginate(dense.unsqueeze(0).transpose(1, 2), tables, 4).transpose(1, 2)[0],
                       pg.materialize((mq, mkv), torch.float64))
    with pytest.raises(TypeError, match="no paged form"):
        maybe_make_paged(ab.BlockDiagonalMask.from_seqlens([2]), tables, 4, 16)
    with pytest.raises(ValueError, match="lanes"):
        maybe_make_paged(ab.BlockDiagonalPaddedKeysMask.from_seqlens([1, 1, 1], 8, [1, 1, 1]), tables, 4, 16)


# ---- CUDA -------------------------------------------------------------------------------------------

@needs_cuda
@pytest.mark.parametrize("paged", [False, True])
def test_decoding_cuda_splitk(paged):
    B, P, L, page, H, D = 4, 8192, 2048, 256, 8, 128
    kv = [8192, 2048, 2049, 5000]
    bias = ab.BlockDiagonalCausalWithOffsetPaddedKeysMask.from_seqlens([1] * B, P, kv, device="cuda")
    q, k, v = qkv(B, B * P, H, D, torch.bfloat16, "cuda", seed=8)
    want = attention_f64(q.cpu(), k.cpu(), v.cpu(), chunked_mask([1] * B, kv, P, L, True))
    if paged:
        tables = shuffled_tables(B, P // page, seed=9)
        out = split_blocks_for_decoding(bias, L, block_tables=tables.cuda(), page_size=page,
                                        gpu_data=split_blocks_for_decoding_gpu_part(bias, L, tables.cuda(), page))
        k, v = paginate(k, tables, page), paginate(v, tables, page)
    else:
        out = split_blocks_for_decoding(bias, L, gpu_data=split_blocks_for_decoding_gpu_part(bias, L))
    for op in (None, triton_splitk.FwOp):
        got = fmha.memory_efficient_attention_forward(q, k, v, out, op=op)
        assert_attention_close(got, want, torch.bfloat16)


@needs_cuda
def test_prefill_cuda():
    q_lens, kv, P, L = [300, 1, 64], [1000, 513, 64], 1024, 256
    bias = ab.BlockDiagonalCausalWithOffsetPaddedKeysMask.from_seqlens(q_lens, P, kv, device="cuda")
    q, k, v = qkv(sum(q_lens), 3 * P, 8, 128, torch.float16, "cuda", seed=10)
    got = fmha.memory_efficient_attention(q, k, v, split_blocks_for_prefill(bias, L))
    want = attention_f64(q.cpu(), k.cpu(), v.cpu(), chunked_mask(q_lens, kv, P, L, True))
    assert_attention_close(got, want, torch.float16)


def test_prefill_chunk_longer_than_the_lane():
    # batchify_len past the K/V padding: each lane is one chunk, the mask comes back as it was
    from mslk.attention.fmha import attn_bias as ab
    from mslk.attention.fmha.split_blocks_fairinternal import split_blocks_for_prefill
    b = ab.BlockDiagonalCausalWithOffsetPaddedKeysMask.from_seqlens([3, 5], 16, [7, 16])
    o = split_blocks_for_prefill(b, 32)
    assert type(o) is type(b) and o.k_seqinfo.padding == 16
    assert o.q_seqinfo.seqstart.tolist() == [0, 3, 8] and o.k_seqinfo.seqlen.tolist() == [7, 16]
