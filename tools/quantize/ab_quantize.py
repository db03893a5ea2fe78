"""Interleaved A/B of FP8 quantizer kernel schedules on the GPU (MSLK_FP8_SCHEDULE): every variant of a case is timed in turn, `--rounds` times, inside one process,
so the clock and power drift of a run hits all of them alike. Prints us and time / byte floor
(3 B an element against the copy bandwidth measured in the same run); best and median of rounds.

    python tools/quantize/ab_quantize.py --rounds 3
"""

from __future__ import annotations

import argparse
import contextlib
import statistics

import torch

import mslk  # noqa: F401
from bench.common import copies_to_exceed_l2, copy_bandwidth_tbs, env_var, time_ms
from mslk.quantize.triton import fp8_quantize as q

# case -> (call, variants: label -> {env var: value})
CASES = {
    "row": (lambda x: q.quantize_fp8_row(x), {
        "default": {},
        "staged": {"MSLK_FP8_SCHEDULE": "staged"},
        "oneshot": {"MSLK_FP8_SCHEDULE": "oneshot"},
        "team1": {"MSLK_FP8_ROW_TEAM": "1"},
        "team2": {"MSLK_FP8_ROW_TEAM": "2"},
        "team4": {"MSLK_FP8_ROW_TEAM": "4"},
    }),
    "block 256x256": (lambda x: q.quantize_fp8_block(x, 256, 256), {
        "default": {},
        "cluster": {"MSLK_FP8_SCHEDULE": "cluster"},
        "ring": {"MSLK_FP8_SCHEDULE": "ring"},
        "oneshot": {"MSLK_FP8_SCHEDULE": "oneshot"},
    }),
    "group 128": (lambda x: q.quantize_fp8_group(x, 128), {
        "default": {},
        "warp": {"MSLK_FP8_SCHEDULE": "warp"},
    }),
    "block 128x256": (lambda x: q.quantize_fp8_block(x, 128, 256), {  # 64 KB tiles: 2 ring chunks
        "default": {},
        "ring": {"MSLK_FP8_SCHEDULE": "ring"},
    }),
}
SHAPES = [(8192, 8192), (16384, 16384), (4096, 7168)]
KEYS = ("MSLK_FP8_SCHEDULE", "MSLK_FP8_ROW_TEAM")  # the switches a variant may set; the others are unset


@contextlib.contextmanager
def variant_env(env):
    with contextlib.ExitStack() as stack:
        for k in KEYS:
            stack.enter_context(env_var(k, env.get(k)))
        yield


def timed(fn, xs, env):
    with variant_env(env):
        return time_ms(fn, xs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cases", nargs="*", default=list(CASES))
    ap.add_argument("--shapes", default=",".join(f"{m}x{k}" for m, k in SHAPES), help="e.g. 2048x7168,8192x8192")
    ap.add_argument("--variants", default="", help="comma-separated labels to keep (default: all)")
    args = ap.parse_args()
    keep = set(args.variants.split(",")) if args.variants else None
    bw = copy_bandwidth_tbs()
    print(f"copy bandwidth {bw:.2f} TB/s; cells: best / median us over {args.rounds} rounds, (time / floor)")
    for M, K in (tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")):
        xs = [(torch.randn(M, K, device="cuda", dtype=torch.bfloat16),) for _ in range(copies_to_exceed_l2(M * K * 2))]
        floor_us = M * K * 3 / (bw * 1e12) * 1e6
        for case in args.cases:
            fn, variants = CASES[case]
            variants = {k: v for k, v in variants.items() if keep is None or k in keep}
            ref = fn(*xs[0])
            got = {k: [] for k in variants}
            for _ in range(args.rounds):
                for label, env in variants.items():
                    got[label].append(timed(fn, xs, env) * 1e3)
            for label, env in variants.items():  # every variant must give the default's bits
                with variant_env(env):
                    out = fn(*xs[0])
                same = all(torch.equal(a.view(torch.uint8) if a.dtype == torch.float8_e4m3fn else a,
                                       b.view(torch.uint8) if b.dtype == torch.float8_e4m3fn else b)
                           for a, b in zip(out, ref))
                t = got[label]
                print(f"{M}x{K} {case:14s} {label:16s} {min(t):7.1f} / {statistics.median(t):7.1f} us "
                      f"({min(t) / floor_us:.2f} / {statistics.median(t) / floor_us:.2f}){'' if same else '  OUTPUT DIFFERS'}",
                      flush=True)
        del xs
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
