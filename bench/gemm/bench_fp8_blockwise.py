"""f8f8bf16_groupwise (mslk) vs torch._scaled_mm with blockwise scales (cuBLAS: 1 x 128 activation
groups, 128 x 128 weight blocks), same inputs, timed alternately in one run.

Prints and writes (--out) TFLOP/s of both and the speedup over the benchmark grid (M x (N, K)),
with the max relative difference of the two results per shape; at M <= 16 also the weight-read
floor (N*K bytes at the measured copy rate) and mslk's CUTLASS kernel on the same calls
(MSLK_FP8_BLOCKWISE_DECODE=off), against which the decode kernel is chosen there. --grouped adds the grouped form
(f8f8bf16_groupwise_grouped) at E experts against a loop of cuBLAS blockwise calls and against
mslk's rowwise grouped kernel on the same shapes. --walks times every row of
fp8_blockwise_grouped_configs.h under each tile walk (MSLK_GEMM_RASTER x MSLK_GEMM_SWIZZLE) on
those shapes and on one group holding all of E 8's tokens (a hot expert), checking that every walk
gives the same bits; it prints the table gemm_tables.md cites and writes nothing.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

import torch

import mslk  # noqa: F401
from bench.common import (copies_to_exceed_l2, copy_bandwidth_tbs, env_var, time_ms, time_pair_ms, time_rotated_ms,
                          write_results)
from bench.gemm.bench_bf16_grouped import SHAPES, sizes_for

FP8 = torch.float8_e4m3fn
MS = [1, 16, 128, 512, 2048, 4096, 8192]
NKS = [(2112, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048)]


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


GROUPED_CONFIGS_H = Path(__file__).resolve().parents[2] / "csrc/gemm/kernels/fp8_blockwise_grouped_configs.h"
# mslk's wgmma kernel: the row after the table's CUTLASS rows
WGMMA_ROW = str(len(re.findall(r"^\s*X\((\d+),", GROUPED_CONFIGS_H.read_text(), re.M)))


def grouped_rows():
    """The grouped form on the BF16 grouped table's shapes (bench_bf16_grouped.SHAPES), uniform and
    skewed routing: against a loop of cuBLAS blockwise calls over the groups and against mslk's
    rowwise grouped kernel (one scale per row / column) on the same operands."""
    rows = []
    for E, tpe, N, K in SHAPES:
        for skewed in (False, True):
            sizes = sizes_for(E, tpe, skewed)
            M, kb = sum(sizes), K // 128
            xq = (torch.randn(M, K, device="cuda") * 4).to(FP8)
            wq = (torch.randn(E, N, K, device="cuda") * 4).to(FP8)
            ms = torch.tensor(sizes, dtype=torch.int64, device="cuda")
            xs = torch.rand(M, kb, device="cuda") * 0.01 + 1e-3  # M-major inside each group
            ws = torch.rand(E, kb, N // 128, device="cuda") * 0.01 + 1e-3
            xr, wr = torch.rand(M, device="cuda") * 0.01, torch.rand(E * N, device="cuda") * 0.01
            starts = [sum(sizes[:g]) for g in range(E)]
            segs = [(g, s, m, xs.view(-1)[s * kb:(s + m) * kb].view(kb, m)) for g, (s, m) in
                    enumerate(zip(starts, sizes)) if m > 0]
            # cuBLAS wants each group's scale rows 16-byte aligned: its own operands, rows padded to
            # a multiple of 4, laid out before the timing (as a user of the loop would keep them)
            padded = []
            for g, s, m, seg in segs:
                mp = (m + 3) // 4 * 4
                xg = torch.zeros(mp, K, device="cuda").to(FP8)
                xg[:m] = xq[s:s + m]
                sg = torch.full((kb, mp), 1e-3, device="cuda")
                sg[:, :m] = seg
                padded.append((g, m, xg, sg))

            def grouped(xq, wq, xs, ws, ms):
                return torch.ops.mslk.f8f8bf16_groupwise_grouped(xq, wq, xs, ws, ms)

            def loop(xq, wq, xs, ws, ms):
                return [peer(xg, wq[g], sg, ws[g]) for g, m, xg, sg in padded]

            def rowwise(xq, wq, xs, ws, ms):
                return torch.ops.mslk.f8f8bf16_rowwise_grouped_stacked(xq, wq, xr, wr, ms)

            def wgmma(xq, wq, xs, ws, ms):
                with env_var("MSLK_FP8_BLOCKWISE_GROUPED_CONFIG", WGMMA_ROW):
                    return grouped(xq, wq, xs, ws, ms)

            sets = [(xq, wq, xs, ws, ms)]
            g0, _, xg0, sg0 = padded[0]
            pick_peer_layout((xg0, wq[g0], sg0, ws[g0]))
            out = grouped(*sets[0]).float()
            ref = torch.cat([o[:m].float() for o, (_, m, _, _) in zip(loop(*sets[0]), padded)])
            rel = ((out - ref).abs().max() / ref.abs().max()).item()
            t_g, t_loop = time_pair_ms(grouped, loop, sets)
            with env_var("MSLK_FP8_GROUPED_KERNEL", "host"):
                t_host = time_ms(grouped, sets)
            _, t_row = time_pair_ms(grouped, rowwise, sets)
            _, t_w = time_pair_ms(grouped, wgmma, sets)
            wdiff = (wgmma(*sets[0]).float() - out).abs().max().item()
            flops = 2.0 * M * N * K
            rows.append([E, tpe, N, K, "skewed" if skewed else "uniform", f"{t_g * 1e3:.1f}",
                         f"{flops / (t_g * 1e-3) / 1e12:.0f}", f"{t_loop * 1e3:.1f}", f"{t_loop / t_g:.2f}x",
                         f"{t_row * 1e3:.1f}", f"{t_g / t_row:.2f}", f"{t_host * 1e3:.1f}", f"{t_w * 1e3:.1f}",
                         f"{t_loop / t_w:.2f}x", f"{wdiff:.1e}", f"{rel:.1e}"])
            print(" | ".join(str(c) for c in rows[-1]), flush=True)
            del sets, xq, wq
            torch.cuda.empty_cache()
    return rows




def walk_sweep(only_rows=None, only_e=None, swizzles=("1", "2", "8"), walk_rounds=3):
    # --walk-rows as given (a library built with more rows than this tree's table), else the table's
    rows = only_rows or [int(r) for r in re.findall(r"^\s*X\((\d+),", GROUPED_CONFIGS_H.read_text(), re.M)]
    E8, tpe8, N8, K8 = SHAPES[0]
    cases = [(E, tpe, N, K, skewed, sizes_for(E, tpe, skewed)) for E, tpe, N, K in SHAPES for skewed in (False, True)]
    cases.append((1, E8 * tpe8, N8, K8, False, [E8 * tpe8]))
    for E, tpe, N, K, skewed, sizes in cases:
        if only_e is not None and E not in only_e:
            continue
        M, kb = sum(sizes), K // 128
        xq = (torch.randn(M, K, device="cuda") * 4).to(FP8)
        wq = (torch.randn(E, N, K, device="cuda") * 4).to(FP8)
        ms = torch.tensor(sizes, dtype=torch.int64, device="cuda")
        xs = torch.rand(M, kb, device="cuda") * 0.01 + 1e-3
        ws = torch.rand(E, kb, N // 128, device="cuda") * 0.01 + 1e-3
        sets = [(xq, wq, xs, ws, ms)]

        def op(*a):
            return torch.ops.mslk.f8f8bf16_groupwise_grouped(*a)

        ref = op(*sets[0])

        def timer(row=None, raster=None, sw=None):
            def run():
                with env_var("MSLK_FP8_BLOCKWISE_GROUPED_CONFIG", row), env_var("MSLK_GEMM_RASTER", raster), \
                        env_var("MSLK_GEMM_SWIZZLE", sw):
                    assert torch.equal(op(*sets[0]), ref), (row, raster, sw)
                    return time_ms(op, sets)
            return run

        timers = {"default": timer()}
        for row in rows:
            for raster in ("m", "n"):
                for sw in swizzles:
                    timers[f"row{row} {raster}{sw}"] = timer(str(row), raster, sw)
        times = time_rotated_ms(timers, rounds=walk_rounds)
        best = min(times, key=times.get)
        print(f"E {E} x {tpe} N {N} K {K} {'skewed' if skewed else 'uniform'}: best {best} {times[best] * 1e3:.1f} us; "
              + ", ".join(f"{k} {v * 1e3:.1f}" for k, v in times.items()), flush=True)
        del sets, xq, wq
        torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("results_fp8_blockwise.md"))
    ap.add_argument("--ms", type=str, default=",".join(map(str, MS)))
    ap.add_argument("--grouped", action="store_true", help="also the grouped form")
    ap.add_argument("--grouped-only", action="store_true", help="only the grouped form")
    ap.add_argument("--walks", action="store_true", help="only the grouped form's rows x tile walks (prints)")
    ap.add_argument("--walk-rows", type=str, default="", help="--walks: only these rows (comma list)")
    ap.add_argument("--walk-e", type=str, default="", help="--walks: only these expert counts (comma list)")
    ap.add_argument("--walk-swizzles", type=str, default="1,2,8", help="--walks: swizzles to try")
    ap.add_argument("--walk-rounds", type=int, default=3, help="--walks: round-robin rounds (best kept)")
    args = ap.parse_args()
    if args.walks:
        ints = lambda v: [int(x) for x in v.split(",")] if v else None  # noqa: E731
        walk_sweep(ints(args.walk_rows), ints(args.walk_e), tuple(args.walk_swizzles.split(",")), args.walk_rounds)
        return
    if not args.grouped_only:
        bw = copy_bandwidth_tbs() * 1e12
        rows = dense_rows([int(m) for m in args.ms.split(",")], bw)
        write_results(args.out, "FP8 groupwise GEMM: mslk f8f8bf16_groupwise vs torch._scaled_mm blockwise (cuBLAS)",
                      ["M", "N", "K", "mslk us", "mslk TFLOP/s", "cuBLAS us", "cuBLAS TFLOP/s", "speedup",
                       "weight-read floor us", "mslk / floor", "mslk CUTLASS us", "max rel diff"], rows,
                      notes="BF16 output; 1 x 128 activation groups, 128 x 128 weight blocks on both sides; "
                      f"floor = N*K bytes at the measured copy rate, {bw / 1e12:.2f} TB/s. At M <= 16 mslk runs "
                      "its decode kernel; 'mslk CUTLASS' is its CUTLASS kernel on the same calls.")
        print(f"wrote {args.out}")
    if args.grouped or args.grouped_only:
        g = grouped_rows()
        out = args.out.with_name(args.out.stem + "_grouped.md")
        write_results(out, "FP8 groupwise grouped GEMM: f8f8bf16_groupwise_grouped vs a loop of cuBLAS blockwise "
                      "calls and mslk's rowwise grouped kernel",
                      ["E", "tokens/expert", "N", "K", "routing", "mslk us", "mslk TFLOP/s", "cuBLAS loop us",
                       "speedup vs loop", "rowwise grouped us", "mslk / rowwise", "mslk host-path us",
                       "mslk wgmma us", "wgmma vs loop", "wgmma max abs diff vs mslk", "max rel diff vs loop"], g,
                      notes="XQ [E*m, K] @ WQ[g]^T, 1 x 128 activation groups, 128 x 128 weight blocks, BF16 "
                      "out; skewed: half the tokens on expert 0 (the BF16 grouped table's shapes and routing). "
                      "mslk: the default pick, sizes on the GPU (mslk's wgmma kernel at up to 128 rows a group on "
                      "average, else the CUTLASS grouped kernel); host path: "
                      "MSLK_FP8_GROUPED_KERNEL=host, one GEMM a group; wgmma: mslk's own kernel "
                      f"(MSLK_FP8_BLOCKWISE_GROUPED_CONFIG={WGMMA_ROW}). 'mslk / rowwise' < 1.15 is the bar.")
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
