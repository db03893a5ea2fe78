"""Attention training on CUDA: gradients of memory_efficient_attention through each backward
operator class (dispatch and pinned pairs) against float64 autograd on the CPU, for fp16 / bf16 /
fp32, head dims 64 / 128 / 256 and odd ones, lengths 1 to 1000, every backward mask, GQA; dropout
(mask agreement with fmha_dropout_mask on the device, seeds), determinism, torch.compile."""

import pytest
import torch

import mslk  # noqa: F401
from mslk.attention import fmha
from mslk.attention.fmha import _backward, cute_hopper, cutlass, flash, flash3, reference
from mslk.attention.fmha import attn_bias as ab
from test.attention.test_fmha_grad import MASKS, _masks, check_grads
from test.attention.tolerance import assert_attention_close, assert_grad_close, d_term_slack, lse_f64

CUDA = torch.cuda.is_available() and _backward.bwd_registered("CUDA")
SM90 = CUDA and torch.cuda.get_device_capability() == (9, 0)
pytestmark = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU and mslk::fmha_fused_bwd's CUDA kernel")
HALF = [torch.float16, torch.bfloat16]


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("name", MASKS)
@pytest.mark.parametrize("layout", ["BMHK", "BMGHK", "BMK"])
def test_dispatch_grads(dtype, name, layout):
    check_grads(name, layout, dtype, K=64, Kv=64, device="cuda")


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("K", [64, 128, 256, 40, 96])
@pytest.mark.parametrize("mq,mk", [(1, 1), (7, 7), (127, 127), (1000, 1000), (7, 1000), (1000, 7)])
def test_head_dims_and_lengths(dtype, K, mq, mk):
    check_grads("causal_br" if mq != mk else "causal", "BMHK", dtype, mq=mq, mk=mk, K=K, Kv=K, device="cuda")


@pytest.mark.parametrize("name", ["none", "causal", "block_causal_br", "tensor", "padded_causal_offset"])
def test_fp32_backward(name):
    # fp32: the reference forward on the GPU, cutlass.BwOp (the fused op's general path)
    check_grads(name, "BMHK", torch.float32, K=64, Kv=64, device="cuda", tol=1e-4)
    check_grads(name, "BMHK", torch.float32, K=64, Kv=64, device="cuda", tol=1e-4,
                op=(reference.FwOp, cutlass.BwOp))


def _takes(op, name):
    bias = _masks()[name]
    t = {"tensor": torch.Tensor, "causal_tensor": ab.LowerTriangularMaskWithTensorBias}.get(name, type(bias))
    return t in op.SUPPORTED_ATTN_BIAS_TYPES


PAIRS = {
    "cutlass": (cutlass.FwOp, cutlass.BwOp),
    "flash": (flash.FwOp, flash.BwOp),
    "cutlassF_flashB": (cutlass.FwOp, flash.BwOp),
    "flash3": (flash3.FwOp, flash3.BwOp),
    "cute_hopperB": (flash3.FwOp, cute_hopper.BwOp),
    "referenceB": (cutlass.FwOp, reference.BwOp),
}


@pytest.mark.parametrize("pair", sorted(PAIRS))
@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("name", MASKS)
@pytest.mark.parametrize("K", [64, 128])
def test_pinned_pairs(pair, dtype, name, K):
    fw, bw = PAIRS[pair]
    if pair in ("flash3", "cute_hopperB") and not SM90:
        pytest.skip("needs sm_90")
    for op in (fw, bw):
        if not _takes(op, name):
            pytest.skip(f"{op.NAME} does not take {name}")
    check_grads(name, "BMHK", dtype, K=K, Kv=K, device="cuda", op=(fw, bw))


def test_cutlass_bmghk_and_value_dim():
    check_grads("block_causal_br", "BMGHK", torch.float16, K=64, Kv=64, device="cuda", op=PAIRS["cutlass"])
    check_grads("causal_tensor", "BMGHK", torch.bfloat16, K=128, Kv=64, device="cuda", op=PAIRS["cutlass"])


# --- dropout ---------------------------------------------------------------------------------------

def _dropout_check(op, dtype, p=0.2, B=2, M=67, N=131, H=3, K=64, seed=5):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, n, H, K, generator=g).to(dtype).cuda().requires_grad_() for n in (M, N, N))
    torch.manual_seed(seed)
    out = fmha.memory_efficient_attention(q, k, v, ab.LowerTriangularFromBottomRightMask(), p=p, op=op)
    go = torch.randn(out.shape, generator=g).to(dtype).cuda()
    got = torch.autograd.grad(out, (q, k, v), go)
    torch.manual_seed(seed)
    rng = _backward.draw_rng_state()
    keep = torch.ops.mslk.fmha_dropout_mask(rng, B, H, M, N, p, torch.device("cuda"))
    assert torch.equal(keep.cpu(), torch.ops.mslk.fmha_dropout_mask(rng, B, H, M, N, p, torch.device("cpu")))
    qd, kd, vd = (x.detach().double().cpu().requires_grad_() for x in (q, k, v))
    mask = ab.LowerTriangularFromBottomRightMask().materialize((M, N), torch.float64)
    s = torch.einsum("bmhk,bnhk->bhmn", qd, kd) * K ** -0.5 + mask
    ref = torch.einsum("bhmn,bnhk->bmhk", torch.softmax(s, -1) * keep.cpu().double() / (1 - p), vd)
    want = torch.autograd.grad(ref, (qd, kd, vd), go.double().cpu())
    assert_attention_close(out, ref, dtype)
    slack = d_term_slack(lse_f64(qd, kd, mask, K ** -0.5), (qd, kd, vd), go, out, ref)
    for name, a, w, sl in zip(("dq", "dk", "dv"), got, want, slack):
        assert_grad_close(a, w, dtype, sl, what=name)
    return out.detach(), got


@pytest.mark.parametrize("pair", ["cutlass", "flash"])
@pytest.mark.parametrize("dtype", HALF)
def test_dropout_mask_agreement_and_seeds(pair, dtype):
    o1, g1 = _dropout_check(PAIRS[pair], dtype)
    o2, g2 = _dropout_check(PAIRS[pair], dtype)
    assert torch.equal(o1, o2)
    o3, _ = _dropout_check(PAIRS[pair], dtype, seed=6)
    assert not torch.equal(o1, o3)


def test_dropout_dispatch_avoids_flash3():
    _dropout_check(None, torch.float16)


# --- determinism, compile ------------------------------------------------------------------------------

@pytest.mark.parametrize("pair", ["cutlass", "flash", "flash3"])
def test_deterministic_bits(pair):
    if pair == "flash3" and not SM90:
        pytest.skip("needs sm_90")
    g = torch.Generator().manual_seed(9)
    q, k, v = (torch.randn(2, 1000, 4, 128, generator=g).half().cuda().requires_grad_() for _ in range(3))
    go = torch.randn(2, 1000, 4, 128, generator=g).half().cuda()
    prev = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        runs = [torch.autograd.grad(fmha.memory_efficient_attention(q, k, v, ab.LowerTriangularMask(),
                                                                    op=PAIRS[pair]), (q, k, v), go)
                for _ in range(2)]
    finally:
        torch.use_deterministic_algorithms(prev)
    for a, b in zip(*runs):
        assert torch.equal(a, b)


def test_compile_training_step_cuda():
    g = torch.Generator().manual_seed(10)
    q, k, v = (torch.randn(2, 128, 4, 64, generator=g).half().cuda().requires_grad_() for _ in range(3))

    def loss(q, k, v):
        return fmha.memory_efficient_attention(q, k, v, ab.LowerTriangularMask()).float().square().sum()

    def grads(fn):
        for t in (q, k, v):
            t.grad = None
        fn(q, k, v).backward()
        return [t.grad.clone() for t in (q, k, v)]

    eager = grads(loss)
    compiled = grads(torch.compile(loss, fullgraph=True))
    for a, c in zip(eager, compiled):
        torch.testing.assert_close(a, c, atol=2e-3, rtol=2e-3)
