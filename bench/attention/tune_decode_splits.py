"""Split-count sweep of the split-K decode kernel: every fixed FwOp_S* of triton_splitk against the
heuristic (FwOp, NUM_SPLITS = 0), on bench_decode's shapes; microseconds and K/V TB/s per split
count, the best marked. Feeds the split table in csrc/attention/kernels/fmha_decode.cu.

    python3 -m bench.attention.tune_decode_splits [--out bench/attention/results_tune_decode_splits.md]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from bench.attention.bench_decode import SHAPES, make, mslk_fn
from bench.common import copies_to_exceed_l2, time_ms, write_results
from mslk.attention.fmha import triton_splitk

SPLITS = [1, 2, 4, 8, 16, 32, 64, 128]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("results_tune_decode_splits.md"))
    args = ap.parse_args()
    ops = {"heuristic": triton_splitk.FwOp, **{f"S{n}": triton_splitk.FwOp_Map[n] for n in SPLITS}}
    rows = []
    for B, Hq, Hkv, Mkv, D in SHAPES:
        kv_bytes = 2 * B * Mkv * Hkv * D * 2
        sets = [make(B, Hq, Hkv, Mkv, D) for _ in range(copies_to_exceed_l2(kv_bytes))]
        times = {}
        for name, op in ops.items():
            try:
                times[name] = time_ms(mslk_fn(op), sets)
            except (RuntimeError, ValueError, NotImplementedError) as e:
                print(f"{name} refused: {str(e).splitlines()[0]}")
                times[name] = float("nan")
        best = min((t, n) for n, t in times.items() if n != "heuristic" and t == t)[1]
        cells = [f"{times[n] * 1e3:.1f} ({kv_bytes / (times[n] * 1e-3) / 1e12:.2f})" + (" *" if n == best else "")
                 for n in ops]
        rows.append([B, Hq, Hkv, Mkv, D, *cells])
        print(" | ".join(str(c) for c in rows[-1]), flush=True)
        del sets
        torch.cuda.empty_cache()
    write_results(args.out, "Split-K decode: split-count sweep", ["B", "Hq", "Hkv", "keys", "D", *ops], rows,
                  notes="bf16, 1 query per sequence; each cell: us (K/V TB/s); * marks the fastest fixed count.")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
