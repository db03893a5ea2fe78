"""MetaShufflingMoE: top-1 MoE on the shuffling primitives, overlapping the token exchange with
the shared expert (its own CUDA stream and event; plain sequential code on the CPU)."""

import torch

from . import comm
from .args import MoEArgs
from .base import MoEBase


class MetaShufflingMoE(MoEBase):
    """forward(x [B, T, D], use_static_shape) -> [B, T, D], partial over model parallelism (the
    caller all-reduces it). use_static_shape=True: tokens all-gathered across EP, every rank
    routes all of them to its local experts, results reduce-scattered back: fixed shapes, no host
    sync. False: all-to-all of exactly the routed tokens (one host sync for the split sizes).
    With dedup_comm the static path gathers over ep_mp_group, each model-parallel rank sending
    only its 1/mp_size share of the (identical) tokens. The shared expert runs while tokens travel."""

    def __init__(self, ep_group, ep_mp_group, moe_args: MoEArgs):
        if moe_args.top_k != 1:
            raise ValueError(f"MetaShufflingMoE: argument 'moe_args.top_k' must be 1, got {moe_args.top_k}")
        if moe_args.routed_mp_size != moe_args.mp_size:
            raise ValueError("MetaShufflingMoE: argument 'moe_args.mp_size_for_routed_experts' must equal mp_size "
                             f"({moe_args.mp_size}) or be None, got {moe_args.mp_size_for_routed_experts}")
        super().__init__(ep_group, ep_mp_group, moe_args)
        self.comm_stream = torch.cuda.Stream() if torch.cuda.is_available() else None
        self.comm_done = torch.cuda.Event() if torch.cuda.is_available() else None
        self._on_cuda = False

    def _launch_comm(self, fn):
        if not self._on_cuda:
            return fn()
        # Inputs were written on the main stream; the collective runs on the side stream.
        self.comm_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.comm_stream):
            t = fn()
            self.comm_done.record()
        return t

    def _wait_comm(self, t: torch.Tensor) -> torch.Tensor:
        if self._on_cuda:
            torch.cuda.current_stream().wait_event(self.comm_done)
            t.record_stream(torch.cuda.current_stream())  # allocated on the side stream
        return t

    @torch.no_grad()
    def forward(self, x: torch.Tensor, use_static_shape: bool = False) -> torch.Tensor:
        xf = self._check_input(x)
        self._on_cuda = xf.is_cuda and self.comm_stream is not None
        a = self.args
        dedup = a.dedup_comm and a.mp_size > 1
        if not use_static_shape or (a.ep_size == 1 and not dedup):
            if a.ep_size == 1:
                return self._routed_local(xf, out=self.shared(xf)).view(x.shape)
            routed, out = self.routed_dynamic(xf, self.scores(xf), during=lambda: self.shared(xf))
            return (out + routed).view(x.shape)
        group = self.ep_mp_group if dedup else self.ep_group
        N, lo, hi = xf.shape[0], 0, xf.shape[0]
        if dedup:
            if N % a.mp_size:
                raise ValueError(f"MetaShufflingMoE.forward: with dedup_comm, mp_size ({a.mp_size}) must divide the "
                                 f"token count of argument 'x' ({N})")
            lo, hi = self.layout.mp_rank * N // a.mp_size, (self.layout.mp_rank + 1) * N // a.mp_size
        x_all = self._launch_comm(lambda: comm.all_gather(xf[lo:hi], group))
        out = self.shared(xf)
        routed_all = self._routed_local(self._wait_comm(x_all), self.layout.ep_rank * self.EG)
        out[lo:hi] += comm.reduce_scatter(routed_all, group)
        return out.view(x.shape)
