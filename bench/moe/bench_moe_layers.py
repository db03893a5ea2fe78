"""The composed MoE layers end to end: mslk's MetaShufflingMoE and BaselineMoE against an eager
PyTorch MoE of the same math, against the sum of the layer's own kernel times, and (--ref-json)
against the reference library's wheel timed in its own process (ref_wheel_moe_layers.py).

- MetaShufflingMoE: D 5120, hidden 8192, 16 experts, top-1, 8192 tokens, static and dynamic path;
- BaselineMoE: D 7168, hidden 2048, 128 experts, top-4, 4096 tokens;
each in BF16 and FP8 rowwise, one rank (ep_size 1, no process group), the shared expert of the
same hidden size. Weights come from init methods (layer_setup.py) that the reference runner uses
too, so both build the same layer on the same inputs.

The eager peer is what a user writes without this library: sigmoid router, top-k, one sort of the
picks, then per expert torch.mm (w_in and w_swiglu in one product), silu * mul, torch.mm and an
index_add_ into the output, plus the shared expert; BF16 products also for the FP8 rows (over the
dequantized FP8 weights). Our layer and the eager peer are timed alternately in one process
(bench.common.time_ms: calls queued back to back); the layer also as a CUDA graph (device time).
Kernel sum: the layer's device kernels (and memsets / copies) per forward in a torch.profiler
trace; mslk / kernel sum is the module's host and launch overhead.

    python3 -m bench.moe.bench_moe_layers [--ref-json PATH] [--out results_moe_layers.md] [--quick]

--quick: small shapes, runs on the CPU too (wall clock; no graph or kernel-sum columns).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

from bench.common import copies_to_exceed_l2, time_graph_ms, time_ms, write_results
from bench.moe import layer_setup as S
from mslk.moe.layers import BaselineMoE, MetaShufflingMoE, MoEArgs

LAYERS = {"MetaShufflingMoE": MetaShufflingMoE, "BaselineMoE": BaselineMoE}
REF_TOKENS = 256  # tokens of the float64 check
TARGETS = {"vs ref wheel": 1.2, "mslk / kernel sum": 1.15, "vs eager": {"MetaShufflingMoE": 1.25, "BaselineMoE": 3.0}}


def dense(p) -> torch.Tensor:
    """A layer parameter as BF16 (FP8 rowwise weights dequantized)."""
    if p.is_scaled:
        return (p.weights.float() * p.scales.float()[..., None]).bfloat16()
    return p.weights


class EagerMoE:
    """The same MoE in plain PyTorch, over the weights of a built mslk layer."""

    def __init__(self, layer, cfg: S.Config):
        self.K, self.E = cfg.top_k, cfg.experts
        self.router = layer.router_DE.weights  # [D, E]
        self.s13, self.s2 = dense(layer.shared_experts.w13)[0], dense(layer.shared_experts.w2)[0]
        self.w13, self.w2 = dense(layer.routed_experts.w13), dense(layer.routed_experts.w2)  # [E, 2H, D], [E, D, H]
        self.H = self.w2.shape[-1]

    def swiglu(self, x, w13, w2):
        h = torch.mm(x, w13.t())
        return torch.mm(F.silu(h[:, :self.H]) * h[:, self.H:], w2.t())

    def scores(self, xf):
        return torch.sigmoid(torch.mm(xf.float(), self.router.float()))

    def __call__(self, x, use_static_shape=False):
        xf = x.reshape(-1, x.shape[-1])
        top_s, top_e = torch.topk(self.scores(xf), self.K, dim=1)
        out = self.swiglu(xf, self.s13, self.s2)
        flat = top_e.flatten()
        order = torch.argsort(flat, stable=True)
        tok, sc = order // self.K, top_s.flatten()[order].to(xf.dtype)
        start = 0
        for e, n in enumerate(torch.bincount(flat, minlength=self.E).tolist()):  # the one host sync
            if n:
                t = tok[start:start + n]
                out.index_add_(0, t, self.swiglu(xf[t] * sc[start:start + n, None], self.w13[e], self.w2[e]))
            start += n
        return out.view(x.shape)


def reference64(eager: EagerMoE, x: torch.Tensor, n: int) -> torch.Tensor:
    """float64 over the first n tokens, same weights; routing from the layer's float32 scores
    (a near-tie that float64 breaks the other way would say nothing about the kernels)."""
    xf = x.reshape(-1, x.shape[-1])[:n]
    top_e = torch.topk(eager.scores(xf), eager.K, dim=1).indices
    x64 = xf.double()
    s64 = torch.sigmoid(x64 @ eager.router.double())
    H = eager.H

    def sw(v, w13, w2):
        h = v @ w13.double().t()
        return (F.silu(h[:, :H]) * h[:, H:]) @ w2.double().t()

    out = sw(x64, eager.s13, eager.s2)
    for e in top_e.unique().tolist():
        rows, _ = (top_e == e).nonzero(as_tuple=True)
        out.index_add_(0, rows, sw(x64[rows] * s64[rows, e].unsqueeze(1), eager.w13[e], eager.w2[e]))
    return out


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double().reshape(b.shape), b.double()
    return ((a - b).norm() / b.norm()).item()


def load_ref(path: Path | None):
    if path is None:
        return None
    ref = json.loads(path.read_text())
    print(f"reference wheel results: {path} ({ref.get('wheel')}, {ref.get('date')}, {ref.get('device')})", flush=True)
    return ref


def fmt(v, spec=".1f", suffix=""):
    return "-" if v is None or v != v else f"{v:{spec}}{suffix}"


def ratio(num, den):
    return None if num is None or den is None or num != num or den != den or den == 0 else num / den


def bench_config(cfg: S.Config, precision: str, device, ref, errors: list) -> list[list]:
    cuda = device.type == "cuda"
    timer = time_ms if cuda else S.cpu_time_ms
    layer = LAYERS[cfg.layer](None, None, MoEArgs(**cfg.moe_args(precision))).build(S.RecordingInit(cfg), device=device)
    eager = EagerMoE(layer, cfg)
    n_sets = min(4, copies_to_exceed_l2(cfg.tokens * cfg.dim * 2)) if cuda else 2
    sets = S.input_sets(cfg, n_sets, device)
    x = sets[0][0]
    want = reference64(eager, x, min(REF_TOKENS, cfg.tokens))
    rows = []
    for path in cfg.paths:
        static = path == "static"
        key = S.row_key(cfg, precision, path)
        print(f"--- {key}", flush=True)

        def ours(x):
            return layer(x, static)

        def peer(x):
            return eager(x, static)

        out, out_eager = ours(x), peer(x)
        e_eager = rel_err(out, out_eager)
        n = want.shape[0]
        e64 = rel_err(out.reshape(-1, cfg.dim)[:n], want)
        e64_eager = rel_err(out_eager.reshape(-1, cfg.dim)[:n], want)
        print(f"rel. error: mslk vs eager {e_eager:.2e}; vs float64 ({n} tokens): mslk {e64:.2e}, "
              f"eager {e64_eager:.2e}", flush=True)
        fp = S.fingerprint(out)
        del out, out_eager

        t_ours, t_eager = float("inf"), float("inf")
        for _ in range(2):  # alternating rounds, each side keeps its best
            t_ours = min(t_ours, timer(ours, sets, **S.TIME_KW))
            t_eager = min(t_eager, timer(peer, sets, **S.TIME_KW))
        t_graph = ksum = None
        if cuda:
            try:
                t_graph = min(time_graph_ms(ours, sets, reps=S.TIME_KW["reps"]) for _ in range(2))
            except Exception as e:  # a path that cannot be captured still has its eager time
                errors.append(f"{key}: CUDA graph: {type(e).__name__}: {e}")
            try:
                ksum_us, top = S.kernel_sum_us(lambda: ours(x))
                ksum = ksum_us / 1e3
                print("heaviest kernels (us per forward): " + "; ".join(f"{k} {us:.0f}" for k, us in top), flush=True)
            except Exception as e:
                errors.append(f"{key}: kernel sum: {type(e).__name__}: {e}")
        print(f"mslk {t_ours * 1e3:.0f} us (graph {fmt(t_graph and t_graph * 1e3, '.0f')}), kernel sum "
              f"{fmt(ksum and ksum * 1e3, '.0f')} us, eager {t_eager * 1e3:.0f} us", flush=True)

        r_us = r_graph = r_err = None
        if ref is not None:
            r = ref.get("rows", {}).get(key)
            if r is None:
                errors.append(f"{key}: reference wheel: no row in the JSON")
            elif r.get("error"):
                errors.append(f"{key}: reference wheel: {r['error'].splitlines()[0][:300]}")
            else:
                r_us = r.get("us") and r["us"] / 1e3
                r_graph = r.get("graph_us") and r["graph_us"] / 1e3
                if r.get("fingerprint"):
                    r_err = S.fingerprint_err(fp, r["fingerprint"])
                if r.get("graph_error"):
                    errors.append(f"{key}: reference wheel, CUDA graph: {r['graph_error'].splitlines()[0][:300]}")
        rows.append([cfg.layer, precision, path, cfg.shape, cfg.tokens,
                     fmt(t_ours * 1e3), fmt(t_graph and t_graph * 1e3), fmt(ksum and ksum * 1e3),
                     fmt(ratio(t_ours, ksum), ".2f"), fmt(t_eager * 1e3), fmt(ratio(t_eager, t_ours), ".2f", "x"),
                     fmt(r_us and r_us * 1e3), fmt(r_graph and r_graph * 1e3), fmt(ratio(r_us, t_ours), ".2f", "x"),
                     fmt(ratio(r_graph, t_graph), ".2f", "x"), fmt(cfg.flops() / (t_ours * 1e-3) / 1e12, ".0f"),
                     fmt(e_eager, ".1e"), f"{e64:.1e} / {e64_eager:.1e}", fmt(r_err, ".1e")])
        print(" | ".join(str(c) for c in rows[-1]), flush=True)
    del layer, eager, sets, want
    if cuda:
        torch.cuda.empty_cache()
    return rows


HEADER = ["layer", "precision", "path", "shape", "tokens", "mslk us", "mslk graph us", "kernel sum us",
          "mslk / kernel sum", "eager us", "vs eager", "ref wheel us", "ref wheel graph us", "vs ref wheel",
          "vs ref wheel (graphs)", "mslk TFLOP/s", "err vs eager", "err vs float64: mslk / eager",
          "ref wheel output vs mslk"]


def notes(ref, errors, quick) -> str:
    lines = [
        "Rows: MetaShufflingMoE (top-1) and BaselineMoE (top-4) in one rank (ep_size 1, mp_size 1), "
        "x [1, tokens, D] bf16 ~ N(0, 1), weights N(0, 1/fan-in) from init methods, the shared expert with "
        "the routed hidden size. At ep_size 1 mslk's static and dynamic paths run the same local code.",
        "mslk us / eager us / ref wheel us: forward calls queued back to back (CUDA events, median); graph: "
        "the forward as a CUDA graph (device time). Kernel sum: the forward's device kernels, memsets and "
        "copies in a torch.profiler trace; mslk / kernel sum = the module's host and launch overhead.",
        "Eager peer: plain PyTorch (sigmoid router, top-k, one sort of the picks and one host sync, per expert "
        "torch.mm over w_in|w_swiglu, silu * mul, torch.mm, index_add_; plus the shared expert). It uses BF16 "
        "torch.mm in the fp8_rowwise rows too, over the dequantized FP8 weights.",
        "Errors: relative L2 norm; against float64 over the first "
        f"{REF_TOKENS} tokens with the layer's routing; ref wheel output vs mslk: the first "
        f"{S.FINGERPRINT_TOKENS} output rows projected on a random vector.",
        f"Targets: vs ref wheel >= {TARGETS['vs ref wheel']}x, mslk / kernel sum <= {TARGETS['mslk / kernel sum']}, "
        "vs eager >= 1.25x (MetaShufflingMoE) and >= 3x (BaselineMoE).",
    ]
    if ref is None:
        lines.append("Reference wheel: not run (ref_wheel_moe_layers.py, then --ref-json).")
    else:
        lines.append(f"Reference wheel: {ref.get('wheel')} in its own process ({ref.get('date')}, "
                     f"{ref.get('device')}); ratios > 1: mslk faster.")
        builds = {r.get("build", {}).get("strategy") for r in ref.get("rows", {}).values() if r.get("build")}
        if builds:
            lines.append("Reference wheel weights: init methods, form " + ", ".join(sorted(map(str, builds))) + ".")
    if quick:
        lines.append("QUICK run: small shapes, not a measurement.")
    lines += [f"Note: {e}" for e in errors]
    return "\n\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--ref-json", type=Path, default=None, help="results of ref_wheel_moe_layers.py")
    ap.add_argument("--quick", action="store_true", help="small shapes (CPU too); not a measurement")
    ap.add_argument("--only", default="", help="run rows whose key contains this text")
    args = ap.parse_args()
    out = args.out or (Path(tempfile.gettempdir()) / "results_moe_layers_quick.md" if args.quick
                       else Path(__file__).with_name("results_moe_layers.md"))
    device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    if device.type != "cuda" and not args.quick:
        raise SystemExit("bench_moe_layers: needs a CUDA device (or --quick)")
    ref = load_ref(args.ref_json)
    if ref is not None and bool(ref.get("quick")) != args.quick:
        raise SystemExit("bench_moe_layers: --ref-json was measured with a different --quick setting")
    rows, errors = [], []
    for cfg in (S.QUICK if args.quick else S.FULL):
        for precision in S.PRECISIONS:
            if args.only and not any(args.only in S.row_key(cfg, precision, p) for p in cfg.paths):
                continue
            rows += bench_config(cfg, precision, device, ref, errors)
    title = "MoE layers: mslk vs eager PyTorch, its own kernel sum and the reference wheel"
    if device.type == "cuda":
        write_results(out, title, HEADER, rows, notes=notes(ref, errors, args.quick))
    else:  # write_results names the CUDA device; a CPU run gets the plain table
        table = ["| " + " | ".join(map(str, r)) + " |" for r in [HEADER, ["---"] * len(HEADER)] + rows]
        out.write_text(f"# {title} (CPU)\n\n" + notes(ref, errors, args.quick) + "\n\n" + "\n".join(table) + "\n")
    for e in errors:
        print(f"note: {e}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
