"""Interleaved A/B of BF16 grouped GEMM rows on the GPU: the default path, rows of
bf16_grouped_configs.h forced by MSLK_BF16_GROUPED_CONFIG, and torch._grouped_mm, each timed in
turn `--rounds` times inside one process, so the clock and power drift of a run hits all of them
alike (the benchmark times the rows one after another). Prints best / median us over the rounds
and each variant's ratio to torch._grouped_mm.

    python tools/gemm/ab_grouped.py --rows 4,6 --shapes 16x512x2048x5120 --passes fwd,dgrad
"""

from __future__ import annotations

import argparse
import statistics

import torch

import mslk  # noqa: F401
from bench.common import copies_to_exceed_l2, env_var, time_ms
from bench.gemm.bench_bf16_grouped import PASSES, config_rows, mm_loop, ours, sizes_for  # noqa: F401


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rows", default="", help="comma-separated row ids to force (default: every row)")
    ap.add_argument("--shapes", default="16x512x2048x5120", help="E x tokens/expert x N x K, comma-separated")
    ap.add_argument("--passes", default="fwd,dgrad")
    ap.add_argument("--routing", default="uniform,skewed")
    args = ap.parse_args()
    names = dict(config_rows())
    rows = [int(r) for r in args.rows.split(",")] if args.rows else sorted(names)
    for shape in args.shapes.split(","):
        E, m, N, K = (int(v) for v in shape.split("x"))
        for pass_ in args.passes.split(","):
            mk, op, gmm, _ = PASSES[pass_]
            op = op or ours
            for routing in args.routing.split(","):
                sizes = sizes_for(E, m, routing == "skewed")
                T = sum(sizes)
                sets = [mk(sizes, N, K) for _ in range(copies_to_exceed_l2(2 * (T * K + E * N * K + T * N)))]
                variants = {"default": (op, None), "_grouped_mm": (gmm, None)}
                variants.update({f"row {r} {names[r]}": (op, str(r)) for r in rows})
                got = {k: [] for k in variants}
                for _ in range(args.rounds):
                    for label, (fn, row) in variants.items():
                        with env_var("MSLK_BF16_GROUPED_CONFIG", row):
                            got[label].append(time_ms(fn, sets) * 1e3)
                ref = min(got["_grouped_mm"])
                for label, t in got.items():
                    print(f"{pass_:5s} E{E} m{m} N{N} K{K} {routing:8s} {label:32s} {min(t):7.1f} / "
                          f"{statistics.median(t):7.1f} us  (_grouped_mm / this {ref / min(t):.3f})", flush=True)
                del sets
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
