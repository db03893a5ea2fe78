"""Times the bf16x9_gemm kernels on a grid of M, for kBf16x9FmaMaxM and kBf16x9FusedMaxM
(kernels/bf16x9_configs.h).

fma: float32 FMAs streaming B (MSLK_BF16X9_KERNEL=fma, timed up to FMA_MAX_M rows); fused: the kernel
that splits the float32 operands itself (=fused); parts: the BF16 parts buffers and one BF16 GEMM
(=parts); with torch.mm in FP32 (TF32 off) for scale. All are timed round-robin in one run
(time_rotated_ms). Prints and writes (--out) the times and the fastest kernel per shape.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

import mslk  # noqa: F401
from bench.common import copies_to_exceed_l2, env_var, time_ms, time_rotated_ms, write_results

MS = [1, 2, 4, 8, 16, 24, 32, 48, 64, 128, 256, 512, 1024, 2048, 4096]
FMA_MAX_M = 64  # the FMA kernel reads B once a 16-row pass: past a few passes it cannot lead
NKS = [(8192, 8192), (4096, 4096)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("results_tune_bf16x9.md"))
    ap.add_argument("--ms", type=str, default=",".join(map(str, MS)))
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    rows = []
    for N, K in NKS:
        for M in [int(m) for m in args.ms.split(",")]:
            n = copies_to_exceed_l2(4 * (M * K + N * K + M * N))
            sets = [(torch.randn(M, K, device="cuda"), torch.randn(N, K, device="cuda")) for _ in range(n)]

            def kernel(name):
                def run():
                    with env_var("MSLK_BF16X9_KERNEL", name):
                        return time_ms(lambda a, b: torch.ops.mslk.bf16x9_gemm(a, b), sets)
                return run

            kernels = ["fma", "fused", "parts"] if M <= FMA_MAX_M else ["fused", "parts"]
            fns = {k: kernel(k) for k in kernels}
            fns["mm"] = lambda: time_ms(lambda a, b: torch.mm(a, b.t()), sets)
            t = time_rotated_ms(fns)
            best = min(kernels, key=lambda k: t[k])
            fma = f"{t['fma'] * 1e3:.0f}" if "fma" in t else "-"
            rows.append([M, N, K, fma, f"{t['fused'] * 1e3:.0f}", f"{t['parts'] * 1e3:.0f}", f"{t['mm'] * 1e3:.0f}",
                         f"{t['parts'] / t['fused']:.2f}x", f"{t['mm'] / t[best]:.2f}x", best])
            print(" | ".join(str(c) for c in rows[-1]), flush=True)
            del sets
            torch.cuda.empty_cache()
    write_results(args.out, "bf16x9_gemm: FMA and fused kernels vs parts path (vs FP32 torch.mm)",
                  ["M", "N", "K", "fma us", "fused us", "parts us", "torch.mm us", "parts / fused", "mm / best", "best"], rows,
                  notes="A [M, K], B [N, K] float32 randn; all timed round-robin in one run.")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
