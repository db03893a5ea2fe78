"""Head dim 256 on the Hopper attention backward (MSLK_FMHA_BWD_SM90_D256, on by default: 64-key
tiles, each warpgroup 32 keys of S / dP and 128 columns of dK / dV / dQ), against float64 autograd:
dense lengths 1 to 1000 with every causal kind, varlen blocks that start off the 64-row grid, fp16 and
bf16; a profile shows which kernel ran with the switch on, off and unset."""

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


@pytest.fixture
def d256(monkeypatch):
    monkeypatch.setenv("MSLK_FMHA_BWD_SM90_D256", "1")


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("mq,mk", [(1, 1), (7, 7), (77, 77), (127, 127), (1000, 1000), (64, 300), (300, 64)])
def test_dense_grads(d256, dtype, mq, mk):
    check_grads("causal" if mq == mk else "causal_br", "BMHK", dtype, mq=mq, mk=mk, K=256, Kv=256, device="cuda")
    if mq == mk:
        check_grads("none", "BMHK", dtype, mq=mq, mk=mk, K=256, Kv=256, device="cuda")


@pytest.mark.parametrize("name", ["causal_local_br", "local_br", "block", "block_causal_br", "padded_causal_offset",
                                  "gappy"])
def test_masks(d256, name):
    check_grads(name, "BMHK", torch.bfloat16, K=256, Kv=256, device="cuda")


@pytest.mark.parametrize("dtype", HALF)
def test_varlen_grads(d256, dtype):
    bias = ab.BlockDiagonalCausalFromBottomRightMask.from_seqlens([65, 1, 200, 7], [70, 64, 256, 9])
    check_grads("custom", "BMHK", dtype, K=256, Kv=256, device="cuda", bias=bias)


def test_gqa_layout(d256):
    check_grads("causal", "BMGHK", torch.bfloat16, mq=100, mk=100, K=256, Kv=256, device="cuda")


@pytest.mark.parametrize("on", [False, True, None])
def test_switch_picks_the_kernel(monkeypatch, on):
    """0: the FA2-style kernel; 1 and unset (the default): the Hopper one."""
    if on is None:
        monkeypatch.delenv("MSLK_FMHA_BWD_SM90_D256", raising=False)
    else:
        monkeypatch.setenv("MSLK_FMHA_BWD_SM90_D256", "1" if on else "0")
    q, k, v = (torch.randn(1, 200, 2, 256, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    out = fmha.memory_efficient_attention(q, k, v)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        out.backward(torch.randn_like(out))
        torch.cuda.synchronize()
    assert any("fmha_bwd_sm90_d256_kernel" in e.name for e in prof.events()) == (on is not False)
