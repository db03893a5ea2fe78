"""Rewrites MSLK_FP8_ROWWISE_BUCKETS (and MSLK_FP8_SKINNY_AUTO_MAX_M) in
csrc/gemm/kernels/fp8_rowwise_buckets.h from a bench/gemm/tune_fp8_rowwise.py JSON.

For every M of the sweep, the CUTLASS tile with the best geometric-mean time over the (N, K)
shapes wins; consecutive Ms with one winner merge into one bucket, the last one unbounded. It
writes M-only buckets (min_k = min_waves = 0, swizzle 1): refinements by K and by waves of tiles are
hand edits made from the same table (see the header), to redo after a regeneration. The
decode kernel keeps M up to the largest M (<= 64) where it beats every tile on geometric mean.
Usage: python3 tools/gemm/regen_fp8_buckets.py bench/gemm/tune_fp8_rowwise.json [--dry-run]
"""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path

CONFIGS_H = Path(__file__).resolve().parents[2] / "csrc/gemm/kernels/fp8_rowwise_buckets.h"
TILE = re.compile(r"(\d+)x(\d+)x(\d+)_c(\d+)x(\d+)_(coop|pp)")


def geomean(xs):
    xs = [x for x in xs if x == x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("inf")


def winners(data):
    """{M: (best tile name, skinny beats every tile)} from the tuning points."""
    by_m = {}
    for p in data["points"]:
        by_m.setdefault(p["M"], []).append(p["us"])
    out = {}
    for m, runs in sorted(by_m.items()):
        tiles = [c for c in data["configs"] if TILE.fullmatch(c)]  # not the swap rows (MSLK_FP8_SWAP_AB_MAX_M)
        g = {c: geomean([r.get(c, float("nan")) for r in runs]) for c in tiles}
        best = min(g, key=g.get)
        skinny = geomean([r.get("skinny", float("nan")) for r in runs]) < g[best]
        out[m] = (best, skinny)
    return out


def buckets(win):
    """[(max_m, tile name)], consecutive Ms with one winner merged, the last one max_m = -1."""
    ms = sorted(win)
    res = []
    for m in ms:
        if res and res[-1][1] == win[m][0]:
            res[-1] = (m, win[m][0])
        else:
            res.append((m, win[m][0]))
    res[-1] = (-1, res[-1][1])
    return res


def render(bk):
    lines = ["#define MSLK_FP8_ROWWISE_BUCKETS(B) \\"]
    for i, (max_m, name) in enumerate(bk):
        tm, tn, tk, cm, cn, sched = TILE.fullmatch(name).groups()
        end = " \\" if i + 1 < len(bk) else ""
        lines.append(f"  B({max_m}, 0, 0, {tm}, {tn}, {tk}, {cm}, {cn}, {int(sched == 'coop')}, 1){end}")
    return "\n".join(lines) + "\n"


def skinny_max_m(win):
    m = 0
    for k in sorted(win):
        if k > 64 or not win[k][1]:
            break
        m = k
    return m


def rewrite(text, bk, smax):
    begin, end = "// BEGIN GENERATED BUCKETS\n", "// END GENERATED BUCKETS\n"
    i, j = text.index(begin) + len(begin), text.index(end)
    text = text[:i] + render(bk) + text[j:]
    return re.sub(r"#define MSLK_FP8_SKINNY_AUTO_MAX_M \d+", f"#define MSLK_FP8_SKINNY_AUTO_MAX_M {smax}", text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("json", type=Path)
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args()
    data = json.loads(args.json.read_text())
    win = winners(data)
    bk, smax = buckets(win), skinny_max_m(win)
    text = rewrite(CONFIGS_H.read_text(), bk, smax)
    print(render(bk) + f"MSLK_FP8_SKINNY_AUTO_MAX_M {smax}  (from {data.get('device')})")
    if not args.dry_run:
        CONFIGS_H.write_text(text)
        print(f"rewrote {CONFIGS_H}")


if __name__ == "__main__":
    main()
