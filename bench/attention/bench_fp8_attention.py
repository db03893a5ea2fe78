"""FP8 E4M3 attention forward (flash3.FwOp on pack_fp8_tensorwise_per_head operands) vs our bf16
forward (flash3.FwOp on bf16) on the same values, timed alternately in one run (the issue's bar:
FP8 >= 1.4x bf16 at B2 H32 S4096 d128), with each one's max abs error against float64 attention on
the dequantized operands (one head's rows, on the CPU). [B, S, H, D] inputs, per-head descales.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

import mslk  # noqa: F401
from bench.common import copies_to_exceed_l2, time_pair_ms, write_results
from mslk.attention import fmha
from mslk.attention.fmha import flash3
from mslk.attention.fmha.common import pack_fp8_tensorwise_per_head

# (B, H, S, D, causal)
SHAPES = [(2, 32, 4096, 128, False), (2, 32, 4096, 128, True), (1, 32, 8192, 128, True), (4, 16, 2048, 64, False)]


def make(B, H, S, D):
    """(FP8 ScaledTensors q, k, v; the same values in bf16)."""
    fp8, bf16 = [], []
    for _ in range(3):
        x = torch.randn(B, S, H, D, device="cuda")
        s = (x.abs().amax(dim=(1, 3)) / 448.0).clamp_min(1e-6)  # [B, H]
        data = (x / s[:, None, :, None]).to(torch.float8_e4m3fn)
        fp8.append(pack_fp8_tensorwise_per_head(data, s, torch.bfloat16))
        bf16.append((data.float() * s[:, None, :, None]).bfloat16())
    return tuple(fp8), tuple(bf16)


def attn(causal):
    bias = fmha.LowerTriangularMask() if causal else None

    def f(q, k, v):
        return fmha.memory_efficient_attention_forward(q, k, v, bias, op=flash3.FwOp)
    return f


def head_error(out, q, k, v, causal, h=0):
    """max |out - float64 attention| over head h of batch 0 (the operands as dequantized, bf16)."""
    qd, kd, vd = (x[0, :, h].double().cpu() for x in (q, k, v))
    s = qd @ kd.T * qd.shape[-1] ** -0.5
    if causal:
        s = s + torch.full(s.shape, float("-inf"), dtype=torch.float64).triu(1)
    ref = torch.softmax(s, -1) @ vd
    return (out[0, :, h].double().cpu() - ref).abs().max().item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("results_fp8_attention.md"))
    args = ap.parse_args()
    rows = []
    for B, H, S, D, causal in SHAPES:
        nbytes = 3 * B * S * H * D
        sets = [make(B, H, S, D) for _ in range(copies_to_exceed_l2(nbytes))]
        f = attn(causal)
        t_fp8, t_bf16 = time_pair_ms(lambda *a: f(*a[:3]), lambda *a: f(*a[3:]), [(*s[0], *s[1]) for s in sets],
                                     rounds=3)
        flops = 4 * B * H * S * S * D / (2 if causal else 1)
        fp8_q, bf16_q = sets[0]
        e8 = head_error(f(*fp8_q), *bf16_q, causal)
        e16 = head_error(f(*bf16_q), *bf16_q, causal)
        rows.append([B, H, S, D, causal, f"{t_fp8 * 1e3:.1f}", f"{flops / t_fp8 / 1e9:.0f}", f"{t_bf16 * 1e3:.1f}",
                     f"{flops / t_bf16 / 1e9:.0f}", f"{t_bf16 / t_fp8:.2f}x", f"{e8:.1e}", f"{e16:.1e}"])
        print(" | ".join(str(c) for c in rows[-1]), flush=True)
        del sets
        torch.cuda.empty_cache()
    header = ["B", "H", "S", "D", "causal", "FP8 us", "FP8 TFLOP/s", "bf16 us", "bf16 TFLOP/s", "FP8 vs bf16",
              "FP8 max abs err", "bf16 max abs err"]
    write_results(args.out, "FP8 E4M3 attention forward vs bf16 (flash3.FwOp)", header, rows,
                  notes="FP8: q, k, v as pack_fp8_tensorwise_per_head operands (per-head descales); bf16: the same "
                        "dequantized values. Errors: max abs against float64 attention on those values, head 0 of "
                        "batch 0. FP8 runs as bf16 attention on operands dequantized by "
                        "torch.ops.mslk.fmha_fp8_dequant (no FP8 tensor-core kernel yet).")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
