"""Quick A/B of kTileCfgs rows on one shape (MSLK_FMHA_SM90_CFG), each checked against the
dispatch default and timed with CUDA events. Usage: python3 tools/attention/time_rows.py
B H S D causal [row ...]; S = 0 runs the bench's packed varlen batch (B is then ignored). For a
first look at a candidate; the tune script is the record."""
import os
import sys

import torch

import mslk  # noqa: F401
from bench.attention.bench_fmha_fwd import VARLEN
from bench.common import time_ms

B, H, S, D, causal = (int(x) for x in sys.argv[1:6])
rows = sys.argv[6:]
os.environ["MSLK_FMHA_KERNEL"] = "sm90"
kw = dict(mask_kind=1 if causal else 0, scale=D ** -0.5)
if S == 0:  # packed varlen: one batch of the bench's sequence lengths
    B, S = 1, sum(VARLEN)
    cu = torch.tensor([0] + torch.tensor(VARLEN).cumsum(0).tolist(), dtype=torch.int32, device="cuda")
    kw.update(seqstart_q=cu, seqstart_k=cu, max_seqlen_q=max(VARLEN))
    flops = sum(4.0 * H * s * s * D for s in VARLEN)
else:
    flops = 4.0 * B * H * S * S * D
flops *= 0.5 if causal else 1.0
sets = [tuple(torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(3)) for _ in range(4)]
f = lambda q, k, v: torch.ops.mslk.fmha_fused_fwd(q, k, v, **kw)  # noqa: E731
ref = f(*sets[0])[0].float()
for rep in range(2):
    for r in ["default"] + rows:
        if r == "default":
            os.environ.pop("MSLK_FMHA_SM90_CFG", None)
        else:
            os.environ["MSLK_FMHA_SM90_CFG"] = r
        out = f(*sets[0])[0].float()
        torch.cuda.synchronize()
        ms = time_ms(f, sets)
        print(f"rep {rep} row {r}: {flops / ms / 1e9:.0f} TFLOP/s, max abs diff vs default {(out - ref).abs().max().item():.1e}",
              flush=True)
    os.environ.pop("MSLK_FMHA_SM90_CFG", None)
