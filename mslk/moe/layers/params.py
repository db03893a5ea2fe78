"""Expert weight containers (`ScaledParameter`, `Experts`, `RoutedExperts`, `SharedExperts`) and
`init_params`, which fills one parameter from a named init method or Kaiming-uniform.

Layout (x @ W^T everywhere, the grouped GEMMs' [G, N, K] weights): w13 [G, 2H, D] stacks
w_in (rows :H) over w_swiglu (rows H:), w2 [G, D, H]; H is the local (model-parallel) hidden
size. FP8 rowwise storage keeps one float32 scale per output row ([G, 2H] and [G, D]).
"""

import math
from typing import Callable, Mapping, Optional

import torch
from torch import nn

from mslk.quantize.triton.fp8_quantize import quantize_fp8_row

INIT_KEYS = tuple(f"{p}.{w}" for p in ("routed_experts", "shared_experts") for w in ("w_in", "w_out", "w_swiglu")) \
    + ("router_DE",)


class ScaledParameter(nn.Parameter):
    """Non-trainable parameter with optional quantization scales (one per output row)."""

    def __new__(cls, data: torch.Tensor, scale: Optional[torch.Tensor] = None):
        p = super().__new__(cls, data, requires_grad=False)
        p._scale = scale if isinstance(scale, torch.Tensor) else None
        return p

    @property
    def weights(self) -> torch.Tensor:
        return self.data

    @property
    def scales(self) -> torch.Tensor:
        assert self._scale is not None, "ScaledParameter: no scales attached"
        return self._scale

    @property
    def is_scaled(self) -> bool:
        return self._scale is not None


def init_params(key: str, param: ScaledParameter, init_methods: Optional[Mapping[str, Callable]]) -> None:
    """Fill `param` in place. init_methods[key](tensor) may fill its float copy in place or return
    a tensor, or a (weights, scale) pair (e.g. FP8 rowwise), which replaces the stored data."""
    if key not in INIT_KEYS:
        raise ValueError(f"init_params: argument 'key' must be one of {INIT_KEYS}, got {key!r}")
    fn = (init_methods or {}).get(key)
    if fn is None:
        w = param.weights.view(-1, param.shape[-1])
        nn.init.kaiming_uniform_(w, a=math.sqrt(5))
        return
    out = fn(param.weights)
    if out is None:
        return
    w, s = out if isinstance(out, tuple) else (out, None)
    param.data = w.to(param.device)
    param._scale = None if s is None else s.to(param.device).float()


def _quantize(p: ScaledParameter) -> None:
    """BF16 -> FP8 rowwise in place (no-op for already scaled weights)."""
    if p.is_scaled:
        return
    q, s = quantize_fp8_row(p.weights)
    p.data, p._scale = q, s.float()


class Experts(nn.Module):
    """Base of the SwiGLU weight containers: `num` stacked experts of dim x hidden_dim."""

    prefix = ""

    def __init__(self, dim: int, hidden_dim: int, num: int = 1):
        super().__init__()
        for name, v in (("dim", dim), ("hidden_dim", hidden_dim)):
            if v < 1:
                raise ValueError(f"{type(self).__name__}: argument '{name}' must be positive, got {v}")
        self.dim, self.hidden_dim, self.num = dim, hidden_dim, num
        self._w13: Optional[ScaledParameter] = None
        self._w2: Optional[ScaledParameter] = None

    def build(self, init_methods: Optional[Mapping] = None, precision: str = "bf16",
              device: Optional[torch.device] = None, dtype: torch.dtype = torch.bfloat16) -> "Experts":
        G, D, H = self.num, self.dim, self.hidden_dim
        parts = {}
        for name, shape in (("w_in", (G, H, D)), ("w_swiglu", (G, H, D)), ("w_out", (G, D, H))):
            p = ScaledParameter(torch.empty(shape, device=device, dtype=dtype))
            init_params(f"{self.prefix}.{name}", p, init_methods)
            parts[name] = p
        if parts["w_in"].is_scaled != parts["w_swiglu"].is_scaled:
            raise ValueError(f"{type(self).__name__}.build: init methods for w_in and w_swiglu must both or neither "
                             "return scales")
        w13 = torch.cat([parts["w_in"].weights, parts["w_swiglu"].weights], dim=1)
        s13 = torch.cat([parts["w_in"].scales, parts["w_swiglu"].scales], dim=1) if parts["w_in"].is_scaled else None
        self._w13 = ScaledParameter(w13, s13)
        self._w2 = parts["w_out"]
        if precision == "fp8_rowwise":
            _quantize(self._w13)
            _quantize(self._w2)
        return self

    def _apply(self, fn, recurse=True):
        # Scales ride along with their weights (device moves), but keep float32 under casts.
        super()._apply(fn, recurse)
        for p in (self._w13, self._w2):
            if p is not None and p.is_scaled:
                p._scale = fn(p._scale).float()
        return self

    @property
    def w13(self) -> ScaledParameter:
        if self._w13 is None:
            raise RuntimeError(f"{type(self).__name__}: call build() before using the weights")
        return self._w13

    @property
    def w2(self) -> ScaledParameter:
        if self._w2 is None:
            raise RuntimeError(f"{type(self).__name__}: call build() before using the weights")
        return self._w2

    @property
    def is_fp8_rowwise(self) -> bool:
        return self.w13.dtype == torch.float8_e4m3fn


class RoutedExperts(Experts):
    """The num_local_experts routed experts of this rank, stacked."""

    prefix = "routed_experts"

    def __init__(self, num_local_experts: int, dim: int, hidden_dim: int):
        if num_local_experts < 1:
            raise ValueError(f"RoutedExperts: argument 'num_local_experts' must be positive, got {num_local_experts}")
        super().__init__(dim, hidden_dim, num_local_experts)


class SharedExperts(Experts):
    """The shared SwiGLU expert every token passes through."""

    prefix = "shared_experts"

    def __init__(self, dim: int, hidden_dim: int):
        super().__init__(dim, hidden_dim, 1)
