"""Every row of the Hopper attention kernel's tile table (csrc/attention/kernels/
fmha_fwd_sm90_configs.h, forced with MSLK_FMHA_SM90_CFG) on the benchmark's shapes of its head dim,
with the default row and cuDNN in the same run. Kept apart from bench_fmha_fwd.py: a candidate
row that has never run on a GPU may fail, and must not take the main table with it.
Prints and writes (--out) TFLOP/s per row and each row's max abs difference to cuDNN.
"""

from __future__ import annotations

import argparse
import contextlib
import re
from pathlib import Path

import torch
from torch.nn.attention import SDPBackend

import mslk  # noqa: F401
from bench.attention.bench_fmha_fwd import SHAPES, make, ours_fn, peer_fn
from bench.common import copies_to_exceed_l2, env_var, time_ms, write_results

CONFIGS_H = Path(__file__).resolve().parents[2] / "csrc/attention/kernels/fmha_fwd_sm90_configs.h"


def tile_rows():
    """Every row of kTileCfgs: (d, bn, stages, pingpong, persistent, wgs)."""
    return [r[:6] for r in _rows()]


def bias_rows():
    """Indices of the rows for problems with a tensor bias (their seventh field)."""
    return [i for i, r in enumerate(_rows()) if r[6]]


def _rows():
    body = CONFIGS_H.read_text().split("kTileCfgs[] = {")[1].split("};")[0]
    rows = re.findall(r"\{(\d+), (\d+), (\d+), (\d+), (\d+), (\d+)(?:, (\d+))?\}", body)
    return [tuple(int(x or 0) for x in m) for m in rows]


def candidate_rows():
    """Row indices that are not their head dim's default (the first row of a head dim), bias rows
    aside (they run only problems with a tensor bias)."""
    rows, bias = tile_rows(), bias_rows()
    return [i for i, r in enumerate(rows) if any(x[0] == r[0] for x in rows[:i]) and i not in bias]


L2_MIB = [0, 8, 16, 24, 40]  # MSLK_FMHA_SM90_L2_MIB values timed on the default row (kL2SectionMiB: 16)
PASSES = 2  # interleaved timing passes over every variant


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("results_tune_fmha_sm90.md"))
    args = ap.parse_args()
    rows_cfg = tile_rows()
    table = []
    for B, H, S, D, causal in SHAPES:
        mine = [(i, r) for i, r in enumerate(rows_cfg) if r[0] == D and i not in bias_rows()]
        sets = [make(B, H, S, D) for _ in range(copies_to_exceed_l2(3 * B * H * S * D * 2))]
        flops = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)
        tf = lambda ms: flops / (ms * 1e-3) / 1e12  # noqa: E731
        cudnn = peer_fn(SDPBackend.CUDNN_ATTENTION, causal)
        ref = cudnn(*sets[0]).transpose(1, 2).float()
        # (label, env) of each variant: every row of this head dim, then the dispatch default with
        # L2 sections of other sizes (0: one section, the old order)
        variants = []
        for i, (d, bn, st, pp, pers, wgs) in mine:
            name = f"row {i}: BN{bn} x{st}{'' if pers else ' non-persistent'}{'' if wgs == 2 else f' {wgs} WGs'}"
            variants.append((name, {"MSLK_FMHA_SM90_CFG": str(i)}))
        variants += [(f"L2 {mib} MiB", {"MSLK_FMHA_SM90_L2_MIB": str(mib)}) for mib in L2_MIB]
        # Two interleaved passes: the same kernel has timed 8-12% apart within one run, so a
        # decision needs both numbers (shown as "low-high").
        times = {name: [] for name, _ in variants + [("cuDNN", {})]}
        notes = {}
        for _ in range(PASSES):
            times["cuDNN"].append(tf(time_ms(cudnn, sets)))
            with env_var("MSLK_FMHA_KERNEL", "sm90"):
                for name, env in variants:
                    if name in notes and notes[name].startswith("failed"):
                        continue
                    try:
                        with contextlib.ExitStack() as stack:
                            for k, v in env.items():
                                stack.enter_context(env_var(k, v))
                            f = ours_fn(causal)
                            if name not in notes:
                                out, _ = f(*sets[0])
                                notes[name] = f"({(out.float() - ref).abs().max().item():.0e})"
                            times[name].append(tf(time_ms(f, sets)))
                    except RuntimeError as e:
                        notes[name] = f"failed: {str(e).splitlines()[0][:80]}"
        span = lambda v: f"{min(v):.0f}-{max(v):.0f}" if v else "-"  # noqa: E731
        cells = [f"{name} {span(times[name])} {notes.get(name, '')}".rstrip() for name, _ in variants]
        table.append([B, H, S, D, causal, span(times["cuDNN"]), "; ".join(cells)])
        print(" | ".join(map(str, table[-1])), flush=True)
        del sets
        torch.cuda.empty_cache()
    write_results(args.out, "Hopper attention kernel: every tile row (TFLOP/s low-high of two passes, max abs diff vs cuDNN)",
                  ["B", "H", "S", "D", "causal", "cuDNN TFLOP/s", "rows"], table,
                  notes="bf16; MSLK_FMHA_SM90_CFG forces a row of fmha_fwd_sm90_configs.h; the first row of a "
                        "head dim is its default. 'L2 n MiB': the default row with MSLK_FMHA_SM90_L2_MIB=n "
                        "(K/V bytes per work-tile section; 0: every lane in one section). Each variant timed in two "
                        "interleaved passes.")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
