"""MoEArgs: the frozen configuration of the composed MoE layers."""

from dataclasses import dataclass
from functools import cached_property
from typing import Optional

PRECISIONS = ("bf16", "fp8_rowwise")


@dataclass(frozen=True)
class MoEArgs:
    """Geometry and parallelism of one MoE layer (no defaults: every field is a decision).

    precision: "bf16" or "fp8_rowwise", the storage `build` gives expert weights when no
    init method returns its own (quantized) tensor.
    mp_size: model-parallel ranks splitting the hidden dim of the shared expert (and of the
    routed experts unless mp_size_for_routed_experts says otherwise); each rank returns a partial
    sum the caller all-reduces over its model-parallel group.
    ep_size: ranks the routed experts are spread over (num_experts // ep_size each).
    mp_size_for_routed_experts: hidden-dim split of the routed experts (None: mp_size); must
    divide mp_size, the remaining mp_size // it ranks split the tokens instead.
    use_fast_accum: accepted for interface parity; the grouped FP8 op picks its accumulation.
    dedup_comm: MetaShufflingMoE's static path gathers the tokens over ep_mp_group, each
    model-parallel rank sending only its 1/mp_size share of the (identical) tokens; the other
    paths send every token.
    """

    precision: str
    dim: int
    hidden_dim: int
    num_experts: int
    top_k: int
    mp_size: int
    ep_size: int
    mp_size_for_routed_experts: Optional[int]
    use_fast_accum: bool
    dedup_comm: bool

    def __post_init__(self):
        if self.precision not in PRECISIONS:
            raise ValueError(f"MoEArgs: argument 'precision' must be one of {PRECISIONS}, got {self.precision!r}")
        for name in ("dim", "hidden_dim", "num_experts", "top_k", "mp_size", "ep_size"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"MoEArgs: argument '{name}' must be a positive int, got {v!r}")
        if self.num_experts % self.ep_size:
            raise ValueError(f"MoEArgs: argument 'ep_size' ({self.ep_size}) must divide num_experts "
                             f"({self.num_experts})")
        if self.top_k > min(8, self.num_experts):
            raise ValueError(f"MoEArgs: argument 'top_k' must be in [1, min(8, num_experts)], got {self.top_k}")
        r = self.routed_mp_size
        if r < 1 or self.mp_size % r:
            raise ValueError(f"MoEArgs: argument 'mp_size_for_routed_experts' ({r}) must be a positive divisor "
                             f"of mp_size ({self.mp_size})")
        for name, mp in (("mp_size", self.mp_size), ("mp_size_for_routed_experts", r)):
            for dim_name in ("dim", "hidden_dim"):
                if getattr(self, dim_name) % mp:
                    raise ValueError(f"MoEArgs: argument '{name}' ({mp}) must divide {dim_name} "
                                     f"({getattr(self, dim_name)})")

    @cached_property
    def num_local_experts(self) -> int:
        return self.num_experts // self.ep_size

    @property
    def routed_mp_size(self) -> int:
        r = self.mp_size_for_routed_experts
        return self.mp_size if r is None else r
