"""What both MoE layers share: parameters, routing, the shared expert and the dynamic-shape
routed path (index_shuffling -> gather -> [all-to-all] -> experts -> [all-to-all] -> scatter-add)."""

from typing import Mapping, Optional

import torch
from torch import nn

from mslk.moe import gather_scale_dense_tokens, gather_scale_quant_dense_tokens, scatter_add_dense_tokens
from mslk.moe.shuffling import combine_shuffling, split_shuffling

from . import comm
from .args import MoEArgs
from .compute import shared_swiglu, swiglu
from .params import RoutedExperts, ScaledParameter, SharedExperts, init_params


class MoEBase(nn.Module):
    def __init__(self, ep_group, ep_mp_group, moe_args: MoEArgs):
        super().__init__()
        if not isinstance(moe_args, MoEArgs):
            raise TypeError(f"{type(self).__name__}: argument 'moe_args' must be a MoEArgs, got {type(moe_args)}")
        self.args = moe_args
        self.ep_group, self.ep_mp_group = ep_group, ep_mp_group
        self.layout = comm.layout(moe_args, ep_group, ep_mp_group, type(self).__name__)
        a = moe_args
        self.shared_experts = SharedExperts(a.dim, a.hidden_dim // a.mp_size)
        self.routed_experts = RoutedExperts(a.num_local_experts, a.dim, a.hidden_dim // a.routed_mp_size)
        self.router_DE: Optional[ScaledParameter] = None

    # geometry
    @property
    def E(self) -> int:
        return self.args.num_experts

    @property
    def EG(self) -> int:
        return self.args.num_local_experts

    @property
    def K(self) -> int:
        return self.args.top_k

    @property
    def is_shared_fp8_rowwise(self) -> bool:
        return self.shared_experts.is_fp8_rowwise

    @property
    def is_routed_fp8_rowwise(self) -> bool:
        return self.routed_experts.is_fp8_rowwise

    def build(self, init_methods: Optional[Mapping] = None, device: Optional[torch.device] = None):
        """Allocate and initialize every parameter (on `device`; default CUDA when present)."""
        if device is None:
            device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else "cpu"
        p = self.args.precision
        router = ScaledParameter(torch.empty(self.E, self.args.dim, device=device, dtype=torch.bfloat16))
        init_params("router_DE", router, init_methods)
        self.router_DE = ScaledParameter(router.weights.t().contiguous())  # [D, E]
        self.shared_experts.build(init_methods, p, device)
        self.routed_experts.build(init_methods, p, device)
        return self

    def _check_input(self, x: torch.Tensor) -> torch.Tensor:
        if self.router_DE is None:
            raise RuntimeError(f"{type(self).__name__}: call build() before forward()")
        if x.dim() != 3 or x.shape[-1] != self.args.dim or x.dtype != torch.bfloat16:
            raise ValueError(f"{type(self).__name__}.forward: argument 'x' must be bf16 [B, T, {self.args.dim}], "
                             f"got {x.dtype} {tuple(x.shape)}")
        return x.reshape(-1, x.shape[-1])

    def scores(self, x: torch.Tensor) -> torch.Tensor:
        """Sigmoid router scores [N, E], float32."""
        w = self.router_DE.weights
        if x.is_cuda and w.dtype == torch.bfloat16:
            # Products of bf16 values are exact in float32: the float32 sums of x.float() @ w.float(),
            # without a float32 copy of x (an [N, D] read and write) and a float32 GEMM.
            return torch.sigmoid(torch.mm(x, w, out_dtype=torch.float32))
        return torch.sigmoid(torch.mm(x.float(), w.float()))

    def shared(self, x: torch.Tensor) -> torch.Tensor:
        return shared_swiglu(self.shared_experts, x)

    def _gather(self, x, t_idx, e_idx, scores, valid, quant):
        if quant:
            return gather_scale_quant_dense_tokens(x, t_idx, e_idx, scores, None, valid)
        return gather_scale_dense_tokens(x, t_idx, e_idx, scores, valid)

    # Communication hooks: run inline here; MetaShufflingMoE runs them on its own CUDA stream.
    def _launch_comm(self, fn):
        return fn()

    def _wait_comm(self, t: torch.Tensor) -> torch.Tensor:
        return t

    def routed_dynamic(self, x: torch.Tensor, scores: torch.Tensor, during=None, out=None):
        """Routed experts of x [N, D] (top_k picks each), exchanging tokens all-to-all when EP > 1.
        `during()` runs while the tokens travel; returns (routed [N, D], its result). With `out`
        ([N, D]) the routed rows are added into it, which is returned."""
        if self.args.ep_size == 1:
            extra = during() if during else None
            return self._routed_local(x, 0, scores, out), extra
        E, L = self.E, self.EG
        counts, e_idx, t_idx = torch.ops.mslk.index_shuffling(scores, top_k=self.K)
        out = torch.zeros_like(x) if out is None else out
        g = self.ep_group
        rows = gather_scale_dense_tokens(x, t_idx, e_idx, scores)
        send = counts[:E].view(self.args.ep_size, L)
        recv = torch.empty_like(send)
        torch.distributed.all_to_all_single(recv, send, group=g)
        in_splits, out_splits = torch.stack([send.sum(1), recv.sum(1)]).tolist()  # the dynamic path's host sync
        got = self._launch_comm(lambda: comm.all_to_all(rows, out_splits, in_splits, g))
        extra = during() if during else None
        grouped, m = combine_shuffling(self._wait_comm(got), recv)
        y = swiglu(self.routed_experts, grouped, m[:L])
        back = split_shuffling(y, recv)
        back = self._wait_comm(self._launch_comm(lambda: comm.all_to_all(back, in_splits, out_splits, g)))
        scatter_add_dense_tokens(out, back, t_idx)
        return out, extra

    def _routed_local(self, x: torch.Tensor, start: int = 0, scores: Optional[torch.Tensor] = None,
                      out: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Routed output of x [N, D] through this rank's experts [start, start + EG) only (picks of
        other experts dropped): fixed shapes, the valid row count stays on the device. With `out`
        the rows are added into it (no zeroed buffer and no separate add)."""
        scores = self.scores(x) if scores is None else scores
        counts, e_idx, t_idx = torch.ops.mslk.index_shuffling(scores, start, start + self.EG, top_k=self.K)
        valid = counts[-1:]
        # expert_indices are local: the gather reads the local experts' score columns.
        local_scores = scores[:, start:start + self.EG]
        rows = self._gather(x, t_idx, e_idx, local_scores, valid, self.is_routed_fp8_rowwise)
        y = swiglu(self.routed_experts, rows, counts[start:start + self.EG], valid)
        out = torch.zeros_like(x) if out is None else out
        scatter_add_dense_tokens(out, y, t_idx, valid)
        return out
