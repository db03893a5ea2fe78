"""The Hopper attention forward with paged K/V or a tensor bias against itself without them, and against
the FA2 kernel on the same inputs: B2 H32 S4096 d128, bf16, dense and causal.
The bias also runs under "sm90 loads": the Hopper kernel with MSLK_FMHA_SM90_BIAS_TMA=0 (each thread
loads its scores' bias from global memory instead of the TMA tiles in shared memory).

Rows: the plain problem (dense batch, MSLK_FMHA_KERNEL=sm90) and each variant of the same logical
problem: paged K/V (the two sequences packed, 256-key pages in a shuffled block table, the cache
holding a few pages no lane uses) and a bf16 tensor bias [B, 1, S, S] broadcast over heads. Each
variant is timed alternating with the plain problem (bench.common.time_pair_ms), under the Hopper
kernel (sm90) and under the FA2 kernel (sm80); its output is compared with the plain problem's
(paged: the same values; bias: against float32 SDPA with the bias on the first batch's first head).
Bar (issue 24): paged and bias on the Hopper kernel >= 0.85x its own plain speed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

import mslk  # noqa: F401
from bench.common import env_var, time_pair_ms, write_results

B, H, S, D, PAGE = 2, 32, 4096, 128, 256


def plain(causal):
    def f(q, k, v):
        return torch.ops.mslk.fmha_fused_fwd(q, k, v, mask_kind=1 if causal else 0, scale=D ** -0.5)[0]
    return f


def paged_inputs(q, k, v, gen):
    """The same problem as one packed batch over a paged cache."""
    per = S // PAGE
    spare = 3
    perm = torch.randperm(B * per + spare, generator=gen).to(torch.int32)
    bt = perm[:B * per].reshape(B, per).cuda()
    kc = torch.randn(1, (B * per + spare) * PAGE, H, D, device="cuda", dtype=q.dtype)
    vc = torch.randn_like(kc)
    for b in range(B):
        for j in range(per):
            rows = slice(int(bt[b, j]) * PAGE, (int(bt[b, j]) + 1) * PAGE)
            kc[0, rows] = k[b, j * PAGE:(j + 1) * PAGE]
            vc[0, rows] = v[b, j * PAGE:(j + 1) * PAGE]
    i32 = lambda x: torch.tensor(x, dtype=torch.int32, device="cuda")  # noqa: E731
    meta = dict(seqstart_q=i32([0, S, 2 * S]), seqstart_k=i32([0, 0, 0]), seqlen_k=i32([S, S]), max_seqlen_q=S,
                block_tables=bt, page_size=PAGE)
    return q.reshape(1, B * S, H, D), kc, vc, meta


def paged(causal, meta):
    def f(q, k, v):
        out = torch.ops.mslk.fmha_fused_fwd(q, k, v, mask_kind=2 if causal else 0, scale=D ** -0.5, **meta)[0]
        return out.reshape(B, S, H, D)
    return f


def biased(causal, bias):
    def f(q, k, v):
        return torch.ops.mslk.fmha_fused_fwd(q, k, v, bias=bias, mask_kind=1 if causal else 0, scale=D ** -0.5)[0]
    return f


def with_kernel(f, kernel):
    """kernel: sm90, sm80, or "sm90 loads" (the Hopper kernel with MSLK_FMHA_SM90_BIAS_TMA=0: each thread
    loads its scores' bias instead of TMA tiles)."""
    def g(*a):
        with env_var("MSLK_FMHA_KERNEL", kernel.split()[0]), \
                env_var("MSLK_FMHA_SM90_BIAS_TMA", "0" if kernel.endswith("loads") else None):
            return f(*a)
    return g


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("results_fmha_fwd_paged_bias.md"))
    ap.add_argument("--skip-sm80", action="store_true", help="leave out the FA2 kernel's rows (slow)")
    args = ap.parse_args()
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(B, S, H, D, generator=gen).to("cuda", torch.bfloat16) for _ in range(3))
    pq, pk, pv, meta = paged_inputs(q, k, v, gen)
    bias = torch.randn(B, 1, S, S, generator=gen).to("cuda", torch.bfloat16)
    flops_dense = 4.0 * B * H * S * S * D
    rows = []
    for causal in (False, True):
        flops = flops_dense * (0.5 if causal else 1.0)
        base_fn = with_kernel(plain(causal), "sm90")
        ref = base_fn(q, k, v).float()
        for name, fn, inputs in (("paged", paged(causal, meta), (pq, pk, pv)),
                                 ("bias", biased(causal, bias), (q, k, v))):
            kernels = ("sm90", "sm90 loads", "sm80") if name == "bias" else ("sm90", "sm80")
            for kernel in (k for k in kernels if not (args.skip_sm80 and k == "sm80")):
                g = with_kernel(fn, kernel)
                try:
                    out = g(*inputs).float()
                except RuntimeError as e:
                    print(f"{name} {kernel}: {str(e).splitlines()[0]}")
                    continue
                if name == "paged":
                    err = (out - ref).abs().max().item()
                else:  # first batch, first head against float32 SDPA with the bias
                    qh, kh, vh = (x[0, :, 0].float() for x in (q, k, v))
                    s = qh @ kh.T * D ** -0.5 + bias[0, 0].float()
                    if causal:
                        s = s.masked_fill(torch.ones(S, S, device="cuda", dtype=torch.bool).triu(1), float("-inf"))
                    err = (out[0, :, 0] - torch.softmax(s, -1) @ vh).abs().max().item()
                t_plain, t_var = time_pair_ms(lambda a, b, c: base_fn(q, k, v), lambda a, b, c: g(*inputs),
                                              [(q, k, v)], rounds=3)
                r = [name, "causal" if causal else "dense", kernel, f"{t_plain * 1e3:.0f}", f"{t_var * 1e3:.0f}",
                     f"{flops / t_plain * 1e-9:.0f}", f"{flops / t_var * 1e-9:.0f}", f"{t_plain / t_var:.3f}x",
                     f"{err:.1e}"]
                print(" | ".join(r), flush=True)
                rows.append(r)
    header = ["variant", "mask", "kernel", "plain sm90 us", "variant us", "plain TFLOP/s", "variant TFLOP/s",
              "variant / plain speed", "max abs err"]
    write_results(args.out, "Attention forward: paged K/V and tensor bias vs the plain problem (B2 H32 S4096 d128)",
                  header, rows, notes="bf16; plain: the Hopper kernel on the dense batch; variant: the same logical "
                                      "problem paged (256-key pages) or with a bf16 bias [B, 1, S, S], under the "
                                      "named kernel (sm90 loads: MSLK_FMHA_SM90_BIAS_TMA=0); alternating timing. "
                                      "Bar: sm90 variants >= 0.85x.")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
