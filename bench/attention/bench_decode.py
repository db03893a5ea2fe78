"""Decode attention (1 query per sequence, GQA 32 query heads over 8 K/V heads, d128, bf16): mslk's
split-K decode kernel (triton_splitk.FwOp, torch.ops.mslk.fmha_decode_splitk) and every other
available mslk forward backend vs torch SDPA (enable_gqa=True), same inputs, same run.

mslk gets q [B, 1, Hkv, R, D] with K/V [B, Mkv, Hkv, 1, D] expand()ed over R (BMGHK); SDPA gets
the [B, H, M, D] transposed views of the same tensors (no copies). The decode column is timed
alternating with SDPA (bench.common.time_pair_ms). Prints and writes (--out) microseconds, the K/V
bytes read per second (the bar: >= 3.7 TB/s), the decode kernel's ratio to SDPA and the max abs
difference of each mslk output against SDPA's once per shape.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from torch.nn.functional import scaled_dot_product_attention as sdpa

import mslk  # noqa: F401
from bench.common import copies_to_exceed_l2, time_graph_ms, time_ms, time_pair_ms, write_results
from mslk.attention import fmha
from mslk.attention.fmha import cutlass, flash3, triton_splitk

# (B, Hq, Hkv, Mkv, D)
SHAPES = [(8, 32, 8, 8192, 128), (8, 32, 8, 32768, 128), (64, 32, 8, 2048, 128), (1, 32, 8, 131072, 128)]
OTHERS = {"general (cutlass)": cutlass.FwOp, "flash3": flash3.FwOp}  # mslk backends besides the decode one


def make(B, Hq, Hkv, Mkv, D):
    R = Hq // Hkv
    q = torch.randn(B, 1, Hkv, R, D, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(B, Mkv, Hkv, 1, D, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(B, Mkv, Hkv, 1, D, device="cuda", dtype=torch.bfloat16)
    return q, k.expand(B, Mkv, Hkv, R, D), v.expand(B, Mkv, Hkv, R, D)


def mslk_fn(op):
    def f(q, k, v):
        return fmha.memory_efficient_attention_forward(q, k, v, op=op)
    return f


def sdpa_fn(q, k, v):
    B, _, Hkv, R, D = q.shape
    qh = q.reshape(B, 1, Hkv * R, D).transpose(1, 2)
    kh, vh = k[:, :, :, 0].transpose(1, 2), v[:, :, :, 0].transpose(1, 2)  # [B, Hkv, Mkv, D] views
    return sdpa(qh, kh, vh, enable_gqa=True).transpose(1, 2).reshape(q.shape)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("results_decode.md"))
    args = ap.parse_args()
    rows = []
    for B, Hq, Hkv, Mkv, D in SHAPES:
        kv_bytes = 2 * B * Mkv * Hkv * D * 2
        sets = [make(B, Hq, Hkv, Mkv, D) for _ in range(copies_to_exceed_l2(kv_bytes))]
        ref = sdpa_fn(*sets[0]).float()
        t_dec, t_sdpa = time_pair_ms(mslk_fn(triton_splitk.FwOp), sdpa_fn, sets, rounds=3)
        # Device time alone (both captured in CUDA graphs, as decode is served): eager calls of a
        # short kernel are bounded by the host's Python and launch time.
        g_dec, g_sdpa = min(time_graph_ms(mslk_fn(triton_splitk.FwOp), sets) for _ in range(2)), min(
            time_graph_ms(sdpa_fn, sets) for _ in range(2))
        diff = {"decode": (mslk_fn(triton_splitk.FwOp)(*sets[0]).float() - ref).abs().max().item()}
        t_other = {}
        for name, op in OTHERS.items():
            try:
                out = mslk_fn(op)(*sets[0])
                diff[name] = (out.float() - ref).abs().max().item()
                t_other[name] = time_ms(mslk_fn(op), sets)
            except (RuntimeError, ValueError, NotImplementedError) as e:
                print(f"{name} unavailable: {str(e).splitlines()[0]}")
                t_other[name], diff[name] = float("nan"), float("nan")
        tbs = lambda ms: kv_bytes / (ms * 1e-3) / 1e12  # noqa: E731
        rows.append([B, Hq, Hkv, Mkv, D, f"{kv_bytes / 1e6:.0f}", f"{t_dec * 1e3:.1f}", f"{tbs(t_dec):.2f}",
                     f"{t_sdpa * 1e3:.1f}", f"{tbs(t_sdpa):.2f}", f"{t_sdpa / t_dec:.2f}x",
                     f"{g_dec * 1e3:.1f}", f"{tbs(g_dec):.2f}", f"{g_sdpa * 1e3:.1f}", f"{g_sdpa / g_dec:.2f}x",
                     *[f"{t_other[n] * 1e3:.1f}" for n in OTHERS], f"{diff['decode']:.1e}",
                     *[f"{diff[n]:.1e}" for n in OTHERS]])
        print(" | ".join(str(c) for c in rows[-1]), flush=True)
        del sets
        torch.cuda.empty_cache()
    header = ["B", "Hq", "Hkv", "keys", "D", "KV MB", "decode us", "decode KV TB/s", "SDPA us", "SDPA KV TB/s",
              "decode vs SDPA", "graph: decode us", "graph: decode KV TB/s", "graph: SDPA us",
              "graph: decode vs SDPA", *[f"{n} us" for n in OTHERS], "decode max abs diff vs SDPA",
              *[f"{n} max abs diff vs SDPA" for n in OTHERS]]
    write_results(args.out, "Decode attention: triton_splitk.FwOp (mslk split-K) vs SDPA enable_gqa", header, rows,
                  notes="bf16, 1 query per sequence; KV TB/s counts the K and V bytes once; ratio > 1 means "
                        "the decode kernel is faster. Eager columns: calls queued back to back from Python "
                        "(host time included where it exceeds the kernels'); graph columns: device time of "
                        "the same calls captured in a CUDA graph.")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
