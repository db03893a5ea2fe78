"""Attention at small and mid shapes, where the host's time per call matters: a training step
(forward + backward through autograd) and an inference forward (no_grad) of mslk's
memory_efficient_attention against SDPA with the cuDNN and flash backends, causal, bf16.

Calls are queued back to back (bench.common.time_ms), as in a model: while the host is faster than
the GPU its time hides behind the kernels, below that the step costs the host time. The "host us"
columns are the host's own time per call (no synchronisation inside the timed loop), the figure
that decides where the crossover lies. [B, S, H, D] inputs; SDPA gets the transposed views.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention as sdpa

import mslk  # noqa: F401
from bench.common import time_ms, write_results
from mslk.attention import fmha

# (B, H, S, D): the first rows are host-bound for every library, the last ones GPU-bound.
SHAPES = [(1, 8, 128, 64), (4, 16, 512, 64), (2, 16, 1024, 128), (4, 16, 2048, 64)]
PEERS = {"cuDNN": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}


def _inputs(B, S, H, D):
    q, k, v, do = (torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    return q, k, v, do


def ours(train: bool):
    mask = fmha.attn_bias.LowerTriangularMask()

    def step(q, k, v, do):
        out = fmha.memory_efficient_attention(q, k, v, attn_bias=mask)
        return torch.autograd.grad(out, (q, k, v), do)

    def infer(q, k, v, do):
        with torch.no_grad():
            return fmha.memory_efficient_attention(q, k, v, attn_bias=mask)
    return step if train else infer


def peer(backend, train: bool):
    def step(q, k, v, do):
        with sdpa_kernel(backend):
            out = sdpa(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        return torch.autograd.grad(out, (q, k, v), do.transpose(1, 2))

    def infer(q, k, v, do):
        with torch.no_grad(), sdpa_kernel(backend):
            return sdpa(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
    return step if train else infer


def host_us(fn, args, n=200):
    """Host time per call: n calls queued without synchronising, best of 3 (the queue is drained
    between runs; at these shapes it never fills)."""
    best = float("inf")
    for _ in range(3):
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(n):
            fn(*args)
        best = min(best, (time.perf_counter() - t) / n * 1e6)
        torch.cuda.synchronize()
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("results_fmha_step.md"))
    args = ap.parse_args()
    rows = []
    for B, H, S, D in SHAPES:
        for train in (True, False):
            sets = [tuple(x.requires_grad_(train and i < 3) for i, x in enumerate(_inputs(B, S, H, D)))
                    for _ in range(2)]
            fns = {"mslk": ours(train), **{n: peer(b, train) for n, b in PEERS.items()}}
            best = {n: float("inf") for n in fns}
            host = {n: float("inf") for n in fns}
            for _ in range(2):  # alternating rounds, each keeps its best
                for n, f in fns.items():
                    try:
                        best[n] = min(best[n], time_ms(f, sets, reps=7, calls=8) * 1e3)
                        host[n] = min(host[n], host_us(f, sets[0]))
                    except RuntimeError:  # a backend refusing the shape
                        best[n] = host[n] = float("nan")
            kind = "fwd+bwd" if train else "fwd (no_grad)"
            rows.append([B, H, S, D, kind, f"{best['mslk']:.0f}", f"{host['mslk']:.0f}",
                         f"{best['cuDNN']:.0f}", f"{host['cuDNN']:.0f}", f"{best['flash']:.0f}",
                         f"{host['flash']:.0f}", f"{best['cuDNN'] / best['mslk']:.2f}x",
                         f"{best['flash'] / best['mslk']:.2f}x"])
            print(" | ".join(map(str, rows[-1])), flush=True)
            del sets
    header = ["B", "H", "S", "D", "call", "mslk us", "mslk host us", "cuDNN us", "cuDNN host us", "flash us",
              "flash host us", "vs cuDNN", "vs flash"]
    write_results(args.out, "Attention step at small shapes: memory_efficient_attention vs SDPA (cuDNN, flash)",
                  header, rows, notes="bf16, causal (LowerTriangularMask / is_causal); us per call with calls "
                                      "queued back to back; host us: the host's time per call; ratio > 1 means "
                                      "mslk is faster.")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
