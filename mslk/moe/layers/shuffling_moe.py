"""MetaShufflingMoE: top-1 MoE on the shuffling primitives, overlapping the token exchange with
the shared expert (its own CUDA streams and events; plain sequential code on the CPU)."""

import contextlib

import torch

from mslk.moe import scatter_add_dense_tokens

from . import comm
from .args import MoEArgs
from .base import MoEBase
from .compute import swiglu


class MetaShufflingMoE(MoEBase):
    """forward(x [B, T, D], use_static_shape) -> [B, T, D], partial over model parallelism (the
    caller all-reduces it). use_static_shape=True: tokens all-gathered across EP, every rank
    routes all of them to its local experts, results reduce-scattered back: fixed shapes, no host
    sync. False: all-to-all of exactly the routed tokens (one host sync for the split sizes).
    With dedup_comm the static path gathers over ep_mp_group, each model-parallel rank sending
    only its 1/mp_size share of the (identical) tokens."""

    def __init__(self, ep_group, ep_mp_group, moe_args: MoEArgs):
        if moe_args.top_k != 1:
            raise ValueError(f"MetaShufflingMoE: argument 'moe_args.top_k' must be 1, got {moe_args.top_k}")
        if moe_args.routed_mp_size != moe_args.mp_size:
            raise ValueError("MetaShufflingMoE: argument 'moe_args.mp_size_for_routed_experts' must equal mp_size "
                             f"({moe_args.mp_size}) or be None, got {moe_args.mp_size_for_routed_experts}")
        super().__init__(ep_group, ep_mp_group, moe_args)
        self._cuda = torch.cuda.is_available()
        if self._cuda:
            self.comm_stream = torch.cuda.Stream()
            self.comm_done = torch.cuda.Event()
            self.shared_done = torch.cuda.Event()

    def _side(self):
        return torch.cuda.stream(self.comm_stream) if self._cuda and self._on_cuda else contextlib.nullcontext()

    @torch.no_grad()
    def forward(self, x: torch.Tensor, use_static_shape: bool = False) -> torch.Tensor:
        xf = self._check_input(x)
        self._on_cuda = xf.is_cuda
        a = self.args
        if a.ep_size == 1 and not (a.dedup_comm and a.mp_size > 1):
            out = self.shared(xf)
            return (out + self._routed_local(xf, use_static_shape)).view(x.shape)
        if not use_static_shape:
            out = self.shared(xf)
            return (out + self.routed_dynamic(xf, self.scores(xf))).view(x.shape)
        dedup = a.dedup_comm and a.mp_size > 1
        group = self.ep_mp_group if dedup else self.ep_group
        N = xf.shape[0]
        if dedup and N % a.mp_size:
            raise ValueError(f"MetaShufflingMoE.forward: with dedup_comm, mp_size ({a.mp_size}) must divide the "
                             f"token count of argument 'x' ({N})")
        part = xf[self.layout.mp_rank * N // a.mp_size:(self.layout.mp_rank + 1) * N // a.mp_size] if dedup else xf
        # The gather runs on the side stream while the shared expert runs on the main one.
        if self._on_cuda and self._cuda:
            self.comm_stream.wait_stream(torch.cuda.current_stream())
        with self._side():
            x_all = comm.all_gather(part, group)
            if self._on_cuda and self._cuda:
                self.comm_done.record()
        out = self.shared(xf)
        if self._on_cuda and self._cuda:
            torch.cuda.current_stream().wait_event(self.comm_done)
            x_all.record_stream(torch.cuda.current_stream())
        routed_all = self._routed_local(x_all, True, self.layout.ep_rank * self.EG)
        routed = comm.reduce_scatter(routed_all, group)
        if dedup:
            lo = self.layout.mp_rank * N // a.mp_size
            out[lo:lo + routed.shape[0]] += routed
            return out.view(x.shape)
        return (out + routed).view(x.shape)

    def _routed_local(self, x: torch.Tensor, static: bool, start: int = 0) -> torch.Tensor:
        """Top-1 routed output of x [N, D] through this rank's experts [start, start + EG) only."""
        scores = self.scores(x)
        counts, e_idx, t_idx = torch.ops.mslk.index_shuffling(scores, start, start + self.EG, top_k=1)
        valid = counts[-1:]
        # expert_indices are local: the gather reads the local experts' score columns.
        local_scores = scores[:, start:start + self.EG]
        rows = self._gather(x, t_idx, e_idx, local_scores, valid, self.is_routed_fp8_rowwise)
        y = swiglu(self.routed_experts, rows, counts[start:start + self.EG], valid)
        out = torch.zeros_like(x)
        scatter_add_dense_tokens(out, y, t_idx, valid)
        return out
