"""INT4-weight GEMMs of mslk against torch, same weights, timed alternately in one run.

- bf16i4bf16_rowwise (group 128, bf16 scales and zeros) vs torch._weight_int4pack_mm (tinygemm,
  the weight converted once with torch._convert_weight_to_int4pack) and vs torch.mm over the BF16
  weight;
- f8i4bf16_rowwise on the same weight (FP8 activations, row scales), mslk only.

Per shape: time, ratios, and the weight-read floor: packed weight + scales + zeros bytes over the
device's copy bandwidth (bytes read + written per second, measured here), the least time any
kernel that reads the weight once can take. Input sets rotate so the weight is never L2-resident.
Prints and writes (--out) a markdown table and its JSON twin; tools/bench_charts.py draws charts.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

import mslk  # noqa: F401
from bench.common import copies_to_exceed_l2, copy_bandwidth_tbs, time_graph_ms, time_ms, write_results
from mslk.quantize.shuffle import int4_row_quantize_zp, pack_int4

MS = [1, 16, 64, 4096]
NKS = [(8192, 8192), (28672, 8192)]  # the second: a 117 MB packed weight
GROUP = 128
GRAPH_MAX_M = 64  # graph columns (device time) where launch and host time matter


def weight_set(N, K):
    w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
    q, s, z = int4_row_quantize_zp(w, GROUP)
    s, z = s.bfloat16(), z.bfloat16()
    wq = pack_int4(q)
    # tinygemm: unsigned nibbles q + 8, even k in the HIGH nibble, dequant (u - 8) * scale + zero
    u = (q.to(torch.int32) + 8)
    tiny = torch._convert_weight_to_int4pack((u[:, ::2] << 4 | u[:, 1::2]).to(torch.uint8), 8)
    sz = torch.stack([s, z], dim=2).contiguous()  # [K / group, N, 2]
    wb = (q.float() * s.float().t().repeat_interleave(GROUP, 1) + z.float().t().repeat_interleave(GROUP, 1)).bfloat16()
    return wq, s, z, tiny, sz, wb


def time_alternating(fns, sets, rounds=2):
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, f in enumerate(fns):
            try:
                best[i] = min(best[i], time_ms(f, sets))
            except RuntimeError:
                best[i] = float("nan")
    return best


def rows_for(ms, bw_tbs):
    rows = []
    for N, K in NKS:
        wbytes = N * K // 2 + 2 * (K // GROUP) * N * 2
        nsets = copies_to_exceed_l2(wbytes)
        weights = [weight_set(N, K) for _ in range(nsets)]
        for M in ms:
            sets = []
            for wq, s, z, tiny, sz, wb in weights:
                x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
                xq = x.to(torch.float8_e4m3fn)
                xs = torch.ones(M, device="cuda")
                sets.append((x, xq, xs, wq, s, z, tiny, sz, wb))

            def ours(x, xq, xs, wq, s, z, tiny, sz, wb):
                return torch.ops.mslk.bf16i4bf16_rowwise(x, wq, s, z)

            def f8(x, xq, xs, wq, s, z, tiny, sz, wb):
                return torch.ops.mslk.f8i4bf16_rowwise(xq, wq, xs, s, z)

            def tinygemm(x, xq, xs, wq, s, z, tiny, sz, wb):
                return torch._weight_int4pack_mm(x, tiny, GROUP, sz)

            def mm(x, xq, xs, wq, s, z, tiny, sz, wb):
                return torch.mm(x, wb.t())

            x, xq, xs, wq, s, z, tiny, sz, wb = sets[0]
            exact = x.double() @ wb.double().t()
            err = ((ours(*sets[0]).double() - exact).abs().max() / exact.abs().max()).item()
            t_ours, t_f8, t_tiny, t_mm = time_alternating([ours, f8, tinygemm, mm], sets)
            # device time (CUDA graphs: no launch gaps or host work), ours and tinygemm alternately
            g_ours, g_tiny = float("nan"), float("nan")
            if M <= GRAPH_MAX_M:
                go, gt = [], []
                for _ in range(2):
                    go.append(time_graph_ms(ours, sets))
                    gt.append(time_graph_ms(tinygemm, sets))
                g_ours, g_tiny = min(go), min(gt)
            floor = wbytes / (bw_tbs * 1e12) * 1e6
            rows.append([M, N, K, f"{t_ours * 1e3:.1f}", f"{t_f8 * 1e3:.1f}", f"{t_tiny * 1e3:.1f}",
                         f"{t_mm * 1e3:.1f}", f"{t_tiny / t_ours:.2f}x", f"{t_mm / t_ours:.2f}x", f"{floor:.1f}",
                         f"{wbytes / (t_ours * 1e-3) / 1e12:.2f}", f"{g_ours * 1e3:.1f}", f"{g_tiny * 1e3:.1f}",
                         f"{g_tiny / g_ours:.2f}x", f"{g_ours * 1e3 / floor:.2f}", f"{err:.1e}"])
            print(" | ".join(str(c) for c in rows[-1]), flush=True)
            del sets
        del weights
        torch.cuda.empty_cache()
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("results_int4_gemm.md"))
    ap.add_argument("--ms", type=str, default=",".join(map(str, MS)))
    args = ap.parse_args()
    bw = copy_bandwidth_tbs()
    print(f"copy bandwidth {bw:.2f} TB/s", flush=True)
    r = rows_for([int(m) for m in args.ms.split(",")], bw)
    write_results(args.out, "INT4-weight GEMM: mslk bf16i4bf16_rowwise vs tinygemm and BF16 torch.mm",
                  ["M", "N", "K", "mslk us", "mslk f8i4 us", "tinygemm us", "bf16 mm us", "vs tinygemm", "vs bf16 mm",
                   "weight floor us", "mslk weight TB/s", "mslk graph us", "tinygemm graph us",
                   "vs tinygemm (graphs)", "mslk graph / floor", "max err / max|ref|"], r,
                  notes=(f"X [M, K] bf16 randn, W [N, K] quantized with int4_row_quantize_zp (group {GROUP}, bf16 "
                         f"scales and zeros). Weight floor: packed weight + scales + zeros over the copy bandwidth "
                         f"({bw:.2f} TB/s). Ratios > 1: mslk faster. Error: mslk against float64 over the "
                         f"dequantized weight. Graph columns: CUDA graphs of a pass over the input sets (device time, no launch "
                         f"gaps), M <= {GRAPH_MAX_M}."))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
