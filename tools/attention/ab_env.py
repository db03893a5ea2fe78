"""A/B of an attention tuning switch, interleaved: for each shape, alternates the values of one
environment variable (read per call by the op) `reps` times and prints each value's median and range
of TFLOP/s, so that drift in clocks between reps hits every value alike.
Usage: python3 tools/attention/ab_env.py VAR v1,v2 reps B,H,S,D,causal [...]
(value "-" unsets the variable), e.g. ab_env.py MSLK_FMHA_SM90_STREAMK -,0 7 2,32,4096,128,0"""
import statistics
import sys

import torch

import mslk  # noqa: F401
from bench.common import copies_to_exceed_l2, env_var, time_ms

var, values, reps = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3])
for arg in sys.argv[4:]:
    B, H, S, D, c = (int(x) for x in arg.split(","))
    sets = [tuple(torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            for _ in range(copies_to_exceed_l2(3 * B * S * H * D * 2))]
    flops = 4.0 * B * H * S * S * D * (0.5 if c else 1.0)

    def ours(q, k, v):
        return torch.ops.mslk.fmha_fused_fwd(q, k, v, mask_kind=c, scale=D ** -0.5)[0]

    res = {v: [] for v in values}
    with env_var("MSLK_FMHA_KERNEL", "sm90"):
        for _ in range(reps):
            for v in values:
                with env_var(var, None if v == "-" else v):
                    res[v].append(flops / time_ms(ours, sets, reps=7) / 1e9)
    line = ", ".join(f"{var}={v}: median {statistics.median(r):.0f} ({min(r):.0f}-{max(r):.0f})" for v, r in res.items())
    print(f"B{B} H{H} S{S} d{D}{' causal' if c else ''}: {line}", flush=True)
