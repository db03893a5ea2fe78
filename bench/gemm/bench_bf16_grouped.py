"""bf16bf16bf16_grouped_stacked (mslk) vs torch._grouped_mm and vs a loop of torch.mm, same inputs.

MoE shapes (E experts, tokens per expert, N, K); plus a skewed routing (half the tokens on one
expert, the rest spread). Prints and writes (--out) time, TFLOP/s and the ratios; checks the
mslk result against torch._grouped_mm once per shape (max relative difference).

"mslk" is the op as users get it (MSLK_BF16_GROUPED_KERNEL=auto: the CUTLASS sm90 ptr-array
grouped GEMMs); every CUTLASS row of the config table is also timed, forced one at a time, as the
data for the buckets in bf16_grouped_configs.h (and the default row under swizzle 2 and 8). --simt also times the SIMT fallback (slow: ~30x).
Passes: fwd, dgrad and wgrad (each against its torch._grouped_mm form and a torch.mm loop).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

import mslk  # noqa: F401
from bench.common import copies_to_exceed_l2, env_var, time_ms, time_pair_ms, write_results

SHAPES = [(8, 2048, 4096, 7168), (16, 512, 2048, 5120), (128, 64, 2048, 7168)]
CONFIGS_H = Path(__file__).resolve().parents[2] / "csrc/gemm/kernels/bf16_grouped_configs.h"


def config_rows():
    """(row id, name) of every CUTLASS row of bf16_grouped_configs.h."""
    import re

    return [(int(m[0]), f"{m[1]}x{m[2]}x{m[3]}_c{m[4]}x{m[5]}_{'coop' if m[6] == '1' else 'pp'}")
            for m in re.findall(r"X\((\d+),\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+)\)",
                                CONFIGS_H.read_text())]


def sizes_for(E, m, skewed):
    if not skewed:
        return [m] * E
    total = E * m
    big = total // 2
    rest = total - big
    s = [big] + [rest // (E - 1)] * (E - 1)
    s[-1] += rest - sum(s[1:])
    return s


def make(sizes, N, K):
    T = sum(sizes)
    x = torch.randn(T, K, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(len(sizes), N, K, device="cuda", dtype=torch.bfloat16) * 0.02
    ms = torch.tensor(sizes, dtype=torch.int32, device="cuda")
    offs = torch.cumsum(ms, 0, dtype=torch.int32)
    return x, w, ms, offs, list(sizes)


def ours(x, w, ms, offs, sizes):
    return torch.ops.mslk.bf16bf16bf16_grouped_stacked(x, w, ms)


ENV = "MSLK_BF16_GROUPED_KERNEL"


def cutlass_path(on):
    """Selects the mslk kernel path for the calls inside (the op reads the variable per call)."""
    return env_var(ENV, "cutlass" if on else "simt")


def grouped_mm(x, w, ms, offs, sizes):
    return torch._grouped_mm(x, w.transpose(-2, -1), offs=offs, out_dtype=torch.bfloat16)


# dgrad: dX [T, K] = dY_g [m, N] @ W[g] [N, K] (x holds dY [T, N] in these sets)
def ours_dgrad(dy, w, ms, offs, sizes):
    return torch.ops.mslk.bf16bf16bf16_grouped_grad(dy, w, ms)


def grouped_mm_dgrad(dy, w, ms, offs, sizes):
    return torch._grouped_mm(dy, w, offs=offs, out_dtype=torch.bfloat16)


def mm_loop_dgrad(dy, w, ms, offs, sizes):
    out = torch.empty(dy.shape[0], w.shape[2], dtype=dy.dtype, device=dy.device)
    r = 0
    for g, m in enumerate(sizes):
        if m:
            torch.mm(dy[r:r + m], w[g], out=out[r:r + m])
        r += m
    return out


def make_dgrad(sizes, N, K):
    x, w, ms, offs, sizes = make(sizes, N, K)
    return torch.randn(x.shape[0], N, device="cuda", dtype=torch.bfloat16), w, ms, offs, sizes


# wgrad: dW [E, N, K], dW[g] = dY_g^T [N, m] @ X_g [m, K] (sets hold dY [T, N] and X [T, K])
def make_wgrad(sizes, N, K):
    x, w, ms, offs, sizes = make(sizes, N, K)
    return torch.randn(x.shape[0], N, device="cuda", dtype=torch.bfloat16), x, ms, offs, sizes


def ours_wgrad(dy, x, ms, offs, sizes):
    return torch.ops.mslk.bf16bf16bf16_grouped_wgrad(dy, x, ms)


def grouped_mm_wgrad(dy, x, ms, offs, sizes):
    return torch._grouped_mm(dy.t(), x, offs=offs, out_dtype=torch.bfloat16)


def mm_loop_wgrad(dy, x, ms, offs, sizes):
    out = torch.empty(len(sizes), dy.shape[1], x.shape[1], dtype=dy.dtype, device=dy.device)
    r = 0
    for g, m in enumerate(sizes):
        torch.mm(dy[r:r + m].t(), x[r:r + m], out=out[g])
        r += m
    return out


PASSES = {  # name -> (make, mslk op, torch._grouped_mm form, torch.mm loop)
    "fwd": (make, None, grouped_mm, None),
    "dgrad": (make_dgrad, ours_dgrad, grouped_mm_dgrad, mm_loop_dgrad),
    "wgrad": (make_wgrad, ours_wgrad, grouped_mm_wgrad, mm_loop_wgrad),
}


def mm_loop(x, w, ms, offs, sizes):
    out = torch.empty(x.shape[0], w.shape[1], dtype=x.dtype, device=x.device)
    r = 0
    for g, m in enumerate(sizes):  # host-known sizes: the loop a model without grouped GEMM runs
        if m:
            torch.mm(x[r:r + m], w[g].t(), out=out[r:r + m])
        r += m
    return out


def tflops(flops, ms):
    return flops / (ms * 1e-3) / 1e12


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("results_bf16_grouped.md"))
    ap.add_argument("--simt", action="store_true", help="also time the SIMT fallback kernel")
    args = ap.parse_args()
    rows = []

    def flush():  # after every row: a candidate tile that kills the CUDA context loses only the rest
        header = ["pass", "E", "tokens/expert", "N", "K", "routing", "mslk us", "mslk TFLOP/s", "_grouped_mm TFLOP/s",
                  "mm loop TFLOP/s", "mslk vs _grouped_mm", "mslk vs mm loop", "max rel diff vs _grouped_mm",
                  "best CUTLASS row", "best row TFLOP/s", "SIMT fallback slower by", "every row, us"]
        write_results(args.out, "BF16 grouped GEMM (stacked): mslk vs torch._grouped_mm vs a torch.mm loop", header,
                      rows, notes="fwd: X [E*m, K] @ W[g]^T, W [E, N, K]; dgrad: dY [E*m, N] @ W[g]; skewed: half the tokens on expert 0. "
                                  "Ratios > 1: mslk faster. mslk: the default path (CUTLASS sm90 ptr-array grouped GEMM, "
                                  "row chosen by the buckets of bf16_grouped_configs.h).")

    for pass_, (mk, op, gmm, loop) in PASSES.items():
        op, loop = op or ours, loop or mm_loop
        for E, m, N, K in SHAPES:
            for skewed in (False, True):
                sizes = sizes_for(E, m, skewed)
                T = sum(sizes)
                n = copies_to_exceed_l2(2 * (T * K + E * N * K + T * N))
                sets = [mk(sizes, N, K) for _ in range(n)]
                a = op(*sets[0]).float()
                try:
                    b = gmm(*sets[0]).float()
                    rel = ((a - b).abs().max() / b.abs().max().clamp(min=1e-30)).item()
                except RuntimeError as e:
                    print(f"torch._grouped_mm refused: {e}")
                    rel = float("nan")
                t_ours, t_gmm = time_pair_ms(op, gmm, sets)  # alternating; nan where _grouped_mm refused
                t_loop = time_ms(loop, sets, reps=7)
                t_simt = float("nan")
                if args.simt:
                    with cutlass_path(False):
                        t_simt = time_ms(op, sets, reps=3)
                per_cfg = {}  # every CUTLASS row, forced (MSLK_BF16_GROUPED_CONFIG): data for the buckets
                for rid, name in (config_rows() if pass_ != "wgrad" else []):  # wgrad: its own table
                    with env_var("MSLK_BF16_GROUPED_CONFIG", str(rid)):
                        per_cfg[name] = time_ms(op, sets)
                per_cfg = per_cfg or {"(bf16_wgrad_configs.h)": t_ours}
                for sw in (2, 8):  # the default row under a wider tile-scheduler swizzle (cutlass_swizzle.h)
                    with env_var("MSLK_GEMM_SWIZZLE", str(sw)):
                        per_cfg[f"default_swizzle{sw}"] = time_ms(op, sets)
                best = min(per_cfg, key=per_cfg.get)
                flops = 2.0 * T * N * K
                rows.append([pass_, E, m, N, K, "skewed" if skewed else "uniform", f"{t_ours * 1e3:.0f}",
                             f"{tflops(flops, t_ours):.0f}", f"{tflops(flops, t_gmm):.0f}",
                             f"{tflops(flops, t_loop):.0f}", f"{t_gmm / t_ours:.2f}x", f"{t_loop / t_ours:.2f}x",
                             f"{rel:.1e}", best, f"{tflops(flops, per_cfg[best]):.0f}",
                             f"{t_simt / t_ours:.1f}x" if args.simt else "-",
                             " ".join(f"{n}:{v * 1e3:.0f}" for n, v in per_cfg.items())])
                print(" | ".join(str(c) for c in rows[-1]), flush=True)
                flush()
                del sets
                torch.cuda.empty_cache()
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
