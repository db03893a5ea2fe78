"""Device time a call (CUDA graphs, weight never L2-resident) of bf16i4bf16_rowwise / f8i4bf16_rowwise
at decode M, under whatever MSLK_INT4_DECODE* environment the caller sets; `--once` runs one call
of the first shape (for Nsight Compute). Usage: python3 tools/profile/int4_decode_probe.py [--once]"""
import os
import sys

import torch

import mslk  # noqa: F401
from bench.common import copies_to_exceed_l2, time_graph_ms
from mslk.quantize.shuffle import int4_row_quantize_zp, pack_int4

SHAPES = [(1, 8192, 8192), (16, 8192, 8192), (1, 28672, 8192), (1, 8192, 28672)]


def sets(M, N, K, n):
    out = []
    for _ in range(n):
        w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
        q, s, z = int4_row_quantize_zp(w, 128)
        out.append((torch.randn(M, K, device="cuda", dtype=torch.bfloat16), pack_int4(q), s.bfloat16(), z.bfloat16()))
    return out


def main():
    op = torch.ops.mslk.bf16i4bf16_rowwise
    if "--once" in sys.argv:
        M, N, K = SHAPES[0]
        (a,) = sets(M, N, K, 1)
        for _ in range(3):
            op(*a)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("prof/int4")
        op(*a)
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
        return
    for M, N, K in SHAPES:
        n = copies_to_exceed_l2(N * K // 2 + 4 * (K // 128) * N)
        s = sets(M, N, K, n)
        t = min(time_graph_ms(op, s) for _ in range(3)) * 1e3
        line = f"M={M} N={N} K={K}: {t:.2f} us"
        if os.environ.get("PROBE_READ") == "1":  # a torch reduction over the same packed bytes
            r = min(time_graph_ms(lambda x, w, s, z: torch.amax(w.view(torch.int32)), s) for _ in range(3)) * 1e3
            line += f"; amax over the packed weight {r:.2f} us"
        print(line)


main()
