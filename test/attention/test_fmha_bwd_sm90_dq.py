"""The two routes of the Hopper attention backward's dQ sums (MSLK_FMHA_BWD_SM90_DQ): 8-byte atomics
from the consumer warps (atomic) and one bulk reduction a tile and warpgroup into tile-contiguous
sums (tiles). Each against float64 autograd on shapes whose query tiles are partial: varlen
sequences of 1 to 513 rows (tiles that start off the 64-row grid), dense lengths 1 to 1000, d64 and
d128, fp16 and bf16; a profile shows which route's dQ conversion ran."""

import pytest
import torch

import mslk  # noqa: F401
from mslk.attention import fmha
from mslk.attention.fmha import _backward
from mslk.attention.fmha import attn_bias as ab
from test.attention.test_fmha_grad import check_grads

CUDA = torch.cuda.is_available() and _backward.bwd_registered("CUDA")
SM90 = CUDA and torch.cuda.get_device_capability() == (9, 0)
pytestmark = pytest.mark.skipif(not SM90, reason="needs an sm_90 GPU (the Hopper attention backward)")
HALF = [torch.float16, torch.bfloat16]
ROUTES = ["atomic", "tiles"]

VARLEN = {
    "block_causal": lambda: ab.BlockDiagonalCausalMask.from_seqlens([1, 130, 7, 513, 64]),
    "block": lambda: ab.BlockDiagonalMask.from_seqlens([1, 130, 7, 513, 64], [5, 100, 7, 300, 64]),
    "block_causal_br": lambda: ab.BlockDiagonalCausalFromBottomRightMask.from_seqlens([65, 1, 200], [70, 64, 256]),
}


@pytest.fixture(params=ROUTES)
def route(request, monkeypatch):
    monkeypatch.setenv("MSLK_FMHA_BWD_SM90_DQ", request.param)
    return request.param


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("K", [64, 128])
@pytest.mark.parametrize("name", sorted(VARLEN))
def test_varlen_grads(route, dtype, K, name):
    check_grads(name, "BMHK", dtype, K=K, Kv=K, device="cuda", bias=VARLEN[name]())


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("K", [64, 128])
@pytest.mark.parametrize("mq,mk", [(1, 1), (77, 77), (129, 129), (64, 300), (1000, 1000)])
@pytest.mark.parametrize("mask", ["none", "causal"])
def test_dense_grads(route, dtype, K, mq, mk, mask):
    check_grads(mask if mq == mk else "causal_br", "BMHK", dtype, mq=mq, mk=mk, K=K, Kv=K, device="cuda")


def test_route_runs(route):
    # the tile-contiguous sums have their own conversion kernel: the profile names the route taken
    q, k, v = (torch.randn(2, 300, 4, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    out = fmha.memory_efficient_attention(q, k, v)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        out.backward(torch.randn_like(out))
        torch.cuda.synchronize()
    names = [e.name for e in prof.events()]
    assert any("fmha_bwd_sm90_kernel" in n for n in names), "the Hopper backward did not run"
    assert any("convert_dq_tiles" in n for n in names) == (route == "tiles")


def test_default_route_is_tiles(monkeypatch):
    monkeypatch.delenv("MSLK_FMHA_BWD_SM90_DQ", raising=False)
    q, k, v = (torch.randn(2, 300, 4, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    out = fmha.memory_efficient_attention(q, k, v)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        out.backward(torch.randn_like(out))
        torch.cuda.synchronize()
    assert any("convert_dq_tiles" in e.name for e in prof.events())


def test_bad_route_names_the_variable(monkeypatch):
    monkeypatch.setenv("MSLK_FMHA_BWD_SM90_DQ", "bulk")
    q, k, v = (torch.randn(1, 64, 2, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    out = fmha.memory_efficient_attention(q, k, v)
    with pytest.raises(ValueError, match="MSLK_FMHA_BWD_SM90_DQ"):
        out.backward(torch.ones_like(out))
