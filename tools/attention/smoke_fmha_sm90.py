"""First-contact smoke run of the Hopper attention kernel (MSLK_FMHA_KERNEL=sm90) on a GPU: one
small problem per head dim and mask, each against float64 and the FA2 kernel, one line each, the
CUDA error (if any) named right away. Exits 1 on any mismatch.

Run on the H200 after a build:  PYTHONPATH=$PWD timeout 300 python3 tools/attention/smoke_fmha_sm90.py
(then compute-sanitizer --tool memcheck / synccheck on the same command line).
"""

import math
import os
import sys

import torch

import mslk  # noqa: F401


def reference(q, k, v, mask_kind, scale):
    """float64 attention on [B, M, H, D] inputs; mask_kind 0 (none) or 1 (causal, top-left)."""
    qd, kd, vd = (x.double().transpose(1, 2) for x in (q, k, v))
    s = qd @ kd.transpose(-1, -2) * scale
    if mask_kind == 1:
        mq, mk = s.shape[-2:]
        s = s.masked_fill(torch.ones(mq, mk, dtype=torch.bool, device=s.device).triu(1), -math.inf)
    lse = torch.logsumexp(s, -1)
    return (torch.softmax(s, -1) @ vd).transpose(1, 2), lse


def run(kernel, q, k, v, mask_kind, scale):
    os.environ["MSLK_FMHA_KERNEL"] = kernel
    out, lse = torch.ops.mslk.fmha_fused_fwd(q, k, v, mask_kind=mask_kind, scale=scale)
    torch.cuda.synchronize()
    return out, lse


def main():
    assert torch.cuda.is_available(), "needs a GPU"
    print("device:", torch.cuda.get_device_name(), torch.cuda.get_device_capability())
    ok = True
    g = torch.Generator(device="cuda").manual_seed(0)
    for d in (64, 128, 256):
        for dtype in (torch.bfloat16, torch.float16):
            for mq, mk in ((1, 1), (130, 130), (300, 1000), (1000, 300)):
                for mask_kind in (0, 1):
                    q = torch.randn(2, mq, 3, d, device="cuda", dtype=dtype, generator=g)
                    k = torch.randn(2, mk, 3, d, device="cuda", dtype=dtype, generator=g)
                    v = torch.randn(2, mk, 3, d, device="cuda", dtype=dtype, generator=g)
                    scale = d ** -0.5
                    want, want_lse = reference(q, k, v, mask_kind, scale)
                    try:
                        out, lse = run("sm90", q, k, v, mask_kind, scale)
                        fa2, _ = run("sm80", q, k, v, mask_kind, scale)
                    except RuntimeError as e:
                        print(f"d={d} {dtype} {mq}x{mk} mask={mask_kind}: ERROR {str(e).splitlines()[0]}")
                        return 1  # a CUDA error poisons the context: stop here
                    fin = torch.isfinite(want_lse)
                    err = (out.double() - want).abs().nan_to_num(math.inf).max().item()
                    err_fa2 = (fa2.double() - want).abs().max().item()
                    lse_err = (lse.double() - want_lse)[fin].abs().nan_to_num(math.inf).max().item() if fin.any() else 0.0
                    lse_inf_ok = bool(torch.equal(torch.isneginf(lse), ~fin))
                    tol = 3e-3 if dtype == torch.float16 else 2e-2
                    good = err <= max(2 * err_fa2, tol) and lse_err < 2e-3 and lse_inf_ok
                    ok &= good
                    print(f"{'ok  ' if good else 'FAIL'} d={d} {str(dtype)[6:]:8s} {mq:4d}x{mk:<4d} mask={mask_kind} "
                          f"max|err| sm90 {err:.2e} FA2 {err_fa2:.2e} lse {lse_err:.1e}", flush=True)
    print("all ok" if ok else "MISMATCHES")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
