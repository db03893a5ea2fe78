"""FlashAttention raw ops (mslk_flash::flash_fwd, mslk_flash3::flash_fwd) and operator classes
(flash.FwOp, flash3.FwOp) on mslk's fused attention forward.

CPU: the argument mapping (masks, GQA folding, varlen / paged layouts, LSE layouts) through the
fused op's CPU implementation, the raw ops' reference path, and honest availability / support
reasons. CUDA (skipped without a GPU): the raw ops and the classes against the float64 oracle.
Masks are FlashAttention's: key j is visible from query i of a sequence with Mq queries and Mk keys
iff i + Mk - Mq - window_left <= j <= i + Mk - Mq + window_right (negative: unbounded), causal
meaning window_right = 0."""

import math

import pytest
import torch

from mslk.attention import fmha
from mslk.attention.fmha import _backward, _raw_ops
from mslk.attention.fmha import attn_bias as ab
from mslk.attention.fmha import cutlass, dispatch, flash, flash3, reference
from mslk.attention.fmha.common import Inputs, _kernel_registered
from test.attention import oracle
from test.attention.tolerance import assert_attention_close

HAS_OP = hasattr(torch.ops.mslk, "fmha_fused_fwd")
HAS_CUDA_KERNEL = HAS_OP and torch.cuda.is_available() and _kernel_registered("mslk::fmha_fused_fwd", "CUDA")
IS_SM90 = HAS_CUDA_KERNEL and torch.cuda.get_device_capability() == (9, 0)
needs_cuda = pytest.mark.skipif(not HAS_CUDA_KERNEL, reason="needs a GPU and a CUDA build of mslk")
pytestmark = pytest.mark.skipif(not HAS_OP, reason="native library not loaded")

# fp16 / bf16: tolerance.py
TOL = {torch.float32: dict(atol=1e-5, rtol=1e-5), torch.float64: dict(atol=1e-9, rtol=1e-9)}


def rand(shape, dtype=torch.float32, device="cpu", gen=None):
    return torch.randn(shape, generator=gen, dtype=torch.float32).to(device=device, dtype=dtype)


def fa_mask(mq, mk, causal, wl, wr):
    """[mq, mk] additive float64 mask of FlashAttention's bottom-right aligned causal / window."""
    if causal:
        wr = 0
    i = torch.arange(mq).unsqueeze(1)
    j = torch.arange(mk).unsqueeze(0)
    d = j - i - (mk - mq)
    ok = torch.ones(mq, mk, dtype=torch.bool)
    if wl >= 0:
        ok &= d >= -wl
    if wr >= 0:
        ok &= d <= wr
    return torch.zeros(mq, mk, dtype=torch.float64).masked_fill(~ok, -math.inf)


def ref_seq(q, k, v, scale, causal, wl, wr):
    """One sequence: q [Mq, Hq, K], k/v [Mk, Hkv, *] (Hq a multiple of Hkv) -> float64 out [Mq, Hq, Kv],
    lse [Hq, Mq]."""
    G = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(G, dim=1), v.repeat_interleave(G, dim=1)
    out, lse = oracle.attention_f64(q[None].cpu(), k[None].cpu(), v[None].cpu(),
                                    fa_mask(q.shape[0], k.shape[0], causal, wl, wr), scale)
    return out[0], lse[0]


def ref_dense(q, k, v, scale, causal, wl, wr, seqlen_k=None):
    outs, lses = [], []
    for b in range(q.shape[0]):
        n = k.shape[1] if seqlen_k is None else int(seqlen_k[b])
        o, l_ = ref_seq(q[b], k[b, :n], v[b, :n], scale, causal, wl, wr)
        outs.append(o)
        lses.append(l_)
    return torch.stack(outs), torch.stack(lses)


def ref_varlen(q, lanes_k, lanes_v, cu_q, scale, causal, wl, wr):
    """q [total, Hq, K]; lanes_k[b] / lanes_v[b]: the keys / values of sequence b. Rows outside every
    sequence: out 0, lse -inf."""
    T, Hq = q.shape[0], q.shape[1]
    out = torch.zeros(T, Hq, lanes_v[0].shape[-1], dtype=torch.float64)
    lse = torch.full((Hq, T), -math.inf, dtype=torch.float64)
    for b in range(len(cu_q) - 1):
        a, e = cu_q[b], cu_q[b + 1]
        o, l_ = ref_seq(q[a:e], lanes_k[b], lanes_v[b], scale, causal, wl, wr)
        out[a:e], lse[:, a:e] = o, l_
    return out, lse


def check(out, lse, want_out, want_lse, dtype):
    """out / lse against the float64 oracle; -inf LSE (no visible key) exactly where the oracle has it."""
    assert out.shape == want_out.shape and lse.shape == want_lse.shape
    assert lse.dtype in (torch.float32, torch.float64)
    out, lse = out.double().cpu(), lse.double().cpu()
    if dtype in (torch.float16, torch.bfloat16):
        assert_attention_close(out, want_out, dtype)
    else:
        torch.testing.assert_close(out, want_out, **TOL[dtype])
    fin = torch.isfinite(want_lse)
    assert torch.equal(torch.isneginf(lse), ~fin)
    lse_tol = TOL[dtype] if dtype in (torch.float32, torch.float64) else dict(atol=2e-3, rtol=1e-3)
    torch.testing.assert_close(lse[fin], want_lse[fin], **lse_tol)


def paged_cache(kl, page, Hkv, K, Kv, dtype, device, gen, spare=3):
    """Per-sequence key/value lanes stored in shuffled pages: (k_pages [P, page, Hkv, K], v_pages,
    block_table [B, max_pages] int32, lanes_k, lanes_v)."""
    max_pages = max(1, max(-(-n // page) for n in kl))
    total = len(kl) * max_pages + spare
    kp, vp = rand((total, page, Hkv, K), dtype, device, gen), rand((total, page, Hkv, Kv), dtype, device, gen)
    bt = torch.randperm(total, generator=gen)[:len(kl) * max_pages].view(len(kl), max_pages).to(torch.int32)
    lanes_k = [torch.cat([kp[p] for p in bt[b].tolist()])[:n] for b, n in enumerate(kl)]
    lanes_v = [torch.cat([vp[p] for p in bt[b].tolist()])[:n] for b, n in enumerate(kl)]
    return kp, vp, bt.to(device), lanes_k, lanes_v


def cumsum0(xs, device="cpu"):
    out = [0]
    for x in xs:
        out.append(out[-1] + x)
    return torch.tensor(out, dtype=torch.int32, device=device)


MASKS = [(False, -1, -1), (True, -1, -1), (False, 5, 2), (True, 17, -1), (False, -1, 0), (False, 0, 3)]


# ---- CPU: the mapping onto the fused op, through its CPU implementation ---------------------------

def test_mask_mapping():
    M = _raw_ops
    assert M.flash_mask_args(False, -1, -1) == (M.MASK_NONE, -1, -1)
    assert M.flash_mask_args(True, -1, -1) == (M.MASK_CAUSAL_BOTTOM_RIGHT, -1, -1)
    assert M.flash_mask_args(True, 7, 3) == (M.MASK_CAUSAL_BOTTOM_RIGHT, 7, -1)  # causal: window_right = 0
    assert M.flash_mask_args(False, 4, -1) == (M.MASK_LOCAL_BOTTOM_RIGHT, 4, -1)
    assert M.flash_mask_args(False, -5, 2) == (M.MASK_LOCAL_BOTTOM_RIGHT, -1, 2)
    assert M.flash_mask_args(False, 0, 0) == (M.MASK_LOCAL_BOTTOM_RIGHT, 0, 0)
    # the values match the fused op's documented kinds (and cutlass.FwOp's descriptor constants)
    assert (M.MASK_NONE, M.MASK_CAUSAL_TOP_LEFT, M.MASK_CAUSAL_BOTTOM_RIGHT, M.MASK_LOCAL_BOTTOM_RIGHT) == (
        cutlass.MASK_NONE, cutlass.MASK_CAUSAL_TOP_LEFT, cutlass.MASK_CAUSAL_BOTTOM_RIGHT,
        cutlass.MASK_LOCAL_BOTTOM_RIGHT)


@pytest.mark.parametrize("mq,mk", [(1, 1), (7, 7), (7, 127), (127, 7), (1, 300), (300, 300)])
@pytest.mark.parametrize("Hq,Hkv", [(2, 2), (4, 1), (6, 2)])
@pytest.mark.parametrize("m", range(len(MASKS)))
def test_cpu_mapping_dense(mq, mk, Hq, Hkv, m):
    causal, wl, wr = MASKS[m]
    g = torch.Generator().manual_seed(mq * 1000 + mk + Hq + m)
    B, K, Kv, dt = 2, 8, 12, torch.float64
    q, k, v = rand((B, mq, Hq, K), dt, gen=g), rand((B, mk, Hkv, K), dt, gen=g), rand((B, mk, Hkv, Kv), dt, gen=g)
    out, lse = _raw_ops._fused_flash_fwd("t", q, k, v, None, None, None, mq, 0.3, causal, wl, wr, None)
    check(out, lse, *ref_dense(q, k, v, 0.3, causal, wl, wr), dt)


def test_cpu_mapping_dense_strided_kv():
    """Sliced caches (batch stride > rows), expanded batch, permuted strides: read in place."""
    g = torch.Generator().manual_seed(3)
    dt = torch.float64
    kc, vc = rand((3, 40, 2, 8), dt, gen=g), rand((3, 40, 2, 8), dt, gen=g)
    q = rand((3, 7, 6, 8), dt, gen=g)
    for k, v in [(kc[:, :11], vc[:, :11]), (kc[:1, :9].expand(3, 9, 2, 8), vc[:1, :9].expand(3, 9, 2, 8)),
                 (kc[:, :11], vc[:, 5:16].contiguous()), (kc.transpose(0, 1)[:9].transpose(0, 1), vc[:, :9])]:
        out, lse = _raw_ops._fused_flash_fwd("t", q, k, v, None, None, None, 7, 0.4, True, 3, -1, None)
        check(out, lse, *ref_dense(q, k, v, 0.4, True, 3, -1), dt)


@pytest.mark.parametrize("Hq,Hkv", [(2, 2), (4, 1), (6, 3)])
@pytest.mark.parametrize("m", range(len(MASKS)))
@pytest.mark.parametrize("gap", [False, True])
@pytest.mark.parametrize("used", [False, True])
def test_cpu_mapping_varlen(Hq, Hkv, m, gap, used):
    causal, wl, wr = MASKS[m]
    g = torch.Generator().manual_seed(Hq + 10 * m + 100 * gap + 1000 * used)
    dt = torch.float64
    ql, kl = [1, 7, 127, 30, 0], [3, 7, 300, 1, 2]
    su = [2, 7, 150, 0, 1]
    cu_q = cumsum0(ql) + (2 if gap else 0)  # rows outside every sequence on both sides
    cu_k = cumsum0(kl)
    T = sum(ql) + (5 if gap else 0)
    q, k, v = rand((T, Hq, 16), dt, gen=g), rand((sum(kl), Hkv, 16), dt, gen=g), rand((sum(kl), Hkv, 8), dt, gen=g)
    n = su if used else kl
    lanes_k = [k[cu_k[b]:cu_k[b] + n[b]] for b in range(len(kl))]
    lanes_v = [v[cu_k[b]:cu_k[b] + n[b]] for b in range(len(kl))]
    sut = torch.tensor(su, dtype=torch.int32) if used else None
    out, lse = _raw_ops._fused_flash_fwd("t", q, k, v, cu_q, cu_k, sut, 127, 0.25, causal, wl, wr, None)
    check(out, lse, *ref_varlen(q, lanes_k, lanes_v, cu_q.tolist(), 0.25, causal, wl, wr), dt)


@pytest.mark.parametrize("page", [4, 16])
@pytest.mark.parametrize("Hq,Hkv", [(2, 2), (4, 1), (4, 2)])
@pytest.mark.parametrize("m", [0, 1, 3])
@pytest.mark.parametrize("lens_from", ["seqused_k", "cu_seqlens_k"])
def test_cpu_mapping_paged(page, Hq, Hkv, m, lens_from):
    causal, wl, wr = MASKS[m]
    g = torch.Generator().manual_seed(page + Hq + m)
    dt = torch.float64
    ql, kl = [1, 7, 5, 2], [3, 17, 32, 1]
    kp, vp, bt, lanes_k, lanes_v = paged_cache(kl, page, Hkv, 16, 16, dt, "cpu", g)
    cu_q = cumsum0(ql)
    q = rand((sum(ql), Hq, 16), dt, gen=g)
    su = torch.tensor(kl, dtype=torch.int32) if lens_from == "seqused_k" else None
    cu_k = cumsum0(kl) if lens_from == "cu_seqlens_k" else None
    out, lse = _raw_ops._fused_flash_fwd("t", q, kp, vp, cu_q, cu_k, su, 7, 0.25, causal, wl, wr, bt)
    check(out, lse, *ref_varlen(q, lanes_k, lanes_v, cu_q.tolist(), 0.25, causal, wl, wr), dt)
    # dense queries over the same pages
    qd = rand((len(kl), 3, Hq, 16), dt, gen=g)
    out, lse = _raw_ops._fused_flash_fwd("t", qd, kp, vp, None, cu_k, su, 3, 0.25, causal, wl, wr, bt)
    want = [ref_seq(qd[b], lanes_k[b], lanes_v[b], 0.25, causal, wl, wr) for b in range(len(kl))]
    check(out, lse, torch.stack([w[0] for w in want]), torch.stack([w[1] for w in want]), dt)


def test_cpu_mapping_paged_full_lanes():
    """No seqused_k / cu_seqlens_k: every sequence holds max_pages * page_size keys."""
    g = torch.Generator().manual_seed(9)
    dt = torch.float64
    kp, vp, bt, lanes_k, lanes_v = paged_cache([8, 8], 4, 2, 8, 8, dt, "cpu", g)
    q = rand((2, 3, 4, 8), dt, gen=g)
    out, lse = _raw_ops._fused_flash_fwd("t", q, kp, vp, None, None, None, 3, 0.5, True, -1, -1, bt)
    want = [ref_seq(q[b], lanes_k[b], lanes_v[b], 0.5, True, -1, -1) for b in range(2)]
    check(out, lse, torch.stack([w[0] for w in want]), torch.stack([w[1] for w in want]), dt)


def test_cpu_gqa_fold_in_chunks(monkeypatch):
    """More folded sequences than the op takes at once: the query groups run in chunks."""
    monkeypatch.setattr(_raw_ops, "_MAX_SEQS", 13)  # 4 sequences + 2 fillers: 2 groups per call
    g = torch.Generator().manual_seed(4)
    dt = torch.float64
    ql, kl = [3, 1, 7, 2], [5, 4, 9, 2]
    q, k, v = rand((sum(ql), 10, 8), dt, gen=g), rand((sum(kl), 2, 8), dt, gen=g), rand((sum(kl), 2, 8), dt, gen=g)
    cu_q, cu_k = cumsum0(ql), cumsum0(kl)
    out, lse = _raw_ops._fused_flash_fwd("t", q, k, v, cu_q, cu_k, None, 7, 0.3, True, -1, -1, None)
    lanes = [(k[cu_k[b]:cu_k[b + 1]], v[cu_k[b]:cu_k[b + 1]]) for b in range(4)]
    check(out, lse, *ref_varlen(q, [a for a, _ in lanes], [b for _, b in lanes], cu_q.tolist(), 0.3, True, -1, -1),
          dt)


def test_fused_attention_errors():
    q = torch.zeros(1, 4, 6, 8)
    with pytest.raises(ValueError, match="multiple"):
        _raw_ops.fused_attention(q, torch.zeros(1, 4, 4, 8), torch.zeros(1, 4, 4, 8), scale=1.0)
    with pytest.raises(ValueError, match="value has"):
        _raw_ops.fused_attention(q, torch.zeros(1, 4, 3, 8), torch.zeros(1, 4, 2, 8), scale=1.0)
    with pytest.raises(ValueError, match="paged KV needs"):
        _raw_ops._fused_flash_fwd("t", q[0], q[0], q[0], torch.tensor([0, 4], dtype=torch.int32), None, None, 4,
                                  1.0, False, -1, -1, torch.zeros(1, 1, dtype=torch.int32))
    with pytest.raises(ValueError, match="cu_seqlens_q"):
        _raw_ops._fused_flash_fwd("t", q, q, q, None, None, torch.tensor([2], dtype=torch.int32), 4, 1.0, False,
                                  -1, -1, None)


# ---- CPU: the raw ops keep the reference path --------------------------------------------------

def test_cpu_raw_ops_take_reference_path():
    g = torch.Generator().manual_seed(1)
    q, k, v = rand((2, 7, 4, 8), gen=g), rand((2, 9, 2, 8), gen=g), rand((2, 9, 2, 8), gen=g)
    assert not _raw_ops._fused_takes(q, k, v)
    assert not _raw_ops._fused_takes(q.half(), k.half(), v.half())  # CPU: never the fused CUDA kernel
    want = ref_dense(q, k, v, 0.35, False, 2, 1)
    out, lse, rng = torch.ops.mslk_flash.flash_fwd(q, k, v, None, None, None, 7, 9, 0.0, 0.35, False, 2, 1, False,
                                                   None)
    check(out, lse, *want, torch.float32)
    assert rng.shape == (2,) and rng.dtype == torch.int64
    out3, lse3 = torch.ops.mslk_flash3.flash_fwd(q, k, v, None, None, None, None, 7, 9, 0.0, 0.35, False,
                                                 window_left=2, window_right=1)
    check(out3, lse3, *want, torch.float32)
    bt = torch.zeros(2, 1, dtype=torch.int32)
    with pytest.raises(NotImplementedError, match="paged"):
        torch.ops.mslk_flash.flash_fwd(q, k, v, None, None, None, 7, 9, 0.0, 1.0, False, -1, -1, False, bt)
    with pytest.raises(NotImplementedError, match="paged"):
        torch.ops.mslk_flash3.flash_fwd(q, k, v, None, None, None, None, 7, 9, 0.0, 1.0, False, block_table=bt)
    with pytest.raises(NotImplementedError, match="leftpad_k"):
        torch.ops.mslk_flash3.flash_fwd(q, k, v, None, None, None, torch.zeros(2, dtype=torch.int32), 7, 9, 0.0,
                                        1.0, False)


def test_fake_shapes_paged():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        q = torch.empty(2, 3, 4, 64, dtype=torch.half)
        kp = torch.empty(10, 16, 2, 64, dtype=torch.half)
        bt = torch.empty(2, 5, dtype=torch.int32)
        out, lse, _ = torch.ops.mslk_flash.flash_fwd(q, kp, kp, None, None, None, 3, 80, 0.0, 1.0, True, -1, -1,
                                                     False, bt)
        assert out.shape == (2, 3, 4, 64) and lse.shape == (2, 4, 3)
        qv = torch.empty(6, 4, 64, dtype=torch.half)
        cu = torch.empty(3, dtype=torch.int32)
        out, lse = torch.ops.mslk_flash3.flash_fwd(qv, kp, kp, cu, None, None, None, 3, 80, 0.0, 1.0, True,
                                                   block_table=bt)
        assert out.shape == (6, 4, 64) and lse.shape == (4, 6)


# ---- CPU: operator classes ----------------------------------------------------------------------

def test_class_availability_is_honest():
    reg = _raw_ops.fused_cuda_registered()
    assert reg == (HAS_OP and _kernel_registered("mslk::fmha_fused_fwd", "CUDA"))
    assert flash.FwOp.is_available() == reg
    sm90 = torch.cuda.is_available() and any(
        torch.cuda.get_device_capability(i) == (9, 0) for i in range(torch.cuda.device_count()))
    assert flash3.FwOp.is_available() == (reg and sm90)
    assert flash3.FwOp_KVSplit.is_available() == flash3.FwOp.is_available()
    assert dispatch.fa3_available() == flash3.FwOp.is_available()
    bw = _backward.bwd_registered("CUDA")
    assert flash.BwOp.is_available() == bw and flash3.BwOp.is_available() == (bw and sm90)
    for op in (flash.FwOp, flash3.FwOp):
        info = op.info()
        assert info == "available" if op.is_available() else info.startswith("unavailable: ")
    q = torch.zeros(1, 4, 2, 64, dtype=torch.half)
    for op in (flash.FwOp, flash3.FwOp):
        reasons = op.not_supported_reasons(Inputs(q, q, q))
        assert any("device=cpu" in r for r in reasons)
        assert any("available" in r for r in reasons) == (not op.is_available())


def _reasons(op, **kw):
    q = kw.pop("q", torch.zeros(1, 4, 2, 64, dtype=torch.half))
    k = kw.pop("k", q)
    v = kw.pop("v", q)
    return op.not_supported_reasons(Inputs(q, k, v, **kw))


def test_class_support_reasons():
    q = torch.zeros(1, 4, 2, 64, dtype=torch.half)
    for op in (flash.FwOp, flash3.FwOp):
        assert any("dtype" in r for r in _reasons(op, q=q.float()))
        assert any("dropout" in r for r in _reasons(op, p=0.1)) == (op is flash3.FwOp)  # FA2 has dropout
        assert any("attn_bias type" in r for r in _reasons(op, attn_bias=torch.zeros(1, 2, 4, 4)))
        assert any("Partial" in r for r in _reasons(op, is_partial=True))
        assert any("output dtype" in r for r in _reasons(op, output_dtype=torch.float32))
        assert any("> 256" in r for r in _reasons(op, q=torch.zeros(1, 4, 2, 320, dtype=torch.half)))
        assert op.SUPPORTS_DROPOUT == (op is flash.FwOp) and not op.SUPPORTS_PARTIAL and op.VARLEN_LSE_PACKED
    assert torch.float8_e4m3fn in flash3.FwOp.SUPPORTED_DTYPES  # ScaledTensor operands (test_fp8_attention.py)
    assert torch.float8_e4m3fn not in flash.FwOp.SUPPORTED_DTYPES
    assert any("query.shape[-1] != value.shape[-1]" in r
               for r in _reasons(flash.FwOp, v=torch.zeros(1, 4, 2, 128, dtype=torch.half)))
    assert not any("value" in r for r in _reasons(flash3.FwOp, v=torch.zeros(1, 4, 2, 128, dtype=torch.half)))
    assert any("not in [64, 128, 192, 256]" in r
               for r in _reasons(flash3.FwOp, q=torch.zeros(1, 4, 2, 96, dtype=torch.half)))
    assert not any("embed" in r for r in _reasons(flash.FwOp, q=torch.zeros(1, 4, 2, 96, dtype=torch.half)))
    # paged: flash wants page sizes divisible by 256; flash3 takes any page size
    bt = torch.arange(2, dtype=torch.int32).view(1, 2)
    for page, bad in ((16, True), (256, False)):
        m = ab.PagedBlockDiagonalPaddedKeysMask.from_seqlens([4], [3], bt, page)
        kv = torch.zeros(1, 2 * page, 2, 64, dtype=torch.half)
        assert any("page_size" in r for r in _reasons(flash.FwOp, k=kv, v=kv, attn_bias=m)) == bad
        assert not any("page_size" in r for r in _reasons(flash3.FwOp, k=kv, v=kv, attn_bias=m))
    gappy = ab.BlockDiagonalGappyKeysMask.from_seqlens([2, 2], [0, 5, 9], [3, 4])
    assert any("attn_bias type" in r for r in _reasons(flash.FwOp, attn_bias=gappy))
    assert not any("attn_bias type" in r for r in _reasons(flash3.FwOp, attn_bias=gappy))


class _PaddedLse(flash.FwOp):
    VARLEN_LSE_PACKED = False


def _class_masks(page):
    bt = torch.randperm(9, generator=torch.Generator().manual_seed(page))[:8].view(2, 4).to(torch.int32)
    return [
        None, ab.LowerTriangularMask(), ab.LowerTriangularFromBottomRightMask(),
        ab.LowerTriangularFromBottomRightLocalAttentionMask(3), ab.LocalAttentionFromBottomRightMask(2, 1),
        ab.BlockDiagonalMask.from_seqlens([3, 1, 7], [4, 6, 2]), ab.BlockDiagonalCausalMask.from_seqlens([3, 1, 7]),
        ab.BlockDiagonalCausalFromBottomRightMask.from_seqlens([2, 3], [4, 7]),
        ab.BlockDiagonalCausalWithOffsetPaddedKeysMask.from_seqlens([1, 2, 1], 5, [5, 3, 0]),
        ab.BlockDiagonalLocalAttentionPaddedKeysMask.from_seqlens_local([2, 1, 3], 6, [4, 6, 2], 1, 2),
        ab.BlockDiagonalGappyKeysMask.from_seqlens([2, 3], [1, 9, 20], [5, 4]),
        ab.PagedBlockDiagonalCausalWithOffsetPaddedKeysMask.from_seqlens([2, 5], [4 * page - 1, 3], bt, page),
        ab.PagedBlockDiagonalGappyKeysMask.from_seqlens([2, 5], [1, page + 2, 0], [3 * page - 2, 2 * page - 2], bt,
                                                        page),
    ]


def _class_qkv(bias, layout, dtype, device, gen, page=4, D=64):
    """q/k/v for `bias`: BMHK with Hkv < Hq heads (GQA, as the fused op reads them) expressed in the
    operator API as BMGHK with K/V expanded along H, or plain BMHK; paged K/V hold 9 pages."""
    if bias is None or not isinstance(bias, ab.VARLEN_BIASES):
        B, mq, mk = 2, 7, 9
    else:
        B, mq = 1, bias.q_seqinfo.total
        mk = 9 * page if isinstance(bias, ab._PagedBase) else bias._kv_total()
    if layout == "BMGHK":
        q = rand((B, mq, 2, 3, D), dtype, device, gen)
        k = rand((B, mk, 2, 1, D), dtype, device, gen).expand(B, mk, 2, 3, D)
        v = rand((B, mk, 2, 1, D), dtype, device, gen).expand(B, mk, 2, 3, D)
    elif layout == "BMK":
        q, k, v = rand((B, mq, D), dtype, device, gen), rand((B, mk, D), dtype, device, gen), rand(
            (B, mk, D), dtype, device, gen)
    else:
        q, k, v = rand((B, mq, 3, D), dtype, device, gen), rand((B, mk, 3, D), dtype, device, gen), rand(
            (B, mk, 3, D), dtype, device, gen)
    return q, k, v


@pytest.mark.parametrize("idx", range(13))
@pytest.mark.parametrize("layout", ["BMHK", "BMGHK", "BMK"])
def test_cpu_class_apply_matches_reference(idx, layout):
    """flash's apply() logic through the fused op's CPU implementation (float32), against
    reference.FwOp: outputs, and LSE packed (flash) or padded (VARLEN_LSE_PACKED = False)."""
    bias = _class_masks(4)[idx]
    q, k, v = _class_qkv(bias, layout, torch.float32, "cpu", torch.Generator().manual_seed(idx))
    inp = Inputs(q, k, v, bias, scale=0.3)
    out, ctx = flash.fused_apply(flash.FwOp, inp)
    want, wctx = reference.FwOp.apply(Inputs(q, k, v, bias, scale=0.3), needs_gradient=True)
    torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ctx.lse, wctx.lse, atol=1e-5, rtol=1e-5)  # both packed
    if isinstance(bias, ab.VARLEN_BIASES):
        _, pctx = flash.fused_apply(_PaddedLse, inp)
        qi = bias.q_seqinfo
        assert pctx.lse.shape[0] == len(qi.seqstart_py) - 1 and pctx.lse.shape[-1] == qi.max_seqlen
        for s, (a, e) in enumerate(zip(qi.seqstart_py, qi.seqstart_py[1:])):
            torch.testing.assert_close(pctx.lse[s, ..., :e - a], wctx.lse[0, ..., a:e], atol=1e-5, rtol=1e-5)
            assert torch.isposinf(pctx.lse[s, ..., e - a:]).all()


# ---- CUDA ---------------------------------------------------------------------------------------

RAW_OPS = ["flash2", "flash3"]


def run_raw(which, q, k, v, cu_q, cu_k, su, mq, mk, scale, causal, wl, wr, bt=None):
    if which == "flash2":
        out, lse, rng = torch.ops.mslk_flash.flash_fwd(q, k, v, cu_q, cu_k, su, mq, mk, 0.0, scale, causal, wl, wr,
                                                       False, bt)
        assert rng.shape == (2,) and rng.dtype == torch.int64
        return out, lse
    return torch.ops.mslk_flash3.flash_fwd(q, k, v, cu_q, cu_k, su, None, mq, mk, 0.0, scale, causal,
                                           block_table=bt, window_left=wl, window_right=wr)


@needs_cuda
@pytest.mark.parametrize("which", RAW_OPS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("mq,mk", [(1, 1), (7, 7), (1, 300), (127, 300), (300, 127), (300, 300)])
@pytest.mark.parametrize("Hq,Hkv", [(4, 4), (8, 2), (4, 1)])
@pytest.mark.parametrize("m", range(len(MASKS)))
def test_cuda_raw_dense(which, dtype, mq, mk, Hq, Hkv, m):
    causal, wl, wr = MASKS[m]
    g = torch.Generator().manual_seed(mq + mk + Hq + m)
    B, D = 2, 128
    q, k, v = rand((B, mq, Hq, D), dtype, "cuda", g), rand((B, mk, Hkv, D), dtype, "cuda", g), rand(
        (B, mk, Hkv, D), dtype, "cuda", g)
    out, lse = run_raw(which, q, k, v, None, None, None, mq, mk, D ** -0.5, causal, wl, wr)
    assert out.dtype == dtype and out.is_cuda and lse.dtype == torch.float32
    check(out, lse, *ref_dense(q, k, v, D ** -0.5, causal, wl, wr), dtype)


@needs_cuda
@pytest.mark.parametrize("which", RAW_OPS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("K,Kv", [(64, 64), (256, 256), (96, 96), (40, 40), (128, 64), (192, 256)])
def test_cuda_raw_head_dims(which, dtype, K, Kv):
    g = torch.Generator().manual_seed(K + Kv)
    q, k, v = rand((2, 130, 6, K), dtype, "cuda", g), rand((2, 200, 2, K), dtype, "cuda", g), rand(
        (2, 200, 2, Kv), dtype, "cuda", g)
    for causal, wl, wr in [(True, -1, -1), (False, 33, 7)]:
        out, lse = run_raw(which, q, k, v, None, None, None, 130, 200, 0.3, causal, wl, wr)
        check(out, lse, *ref_dense(q, k, v, 0.3, causal, wl, wr), dtype)


@needs_cuda
@pytest.mark.parametrize("which", RAW_OPS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("Hq,Hkv", [(4, 4), (8, 2), (4, 1)])
@pytest.mark.parametrize("m", range(len(MASKS)))
@pytest.mark.parametrize("used", [False, True])
def test_cuda_raw_varlen(which, dtype, Hq, Hkv, m, used):
    causal, wl, wr = MASKS[m]
    g = torch.Generator().manual_seed(Hq + 10 * m + 100 * used)
    ql, kl, su = [1, 7, 127, 300, 0], [1, 300, 127, 300, 4], [1, 150, 127, 7, 0]
    D = 64
    cu_q, cu_k = cumsum0(ql, "cuda"), cumsum0(kl, "cuda")
    q, k, v = rand((sum(ql), Hq, D), dtype, "cuda", g), rand((sum(kl), Hkv, D), dtype, "cuda", g), rand(
        (sum(kl), Hkv, D), dtype, "cuda", g)
    n = su if used else kl
    ck = cu_k.tolist()
    lanes_k = [k[ck[b]:ck[b] + n[b]] for b in range(len(kl))]
    lanes_v = [v[ck[b]:ck[b] + n[b]] for b in range(len(kl))]
    sut = torch.tensor(su, dtype=torch.int32, device="cuda") if used else None
    out, lse = run_raw(which, q, k, v, cu_q, cu_k, sut, max(ql), max(kl), 0.125, causal, wl, wr)
    assert lse.shape == (Hq, sum(ql))
    check(out, lse, *ref_varlen(q, lanes_k, lanes_v, cu_q.tolist(), 0.125, causal, wl, wr), dtype)


@needs_cuda
@pytest.mark.parametrize("which", RAW_OPS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("page", [16, 256])
@pytest.mark.parametrize("Hq,Hkv", [(4, 4), (8, 2), (4, 1)])
@pytest.mark.parametrize("m", [0, 1, 3])
def test_cuda_raw_paged(which, dtype, page, Hq, Hkv, m):
    causal, wl, wr = MASKS[m]
    g = torch.Generator().manual_seed(page + Hq + m)
    D = 128
    ql, kl = [1, 7, 127, 1], [300, 7, 300, 1]
    kp, vp, bt, lanes_k, lanes_v = paged_cache(kl, page, Hkv, D, D, dtype, "cuda", g)
    cu_q = cumsum0(ql, "cuda")
    q = rand((sum(ql), Hq, D), dtype, "cuda", g)
    su = torch.tensor(kl, dtype=torch.int32, device="cuda")
    out, lse = run_raw(which, q, kp, vp, cu_q, cumsum0(kl, "cuda"), su, max(ql), max(kl), 0.1, causal, wl, wr, bt)
    check(out, lse, *ref_varlen(q, lanes_k, lanes_v, cu_q.tolist(), 0.1, causal, wl, wr), dtype)
    # decode-style dense queries over the same pages (no cu_seqlens)
    qd = rand((len(kl), 1, Hq, D), dtype, "cuda", g)
    out, lse = run_raw(which, qd, kp, vp, None, None, su, 1, max(kl), 0.1, causal, wl, wr, bt)
    want = [ref_seq(qd[b], lanes_k[b], lanes_v[b], 0.1, causal, wl, wr) for b in range(len(kl))]
    check(out, lse, torch.stack([w[0] for w in want]), torch.stack([w[1] for w in want]), dtype)


@needs_cuda
def test_cuda_raw_ops_agree_and_fall_back():
    g = torch.Generator().manual_seed(2)
    q, k, v = rand((2, 127, 8, 64), torch.bfloat16, "cuda", g), rand((2, 300, 2, 64), torch.bfloat16, "cuda", g), \
        rand((2, 300, 2, 64), torch.bfloat16, "cuda", g)
    assert _raw_ops._fused_takes(q, k, v)
    o2, l2 = run_raw("flash2", q, k, v, None, None, None, 127, 300, 0.2, True, 50, -1)
    o3, l3 = run_raw("flash3", q, k, v, None, None, None, 127, 300, 0.2, True, 50, -1)
    torch.testing.assert_close(o2, o3, atol=0, rtol=0)
    torch.testing.assert_close(l2, l3, atol=0, rtol=0)
    # float32 on CUDA: the reference path (same semantics)
    qf, kf, vf = q.float(), k.float(), v.float()
    assert not _raw_ops._fused_takes(qf, kf, vf)
    of, lf = run_raw("flash2", qf, kf, vf, None, None, None, 127, 300, 0.2, True, 50, -1)
    check(of, lf, *ref_dense(qf, kf, vf, 0.2, True, 50, -1), torch.float32)
    with pytest.raises(NotImplementedError, match="paged"):
        run_raw("flash2", qf, kf, vf, None, None, None, 127, 300, 0.2, True, -1, -1,
                torch.zeros(2, 1, dtype=torch.int32, device="cuda"))


@needs_cuda
def test_cuda_raw_graph_capture():
    """The fused path (GQA fold, varlen, paged) does no host synchronisation: it captures in a CUDA graph."""
    g = torch.Generator().manual_seed(7)
    ql, kl = [1, 7, 127], [300, 7, 127]
    kp, vp, bt, lanes_k, lanes_v = paged_cache(kl, 16, 2, 64, 64, torch.float16, "cuda", g)
    q = rand((sum(ql), 8, 64), torch.float16, "cuda", g)
    cu_q, cu_k = cumsum0(ql, "cuda"), cumsum0(kl, "cuda")
    su = torch.tensor(kl, dtype=torch.int32, device="cuda")
    args = (q, kp, vp, cu_q, cu_k, su, 127, 300, 0.125, True, -1, -1, bt)
    run_raw("flash3", *args)  # warm-up
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, lse = run_raw("flash3", *args)
    graph.replay()
    torch.cuda.synchronize()
    check(out, lse, *ref_varlen(q, lanes_k, lanes_v, cu_q.tolist(), 0.125, True, -1, -1), torch.float16)


def _class_ops():
    return [flash.FwOp] + ([flash3.FwOp] if IS_SM90 else [])


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("idx", range(13))
@pytest.mark.parametrize("layout", ["BMHK", "BMGHK", "BMK"])
def test_cuda_classes_match_oracle(dtype, idx, layout):
    bias = _class_masks(256)[idx]  # flash needs page sizes divisible by 256
    q, k, v = _class_qkv(bias, layout, dtype, "cuda", torch.Generator().manual_seed(idx), page=256)
    bias_d = bias.to("cuda") if hasattr(bias, "to") else bias
    want, wctx = reference.FwOp.apply(Inputs(q.double().cpu(), k.double().cpu(), v.double().cpu(), bias, scale=0.2),
                                      needs_gradient=True)
    for op in _class_ops():
        reasons = op.not_supported_reasons(Inputs(q, k, v, bias_d, scale=0.2))
        gappy = isinstance(bias, (ab.BlockDiagonalGappyKeysMask, ab.PagedBlockDiagonalGappyKeysMask))
        if gappy and op is flash.FwOp:
            assert reasons  # gappy keys: flash3 only
            continue
        assert not reasons, reasons
        out, lse = fmha.memory_efficient_attention_forward_requires_grad(q, k, v, bias_d, scale=0.2, op=op)
        assert out.dtype == dtype and out.shape == want.shape
        assert_attention_close(out, want, dtype)
        assert lse.shape == wctx.lse.shape  # packed varlen LSE, [B, (G,) H, M]
        fin = torch.isfinite(wctx.lse)
        assert torch.equal(torch.isneginf(lse.cpu()), ~fin)
        torch.testing.assert_close(lse.double().cpu()[fin], wctx.lse[fin], atol=2e-3, rtol=1e-3)
        out2 = fmha.memory_efficient_attention(q, k, v, bias_d, scale=0.2, op=(op, None))
        torch.testing.assert_close(out2, out, atol=0, rtol=0)


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_cuda_dispatch_prefers_flash_same_results(dtype):
    g = torch.Generator().manual_seed(11)
    q, k, v = (rand((2, 300, 4, 128), dtype, "cuda", g) for _ in range(3))
    for bias in (None, ab.LowerTriangularMask(), ab.LowerTriangularFromBottomRightLocalAttentionMask(64)):
        inp = Inputs(q, k, v, bias)
        op = dispatch._dispatch_fw(inp, False)
        assert op is (flash3.FwOp if IS_SM90 else flash.FwOp)
        out = fmha.memory_efficient_attention(q, k, v, bias)
        want = fmha.memory_efficient_attention(q, k, v, bias, op=(cutlass.FwOp, None))
        torch.testing.assert_close(out, want, atol=0, rtol=0)  # the same kernel
    m = ab.BlockDiagonalCausalMask.from_seqlens([5, 0, 70]).to("cuda")
    qv, kv, vv = (rand((1, 75, 3, 64), dtype, "cuda", g) for _ in range(3))
    _, lse = fmha.memory_efficient_attention_forward_requires_grad(qv, kv, vv, m)
    assert lse.shape == (1, 3, 75)  # flash's packed varlen LSE (cutlass.FwOp pads: [3, 3, 70])
    _, lse_c = fmha.memory_efficient_attention_forward_requires_grad(qv, kv, vv, m, op=cutlass.FwOp)
    assert lse_c.shape == (3, 3, 70)
    torch.testing.assert_close(lse[0, :, :5], lse_c[0, :, :5], atol=0, rtol=0)
    torch.testing.assert_close(lse[0, :, 5:], lse_c[2], atol=0, rtol=0)
