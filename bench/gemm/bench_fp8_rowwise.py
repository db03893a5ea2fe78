"""f8f8bf16_rowwise (mslk) vs torch._scaled_mm with row scales (cuBLAS), same inputs, same run.

Prints and writes (--out) TFLOP/s of both and the speedup, for M in {1..8192} over the
(N, K) shapes of common LLM projections. Inputs rotate through enough copies to exceed L2.
Also checks each mslk result against _scaled_mm once per shape (max relative difference).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

import mslk  # noqa: F401
from bench.common import copies_to_exceed_l2, time_ms, write_results

FP8 = torch.float8_e4m3fn
MS = [1, 16, 64, 128, 512, 2048, 8192]
NKS = [(8192, 8192), (28672, 8192), (8192, 28672), (7168, 16384), (1280, 8192), (8192, 1024)]


def make(M, N, K):
    xq = (torch.randn(M, K, device="cuda") * 4).to(FP8)
    wq = (torch.randn(N, K, device="cuda") * 4).to(FP8)
    xs = torch.rand(M, device="cuda") * 0.01 + 1e-3
    ws = torch.rand(N, device="cuda") * 0.01 + 1e-3
    return xq, wq, xs, ws


def ours(xq, wq, xs, ws):
    return torch.ops.mslk.f8f8bf16_rowwise(xq, wq, xs, ws, None, True)


def peer(xq, wq, xs, ws):
    return torch._scaled_mm(xq, wq.t(), scale_a=xs[:, None], scale_b=ws[None, :], out_dtype=torch.bfloat16,
                            use_fast_accum=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("results_fp8_rowwise.md"))
    ap.add_argument("--ms", type=str, default=",".join(map(str, MS)))
    args = ap.parse_args()
    ms = [int(m) for m in args.ms.split(",")]
    rows = []
    for N, K in NKS:
        for M in ms:
            n = copies_to_exceed_l2(M * K + N * K + 2 * M * N)
            sets = [make(M, N, K) for _ in range(n)]
            a = ours(*sets[0]).float()
            b = peer(*sets[0]).float()
            rel = ((a - b).abs().max() / b.abs().max().clamp(min=1e-30)).item()
            t_ours = time_ms(ours, sets)
            try:
                t_peer = time_ms(peer, sets)
            except RuntimeError:  # cuBLAS rowwise may refuse some shapes
                t_peer = float("nan")
            flops = 2.0 * M * N * K
            tf_ours, tf_peer = flops / (t_ours * 1e-3) / 1e12, flops / (t_peer * 1e-3) / 1e12
            rows.append([M, N, K, f"{t_ours * 1e3:.1f}", f"{tf_ours:.0f}", f"{t_peer * 1e3:.1f}", f"{tf_peer:.0f}",
                         f"{t_peer / t_ours:.2f}x", f"{rel:.1e}"])
            print(" | ".join(str(c) for c in rows[-1]), flush=True)
            del sets
        torch.cuda.empty_cache()
    header = ["M", "N", "K", "mslk us", "mslk TFLOP/s", "_scaled_mm us", "_scaled_mm TFLOP/s", "speedup",
              "max rel diff"]
    write_results(args.out, "FP8 rowwise GEMM: mslk f8f8bf16_rowwise vs torch._scaled_mm (fast accum)", header,
                  rows, notes="BF16 output, row scales on both sides, use_fast_accum=True for both.")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
