"""mslk.moe.layers in one process: BaselineMoE / MetaShufflingMoE against a float64 reference
(CPU; CUDA against the same reference when a GPU is present), parameters, and configuration errors.
The float64 reference and the weight/init helpers are shared with test_layers_dist.py."""

import pytest
import torch

from mslk.moe.layers import (BaselineMoE, MetaShufflingMoE, MoEArgs, RoutedExperts, ScaledParameter,
                             SharedExperts, init_params)
from test.conftest import requires_cuda

D, H, E = 64, 32, 4


def make_args(precision="bf16", top_k=1, mp=1, ep=1, mp_routed=None, dedup=False, E_=E):
    return MoEArgs(precision=precision, dim=D, hidden_dim=H, num_experts=E_, top_k=top_k, mp_size=mp, ep_size=ep,
                   mp_size_for_routed_experts=mp_routed, use_fast_accum=False, dedup_comm=dedup)


def make_weights(seed=0, skew=False, E_=E):
    """Global weights (bf16-representable float32): router [E, D], routed w_in/w_swiglu [E, H, D],
    w_out [E, D, H], shared the same with E = 1. skew: feature 0 sends every token to experts 0/1."""
    g = torch.Generator().manual_seed(seed)

    def r(*shape, scale):
        return (torch.randn(*shape, generator=g) * scale).bfloat16().float()

    w = {"router_DE": r(E_, D, scale=D ** -0.5)}
    for p, n in (("routed_experts", E_), ("shared_experts", 1)):
        w[f"{p}.w_in"] = r(n, H, D, scale=D ** -0.5)
        w[f"{p}.w_swiglu"] = r(n, H, D, scale=D ** -0.5)
        w[f"{p}.w_out"] = r(n, D, H, scale=H ** -0.5)
    if skew:
        w["router_DE"][:, 0] = -3.0
        w["router_DE"][:2, 0] = torch.tensor([1.0, 0.75])
    return w


def make_x(B=2, T=8, seed=1, skew=False):
    x = torch.randn(B, T, D, generator=torch.Generator().manual_seed(seed))
    if skew:
        x[..., 0] = 4.0
    return x.bfloat16()


def init_methods(w, args, ep_rank=0, mp_rank=0):
    """Init methods handing each rank its slice: local experts along E, the hidden slice along H."""
    L = args.num_local_experts
    Hs, Hr = H // args.mp_size, H // args.routed_mp_size
    rs = mp_rank % args.routed_mp_size
    e0 = ep_rank * L

    def cut(key):
        t = w[key]
        if key == "router_DE":
            return t
        if key.startswith("routed"):
            t, h0, Hl = t[e0:e0 + L], rs * Hr, Hr
        else:
            h0, Hl = mp_rank * Hs, Hs
        return t[:, :, h0:h0 + Hl] if key.endswith("w_out") else t[:, h0:h0 + Hl]

    return {k: (lambda t, k=k: cut(k).to(t.dtype)) for k in w}


def reference(x, w, top_k):
    """float64: shared SwiGLU(x) + sum over the top_k sigmoid picks e of SwiGLU_e(x * score_e)."""
    x = x.double().reshape(-1, D)
    w = {k: v.double() for k, v in w.items()}

    def swiglu(v, p, e):
        h = v @ w[f"{p}.w_in"][e].T
        return (torch.nn.functional.silu(h) * (v @ w[f"{p}.w_swiglu"][e].T)) @ w[f"{p}.w_out"][e].T

    out = swiglu(x, "shared_experts", 0)
    s = torch.sigmoid(x @ w["router_DE"].T)
    top = torch.topk(s, top_k, dim=1).indices
    for t in range(x.shape[0]):
        for e in top[t].tolist():
            out[t] += swiglu(x[t:t + 1] * s[t, e], "routed_experts", e)[0]
    return out


def rel_err(a, b):
    a, b = a.double().reshape(b.shape).cpu(), b.double().cpu()
    return ((a - b).norm() / b.norm()).item()


TOL = {"bf16": 1.5e-2, "fp8_rowwise": 0.1}  # FP8: x, w13, silu output and w2 each rounded to 3 mantissa bits

LAYERS = [(BaselineMoE, 1, False), (BaselineMoE, 2, False), (MetaShufflingMoE, 1, False), (MetaShufflingMoE, 1, True)]


@pytest.mark.parametrize("precision", ["bf16", "fp8_rowwise"])
@pytest.mark.parametrize("cls,top_k,static", LAYERS)
@pytest.mark.parametrize("skew", [False, True])
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=requires_cuda)])
def test_layer_vs_reference(cls, top_k, static, precision, skew, device):
    args = make_args(precision, top_k)
    w = make_weights(skew=skew)
    m = cls(None, None, args).build(init_methods(w, args), device=device)
    assert m.is_routed_fp8_rowwise == m.is_shared_fp8_rowwise == (precision == "fp8_rowwise")
    x = make_x(skew=skew)
    out = m(x.to(device), static)
    assert out.shape == x.shape and out.dtype == torch.bfloat16 and out.device.type == device
    assert rel_err(out, reference(x, w, top_k)) < TOL[precision]


def test_static_and_dynamic_agree():
    args = make_args()
    w = make_weights(skew=True)
    m = MetaShufflingMoE(None, None, args).build(init_methods(w, args), device="cpu")
    x = make_x(skew=True)
    torch.testing.assert_close(m(x, True), m(x, False), atol=0, rtol=0)


@requires_cuda
@pytest.mark.parametrize("precision", ["bf16", "fp8_rowwise"])
def test_static_path_cuda_graph(precision):
    """The static path has no host sync: it captures into a CUDA graph and replays on new tokens."""
    args = make_args(precision)
    w = make_weights(skew=True)
    m = MetaShufflingMoE(None, None, args).build(init_methods(w, args), device="cuda")
    x = make_x(skew=True).cuda()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        m(x, True)  # warm-up outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = m(x, True)
    x2 = make_x(seed=7).cuda()
    x.copy_(x2)
    graph.replay()
    torch.testing.assert_close(out, m(x2, True), atol=0, rtol=0)


def test_build_defaults_and_properties():
    m = BaselineMoE(None, None, make_args("fp8_rowwise", top_k=2)).build(device="cpu")
    assert (m.E, m.EG, m.K) == (E, E, 2) and m.router_DE.shape == (D, E)
    w13, w2 = m.routed_experts.w13, m.routed_experts.w2
    assert isinstance(w13, ScaledParameter) and w13.is_scaled and not w13.requires_grad
    assert w13.weights.dtype == torch.float8_e4m3fn and w13.shape == (E, 2 * H, D) and w13.scales.shape == (E, 2 * H)
    assert w2.shape == (E, D, H) and w2.scales.shape == (E, D)
    assert m(make_x(), False).isfinite().all()
    assert make_args(ep=2).num_local_experts == E // 2


def test_scaled_parameter_and_init_params():
    p = ScaledParameter(torch.zeros(3, 4))
    assert not p.is_scaled and not p.requires_grad and p.weights is not None
    with pytest.raises(AssertionError):
        p.scales
    init_params("router_DE", p, None)  # Kaiming-uniform fallback
    assert p.abs().sum() > 0
    init_params("shared_experts.w_in", p, {"shared_experts.w_in": lambda t: (t.to(torch.float8_e4m3fn),
                                                                            torch.ones(3))})
    assert p.is_scaled and p.dtype == torch.float8_e4m3fn
    with pytest.raises(ValueError, match="'key'"):
        init_params("w_bogus", p, None)
    with pytest.raises(RuntimeError, match="build"):
        SharedExperts(D, H).w13
    assert RoutedExperts(2, D, H).build(device="cpu").w13.shape == (2, 2 * H, D)


@pytest.mark.parametrize("kw,name", [
    (dict(precision="fp4"), "precision"),
    (dict(ep=3), "ep_size"),
    (dict(mp=3), "mp_size"),
    (dict(mp=128), "mp_size"),
    (dict(mp=2, mp_routed=3), "mp_size_for_routed_experts"),
    (dict(top_k=9, E_=16), "top_k"),
])
def test_bad_args(kw, name):
    with pytest.raises(ValueError, match=f"'{name}'"):
        make_args(**kw)


def test_bad_layer_config():
    with pytest.raises(ValueError, match="'moe_args.top_k'"):
        MetaShufflingMoE(None, None, make_args(top_k=2))
    with pytest.raises(ValueError, match="'ep_size|torch.distributed"):
        BaselineMoE(None, None, make_args(ep=2))
    m = BaselineMoE(None, None, make_args())
    with pytest.raises(RuntimeError, match="build"):
        m(make_x(), False)
    m.build(device="cpu")
    with pytest.raises(ValueError, match="'x'"):
        m(make_x().float(), False)
    with pytest.raises(ValueError, match="'x'"):
        m(make_x()[0], False)
