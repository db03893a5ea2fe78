"""Every mask class: materialize() against an element-by-element construction, constructor
validation, split round trips, seqinfo layout."""

import math

import pytest
import torch

from mslk.attention.fmha import attn_bias as ab
from test.attention import oracle as o


@pytest.mark.parametrize("mq,mkv", [(1, 1), (5, 5), (4, 9), (9, 4), (1, 7)])
def test_dense_masks(mq, mkv):
    cases = [
        (ab.LowerTriangularMask(), o.causal_tl),
        (ab.LowerTriangularFromBottomRightMask(), o.causal_br),
        (ab.LowerTriangularFromBottomRightLocalAttentionMask(3), o.causal_local(3, True)),
        (ab.LowerTriangularFromBottomRightMask().make_local_attention(1), o.causal_local(1, True)),
        (ab.LocalAttentionFromBottomRightMask(2, 1), o.local_br(2, 1)),
        (ab.LocalAttentionFromBottomRightMask(0, 0), o.local_br(0, 0)),
    ]
    for bias, pred in cases:
        got = bias.materialize((mq, mkv), torch.float32)
        assert got.dtype == torch.float32
        torch.testing.assert_close(got.double(), o.dense_mask(pred, mq, mkv), msg=type(bias).__name__)
        assert (got == 0).logical_or(torch.isneginf(got)).all()
    # leading dims broadcast, dtype honoured
    m = ab.LowerTriangularMask().materialize((2, 3, mq, mkv), torch.bfloat16)
    assert m.shape == (2, 3, mq, mkv) and m.dtype == torch.bfloat16
    assert torch.equal(m[1, 2].double(), o.dense_mask(o.causal_tl, mq, mkv))


def test_tensor_bias_mask():
    b = torch.randn(2, 3, 4, 6)
    m = ab.LowerTriangularMask().add_bias(b)
    assert isinstance(m, ab.LowerTriangularMaskWithTensorBias)
    want = o.dense_mask(o.causal_tl, 4, 6) + b.double()
    torch.testing.assert_close(m.materialize((2, 3, 4, 6)).double(), want)


QL = [3, 0, 5, 1]
KL = [4, 2, 5, 6]


def block_cases():
    lanes, tot = o.packed_lanes(KL)
    qlanes, qtot = o.packed_lanes(QL)
    same_lanes, _ = o.packed_lanes(QL)
    pad_lanes, pad_tot = o.padded_lanes([2, 0, 5, 3], 6)
    starts = [1, 10, 4, 20, 30]
    gap_lanes, gap_tot = o.gappy_lanes(starts, [3, 2, 0, 6])
    bd = ab.BlockDiagonalMask.from_seqlens(QL, KL)
    return [
        (bd, o.everything, QL, lanes, tot),
        (ab.BlockDiagonalMask.from_seqlens(QL), o.everything, QL, same_lanes, qtot),
        (bd.make_causal(), o.causal_tl, QL, lanes, tot),
        (bd.make_causal_from_bottomright(), o.causal_br, QL, lanes, tot),
        (bd.make_local_attention(2), o.causal_local(2, False), QL, lanes, tot),
        (bd.make_local_attention_from_bottomright(3), o.causal_local(3, True), QL, lanes, tot),
        (ab.BlockDiagonalCausalMask.from_seqlens(QL, KL), o.causal_tl, QL, lanes, tot),
        (ab.BlockDiagonalPaddedKeysMask.from_seqlens(QL, 6, [2, 0, 5, 3]), o.everything, QL, pad_lanes, pad_tot),
        (ab.BlockDiagonalCausalWithOffsetPaddedKeysMask.from_seqlens(QL, 6, [2, 0, 5, 3]), o.causal_br, QL,
         pad_lanes, pad_tot),
        (ab.BlockDiagonalLocalAttentionPaddedKeysMask.from_seqlens_local(QL, 6, [2, 0, 5, 3], 1, 2),
         o.local_br(1, 2), QL, pad_lanes, pad_tot),
        (ab.BlockDiagonalPaddedKeysMask.from_seqlens(QL, 6, [2, 0, 5, 3]).make_local_attention(0, 1),
         o.local_br(0, 1), QL, pad_lanes, pad_tot),
        (ab.BlockDiagonalCausalLocalAttentionPaddedKeysMask.from_seqlens_local(QL, 6, [2, 0, 5, 3], 2),
         o.causal_local(2, True), QL, pad_lanes, pad_tot),
        (ab.BlockDiagonalGappyKeysMask.from_seqlens(QL, starts, [3, 2, 0, 6]), o.everything, QL, gap_lanes,
         gap_tot),
        (ab.BlockDiagonalCausalWithOffsetGappyKeysMask.from_seqlens(QL, starts, [3, 2, 0, 6]), o.causal_br, QL,
         gap_lanes, gap_tot),
        (ab.BlockDiagonalLocalAttentionFromBottomRightGappyKeysMask.from_seqlens_local_gappy(
            QL, starts, [3, 2, 0, 6], 2, 0, None), o.local_br(2, 0), QL, gap_lanes, gap_tot),
    ]


@pytest.mark.parametrize("idx", range(15))
def test_block_masks(idx):
    bias, pred, ql, lanes, tot = block_cases()[idx]
    want = o.blocks_mask(pred, ql, lanes, tot)
    got = bias.materialize((sum(ql), tot))
    torch.testing.assert_close(got.double(), want, msg=type(bias).__name__)
    got4 = bias.materialize((1, 2, sum(ql), tot), torch.float16)
    assert got4.shape == (1, 2, sum(ql), tot) and torch.equal(got4[0, 1].double(), want)
    assert isinstance(bias, ab.VARLEN_BIASES)
    with pytest.raises(ValueError):
        bias.materialize((sum(ql) + 1, tot))


def paged_cases():
    bt = torch.tensor([[5, 1, 0], [2, 7, 3], [4, 6, 8]], dtype=torch.int32)
    ps = 4
    q = [2, 3, 1]
    kvl = [9, 3, 12]
    pad_lanes = o.paged_lanes([0, 0, 0], kvl, bt, ps)
    offs, gl = [1, 0, 5], [6, 3, 7]
    gap_lanes = o.paged_lanes(offs, gl, bt, ps)
    phys = 9 * ps
    padded = ab.BlockDiagonalCausalWithOffsetPaddedKeysMask.from_seqlens(q, 12, kvl)
    gappy = ab.BlockDiagonalGappyKeysMask.from_seqlens(q, [0 * 12 + 1, 1 * 12 + 0, 2 * 12 + 5, 36], gl)
    return [
        (ab.PagedBlockDiagonalPaddedKeysMask.from_seqlens(q, kvl, bt, ps), o.everything, q, pad_lanes, phys),
        (ab.PagedBlockDiagonalCausalWithOffsetPaddedKeysMask.from_seqlens(q, kvl, bt, ps), o.causal_br, q,
         pad_lanes, phys),
        (padded.make_paged(bt, ps, ab.PagedBlockDiagonalCausalWithOffsetPaddedKeysMask), o.causal_br, q, pad_lanes,
         phys),
        (ab.PagedBlockDiagonalCausalLocalPaddedKeysMask.from_seqlens_local(q, kvl, bt, ps, 3),
         o.causal_local(3, True), q, pad_lanes, phys),
        (ab.BlockDiagonalCausalLocalAttentionPaddedKeysMask.from_seqlens_local(q, 12, kvl, 2).make_paged(
            bt, ps, ab.PagedBlockDiagonalCausalLocalPaddedKeysMask), o.causal_local(2, True), q, pad_lanes, phys),
        (ab.PagedBlockDiagonalGappyKeysMask.from_seqlens(q, offs + [12], gl, bt, ps), o.everything, q, gap_lanes,
         phys),
        (ab.PagedBlockDiagonalCausalWithOffsetGappyKeysMask.from_seqlens(q, offs + [12], gl, bt, ps), o.causal_br,
         q, gap_lanes, phys),
        (gappy.make_paged(bt, ps, 12, ab.PagedBlockDiagonalGappyKeysMask), o.everything, q, gap_lanes, phys),
    ]


@pytest.mark.parametrize("idx", range(8))
def test_paged_masks(idx):
    bias, pred, ql, lanes, phys = paged_cases()[idx]
    want = o.blocks_mask(pred, ql, lanes, phys + 4)
    got = bias.materialize((sum(ql), phys + 4))  # physical K/V may be longer than the pages in use
    torch.testing.assert_close(got.double(), want, msg=type(bias).__name__)
    with pytest.raises(ValueError):
        bias.materialize((sum(ql), phys - 1))


def test_seqinfo_layout():
    m = ab.BlockDiagonalMask.from_seqlens([3, 0, 4], [2, 5, 1])
    assert m.q_seqinfo.seqstart.dtype == torch.int32
    assert m.q_seqinfo.seqstart.tolist() == [0, 3, 3, 7]
    assert m.k_seqinfo.seqstart_py == [0, 2, 7, 8]
    assert (m.q_seqinfo.max_seqlen, m.q_seqinfo.min_seqlen) == (4, 0)
    p = ab.BlockDiagonalPaddedKeysMask.from_seqlens([1, 1], 8, [3, 8])
    assert p.k_seqinfo.seqstart.tolist() == [0, 8, 16] and p.k_seqinfo.seqlen.tolist() == [3, 8]
    assert p.k_seqinfo.seqlen.dtype == torch.int32 and p.k_seqinfo.padding == 8
    g = ab.BlockDiagonalGappyKeysMask.from_seqlens([1, 1], [4, 0, 10], [2, 3])
    assert g.k_seqinfo.seqstart.tolist() == [4, 0, 10]
    same = ab.BlockDiagonalMask.from_seqlens([2, 3])
    assert same.k_seqinfo.seqstart_py == same.q_seqinfo.seqstart_py
    assert m.to("cpu").q_seqinfo.seqstart_py == m.q_seqinfo.seqstart_py


def test_constructor_validation():
    with pytest.raises(ValueError):
        ab.LowerTriangularFromBottomRightLocalAttentionMask(0)
    with pytest.raises(ValueError):
        ab.LowerTriangularFromBottomRightLocalAttentionMask()
    with pytest.raises(ValueError):
        ab.LocalAttentionFromBottomRightMask(-1, 2)
    bd = ab.BlockDiagonalMask.from_seqlens([2, 3])
    with pytest.raises(ValueError):
        bd.make_local_attention(0)
    with pytest.raises(ValueError):
        bd.make_local_attention_from_bottomright(-2)
    with pytest.raises(ValueError, match="at least as long"):
        ab.BlockDiagonalMask.from_seqlens([4, 2], [3, 5]).make_causal_from_bottomright()
    with pytest.raises(ValueError):
        ab.BlockDiagonalMask.from_seqlens([2, 3], [2, 3, 4])
    with pytest.raises(ValueError):
        ab.BlockDiagonalMask.from_seqlens([2, -1])
    with pytest.raises(ValueError):
        ab.BlockDiagonalMask.from_seqlens([])
    with pytest.raises(ValueError):
        ab.BlockDiagonalPaddedKeysMask.from_seqlens([1, 1], 4, [5, 1])
    with pytest.raises(ValueError):
        ab.BlockDiagonalPaddedKeysMask.from_seqlens([1, 1], 0, [0, 0])
    with pytest.raises(ValueError):
        ab.BlockDiagonalCausalLocalAttentionPaddedKeysMask.from_seqlens_local([1], 4, [2], 0)
    with pytest.raises(ValueError):
        ab.BlockDiagonalGappyKeysMask.from_seqlens([1, 1], [0, 4], [2, 2])  # needs B+1 starts
    with pytest.raises(ValueError):
        ab.BlockDiagonalGappyKeysMask.from_seqlens([1], [3, 4], [2])  # lane runs past the end
    bt = torch.tensor([[0, 1], [2, 3]], dtype=torch.int32)
    with pytest.raises(ValueError):
        ab.PagedBlockDiagonalPaddedKeysMask.from_seqlens([1, 1], [3, 9], bt, 4)  # 9 > 2 pages * 4
    with pytest.raises(ValueError):
        ab.PagedBlockDiagonalPaddedKeysMask.from_seqlens([1, 1, 1], [3, 3, 3], bt, 4)  # 3 rows needed
    with pytest.raises(ValueError):
        ab.PagedBlockDiagonalPaddedKeysMask.from_seqlens([1, 1], [1, 1], bt.float(), 4)
    with pytest.raises(ValueError):
        ab.PagedBlockDiagonalCausalLocalPaddedKeysMask.from_seqlens_local([1, 1], [2, 2], bt, 4, 0)
    with pytest.raises(ValueError):
        ab.BlockDiagonalPaddedKeysMask.from_seqlens([1, 1], 8, [2, 2]).make_paged(bt, 4, None)
    with pytest.raises(TypeError):
        ab.LocalAttentionFromBottomRightMask(1.5, 2)


def test_split_round_trips():
    xs = [torch.randn(2, 3, 4), torch.randn(1, 5, 4), torch.randn(3, 1, 4)]
    mask, packed = ab.BlockDiagonalMask.from_tensor_list(xs)
    assert packed.shape == (1, 2 * 3 + 5 + 3, 4)
    assert mask.q_seqinfo.seqlen_py == [3, 3, 5, 1, 1, 1]
    for a, b in zip(mask.split(packed), xs):
        assert torch.equal(a, b)
    qs = [torch.randn(1, 2, 2, 8), torch.randn(2, 4, 2, 8)]
    ks = [torch.randn(1, 6, 2, 8), torch.randn(2, 1, 2, 8)]
    vs = [torch.randn(1, 6, 2, 4), torch.randn(2, 1, 2, 4)]
    m2, q, k, v = ab.BlockDiagonalMask.from_tensor_lists_qkv(qs, ks, vs)
    assert m2.k_seqinfo.seqlen_py == [6, 1, 1]
    for a, b in zip(m2.split_queries(q), qs):
        assert torch.equal(a, b)
    for a, b in zip(m2.split_kv(k), ks):
        assert torch.equal(a, b)
    for a, b in zip(m2.split_kv(v), vs):
        assert torch.equal(a, b)
    with pytest.raises(ValueError):
        m2.split(q)  # q and k sequences differ
    _, _, _, none_v = ab.BlockDiagonalMask.from_tensor_lists_qkv(qs, ks)
    assert none_v is None
    causal = m2.make_causal()
    assert type(causal) is ab.BlockDiagonalCausalMask
    for a, b in zip(causal.split_queries(q), qs):
        assert torch.equal(a, b)
    plain = ab.BlockDiagonalMask.from_seqlens([2, 0, 3])
    x = torch.randn(1, 5, 7)
    parts = plain.split(x)
    assert [p.shape[1] for p in parts] == [2, 0, 3]
    assert torch.equal(torch.cat(parts, dim=1), x)


def test_varlen_biases():
    assert set(ab.VARLEN_BIASES) >= {ab.BlockDiagonalMask, ab.BlockDiagonalPaddedKeysMask,
                                     ab.BlockDiagonalGappyKeysMask, ab.PagedBlockDiagonalPaddedKeysMask,
                                     ab.PagedBlockDiagonalGappyKeysMask}
    assert not isinstance(ab.LowerTriangularMask(), ab.VARLEN_BIASES)
    assert isinstance(ab.PagedBlockDiagonalCausalLocalPaddedKeysMask.from_seqlens_local(
        [1], [2], torch.zeros(1, 1, dtype=torch.int32), 4, 1), ab.VARLEN_BIASES)


def test_integer_like_arguments():
    np = pytest.importorskip("numpy")
    bd = ab.BlockDiagonalMask.from_seqlens(np.array([2, 3]), [np.int64(3), np.int64(4)])
    assert bd.q_seqinfo.seqstart_py == [0, 2, 5] and bd.k_seqinfo.seqstart_py == [0, 3, 7]
    assert all(type(x) is int for x in bd.k_seqinfo.seqstart_py)
    loc = ab.LowerTriangularFromBottomRightLocalAttentionMask(np.int64(3))
    assert type(loc._window_size) is int and loc == ab.LowerTriangularFromBottomRightLocalAttentionMask(3)
    la = ab.LocalAttentionFromBottomRightMask(np.int32(1), torch.tensor(2))
    assert (type(la.window_left), type(la.window_right)) == (int, int)
    torch.testing.assert_close(la.materialize((4, 5)), ab.LocalAttentionFromBottomRightMask(1, 2).materialize((4, 5)))
    pk = ab.BlockDiagonalCausalLocalAttentionPaddedKeysMask.from_seqlens_local([1, 1], np.int64(4), [2, 3],
                                                                              np.int64(2))
    assert pk.k_seqinfo.padding == 4 and type(pk.k_seqinfo.padding) is int and type(pk._window_size) is int
    bt = torch.tensor([[0, 1], [2, 3]], dtype=torch.int32)
    paged = ab.PagedBlockDiagonalCausalWithOffsetPaddedKeysMask.from_seqlens([1, 1], [3, 4], bt, np.int64(2))
    assert type(paged.page_size) is int and paged.k_seqinfo.padding == 4
    with pytest.raises(TypeError):
        ab.BlockDiagonalMask.from_seqlens([2, True])
    with pytest.raises(TypeError):
        ab.LowerTriangularFromBottomRightLocalAttentionMask(2.0)
    with pytest.raises(ValueError):
        ab.BlockDiagonalPaddedKeysMask.from_seqlens([1], 4.0, [2])
    with pytest.raises(ValueError):
        ab.PagedBlockDiagonalPaddedKeysMask.from_seqlens([1, 1], [1, 1], bt, True)
