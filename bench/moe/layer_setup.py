"""What bench_moe_layers.py and ref_wheel_moe_layers.py share: the layer configurations, the
inputs, the weights (one init method per parameter, deterministic per role so both processes
build the same layer), the output fingerprint and the profiler's kernel sum.

Imports torch only: the reference-wheel runner loads this file by path, and must not import the
repository's mslk.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

PRECISIONS = ("bf16", "fp8_rowwise")
TIME_KW = dict(reps=10, calls=4)  # layers run for milliseconds: 4 calls a rep hide the launch gaps
FINGERPRINT_TOKENS = 256
FP8_MAX = 448.0


@dataclass(frozen=True)
class Config:
    layer: str  # "MetaShufflingMoE" or "BaselineMoE"
    dim: int
    hidden: int
    experts: int
    top_k: int
    tokens: int

    @property
    def paths(self) -> tuple[str, ...]:
        # BaselineMoE accepts use_static_shape but ignores it: one row.
        return ("static", "dynamic") if self.layer == "MetaShufflingMoE" else ("dynamic",)

    @property
    def shape(self) -> str:
        return f"D{self.dim} H{self.hidden} E{self.experts} top-{self.top_k}"

    def flops(self) -> float:
        # Each token through the shared expert and top_k routed ones: three D x H products each.
        return 2.0 * 3 * self.tokens * (self.top_k + 1) * self.dim * self.hidden

    def moe_args(self, precision: str) -> dict:
        """MoEArgs keywords (the spec's field names): one rank, no expert or model parallelism."""
        return dict(precision=precision, dim=self.dim, hidden_dim=self.hidden, num_experts=self.experts,
                    top_k=self.top_k, mp_size=1, ep_size=1, mp_size_for_routed_experts=None,
                    use_fast_accum=True, dedup_comm=False)


FULL = (Config("MetaShufflingMoE", 5120, 8192, 16, 1, 8192), Config("BaselineMoE", 7168, 2048, 128, 4, 4096))
QUICK = (Config("MetaShufflingMoE", 256, 512, 4, 1, 64), Config("BaselineMoE", 256, 128, 8, 4, 64))


def row_key(cfg: Config, precision: str, path: str) -> str:
    """The row's name in both scripts' results."""
    return f"{cfg.layer}|{precision}|{path}|{cfg.shape}|T{cfg.tokens}"


def input_sets(cfg: Config, n: int, device) -> list[tuple[torch.Tensor]]:
    """n inputs [1, T, D] bf16 ~ N(0, 1), the same values in every process on the same device kind."""
    g = torch.Generator(device=device)
    sets = []
    for i in range(n):
        g.manual_seed(1000 + i)
        sets.append((torch.randn(1, cfg.tokens, cfg.dim, generator=g, device=device, dtype=torch.bfloat16),))
    return sets


ROLE_SEEDS = {"router": 1, "routed.w_in": 2, "routed.w_swiglu": 3, "routed.w_out": 4,
              "shared.w_in": 5, "shared.w_swiglu": 6, "shared.w_out": 7}


def role_of(key: str) -> str:
    """Which weight an init-method key names, whatever its exact spelling."""
    k = key.lower()
    if "router" in k:
        return "router"
    part = "shared" if "shared" in k else "routed"
    for w in ("w_swiglu", "w_out", "w_in"):
        if w in k:
            return f"{part}.{w}"
    return "other"


def weight_values(cfg: Config, role: str, shape, device) -> torch.Tensor:
    """N(0, 1 / fan-in) in bf16, so activations stay O(1): the router and w_in / w_swiglu read D
    features, w_out reads H. Seeded by role: the same shape gives the same values anywhere."""
    fan_in = cfg.hidden if role.endswith("w_out") else cfg.dim
    g = torch.Generator(device=device)
    g.manual_seed(ROLE_SEEDS.get(role, 99))
    return torch.randn(tuple(shape), generator=g, device=device, dtype=torch.bfloat16).mul_(fan_in ** -0.5)


def quantize_rows(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """FP8 e4m3 rowwise (one float32 scale per row of the last dim), in plain torch."""
    amax = w.float().abs().amax(dim=-1, keepdim=True).clamp(min=1e-12)
    scale = amax / FP8_MAX
    q = (w.float() / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q, scale.squeeze(-1)


class RecordingInit(Mapping):
    """init_methods for build(): any key gives a callback that fills the tensor it is handed in
    place with weight_values(role of the key); the keys asked for are kept in `seen`.
    form "fill": the callback returns None; "pair": it also returns (fp8 weights, row scales)
    for expert weights; "scaled": it returns them as scaled_cls(weights, scales); "tuple_bf16" /
    "tuple_fp8": every callback returns a pair, (tensor, None) or, for tuple_fp8's expert weights,
    (fp8 weights, row scales)."""

    def __init__(self, cfg: Config, form: str = "fill", scaled_cls=None):
        self.cfg, self.form, self.scaled_cls = cfg, form, scaled_cls
        self.seen: list[str] = []

    def __getitem__(self, key):
        if not isinstance(key, str):
            raise KeyError(key)
        return lambda *args, **kwargs: self._fill(key, *args, *kwargs.values())

    def __contains__(self, key):
        return isinstance(key, str)

    def __iter__(self):
        return iter(["router_DE"] + [f"{p}_experts.{w}" for p in ("routed", "shared")
                                     for w in ("w_in", "w_swiglu", "w_out")])

    def __len__(self):
        return 7

    def _fill(self, key, *args):
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if not tensors:
            raise TypeError(f"init method for {key!r}: no tensor among its arguments {[type(a) for a in args]}")
        t = tensors[-1]
        role = role_of(key)
        self.seen.append(f"{key} {tuple(t.shape)} {t.dtype}")
        # Drawn on the GPU whenever there is one, wherever the tensor lives: the same values in
        # every process, whichever device a layer builds on.
        v = weight_values(self.cfg, role, t.shape, "cuda" if torch.cuda.is_available() else "cpu")
        with torch.no_grad():
            t.copy_(v)
        # "tuple*": every callback returns a pair; its plain tensors in bf16, the activations' dtype
        plain = (t.to(torch.bfloat16), None) if self.form.startswith("tuple") else None
        if self.form == "fill" or self.form == "tuple_bf16" or role in ("router", "other"):
            return plain
        q, s = quantize_rows(v.to(t.device))
        return (q, s) if self.form in ("pair", "tuple_fp8") else self.scaled_cls(q, s)


def fingerprint(out: torch.Tensor) -> list[float]:
    """The first FINGERPRINT_TOKENS output rows projected on a fixed random vector (float64):
    enough to tell whether two processes computed the same layer."""
    o = out.reshape(-1, out.shape[-1])[:FINGERPRINT_TOKENS].double().cpu()
    v = torch.randn(o.shape[-1], generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    return (o @ v).tolist()


def fingerprint_err(a: list[float], b: list[float]) -> float:
    ta, tb = torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64)
    if ta.shape != tb.shape:
        return float("nan")
    return ((ta - tb).norm() / tb.norm().clamp(min=1e-30)).item()


def cpu_time_ms(fn, arg_sets, reps: int = 10, calls: int = 4, **_) -> float:
    """Wall-clock median for the CPU (quick runs only)."""
    fn(*arg_sets[0])
    times = []
    for r in range(reps):
        t0 = time.perf_counter()
        for c in range(calls):
            fn(*arg_sets[(r * calls + c) % len(arg_sets)])
        times.append((time.perf_counter() - t0) * 1e3 / calls)
    return statistics.median(times)


DEVICE_CATS = ("kernel", "gpu_memset", "gpu_memcpy")


def kernel_sum_us(fn, iters: int = 5) -> tuple[float, list[tuple[str, float]]]:
    """Device time of one fn() as the sum of its kernels (and memsets / copies) in a torch.profiler
    trace: what the layer costs with no launch gaps or host work. Returns (us per call, the
    heaviest kernels [(name, us per call)])."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "trace.json"
        prof.export_chrome_trace(str(path))
        events = json.loads(path.read_text()).get("traceEvents", [])
    per_name: dict[str, float] = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in DEVICE_CATS:
            per_name[e.get("name", "?")] = per_name.get(e.get("name", "?"), 0.0) + float(e.get("dur", 0.0))
    if not per_name:  # a trace without those categories: the profiler's own device-side events
        for e in prof.events():
            if str(getattr(e, "device_type", "")).endswith("CUDA"):
                per_name[e.name] = per_name.get(e.name, 0.0) + float(e.time_range.elapsed_us())
    if not per_name:
        raise RuntimeError("the profiler recorded no device activity")
    top = sorted(per_name.items(), key=lambda kv: -kv[1])[:8]
    return sum(per_name.values()) / iters, [(n[:90], us / iters) for n, us in top]
