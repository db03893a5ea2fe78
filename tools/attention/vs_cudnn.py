"""Quick look: the sm90 kernel's default rows, with and without the stream-K tail
(MSLK_FMHA_SM90_STREAMK=0), vs cuDNN SDPA on shapes given on the command line, two reps in one
process. Usage: python3 tools/attention/vs_cudnn.py B,H,S,D,causal [...]
B2 H33 S4096 d128 fills 16 rounds of 132 SMs exactly where the bench's H32 leaves the last round
half empty: the pair tells a tail loss from a per-tile one. The bench is the record."""
import os
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention as sdpa

import mslk  # noqa: F401
from bench.common import copies_to_exceed_l2, env_var, time_ms

os.environ["MSLK_FMHA_KERNEL"] = "sm90"
for rep in range(2):
    for arg in sys.argv[1:]:
        B, H, S, D, c = (int(x) for x in arg.split(","))
        causal = bool(c)
        sets = [tuple(torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
                for _ in range(copies_to_exceed_l2(3 * B * S * H * D * 2))]
        flops = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)

        def ours(q, k, v):
            return torch.ops.mslk.fmha_fused_fwd(q, k, v, mask_kind=1 if causal else 0, scale=D ** -0.5)[0]

        def cudnn(q, k, v):
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return sdpa(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal)

        diff = (ours(*sets[0]).float() - cudnn(*sets[0]).transpose(1, 2).float()).abs().max().item()
        with env_var("MSLK_FMHA_SM90_STREAMK", "0"):
            whole = flops / time_ms(ours, sets) / 1e9
        a, b = flops / time_ms(ours, sets) / 1e9, flops / time_ms(cudnn, sets) / 1e9
        print(f"rep {rep} B{B} H{H} S{S} d{D}{' causal' if causal else ''}: sm90 {a:.0f} (whole tiles {whole:.0f}) "
              f"cuDNN {b:.0f} TFLOP/s, ratio {a / b:.3f} (max diff {diff:.1e})", flush=True)
