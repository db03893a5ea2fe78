"""f8f8bf16_rowwise (mslk) vs torch._scaled_mm with row scales (cuBLAS), same inputs, same run.

Prints and writes (--out) TFLOP/s of both and the speedup, for M in {1..8192} over the
(N, K) shapes of common LLM projections. Inputs rotate through enough copies to exceed L2.
Also checks each mslk result against _scaled_mm once per shape (max relative difference).

At the decode sizes (--skinny-ms, default 1, 16, 64) it also times the decode-shape kernel
forced with MSLK_FP8_GEMM_KERNEL=skinny, eagerly and as a CUDA graph (device time without the
host's per-call cost), against the floor: the weight read N*K bytes at the measured copy rate;
and the CUTLASS kernel forced the same way (graph), the data for MSLK_FP8_SKINNY_AUTO_MAX_M.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch

import mslk  # noqa: F401
from bench.common import copies_to_exceed_l2, copy_bandwidth_tbs, time_graph_ms, time_ms, time_pair_ms, write_results

FP8 = torch.float8_e4m3fn
MS = [1, 16, 64, 128, 512, 2048, 8192]
SKINNY_MS = [1, 16, 64]
ENV = "MSLK_FP8_GEMM_KERNEL"
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


class forced_env:
    """Environment variable var=value inside the block (the op reads its knobs on every call)."""

    def __init__(self, var, value):
        self.var, self.value = var, value

    def __enter__(self):
        self.prev = os.environ.get(self.var)
        os.environ[self.var] = self.value

    def __exit__(self, *exc):
        if self.prev is None:
            os.environ.pop(self.var, None)
        else:
            os.environ[self.var] = self.prev


def forced_kernel(name):
    """MSLK_FP8_GEMM_KERNEL=name inside the block."""
    return forced_env(ENV, name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("results_fp8_rowwise.md"))
    ap.add_argument("--ms", type=str, default=",".join(map(str, MS)))
    ap.add_argument("--skinny-ms", type=str, default=",".join(map(str, SKINNY_MS)))
    args = ap.parse_args()
    ms = [int(m) for m in args.ms.split(",")]
    skinny_ms = {int(m) for m in args.skinny_ms.split(",") if m}
    bw = copy_bandwidth_tbs() * 1e12  # the measured copy rate (read + write), ~4.1 TB/s on the H200
    print(f"copy rate {bw / 1e12:.2f} TB/s; weight-read floor = N*K bytes at that rate")
    rows = []
    for N, K in NKS:
        for M in ms:
            n = copies_to_exceed_l2(M * K + N * K + 2 * M * N)
            sets = [make(M, N, K) for _ in range(n)]
            a = ours(*sets[0]).float()
            b = peer(*sets[0]).float()
            rel = ((a - b).abs().max() / b.abs().max().clamp(min=1e-30)).item()
            t_ours, t_peer = time_pair_ms(ours, peer, sets)  # nan: cuBLAS rowwise refused the shape
            flops = 2.0 * M * N * K
            tf_ours, tf_peer = flops / (t_ours * 1e-3) / 1e12, flops / (t_peer * 1e-3) / 1e12
            floor_us = N * K / bw * 1e6
            sk = ["-"] * 7
            if M in skinny_ms:
                with forced_kernel("skinny"):
                    c = ours(*sets[0]).float()
                    rel_sk = ((c - b).abs().max() / b.abs().max().clamp(min=1e-30)).item()
                    t_sk = time_ms(ours, sets)
                    t_skg = time_graph_ms(ours, sets)
                try:
                    with forced_kernel("cutlass"):
                        t_cug = time_graph_ms(ours, sets)
                except RuntimeError:  # a build without CUTLASS
                    t_cug = float("nan")
                try:
                    t_peerg = time_graph_ms(peer, sets)
                except RuntimeError:
                    t_peerg = float("nan")
                sk = [f"{t_sk * 1e3:.1f}", f"{t_skg * 1e3:.1f}", f"{floor_us:.1f}", f"{t_skg * 1e3 / floor_us:.2f}x",
                      f"{t_peerg / t_skg:.2f}x", f"{t_cug * 1e3:.1f}", f"{rel_sk:.1e}"]
            rows.append([M, N, K, f"{t_ours * 1e3:.1f}", f"{tf_ours:.0f}", f"{t_peer * 1e3:.1f}", f"{tf_peer:.0f}",
                         f"{t_peer / t_ours:.2f}x", f"{rel:.1e}", *sk])
            print(" | ".join(str(c) for c in rows[-1]), flush=True)
            del sets
        torch.cuda.empty_cache()
    header = ["M", "N", "K", "mslk us", "mslk TFLOP/s", "_scaled_mm us", "_scaled_mm TFLOP/s", "speedup",
              "max rel diff", "skinny us", "skinny graph us", "floor us", "skinny graph / floor",
              "speedup (graphs)", "cutlass graph us", "skinny rel diff"]
    write_results(args.out, "FP8 rowwise GEMM: mslk f8f8bf16_rowwise vs torch._scaled_mm (fast accum)", header,
                  rows, notes="BF16 output, row scales on both sides, use_fast_accum=True for both. skinny: "
                  "MSLK_FP8_GEMM_KERNEL=skinny; cutlass: MSLK_FP8_GEMM_KERNEL=cutlass (M <= 16: the swap-AB row); "
                  "graph columns time CUDA graphs of both ops (device time); "
                  f"floor = N*K bytes at the measured copy rate, {bw / 1e12:.2f} TB/s.")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
