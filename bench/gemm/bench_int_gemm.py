"""Integer and exact-FP32 GEMMs of mslk against torch, same inputs, timed alternately in one run.

- bf16x9_gemm (FP32 from nine BF16 products) vs torch.mm in FP32 with TF32 off (target:
  >= 1.4x at 8192^3), with the max error of both against a float64 product on a sample of rows;
- i8i8bf16 vs torch._int_mm (int32 output) followed by the same scale and bf16 cast, with the
  device time of a CUDA graph of ours and the weight-read floor (N*K bytes at the measured copy
  rate; target at M <= 16: ours <= 1.5x the floor).

Prints and writes (--out) time, TFLOP/s (TOP/s for INT8) and speedup per shape.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

import mslk  # noqa: F401
from bench.common import copies_to_exceed_l2, copy_bandwidth_tbs, time_graph_ms, time_pair_ms, write_results

FP32_SHAPES = [(8192, 8192, 8192), (4096, 4096, 4096), (2048, 2048, 2048), (16384, 4096, 4096), (1024, 8192, 8192),
               (512, 8192, 8192), (128, 8192, 8192), (64, 8192, 8192), (32, 8192, 8192), (16, 8192, 8192), (4, 8192, 8192),
               (1, 8192, 8192)]
INT8_MS = [1, 16, 128, 1024, 4096, 8192]  # --ms 1,2,7,16 for the decode rows
INT8_NKS = [(8192, 8192), (4096, 14336), (28672, 4096)]


def fp32_rows(bw):
    rows = []
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        for M, N, K in FP32_SHAPES:
            n = copies_to_exceed_l2(4 * (M * K + N * K + M * N))
            sets = [(torch.randn(M, K, device="cuda"), torch.randn(N, K, device="cuda")) for _ in range(n)]

            def ours(a, b):
                return torch.ops.mslk.bf16x9_gemm(a, b)

            def peer(a, b):
                return torch.mm(a, b.t())

            a, b = sets[0]
            rows_s = torch.arange(0, M, max(1, M // 64), device="cuda")
            exact = a[rows_s].double() @ b.double().t()
            mag = a[rows_s].double().abs() @ b.double().abs().t()
            e_ours = ((ours(a, b)[rows_s].double() - exact).abs() / mag).max().item()
            e_peer = ((peer(a, b)[rows_s].double() - exact).abs() / mag).max().item()
            t_ours, t_peer = time_pair_ms(ours, peer, sets)
            flops = 2.0 * M * N * K
            floor_us = 4.0 * N * K / bw * 1e6  # B's float32 read, the bound at few rows
            rows.append([M, N, K, f"{t_ours * 1e3:.0f}", f"{flops / (t_ours * 1e-3) / 1e12:.1f}", f"{t_peer * 1e3:.0f}",
                         f"{flops / (t_peer * 1e-3) / 1e12:.1f}", f"{t_peer / t_ours:.2f}x",
                         f"{floor_us:.0f}" if M <= 64 else "-", f"{t_ours * 1e3 / floor_us:.2f}x" if M <= 64 else "-",
                         f"{e_ours:.1e}", f"{e_peer:.1e}"])
            print(" | ".join(str(c) for c in rows[-1]), flush=True)
            del sets
            torch.cuda.empty_cache()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    return rows


def int8_rows(ms, bw):
    """bw: the copy rate (bytes read + written per second), the floor's rate."""
    rows = []
    for N, K in INT8_NKS:
        for M in ms:
            n = copies_to_exceed_l2(M * K + N * K + 2 * M * N)
            sets = [(torch.randint(-128, 128, (M, K), dtype=torch.int8, device="cuda"),
                     torch.randint(-128, 128, (N, K), dtype=torch.int8, device="cuda")) for _ in range(n)]

            def ours(x, w):
                return torch.ops.mslk.i8i8bf16(x, w, 0.01)

            def peer(x, w):
                # torch._int_mm wants M > 16; it raises below, and the row records nan
                return (torch._int_mm(x, w.t()).float() * 0.01).bfloat16()

            t_ours, t_peer = time_pair_ms(ours, peer, sets)
            t_graph = time_graph_ms(ours, sets)
            ops = 2.0 * M * N * K
            floor_us = N * K / bw * 1e6
            rows.append([M, N, K, f"{t_ours * 1e3:.1f}", f"{ops / (t_ours * 1e-3) / 1e12:.0f}", f"{t_peer * 1e3:.1f}",
                         f"{ops / (t_peer * 1e-3) / 1e12:.0f}", f"{t_peer / t_ours:.2f}x", f"{t_graph * 1e3:.1f}",
                         f"{floor_us:.1f}", f"{t_ours * 1e3 / floor_us:.2f}x", f"{t_graph * 1e3 / floor_us:.2f}x"])
            print(" | ".join(str(c) for c in rows[-1]), flush=True)
            del sets
        torch.cuda.empty_cache()
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("results_int_gemm.md"))
    ap.add_argument("--ms", type=str, default=",".join(map(str, INT8_MS)))
    ap.add_argument("--skip-fp32", action="store_true")
    ap.add_argument("--skip-int8", action="store_true")
    args = ap.parse_args()
    bw = copy_bandwidth_tbs() * 1e12
    print(f"copy rate {bw / 1e12:.2f} TB/s")
    if not args.skip_fp32:
        r = fp32_rows(bw)
        out = args.out.with_name(args.out.stem + "_bf16x9.md")
        write_results(out, "FP32 GEMM: mslk bf16x9_gemm vs torch.mm (FP32, TF32 off)",
                      ["M", "N", "K", "mslk us", "mslk TFLOP/s", "torch us", "torch TFLOP/s", "speedup",
                       "B read floor us", "mslk / floor", "mslk max err / sum|a||b|", "torch max err / sum|a||b|"], r,
                      notes="A [M, K], B [N, K] float32 randn; errors against float64 on a sample of rows. mslk: "
                            "MSLK_BF16X9_KERNEL=auto (kernels/bf16x9_configs.h: the FMA kernel up to kBf16x9FmaMaxM "
                            f"rows, the fused kernel up to kBf16x9FusedMaxM, the parts path above). B read floor: N*K*4 bytes at the measured copy "
                            f"rate, {bw / 1e12:.2f} TB/s (M <= 64).")
        print(f"wrote {out}")
    if not args.skip_int8:
        print("weight-read floor = N*K bytes at the copy rate")
        r = int8_rows([int(m) for m in args.ms.split(",")], bw)
        write_results(args.out, "INT8 GEMM: mslk i8i8bf16 vs torch._int_mm (+ scale, bf16 cast)",
                      ["M", "N", "K", "mslk us", "mslk TOP/s", "torch us", "torch TOP/s", "speedup", "mslk graph us",
                       "floor us", "mslk / floor", "mslk graph / floor"], r,
                      notes="XQ [M, K], WQ [N, K] int8; the peer's time includes its scale-and-cast kernel. "
                      "mslk graph: device time of a CUDA graph of our calls; floor = N*K bytes (the weight read) "
                      f"at the measured copy rate, {bw / 1e12:.2f} TB/s; target at M <= 16: "
                      "mslk / floor <= 1.5x.")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
