"""Fused attention forward: mslk::fmha_fused_fwd vs torch SDPA (cuDNN and flash backends), same inputs,
same run. bf16, [B, S, H, D] inputs (SDPA gets the [B, H, S, D] transposed views, no copies).

Prints and writes (--out) TFLOP/s (4·B·H·S²·D flops, half for causal) and the ratio to each peer,
plus the max abs difference of mslk's output against cuDNN's once per shape.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention as sdpa

import mslk  # noqa: F401
from bench.common import copies_to_exceed_l2, time_ms, write_results

# (B, H, S, D, causal)
SHAPES = [(2, 32, 4096, 128, False), (2, 32, 4096, 128, True), (1, 32, 8192, 128, True),
          (4, 16, 2048, 64, False), (4, 16, 2048, 64, True), (2, 16, 4096, 256, False), (2, 16, 4096, 256, True)]


def make(B, H, S, D):
    return tuple(torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))


def ours_fn(causal):
    def f(q, k, v):
        return torch.ops.mslk.fmha_fused_fwd(q, k, v, mask_kind=1 if causal else 0, scale=q.shape[-1] ** -0.5)
    return f


def peer_fn(backend, causal):
    def f(q, k, v):
        with sdpa_kernel(backend):
            return sdpa(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal)
    return f


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("results_fmha_fwd.md"))
    args = ap.parse_args()
    rows = []
    for B, H, S, D, causal in SHAPES:
        n = copies_to_exceed_l2(3 * B * H * S * D * 2)
        sets = [make(B, H, S, D) for _ in range(n)]
        flops = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)
        ours = ours_fn(causal)
        out, _ = ours(*sets[0])
        t_ours = time_ms(ours, sets)
        res = {}
        diff = float("nan")
        for name, be in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
            try:
                f = peer_fn(be, causal)
                ref = f(*sets[0]).transpose(1, 2)
                if name == "cudnn" or diff != diff:
                    diff = (out.float() - ref.float()).abs().max().item()
                res[name] = time_ms(f, sets)
            except RuntimeError as e:  # backend refuses the shape
                print(f"{name} unavailable for {(B, H, S, D, causal)}: {str(e).splitlines()[0]}")
                res[name] = float("nan")
        tf = lambda ms: flops / (ms * 1e-3) / 1e12  # noqa: E731
        rows.append([B, H, S, D, causal, f"{t_ours * 1e3:.0f}", f"{tf(t_ours):.0f}", f"{tf(res['cudnn']):.0f}",
                     f"{tf(res['flash']):.0f}", f"{res['cudnn'] / t_ours:.2f}x", f"{res['flash'] / t_ours:.2f}x",
                     f"{diff:.1e}"])
        print(" | ".join(str(c) for c in rows[-1]), flush=True)
        del sets
        torch.cuda.empty_cache()
    header = ["B", "H", "S", "D", "causal", "mslk us", "mslk TFLOP/s", "cuDNN TFLOP/s", "flash TFLOP/s",
              "vs cuDNN", "vs flash", "max abs diff vs cuDNN"]
    write_results(args.out, "Attention forward: mslk::fmha_fused_fwd vs SDPA (cuDNN, flash)", header, rows,
                  notes="bf16; causal counts half the flops; ratio > 1 means mslk is faster.")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
