"""Decode attention over quantized K/V caches (1 query per sequence, GQA 32 query heads over 8 K/V
heads, d128, bf16 queries): torch.ops.mslk.fmha_decode_splitk on a bf16 cache and on FP8 (fp16
scale/shift) and INT4 (1 and 4 groups) caches of the same rows, each quantized format through the
routes of MSLK_DECODE_KV_DEQUANT (separate: dequantize into a temporary, then the bf16 kernel;
fused: dequantize inside the kernel; folded, for FP8 and one-group INT4: raw values in fp16 MMAs,
scale and shift applied to scores and probabilities; registers, for FP8: the folded math with the
cache read straight into mma fragments), all in CUDA graphs (device time), in one run.

Columns per shape and format: microseconds per route, the time against the bf16 cache's (the bars:
FP8 <= 0.55x, INT4 with one group <= 0.35x), the cache bytes read per second, the time over the time
to read the format's own cache bytes at the device's copy bandwidth (copy_bandwidth_tbs, read + write
bytes per second; the bar: <= 1.3x), whether separate and fused gave the same bits, and folded's
largest difference from separate (which rounds the dequantized cache to bf16) over the output's
largest |value|.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

import mslk  # noqa: F401
from bench.common import copies_to_exceed_l2, copy_bandwidth_tbs, env_var, time_graph_ms, write_results
from mslk.attention.fmha import quantized_kv as qkv

# (B, Hq, Hkv, Mkv, D)
SHAPES = [(8, 32, 8, 8192, 128), (8, 32, 8, 32768, 128), (64, 32, 8, 2048, 128), (1, 32, 8, 131072, 128)]
FORMATS = ["bf16", "fp8", "int4_g1", "int4_g4"]
FOLDED = {"fp8", "int4_g1"}  # the formats the folded route reads (it runs fused for the others)


def make(B, Hq, Hkv, Mkv, D, fmt):
    """(q [B, 1, Hkv, R, D], k, v, k_scale_shift, v_scale_shift, cache bytes) in the op's grouped layout."""
    q = torch.randn(B, 1, Hkv, Hq // Hkv, D, device="cuda", dtype=torch.bfloat16)
    kv, ss = [], []
    for _ in range(2):
        x = torch.randn(B, Mkv, Hkv, D, device="cuda", dtype=torch.bfloat16)
        xq, s = x, None
        if fmt == "fp8":
            xq, s = qkv.quantize_kv_fp8(x)
        elif fmt.startswith("int4"):
            xq = qkv.quantize_kv_int4(x, int(fmt[-1]))
        kv.append(xq)
        ss.append(s)
    nbytes = sum(t.numel() * t.element_size() for t in kv + [s for s in ss if s is not None])
    return q, kv[0], kv[1], ss[0], ss[1], nbytes


def decode(q, k, v, ks, vs, nbytes):
    return torch.ops.mslk.fmha_decode_splitk(q, k, v, scale=q.shape[-1] ** -0.5, k_scale_shift=ks, v_scale_shift=vs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("results_decode_quantized.md"))
    args = ap.parse_args()
    copy_tbs = copy_bandwidth_tbs()
    read_tbs = copy_tbs  # copy bandwidth counts read + written bytes: the rate of moving bytes through HBM
    rows = []
    for shape in SHAPES:
        t_bf16 = None
        for fmt in FORMATS:
            first = make(*shape, fmt)
            nbytes = first[-1]
            sets = [first] + [make(*shape, fmt) for _ in range(copies_to_exceed_l2(nbytes) - 1)]
            routes = ["separate"] if fmt == "bf16" else ["separate", "fused"] + (["folded"] if fmt in FOLDED else [])
            routes += ["registers"] if fmt == "fp8" else []
            t, outs = {}, {}
            for r in routes:
                with env_var("MSLK_DECODE_KV_DEQUANT", r):
                    outs[r] = decode(*sets[0])
                    t[r] = min(time_graph_ms(decode, sets) for _ in range(2))
            if fmt in FOLDED:  # the folded kernel's row 2 (its default up to d128 is row 3)
                with env_var("MSLK_DECODE_KV_DEQUANT", "folded"), env_var("MSLK_DECODE_TILE_CFG", "2"):
                    t["folded2"] = min(time_graph_ms(decode, sets) for _ in range(2))
            if fmt == "bf16":
                t_bf16 = t["separate"]
            same = "-" if fmt == "bf16" else str(all(torch.equal(a, b) for a, b in zip(outs["separate"],
                                                                                         outs["fused"])))
            fold_diff = "-"
            if "folded" in outs:
                a, b = outs["folded"][0].float(), outs["separate"][0].float()
                fold_diff = f"{((a - b).abs().max() / b.abs().max()).item():.1e}"
            best = min(t.values())
            floor_ms = nbytes / (read_tbs * 1e12) * 1e3
            rows.append([*shape, fmt, f"{nbytes / 1e6:.0f}", f"{t['separate'] * 1e3:.1f}",
                         f"{t['fused'] * 1e3:.1f}" if "fused" in t else "-",
                         f"{t['folded'] * 1e3:.1f}" if "folded" in t else "-",
                         f"{t['folded2'] * 1e3:.1f}" if "folded2" in t else "-",
                         f"{t['registers'] * 1e3:.1f}" if "registers" in t else "-", f"{best / t_bf16:.2f}x",
                         f"{nbytes / (best * 1e-3) / 1e12:.2f}", f"{best / floor_ms:.2f}x", same, fold_diff])
            print(" | ".join(str(c) for c in rows[-1]), flush=True)
            del sets, first
            torch.cuda.empty_cache()
    header = ["B", "Hq", "Hkv", "keys", "D", "cache", "cache MB", "separate us", "fused us", "folded us", "folded row 2 us",
              "registers us", "best vs bf16", "best cache TB/s", "best vs its read", "separate = fused bits",
              "folded vs separate (max rel)"]
    write_results(args.out, "Decode attention over quantized K/V caches: separate, fused, folded and registers routes", header,
                  rows, notes=f"CUDA-graph device time, bf16 queries, 1 query per sequence. 'its read': the cache "
                              f"bytes (with FP8 scale/shift) at the measured copy bandwidth, {copy_tbs:.2f} TB/s "
                              "(read + written bytes per second). The bf16 row runs the unquantized kernel.")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
