"""BaselineMoE: shared SwiGLU expert plus top-k sigmoid-routed experts, all-to-all across EP."""

import torch

from .base import MoEBase


class BaselineMoE(MoEBase):
    """forward(x [B, T, D], use_static_shape) -> [B, T, D] (use_static_shape is accepted, unused).

    With model parallelism the result is this rank's partial sum: the caller all-reduces it over
    the model-parallel group. When mp_size_for_routed_experts < mp_size, the ranks sharing a routed
    hidden slice split the tokens; each adds the routed output of its token chunk only."""

    @torch.no_grad()
    def forward(self, x: torch.Tensor, use_static_shape: bool = False) -> torch.Tensor:
        xf = self._check_input(x)
        out = self.shared(xf)
        lay = self.layout
        N = xf.shape[0]
        lo, hi = lay.token_chunk * N // lay.token_chunks, (lay.token_chunk + 1) * N // lay.token_chunks
        xc = xf[lo:hi]
        self.routed_dynamic(xc, self.scores(xc), out=out[lo:hi])  # adds the routed rows into out
        return out.view(x.shape)
