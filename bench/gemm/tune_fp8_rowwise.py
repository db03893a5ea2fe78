"""Times every kernel choice of f8f8bf16_rowwise on the benchmark shape grid, for the bucket table.

For each (M, N, K): every CUTLASS row of fp8_rowwise_configs.h (forced with
MSLK_FP8_GEMM_KERNEL=cutlass MSLK_FP8_ROWWISE_TILE=<row>), the decode kernel (skinny, M <= 64)
and torch._scaled_mm, with fast accumulation. Writes JSON (--json) that
tools/gemm/regen_fp8_buckets.py turns into the MSLK_FP8_ROWWISE_BUCKETS table, and a markdown
table (--out). Rows of the other accumulation mode share the tile and are not timed twice.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path

import torch

import mslk  # noqa: F401
from bench.common import copies_to_exceed_l2, time_ms, write_results
from bench.gemm.bench_fp8_rowwise import MS, NKS, make, ours, peer

CONFIGS_H = Path(__file__).resolve().parents[2] / "csrc/gemm/kernels/fp8_rowwise_configs.h"


SWIZZLES = (1, 2, 4, 8)
# Rows also timed under wider swizzles at M >= 2048 (where a band of tiles outgrows L2).
SWIZZLED_ROWS, ROW_SWIZZLES = ("128x128x128_c2x1_pp",), (4, 8)


def fast_rows():
    """(row id, tile name) of the fast-accumulation rows of the config table."""
    rows = []
    for m in re.finditer(r"X\((\d+),\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+)\)",
                         CONFIGS_H.read_text()):
        i, tm, tn, tk, cm, cn, coop, fast, swap = map(int, m.groups())
        if fast:  # swap rows (out^T = W X^T) are named apart: regen_fp8_buckets.py never buckets them
            rows.append((i, f"{tm}x{tn}x{tk}_c{cm}x{cn}_{'coop' if coop else 'pp'}{'_swap' if swap else ''}"))
    return rows


def timed(env, fn, sets):
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        fn(*sets[0])
        return time_ms(fn, sets)
    except RuntimeError as e:  # a forced kernel that cannot take the shape
        print(f"  {env}: {str(e).splitlines()[0][:120]}")
        return float("nan")
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path, default=Path(__file__).with_name("tune_fp8_rowwise_points.json"))
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("results_tune_fp8_rowwise.md"))
    ap.add_argument("--ms", type=str, default=",".join(map(str, MS)))
    args = ap.parse_args()
    rows_cfg = fast_rows()
    points, table = [], []
    extra = [f"{n} sw{sw}" for _, n in rows_cfg if n in SWIZZLED_ROWS for sw in ROW_SWIZZLES]

    def flush():  # after every shape: a candidate row that kills the CUDA context loses only the rest
        args.json.write_text(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                                         "configs": [n for _, n in rows_cfg], "points": points}, indent=1))
        header = (["M", "N", "K", "_scaled_mm us"] + [n for _, n in rows_cfg] + ["skinny us"]
                  + [f"auto, swizzle {sw}" for sw in SWIZZLES] + extra + ["best", "best vs _scaled_mm"])
        write_results(args.out, "FP8 rowwise GEMM tuning: every kernel choice, us (fast accumulation)", header, table,
                      notes="Regenerate the bucket table: python3 tools/gemm/regen_fp8_buckets.py " + str(args.json))

    for N, K in NKS:
        for M in [int(m) for m in args.ms.split(",")]:
            sets = [make(M, N, K) for _ in range(copies_to_exceed_l2(M * K + N * K + 2 * M * N))]
            t = {"peer": time_ms(peer, sets)}
            for rid, name in rows_cfg:
                t[name] = timed({"MSLK_FP8_GEMM_KERNEL": "cutlass", "MSLK_FP8_ROWWISE_TILE": str(rid)}, ours, sets)
            if M <= 64:
                t["skinny"] = timed({"MSLK_FP8_GEMM_KERNEL": "skinny"}, ours, sets)
            if M >= 512:  # the bucket's kernel under each tile-scheduler swizzle (cutlass_swizzle.h)
                for sw in SWIZZLES:
                    t[f"swizzle {sw}"] = timed({"MSLK_GEMM_SWIZZLE": str(sw)}, ours, sets)
            if M >= 2048:
                for rid, name in rows_cfg:
                    for sw in ROW_SWIZZLES if name in SWIZZLED_ROWS else ():
                        t[f"{name} sw{sw}"] = timed({"MSLK_GEMM_SWIZZLE": str(sw), "MSLK_FP8_GEMM_KERNEL": "cutlass",
                                                     "MSLK_FP8_ROWWISE_TILE": str(rid)}, ours, sets)
            points.append({"M": M, "N": N, "K": K, "us": {k: v * 1e3 for k, v in t.items()}})
            best = min((v, k) for k, v in t.items() if k != "peer" and v == v)
            table.append([M, N, K, f"{t['peer'] * 1e3:.1f}"] + [f"{t.get(n, float('nan')) * 1e3:.1f}" for _, n in rows_cfg]
                         + [f"{t.get('skinny', float('nan')) * 1e3:.1f}"]
                         + [f"{t.get(f'swizzle {sw}', float('nan')) * 1e3:.1f}" for sw in SWIZZLES]
                         + [f"{t.get(c, float('nan')) * 1e3:.1f}" for c in extra]
                         + [best[1], f"{t['peer'] / best[0]:.2f}x"])
            print(" | ".join(map(str, table[-1])), flush=True)
            flush()
            del sets
        torch.cuda.empty_cache()
    print(f"wrote {args.json} and {args.out}")


if __name__ == "__main__":
    main()
