"""Attention backward: mslk::fmha_fused_bwd vs the backward of torch SDPA (cuDNN and flash backends),
same inputs, same run; and a training step (forward + backward) of mslk's memory_efficient_attention
vs SDPA with cuDNN. bf16, [B, S, H, D] inputs (SDPA gets the [B, H, S, D] transposed views).

The backward columns time only the backward: ours calls the op on saved (out, lse); the peers replay
`torch.autograd.grad` over a retained SDPA graph. mslk and cuDNN are timed alternating
(bench.common.time_pair_ms). Flops: the backward's five GEMMs, 10·B·H·S²·D (half for causal); the
training step adds the forward's 4·B·H·S²·D. Prints and writes (--out) TFLOP/s, ratios, and the max
abs difference of our dq, dk, dv against cuDNN's once per shape.

--ab dq / --ab d256: instead, a switch's two values timed alternating on the shapes it concerns, with
the gradients' difference: the Hopper backward's dQ sums (MSLK_FMHA_BWD_SM90_DQ=atomic vs tiles, d64 /
d128), head dim 256 on the FA2-style vs the Hopper kernel (MSLK_FMHA_BWD_SM90_D256=0 vs 1).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention as sdpa

import mslk  # noqa: F401
from bench.common import copies_to_exceed_l2, env_var, time_ms, write_results
from mslk.attention import fmha

# (B, H, S, D, causal)
SHAPES = [(2, 32, 4096, 128, False), (2, 32, 4096, 128, True), (1, 32, 8192, 128, True),
          (4, 16, 2048, 64, False), (4, 16, 2048, 64, True), (2, 16, 4096, 256, False), (2, 16, 4096, 256, True)]
# Packed varlen batch (B = 1, block-diagonal, causal per block), as in bench_fmha_fwd.
VARLEN = [3817, 512, 2048, 129, 4096, 1000, 777, 3000, 256, 1536, 2900, 64, 4000, 1200, 640, 2222]


def make(B, S, H, D):
    q, k, v, do = (torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    return q, k, v, do


def ours_bwd(causal, varlen=None):
    kw = dict(mask_kind=1 if causal else 0)
    if varlen is not None:
        cu, mx = varlen
        kw.update(seqstart_q=cu, seqstart_k=cu, max_seqlen_q=mx, max_seqlen_k=mx)

    def prep(q, k, v, do):
        out, lse = torch.ops.mslk.fmha_fused_fwd(q, k, v, scale=q.shape[-1] ** -0.5, **{
            k_: v_ for k_, v_ in kw.items() if k_ != "max_seqlen_k"})
        return (do, q, k, v, out, lse)

    def f(do, q, k, v, out, lse):
        return torch.ops.mslk.fmha_fused_bwd(do, q, k, v, out, lse, scale=q.shape[-1] ** -0.5, **kw)[:3]
    return prep, f


def peer_bwd(backend, causal):
    def prep(q, k, v, do):
        q, k, v = (x.transpose(1, 2).detach().requires_grad_() for x in (q, k, v))
        with sdpa_kernel(backend):
            out = sdpa(q, k, v, is_causal=causal)
        return (out, q, k, v, do.transpose(1, 2))

    def f(out, q, k, v, do):
        return torch.autograd.grad(out, (q, k, v), do, retain_graph=True)
    return prep, f


def step_ours(causal):
    bias = fmha.attn_bias.LowerTriangularMask() if causal else None

    def f(q, k, v, do):
        q, k, v = (x.detach().requires_grad_() for x in (q, k, v))
        out = fmha.memory_efficient_attention(q, k, v, attn_bias=bias)
        return torch.autograd.grad(out, (q, k, v), do)
    return f


def step_peer(backend, causal):
    def f(q, k, v, do):
        q, k, v = (x.transpose(1, 2).detach().requires_grad_() for x in (q, k, v))
        with sdpa_kernel(backend):
            out = sdpa(q, k, v, is_causal=causal)
        return torch.autograd.grad(out, (q, k, v), do.transpose(1, 2))
    return f


# Each call is milliseconds long: fewer repetitions than bench.common's defaults keep the run short.
REPS = dict(reps=7, calls=4)


def time_pair(fa, sets_a, fb, sets_b, rounds=2):
    """time_ms of fa and fb alternating (a, b, a, b, ...), each its best round (as
    bench.common.time_pair_ms, with separate argument sets)."""
    ta, tb = [], []
    for _ in range(rounds):
        ta.append(time_ms(fa, sets_a, **REPS))
        tb.append(time_ms(fb, sets_b, **REPS))
    return min(ta), min(tb)


def maxdiff(ours, ref):
    return max((a.float() - b.transpose(1, 2).float()).abs().max().item() for a, b in zip(ours, ref))


def row(B, H, S, D, causal, sets, flops_fwd, varlen=None):
    tf = lambda ms, fl: fl / (ms * 1e-3) / 1e12  # noqa: E731
    flops_bwd = 2.5 * flops_fwd
    prep, ours = ours_bwd(causal, varlen)
    ours_sets = [prep(*s) for s in sets]
    res, diff = {}, float("nan")
    mine = ours(*ours_sets[0])
    for name, be in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
        if varlen is not None:
            res[name] = float("nan")  # SDPA has no packed varlen backward
            continue
        try:
            pprep, pf = peer_bwd(be, causal)
            psets = [pprep(*s) for s in sets]
            ref = pf(*psets[0])
            if name == "cudnn":
                diff = maxdiff(mine, ref)
                res["ours"], res[name] = time_pair(ours, ours_sets, pf, psets)
            else:
                res[name] = time_ms(pf, psets, **REPS)
            del psets
        except RuntimeError as e:
            print(f"{name} unavailable for {(B, H, S, D, causal)}: {str(e).splitlines()[0]}")
            res[name] = float("nan")
    if "ours" not in res:
        res["ours"] = time_ms(ours, ours_sets, **REPS)
    step = {}
    if varlen is None:
        try:
            step["ours"], step["cudnn"] = time_pair(step_ours(causal), sets,
                                                    step_peer(SDPBackend.CUDNN_ATTENTION, causal), sets)
        except RuntimeError as e:
            print(f"training step unavailable: {str(e).splitlines()[0]}")
    t = res["ours"]
    r = [B, H, S, D, causal, f"{t * 1e3:.0f}", f"{tf(t, flops_bwd):.0f}", f"{tf(res['cudnn'], flops_bwd):.0f}",
         f"{tf(res['flash'], flops_bwd):.0f}", f"{res['cudnn'] / t:.2f}x", f"{res['flash'] / t:.2f}x"]
    if step:
        fl = flops_bwd + flops_fwd
        r += [f"{tf(step['ours'], fl):.0f}", f"{tf(step['cudnn'], fl):.0f}", f"{step['cudnn'] / step['ours']:.2f}x"]
    else:
        r += ["-", "-", "-"]
    r.append(f"{diff:.1e}")
    print(" | ".join(str(c) for c in r), flush=True)
    return r


def routed(f, var, value):
    def g(*a):
        with env_var(var, value):
            return f(*a)
    return g


def ab(var, values, dims, out):
    """mslk's backward under var=values[0] vs var=values[1], alternating, on the shapes of head dims
    `dims` (and the varlen batch at d128 when 128 is among them)."""
    tf = lambda ms, fl: fl / (ms * 1e-3) / 1e12  # noqa: E731
    rows = []
    total, mx = sum(VARLEN), max(VARLEN)
    cu = torch.tensor([0] + list(torch.tensor(VARLEN).cumsum(0)), dtype=torch.int32, device="cuda")
    cases = [(B, H, S, D, c, None) for B, H, S, D, c in SHAPES if D in dims]
    cases += [(1, 32, total, 128, c, (cu, mx)) for c in (False, True) if 128 in dims]
    va, vb = values
    for B, H, S, D, causal, varlen in cases:
        prep, f = ours_bwd(causal, varlen)
        sets = [prep(*make(B, S, H, D)) for _ in range(copies_to_exceed_l2(4 * B * H * S * D * 2, factor=2))]
        fa, fb = routed(f, var, va), routed(f, var, vb)
        diff = max((x.float() - y.float()).abs().max().item() for x, y in zip(fa(*sets[0]), fb(*sets[0])))
        ta, tb = time_pair(fa, sets, fb, sets)
        lens = VARLEN if varlen is not None else [S] * B
        flops = sum(10.0 * H * s * s * D for s in lens) * (0.5 if causal else 1.0)
        r = [B if varlen is None else len(VARLEN), H, S if varlen is None else f"varlen {S}", D, causal,
             f"{ta * 1e3:.0f}", f"{tb * 1e3:.0f}", f"{tf(ta, flops):.0f}", f"{tf(tb, flops):.0f}", f"{ta / tb:.3f}x",
             f"{diff:.1e}"]
        print(" | ".join(str(c) for c in r), flush=True)
        rows.append(r)
        del sets
        torch.cuda.empty_cache()
    header = ["B", "H", "S", "D", "causal", f"{va} us", f"{vb} us", f"{va} TFLOP/s", f"{vb} TFLOP/s",
              f"{vb} speed-up", "max |grad diff|"]
    write_results(out, f"Attention backward: {var}={va} vs {vb}", header, rows,
                  notes=f"bf16; torch.ops.mslk.fmha_fused_bwd under {var}={va} and ={vb}, alternating; flops "
                        "10·B·H·S²·D (half for causal); speed-up > 1: the second value faster; grad diff: dq, dk, "
                        "dv of the two.")
    print(f"wrote {out}")


# --ab presets: the switch, its two values, the head dims it concerns, the results file
AB = {
    "dq": ("MSLK_FMHA_BWD_SM90_DQ", ("atomic", "tiles"), (64, 128), "results_fmha_bwd_dq_routes.md"),
    "d256": ("MSLK_FMHA_BWD_SM90_D256", ("0", "1"), (256,), "results_fmha_bwd_d256_sm90.md"),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--ab", choices=sorted(AB), help="time a switch's two values against each other instead")
    args = ap.parse_args()
    if args.ab:
        var, values, dims, name = AB[args.ab]
        return ab(var, values, dims, args.out or Path(__file__).with_name(name))
    args.out = args.out or Path(__file__).with_name("results_fmha_bwd.md")
    rows = []
    for B, H, S, D, causal in SHAPES:
        sets = [make(B, S, H, D) for _ in range(copies_to_exceed_l2(4 * B * H * S * D * 2, factor=2))]
        rows.append(row(B, H, S, D, causal, sets, 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)))
        del sets
        torch.cuda.empty_cache()
    total, mx, H, D = sum(VARLEN), max(VARLEN), 32, 128
    cu = torch.tensor([0] + list(torch.tensor(VARLEN).cumsum(0)), dtype=torch.int32, device="cuda")
    for causal in (False, True):
        sets = [make(1, total, H, D) for _ in range(2)]
        flops = sum(4.0 * H * s * s * D for s in VARLEN) * (0.5 if causal else 1.0)
        rows.append(row(len(VARLEN), H, f"varlen {total}", D, causal, sets, flops, varlen=(cu, mx)))
        del sets
    header = ["B", "H", "S", "D", "causal", "bwd us", "bwd TFLOP/s", "cuDNN bwd TFLOP/s", "flash bwd TFLOP/s",
              "bwd vs cuDNN", "bwd vs flash", "fwd+bwd TFLOP/s", "cuDNN fwd+bwd TFLOP/s", "fwd+bwd vs cuDNN",
              "max abs diff vs cuDNN (dq, dk, dv)"]
    write_results(args.out, "Attention backward: mslk::fmha_fused_bwd vs SDPA backward (cuDNN, flash)", header, rows,
                  notes="bf16; backward flops 10·B·H·S²·D (half for causal), fwd+bwd 14·B·H·S²·D; "
                        "ratio > 1 means mslk is faster.")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
