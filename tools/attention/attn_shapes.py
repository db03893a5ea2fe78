"""Shared by the attention A/B tools (ab_env.py, clocks.py, vs_cudnn.py): a shape argument
"B,H,S,D,causal", rotating bf16 inputs larger than L2, its flop count, and our op / cuDNN SDPA on it."""
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention as sdpa

import mslk  # noqa: F401
from bench.common import copies_to_exceed_l2


def parse(arg):
    """ "B,H,S,D,causal" -> (B, H, S, D, causal: bool); S may be "Sq:Skv" (queries, keys)"""
    B, H, S, D, c = arg.split(",")
    S = tuple(int(x) for x in S.split(":")) if ":" in S else int(S)
    return int(B), int(H), S, int(D), bool(int(c))


def problem(B, H, S, D, causal):
    """(input sets [B, S, H, D] to rotate through, flops of one call; causal counts half)"""
    Sq, Skv = S if isinstance(S, tuple) else (S, S)
    sets = [tuple(torch.randn(B, m, H, D, device="cuda", dtype=torch.bfloat16) for m in (Sq, Skv, Skv))
            for _ in range(copies_to_exceed_l2(B * (Sq + 2 * Skv) * H * D * 2))]
    return sets, 4.0 * B * H * Sq * Skv * D * (0.5 if causal else 1.0)


def ours(D, causal):
    return lambda q, k, v: torch.ops.mslk.fmha_fused_fwd(q, k, v, mask_kind=int(causal), scale=D ** -0.5)[0]


def cudnn(causal):
    def f(q, k, v):
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return sdpa(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal)
    return f


def name(B, H, S, D, causal):
    S = f"{S[0]}:{S[1]}" if isinstance(S, tuple) else S
    return f"B{B} H{H} S{S} d{D}{' causal' if causal else ''}"
