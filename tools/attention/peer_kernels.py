"""Names (which encode the tile shapes) and times of the CUDA kernels that cuDNN SDPA and our sm90
op launch on the bench's shapes, from torch.profiler. Usage: python3 tools/attention/peer_kernels.py"""
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention as sdpa
from torch.profiler import ProfilerActivity, profile

import mslk  # noqa: F401
from bench.attention.bench_fmha_fwd import SHAPES

for B, H, S, D, causal in SHAPES:
    q, k, v = (torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    fns = {"cuDNN": lambda: sdpa(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal),
           "sm90": lambda: torch.ops.mslk.fmha_fused_fwd(q, k, v, mask_kind=int(causal), scale=D ** -0.5)}
    for name, f in fns.items():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            f()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                f()
                torch.cuda.synchronize()
        for e in prof.key_averages():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                print(f"B{B} H{H} S{S} d{D}{' causal' if causal else ''} {name}: {e.key[:160]} "
                      f"{e.device_time_total:.0f} us", flush=True)
