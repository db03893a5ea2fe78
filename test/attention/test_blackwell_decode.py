"""The Blackwell-named split-K decode interfaces served by mslk's decode op: torch.ops.mslk.fmha_gen_fwd
and cutlass_blackwell_fmha_decode_forward (splits left unmerged), get_splitk_heuristic. Each split
against float64 attention over that split's visible keys; the merged splits against attention over
all of them; ragged seqlen_kv (empty sequences included), batch_idx into a larger cache, GQA,
sliding windows, errors, the fake. CPU runs the decode op's reference; CUDA (needs_cuda) its kernel."""

import math

import pytest
import torch

from mslk.attention.cutlass_blackwell_fmha import cutlass_blackwell_fmha_decode_forward
from mslk.attention.cutlass_blackwell_fmha.cutlass_blackwell_fmha_interface import get_splitk_heuristic
from mslk.attention.fmha.common import _kernel_registered
from test.attention.tolerance import assert_attention_close

HAS_OP = hasattr(torch.ops.mslk, "fmha_decode_splitk") and hasattr(torch.ops.mslk, "fmha_gen_fwd")
HAS_CUDA_KERNEL = HAS_OP and torch.cuda.is_available() and _kernel_registered("mslk::fmha_decode_splitk", "CUDA")
needs_cuda = pytest.mark.skipif(not HAS_CUDA_KERNEL, reason="needs a GPU and a CUDA build of mslk")
pytestmark = pytest.mark.skipif(not HAS_OP, reason="native library not loaded")
DEVICES = ["cpu", pytest.param("cuda", marks=needs_cuda)]


def inputs(B, Bc, Mk, H, Hkv, D, device, gen, dtype=torch.bfloat16):
    r = lambda *s: torch.randn(*s, generator=gen).to(device=device, dtype=dtype)  # noqa: E731
    return r(B, 1, H, D), r(Bc, Mk, Hkv, D), r(Bc, Mk, Hkv, D)


def split_reference(q, k, v, seqlen, cache_b, size, window_left=-1, scale=None):
    """float64 (out [B, 1, H, S, D], lse [B, S, H, 1]) of each split's visible keys."""
    B, _, H, D = q.shape
    Mk, Hkv = k.shape[1], k.shape[2]
    S = max(1, math.ceil(Mk / size))
    scale = D ** -0.5 if scale is None else scale
    out = torch.zeros(B, 1, H, S, v.shape[-1], dtype=torch.float64)
    lse = torch.full((B, S, H, 1), -math.inf, dtype=torch.float64)
    for b in range(B):
        n = int(seqlen[b])
        lo = 0 if window_left < 0 else max(0, n - 1 - window_left)
        for s in range(S):
            a, e = max(lo, s * size), min(n, (s + 1) * size)
            if e <= a:
                continue
            for h in range(H):
                kk = k[int(cache_b[b]), a:e, h // (H // Hkv)].double().cpu()
                vv = v[int(cache_b[b]), a:e, h // (H // Hkv)].double().cpu()
                sc = kk @ q[b, 0, h].double().cpu() * scale
                lse[b, s, h, 0] = torch.logsumexp(sc, 0)
                out[b, 0, h, s] = torch.softmax(sc, 0) @ vv
    return out, lse


def merge(out, lse):
    """The splits of (out, lse) merged: [B, 1, H, D]."""
    w = torch.softmax(lse.double().squeeze(-1).transpose(1, 2).nan_to_num(neginf=-1e30), -1)  # [B, H, S]
    return (out.double()[:, 0] * w.unsqueeze(-1)).sum(2).unsqueeze(1)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("size", [0, 64, 100])
@pytest.mark.parametrize("Hkv", [1, 2, 8])
def test_gen_fwd_splits(device, size, Hkv):
    g = torch.Generator().manual_seed(size + Hkv)
    q, k, v = inputs(4, 4, 300, 8, Hkv, 64, device, g)
    seqlen = torch.tensor([300, 1, 0, 171], dtype=torch.int32)
    out, lse = torch.ops.mslk.fmha_gen_fwd(q, k, v, seqlen.to(device), split_k_size=size)
    S = 1 if size <= 0 else math.ceil(300 / size)
    assert out.shape == (4, 1, 8, S, 64) and out.dtype == q.dtype and lse.shape == (4, S, 8, 1)
    ref_out, ref_lse = split_reference(q, k, v, seqlen, range(4), size if size > 0 else 300)
    assert_attention_close(out.cpu(), ref_out, torch.bfloat16)
    fin = torch.isfinite(ref_lse)
    assert torch.equal(torch.isfinite(lse.cpu()), fin)
    torch.testing.assert_close(lse.double().cpu()[fin], ref_lse[fin], atol=2e-3, rtol=1e-4)
    # merged: attention over all the visible keys (sequence 2 has none: its row stays 0)
    full_out, _ = split_reference(q, k, v, seqlen, range(4), 300)
    assert_attention_close(merge(out.cpu(), lse.cpu())[[0, 1, 3]], full_out[:, :, :, 0][[0, 1, 3]], torch.bfloat16)


@pytest.mark.parametrize("device", DEVICES)
def test_gen_fwd_batch_idx_and_window(device):
    g = torch.Generator().manual_seed(3)
    q, k, v = inputs(3, 5, 200, 4, 2, 128, device, g, torch.float16)
    seqlen = torch.tensor([200, 50, 133], dtype=torch.int32)
    cache_b = torch.tensor([4, 0, 2], dtype=torch.int64)
    out, lse = torch.ops.mslk.fmha_gen_fwd(q, k, v, seqlen.to(device), cache_b.to(device), window_left=70,
                                           split_k_size=64)
    ref_out, ref_lse = split_reference(q, k, v, seqlen, cache_b, 64, window_left=70)
    assert_attention_close(out.cpu(), ref_out, torch.float16)
    fin = torch.isfinite(ref_lse)
    assert torch.equal(torch.isfinite(lse.cpu()), fin)
    torch.testing.assert_close(lse.double().cpu()[fin], ref_lse[fin], atol=2e-3, rtol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_decode_forward_facade(device):
    g = torch.Generator().manual_seed(4)
    q, k, v = inputs(2, 2, 512, 4, 4, 64, device, g)
    seqlen = torch.tensor([512, 300], dtype=torch.int32)
    out, lse = cutlass_blackwell_fmha_decode_forward(q[:, 0], k, v, seqlen.to(device), softmax_scale=0.3,
                                                     causal=True, split_k_size=128)
    assert out.shape == (2, 1, 4, 4, 64)
    ref_out, _ = split_reference(q, k, v, seqlen, range(2), 128, scale=0.3)
    assert_attention_close(out.cpu(), ref_out, torch.bfloat16)
    with pytest.raises(ValueError, match="seqlen_kv"):
        cutlass_blackwell_fmha_decode_forward(q, k, v)
    with pytest.raises(NotImplementedError, match="cu_seqlens"):
        cutlass_blackwell_fmha_decode_forward(q, k, v, seqlen.to(device), cu_seqlens_q=seqlen.to(device))
    with pytest.raises(NotImplementedError, match="top-left"):
        cutlass_blackwell_fmha_decode_forward(q, k, v, seqlen.to(device), causal=True, bottom_right=False)


def test_gen_fwd_errors_name_the_argument():
    q, k, v = inputs(2, 2, 16, 4, 2, 32, "cpu", torch.Generator().manual_seed(5))
    n = torch.tensor([16, 3], dtype=torch.int32)
    with pytest.raises(ValueError, match="one query per sequence"):
        torch.ops.mslk.fmha_gen_fwd(q.expand(2, 2, 4, 32), k, v, n)
    with pytest.raises(ValueError, match="seqlen_kv"):
        torch.ops.mslk.fmha_gen_fwd(q, k, v, n[:1])
    with pytest.raises(ValueError, match="batch_idx"):
        torch.ops.mslk.fmha_gen_fwd(q, k, v, n, torch.zeros(3, dtype=torch.int32))
    with pytest.raises(ValueError, match="multiple"):
        torch.ops.mslk.fmha_gen_fwd(q, k[:, :, :1].expand(2, 16, 3, 32), v[:, :, :1].expand(2, 16, 3, 32), n)


def test_gen_fwd_opcheck():
    q, k, v = inputs(2, 2, 40, 4, 2, 32, "cpu", torch.Generator().manual_seed(6))
    torch.library.opcheck(torch.ops.mslk.fmha_gen_fwd.default, (q, k, v, torch.tensor([40, 7], dtype=torch.int32)),
                          {"split_k_size": 16})


def test_splitk_heuristic():
    assert get_splitk_heuristic(1, 256, 1, sm_count=132) == 0  # too few keys to split
    size = get_splitk_heuristic(1, 131072, 8, tile_n=256, sm_count=132)
    assert size > 0 and size % 256 == 0 and math.ceil(131072 / size) > 1
    assert get_splitk_heuristic(64, 2048, 8, sm_count=132) == 0  # 512 sequence-heads fill the SMs
    with pytest.raises(ValueError, match="positive"):
        get_splitk_heuristic(0, 10)


def test_signatures_are_the_specs():
    import inspect

    names = lambda f: list(inspect.signature(f).parameters)  # noqa: E731
    assert names(cutlass_blackwell_fmha_decode_forward) == [
        "q", "k", "v", "seqlen_kv", "cu_seqlens_q", "cu_seqlens_k", "max_seq_len_q", "max_seq_len_k", "softmax_scale",
        "causal", "window_left", "window_right", "bottom_right", "split_k_size", "use_heuristic"]
    assert names(get_splitk_heuristic) == ["batch", "seqlen_kv", "kv_heads", "tile_n", "sm_count"]


# ---- cutlass_blackwell.FwOpDecode / cute_blackwell.FwOpDecode on the decode kernel -------------------

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("D", [64, 128])
def test_fwop_decode_classes(device, D):
    from mslk.attention.fmha import attn_bias as ab
    from mslk.attention.fmha import cute_blackwell, cutlass_blackwell
    from test.attention.test_splitk_decode import check, gqa_qkv

    g = torch.Generator().manual_seed(D)
    q, k, v = gqa_qkv(3, 1, 700, 2, 4, D, torch.bfloat16, device, g)
    for op in (cutlass_blackwell.FwOpDecode, cute_blackwell.FwOpDecode):
        check(op, q, k, v, ab.LowerTriangularFromBottomRightMask())
    lens = [5, 700, 333]
    qv, kv, vv = gqa_qkv(1, 3, 3 * 700, 2, 4, D, torch.float16, device, g)
    padded = ab.BlockDiagonalCausalWithOffsetPaddedKeysMask.from_seqlens([1, 1, 1], 700, lens, device=device)
    check(cutlass_blackwell.FwOpDecode, qv, kv, vv, padded)
    gappy = ab.BlockDiagonalCausalWithOffsetGappyKeysMask.from_seqlens([1, 1, 1], [0, 800, 1500, 2100], lens,
                                                                       device=device)
    check(cute_blackwell.FwOpDecode, qv, kv, vv, gappy)


def test_fwop_decode_contracts():
    from mslk.attention.fmha import attn_bias as ab
    from mslk.attention.fmha import cute_blackwell, cutlass_blackwell, dispatch
    from mslk.attention.fmha.common import Inputs

    q = torch.randn(1, 1, 4, 256, dtype=torch.half)
    k = torch.randn(1, 2048, 4, 256, dtype=torch.half)
    for op in (cutlass_blackwell.FwOpDecode, cute_blackwell.FwOpDecode):
        assert op.__module__.endswith(op.NAME.split("F")[0]) and op.HEAD_DIMS == {64, 128}
        assert any("256" in r for r in op.not_supported_reasons(Inputs(q, k, k)))
        assert any("dropout" in r for r in op.not_supported_reasons(Inputs(q[..., :64], k[..., :64], k[..., :64],
                                                                           p=0.1)))
    gappy = ab.BlockDiagonalGappyKeysMask.from_seqlens([1], [0, 2048], [2048])
    inp = Inputs(q[..., :64], k[..., :64], k[..., :64], attn_bias=gappy)
    assert any("attn_bias type" in r for r in cutlass_blackwell.FwOpDecode.not_supported_reasons(inp))
    assert not [r for r in cute_blackwell.FwOpDecode.not_supported_reasons(inp) if "attn_bias" in r]
    assert cutlass_blackwell.FwOpDecode not in dispatch._fw_priority(inp)  # pinned only
