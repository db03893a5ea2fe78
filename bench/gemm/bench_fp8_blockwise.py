"""f8f8bf16_groupwise (mslk) vs torch._scaled_mm with blockwise scales (cuBLAS: 1 x 128 activation
groups, 128 x 128 weight blocks), same inputs, timed alternately in one run.

Prints and writes (--out) TFLOP/s of both and the speedup over the benchmark grid (M x (N, K)),
with the max relative difference of the two results per shape; at M <= 16 also the weight-read
floor (N*K bytes at the measured copy rate) and mslk's CUTLASS kernel on the same calls
(MSLK_FP8_BLOCKWISE_DECODE=off), against which the decode kernel is chosen there. --grouped adds the grouped form
(f8f8bf16_groupwise_grouped) at E experts against a loop of cuBLAS blockwise calls and against
mslk's rowwise grouped kernel on the same shapes.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch

import mslk  # noqa: F401
from bench.common import copies_to_exceed_l2, copy_bandwidth_tbs, time_pair_ms, write_results

FP8 = torch.float8_e4m3fn
MS = [1, 16, 128, 512, 2048, 4096, 8192]
NKS = [(2112, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048)]
GROUPED = [(8, 512, 4096, 7168), (16, 256, 4096, 7168), (128, 64, 4096, 7168)]  # E, tokens/expert, N, K


def make(M, N, K):
    xq = (torch.randn(M, K, device="cuda") * 4).to(FP8)
    wq = (torch.randn(N, K, device="cuda") * 4).to(FP8)
    xs = torch.rand(K // 128, M, device="cuda") * 0.01 + 1e-3  # [K/128, M], MN-major
    ws = torch.rand(K // 128, (N + 127) // 128, device="cuda") * 0.01 + 1e-3
    return xq, wq, xs, ws


def ours(xq, wq, xs, ws):
    return torch.ops.mslk.f8f8bf16_groupwise(xq, wq, xs, ws)


def ours_cutlass(xq, wq, xs, ws):
    os.environ["MSLK_FP8_BLOCKWISE_DECODE"] = "off"  # read on every call
    try:
        return torch.ops.mslk.f8f8bf16_groupwise(xq, wq, xs, ws)
    finally:
        del os.environ["MSLK_FP8_BLOCKWISE_DECODE"]


_WS_LAYOUT = {}


def peer(xq, wq, xs, ws):
    # scale_a [M, K/128] M-major (xs.t() is that view); scale_b [K/128, N/128] in the layout cuBLAS takes
    lay = _WS_LAYOUT.get("w", 0)
    sb = ws if lay == 0 else ws.t().contiguous().t()
    return torch._scaled_mm(xq, wq.t(), scale_a=xs.t(), scale_b=sb, out_dtype=torch.bfloat16)


def pick_peer_layout(args):
    for lay in (0, 1):
        _WS_LAYOUT["w"] = lay
        try:
            return peer(*args)
        except RuntimeError:
            continue
    return None


def dense_rows(ms, bw):
    rows = []
    for N, K in NKS:
        for M in ms:
            n = copies_to_exceed_l2(M * K + N * K + 2 * M * N)
            sets = [make(M, N, K) for _ in range(n)]
            a = ours(*sets[0]).float()
            b = pick_peer_layout(sets[0])
            if b is None:
                rel, t_ours, t_peer = float("nan"), time_pair_ms(ours, ours, sets)[0], float("nan")
            else:
                b = b.float()
                rel = ((a - b).abs().max() / b.abs().max().clamp(min=1e-30)).item()
                t_ours, t_peer = time_pair_ms(ours, peer, sets)
            flops = 2.0 * M * N * K
            floor_us = N * K / bw * 1e6
            small = M <= 16
            t_cut = time_pair_ms(ours, ours_cutlass, sets)[1] if small else float("nan")
            rows.append([M, N, K, f"{t_ours * 1e3:.1f}", f"{flops / (t_ours * 1e-3) / 1e12:.0f}",
                         f"{t_peer * 1e3:.1f}", f"{flops / (t_peer * 1e-3) / 1e12:.0f}", f"{t_peer / t_ours:.2f}x",
                         f"{floor_us:.1f}" if small else "-", f"{t_ours * 1e3 / floor_us:.2f}" if small else "-",
                         f"{t_cut * 1e3:.1f}" if small else "-", f"{rel:.1e}"])
            print(" | ".join(str(c) for c in rows[-1]), flush=True)
            del sets
        torch.cuda.empty_cache()
    return rows


def grouped_rows():
    rows = []
    for E, tpe, N, K in GROUPED:
        M = E * tpe
        xq = (torch.randn(M, K, device="cuda") * 4).to(FP8)
        wq = (torch.randn(E, N, K, device="cuda") * 4).to(FP8)
        ms = torch.full((E,), tpe, dtype=torch.int64, device="cuda")
        xs = torch.rand(M, K // 128, device="cuda") * 0.01 + 1e-3  # M-major inside each group
        ws = torch.rand(E, K // 128, N // 128, device="cuda") * 0.01 + 1e-3
        xr, wr = torch.rand(M, device="cuda") * 0.01, torch.rand(E * N, device="cuda") * 0.01

        def grouped(xq, wq, xs, ws, ms):
            return torch.ops.mslk.f8f8bf16_groupwise_grouped(xq, wq, xs, ws, ms)

        def loop(xq, wq, xs, ws, ms):
            out = []
            for g in range(E):
                seg = xs.view(-1)[g * tpe * (K // 128):(g + 1) * tpe * (K // 128)].view(K // 128, tpe)
                out.append(peer(xq[g * tpe:(g + 1) * tpe], wq[g], seg, ws[g]))
            return out

        def rowwise(xq, wq, xs, ws, ms):
            return torch.ops.mslk.f8f8bf16_rowwise_grouped_stacked(xq, wq, xr, wr, ms)

        sets = [(xq, wq, xs, ws, ms)]
        pick_peer_layout((xq[:tpe], wq[0], xs.view(-1)[:tpe * (K // 128)].view(K // 128, tpe), ws[0]))
        t_g, t_loop = time_pair_ms(grouped, loop, sets)
        _, t_row = time_pair_ms(grouped, rowwise, sets)
        flops = 2.0 * M * N * K
        rows.append([E, tpe, N, K, f"{t_g * 1e3:.1f}", f"{flops / (t_g * 1e-3) / 1e12:.0f}", f"{t_loop * 1e3:.1f}",
                     f"{t_loop / t_g:.2f}x", f"{t_row * 1e3:.1f}", f"{t_g / t_row:.2f}"])
        print(" | ".join(str(c) for c in rows[-1]), flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("results_fp8_blockwise.md"))
    ap.add_argument("--ms", type=str, default=",".join(map(str, MS)))
    ap.add_argument("--grouped", action="store_true")
    args = ap.parse_args()
    bw = copy_bandwidth_tbs() * 1e12
    rows = dense_rows([int(m) for m in args.ms.split(",")], bw)
    write_results(args.out, "FP8 groupwise GEMM: mslk f8f8bf16_groupwise vs torch._scaled_mm blockwise (cuBLAS)",
                  ["M", "N", "K", "mslk us", "mslk TFLOP/s", "cuBLAS us", "cuBLAS TFLOP/s", "speedup",
                   "weight-read floor us", "mslk / floor", "mslk CUTLASS us", "max rel diff"], rows,
                  notes="BF16 output; 1 x 128 activation groups, 128 x 128 weight blocks on both sides; "
                  f"floor = N*K bytes at the measured copy rate, {bw / 1e12:.2f} TB/s. At M <= 16 mslk runs "
                  "its decode kernel; 'mslk CUTLASS' is its CUTLASS kernel on the same calls.")
    if args.grouped:
        g = grouped_rows()
        out = args.out.with_name(args.out.stem + "_grouped.md")
        write_results(out, "FP8 groupwise grouped GEMM: f8f8bf16_groupwise_grouped vs a loop of cuBLAS blockwise "
                      "calls and mslk's rowwise grouped kernel",
                      ["E", "tokens/expert", "N", "K", "mslk us", "mslk TFLOP/s", "cuBLAS loop us",
                       "speedup vs loop", "rowwise grouped us", "mslk / rowwise"], g)
        print(f"wrote {out}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
