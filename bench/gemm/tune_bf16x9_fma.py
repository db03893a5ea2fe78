"""Times every row of bf16x9_gemm's FMA kernel (MSLK_BF16X9_FMA_CONFIGS in kernels/bf16x9_configs.h,
forced with MSLK_BF16X9_FMA_CONFIG) on a grid of few-row problems, with the fused kernel
(MSLK_BF16X9_KERNEL=fused) and FP32 torch.mm (TF32 off), round-robin in one run (time_rotated_ms),
for the table's max_m column and kBf16x9FmaMaxM. Prints and writes (--out) the times in us and the
B-read floor (N*K*4 bytes at the measured copy rate).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import torch

import mslk  # noqa: F401
from bench.common import copies_to_exceed_l2, copy_bandwidth_tbs, env_var, time_ms, time_rotated_ms, write_results

MS = [1, 2, 4, 8, 12, 16, 24, 32, 48]
NKS = [(8192, 8192)]
CONFIGS_H = Path(__file__).resolve().parents[2] / "csrc/gemm/kernels/bf16x9_configs.h"
# mt (the third field) of each F(id, max_m, mt, ...) row of MSLK_BF16X9_FMA_CONFIGS, in id order
ROW_MT = [int(m) for m in re.findall(r"^\s*F\(\d+,\s*\d+,\s*(\d+),", CONFIGS_H.read_text(), re.M)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("results_tune_bf16x9_fma.md"))
    ap.add_argument("--ms", type=str, default=",".join(map(str, MS)))
    ap.add_argument("--rows", type=lambda s: [int(r) for r in s.split(",")], default=None, help="row ids (default all)")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    bw = copy_bandwidth_tbs() * 1e12
    print(f"copy rate {bw / 1e12:.2f} TB/s", flush=True)
    out_rows = []
    for N, K in NKS:
        floor_us = 4.0 * N * K / bw * 1e6
        for M in [int(m) for m in args.ms.split(",")]:
            n = copies_to_exceed_l2(4 * (M * K + N * K + M * N))
            sets = [(torch.randn(M, K, device="cuda"), torch.randn(N, K, device="cuda")) for _ in range(n)]

            def call(kernel, row=None):
                def run():
                    with env_var("MSLK_BF16X9_KERNEL", kernel), env_var("MSLK_BF16X9_FMA_CONFIG", row):
                        return time_ms(lambda a, b: torch.ops.mslk.bf16x9_gemm(a, b), sets)
                return run

            # rows whose passes of mt fit M within a factor of 4 (others spend their time on passes or zero rows)
            fns = {f"row {r}": call("fma", str(r)) for r, mt in enumerate(ROW_MT)
                   if (args.rows is None or r in args.rows) and 4 * mt >= M and mt <= 4 * M}
            fns["auto"] = call("auto")
            fns["fused"] = call("fused")
            fns["mm"] = lambda: time_ms(lambda a, b: torch.mm(a, b.t()), sets)
            t = time_rotated_ms(fns)
            best = min((k for k in fns if k.startswith("row")), key=lambda k: t[k])
            cols = [f"row {r}" for r in range(len(ROW_MT))] + ["auto", "fused", "mm"]
            out_rows.append([M, N, K] + [f"{t[k] * 1e3:.0f}" if k in t else "-" for k in cols] +
                            [f"{floor_us:.0f}", best, f"{t['mm'] / t['auto']:.2f}x"])
            print(" | ".join(str(c) for c in out_rows[-1]), flush=True)
            del sets
            torch.cuda.empty_cache()
    write_results(args.out, "bf16x9_gemm: the FMA kernel's rows vs the fused kernel and FP32 torch.mm",
                  ["M", "N", "K"] + [f"{k} us" for k in cols] + ["B read floor us", "best row", "mm / auto"], out_rows,
                  notes="A [M, K], B [N, K] float32 randn; all timed round-robin in one run; floor: N*K*4 bytes at "
                        f"the measured copy rate, {bw / 1e12:.2f} TB/s.")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
