"""f8f8bf16_rowwise_grouped_stacked (mslk) vs torch._scaled_grouped_mm and vs a loop of
torch._scaled_mm calls, same FP8 inputs, same run.

MoE shapes (E experts, tokens per expert, N, K) plus a skewed routing (half the tokens on one
expert). Both mslk paths are timed: the device-side CUTLASS grouped kernel (the default, no
host sync) and the per-group host path (MSLK_FP8_GROUPED_KERNEL=host, read per call). Checks
each result against the loop once per shape (max relative difference). Target: the
grouped form beats the loop at every group count.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

import mslk  # noqa: F401
from bench.common import copies_to_exceed_l2, env_var, time_ms, write_results
from bench.gemm.bench_bf16_grouped import SHAPES, sizes_for

FP8 = torch.float8_e4m3fn
ENV = "MSLK_FP8_GROUPED_KERNEL"


def make(sizes, N, K):
    T, E = sum(sizes), len(sizes)
    xq = (torch.randn(T, K, device="cuda") * 4).to(FP8)
    wq = (torch.randn(E, N, K, device="cuda") * 4).to(FP8)
    xs = torch.rand(T, device="cuda") * 0.01 + 1e-3
    ws = torch.rand(E, N, device="cuda") * 0.01 + 1e-3
    ms = torch.tensor(sizes, dtype=torch.int64, device="cuda")
    offs = torch.cumsum(ms, 0).to(torch.int32)
    return xq, wq, xs, ws, ms, offs, list(sizes)


def ours(xq, wq, xs, ws, ms, offs, sizes):
    return torch.ops.mslk.f8f8bf16_rowwise_grouped_stacked(xq, wq, xs, ws, ms)


def as_lists(xq, wq, xs, ws, sizes):
    """The list form's arguments (views, made once outside the timing)."""
    X, W, XS, WS, r = [], [], [], [], 0
    for g, m in enumerate(sizes):
        X.append(xq[r:r + m]), W.append(wq[g]), XS.append(xs[r:r + m]), WS.append(ws[g])
        r += m
    return X, W, XS, WS


def ours_list(X, W, XS, WS):
    return torch.ops.mslk.f8f8bf16_rowwise_grouped(X, W, XS, WS)


def host_path(on):
    return env_var(ENV, "host" if on else None)


def scaled_grouped_mm(xq, wq, xs, ws, ms, offs, sizes):
    return torch._scaled_grouped_mm(xq, wq.transpose(-2, -1), xs, ws, offs=offs, out_dtype=torch.bfloat16,
                                    use_fast_accum=True)


def padded_groups(xq, wq, xs, ws, ms, offs, sizes):
    """The loop's inputs, made once outside the timing: cuBLAS's rowwise-scaled FP8 GEMM refuses
    row counts that are not multiples of 16 (CUBLAS_STATUS_NOT_SUPPORTED at m = 1170), so each
    group's rows and scales are copied into a buffer padded to a multiple of 16, as a model
    without a grouped GEMM would have to."""
    groups, r = [], 0
    for m in sizes:
        mp = -(-m // 16) * 16
        xg = torch.zeros(mp, xq.shape[1], dtype=torch.uint8, device=xq.device).view(xq.dtype)
        sg = torch.ones(mp, 1, device=xq.device)
        xg[:m], sg[:m, 0] = xq[r:r + m], xs[r:r + m]
        groups.append((xg, sg, m))
        r += m
    return groups, wq, ws


def mm_loop(groups, wq, ws):
    out = torch.empty(sum(m for _, _, m in groups), wq.shape[1], dtype=torch.bfloat16, device=wq.device)
    r = 0
    for g, (xg, sg, m) in enumerate(groups):  # host-known sizes
        if m:
            out[r:r + m] = torch._scaled_mm(xg, wq[g].t(), scale_a=sg, scale_b=ws[g][None, :],
                                            out_dtype=torch.bfloat16, use_fast_accum=True)[:m]
        r += m
    return out


def tflops(flops, ms):
    return flops / (ms * 1e-3) / 1e12


def rel(a, b):
    return ((a.float() - b.float()).abs().max() / b.float().abs().max().clamp(min=1e-30)).item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("results_fp8_grouped.md"))
    args = ap.parse_args()
    rows = []
    for E, m, N, K in SHAPES:
        for skewed in (False, True):
            sizes = sizes_for(E, m, skewed)
            T = sum(sizes)
            n = copies_to_exceed_l2(T * K + E * N * K + 2 * T * N)
            sets = [make(sizes, N, K) for _ in range(n)]
            loop_sets = [padded_groups(*st) for st in sets]
            want = mm_loop(*loop_sets[0])
            with host_path(False):
                r_dev = rel(ours(*sets[0]), want)
                t_dev = time_ms(ours, sets)
            with host_path(True):
                r_host = rel(ours(*sets[0]), want)
                t_host = time_ms(ours, sets, reps=7)
            lists = [as_lists(*st[:4], st[6]) for st in sets]
            t_list = time_ms(ours_list, lists)
            try:
                r_sgm = rel(scaled_grouped_mm(*sets[0]), want)
                t_sgm = time_ms(scaled_grouped_mm, sets)
            except (RuntimeError, AttributeError) as e:
                print(f"torch._scaled_grouped_mm refused: {e}")
                r_sgm, t_sgm = float("nan"), float("nan")
            t_loop = time_ms(mm_loop, loop_sets, reps=7)
            flops = 2.0 * T * N * K
            rows.append([E, m, N, K, "skewed" if skewed else "uniform", f"{t_dev * 1e3:.0f}",
                         f"{tflops(flops, t_dev):.0f}", f"{tflops(flops, t_list):.0f}", f"{tflops(flops, t_host):.0f}",
                         f"{tflops(flops, t_sgm):.0f}", f"{tflops(flops, t_loop):.0f}", f"{t_loop / t_dev:.2f}x",
                         f"{t_sgm / t_dev:.2f}x", f"{t_host / t_dev:.2f}x", f"{r_dev:.1e}", f"{r_host:.1e}",
                         f"{r_sgm:.1e}"])
            print(" | ".join(str(c) for c in rows[-1]), flush=True)
            del sets, lists, loop_sets
            torch.cuda.empty_cache()
    header = ["E", "tokens/expert", "N", "K", "routing", "mslk us", "mslk TFLOP/s", "list form TFLOP/s",
              "mslk host-path TFLOP/s",
              "_scaled_grouped_mm TFLOP/s", "_scaled_mm loop TFLOP/s", "vs loop", "vs _scaled_grouped_mm",
              "vs host path", "rel diff", "host rel diff", "_scaled_grouped_mm rel diff"]
    write_results(args.out, "FP8 rowwise grouped GEMM (stacked): mslk vs torch._scaled_grouped_mm vs a "
                  "torch._scaled_mm loop", header, rows,
                  notes="XQ [E*m, K] @ WQ[g]^T with row scales, BF16 out, fast accumulation. Ratios > 1: mslk "
                        "faster. list form: f8f8bf16_rowwise_grouped on per-expert views. mslk: device-side CUTLASS grouped kernel; host path: MSLK_FP8_GROUPED_KERNEL=host.")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
